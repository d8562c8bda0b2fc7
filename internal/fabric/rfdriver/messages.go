package rfdriver

import (
	"strings"

	"rackpool/internal/fabric"
)

// messageErrors maps the last segment of a Rackpool registry MessageId to
// the fabric error it states. TODO: take it from fmserver once it exports
// its table.
var messageErrors = map[string]error{
	"Unknown":     fabric.ErrUnknown,
	"Unreachable": fabric.ErrUnreachable,
	"DrawerHosts": fabric.ErrDrawerHosts,
	"PortBusy":    fabric.ErrPortBusy,
	"InUse":       fabric.ErrInUse,
	"Failed":      fabric.ErrFailed,
	"Injected":    fabric.ErrInjected,
}

// messageError is the fabric error a MessageId states, or nil.
func messageError(id string) error {
	if !strings.HasPrefix(id, "Rackpool.") {
		return nil
	}
	return messageErrors[id[strings.LastIndex(id, ".")+1:]]
}
