package rf

import (
	"errors"

	"rackpool/internal/fabric"
)

// The Rackpool registry: one MessageId per fabric error, the words in
// which a Redfish fabric manager (internal/fabric/fmserver) refuses a
// change and a client of one (internal/fabric/rfdriver) reads the refusal
// back into the fabric error it stands for.

// RackpoolRegistry is the prefix of the Rackpool registry's MessageIds.
const RackpoolRegistry = "Rackpool.1.0."

// The Rackpool registry's MessageIds, one per fabric error.
const (
	MsgUnknown     = RackpoolRegistry + "UnknownElement"  // fabric.ErrUnknown
	MsgUnreachable = RackpoolRegistry + "Unreachable"     // fabric.ErrUnreachable
	MsgDrawerHosts = RackpoolRegistry + "DrawerHostLimit" // fabric.ErrDrawerHosts
	MsgPortBusy    = RackpoolRegistry + "PortBusy"        // fabric.ErrPortBusy
	MsgInUse       = RackpoolRegistry + "BlockInUse"      // fabric.ErrInUse
	MsgFailed      = RackpoolRegistry + "ElementFailed"   // fabric.ErrFailed
	MsgInjected    = RackpoolRegistry + "InjectedFault"   // fabric.ErrInjected
	MsgFenced      = RackpoolRegistry + "StaleEpoch"      // fabric.ErrFenced
)

// FabricErrors maps each Rackpool registry MessageId to the fabric error
// it stands for: the registry's one table.
var FabricErrors = map[string]error{
	MsgUnknown:     fabric.ErrUnknown,
	MsgUnreachable: fabric.ErrUnreachable,
	MsgDrawerHosts: fabric.ErrDrawerHosts,
	MsgPortBusy:    fabric.ErrPortBusy,
	MsgInUse:       fabric.ErrInUse,
	MsgFailed:      fabric.ErrFailed,
	MsgInjected:    fabric.ErrInjected,
	MsgFenced:      fabric.ErrFenced,
}

// fabricOrder is the order FabricMessageID tests the errors in: the first
// that err wraps wins.
var fabricOrder = []string{MsgFenced, MsgInjected, MsgFailed, MsgUnreachable, MsgDrawerHosts, MsgPortBusy, MsgInUse, MsgUnknown}

// FabricMessageID returns the Rackpool registry MessageId of a fabric
// error, or "" when err wraps none of them.
func FabricMessageID(err error) string {
	for _, id := range fabricOrder {
		if errors.Is(err, FabricErrors[id]) {
			return id
		}
	}
	return ""
}
