package schedule

import (
	"math"
	"slices"

	"rackpool/internal/inventory"
	"rackpool/internal/topology"
)

// State is the dynamic allocation state the scheduler reads: how many
// compositions hold each block, which optical circuits exist, and which
// hosts use each chassis drawer. The control plane keeps one up to date as
// compositions change; the simulator keeps its own. A State is not safe for
// concurrent mutation; the scheduler only reads it.
type State struct {
	top  *topology.Topology
	used []int32 // compositions holding each block, by block index
	// Optical circuits: the memory node each host port is circuited to and
	// how many blocks use that circuit; circuits per memory node.
	// All by index (HostPort.Index, Device.Index).
	portPeer []*inventory.Device
	portRefs []int32
	circuits []int32
	// Hosts with devices attached in each drawer, with block counts.
	drawerHosts map[*inventory.Drawer]map[*inventory.Host]int
	// Shares (by host index): free cores and local memory, how many shares
	// each host carries, and the index of free capacity the policies
	// search. lastHost is where next-fit resumes.
	freeCores []int32
	freeMem   []int32
	shares    []int32
	fit       *fitIndex
	lastHost  int
	// Free blocks per device (by device index), for memory node ranking,
	// and the memory nodes' free counts indexed by rank (memIndex).
	devFree []int32
	memRank []int32
	memFree *memIndex
	// freeMask has bit i set when block i of a device (in its own order)
	// can join one more composition; devices of up to 64 blocks.
	freeMask []uint64
	// What each host could obtain of pooled memory (obtainable), kept in
	// the fit index: boundless marks hosts with a port on a memory fabric
	// that is not optical (no port limit), ports are the host ports by
	// index, memPort says which are on a memory fabric, portBit gives
	// those on an optical one their fabric's bit (-1 past 64 such
	// fabrics: boundless), peerPorts the ports circuited to each memory
	// node (by device index), and openFree, by fabric bit, the free blocks
	// of the fabric's memory nodes that have a free port of their own.
	boundless []bool
	ports     []*inventory.HostPort
	memPort   []bool
	portBit   []int8
	peerPorts [][]int32
	openFree  []int64
	devBit    []int8 // by device index: its fabric's bit, -1 for none
}

// unbounded is obtainable's answer for a host that reaches memory without
// a circuit, or on more optical memory fabrics than the index has bits.
const unbounded = math.MaxInt32

// obtainable bounds the pooled memory blocks host h could add now: the
// free blocks of the nodes its ports are circuited to, and the fabrics on
// which it has a free port (each worth openFree of it); unbounded with a
// port on a memory fabric without circuits. An upper bound, never less
// than what a plan could take.
func (s *State) obtainable(h *inventory.Host) (int32, uint64) {
	if s.boundless[h.Index] {
		return unbounded, 0
	}
	var sum int32
	var open uint64
	for i, p := range h.Ports {
		if !s.memPort[p.Index] {
			continue
		}
		d := s.portPeer[p.Index]
		if d == nil {
			if s.portBit[p.Index] < 0 {
				return unbounded, 0
			}
			open |= 1 << uint(s.portBit[p.Index])
			continue
		}
		if !slices.ContainsFunc(h.Ports[:i], func(q *inventory.HostPort) bool { return s.portPeer[q.Index] == d }) {
			sum += s.devFree[d.Index]
		}
	}
	return sum, open
}

// nodeOpen reports whether optical memory node d has a free port.
func (s *State) nodeOpen(d *inventory.Device) bool {
	return int(s.circuits[d.Index]) < len(d.Ports)
}

// addOpen adds n to openFree of d's fabric when d counts there.
func (s *State) addOpen(d *inventory.Device, n int32) {
	if b := s.devBit[d.Index]; b >= 0 && s.nodeOpen(d) {
		s.openFree[b] += int64(n)
	}
}

// takes says how host h could take blocks of memory node d as things
// stand: -1 when d is not behind an optical circuit switch (no port
// limit); 1 when a port of h carries a circuit to d; else the free ports
// of h that reach d when d has a free port of its own, 0 when none.
// Blocks, drawers and everything else aside: for bounds when pruning.
func (s *State) takes(h *inventory.Host, d *inventory.Device) int {
	if d.Fabric.Kind != inventory.OpticalCircuit {
		return -1
	}
	open := s.nodeOpen(d)
	k := 0
	for _, hp := range h.Ports {
		if hp.Fabric != d.Fabric {
			continue
		}
		switch s.portPeer[hp.Index] {
		case d:
			return 1
		case nil:
			if open && s.top.Reaches(hp, d) {
				k++
			}
		}
	}
	return k
}

// isPeer reports whether a port of h carries a circuit to d.
func (s *State) isPeer(h *inventory.Host, d *inventory.Device) bool {
	for _, hp := range h.Ports {
		if s.portPeer[hp.Index] == d {
			return true
		}
	}
	return false
}

// hasMemory reports whether fabric f holds memory nodes.
func hasMemory(f *inventory.Fabric) bool {
	for _, d := range f.Devices {
		if d.Kind == inventory.Memory {
			return true
		}
	}
	return false
}

// noteObtainable updates the fit index after what host h could obtain
// may have changed.
func (s *State) noteObtainable(h *inventory.Host) {
	obt, open := s.obtainable(h)
	s.fit.setObtainable(h.Index, obt, open)
}

// NewState returns an empty state (nothing allocated) for top.
func NewState(top *topology.Topology) *State {
	st := &State{
		top:         top,
		used:        make([]int32, len(top.Blocks)),
		portPeer:    make([]*inventory.Device, hostPorts(top)),
		portRefs:    make([]int32, hostPorts(top)),
		circuits:    make([]int32, len(top.Devices)),
		drawerHosts: map[*inventory.Drawer]map[*inventory.Host]int{},
		freeCores:   make([]int32, len(top.Hosts)),
		freeMem:     make([]int32, len(top.Hosts)),
		shares:      make([]int32, len(top.Hosts)),
	}
	for i, h := range top.Hosts {
		st.freeCores[i], st.freeMem[i] = int32(h.Cores), int32(h.MemoryGiB)
	}
	st.devFree = make([]int32, len(top.Devices))
	st.freeMask = make([]uint64, len(top.Devices))
	for i, d := range top.Devices {
		st.devFree[i] = int32(len(d.Blocks))
		if len(d.Blocks) <= 64 {
			st.freeMask[i] = ^uint64(0) >> (64 - len(d.Blocks))
		}
	}
	st.ports = make([]*inventory.HostPort, len(st.portPeer))
	st.memPort = make([]bool, len(st.portPeer))
	st.portBit = make([]int8, len(st.portPeer))
	st.peerPorts = make([][]int32, len(top.Devices))
	st.boundless = make([]bool, len(top.Hosts))
	st.devBit = make([]int8, len(top.Devices))
	memFabric := map[*inventory.Fabric]bool{}
	fabricBit := map[*inventory.Fabric]int8{}
	for _, f := range top.Fabrics {
		memFabric[f] = hasMemory(f)
		fabricBit[f] = -1
		if memFabric[f] && f.Kind == inventory.OpticalCircuit && len(st.openFree) < 64 {
			fabricBit[f] = int8(len(st.openFree))
			st.openFree = append(st.openFree, 0)
		}
	}
	for i, d := range top.Devices {
		st.devBit[i] = -1
		if d.Kind == inventory.Memory && d.Fabric != nil {
			st.devBit[i] = fabricBit[d.Fabric]
			st.addOpen(d, st.devFree[i])
		}
	}
	obt := make([]int32, len(top.Hosts))
	open := make([]uint64, len(top.Hosts))
	for i, h := range top.Hosts {
		for _, p := range h.Ports {
			st.ports[p.Index] = p
			st.memPort[p.Index] = memFabric[p.Fabric]
			st.portBit[p.Index] = fabricBit[p.Fabric]
			if memFabric[p.Fabric] {
				if p.Fabric.Kind != inventory.OpticalCircuit || fabricBit[p.Fabric] < 0 {
					st.boundless[i] = true
				}
			}
		}
		// An empty pod: every port is free.
		obt[i], open[i] = st.obtainable(h)
	}
	st.fit = newFitIndex(st.freeCores, st.freeMem, obt, open, st.openFree)
	l := newMemLayout(top)
	st.memRank = l.rank
	free := make([]int32, len(l.devs))
	for r, d := range l.devs {
		free[r] = st.devFree[d.Index]
	}
	st.memFree = newMemIndex(l, free)
	return st
}

// FreeShare returns the cores and local memory (GiB) host h can still
// give to shares: all of it when unused, none when held whole.
func (s *State) FreeShare(h *inventory.Host) Share {
	return Share{Cores: int(s.freeCores[h.Index]), MemoryGiB: int(s.freeMem[h.Index])}
}

// NextWithRoom returns the index (in topology order) of the first host at
// or after from whose free share holds sh, or -1: O(log hosts) on the
// fit index, not a walk.
func (s *State) NextWithRoom(from int, sh Share) int {
	return s.fit.next(from, &fitAsk{cores: int32(sh.Cores), mem: int32(sh.MemoryGiB)})
}

// Shares returns how many shares host h carries.
func (s *State) Shares(h *inventory.Host) int { return int(s.shares[h.Index]) }

// Commit records plan p: its share of the host, or the host whole, and
// its device blocks. Next-fit resumes from p's host.
func (s *State) Commit(p *Plan) {
	if !p.Share.IsZero() {
		s.AcquireShare(p.Host, p.Share)
	}
	s.Acquire(p.Host, p.Assignments)
	s.lastHost = p.Host.Index
}

// Uncommit undoes Commit (the next-fit position stays).
func (s *State) Uncommit(p *Plan) {
	s.Release(p.Host, p.Assignments)
	if !p.Share.IsZero() {
		s.ReleaseShare(p.Host, p.Share)
	}
}

// AcquireShare records that a composition holds share sh of host h.
func (s *State) AcquireShare(h *inventory.Host, sh Share) {
	i := h.Index
	s.freeCores[i] -= int32(sh.Cores)
	s.freeMem[i] -= int32(sh.MemoryGiB)
	s.shares[i]++
	s.fit.set(i, s.freeCores[i], s.freeMem[i])
}

// ReleaseShare undoes AcquireShare.
func (s *State) ReleaseShare(h *inventory.Host, sh Share) {
	i := h.Index
	if s.shares[i] == 0 {
		return
	}
	s.freeCores[i] = min(s.freeCores[i]+int32(sh.Cores), int32(h.Cores))
	s.freeMem[i] = min(s.freeMem[i]+int32(sh.MemoryGiB), int32(h.MemoryGiB))
	s.shares[i]--
	s.fit.set(i, s.freeCores[i], s.freeMem[i])
}

// holdWhole updates the free capacity of a host whose compute block was
// acquired or released.
func (s *State) holdWhole(h *inventory.Host) {
	i := h.Index
	if s.used[h.Block.Index] > 0 {
		s.freeCores[i], s.freeMem[i] = 0, 0
	} else {
		s.freeCores[i], s.freeMem[i] = int32(h.Cores), int32(h.MemoryGiB)
	}
	s.fit.set(i, s.freeCores[i], s.freeMem[i])
}

// Topology returns the topology the state is about.
func (s *State) Topology() *topology.Topology { return s.top }

// Used returns how many compositions hold b.
func (s *State) Used(b *inventory.Block) int { return int(s.used[b.Index]) }

// Free reports whether b can join one more composition.
func (s *State) Free(b *inventory.Block) bool { return int(s.used[b.Index]) < b.MaxCompositions }

// Circuit returns the memory node host port p is circuited to, if any.
func (s *State) Circuit(p *inventory.HostPort) *inventory.Device { return s.portPeer[p.Index] }

// hasCircuit reports whether any port of h carries an optical circuit.
func (s *State) hasCircuit(h *inventory.Host) bool {
	for _, p := range h.Ports {
		if s.portPeer[p.Index] != nil {
			return true
		}
	}
	return false
}

func hostPorts(top *topology.Topology) int {
	n := 0
	for _, h := range top.Hosts {
		n += len(h.Ports)
	}
	return n
}

// Acquire records that host holds the assignments.
func (s *State) Acquire(host *inventory.Host, as []Assignment) {
	for _, a := range as {
		s.used[a.Block.Index]++
		d := a.Block.Device
		if d != nil && int(s.used[a.Block.Index]) == a.Block.MaxCompositions {
			s.devFree[d.Index]--
			s.addOpen(d, -1)
			s.noteFree(d, a.Block, false)
			s.notePeers(d, -1)
		}
		if d == nil {
			if a.Block.Host != nil && s.shares[a.Block.Host.Index] == 0 {
				s.holdWhole(a.Block.Host)
			}
			continue
		}
		if d.Fabric.Kind == inventory.OpticalCircuit && a.Port != nil {
			if s.portRefs[a.Port.Index] == 0 {
				s.portPeer[a.Port.Index] = d
				s.addOpen(d, -s.devFree[d.Index])
				s.circuits[d.Index]++
				s.addOpen(d, s.devFree[d.Index])
				s.peerPorts[d.Index] = append(s.peerPorts[d.Index], int32(a.Port.Index))
				s.noteObtainable(a.Port.Host)
			}
			s.portRefs[a.Port.Index]++
		}
		if d.Drawer != nil {
			m := s.drawerHosts[d.Drawer]
			if m == nil {
				m = map[*inventory.Host]int{}
				s.drawerHosts[d.Drawer] = m
			}
			m[host]++
		}
	}
}

// notePeers updates what the hosts circuited to memory node d could
// obtain, after d's free blocks changed by delta: each host counts d once,
// however many of its ports carry a circuit to it.
func (s *State) notePeers(d *inventory.Device, delta int32) {
	pp := s.peerPorts[d.Index]
	for k, pi := range pp {
		h := s.ports[pi].Host
		if slices.ContainsFunc(pp[:k], func(q int32) bool { return s.ports[q].Host == h }) {
			continue
		}
		if !s.boundless[h.Index] {
			s.fit.addObtainable(h.Index, delta)
		}
	}
}

// noteFree updates the indexes after block b of d became free or full.
func (s *State) noteFree(d *inventory.Device, b *inventory.Block, free bool) {
	if r := s.memRank[d.Index]; r >= 0 {
		s.memFree.set(int(r), s.devFree[d.Index])
	}
	if len(d.Blocks) <= 64 {
		bit := uint64(1) << uint(b.Index-d.Blocks[0].Index)
		if free {
			s.freeMask[d.Index] |= bit
		} else {
			s.freeMask[d.Index] &^= bit
		}
	}
}

// Release undoes Acquire.
func (s *State) Release(host *inventory.Host, as []Assignment) {
	for _, a := range as {
		d := a.Block.Device
		if s.used[a.Block.Index] > 0 {
			if d != nil && int(s.used[a.Block.Index]) == a.Block.MaxCompositions {
				s.devFree[d.Index]++
				s.addOpen(d, 1)
				s.noteFree(d, a.Block, true)
				s.notePeers(d, 1)
			}
			s.used[a.Block.Index]--
		}
		if d == nil {
			if a.Block.Host != nil && s.shares[a.Block.Host.Index] == 0 {
				s.holdWhole(a.Block.Host)
			}
			continue
		}
		if d.Fabric.Kind == inventory.OpticalCircuit && a.Port != nil && s.portRefs[a.Port.Index] > 0 {
			s.portRefs[a.Port.Index]--
			if s.portRefs[a.Port.Index] == 0 {
				s.portPeer[a.Port.Index] = nil
				s.addOpen(d, -s.devFree[d.Index])
				s.circuits[d.Index]--
				s.addOpen(d, s.devFree[d.Index])
				pp := s.peerPorts[d.Index]
				if k := slices.Index(pp, int32(a.Port.Index)); k >= 0 {
					s.peerPorts[d.Index] = slices.Delete(pp, k, k+1)
				}
				s.noteObtainable(a.Port.Host)
			}
		}
		if m := s.drawerHosts[d.Drawer]; d.Drawer != nil && m != nil {
			m[host]--
			if m[host] <= 0 {
				delete(m, host)
			}
		}
	}
}

// Assignments resolves a composition's blocks and ports into assignments.
// Unknown IDs are skipped.
func (s *State) Assignments(c *inventory.Composition, blocks []string) []Assignment {
	h := s.top.Host(c.Host)
	out := make([]Assignment, 0, len(blocks))
	for _, id := range blocks {
		b := s.top.Block(id)
		if b == nil {
			continue
		}
		a := Assignment{Block: b}
		if h != nil && b.Device != nil {
			for _, p := range h.Ports {
				if p.ID == c.Ports[id] && p.Fabric == b.Device.Fabric {
					a.Port = p
				}
			}
			if a.Port == nil {
				if path, ok := s.top.Path(h, b); ok {
					a.Port = path.Port
				}
			}
		}
		out = append(out, a)
	}
	return out
}
