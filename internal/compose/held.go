package compose

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"rackpool/internal/inventory"
	"rackpool/internal/schedule"
	"rackpool/internal/store"
)

// Holders: blocks used outside composition — the memory a lease lives in,
// a storage server and the drives it serves — are held by a composition
// record in state Held, one per holder (the memory lease manager keeps one
// per memory node, the drive manager one per blocknode). The record has an
// ID and an owner name (Name), the blocks it holds and a version, and is
// stored and checked by the store like every composition: the store's
// block limits keep compositions, reservations and holders apart, and two
// replicas changing the same holder conflict on its version. It is held in
// the scheduler state too, so placement never offers its blocks. A holder
// without a host (memory leases) is attached to nothing. A holder with a
// host holds that host's compute block and records, in Ports, the host
// port each device block is attached through; its owner drives the fabric
// (Drivers) itself, and the manager restores those attachments at start-up
// and never detaches them as strays. Its owner changes holders with
// SetHeld and SetHolders, committing the records it keeps beside them
// (store.Plan.Objects) in the same plan.

// Holding is the state SetHolders gives one holder.
type Holding struct {
	ID, Owner string
	// Host, when set, is the host the holder runs on: Blocks then includes
	// its compute block, and Ports names the host port of every device
	// block attached through a fabric.
	Host   string
	Blocks []string
	Ports  map[string]string
}

// SetHeld makes holder id, owned by owner, hold exactly blocks, and
// commits objs in the same store plan: all or nothing. The first call
// creates the record; an empty blocks deletes it (objs are still
// committed). Blocks must be device blocks that no composition, reservation
// or other holder holds (ErrBadRequest, ErrBlockBusy). Concurrent calls for
// the same holder are refused with ErrBusy: its owner serialises them.
func (m *Manager) SetHeld(ctx context.Context, id, owner string, blocks []string, objs []store.ObjectChange) error {
	return m.SetHolders(ctx, []Holding{{ID: id, Owner: owner, Blocks: blocks}}, objs)
}

// SetHolders sets several holders in one store plan with objs: all or
// nothing. A block may move from one holder to another in the same call
// (the drive manager's partial remap), since the store checks block limits
// on the plan's outcome. Rules as SetHeld; a holder with a Host may hold
// that host's compute block, and only it.
func (m *Manager) SetHolders(ctx context.Context, hs []Holding, objs []store.ObjectChange) error {
	ctx = context.WithoutCancel(ctx)
	type change struct {
		cur, next *inventory.Composition
		add, drop []string
		delete    bool
	}
	m.mu.Lock()
	changes := make([]change, 0, len(hs))
	ids := map[string]bool{}
	leaving := map[string]string{} // block -> holder of this call giving it up
	for _, h := range hs {
		h.Blocks = slices.Compact(slices.Sorted(slices.Values(h.Blocks)))
		cur := m.comps[h.ID]
		switch {
		case h.ID == "" || h.Owner == "":
			m.mu.Unlock()
			return fmt.Errorf("%w: a holder needs an ID and an owner", ErrBadRequest)
		case ids[h.ID]:
			m.mu.Unlock()
			return fmt.Errorf("%w: holder %s listed twice", ErrBadRequest, h.ID)
		case cur != nil && cur.State != inventory.Held:
			m.mu.Unlock()
			return fmt.Errorf("%w: %s is a %s composition, not a holder", ErrBadRequest, h.ID, cur.State)
		case m.running[h.ID]:
			m.mu.Unlock()
			return fmt.Errorf("%w: holder %s is being changed", ErrBusy, h.ID)
		case h.Host != "" && m.top.Host(h.Host) == nil:
			m.mu.Unlock()
			return fmt.Errorf("%w: holder %s: unknown host %s", ErrBadRequest, h.ID, h.Host)
		case cur != nil && len(cur.Blocks) > 0 && len(h.Blocks) > 0 && cur.Host != h.Host:
			m.mu.Unlock()
			return fmt.Errorf("%w: holder %s is on host %q, not %q", ErrBadRequest, h.ID, cur.Host, h.Host)
		}
		ids[h.ID] = true
		ch := change{cur: cur}
		var have []string
		if cur != nil {
			have = cur.Blocks
		}
		for _, b := range have {
			if !slices.Contains(h.Blocks, b) {
				ch.drop = append(ch.drop, b)
				leaving[b] = h.ID
			}
		}
		now := m.clk.Now().UTC()
		next := &inventory.Composition{ID: h.ID, Name: h.Owner, Host: h.Host, State: inventory.Held, Version: 1,
			CreatedAt: now, UpdatedAt: now, Blocks: h.Blocks}
		for _, b := range h.Blocks {
			blk := m.top.Block(b)
			switch {
			case blk == nil:
				m.mu.Unlock()
				return fmt.Errorf("hold %s: %w: no such block", b, ErrBadRequest)
			case blk.Device == nil && (h.Host == "" || blk.Host == nil || blk.Host.ID != h.Host):
				m.mu.Unlock()
				return fmt.Errorf("hold %s: %w: not a device block or the holder's own host", b, ErrBadRequest)
			}
			if p := h.Ports[b]; p != "" {
				if next.Ports == nil {
					next.Ports = map[string]string{}
				}
				next.Ports[b] = p
			}
			if !slices.Contains(have, b) {
				ch.add = append(ch.add, b)
			}
		}
		if cur != nil {
			next.Version, next.CreatedAt = cur.Version+1, cur.CreatedAt
		}
		ch.next, ch.delete = next, len(h.Blocks) == 0
		changes = append(changes, ch)
	}
	for _, ch := range changes {
		for _, b := range ch.add {
			owners := slices.DeleteFunc(slices.Clone(m.owners[b]), func(o string) bool { return leaving[b] == o })
			if len(owners) > 0 {
				m.mu.Unlock()
				return fmt.Errorf("hold %s: %w: in %s", b, ErrBlockBusy, strings.Join(owners, ", "))
			}
		}
	}
	plan := store.Plan{Objects: objs, Limits: m.limits}
	for _, ch := range changes {
		switch {
		case ch.cur == nil && ch.delete:
			// Nothing held before or after.
		case ch.delete:
			plan.Delete = append(plan.Delete, store.Deletion{ID: ch.cur.ID, Version: ch.cur.Version})
		default:
			plan.Put = append(plan.Put, ch.next)
		}
	}
	// Blocks moving between two holders of this call are taken by the new
	// one at once (the scheduler state counts them twice until the plan
	// commits, which only keeps placement off them); the dropped ones are
	// given up once it has.
	for _, ch := range changes {
		if len(ch.add) > 0 {
			m.hold(ch.next, ch.add)
		}
		m.running[ch.next.ID] = true
	}
	m.mu.Unlock()
	err := m.store.Apply(ctx, plan)
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, ch := range changes {
		delete(m.running, ch.next.ID)
		if err != nil {
			if len(ch.add) > 0 {
				m.drop(ch.next, ch.add)
			}
			continue
		}
		if ch.cur != nil && len(ch.drop) > 0 {
			m.drop(ch.cur, ch.drop)
		}
		if ch.delete {
			m.dropComp(ch.next.ID)
		} else {
			m.putComp(ch.next.ID, ch.next)
		}
	}
	if err != nil {
		ids := make([]string, 0, len(changes))
		for _, ch := range changes {
			ids = append(ids, ch.next.ID)
		}
		return fmt.Errorf("record holder %s: %w", strings.Join(ids, ", "), err)
	}
	return nil
}

// Held returns the blocks holder id holds, nil if none.
func (m *Manager) Held(id string) []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	if c := m.comps[id]; c != nil && c.State == inventory.Held {
		return slices.Clone(c.Blocks)
	}
	return nil
}

// RankMemory ranks memory devices for byte-addressed memory wanted by host
// through the placement engine (schedule.Scheduler.RankMemory).
func (m *Manager) RankMemory(host *inventory.Host, maxRTTNS float64, devices []*inventory.Device, free []uint64) ([]schedule.MemoryChoice, []schedule.Rejection) {
	return m.sched.RankMemory(host, maxRTTNS, devices, free)
}
