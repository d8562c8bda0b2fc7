package rfdriver

import "rackpool/internal/fabric"

// messageErrors maps the Rackpool registry's MessageIds to fabric errors.
// TODO: use fmserver.Errors (the registry's one table) once that package
// builds; these are its IDs.
var messageErrors = map[string]error{
	"Rackpool.1.0.UnknownElement":  fabric.ErrUnknown,
	"Rackpool.1.0.Unreachable":     fabric.ErrUnreachable,
	"Rackpool.1.0.DrawerHostLimit": fabric.ErrDrawerHosts,
	"Rackpool.1.0.PortBusy":        fabric.ErrPortBusy,
	"Rackpool.1.0.BlockInUse":      fabric.ErrInUse,
	"Rackpool.1.0.ElementFailed":   fabric.ErrFailed,
	"Rackpool.1.0.InjectedFault":   fabric.ErrInjected,
}

// messageError is the fabric error a MessageId of the Rackpool registry
// states, or nil.
func messageError(id string) error { return messageErrors[id] }
