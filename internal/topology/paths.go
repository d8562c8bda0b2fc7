package topology

import (
	"cmp"
	"container/heap"
	"encoding/binary"
	"math"
	"slices"

	"rackpool/internal/inventory"
)

// Topology is a validated inventory together with its latency model.
type Topology struct {
	*inventory.Inventory
	dist map[*inventory.Fabric]*fabricDist
}

// fabricDist holds one fabric's switch-to-switch distances, compressed by
// twin classes. Two switches are twins when they have the same latency and
// the same links (the same neighbours at the same lengths) and are not
// linked to each other: every intra-tray switch of a MONet plane, every
// edge switch under one aggregation switch of a tree. A shortest path from
// a switch never runs through its twin (going to the twin's neighbour
// directly is as short), so a twin's distances are its class
// representative's with the two of them swapped. One Dijkstra per class
// that carries host ports, instead of one per source switch: a 4,096-tray
// MONet plane needs one row, not 4,096 rows of 4,100 switches.
type fabricDist struct {
	class []int32         // switch index -> twin class
	rep   []int32         // twin class -> representative switch
	rows  map[int32][]hop // twin class -> distances from its representative
}

// get returns the one-way distance from a host port on switch src to
// switch dst. src's class must carry host ports.
func (fd *fabricDist) get(src, dst int) hop {
	c := fd.class[src]
	r := int(fd.rep[c])
	row := fd.rows[c]
	switch {
	case src == r:
		return row[dst]
	case dst == src:
		return row[r]
	case dst == r:
		return row[src]
	}
	return row[dst]
}

type hop struct {
	ns   float64 // switch latencies + link propagation, one way
	hops int     // switches traversed
}

// Path is how a host reaches a block.
type Path struct {
	Port  *inventory.HostPort // nil for the host's own compute block
	Hops  int                 // switches traversed one way
	RTTNS float64             // round-trip latency in nanoseconds
}

func newTopology(inv *inventory.Inventory) *Topology {
	t := &Topology{Inventory: inv, dist: map[*inventory.Fabric]*fabricDist{}}
	ports := 0
	for i, h := range inv.Hosts {
		h.Index = i
		for _, p := range h.Ports {
			p.Index = ports
			ports++
		}
	}
	for i, d := range inv.Devices {
		d.Index = i
	}
	for _, f := range inv.Fabrics {
		adj := adjacency(f)
		fd := twins(f, adj)
		fd.rows = map[int32][]hop{}
		for _, p := range f.Ports {
			c := fd.class[p.Switch.Index]
			if _, ok := fd.rows[c]; !ok {
				fd.rows[c] = shortest(f, adj, int(fd.rep[c]))
			}
		}
		t.dist[f] = fd
	}
	return t
}

func adjacency(f *inventory.Fabric) [][]edge {
	adj := make([][]edge, len(f.Switches))
	for _, l := range f.Links {
		w := l.Metres * NSPerMetre
		adj[l.A.Index] = append(adj[l.A.Index], edge{l.B.Index, w})
		adj[l.B.Index] = append(adj[l.B.Index], edge{l.A.Index, w})
	}
	return adj
}

// twins groups f's switches into twin classes (see fabricDist). A switch
// linked to itself is its own class.
func twins(f *inventory.Fabric, adj [][]edge) *fabricDist {
	fd := &fabricDist{class: make([]int32, len(f.Switches))}
	byKey := map[string]int32{}
	var key []byte
	for i, sw := range f.Switches {
		es := slices.Clone(adj[i])
		slices.SortFunc(es, func(a, b edge) int {
			if a.to != b.to {
				return a.to - b.to
			}
			return cmp.Compare(a.ns, b.ns)
		})
		self := slices.ContainsFunc(es, func(e edge) bool { return e.to == i })
		key = binary.LittleEndian.AppendUint64(key[:0], math.Float64bits(sw.LatencyNS))
		for _, e := range es {
			key = binary.LittleEndian.AppendUint32(key, uint32(e.to))
			key = binary.LittleEndian.AppendUint64(key, math.Float64bits(e.ns))
		}
		c, ok := byKey[string(key)]
		if !ok || self {
			c = int32(len(fd.rep))
			fd.rep = append(fd.rep, int32(i))
			if !self {
				byKey[string(key)] = c
			}
		}
		fd.class[i] = c
	}
	return fd
}

// shortest runs Dijkstra from switch src; entering a switch costs its
// port-to-port latency and a link costs its propagation delay.
func shortest(f *inventory.Fabric, adj [][]edge, src int) []hop {
	n := len(f.Switches)
	out := make([]hop, n)
	for i := range out {
		out[i] = hop{ns: math.Inf(1)}
	}
	out[src] = hop{ns: f.Switches[src].LatencyNS, hops: 1}
	pq := &queue{{src, out[src].ns}}
	for pq.Len() > 0 {
		it := heap.Pop(pq).(item)
		if it.ns > out[it.node].ns {
			continue
		}
		for _, e := range adj[it.node] {
			ns := it.ns + e.ns + f.Switches[e.to].LatencyNS
			h := out[it.node].hops + 1
			if ns < out[e.to].ns || (ns == out[e.to].ns && h < out[e.to].hops) {
				out[e.to] = hop{ns: ns, hops: h}
				heap.Push(pq, item{e.to, ns})
			}
		}
	}
	return out
}

type edge struct {
	to int
	ns float64
}

type item struct {
	node int
	ns   float64
}

type queue []item

func (q queue) Len() int           { return len(q) }
func (q queue) Less(i, j int) bool { return q[i].ns < q[j].ns }
func (q queue) Swap(i, j int)      { q[i], q[j] = q[j], q[i] }
func (q *queue) Push(x any)        { *q = append(*q, x.(item)) }
func (q *queue) Pop() any {
	old := *q
	it := old[len(old)-1]
	*q = old[:len(old)-1]
	return it
}

// Reaches reports whether host port p can reach device d at all: same
// fabric, a path through the switches, and for a chassis slot, a host port
// the drawer's mode connects to that slot.
func (t *Topology) Reaches(p *inventory.HostPort, d *inventory.Device) bool {
	_, ok := t.portPath(p, d)
	return ok
}

// Reachable returns the blocks host h can be composed with, those Path
// finds a way to, in topology order: its compute block and the blocks of
// each device a port of h reaches. It reads the devices of h's fabrics,
// not every block of the pool (a resource zone at 10^5 blocks read 10^5
// blocks a host).
func (t *Topology) Reachable(h *inventory.Host) []*inventory.Block {
	var out []*inventory.Block
	if h.Block != nil {
		out = append(out, h.Block)
	}
	seen := map[*inventory.Device]bool{}
	for _, p := range h.Ports {
		for _, d := range p.Fabric.Devices {
			if !seen[d] && t.Reaches(p, d) {
				seen[d] = true
				out = append(out, d.Blocks...)
			}
		}
	}
	slices.SortFunc(out, func(a, b *inventory.Block) int { return a.Index - b.Index })
	return out
}

// PortPath returns how host port p reaches device d (hops and round trip
// on that port, not the host's best), and false when it cannot.
func (t *Topology) PortPath(p *inventory.HostPort, d *inventory.Device) (Path, bool) {
	return t.portPath(p, d)
}

func (t *Topology) portPath(p *inventory.HostPort, d *inventory.Device) (Path, bool) {
	if p.Fabric != d.Fabric {
		return Path{}, false
	}
	if d.Drawer != nil && !slices.Contains(d.Drawer.SlotHostPorts(d.Slot), p.Port) {
		return Path{}, false
	}
	h := t.dist[p.Fabric].get(p.Switch.Index, d.Switch.Index)
	if math.IsInf(h.ns, 1) {
		return Path{}, false
	}
	oneWay := h.ns + (p.Metres+d.Metres)*NSPerMetre
	return Path{Port: p, Hops: h.hops, RTTNS: 2*oneWay + d.OverheadNS}, true
}

// Path returns the best (lowest round-trip) way host h reaches block b, and
// false when h cannot reach it.
func (t *Topology) Path(h *inventory.Host, b *inventory.Block) (Path, bool) {
	if b.Host != nil {
		return Path{}, b.Host == h
	}
	best, found := Path{}, false
	for _, p := range h.Ports {
		if p.Fabric != b.Device.Fabric {
			continue
		}
		if pp, ok := t.portPath(p, b.Device); ok && (!found || pp.RTTNS < best.RTTNS) {
			best, found = pp, true
		}
	}
	return best, found
}

// TwinClass returns the twin class of switch sw of fabric f: switches of
// one class are at the same distance from every switch outside the class
// and from each other (see fabricDist), so a host port sees every device on
// them alike, except those on its own switch.
func (t *Topology) TwinClass(f *inventory.Fabric, sw int) int {
	return int(t.dist[f].class[sw])
}
