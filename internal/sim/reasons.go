package sim

import "rackpool/internal/schedule"

// Reasons a rejected request is counted under besides the scheduler's own
// (schedule.Reason: host-full, in-use, latency, port-busy, ...).
const (
	// ReasonFragmented: no host has the cores (and local memory) a share
	// asks for, though the pool as a whole has that much free; a host
	// would take it once enough of its own shares leave.
	ReasonFragmented = "fragmentation"
	// ReasonNotOffered: the architecture has none of what was asked
	// (GPUs or drives of traditional servers).
	ReasonNotOffered = "not-offered"
	// ReasonInvalid: the scheduler refused the request itself.
	ReasonInvalid = "invalid"
	// ReasonInconsistent: the scheduler found no host, but its explanation
	// found one; a bug in package schedule, never expected.
	ReasonInconsistent = "inconsistent"
)

// ReasonMeanings says in a few words what each rejection reason the
// simulator reports means, for the report.
var ReasonMeanings = map[string]string{
	string(schedule.HostFull):       "no host has the cores (or local memory) free, nor has the whole pool",
	ReasonFragmented:                "the pool has the cores (and local memory) free in total, but no one host has them",
	string(schedule.HostCores):      "no host has that many cores, even empty",
	string(schedule.HostMemory):     "no host has that much local memory, even empty",
	string(schedule.HostInUse):      "every host that could take it is held whole",
	string(schedule.OutsideZone):    "no host in the requested zone",
	string(schedule.InUse):          "hosts have room, but the blocks within their reach and bound are all held",
	string(schedule.PortBusy):       "hosts have room, but their optical ports are circuited to other memory nodes",
	string(schedule.DrawerHosts):    "hosts have room, but the drawers' modes allow no more hosts",
	string(schedule.TooFar):         "hosts have room, but no free block is within the round-trip bound",
	string(schedule.TooSmall):       "hosts have room, but no block is large enough",
	string(schedule.Mismatch):       "hosts have room, but no block has the model or attributes asked for",
	string(schedule.Unreachable):    "hosts have room, but cannot reach enough such blocks",
	string(schedule.AffinityFailed): "hosts have room, but no single drawer or switch holds enough",
	string(schedule.Insufficient):   "hosts have room, but fewer such blocks exist than asked for",
	ReasonNotOffered:                "the architecture has none of what was asked (GPUs or drives of traditional servers)",
	ReasonInvalid:                   "the scheduler refused the request itself",
	ReasonInconsistent:              "the scheduler found no host but its explanation found one (a bug)",
}

// why names the reason the scheduler refused req, a request no host can
// take now, for the whole decision rather than per host (most hosts of a
// busy pool are simply full, which says nothing about why the hosts that
// had room refused). It asks the scheduler, never guesses:
//
//   - some hosts have room for the share (they pass the host checks): the
//     reason most of them failed on, from Scheduler.Reasons on each (up to
//     maxRoomExplained of them): the memory within reach and bound all
//     held, beyond the bound, no free optical port, ...;
//   - none has room now, but one would on an empty pool: host-full when
//     the pool holds fewer free cores (or local memory) in total than the
//     share asks, else fragmentation;
//   - none would even on an empty pool: the host checks' most common
//     reason there (host-cores, host-memory, ...).
//
// The common case costs two searches of the fit index; hosts are walked
// only when some have room.
func (e *engine) why(req schedule.Request) string {
	probe := req
	probe.Needs, probe.Blocks, probe.Held, probe.Exclude, probe.Affinity = nil, nil, nil, nil, ""
	if p, err := e.sched.Place(e.st, probe); err != nil {
		return ReasonInvalid
	} else if p != nil {
		return e.roomReason(req)
	}
	if e.empty == nil {
		e.empty = schedule.NewState(e.top)
	}
	if p, _ := e.sched.Place(e.empty, probe); p == nil {
		return e.neverReason(probe)
	}
	free := e.capacity["cores"] - e.used["cores"]
	fits := free >= float64(req.Share.Cores)
	if req.Share.MemoryGiB > 0 {
		// Shares take local memory on traditional servers only, where
		// memory_gb is the servers' memory.
		fits = fits && e.capacity["memory_gb"]-e.used["memory_gb"] >= float64(req.Share.MemoryGiB)
	}
	if fits && !req.Share.IsZero() {
		return ReasonFragmented
	}
	return string(schedule.HostFull)
}

// roomReason is why: the hosts with room for req's share explain
// themselves (at most maxRoomExplained of them, spread evenly over the
// host order, so that a pool with room everywhere costs a few
// explanations, not one per host), and the most common reason is the
// request's. The hosts are found on the state's fit index from evenly
// spaced starting points, so a refusal on a saturated pod costs a few
// O(log n) searches rather than a look at every host.
func (e *engine) roomReason(req schedule.Request) string {
	counts := map[schedule.Reason]int{}
	hosts := len(e.top.Hosts)
	last := -1
	for k := range maxRoomExplained {
		from := max(k*hosts/maxRoomExplained, last+1)
		i := e.st.NextWithRoom(from, req.Share)
		if i < 0 && from > last+1 {
			i = e.st.NextWithRoom(last+1, req.Share) // the hosts with room left lie before from
		}
		if i < 0 {
			break
		}
		last = i
		one := req
		one.Host = e.top.Hosts[i].ID
		c, err := e.sched.Reasons(e.st, one)
		if err != nil {
			return ReasonInvalid
		}
		for r, n := range c {
			counts[r] += n
		}
	}
	return mostCommon(counts)
}

// maxRoomExplained bounds the hosts with room explained per rejection.
const maxRoomExplained = 8

// neverReason is why for a share no host could take even empty: the host
// checks' reasons on an empty pool, the same for every such share, so
// remembered.
func (e *engine) neverReason(probe schedule.Request) string {
	if r, ok := e.never[probe.Share]; ok {
		return r
	}
	counts, err := e.sched.Reasons(e.empty, probe)
	r := mostCommon(counts)
	if err != nil {
		r = ReasonInvalid
	}
	if e.never == nil {
		e.never = map[schedule.Share]string{}
	}
	e.never[probe.Share] = r
	return r
}

// mostCommon returns the reason counted most often (the first by name on
// a tie), or ReasonInconsistent when none was.
func mostCommon(counts map[schedule.Reason]int) string {
	var best schedule.Reason
	for r, n := range counts {
		if best == "" || n > counts[best] || (n == counts[best] && r < best) {
			best = r
		}
	}
	if best == "" {
		return ReasonInconsistent
	}
	return string(best)
}
