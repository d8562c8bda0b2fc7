package topology

import (
	"container/heap"
	"math"
	"slices"

	"rackpool/internal/inventory"
)

// Topology is a validated inventory together with its latency model.
type Topology struct {
	*inventory.Inventory
	// dist[fabric][source switch] is the one-way distance from a host port on
	// the source switch to every switch of the fabric. Only switches that
	// carry host ports are sources.
	dist map[*inventory.Fabric]map[int][]hop
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
	t := &Topology{Inventory: inv, dist: map[*inventory.Fabric]map[int][]hop{}}
	for i, h := range inv.Hosts {
		h.Index = i
	}
	for i, d := range inv.Devices {
		d.Index = i
	}
	for _, f := range inv.Fabrics {
		m := map[int][]hop{}
		for _, p := range f.Ports {
			if _, ok := m[p.Switch.Index]; !ok {
				m[p.Switch.Index] = shortest(f, p.Switch.Index)
			}
		}
		t.dist[f] = m
	}
	return t
}

// shortest runs Dijkstra from switch src; entering a switch costs its
// port-to-port latency and a link costs its propagation delay.
func shortest(f *inventory.Fabric, src int) []hop {
	n := len(f.Switches)
	adj := make([][]edge, n)
	for _, l := range f.Links {
		w := l.Metres * NSPerMetre
		adj[l.A.Index] = append(adj[l.A.Index], edge{l.B.Index, w})
		adj[l.B.Index] = append(adj[l.B.Index], edge{l.A.Index, w})
	}
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

func (t *Topology) portPath(p *inventory.HostPort, d *inventory.Device) (Path, bool) {
	if p.Fabric != d.Fabric {
		return Path{}, false
	}
	if d.Drawer != nil && !slices.Contains(d.Drawer.SlotHostPorts(d.Slot), p.Port) {
		return Path{}, false
	}
	h := t.dist[p.Fabric][p.Switch.Index][d.Switch.Index]
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
