package schedule

import (
	"fmt"
	"slices"
	"strings"
	"sync"

	"rackpool/internal/inventory"
	"rackpool/internal/topology"
)

// hostCtx is what the host checks look at.
type hostCtx struct {
	st    *State
	req   *Request
	h     *inventory.Host
	zone  *inventory.Zone
	share bool
}

// check is one named step of the pipeline. test returns "" when the
// candidate passes, else the reason; detail is called only when
// explaining, and returns the explanation's format and arguments
// (formatted only if the whole request fails).
type check[T any] struct {
	name   string
	test   func(x *T) Reason
	detail func(x *T) (string, []any)
}

// hostChecks run in order, cheapest first, on every candidate host
// (Nomad's feasibility iterators).
var hostChecks = []check[hostCtx]{
	{
		name: "host-free",
		test: func(x *hostCtx) Reason {
			if !x.req.Expand && (!x.st.Free(x.h.Block) || (!x.share && x.st.shares[x.h.Index] > 0)) {
				return HostInUse
			}
			return ""
		},
		detail: func(x *hostCtx) (string, []any) {
			if x.st.Free(x.h.Block) {
				return "host %s carries %d shares; it cannot be taken whole", []any{x.h.ID, x.st.shares[x.h.Index]}
			}
			return "host %s is already composed", []any{x.h.ID}
		},
	},
	{
		name: "share-cores",
		test: func(x *hostCtx) Reason {
			if x.share && x.h.Cores < x.req.Share.Cores {
				return HostCores
			}
			return ""
		},
		detail: func(x *hostCtx) (string, []any) {
			return "host %s has %d cores, %d wanted", []any{x.h.ID, x.h.Cores, x.req.Share.Cores}
		},
	},
	{
		name: "share-memory",
		test: func(x *hostCtx) Reason {
			if x.share && x.h.MemoryGiB < x.req.Share.MemoryGiB {
				return HostMemory
			}
			return ""
		},
		detail: func(x *hostCtx) (string, []any) {
			return "host %s has %d GiB local memory, %d wanted", []any{x.h.ID, x.h.MemoryGiB, x.req.Share.MemoryGiB}
		},
	},
	{
		name: "share-free",
		test: func(x *hostCtx) Reason {
			if !x.share {
				return ""
			}
			if free := x.st.FreeShare(x.h); free.Cores < x.req.Share.Cores || free.MemoryGiB < x.req.Share.MemoryGiB {
				return HostFull
			}
			return ""
		},
		detail: func(x *hostCtx) (string, []any) {
			free := x.st.FreeShare(x.h)
			return "host %s has %d cores and %d GiB free, %d and %d wanted", []any{x.h.ID, free.Cores, free.MemoryGiB, x.req.Share.Cores, x.req.Share.MemoryGiB}
		},
	},
	{
		name: "min-cores",
		test: func(x *hostCtx) Reason {
			if x.h.Cores < x.req.MinCores {
				return HostCores
			}
			return ""
		},
		detail: func(x *hostCtx) (string, []any) {
			return "host %s has %d cores, %d wanted", []any{x.h.ID, x.h.Cores, x.req.MinCores}
		},
	},
	{
		name: "min-memory",
		test: func(x *hostCtx) Reason {
			if x.h.MemoryGiB < x.req.MinMemoryGiB {
				return HostMemory
			}
			return ""
		},
		detail: func(x *hostCtx) (string, []any) {
			return "host %s has %d GiB local memory, %d wanted", []any{x.h.ID, x.h.MemoryGiB, x.req.MinMemoryGiB}
		},
	},
	{
		name: "zone",
		test: func(x *hostCtx) Reason {
			if x.zone != nil && !x.zone.Hosts[x.h.ID] {
				return OutsideZone
			}
			return ""
		},
		detail: func(x *hostCtx) (string, []any) {
			return "host %s is not in zone %s", []any{x.h.ID, x.zone.ID}
		},
	},
}

// blockCtx is what the checks of one specific block look at.
type blockCtx struct {
	s    *Scheduler
	o    *overlay
	req  *Request
	zone *inventory.Zone
	b    *inventory.Block
	path topology.Path
	port *inventory.HostPort // set by the last check: the port to use
}

// blockChecks run in order on each specific block of a request.
var blockChecks = []check[blockCtx]{
	{
		name: "device",
		test: func(x *blockCtx) Reason {
			if x.b.Device == nil {
				return WrongKind
			}
			return ""
		},
		detail: func(x *blockCtx) (string, []any) {
			return "%s is a compute block; a composition has exactly one", []any{x.b.ID}
		},
	},
	{
		name: "zone",
		test: func(x *blockCtx) Reason {
			if x.zone != nil && !x.zone.Contains(x.b) {
				return OutsideZone
			}
			return ""
		},
		detail: func(x *blockCtx) (string, []any) { return "%s is not in zone %s", []any{x.b.ID, x.zone.ID} },
	},
	{
		name: "reachable",
		test: func(x *blockCtx) Reason {
			path, ok := x.s.top.Path(x.o.host, x.b)
			if !ok {
				return Unreachable
			}
			x.path = path
			return ""
		},
		detail: func(x *blockCtx) (string, []any) {
			return "host %s cannot reach %s%s", []any{x.o.host.ID, x.b.ID, whyUnreachable(x.o.host, x.b)}
		},
	},
	{
		name: "affinity",
		test: func(x *blockCtx) Reason {
			if k, ok := x.o.groupKey[x.b.Device.Fabric]; ok && k != groupOf(x.b, x.req.Affinity) {
				return AffinityFailed
			}
			return ""
		},
		detail: func(x *blockCtx) (string, []any) {
			return "%s is not in %s with the other blocks", []any{x.b.ID, x.o.groupKey[x.b.Device.Fabric]}
		},
	},
	{
		name: "available",
		test: func(x *blockCtx) Reason {
			r, port := x.o.check(x.b, x.path.Port)
			x.port = port
			return r
		},
		detail: func(x *blockCtx) (string, []any) {
			r, _ := x.o.check(x.b, x.path.Port)
			return "%s: %s", []any{x.b.ID, describe(r, x.b)}
		},
	},
}

// runChecks runs checks on x; on the first failure it returns the reason
// and, when explaining, the explanation's format and arguments.
func runChecks[T any](checks []check[T], x *T, explain bool) (Reason, string, []any) {
	for i := range checks {
		c := &checks[i]
		if r := c.test(x); r != "" {
			if !explain {
				return r, "", nil
			}
			format, args := c.detail(x)
			return r, format, args
		}
	}
	return "", "", nil
}

// scratch is what one search reuses from host to host: the plan under
// construction, its overlay and the checks' contexts. A decision tries
// many hosts and keeps at most a few plans; only those are copied out.
type scratch struct {
	o      overlay
	plan   Plan
	hx     hostCtx
	bx     blockCtx
	masks  []uint64
	groups []group
	// alike remembers, for one decision, whether hosts of a reach that
	// carry no circuit could take the request (see Scheduler.search).
	alike map[*reach]bool
	// inReach remembers, for one decision, the free pooled memory blocks
	// a reach holds within a round trip (see Scheduler.memoryShort).
	inReach map[reachBound]reachFree
	// freeMany says, for one decision, whether the pool has more than
	// fewFree free blocks; when not, freeRanks lists the memory nodes
	// with a free block (once freeListed).
	freeRanks, rankArena []int32
	freeListed, freeMany bool
	bestOpen             []fabricBest
	// failed marks, for one decision, the reaches a host of which was
	// tried and could not take the request.
	failed map[*reach]bool
}

type reachBound struct {
	r     *reach
	bound float64
}

// scratches recycles scratch space between decisions.
var scratches = sync.Pool{New: func() any { return new(scratch) }}

// tryHost builds the plan for req on host h in sc.plan (valid until the
// next call with sc), or says why it cannot.
func (s *Scheduler) tryHost(sc *scratch, st *State, req *Request, h *inventory.Host, zone *inventory.Zone, explain bool) (*Plan, []Rejection) {
	fail := func(need int, block string, r Reason, format string, args []any) (*Plan, []Rejection) {
		if !explain {
			return nil, nil
		}
		return nil, []Rejection{{Host: h.ID, Need: need, Block: block, Reason: r, format: format, args: args}}
	}
	share := !req.Share.IsZero()
	sc.hx = hostCtx{st: st, req: req, h: h, zone: zone, share: share}
	if r, format, args := runChecks(hostChecks, &sc.hx, explain); r != "" {
		return fail(-1, "", r, format, args)
	}
	return s.tryBlocks(sc, st, req, h, zone, explain)
}

// hostFits reports whether h passes the host checks for req.
func (s *Scheduler) hostFits(sc *scratch, st *State, req *Request, h *inventory.Host, zone *inventory.Zone) bool {
	sc.hx = hostCtx{st: st, req: req, h: h, zone: zone, share: !req.Share.IsZero()}
	r, _, _ := runChecks(hostChecks, &sc.hx, false)
	return r == ""
}

// tryBlocks is tryHost after the host checks: the specific blocks and the
// needs.
func (s *Scheduler) tryBlocks(sc *scratch, st *State, req *Request, h *inventory.Host, zone *inventory.Zone, explain bool) (*Plan, []Rejection) {
	fail := func(need int, block string, r Reason, format string, args []any) (*Plan, []Rejection) {
		if !explain {
			return nil, nil
		}
		return nil, []Rejection{{Host: h.ID, Need: need, Block: block, Reason: r, format: format, args: args}}
	}
	share := !req.Share.IsZero()
	o := &sc.o
	o.reset(st, h)
	for _, ids := range [][]string{req.Held, req.Exclude} {
		for _, id := range ids {
			if b := s.top.Block(id); b != nil {
				o.use(b)
			}
		}
	}
	plan := &sc.plan
	*plan = Plan{Host: h, Share: req.Share, Assignments: plan.Assignments[:0]}
	if !req.Expand && !share {
		plan.Assignments = append(plan.Assignments, Assignment{Block: h.Block})
	}
	if req.Affinity == SameDrawer || req.Affinity == SameSwitch {
		o.affinity = req.Affinity
		o.groupKey = map[*inventory.Fabric]string{}
		for _, id := range req.Held {
			if b := s.top.Block(id); b != nil && b.Device != nil {
				o.groupKey[b.Device.Fabric] = groupOf(b, req.Affinity)
			}
		}
	}
	// Specific blocks.
	for _, id := range req.Blocks {
		b := s.top.Block(id)
		if b.Device == nil && b.Host == h && !req.Expand && !share {
			continue // the host's own compute block, already in the plan
		}
		sc.bx = blockCtx{s: s, o: o, req: req, zone: zone, b: b}
		if r, format, args := runChecks(blockChecks, &sc.bx, explain); r != "" {
			return fail(-1, id, r, format, args)
		}
		o.add(plan, b, sc.bx.path, sc.bx.port)
	}
	// Constrained needs.
	r := s.reach(h)
	for ni := range req.Needs {
		if rej := s.fillNeed(sc, r, req, ni, zone, explain); rej != nil {
			if !explain {
				return nil, nil
			}
			return nil, []Rejection{*rej}
		}
	}
	sc.groups = countGroups(sc.groups[:0], plan.Assignments)
	plan.Groups = len(sc.groups)
	return plan, nil
}

// clone copies a plan out of the scratch.
func (p *Plan) clone() *Plan {
	c := *p
	c.Assignments = slices.Clone(p.Assignments)
	return &c
}

// group is one place a plan takes blocks from: a switch, a drawer, a
// memory node.
type group struct {
	sw     *inventory.Switch
	drawer *inventory.Drawer
	node   *inventory.Device
}

// countGroups appends to seen the distinct drawers, switches and memory
// nodes a plan touches.
func countGroups(seen []group, as []Assignment) []group {
	for _, a := range as {
		d := a.Block.Device
		if d == nil {
			continue
		}
		g := group{sw: d.Switch, drawer: d.Drawer}
		if d.Kind == inventory.Memory {
			g.node = d
		}
		if !slices.Contains(seen, g) {
			seen = append(seen, g)
		}
	}
	return seen
}

func groupOf(b *inventory.Block, aff Affinity) string {
	d := b.Device
	if aff == SameDrawer && d.Drawer != nil {
		return d.Drawer.ID
	}
	return d.Switch.ID
}

func whyUnreachable(h *inventory.Host, b *inventory.Block) string {
	d := b.Device
	if h.PortOn(d.Fabric) == nil {
		return fmt.Sprintf(" (no port into fabric %s)", d.Fabric.ID)
	}
	if d.Drawer != nil {
		return fmt.Sprintf(" (%s mode of %s connects slot %d only to %s)", d.Drawer.Mode, d.Drawer.ID, d.Slot, strings.Join(d.Drawer.SlotHostPorts(d.Slot), ", "))
	}
	return ""
}

func describe(r Reason, b *inventory.Block) string {
	switch r {
	case InUse:
		return fmt.Sprintf("already in %d of %d allowed compositions", b.MaxCompositions, b.MaxCompositions)
	case PortBusy:
		return fmt.Sprintf("no free optical port pair between the host and %s", b.Device.ID)
	case DrawerHosts:
		return fmt.Sprintf("%s in mode %s already serves %d hosts", b.Device.Drawer.ID, b.Device.Drawer.Mode, b.Device.Drawer.Mode.MaxHosts())
	case Duplicate:
		return "listed twice"
	}
	return string(r)
}
