package schedule

// The placement engine as it was before its candidate indexes: every
// host's candidates in one latency-sorted list, memory nodes sorted in
// full on every decision, every feasible host searched. Kept as the plain
// exhaustive reference the indexed engine must agree with, decision by
// decision (reference_test.go's randomized tests).

import (
	"cmp"
	"fmt"
	"iter"
	"maps"
	"math"
	"slices"
	"sort"
	"strings"
	"sync"

	"rackpool/internal/inventory"
	"rackpool/internal/topology"
	"rackpool/internal/units"
)

// refScheduler places requests on one topology. It keeps per-host candidate
// lists sorted by latency, built on first use. It is safe for concurrent use;
// the State passed to Schedule must not change during the call.
type refScheduler struct {
	// Limit stops the search once this many feasible hosts have been
	// ranked (Nomad's limit iterator); 0 means DefaultLimit for topologies
	// with more than 256 hosts and no limit below that. Only the Locality
	// policy ranks; the others take the first feasible host in their order.
	Limit int
	// Policy chooses among feasible hosts; "" is Locality.
	Policy    Policy
	top       *topology.Topology
	kindCount map[inventory.Kind]int
	mu        sync.Mutex
	hosts     map[*inventory.Host]*refHostIndex
}

type refCand struct {
	blk  int32
	port int16 // index into host.Ports
	hops int16
	rtt  float64
}

type refHostIndex struct {
	byKind map[inventory.Kind][]refCand
	// The memory nodes the host reaches, in the latency order of
	// byKind[Memory], each with its blocks' candidates.
	mem []refMemNode
}

type refMemNode struct {
	dev   *inventory.Device
	rtt   float64
	first int // position of its first block in byKind[Memory]
	cands []refCand
}

// New returns a scheduler for top.
func newRef(top *topology.Topology) *refScheduler {
	s := &refScheduler{top: top, hosts: map[*inventory.Host]*refHostIndex{}, kindCount: map[inventory.Kind]int{}}
	for _, b := range top.Blocks {
		s.kindCount[b.Kind]++
	}
	return s
}

// Place is Schedule without explanations, for callers that place many
// requests and only need to know whether each fits now (the simulator):
// it returns the Plan, nil when no host can take req, or a request error.
func (s *refScheduler) Place(st *State, req Request) (*Plan, error) {
	hosts, zone, err := s.targets(req)
	if err != nil {
		return nil, err
	}
	return s.search(st, req, hosts, zone, false, nil), nil
}

// targets is the engine's own: validation and the hosts a request may
// go to are not what the reference checks.
func (s *refScheduler) targets(req Request) ([]*inventory.Host, *inventory.Zone, error) {
	return (&Scheduler{top: s.top}).targets(req)
}

// Schedule places req against st. It returns a Plan, an *Unsatisfiable
// with every rejection, or a request error (ErrUnknownHost, ...).
func (s *refScheduler) Schedule(st *State, req Request) (*Plan, error) {
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
		never := s.search(NewState(s.top), req, hosts, zone, false, nil) == nil
		return nil, unsatisfiable(rejections, never)
	}
	return best, nil
}

func (s *refScheduler) search(st *State, req Request, hosts []*inventory.Host, zone *inventory.Zone, explain bool, rejections *[]Rejection) *Plan {
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
	if !explain && req.Host == "" {
		// The policy's order over the hosts with enough free capacity.
		cores, mem := req.MinCores, req.MinMemoryGiB
		if !req.Share.IsZero() {
			cores, mem = max(cores, req.Share.Cores), max(mem, req.Share.MemoryGiB)
		}
		st.fit.order(policy, st.lastHost, int32(cores), int32(mem), 0, func(i int) int {
			plan, _ := s.tryHost(st, req, s.top.Hosts[i], zone, false)
			if plan == nil {
				return i + 1
			}
			if best == nil || better(plan, best) {
				best = plan
			}
			feasible++
			// Nothing ranks above a plan with no round trip, hops or groups
			// (a share with no devices): stop there.
			if best.TotalRTTNS == 0 && best.TotalHops == 0 && best.Groups == 0 {
				return -1
			}
			if limit > 0 && feasible >= limit {
				return -1
			}
			return i + 1
		})
		return best
	}
	for _, h := range hosts {
		plan, rej := s.tryHost(st, req, h, zone, explain)
		if plan == nil {
			if explain {
				*rejections = append(*rejections, rej...)
			}
			continue
		}
		if best == nil || better(plan, best) {
			best = plan
		}
		if feasible++; limit > 0 && feasible >= limit {
			break
		}
	}
	return best
}

// refOverlay tracks what a plan under construction would consume, on top of
// the State.
type refOverlay struct {
	st       *State
	host     *inventory.Host
	used     map[int32]bool
	portPeer map[*inventory.HostPort]*inventory.Device
	circuits map[*inventory.Device]int
	drawers  map[*inventory.Drawer]bool
	groupKey map[*inventory.Fabric]string // affinity: the chosen group per fabric
}

func refNewOverlay(st *State, h *inventory.Host) *refOverlay {
	return &refOverlay{st: st, host: h}
}

// check returns "" when block b can be added through port p, else the reason.
func (o *refOverlay) check(b *inventory.Block, p *inventory.HostPort) (Reason, *inventory.HostPort) {
	if o.used[int32(b.Index)] {
		return Duplicate, nil
	}
	if !o.st.Free(b) {
		return InUse, nil
	}
	d := b.Device
	if d.Drawer != nil && !o.drawers[d.Drawer] {
		m := o.st.drawerHosts[d.Drawer]
		if m[o.host] == 0 && len(m) >= d.Drawer.Mode.MaxHosts() {
			return DrawerHosts, nil
		}
	}
	if d.Fabric.Kind == inventory.OpticalCircuit {
		// A circuit to d already up on one of the host's ports, or a free
		// host port and a free port on d.
		var free *inventory.HostPort
		for _, hp := range o.host.PortsOn(d.Fabric) {
			peer := o.portPeer[hp]
			if peer == nil {
				peer = o.st.portPeer[hp.Index]
			}
			if peer == d {
				return "", hp
			}
			if peer == nil && free == nil && o.st.top.Reaches(hp, d) {
				free = hp
			}
		}
		if free == nil || int(o.st.circuits[d.Index])+o.circuits[d] >= len(d.Ports) {
			return PortBusy, nil
		}
		return "", free
	}
	return "", p
}

func (o *refOverlay) use(b *inventory.Block) {
	if o.used == nil {
		o.used = make(map[int32]bool, 8)
	}
	o.used[int32(b.Index)] = true
}

func (o *refOverlay) take(b *inventory.Block, p *inventory.HostPort) {
	o.use(b)
	d := b.Device
	if d.Drawer != nil {
		if o.drawers == nil {
			o.drawers = map[*inventory.Drawer]bool{}
		}
		o.drawers[d.Drawer] = true
	}
	if d.Fabric.Kind == inventory.OpticalCircuit && o.st.portPeer[p.Index] == nil && o.portPeer[p] == nil {
		if o.portPeer == nil {
			o.portPeer = map[*inventory.HostPort]*inventory.Device{}
			o.circuits = map[*inventory.Device]int{}
		}
		o.portPeer[p] = d
		o.circuits[d]++
	}
}

func (s *refScheduler) tryHost(st *State, req Request, h *inventory.Host, zone *inventory.Zone, explain bool) (*Plan, []Rejection) {
	reject := func(need int, block string, r Reason, format string, args ...any) (*Plan, []Rejection) {
		return nil, []Rejection{{Host: h.ID, Need: need, Block: block, Reason: r, format: format, args: args}}
	}
	// Host checks, cheapest first.
	share := !req.Share.IsZero()
	if !req.Expand && (!st.Free(h.Block) || (!share && st.shares[h.Index] > 0)) {
		if !explain {
			return nil, nil
		}
		if st.Free(h.Block) {
			return reject(-1, "", HostInUse, "host %s carries %d shares; it cannot be taken whole", h.ID, st.shares[h.Index])
		}
		return reject(-1, "", HostInUse, "host %s is already composed", h.ID)
	}
	if share {
		if h.Cores < req.Share.Cores {
			if !explain {
				return nil, nil
			}
			return reject(-1, "", HostCores, "host %s has %d cores, %d wanted", h.ID, h.Cores, req.Share.Cores)
		}
		if h.MemoryGiB < req.Share.MemoryGiB {
			if !explain {
				return nil, nil
			}
			return reject(-1, "", HostMemory, "host %s has %d GiB local memory, %d wanted", h.ID, h.MemoryGiB, req.Share.MemoryGiB)
		}
		if free := st.FreeShare(h); free.Cores < req.Share.Cores || free.MemoryGiB < req.Share.MemoryGiB {
			if !explain {
				return nil, nil
			}
			return reject(-1, "", HostFull, "host %s has %d cores and %d GiB free, %d and %d wanted", h.ID,
				free.Cores, free.MemoryGiB, req.Share.Cores, req.Share.MemoryGiB)
		}
	}
	if h.Cores < req.MinCores {
		if !explain {
			return nil, nil
		}
		return reject(-1, "", HostCores, "host %s has %d cores, %d wanted", h.ID, h.Cores, req.MinCores)
	}
	if h.MemoryGiB < req.MinMemoryGiB {
		if !explain {
			return nil, nil
		}
		return reject(-1, "", HostMemory, "host %s has %d GiB local memory, %d wanted", h.ID, h.MemoryGiB, req.MinMemoryGiB)
	}
	if zone != nil && !zone.Hosts[h.ID] {
		if !explain {
			return nil, nil
		}
		return reject(-1, "", OutsideZone, "host %s is not in zone %s", h.ID, zone.ID)
	}
	o := refNewOverlay(st, h)
	for _, ids := range [][]string{req.Held, req.Exclude} {
		for _, id := range ids {
			if b := s.top.Block(id); b != nil {
				o.use(b)
			}
		}
	}
	plan := &Plan{Host: h, Share: req.Share, Assignments: make([]Assignment, 0, 1+len(req.Blocks)+4*len(req.Needs))}
	if !req.Expand && !share {
		plan.Assignments = append(plan.Assignments, Assignment{Block: h.Block})
	}
	add := func(b *inventory.Block, path topology.Path, port *inventory.HostPort) {
		o.take(b, port)
		plan.Assignments = append(plan.Assignments, Assignment{Block: b, Port: port, RTTNS: path.RTTNS, Hops: path.Hops})
		plan.TotalRTTNS += path.RTTNS
		plan.TotalHops += path.Hops
		if req.Affinity == SameDrawer || req.Affinity == SameSwitch {
			o.groupKey[b.Device.Fabric] = groupOf(b, req.Affinity)
		}
	}
	if req.Affinity == SameDrawer || req.Affinity == SameSwitch {
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
		if b.Device == nil {
			if b.Host == h && !req.Expand && !share {
				continue // the host's own compute block, already in the plan
			}
			if !explain {
				return nil, nil
			}
			return reject(-1, id, WrongKind, "%s is a compute block; a composition has exactly one", id)
		}
		if zone != nil && !zone.Contains(b) {
			if !explain {
				return nil, nil
			}
			return reject(-1, id, OutsideZone, "%s is not in zone %s", id, zone.ID)
		}
		path, ok := s.top.Path(h, b)
		if !ok {
			if !explain {
				return nil, nil
			}
			return reject(-1, id, Unreachable, "host %s cannot reach %s%s", h.ID, id, whyUnreachable(h, b))
		}
		if k, ok := o.groupKey[b.Device.Fabric]; ok && k != groupOf(b, req.Affinity) {
			if !explain {
				return nil, nil
			}
			return reject(-1, id, AffinityFailed, "%s is not in %s with the other blocks", id, k)
		}
		r, port := o.check(b, path.Port)
		if r != "" {
			if !explain {
				return nil, nil
			}
			return reject(-1, id, r, "%s: %s", id, describe(r, b))
		}
		add(b, path, port)
	}
	// Constrained needs.
	ix := s.index(h)
	for ni, n := range req.Needs {
		if rej := s.fillNeed(o, ix, req, ni, n, zone, add, explain); rej != nil {
			if !explain {
				return nil, nil
			}
			return nil, []Rejection{*rej}
		}
	}
	type group struct {
		sw     *inventory.Switch
		drawer *inventory.Drawer
		node   *inventory.Device
	}
	var groups []group
	for _, a := range plan.Assignments {
		d := a.Block.Device
		if d == nil {
			continue
		}
		g := group{sw: d.Switch, drawer: d.Drawer}
		if d.Kind == inventory.Memory {
			g.node = d
		}
		if !slices.Contains(groups, g) {
			groups = append(groups, g)
		}
	}
	plan.Groups = len(groups)
	return plan, nil
}

// fillNeed walks the host's candidates of the need's kind in latency order.
func (s *refScheduler) fillNeed(o *refOverlay, ix *refHostIndex, req Request, ni int, n Need, zone *inventory.Zone,
	add func(*inventory.Block, topology.Path, *inventory.HostPort), explain bool) *Rejection {
	want := n.Count
	if n.Kind == inventory.Memory && n.CapacityBytes > 0 {
		want = -1 // filled by bytes
	}
	bound := n.MaxLatencyNS
	if bound == 0 {
		bound = DefaultMaxLatencyNS[n.Kind]
	}
	if bound < 0 {
		bound = math.Inf(1)
	}
	counts := map[Reason]int{}
	got, gotBytes := 0, int64(0)
	blocked, blockedBytes := 0, int64(0) // rejected only for reasons that may clear
	done := func() bool {
		if want < 0 {
			return gotBytes >= n.CapacityBytes
		}
		return got >= want
	}
	list := slices.Values(ix.byKind[n.Kind])
	aff := req.Affinity == SameDrawer || req.Affinity == SameSwitch
	// Memory: prefer a node already circuited to this host, then the node
	// with the fewest free blocks that still covers the need (best fit).
	if n.Kind == inventory.Memory && len(ix.mem) > 1 {
		list = s.orderMemory(o, ix)
	}
	for c := range list {
		if done() {
			break
		}
		b := s.top.Blocks[c.blk]
		if c.rtt > bound {
			counts[TooFar]++
			if n.Kind != inventory.Memory {
				break // sorted by latency: the rest are farther
			}
			continue
		}
		if n.Model != "" && !strings.EqualFold(b.Model, n.Model) {
			counts[Mismatch]++
			continue
		}
		if !attrsMatch(b, n.Attrs) {
			counts[Mismatch]++
			continue
		}
		if n.Kind != inventory.Memory && n.CapacityBytes > 0 && b.CapacityBytes < n.CapacityBytes {
			counts[TooSmall]++
			continue
		}
		if n.Exact && n.CapacityBytes > 0 && ((n.Kind != inventory.Memory && b.CapacityBytes != n.CapacityBytes) ||
			(n.Kind == inventory.Memory && gotBytes+b.CapacityBytes > n.CapacityBytes)) {
			counts[Mismatch]++
			continue
		}
		if zone != nil && !zone.Contains(b) {
			counts[OutsideZone]++
			continue
		}
		if aff {
			if k, ok := o.groupKey[b.Device.Fabric]; ok && k != groupOf(b, req.Affinity) {
				counts[AffinityFailed]++
				continue
			}
		}
		var port *inventory.HostPort
		if c.port >= 0 {
			port = o.host.Ports[c.port]
		}
		r, port := o.check(b, port)
		if r != "" {
			counts[r]++
			if r.Transient() {
				blocked++
				blockedBytes += b.CapacityBytes
			}
			continue
		}
		add(b, topology.Path{Port: port, Hops: int(c.hops), RTTNS: c.rtt}, port)
		got++
		gotBytes += b.CapacityBytes
	}
	if done() {
		return nil
	}
	if !explain {
		return &Rejection{}
	}
	// Not enough: say why, most telling reason first.
	unreachable := s.kindCount[n.Kind] - len(ix.byKind[n.Kind])
	if unreachable > 0 {
		counts[Unreachable] = unreachable
	}
	wantDesc := fmt.Sprintf("%d × %s", want, n.Kind)
	if want < 0 {
		wantDesc = fmt.Sprintf("%s of memory", units.FormatBytes(n.CapacityBytes))
	}
	if n.Model != "" {
		wantDesc += " model=" + n.Model
	}
	// Name a transient reason only when the need would fit once those
	// blocks free up; otherwise the request can never fit this host.
	order := []Reason{InUse, PortBusy, DrawerHosts, AffinityFailed, TooFar, Mismatch, TooSmall, OutsideZone, Unreachable}
	if (want >= 0 && got+blocked < want) || (want < 0 && gotBytes+blockedBytes < n.CapacityBytes) {
		order = order[3:]
	}
	reason := Reason("")
	for _, r := range order {
		if counts[r] > 0 {
			reason = r
			break
		}
	}
	if reason == "" {
		reason = Insufficient
	}
	var why []string
	for _, r := range slices.Sorted(maps.Keys(counts)) {
		why = append(why, fmt.Sprintf("%d %s", counts[r], r))
	}
	detail := fmt.Sprintf("host %s: %s wanted, %d found", o.host.ID, wantDesc, got)
	if want < 0 {
		detail = fmt.Sprintf("host %s: %s wanted, %s found", o.host.ID, wantDesc, units.FormatBytes(gotBytes))
	}
	if len(why) > 0 {
		detail += " (rejected: " + strings.Join(why, ", ") + ")"
	}
	if reason == TooFar {
		detail += fmt.Sprintf("; bound %.0f ns", bound)
	}
	return &Rejection{Host: o.host.ID, Need: ni, Reason: reason, Detail: detail}
}

// orderMemory orders memory candidates: nodes already circuited to the
// host first, then by latency, then nodes with fewer free blocks (best fit,
// so large free nodes stay whole; full nodes last), block order within a
// node.
func (s *refScheduler) orderMemory(o *refOverlay, ix *refHostIndex) iter.Seq[refCand] {
	// The nodes circuited to this host: at most one per host port.
	var circuited []*inventory.Device
	for _, hp := range o.host.Ports {
		if d := o.st.portPeer[hp.Index]; d != nil {
			circuited = append(circuited, d)
		}
	}
	type node struct {
		n       *refMemNode
		circuit bool
		free    int32
	}
	nodes := make([]node, len(ix.mem))
	for i := range ix.mem {
		m := &ix.mem[i]
		nodes[i] = node{n: m, circuit: slices.Contains(circuited, m.dev), free: o.st.devFree[m.dev.Index]}
	}
	slices.SortStableFunc(nodes, func(a, b node) int {
		if a.circuit != b.circuit {
			if a.circuit {
				return -1
			}
			return 1
		}
		if a.n.rtt != b.n.rtt {
			return cmp.Compare(a.n.rtt, b.n.rtt)
		}
		if (a.free == 0) != (b.free == 0) {
			if b.free == 0 {
				return -1
			}
			return 1
		}
		if a.free != b.free {
			return cmp.Compare(a.free, b.free)
		}
		return cmp.Compare(a.n.first, b.n.first)
	})
	return func(yield func(refCand) bool) {
		for _, nd := range nodes {
			for _, c := range nd.n.cands {
				if !yield(c) {
					return
				}
			}
		}
	}
}

func (s *refScheduler) index(h *inventory.Host) *refHostIndex {
	s.mu.Lock()
	defer s.mu.Unlock()
	if ix := s.hosts[h]; ix != nil {
		return ix
	}
	ix := &refHostIndex{byKind: map[inventory.Kind][]refCand{}}
	fabrics := map[*inventory.Fabric]bool{}
	for _, p := range h.Ports {
		fabrics[p.Fabric] = true
	}
	for f := range fabrics {
		for _, d := range f.Devices {
			path, ok := s.top.Path(h, d.Blocks[0])
			if !ok {
				continue
			}
			port := int16(-1)
			for i, p := range h.Ports {
				if p == path.Port {
					port = int16(i)
				}
			}
			for _, b := range d.Blocks {
				ix.byKind[b.Kind] = append(ix.byKind[b.Kind], refCand{blk: int32(b.Index), port: port, hops: int16(path.Hops), rtt: path.RTTNS})
			}
		}
	}
	for _, list := range ix.byKind {
		sort.Slice(list, func(i, j int) bool {
			if list[i].rtt != list[j].rtt {
				return list[i].rtt < list[j].rtt
			}
			if list[i].hops != list[j].hops {
				return list[i].hops < list[j].hops
			}
			return list[i].blk < list[j].blk
		})
	}
	list := ix.byKind[inventory.Memory]
	for i, c := range list {
		d := s.top.Blocks[c.blk].Device
		if k := len(ix.mem); k == 0 || ix.mem[k-1].dev != d {
			ix.mem = append(ix.mem, refMemNode{dev: d, rtt: c.rtt, first: i})
		}
	}
	// A node's blocks are contiguous in the latency order (same path, then
	// block order), so each node's candidates are a sub-slice.
	for k := range ix.mem {
		end := len(list)
		if k+1 < len(ix.mem) {
			end = ix.mem[k+1].first
		}
		ix.mem[k].cands = list[ix.mem[k].first:end]
	}
	s.hosts[h] = ix
	return ix
}
