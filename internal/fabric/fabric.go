// Package fabric defines how the control plane drives a fabric: the small
// Driver interface every fabric implementation satisfies, optional
// capability interfaces found by type assertion, and the errors drivers
// return. Implementations live in subpackages: emulated/ (hardware models
// for the five fabric kinds) and faulty/ (a fault-injecting decorator);
// fabrictest/ is the conformance suite every driver passes.
package fabric

import (
	"context"
	"errors"
	"time"
)

// Attachment connects one resource block of a device to one host port. A
// memory node has several blocks; every other device has one block whose ID
// is the device ID.
type Attachment struct {
	Block    string // resource block ID
	Device   string // device ID
	Host     string // host ID
	HostPort string // the host's port ID into this fabric
}

// Result reports what an Attach or Detach did.
type Result struct {
	// Took is the modelled reconfiguration time (hot-plug, remap + drive
	// online, circuit set-up). Zero when nothing had to change.
	Took time.Duration
	// Changed is false when the call found the fabric already in the asked
	// state (idempotent repeat).
	Changed bool
}

// Driver drives one fabric.
type Driver interface {
	// Discover returns the fabric's current attachments and device health.
	Discover(ctx context.Context) (State, error)
	// Attach connects a.Block to a.HostPort. It is idempotent: attaching a
	// pair that is already attached succeeds with Changed false and changes
	// nothing. It fails without changing anything when the physics forbid
	// it (ErrUnreachable, ErrPortBusy, ErrDrawerHosts, ErrInUse) or the
	// device, port or host has failed (ErrFailed).
	Attach(ctx context.Context, a Attachment) (Result, error)
	// Detach disconnects a.Block from a.HostPort. It is idempotent:
	// detaching a pair that is not attached succeeds with Changed false.
	// Detach never fails because a device has failed: removing a dead device
	// must always be possible.
	Detach(ctx context.Context, a Attachment) (Result, error)
}

// State is a fabric's view of itself.
type State struct {
	Attachments []Attachment
	Health      map[string]Health // by device ID, host ID or "host/port"
}

// Health is the Redfish health of a fabric element.
type Health string

// Health values.
const (
	OK       Health = "OK"
	Warning  Health = "Warning"
	Critical Health = "Critical"
)

// StatsReporter is implemented by drivers that report telemetry.
type StatsReporter interface {
	Stats(ctx context.Context) ([]DeviceStats, error)
}

// DeviceStats is one device's telemetry.
type DeviceStats struct {
	Device             string
	TemperatureC       float64
	LinkWidth          int    // negotiated lanes (0 when down)
	LinkSpeed          string // e.g. 16GT/s
	CorrectableErrors  uint64
	UncorrectableErrs  uint64
	UtilisationPercent float64
	Health             Health
}

// FaultKind names an injectable fault.
type FaultKind string

// Fault kinds.
const (
	// AttachFails makes the next Count attaches of Target (a device ID, or
	// "" for any device) fail with ErrInjected.
	AttachFails FaultKind = "attach-fails"
	// DeviceFails marks device Target failed until cleared.
	DeviceFails FaultKind = "device-fails"
	// PortFails marks host port Target ("host/port") failed until cleared.
	PortFails FaultKind = "port-fails"
	// HostFails marks every port of host Target failed until cleared.
	HostFails FaultKind = "host-fails"
	// ReleaseStalls makes host Target (a host ID, "host/port", or "" for
	// every host) never acknowledge a release until cleared: an
	// uncooperative host. Only fabrics whose detach needs the host's
	// acknowledgement (cxl-memory) accept it; Detach still succeeds, after
	// the fabric's forced-release timeout.
	ReleaseStalls FaultKind = "release-stalls"
)

// Fault is an injected failure.
type Fault struct {
	Kind   FaultKind
	Target string
	Count  int
}

// FaultInjector is implemented by drivers that accept injected faults.
type FaultInjector interface {
	InjectFault(f Fault) error
	ClearFaults()
}

// LatencyReporter is implemented by drivers that report the path an
// attachment runs over, as the host would measure it after the attach.
type LatencyReporter interface {
	// Latency reports the attachment's hops and round trip. It fails with
	// ErrUnknown when the pair is not attached.
	Latency(ctx context.Context, a Attachment) (Latency, error)
}

// Latency is the path of one attachment.
type Latency struct {
	Hops  int     // switches traversed one way
	RTTNS float64 // round trip in nanoseconds
}

// Errors drivers return. Wrap them with context; callers test with
// errors.Is.
var (
	// ErrUnknown: the block, device, host or port is not part of this fabric.
	ErrUnknown = errors.New("not part of this fabric")
	// ErrUnreachable: the host port cannot reach the device (no path, or a
	// drawer mode that does not connect this host port to the slot).
	ErrUnreachable = errors.New("host port cannot reach device")
	// ErrDrawerHosts: attaching would give a drawer more hosts than its
	// mode allows.
	ErrDrawerHosts = errors.New("drawer mode host limit reached")
	// ErrPortBusy: a port needed for the attachment carries a circuit or
	// mapping to something else.
	ErrPortBusy = errors.New("port busy")
	// ErrInUse: the block is attached to as many hosts as it may be.
	ErrInUse = errors.New("block in use")
	// ErrFailed: the device, port or host has failed.
	ErrFailed = errors.New("element failed")
	// ErrInjected: an injected fault.
	ErrInjected = errors.New("injected fault")
)

// Restorer is implemented by drivers that can take back a known set of
// attachments at start-up without reconfiguring anything: the hardware kept
// them while the control plane was down. The control plane calls Restore
// with every attachment its store says exists, before serving requests; a
// driver without it gets Attach calls instead (idempotent, so equivalent).
type Restorer interface {
	Restore(ctx context.Context, as []Attachment) error
}
