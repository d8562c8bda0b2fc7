package drive

// Kinds are the store object kinds of the drive records: what a leader
// reloads when another replica changed one (a deposed leader that had not
// yet noticed).
var Kinds = []string{kindNode, kindDrive, kindGrant, kindWriter}
