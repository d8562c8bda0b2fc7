package schedule

import (
	"cmp"
	"encoding/binary"
	"math"
	"slices"
	"sort"

	"rackpool/internal/inventory"
	"rackpool/internal/topology"
)

// reach is what one host reaches, in the order the scheduler tries it.
// Hosts cabled alike (same fabrics, switches, cable lengths and, where a
// drawer decides, port names) share one: the 12 CPU cards of a MONet tray.
type reach struct {
	// byKind lists the blocks of every kind but memory by round trip,
	// then hops, then block order.
	byKind map[inventory.Kind][]cand
	// mem lists memory nodes in classes of equal round trip, ascending.
	mem       []memClass
	memBlocks int    // memory blocks reachable
	spans     []span // every memory span, by rank, for locate
	// drawers is set when a fabric the host is cabled to has chassis
	// drawers, whose host limits depend on which host asks.
	drawers bool
}

type cand struct {
	blk  int32
	port int16 // index into host.Ports
	hops int16
	rtt  float64
}

// memClass is the memory nodes the host sees at one round trip.
type memClass struct {
	rtt    float64
	blocks int   // memory blocks in the class
	bytes  int64 // and their capacity
	subs   []memSub
}

// memSub is the part of a class at one hop count.
type memSub struct {
	hops  int16
	spans []span
}

// span is the memory nodes of ranks [lo, hi), reached through host port
// port (an index into host.Ports).
type span struct {
	lo, hi int32
	port   int16
	hops   int16
	class  int32 // index into reach.mem
	rtt    float64
}

// fabricMem is one fabric's devices arranged for building reaches: memory
// nodes grouped so that a host port sees every node of a group alike
// (same twin class of switch, cable length and overhead), except the nodes
// on the port's own switch.
type fabricMem struct {
	groups   []memGroup
	onSwitch map[int][]*inventory.Device // memory nodes by switch index
	others   []*inventory.Device         // devices of other kinds
}

type memGroup struct {
	spans [][2]int32          // rank ranges
	reps  []*inventory.Device // the first node on each switch of the group
}

func newFabricMem(top *topology.Topology, l *memLayout, f *inventory.Fabric) *fabricMem {
	fm := &fabricMem{onSwitch: map[int][]*inventory.Device{}}
	// A node in a drawer is reached only through the ports its slot's
	// mode allows: it is a group of its own.
	type key struct {
		class        int
		metres, over float64
		drawerDevice int
	}
	byKey := map[key]int{}
	seen := map[[2]int]bool{} // (group, switch)
	for _, d := range f.Devices {
		if d.Kind != inventory.Memory {
			fm.others = append(fm.others, d)
			continue
		}
		k := key{class: top.TwinClass(f, d.Switch.Index), metres: d.Metres, over: d.OverheadNS, drawerDevice: -1}
		if d.Drawer != nil {
			k = key{drawerDevice: d.Index}
		}
		g, ok := byKey[k]
		if !ok {
			g = len(fm.groups)
			byKey[k] = g
			fm.groups = append(fm.groups, memGroup{})
		}
		grp := &fm.groups[g]
		r := l.rank[d.Index]
		if n := len(grp.spans); n > 0 && grp.spans[n-1][1] == r {
			grp.spans[n-1][1] = r + 1
		} else {
			grp.spans = append(grp.spans, [2]int32{r, r + 1})
		}
		if !seen[[2]int{g, d.Switch.Index}] {
			seen[[2]int{g, d.Switch.Index}] = true
			grp.reps = append(grp.reps, d)
		}
		fm.onSwitch[d.Switch.Index] = append(fm.onSwitch[d.Switch.Index], d)
	}
	return fm
}

// reach returns h's reach, building it on first use.
func (s *Scheduler) reach(h *inventory.Host) *reach {
	if r := s.reaches[h.Index].Load(); r != nil {
		return r
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if r := s.reaches[h.Index].Load(); r != nil {
		return r
	}
	if s.fabMem == nil {
		s.fabMem = map[*inventory.Fabric]*fabricMem{}
		s.bySig = map[string]*reach{}
		for _, f := range s.top.Fabrics {
			s.fabMem[f] = newFabricMem(s.top, s.mem, f)
		}
	}
	sig := signature(h)
	r := s.bySig[string(sig)]
	if r == nil {
		r = s.buildReach(h)
		s.bySig[string(sig)] = r
	}
	s.reaches[h.Index].Store(r)
	return r
}

// signature identifies how h is cabled: hosts with the same signature reach
// the same blocks at the same round trips through the same port positions.
func signature(h *inventory.Host) []byte {
	var b []byte
	for _, p := range h.Ports {
		b = append(b, p.Fabric.ID...)
		b = append(b, 0)
		b = binary.LittleEndian.AppendUint32(b, uint32(p.Switch.Index))
		b = binary.LittleEndian.AppendUint64(b, math.Float64bits(p.Metres))
		if len(p.Fabric.Drawers) > 0 {
			b = append(b, p.Port...)
		}
		b = append(b, 0)
	}
	return b
}

func (s *Scheduler) buildReach(h *inventory.Host) *reach {
	r := &reach{byKind: map[inventory.Kind][]cand{}}
	portIndex := func(p *inventory.HostPort) int16 {
		for i, hp := range h.Ports {
			if hp == p {
				return int16(i)
			}
		}
		return -1
	}
	var pieces []span
	piece := func(lo, hi int32, path topology.Path) {
		pieces = append(pieces, span{lo: lo, hi: hi, port: portIndex(path.Port), hops: int16(path.Hops), rtt: path.RTTNS})
	}
	var fabrics []*inventory.Fabric
	for _, p := range h.Ports {
		if !slices.Contains(fabrics, p.Fabric) {
			fabrics = append(fabrics, p.Fabric)
		}
	}
	for _, f := range fabrics {
		r.drawers = r.drawers || len(f.Drawers) > 0
		fm := s.fabMem[f]
		for _, d := range fm.others {
			path, ok := s.top.Path(h, d.Blocks[0])
			if !ok {
				continue
			}
			port := portIndex(path.Port)
			for _, b := range d.Blocks {
				r.byKind[b.Kind] = append(r.byKind[b.Kind], cand{blk: int32(b.Index), port: port, hops: int16(path.Hops), rtt: path.RTTNS})
			}
		}
		// The switches h's ports sit on: their nodes are seen one by one;
		// every other node is seen as its group's representative is.
		var special []int
		for _, p := range h.Ports {
			if p.Fabric == f && !slices.Contains(special, p.Switch.Index) {
				special = append(special, p.Switch.Index)
			}
		}
		var holes []int32
		for _, sw := range special {
			for _, d := range fm.onSwitch[sw] {
				holes = append(holes, s.mem.rank[d.Index])
				if path, ok := s.top.Path(h, d.Blocks[0]); ok {
					rk := s.mem.rank[d.Index]
					piece(rk, rk+1, path)
				}
			}
		}
		slices.Sort(holes)
		for gi := range fm.groups {
			g := &fm.groups[gi]
			var rep *inventory.Device
			for _, d := range g.reps {
				if !slices.Contains(special, d.Switch.Index) {
					rep = d
					break
				}
			}
			if rep == nil {
				continue
			}
			path, ok := s.top.Path(h, rep.Blocks[0])
			if !ok {
				continue
			}
			for _, sp := range g.spans {
				lo := sp[0]
				for _, hole := range holes[sort.Search(len(holes), func(i int) bool { return holes[i] >= sp[0] }):] {
					if hole >= sp[1] {
						break
					}
					if hole > lo {
						piece(lo, hole, path)
					}
					lo = hole + 1
				}
				if lo < sp[1] {
					piece(lo, sp[1], path)
				}
			}
		}
	}
	for _, list := range r.byKind {
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
	r.buildClasses(pieces, s.mem)
	return r
}

// buildClasses sorts memory pieces into round-trip classes and hop
// subclasses, merging neighbouring ranges.
func (r *reach) buildClasses(pieces []span, l *memLayout) {
	slices.SortFunc(pieces, func(a, b span) int {
		if c := cmp.Compare(a.rtt, b.rtt); c != 0 {
			return c
		}
		if c := cmp.Compare(a.hops, b.hops); c != 0 {
			return c
		}
		return cmp.Compare(a.lo, b.lo)
	})
	for _, p := range pieces {
		if n := len(r.mem); n == 0 || r.mem[n-1].rtt != p.rtt {
			r.mem = append(r.mem, memClass{rtt: p.rtt})
		}
		c := &r.mem[len(r.mem)-1]
		p.class = int32(len(r.mem) - 1)
		if n := len(c.subs); n == 0 || c.subs[n-1].hops != p.hops {
			c.subs = append(c.subs, memSub{hops: p.hops})
		}
		sub := &c.subs[len(c.subs)-1]
		if n := len(sub.spans); n > 0 && sub.spans[n-1].hi == p.lo && sub.spans[n-1].port == p.port {
			sub.spans[n-1].hi = p.hi
		} else {
			sub.spans = append(sub.spans, p)
		}
		blocks := int(l.blocks[p.hi] - l.blocks[p.lo])
		c.blocks += blocks
		c.bytes += l.bytes[p.hi] - l.bytes[p.lo]
		r.memBlocks += blocks
	}
	for _, c := range r.mem {
		for _, sub := range c.subs {
			r.spans = append(r.spans, sub.spans...)
		}
	}
	slices.SortFunc(r.spans, func(a, b span) int { return cmp.Compare(a.lo, b.lo) })
}

// locate returns the span holding the memory node of rank rk.
func (r *reach) locate(rk int32) (span, bool) {
	i := sort.Search(len(r.spans), func(i int) bool { return r.spans[i].hi > rk })
	if i < len(r.spans) && r.spans[i].lo <= rk {
		return r.spans[i], true
	}
	return span{}, false
}
