package schedule

import (
	"fmt"

	"rackpool/internal/inventory"
)

// DefaultMaxLatencyNS is the round-trip bound a need gets when it names
// none, per kind, after P0 Table 1: memory is composable within a rack
// (DRAM is 75 ns, so the fabric may add hundreds of ns, as MONet's measured
// 387-760 ns remote memory); GPU, FPGA, NVMe, SSD and NIC tolerate rack or
// PoD fabrics (an SSD's ~100 µs hides ~10 µs); HDDs tolerate the datacenter.
var DefaultMaxLatencyNS = map[inventory.Kind]float64{
	inventory.Memory: 1_000,
	inventory.GPU:    10_000,
	inventory.FPGA:   10_000,
	inventory.NVMe:   10_000,
	inventory.SSD:    10_000,
	inventory.NIC:    10_000,
	inventory.HDD:    100_000,
}

// Affinity asks for blocks to be close to each other.
type Affinity string

// Affinities. On each fabric, the blocks a request gets from that fabric
// share one drawer (same-drawer; switch when the fabric has no drawers) or
// one switch (same-switch).
const (
	NoAffinity  Affinity = ""
	SameDrawer  Affinity = "same-drawer"
	SameSwitch  Affinity = "same-switch"
	anyAffinity          = "none"
)

// Need asks for blocks of one kind.
type Need struct {
	Kind  inventory.Kind
	Count int // blocks wanted; for memory with CapacityBytes, derived
	// CapacityBytes is, for memory, the total wanted (rounded up to whole
	// blocks); for other kinds, the minimum capacity of each block.
	CapacityBytes int64
	Model         string
	Attrs         map[string]string
	// MaxLatencyNS bounds the round trip; 0 means DefaultMaxLatencyNS,
	// negative means unbounded.
	MaxLatencyNS float64
	// Exact forbids overprovisioning (Redfish AllowOverprovisioning=false):
	// with CapacityBytes set, each block must have exactly that capacity,
	// or, for memory, the blocks must add up to exactly that total.
	Exact bool
}

// Request is what a composition asks for.
type Request struct {
	Host     string   // optional: the host to compose on
	Blocks   []string // specific device blocks
	Needs    []Need   // constrained needs
	Affinity Affinity
	Zone     string // optional: confine placement to a topology zone
	// MinCores and MinMemoryGiB constrain the host chosen.
	MinCores     int
	MinMemoryGiB int
	// Share, when not zero, takes that part of a host instead of all of it
	// (see Share); the plan then holds no compute block.
	Share Share
	// Expand is set when adding blocks to an existing composition on Host:
	// the host is already held by it.
	Expand bool
	// Held lists blocks the composition already holds (Expand): they are
	// never chosen again, and affinity keeps new blocks with them.
	Held []string
	// Exclude lists blocks that must not be chosen (e.g. blocks the same
	// update removes).
	Exclude []string
}

// Assignment is one block of a plan and how the host reaches it.
type Assignment struct {
	Block *inventory.Block
	Port  *inventory.HostPort // nil for the compute block
	RTTNS float64
	Hops  int
}

// Plan is the scheduler's answer.
type Plan struct {
	Host        *inventory.Host
	Share       Share        // the part of the host taken; zero: all of it
	Assignments []Assignment // the compute block first (unless Expand)
	TotalRTTNS  float64
	TotalHops   int
	Groups      int // distinct drawers, switches and memory nodes touched
}

func (s *Scheduler) validate(req Request) error {
	if req.Host != "" && s.top.Host(req.Host) == nil {
		return fmt.Errorf("%w %q", ErrUnknownHost, req.Host)
	}
	if req.Zone != "" && s.top.Zone(req.Zone) == nil {
		return fmt.Errorf("%w %q", ErrUnknownZone, req.Zone)
	}
	if req.Expand && req.Host == "" {
		return fmt.Errorf("%w: expanding needs the host", ErrBadRequest)
	}
	switch req.Affinity {
	case NoAffinity, SameDrawer, SameSwitch, anyAffinity:
	default:
		return fmt.Errorf("%w: unknown affinity %q (valid: same-drawer, same-switch)", ErrBadRequest, req.Affinity)
	}
	for _, id := range req.Blocks {
		if s.top.Block(id) == nil {
			return fmt.Errorf("%w %q", ErrUnknownBlock, id)
		}
	}
	if len(req.Blocks)+len(req.Needs) == 0 && req.Expand {
		return fmt.Errorf("%w: nothing to add", ErrBadRequest)
	}
	for i, n := range req.Needs {
		valid := false
		for _, k := range inventory.DeviceKinds {
			valid = valid || k == n.Kind
		}
		if !valid {
			return fmt.Errorf("%w: need %d: unknown kind %q (valid: gpu, fpga, nvme, ssd, hdd, nic, memory)", ErrBadRequest, i, n.Kind)
		}
		if n.Count < 0 || n.Count > 100000 || n.CapacityBytes < 0 {
			return fmt.Errorf("%w: need %d: count and capacity must not be negative", ErrBadRequest, i)
		}
		if n.Count == 0 && !(n.Kind == inventory.Memory && n.CapacityBytes > 0) {
			return fmt.Errorf("%w: need %d: count must be at least 1", ErrBadRequest, i)
		}
	}
	if req.MinCores < 0 || req.MinMemoryGiB < 0 {
		return fmt.Errorf("%w: minimum cores and memory must not be negative", ErrBadRequest)
	}
	if !req.Share.IsZero() && (req.Share.Cores < 1 || req.Share.MemoryGiB < 0) {
		return fmt.Errorf("%w: a share of a host needs at least 1 core and no negative memory", ErrBadRequest)
	}
	if !req.Share.IsZero() && req.Expand {
		return fmt.Errorf("%w: a share of a host cannot be expanded", ErrBadRequest)
	}
	return nil
}
