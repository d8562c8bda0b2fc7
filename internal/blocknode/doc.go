// Package blocknode is the data plane of pooled drives (P1): the storage
// server `rackpool blocknode` runs, which serves the drives the SAS switch
// maps to it as NBD exports, and the capability tokens it checks on its
// own. The control plane (internal/drive) signs a token for a drive at its
// current ownership epoch; a client opens the export named
// "<drive>@<token>"; the blocknode verifies the MAC and expiry locally and
// serves the drive only while the control plane's last heartbeat answer
// gave it that drive at that epoch and its node lease has not lapsed. A
// token with write rights also names the generation of the drive's write
// reservation (one writer per drive); the node refuses the writes of a
// generation another writer's has superseded (reserve.go).
package blocknode
