package schedule

import (
	"fmt"
	"strings"
)

// Policy is how the scheduler chooses among the hosts that can take a
// request. Whatever the policy, a host is only chosen if every check of
// the pipeline passes on it; the policy decides the order hosts are tried
// in and which feasible host wins.
type Policy string

// The policies, named exactly:
//   - Locality ("rackpool", the default): rank feasible hosts by total
//     round trip, hops and fragmentation (see the package comment);
//   - FirstFit: the lowest-index host that fits;
//   - NextFit: the first host that fits, searching from the host the last
//     placement used and wrapping around (classic next-fit bin packing;
//     what CloudSim Plus calls "FirstFit");
//   - BestFit / WorstFit: the host with the fewest / most free cores that
//     fits, lowest index on ties.
const (
	Locality Policy = "rackpool"
	FirstFit Policy = "first-fit"
	NextFit  Policy = "next-fit"
	BestFit  Policy = "best-fit"
	WorstFit Policy = "worst-fit"
)

// Policies lists the valid policies.
var Policies = []Policy{FirstFit, NextFit, BestFit, WorstFit, Locality}

// ParsePolicy returns the policy named s ("" is Locality).
func ParsePolicy(s string) (Policy, error) {
	if s == "" {
		return Locality, nil
	}
	for _, p := range Policies {
		if string(p) == s {
			return p, nil
		}
	}
	names := make([]string, len(Policies))
	for i, p := range Policies {
		names[i] = string(p)
	}
	return "", fmt.Errorf("unknown policy %q (valid: %s)", s, strings.Join(names, ", "))
}

// Share is part of a host that a composition takes while other
// compositions take the rest: a virtual machine on a traditional server,
// or a slice of a CPU card whose memory comes from a pool. A request with
// a Share never takes the host whole, and a host held whole takes no
// shares.
type Share struct {
	Cores     int
	MemoryGiB int
}

// IsZero reports whether s asks for nothing (the request takes the host
// whole).
func (s Share) IsZero() bool { return s == Share{} }
