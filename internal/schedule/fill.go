package schedule

import (
	"cmp"
	"fmt"
	"maps"
	"math"
	"math/bits"
	"slices"
	"strings"

	"rackpool/internal/inventory"
	"rackpool/internal/topology"
	"rackpool/internal/units"
)

// counted are the reasons a need's walk counts, in the order an
// explanation names them.
var counted = [...]Reason{InUse, PortBusy, DrawerHosts, AffinityFailed, TooFar, Mismatch, TooSmall, OutsideZone, Unreachable, Duplicate}

func reasonIndex(r Reason) int {
	for i, c := range counted {
		if c == r {
			return i
		}
	}
	panic("schedule: uncounted reason " + string(r))
}

// boundOf is the round trip need n allows.
func boundOf(n *Need) float64 {
	b := n.MaxLatencyNS
	if b == 0 {
		b = DefaultMaxLatencyNS[n.Kind]
	}
	if b < 0 {
		b = math.Inf(1)
	}
	return b
}

// blocksWanted is the least number of memory blocks that fill need n.
func (s *Scheduler) blocksWanted(n *Need) int64 {
	if n.CapacityBytes > 0 {
		return (n.CapacityBytes + s.maxBlockBytes - 1) / s.maxBlockBytes
	}
	return int64(n.Count)
}

// memoryShort reports whether some memory need of req cannot be filled
// from reach r whatever host of the reach asks: the free blocks of every
// memory node the reach sees within the need's round trip fall short of
// it. Hosts of one reach share the answer, remembered for the decision in
// sc, so on a pod whose near memory is used up a refusal costs one sum per
// reach, not a walk per host. The sum comes from the memory index span by
// span or, when few nodes have a free block (a saturated pod), from those
// nodes alone.
func (s *Scheduler) memoryShort(sc *scratch, st *State, req *Request, r *reach) bool {
	for i := range req.Needs {
		n := &req.Needs[i]
		if n.Kind != inventory.Memory {
			continue
		}
		want := s.blocksWanted(n)
		if sc.freeMany && (len(sc.failed) == 0 || !sc.failed[r]) {
			// Plenty of free memory in the pool: a reach is summed only
			// once one of its hosts has failed in this decision.
			return false
		}
		key := reachBound{r, boundOf(n)}
		got, ok := sc.inReach[key]
		if !ok || got.free < want && !got.all {
			got = s.freeWithin(sc, st, r, key.bound, want)
			if sc.inReach == nil {
				sc.inReach = map[reachBound]reachFree{}
			}
			sc.inReach[key] = got
		}
		if got.free < want {
			return true
		}
	}
	return false
}

// hostShort is memoryShort for host h of reach r once the reach has
// passed, when the pool has few free blocks (counted node by node): of
// the nodes with a free block within a need's round trip it counts those
// h is circuited to, and on each optical fabric where h has k free ports
// k times the most any other node there could give (a port opens one
// circuit), so the hosts whose ports are taken, or that could open too
// few circuits, are skipped without a walk.
func (s *Scheduler) hostShort(sc *scratch, st *State, req *Request, h *inventory.Host, r *reach) bool {
	if sc.freeMany || !st.hasCircuit(h) {
		return false
	}
	for i := range req.Needs {
		n := &req.Needs[i]
		if n.Kind != inventory.Memory {
			continue
		}
		want := s.blocksWanted(n)
		var free int64
		best := sc.bestOpen[:0] // by fabric: the most a new circuit gives
		for _, rk := range sc.inReach[reachBound{r, boundOf(n)}].ranks {
			d := s.mem.devs[rk]
			switch k := st.takes(h, d); {
			case k < 0:
				return false // no port limit: nothing to bound
			case k == 0:
				continue
			case st.isPeer(h, d):
				free += int64(st.devFree[d.Index])
			default:
				j := slices.IndexFunc(best, func(b fabricBest) bool { return b.f == d.Fabric })
				if j < 0 {
					best = append(best, fabricBest{f: d.Fabric, ports: int64(k)})
					j = len(best) - 1
				}
				best[j].most = max(best[j].most, int64(st.devFree[d.Index]))
			}
		}
		sc.bestOpen = best
		for _, b := range best {
			free += b.ports * b.most
		}
		if free < want {
			return true
		}
	}
	return false
}

// fabricBest is, for hostShort, the free ports a host has on an optical
// fabric and the most free blocks of a node there it could open a circuit
// to.
type fabricBest struct {
	f     *inventory.Fabric
	ports int64
	most  int64
}

// reachFree is the free blocks a reach sees within a round trip: all of
// them, or at least free.
type reachFree struct {
	free int64
	all  bool
	// ranks lists the nodes counted, when counted node by node (few
	// free blocks in the pool): what hostShort checks.
	ranks []int32
}

// fewFree is the most free blocks in the whole pool for which
// memoryShort counts node by node instead of span by span: no more nodes
// than that have a free block.
const fewFree = 256

// freeWithin counts the free blocks of the memory nodes reach r sees
// within round trip bound, stopping once it has want.
func (s *Scheduler) freeWithin(sc *scratch, st *State, r *reach, bound float64, want int64) reachFree {
	if !sc.freeMany && !sc.freeListed {
		// The nodes with a free block, once per decision, when few.
		sc.freeListed = true
		sc.freeRanks = sc.freeRanks[:0]
		sc.rankArena = sc.rankArena[:0]
		n := len(s.mem.devs)
		for rk := st.memFree.next(0, n, ^uint64(1)); rk >= 0; rk = st.memFree.next(rk+1, n, ^uint64(1)) {
			sc.freeRanks = append(sc.freeRanks, int32(rk))
		}
	}
	var free int64
	if !sc.freeMany {
		// Every node, not only until want: hostShort reads the list.
		from := len(sc.rankArena)
		for _, rk := range sc.freeRanks {
			if sp, ok := r.locate(rk); ok && sp.rtt <= bound {
				free += int64(st.devFree[s.mem.devs[rk].Index])
				sc.rankArena = append(sc.rankArena, rk)
			}
		}
		return reachFree{free, true, sc.rankArena[from:len(sc.rankArena):len(sc.rankArena)]}
	}
	for ci := range r.mem {
		cl := &r.mem[ci]
		if cl.rtt > bound {
			break // classes come by round trip
		}
		for _, sub := range cl.subs {
			for _, sp := range sub.spans {
				if free += st.memFree.sums(int(sp.lo), int(sp.hi)).free; free >= want {
					return reachFree{free: free}
				}
			}
		}
	}
	return reachFree{free: free, all: true}
}

// needWalk fills one need on one host: it is offered candidate blocks in
// the host's order and takes those that pass every check.
type needWalk struct {
	sc      *scratch
	o       *overlay
	req     *Request
	n       *Need
	zone    *inventory.Zone
	explain bool
	aff     bool
	want    int // blocks; -1: filled by bytes
	bound   float64

	counts       [len(counted)]int
	got          int
	gotBytes     int64
	blocked      int // rejected only for reasons that may clear
	blockedBytes int64
}

func (w *needWalk) done() bool {
	if w.want < 0 {
		return w.gotBytes >= w.n.CapacityBytes
	}
	return w.got >= w.want
}

func (w *needWalk) count(r Reason) { w.counts[reasonIndex(r)]++ }

// offer runs the checks on block b, reached at rtt and hops through port
// (an index into the host's ports, -1 for none), and takes it if it
// passes.
func (w *needWalk) offer(b *inventory.Block, rtt float64, hops, port int16) bool {
	n := w.n
	if rtt > w.bound {
		w.count(TooFar)
		return false
	}
	if n.Model != "" && !strings.EqualFold(b.Model, n.Model) {
		w.count(Mismatch)
		return false
	}
	if !attrsMatch(b, n.Attrs) {
		w.count(Mismatch)
		return false
	}
	if n.Kind != inventory.Memory && n.CapacityBytes > 0 && b.CapacityBytes < n.CapacityBytes {
		w.count(TooSmall)
		return false
	}
	if n.Exact && n.CapacityBytes > 0 && ((n.Kind != inventory.Memory && b.CapacityBytes != n.CapacityBytes) ||
		(n.Kind == inventory.Memory && w.gotBytes+b.CapacityBytes > n.CapacityBytes)) {
		w.count(Mismatch)
		return false
	}
	if w.zone != nil && !w.zone.Contains(b) {
		w.count(OutsideZone)
		return false
	}
	if w.aff {
		if k, ok := w.o.groupKey[b.Device.Fabric]; ok && k != groupOf(b, w.req.Affinity) {
			w.count(AffinityFailed)
			return false
		}
	}
	var hp *inventory.HostPort
	if port >= 0 {
		hp = w.o.host.Ports[port]
	}
	r, hp := w.o.check(b, hp)
	if r != "" {
		w.count(r)
		if r.Transient() {
			w.blocked++
			w.blockedBytes += b.CapacityBytes
		}
		return false
	}
	w.o.add(&w.sc.plan, b, topology.Path{Port: hp, Hops: int(hops), RTTNS: rtt}, hp)
	w.got++
	w.gotBytes += b.CapacityBytes
	return true
}

// offerNode offers a memory node's blocks in block order. When placing,
// blocks that are taken are passed over at once, and the first free block
// that fails a check ends the node: every other check (round trip, model,
// attributes, size, zone, affinity, optical ports, drawer) says the same
// of all its blocks. Which check each block fails matters only to an
// explanation.
func (w *needWalk) offerNode(d *inventory.Device, sp span) {
	if !w.explain && len(d.Blocks) <= 64 {
		for m := w.o.st.freeMask[d.Index]; m != 0 && !w.done(); m &= m - 1 {
			b := d.Blocks[bits.TrailingZeros64(m)]
			if w.o.isUsed(int32(b.Index)) {
				continue
			}
			if !w.offer(b, sp.rtt, sp.hops, sp.port) {
				return
			}
		}
		return
	}
	for _, b := range d.Blocks {
		if w.done() {
			return
		}
		if !w.explain && (!w.o.st.Free(b) || w.o.isUsed(int32(b.Index))) {
			continue
		}
		if !w.offer(b, sp.rtt, sp.hops, sp.port) && !w.explain {
			return
		}
	}
}

// unfilled is fillNeed's answer when not explaining: the need cannot be
// filled; nobody reads more.
var unfilled Rejection

// fillNeed fills need ni of req on the overlay's host, or returns why it
// cannot (a zero Rejection when not explaining).
func (s *Scheduler) fillNeed(sc *scratch, r *reach, req *Request, ni int, zone *inventory.Zone, explain bool) *Rejection {
	n := &req.Needs[ni]
	w := &needWalk{sc: sc, o: &sc.o, req: req, n: n, zone: zone, explain: explain, want: n.Count,
		aff: req.Affinity == SameDrawer || req.Affinity == SameSwitch}
	if n.Kind == inventory.Memory && n.CapacityBytes > 0 {
		w.want = -1 // filled by bytes
	}
	w.bound = boundOf(n)
	reachable := 0
	if n.Kind == inventory.Memory {
		s.walkMemory(w, r)
		reachable = r.memBlocks
	} else {
		list := r.byKind[n.Kind]
		reachable = len(list)
		for _, c := range list {
			if w.done() {
				break
			}
			if c.rtt > w.bound {
				w.count(TooFar)
				break // sorted by latency: the rest are farther
			}
			w.offer(s.top.Blocks[c.blk], c.rtt, c.hops, c.port)
		}
	}
	if w.done() {
		return nil
	}
	if !explain {
		return &unfilled
	}
	if unreachable := s.kindCount[n.Kind] - reachable; unreachable > 0 {
		w.counts[reasonIndex(Unreachable)] = unreachable
	}
	return w.rejection(ni)
}

// node is a memory node circuited to the host, with the span it is
// reached through.
type node struct {
	d  *inventory.Device
	sp span
}

// walkMemory offers memory nodes in the scheduler's order: nodes already
// circuited to the host first; then by round trip; within a round trip the
// nodes with the fewest free blocks first (best fit, so large free nodes
// stay whole), then fewer hops, then rank. Full nodes come last in their
// class: they are never offered when placing; an explanation counts them.
func (s *Scheduler) walkMemory(w *needWalk, r *reach) {
	o := w.o
	st := o.st
	// The nodes circuited to this host: at most one per host port.
	var circ []node
	for _, hp := range o.host.Ports {
		d := st.portPeer[hp.Index]
		if d == nil || slices.ContainsFunc(circ, func(c node) bool { return c.d == d }) {
			continue
		}
		if sp, ok := r.locate(s.mem.rank[d.Index]); ok {
			circ = append(circ, node{d, sp})
		}
	}
	if len(circ) > 1 {
		slices.SortFunc(circ, func(a, b node) int {
			if c := cmp.Compare(a.sp.rtt, b.sp.rtt); c != 0 {
				return c
			}
			fa, fb := st.devFree[a.d.Index], st.devFree[b.d.Index]
			if (fa == 0) != (fb == 0) {
				if fb == 0 {
					return -1
				}
				return 1
			}
			if c := cmp.Compare(fa, fb); c != 0 {
				return c
			}
			if c := cmp.Compare(a.sp.hops, b.sp.hops); c != 0 {
				return c
			}
			return cmp.Compare(s.mem.rank[a.d.Index], s.mem.rank[b.d.Index])
		})
	}
	isCirc := func(d *inventory.Device) bool {
		return slices.ContainsFunc(circ, func(c node) bool { return c.d == d })
	}
	for _, c := range circ {
		if w.done() {
			return
		}
		w.offerNode(c.d, c.sp)
	}
	for ci := range r.mem {
		if w.done() {
			return
		}
		cl := &r.mem[ci]
		// Blocks of the class not offered here: circuited nodes' (offered
		// above) and, when explaining, full nodes'.
		skipBlocks, skipBytes := 0, int64(0)
		for _, c := range circ {
			if c.sp.class == int32(ci) {
				skipBlocks += len(c.d.Blocks)
				skipBytes += c.d.BlockBytes * int64(len(c.d.Blocks))
			}
		}
		if cl.rtt > w.bound {
			if !w.explain {
				return // classes come by round trip: the rest are farther
			}
			w.counts[reasonIndex(TooFar)] += cl.blocks - skipBlocks
			continue
		}
		masks := w.sc.masks[:0]
		present := uint64(0)
		for _, sub := range cl.subs {
			for _, sp := range sub.spans {
				m := st.memFree.within(int(sp.lo), int(sp.hi))
				masks = append(masks, m)
				present |= m
			}
		}
		w.sc.masks = masks
		offered, offeredBytes := 0, int64(0)
		visit := func(rk int, sp span) {
			d := s.mem.devs[rk]
			if isCirc(d) {
				return
			}
			offered += len(d.Blocks)
			offeredBytes += d.BlockBytes * int64(len(d.Blocks))
			w.offerNode(d, sp)
		}
		if w.explain && bulkExplain && w.simple() {
			// Spans on an optical fabric where every host port carries a
			// circuit: their nodes other than the circuits' peers all
			// fail the same way (port-busy for each free block, in-use
			// for each held one), counted from the index's sums instead
			// of block by block. A saturated pod explains a refusal in
			// O(log n), not by walking the pod.
			k := 0
			present &= 1
			for _, sub := range cl.subs {
				for _, sp := range sub.spans {
					if masks[k]&^1 != 0 {
						if n, bytes, ok := s.countClosed(w, sp, circ, visit); ok {
							offered += n
							offeredBytes += bytes
							masks[k] &= 1
						}
					}
					present |= masks[k]
					k++
				}
			}
		}
		for free := present &^ 1; free != 0 && !w.done(); free &= free - 1 {
			v := uint(bits.TrailingZeros64(free))
			want := uint64(1) << v
			if v == maxBucket {
				s.visitLargest(w, cl, masks, visit)
				break
			}
			k := 0
			for _, sub := range cl.subs {
				for _, sp := range sub.spans {
					if masks[k]&want != 0 {
						s.visitSpan(w, sp, want, visit)
					}
					k++
				}
			}
		}
		if !w.explain || w.done() || present&1 == 0 {
			continue
		}
		s.countFull(w, r, ci, skipBlocks+offered, skipBytes+offeredBytes, isCirc)
	}
}

// bulkExplain turns on countClosed (off in a test that compares both).
var bulkExplain = true

// simple reports whether the need asks for nothing a block's own record
// decides (model, attributes, zone, exact size, affinity): its blocks fail
// or pass on state alone.
func (w *needWalk) simple() bool {
	n := w.n
	return n.Model == "" && len(n.Attrs) == 0 && w.zone == nil && !n.Exact && !w.aff
}

// countClosed counts, when explaining, the non-full memory nodes of span
// sp if the host has no free port on its optical fabric: each node that
// is neither circuited to the host (circ, offered already) nor by this
// plan (visited here) would reject each free block as port-busy and each
// held one as in-use. It returns the blocks and bytes so counted, and
// false (counting nothing) when the fabric has a free host port.
func (s *Scheduler) countClosed(w *needWalk, sp span, circ []node, visit func(int, span)) (int, int64, bool) {
	st := w.o.st
	f := s.mem.devs[sp.lo].Fabric
	if f.Kind != inventory.OpticalCircuit || !w.o.closed(f) {
		return 0, 0, false
	}
	in := func(d *inventory.Device) (int, bool) {
		r := int(s.mem.rank[d.Index])
		return r, d.Fabric == f && r >= int(sp.lo) && r < int(sp.hi) && st.devFree[d.Index] > 0
	}
	var out []int // ranks taken out of the sum
	for _, c := range circ {
		if r, ok := in(c.d); ok {
			out = append(out, r)
		}
	}
	var peers []int
	for _, c := range w.o.circuits {
		if r, ok := in(c.d); ok {
			peers = append(peers, r)
		}
	}
	slices.Sort(peers)
	peers = slices.Compact(peers)
	out = append(out, peers...)
	slices.Sort(out)
	sum := st.memFree.sums(int(sp.lo), int(sp.hi))
	for _, r := range slices.Compact(out) {
		sum = sum.minus(st.memFree.leaf(r, st.devFree[s.mem.devs[r].Index]))
	}
	w.counts[reasonIndex(PortBusy)] += int(sum.free)
	w.counts[reasonIndex(InUse)] += int(sum.avail - sum.free)
	w.blocked += int(sum.avail)
	w.blockedBytes += sum.availBytes
	for _, r := range peers {
		if !slices.ContainsFunc(circ, func(c node) bool { return c.d == s.mem.devs[r] }) {
			visit(r, sp)
		}
	}
	return int(sum.avail), sum.availBytes, true
}

// visitSpan offers the nodes of span sp whose free count is in bucket
// want, in rank order. When placing (not explaining), once every host port
// on the span's optical fabric carries a circuit, only the nodes this plan
// has circuited can take more: the others would all fail for want of a
// port, so they are not visited.
func (s *Scheduler) visitSpan(w *needWalk, sp span, want uint64, visit func(int, span)) {
	st := w.o.st
	f := s.mem.devs[sp.lo].Fabric
	for rk := st.memFree.next(int(sp.lo), int(sp.hi), want); rk >= 0 && !w.done(); rk = st.memFree.next(rk+1, int(sp.hi), want) {
		if !w.explain && w.o.closed(f) {
			var peers []int
			for _, c := range w.o.circuits {
				d := c.d
				if r := int(s.mem.rank[d.Index]); d.Fabric == f && r >= rk && r < int(sp.hi) && bucket(st.devFree[d.Index])&want != 0 {
					peers = append(peers, r)
				}
			}
			slices.Sort(peers)
			for _, r := range slices.Compact(peers) {
				if w.done() {
					return
				}
				visit(r, sp)
			}
			return
		}
		visit(rk, sp)
	}
}

// visitLargest offers the class's nodes with maxBucket or more free blocks,
// which share one bucket: in exact order of free blocks, hops, rank.
func (s *Scheduler) visitLargest(w *needWalk, cl *memClass, masks []uint64, visit func(int, span)) {
	st := w.o.st
	type big struct {
		rk   int
		free int32
		sp   span
	}
	var nodes []big
	const want = uint64(1) << maxBucket
	k := 0
	for _, sub := range cl.subs {
		for _, sp := range sub.spans {
			if masks[k]&want != 0 {
				for rk := st.memFree.next(int(sp.lo), int(sp.hi), want); rk >= 0; rk = st.memFree.next(rk+1, int(sp.hi), want) {
					nodes = append(nodes, big{rk, st.devFree[s.mem.devs[rk].Index], sp})
				}
			}
			k++
		}
	}
	slices.SortStableFunc(nodes, func(a, b big) int {
		if c := cmp.Compare(a.free, b.free); c != 0 {
			return c
		}
		if c := cmp.Compare(a.sp.hops, b.sp.hops); c != 0 {
			return c
		}
		return cmp.Compare(a.rk, b.rk)
	})
	for _, nd := range nodes {
		if w.done() {
			return
		}
		visit(nd.rk, nd.sp)
	}
}

// countFull counts, for an explanation, the blocks of the class's full
// nodes (those not offered: the class's blocks less seen of them). When
// the need filters by nothing but round trip, each of them is in use, or
// a duplicate when the request already holds it; otherwise they are
// offered one by one, which gives each its first failing check.
func (s *Scheduler) countFull(w *needWalk, r *reach, ci int, seen int, seenBytes int64, isCirc func(*inventory.Device) bool) {
	cl := &r.mem[ci]
	n := w.n
	if n.Model != "" || len(n.Attrs) > 0 || w.zone != nil || n.Exact || w.aff {
		st := w.o.st
		for _, sub := range cl.subs {
			for _, sp := range sub.spans {
				for rk := st.memFree.next(int(sp.lo), int(sp.hi), 1); rk >= 0; rk = st.memFree.next(rk+1, int(sp.hi), 1) {
					if d := s.mem.devs[rk]; !isCirc(d) {
						w.offerNode(d, sp)
					}
				}
			}
		}
		return
	}
	full, fullBytes := cl.blocks-seen, cl.bytes-seenBytes
	for _, bi := range slices.Compact(slices.Sorted(slices.Values(w.o.used))) {
		b := s.top.Blocks[bi]
		d := b.Device
		if d == nil || d.Kind != inventory.Memory || w.o.st.devFree[d.Index] != 0 || isCirc(d) {
			continue
		}
		if sp, ok := r.locate(s.mem.rank[d.Index]); ok && int(sp.class) == ci {
			w.count(Duplicate)
			full--
			fullBytes -= b.CapacityBytes
		}
	}
	w.counts[reasonIndex(InUse)] += full
	w.blocked += full
	w.blockedBytes += fullBytes
}

// rejection explains a need that could not be filled.
func (w *needWalk) rejection(ni int) *Rejection {
	n := w.n
	counts := map[Reason]int{}
	for i, c := range w.counts {
		if c > 0 {
			counts[counted[i]] = c
		}
	}
	wantDesc := fmt.Sprintf("%d × %s", w.want, n.Kind)
	if w.want < 0 {
		wantDesc = fmt.Sprintf("%s of memory", units.FormatBytes(n.CapacityBytes))
	}
	if n.Model != "" {
		wantDesc += " model=" + n.Model
	}
	// Name a transient reason only when the need would fit once those
	// blocks free up; otherwise the request can never fit this host.
	order := []Reason{InUse, PortBusy, DrawerHosts, AffinityFailed, TooFar, Mismatch, TooSmall, OutsideZone, Unreachable}
	if (w.want >= 0 && w.got+w.blocked < w.want) || (w.want < 0 && w.gotBytes+w.blockedBytes < n.CapacityBytes) {
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
	host := w.o.host.ID
	detail := fmt.Sprintf("host %s: %s wanted, %d found", host, wantDesc, w.got)
	if w.want < 0 {
		detail = fmt.Sprintf("host %s: %s wanted, %s found", host, wantDesc, units.FormatBytes(w.gotBytes))
	}
	if len(why) > 0 {
		detail += " (rejected: " + strings.Join(why, ", ") + ")"
	}
	if reason == TooFar {
		detail += fmt.Sprintf("; bound %.0f ns", w.bound)
	}
	return &Rejection{Host: host, Need: ni, Reason: reason, Detail: detail}
}

func attrsMatch(b *inventory.Block, want map[string]string) bool {
	for k, v := range want {
		switch k {
		case "model":
			if !strings.EqualFold(b.Model, v) {
				return false
			}
		case "vendor":
			if b.Device == nil || !strings.EqualFold(b.Device.Vendor, v) {
				return false
			}
		default:
			if b.Attrs[k] != v {
				return false
			}
		}
	}
	return true
}
