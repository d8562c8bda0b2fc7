package schedule

import (
	"bytes"
	"math"
	"sync"
	"sync/atomic"

	"rackpool/internal/inventory"
	"rackpool/internal/topology"
)

// Scheduler places requests on one topology. It keeps per-host candidate
// indexes (reach), built on first use. It is safe for concurrent use; the
// State passed to Schedule must not change during the call.
type Scheduler struct {
	// Limit stops the search once this many feasible hosts have been
	// ranked (Nomad's limit iterator); 0 means DefaultLimit for topologies
	// with more than 256 hosts and no limit below that. Only the Locality
	// policy ranks; the others take the first feasible host in their order.
	Limit int
	// Policy chooses among feasible hosts; "" is Locality.
	Policy Policy
	// Start is the host index where the Locality policy's search begins
	// (wrapping around; 0 by default). Among equally good hosts the first
	// found wins, so replicas placing on one database at once start at
	// different hosts and rarely choose the same blocks (docs/ha.md).
	Start int

	top       *topology.Topology
	kindCount map[inventory.Kind]int
	// maxBlockBytes is the largest memory block: a need for N bytes of
	// pooled memory takes at least N/maxBlockBytes blocks.
	maxBlockBytes int64
	mem           *memLayout
	bound         lowerBounds

	mu      sync.Mutex // serialises building reaches
	reaches []atomic.Pointer[reach]
	// runEnd is, by host index, the end of the run of hosts from it that
	// are cabled alike (one reach): a search skips a run at once.
	runEnd []int32
	fabMem map[*inventory.Fabric]*fabricMem
	bySig  map[string]*reach

	emptyOnce sync.Once
	empty     *State
}

// DefaultLimit is the number of feasible hosts ranked on large topologies.
const DefaultLimit = 32

// New returns a scheduler for top.
func New(top *topology.Topology) *Scheduler {
	s := &Scheduler{
		top:       top,
		kindCount: map[inventory.Kind]int{},
		mem:       newMemLayout(top),
		bound:     newLowerBounds(top),
		reaches:   make([]atomic.Pointer[reach], len(top.Hosts)),
		runEnd:    make([]int32, len(top.Hosts)),
	}
	var next []byte
	for i := len(top.Hosts) - 1; i >= 0; i-- {
		sig := signature(top.Hosts[i])
		if i+1 < len(top.Hosts) && bytes.Equal(sig, next) {
			s.runEnd[i] = s.runEnd[i+1]
		} else {
			s.runEnd[i] = int32(i + 1)
		}
		next = sig
	}
	for _, b := range top.Blocks {
		s.kindCount[b.Kind]++
		if b.Kind == inventory.Memory && b.Device != nil {
			s.maxBlockBytes = max(s.maxBlockBytes, b.CapacityBytes)
		}
	}
	return s
}

// pruneByMemory lets the host search skip, on the fit index, hosts that
// could not obtain the pooled memory a request needs (off in a test that
// compares both).
var pruneByMemory = true

// pruneByReach lets the host search skip the hosts of a reach whose memory
// within a need's round trip is used up (memoryShort; off in a test that
// compares both).
var pruneByReach = true

// memoryBlocks is the least number of pooled memory blocks req's needs
// take: what a host must be able to obtain to be worth trying. 0 when
// req names its blocks.
func (s *Scheduler) memoryBlocks(req *Request) int32 {
	if !pruneByMemory || len(req.Blocks) > 0 {
		return 0
	}
	var n int64
	for _, need := range req.Needs {
		if need.Kind != inventory.Memory {
			continue
		}
		switch {
		case need.CapacityBytes > 0 && s.maxBlockBytes > 0:
			n += (need.CapacityBytes + s.maxBlockBytes - 1) / s.maxBlockBytes
		default:
			n += int64(need.Count)
		}
	}
	return int32(min(n, unbounded))
}

// Topology returns the scheduler's topology.
func (s *Scheduler) Topology() *topology.Topology { return s.top }

// emptyState is a State with nothing allocated, for the "would it ever
// fit" question; built once, only read.
func (s *Scheduler) emptyState() *State {
	s.emptyOnce.Do(func() { s.empty = NewState(s.top) })
	return s.empty
}

// Place is Schedule without explanations, for callers that place many
// requests and only need to know whether each fits now (the simulator):
// it returns the Plan, nil when no host can take req, or a request error.
func (s *Scheduler) Place(st *State, req Request) (*Plan, error) {
	hosts, zone, err := s.targets(req)
	if err != nil {
		return nil, err
	}
	return s.search(st, req, hosts, zone, false, nil), nil
}

// targets validates req and returns the hosts it may go to and its zone.
func (s *Scheduler) targets(req Request) ([]*inventory.Host, *inventory.Zone, error) {
	if err := s.validate(req); err != nil {
		return nil, nil, err
	}
	var zone *inventory.Zone
	if req.Zone != "" {
		zone = s.top.Zone(req.Zone)
	}
	hosts := s.top.Hosts
	if req.Host != "" {
		hosts = []*inventory.Host{s.top.Host(req.Host)}
	}
	return hosts, zone, nil
}

// Schedule places req against st. It returns a Plan, an *Unsatisfiable
// with every rejection, or a request error (ErrUnknownHost, ...).
func (s *Scheduler) Schedule(st *State, req Request) (*Plan, error) {
	hosts, zone, err := s.targets(req)
	if err != nil {
		return nil, err
	}
	best := s.search(st, req, hosts, zone, false, nil)
	if best == nil {
		// Search again, recording why each host was rejected: failures are
		// the rare path, so the common one builds no explanations.
		var rejections []Rejection
		s.search(st, req, hosts, zone, true, &rejections)
		// Would it fit if nothing were allocated? If not, it never will.
		never := s.search(s.emptyState(), req, hosts, zone, false, nil) == nil
		return nil, unsatisfiable(rejections, never)
	}
	return best, nil
}

// Reasons is Schedule's explanation without its words, for callers that
// only count why requests fail (the simulator): for a request no host can
// take now, how many hosts were rejected for each reason; nil when it
// fits, or a request error.
func (s *Scheduler) Reasons(st *State, req Request) (map[Reason]int, error) {
	hosts, zone, err := s.targets(req)
	if err != nil {
		return nil, err
	}
	if s.search(st, req, hosts, zone, false, nil) != nil {
		return nil, nil
	}
	var rejections []Rejection
	s.search(st, req, hosts, zone, true, &rejections)
	counts := map[Reason]int{}
	for _, r := range rejections {
		counts[r.Reason]++
	}
	return counts, nil
}

func (s *Scheduler) search(st *State, req Request, hosts []*inventory.Host, zone *inventory.Zone, explain bool, rejections *[]Rejection) *Plan {
	limit := s.Limit
	if limit == 0 && len(hosts) > 256 {
		limit = DefaultLimit
	}
	policy := s.Policy
	if policy == "" {
		policy = Locality
	}
	if policy != Locality {
		limit = 1 // the first feasible host in the policy's order wins
	}
	var best *Plan
	feasible := 0
	sc := scratches.Get().(*scratch)
	defer scratches.Put(sc)
	if !explain && req.Host == "" {
		// Nothing ranks above a plan that meets the lower bound: stop there.
		lb := s.lowerBound(st, req)
		// The policy's order over the hosts with enough free capacity.
		cores, mem := req.MinCores, req.MinMemoryGiB
		if !req.Share.IsZero() {
			cores, mem = max(cores, req.Share.Cores), max(mem, req.Share.MemoryGiB)
		}
		clear(sc.alike)
		clear(sc.inReach)
		clear(sc.failed)
		sc.freeListed, sc.freeMany = false, st.memFree.sum[1].free > fewFree
		order, start := policy, st.lastHost
		if policy == Locality && s.Start > 0 {
			// Index order from Start, wrapping: next-fit's order.
			order, start = NextFit, s.Start%len(s.top.Hosts)
		}
		st.fit.order(order, start, int32(cores), int32(mem), s.memoryBlocks(&req), func(i int) int {
			h := s.top.Hosts[i]
			r := s.reach(h)
			if pruneByReach && len(req.Blocks) == 0 && s.memoryShort(sc, st, &req, r) {
				return int(s.runEnd[i]) // its neighbours cabled alike share the reach
			}
			if pruneByReach && len(req.Blocks) == 0 && s.hostShort(sc, st, &req, h, r) {
				return i + 1
			}
			if !s.hostFits(sc, st, &req, h, zone) {
				return i + 1
			}
			// Hosts cabled alike (one reach), without a circuit and
			// without drawers, see exactly the same blocks in the same
			// state: the first one tried decides for all of them, and a
			// plan on another is the same plan, never better. (Specific
			// blocks may name a host's own compute block: not alike.)
			alike := len(req.Blocks) == 0 && !r.drawers && !st.hasCircuit(h)
			if ok, seen := sc.alike[r]; alike && seen {
				if !ok {
					return i + 1
				}
			} else {
				plan, _ := s.tryBlocks(sc, st, &req, h, zone, false)
				if alike {
					if sc.alike == nil {
						sc.alike = map[*reach]bool{}
					}
					sc.alike[r] = plan != nil
				}
				if plan == nil {
					if sc.failed == nil {
						sc.failed = map[*reach]bool{}
					}
					sc.failed[r] = true
					return i + 1
				}
				if best == nil || better(plan, best) {
					best = plan.clone()
				}
			}
			feasible++
			if !better(&lb, best) || limit > 0 && feasible >= limit {
				return -1
			}
			return i + 1
		})
		return best
	}
	for _, h := range hosts {
		plan, rej := s.tryHost(sc, st, &req, h, zone, explain)
		if plan == nil {
			if explain {
				*rejections = append(*rejections, rej...)
			}
			continue
		}
		if best == nil || better(plan, best) {
			best = plan.clone()
		}
		if feasible++; limit > 0 && feasible >= limit {
			break
		}
	}
	return best
}

func better(a, b *Plan) bool {
	if a.TotalRTTNS != b.TotalRTTNS {
		return a.TotalRTTNS < b.TotalRTTNS
	}
	if a.TotalHops != b.TotalHops {
		return a.TotalHops < b.TotalHops
	}
	return a.Groups < b.Groups
}

// lowerBounds are, per device kind, the least round trip and hops any host
// port sees to any device of that kind: the device's own switch entered
// once, the shortest host cable of the fabric, the device's cable and
// overhead. A plan's totals can never be below the sum over its blocks.
type lowerBounds struct {
	rtt         map[inventory.Kind]float64
	memBlockMax int64 // the largest memory block
}

func newLowerBounds(top *topology.Topology) lowerBounds {
	lb := lowerBounds{rtt: map[inventory.Kind]float64{}}
	for _, f := range top.Fabrics {
		if len(f.Ports) == 0 {
			continue
		}
		metres := math.Inf(1)
		for _, p := range f.Ports {
			metres = min(metres, p.Metres)
		}
		for _, d := range f.Devices {
			// The same arithmetic as topology.Path, so a plan that meets
			// the bound sums to exactly the same number.
			oneWay := d.Switch.LatencyNS + (metres+d.Metres)*topology.NSPerMetre
			rtt := 2*oneWay + d.OverheadNS
			if cur, ok := lb.rtt[d.Kind]; !ok || rtt < cur {
				lb.rtt[d.Kind] = rtt
			}
			if d.Kind == inventory.Memory {
				lb.memBlockMax = max(lb.memBlockMax, d.BlockBytes)
			}
		}
	}
	return lb
}

// of returns the best any plan for req could score on st, as a Plan's
// totals: the needs' fewest blocks at the least round trip and one hop
// each, and at least one group for device blocks (more when memory must
// span nodes because no node has enough free blocks). Specific blocks
// count as nothing, which keeps it a lower bound.
func (s *Scheduler) lowerBound(st *State, req Request) Plan {
	lb := &s.bound
	var p Plan
	memBlocks, devices := 0, false
	for _, id := range req.Blocks {
		if b := s.top.Block(id); b != nil && b.Device != nil {
			devices = true
		}
	}
	for _, n := range req.Needs {
		k := n.Count
		if n.Kind == inventory.Memory && n.CapacityBytes > 0 && lb.memBlockMax > 0 {
			k = int((n.CapacityBytes + lb.memBlockMax - 1) / lb.memBlockMax)
		}
		r, ok := lb.rtt[n.Kind]
		if !ok {
			continue
		}
		for range k {
			p.TotalRTTNS += r
		}
		p.TotalHops += k
		if n.Kind == inventory.Memory {
			memBlocks += k
		} else if k > 0 {
			devices = true
		}
	}
	if memBlocks > 0 {
		if most := st.memFree.mostFree(); most > 0 && most < maxBucket {
			p.Groups += (memBlocks + most - 1) / most
		} else {
			p.Groups++
		}
	}
	if devices {
		p.Groups++
	}
	return p
}
