package drive

import (
	"context"
	"fmt"
	"slices"
	"time"

	"rackpool/internal/inventory"
)

// Balancing: the pool is handed out as blocknodes register (fill gives
// each free drive to the node with the fewest), so the first node to
// register takes every drive and the next finds none free. balance
// evens that out as nodes register and come back: while an active node
// serves at least two drives more than another active node with room that
// reaches one of them, one of its idle drives moves there (a planned
// move: the old owner lets go before the new one is mapped). A drive is
// idle when no client holds it: its owner reported no connection to it in
// its last heartbeat, and no token granted for it is still valid. A drive
// in use stays where it is; it is balanced later, once idle. Each move
// narrows the gap between two nodes, so balancing ends, and it never
// moves a drive back and forth.

// inUse reports whether drive d has a client: a connection its owner
// reported open in its last heartbeat, or a token granted for it that
// expires after now. m.mu held.
func (m *Manager) inUse(d *Drive, now time.Time) bool {
	if n := m.nodes[d.Node]; n != nil && n.inUse[d.ID] {
		return true
	}
	return m.grants[d.ID].After(now)
}

// balance moves idle drives from the busiest active nodes to the least
// busy until no move narrows a gap of two or more. m.ops held.
func (m *Manager) balance(ctx context.Context) {
	m.mu.Lock()
	bound := len(m.drives) // each move narrows a gap: fewer moves than drives
	m.mu.Unlock()
	for range bound {
		id, from, to, why := m.nextBalanceMove()
		if id == "" {
			return
		}
		if err := m.move(ctx, id, to, why); err != nil {
			m.o.Logger.Warn("balance drive", "drive", id, "from", from, "to", to, "err", err)
			return
		}
	}
}

// nextBalanceMove picks the next move: from the node with the most drives
// that has an idle one some node with at least two fewer can take, to the
// node with the fewest such (then the lower rate of operations, then ID);
// of the donor's idle drives that node reaches, one of the kind the donor
// has most more of than it (so that SSDs and HDDs are shared out alike),
// then the first by ID. The drive is taken out of service before m.mu is
// released, so no token is granted for it between this choice and the
// move. m.ops held.
func (m *Manager) nextBalanceMove() (id, from, to, why string) {
	now := m.o.Clock.Now()
	m.mu.Lock()
	defer m.mu.Unlock()
	count := map[string]int{}
	var active []*Node
	for _, n := range m.nodes {
		if n.Online && !n.Parked && !now.Before(n.HoldUntil) {
			active = append(active, n)
			count[n.ID] = 0
		}
	}
	if len(active) < 2 {
		return "", "", "", ""
	}
	kinds := map[string]map[inventory.Kind]int{} // node -> kind -> drives
	idle := map[string][]string{}
	for _, d := range m.drives {
		if _, ok := count[d.Node]; !ok || d.State == Failed {
			continue
		}
		count[d.Node]++
		k := m.o.Topology.Device(d.ID).Kind
		if kinds[d.Node] == nil {
			kinds[d.Node] = map[inventory.Kind]int{}
		}
		kinds[d.Node][k]++
		if _, moving := m.handovers[d.ID]; d.State == Online && m.ready[d.ID] && !moving && !m.inUse(d, now) {
			idle[d.Node] = append(idle[d.Node], d.ID)
		}
	}
	// Donors, busiest first.
	slices.SortFunc(active, func(a, b *Node) int {
		if c := count[b.ID] - count[a.ID]; c != 0 {
			return c
		}
		return cmpString(a.ID, b.ID)
	})
	for _, donor := range active {
		ds := idle[donor.ID]
		slices.Sort(ds)
		// The least busy node that can take one of ds.
		var best *Node
		for _, n := range active {
			if count[n.ID] > count[donor.ID]-2 || count[n.ID] >= n.MaxDrives || !slices.ContainsFunc(ds, func(d string) bool { return m.reaches(n.ID, d) }) {
				continue
			}
			if best == nil || count[n.ID] < count[best.ID] || count[n.ID] == count[best.ID] && (n.Rate < best.Rate || n.Rate == best.Rate && n.ID < best.ID) {
				best = n
			}
		}
		if best == nil {
			continue
		}
		pick, gap := "", 0
		for _, d := range ds {
			k := m.o.Topology.Device(d).Kind
			if g := kinds[donor.ID][k] - kinds[best.ID][k]; m.reaches(best.ID, d) && (pick == "" || g > gap) {
				pick, gap = d, g
			}
		}
		m.ready[pick] = false
		return pick, donor.ID, best.ID, fmt.Sprintf("balanced: %s served %d drives, %s %d", donor.ID, count[donor.ID], best.ID, count[best.ID])
	}
	return "", "", "", ""
}
