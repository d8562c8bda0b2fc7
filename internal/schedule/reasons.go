package schedule

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
)

// Reason names why a candidate was rejected.
type Reason string

// Rejection reasons. Those marked "now" may clear as compositions change;
// the others mean the request can never fit that candidate.
const (
	HostInUse      Reason = "host-in-use"        // now
	HostFull       Reason = "host-full"          // now: too few free cores or local memory for a share
	HostCores      Reason = "host-cores"         // too few cores
	HostMemory     Reason = "host-memory"        // too little local memory
	OutsideZone    Reason = "outside-zone"       // not in the requested zone
	Unreachable    Reason = "unreachable"        // no path from the host (fabric, drawer mode)
	WrongKind      Reason = "wrong-kind"         // a specific block of a kind that cannot be added
	Mismatch       Reason = "attribute-mismatch" // model or attributes differ
	TooSmall       Reason = "capacity"           // capacity below the need
	TooFar         Reason = "latency"            // round trip above the bound
	InUse          Reason = "in-use"             // now: held by as many compositions as allowed
	PortBusy       Reason = "port-busy"          // now: the optical ports are circuited elsewhere
	DrawerHosts    Reason = "drawer-host-limit"  // now: the drawer's mode allows no more hosts
	AffinityFailed Reason = "affinity"           // no single drawer/switch holds enough
	Duplicate      Reason = "duplicate"          // a block listed twice
	Insufficient   Reason = "insufficient"       // fewer such blocks exist than asked for
)

// Transient reports whether r may clear as other compositions change.
func (r Reason) Transient() bool {
	return r == HostInUse || r == HostFull || r == InUse || r == PortBusy || r == DrawerHosts
}

// Rejection records why one candidate host (and, for a need or a specific
// block, which one) was rejected.
type Rejection struct {
	Host   string `json:"host"`
	Need   int    `json:"need"`            // index into Request.Needs, or -1
	Block  string `json:"block,omitempty"` // a specific block
	Reason Reason `json:"reason"`
	Detail string `json:"detail"`
	// args are formatted into Detail only when the request fails, so a
	// busy rack's many rejected hosts cost no string building.
	format string
	args   []any
}

// Unsatisfiable is returned when no host can take the request. Never is
// true when the request cannot fit even on an empty rack.
type Unsatisfiable struct {
	Rejections []Rejection
	Never      bool
}

func (e *Unsatisfiable) Error() string {
	if len(e.Rejections) == 0 {
		return "no host can take the request"
	}
	counts := map[Reason]int{}
	for _, r := range e.Rejections {
		counts[r.Reason]++
	}
	parts := []string{}
	for _, r := range slices.Sorted(maps.Keys(counts)) {
		parts = append(parts, fmt.Sprintf("%s ×%d", r, counts[r]))
	}
	first := e.Rejections[0]
	return fmt.Sprintf("no host can take the request (%s); e.g. %s: %s", strings.Join(parts, ", "), first.Host, first.Detail)
}

// Request errors: the request itself is wrong, whatever the state.
var (
	ErrUnknownHost  = errors.New("unknown host")
	ErrUnknownBlock = errors.New("unknown resource block")
	ErrUnknownZone  = errors.New("unknown zone")
	ErrBadRequest   = errors.New("invalid request")
)

func unsatisfiable(rejections []Rejection, never bool) error {
	for i, r := range rejections {
		if r.format != "" {
			rejections[i].Detail = fmt.Sprintf(r.format, r.args...)
			rejections[i].format, rejections[i].args = "", nil
		}
	}
	return &Unsatisfiable{Rejections: rejections, Never: never}
}
