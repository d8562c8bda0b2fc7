package hoststep

import "errors"

// Errors a step fails with. Each is wrapped with the device and block it
// concerns and a short account of what was seen, so errors.Is works and
// the text says what to fix.
var (
	// ErrBusy: a detach was refused because the host still uses the
	// device: a drive or namespace mounted, used as swap, held by
	// device-mapper or md, or open by a process; a network interface up;
	// a memory block the kernel would not offline. A refusal found
	// before any change changes nothing; a memory block that refuses
	// while offlining puts the blocks this step offlined back online.
	ErrBusy = errors.New("device busy on the host")
	// ErrNotVisible: the device did not appear (attach) or did not go
	// away (detach) before the context ended.
	ErrNotVisible = errors.New("device not visible on the host")
	// ErrUnhealthy: the device is visible but fails a health check (PCIe
	// link down, fatal AER errors, SCSI device not running or of size
	// zero, memory that would not online).
	ErrUnhealthy = errors.New("device unhealthy on the host")
	// ErrUnidentified: a detach cannot tell which OS device is the block:
	// a SAS drive without a serial that this Host did not attach itself.
	// Nothing is changed.
	ErrUnidentified = errors.New("cannot tell which device on the host is the block")
	// ErrUnsupported: a device kind with no host step (compute, or a kind
	// this package does not know).
	ErrUnsupported = errors.New("no host step for this kind")
)
