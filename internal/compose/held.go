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

// Holders: blocks used outside composition — the memory a lease lives in —
// are held by a composition record in state Held, one per holder (the
// memory lease manager keeps one per memory node). The record has an ID and
// an owner name (Name), no host, the blocks it holds and a version, and is
// stored and checked by the store like every composition: the store's
// block limits keep compositions, reservations and holders apart, and two
// replicas changing the same holder conflict on its version. It is held in
// the scheduler state too, so placement never offers its blocks, and it is
// attached to nothing. Its owner changes the block set with SetHeld,
// committing the records it keeps beside it (store.Plan.Objects) in the
// same plan.

// SetHeld makes holder id, owned by owner, hold exactly blocks, and
// commits objs in the same store plan: all or nothing. The first call
// creates the record; an empty blocks deletes it (objs are still
// committed). Blocks must be device blocks that no composition, reservation
// or other holder holds (ErrBadRequest, ErrBlockBusy). Concurrent calls for
// the same holder are refused with ErrBusy: its owner serialises them.
func (m *Manager) SetHeld(ctx context.Context, id, owner string, blocks []string, objs []store.ObjectChange) error {
	ctx = context.WithoutCancel(ctx)
	blocks = slices.Compact(slices.Sorted(slices.Values(blocks)))
	m.mu.Lock()
	cur := m.comps[id]
	switch {
	case id == "" || owner == "":
		m.mu.Unlock()
		return fmt.Errorf("%w: a holder needs an ID and an owner", ErrBadRequest)
	case cur != nil && cur.State != inventory.Held:
		m.mu.Unlock()
		return fmt.Errorf("%w: %s is a %s composition, not a holder", ErrBadRequest, id, cur.State)
	case m.running[id]:
		m.mu.Unlock()
		return fmt.Errorf("%w: holder %s is being changed", ErrBusy, id)
	}
	var have []string
	if cur != nil {
		have = cur.Blocks
	}
	var add, drop []string
	for _, b := range blocks {
		blk := m.top.Block(b)
		if blk == nil || blk.Device == nil {
			m.mu.Unlock()
			return fmt.Errorf("hold %s: %w: not a device block", b, ErrBadRequest)
		}
		if slices.Contains(have, b) {
			continue
		}
		if owners := m.owners[b]; len(owners) > 0 {
			m.mu.Unlock()
			return fmt.Errorf("hold %s: %w: in %s", b, ErrBlockBusy, strings.Join(owners, ", "))
		}
		add = append(add, b)
	}
	for _, b := range have {
		if !slices.Contains(blocks, b) {
			drop = append(drop, b)
		}
	}
	now := m.clk.Now().UTC()
	next := &inventory.Composition{ID: id, Name: owner, State: inventory.Held, Version: 1, CreatedAt: now, UpdatedAt: now, Blocks: blocks}
	plan := store.Plan{Objects: objs, Limits: m.limits}
	switch {
	case cur == nil && len(blocks) == 0:
		// Nothing held before or after: only the objects.
	case len(blocks) == 0:
		plan.Delete = []store.Deletion{{ID: id, Version: cur.Version}}
	default:
		if cur != nil {
			next.Version, next.CreatedAt = cur.Version+1, cur.CreatedAt
		}
		plan.Put = []*inventory.Composition{next}
	}
	// Take the new blocks now, so no placement offers them while the plan
	// commits; give up the dropped ones only once it has.
	if len(add) > 0 {
		m.hold(next, add)
	}
	m.running[id] = true
	m.mu.Unlock()
	err := m.store.Apply(ctx, plan)
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.running, id)
	if err != nil {
		if len(add) > 0 {
			m.drop(next, add)
		}
		return fmt.Errorf("record holder %s: %w", id, err)
	}
	if len(drop) > 0 {
		m.drop(cur, drop)
	}
	if len(blocks) == 0 {
		delete(m.comps, id)
	} else {
		m.comps[id] = next
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
