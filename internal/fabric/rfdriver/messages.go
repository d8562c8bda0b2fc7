package rfdriver

import "rackpool/internal/fabric/fmserver"

// messageError is the fabric error a MessageId of the Rackpool registry
// states (fmserver.Errors, the registry's one table), or nil.
func messageError(id string) error { return fmserver.Errors[id] }
