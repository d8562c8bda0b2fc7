package compose

import (
	"context"
	"errors"
	"fmt"
	"time"

	"rackpool/internal/clock"
	"rackpool/internal/fabric"
	"rackpool/internal/inventory"
	"rackpool/internal/schedule"
	"rackpool/internal/store"
)

// Reservations (Redfish CompositionReservations) are compositions in state
// Reserved: placed, recorded and holding their blocks in the scheduler
// state and the store exactly like a composition, so nothing else can take
// them, but with nothing attached. A manifest stanza (Apply, Stanza.Reserved)
// turns one into a composed system (the same blocks and host ports, a new
// system ID) in one store plan that deletes the reservation and records the
// system; Release and expiry delete it. Expiry is checked lazily before every placement and by
// ExpireLoop, so an expired reservation never blocks a request.

// Reserve places req and holds the result until ttl has passed (0: the
// policy's ReservationDuration).
func (m *Manager) Reserve(ctx context.Context, req Request, ttl time.Duration) (*inventory.Composition, error) {
	rs, err := m.ReserveAll(ctx, []Request{req}, ttl)
	if err != nil {
		var se *StanzaError
		if errors.As(err, &se) {
			return nil, se.Err
		}
		return nil, err
	}
	return rs[0], nil
}

// ReserveAll places every request of reqs, each seeing the blocks the ones
// before it took, and records them all in one store plan, or none: a
// failure to place returns a *StanzaError naming the request. They are
// held until ttl has passed; 0 means the policy's ReservationDuration.
func (m *Manager) ReserveAll(ctx context.Context, reqs []Request, ttl time.Duration) ([]*inventory.Composition, error) {
	ctx = context.WithoutCancel(ctx)
	if ttl == 0 {
		ttl = m.Policy().ReservationDuration
	}
	if ttl < 0 {
		return nil, fmt.Errorf("%w: reservation duration must be positive", ErrBadRequest)
	}
	m.Expire(ctx)
	m.mu.Lock()
	var rs []*inventory.Composition
	undo := func() {
		for _, r := range rs {
			m.drop(r, r.Blocks)
			m.dropComp(r.ID)
		}
	}
	for i, req := range reqs {
		r, err := m.place(req, inventory.Reserved, "res-")
		if err != nil {
			undo()
			m.mu.Unlock()
			return nil, &StanzaError{Index: i, Err: err}
		}
		r.ExpiresAt = r.CreatedAt.Add(ttl)
		m.putComp(r.ID, r)
		m.hold(r, r.Blocks)
		rs = append(rs, r)
	}
	m.mu.Unlock()
	var check []store.ObjectRef
	for _, req := range reqs {
		check = append(check, req.Check...)
	}
	if err := m.store.Apply(ctx, store.Plan{Put: rs, Limits: m.limits, Check: check}); err != nil {
		m.mu.Lock()
		undo()
		m.mu.Unlock()
		return nil, fmt.Errorf("record reservation: %w", err)
	}
	out := make([]*inventory.Composition, len(rs))
	for i, r := range rs {
		m.log.Info("reserved", "id", r.ID, "host", r.Host, "blocks", len(r.Blocks), "tenant", r.Tenant, "expires", r.ExpiresAt)
		m.notify(Change{New: r.Clone(), Reason: "reserved"})
		out[i] = r.Clone()
	}
	return out, nil
}

// Release deletes reservation id.
func (m *Manager) Release(ctx context.Context, id string) error {
	return m.release(context.WithoutCancel(ctx), id, "released", false)
}

func (m *Manager) release(ctx context.Context, id, reason string, onlyExpired bool) error {
	m.mu.Lock()
	r := m.comps[id]
	if r == nil || r.State != inventory.Reserved || m.running[id] {
		m.mu.Unlock()
		return fmt.Errorf("%w: reservation %s", ErrNotFound, id)
	}
	if onlyExpired && m.clk.Now().Before(r.ExpiresAt) {
		m.mu.Unlock()
		return nil
	}
	m.running[id] = true
	m.mu.Unlock()
	err := m.store.Apply(ctx, store.Plan{Delete: []store.Deletion{{ID: id, Version: r.Version}}})
	m.mu.Lock()
	delete(m.running, id)
	if err == nil {
		m.drop(r, r.Blocks)
		m.dropComp(id)
	}
	m.mu.Unlock()
	if err != nil {
		return fmt.Errorf("delete reservation: %w", err)
	}
	m.log.Info("reservation ended", "id", id, "reason", reason)
	m.notify(Change{Old: r, Reason: reason})
	return nil
}

// GetReservation returns a copy of reservation id.
func (m *Manager) GetReservation(id string) (*inventory.Composition, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	r := m.comps[id]
	if r == nil || r.State != inventory.Reserved {
		return nil, fmt.Errorf("%w: reservation %s", ErrNotFound, id)
	}
	return r.Clone(), nil
}

// Reservations lists the live reservations.
func (m *Manager) Reservations() []*inventory.Composition {
	now := m.clk.Now()
	return m.list(func(c *inventory.Composition) bool {
		return c.State == inventory.Reserved && now.Before(c.ExpiresAt)
	})
}

// Expire deletes every reservation past its expiry.
func (m *Manager) Expire(ctx context.Context) {
	now := m.clk.Now()
	m.mu.Lock()
	var due []string
	for id, c := range m.comps {
		if c.State == inventory.Reserved && !now.Before(c.ExpiresAt) && !m.running[id] {
			due = append(due, id)
		}
	}
	m.mu.Unlock()
	for _, id := range due {
		if err := m.release(ctx, id, "expired", true); err != nil {
			m.log.Warn("expire reservation", "id", id, "err", err)
		}
	}
}

// ExpireLoop expires reservations, and retries the rollbacks that failed
// (RetryStuck), every interval of the manager's clock until ctx ends.
func (m *Manager) ExpireLoop(ctx context.Context, every time.Duration) {
	t := clock.NewTicker(m.clk, every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C():
			m.Expire(context.WithoutCancel(ctx))
			m.RetryStuck(context.WithoutCancel(ctx))
		}
	}
}

// Usage counts the blocks of each kind tenant holds in compositions and
// reservations.
func (m *Manager) Usage(tenant string) map[inventory.Kind]int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.usage(tenant)
}

func (m *Manager) usage(tenant string) map[inventory.Kind]int {
	out := map[inventory.Kind]int{}
	for _, c := range m.comps {
		if c.Tenant != tenant {
			continue
		}
		for _, id := range c.AllBlocks() {
			if b := m.top.Block(id); b != nil {
				out[b.Kind]++
			}
		}
	}
	return out
}

// checkQuota fails when adding blocks would take tenant over quota.
// m.mu must be held.
func (m *Manager) checkQuota(tenant string, q Quota, blocks []string) error {
	if len(q) == 0 {
		return nil
	}
	use := m.usage(tenant)
	add := map[inventory.Kind]int{}
	for _, id := range blocks {
		if b := m.top.Block(id); b != nil {
			add[b.Kind]++
		}
	}
	for k, n := range add {
		if lim, ok := q[k]; ok && use[k]+n > lim {
			return fmt.Errorf("%w: tenant %q would hold %d %s blocks, quota %d", ErrQuota, tenant, use[k]+n, k, lim)
		}
	}
	return nil
}

// fabricOp reports one driver call to the OnFabricOp hook.
func (m *Manager) fabricOp(a fabric.Attachment, op string, start time.Time, err error) {
	if errors.Is(err, fabric.ErrFenced) {
		m.log.Warn("a fabric refused this replica's change: another replica has taken over its work", "op", op, "block", a.Block, "host", a.Host, "err", err)
	}
	if m.onFabricOp == nil {
		return
	}
	if b := m.top.Block(a.Block); b != nil && b.Device != nil {
		m.onFabricOp(b.Device.Fabric.Kind, op, time.Since(start), err)
	}
}

// EstimateFabricTime is the modelled time the fabrics need to attach
// blocks to host: fabrics work in parallel, each applies its
// reconfigurations one after another (see forEachFabric).
func (m *Manager) EstimateFabricTime(blocks []string) time.Duration {
	per := map[*inventory.Fabric]time.Duration{}
	for _, id := range blocks {
		b := m.top.Block(id)
		if b == nil || b.Device == nil {
			continue
		}
		f := b.Device.Fabric
		per[f] += f.Reconfig + f.DriveOnline
	}
	var most time.Duration
	for _, d := range per {
		most = max(most, d)
	}
	return most
}

// PlanAll places reqs, with the composition policy applied, one after
// another as if all were applied together, and changes nothing: each plan's blocks are held while the next is
// placed, then all are let go.
func (m *Manager) PlanAll(reqs []Request) ([]*schedule.Plan, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var plans []*schedule.Plan
	defer func() {
		for i := len(plans) - 1; i >= 0; i-- {
			m.st.Release(plans[i].Host, plans[i].Assignments)
		}
	}()
	for _, req := range reqs {
		req, err := m.ApplyPolicy(req)
		if err != nil {
			return nil, err
		}
		p, err := m.schedule(req.placement())
		if err != nil {
			return nil, err
		}
		m.st.Acquire(p.Host, p.Assignments)
		plans = append(plans, p)
	}
	return plans, nil
}
