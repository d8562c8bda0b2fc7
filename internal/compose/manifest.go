package compose

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"rackpool/internal/inventory"
	"rackpool/internal/store"
)

// Manifest is several changes applied all together or not at all: the
// Redfish Compose action's stanzas. Each Stanza sets exactly one of its
// fields.
type Manifest struct {
	Stanzas []Stanza
}

// Stanza is one change of a manifest.
type Stanza struct {
	// Compose places and composes a new system; the stanzas before it have
	// already taken their blocks.
	Compose *Request
	// Reserved composes the system reservation Reserved holds, consuming
	// the reservation.
	Reserved string
	// Decompose tears down the composed system Decompose.
	Decompose string
}

// StanzaError is a manifest's failure at one stanza; nothing of the
// manifest was applied.
type StanzaError struct {
	Index int
	Err   error
}

func (e *StanzaError) Error() string { return fmt.Sprintf("stanza %d: %v", e.Index, e.Err) }
func (e *StanzaError) Unwrap() error { return e.Err }

// manifestPrefix starts the Group of every record a manifest writes while
// it is in transition; recovery settles such records together.
const manifestPrefix = "manifest-"

// Apply applies every stanza of mf or none, and returns the systems it
// composed in stanza order.
//
// The manifest is one intent and one outcome, each a single store plan:
// the intent records every new system Composing and every system to tear
// down Decomposing, all with the manifest's ID as Group (and deletes the
// reservations it consumes); then every new system is attached and every
// old one detached; the outcome records the new systems Composed and
// deletes the old ones, with the request's audit entry. A failure before
// the outcome puts everything back: the new systems are detached and
// deleted, the old ones re-attached and recorded Composed again (a
// consumed reservation stays consumed: the Redfish Compose action consumes the
// reservation it names). A
// crash is settled by recovery the same way: a manifest found in
// transition is rolled back as a whole.
func (m *Manager) Apply(ctx context.Context, mf Manifest) ([]*inventory.Composition, error) {
	sm, err := m.Stage(ctx, mf)
	if err != nil {
		return nil, err
	}
	return sm.Realize(ctx)
}

// StagedManifest is a manifest staged but not yet applied: every stanza is
// placed (scheduled once) and its blocks held in memory, the systems it
// decomposes are marked Decomposing in memory, and nothing is recorded or
// attached yet. Exactly one of Realize or Cancel must follow, soon. A
// StagedManifest is not safe for concurrent use.
type StagedManifest struct {
	m     *Manager
	mf    Manifest
	group string
	t     *staged
	done  bool
}

// Stage is the first half of Apply: it places and holds every stanza of
// mf, or none (a *StanzaError names the stanza that failed).
func (m *Manager) Stage(ctx context.Context, mf Manifest) (*StagedManifest, error) {
	if len(mf.Stanzas) == 0 {
		return nil, fmt.Errorf("%w: a manifest needs at least one stanza", ErrBadRequest)
	}
	m.Expire(context.WithoutCancel(ctx))
	group := newID(manifestPrefix)
	m.mu.Lock()
	defer m.mu.Unlock()
	t, err := m.stage(mf, group)
	if err != nil {
		m.unstage(t)
		return nil, err
	}
	return &StagedManifest{m: m, mf: mf, group: group, t: t}, nil
}

// EstimateFabricTime is the modelled time the fabrics need to attach the
// new system that takes longest (Manager.EstimateFabricTime).
func (sm *StagedManifest) EstimateFabricTime() time.Duration {
	var most time.Duration
	for _, c := range sm.t.composing {
		most = max(most, sm.m.EstimateFabricTime(c.Blocks))
	}
	return most
}

// Cancel puts back what Stage took; after Realize it does nothing.
func (sm *StagedManifest) Cancel() {
	if sm.done {
		return
	}
	sm.done = true
	sm.m.mu.Lock()
	defer sm.m.mu.Unlock()
	sm.m.unstage(sm.t)
}

// Realize is the second half of Apply: the intent, the fabrics, the
// outcome (with the audit entry ctx carries), all or nothing. It runs to
// completion even when ctx is cancelled.
func (sm *StagedManifest) Realize(ctx context.Context) ([]*inventory.Composition, error) {
	if sm.done {
		return nil, errors.New("compose: manifest already applied or cancelled")
	}
	sm.done = true
	return sm.m.realizeStaged(context.WithoutCancel(ctx), sm.mf, sm.group, sm.t)
}

// realizeStaged applies the manifest mf that stage staged as t.
func (m *Manager) realizeStaged(ctx context.Context, mf Manifest, group string, t *staged) ([]*inventory.Composition, error) {
	intent := store.Plan{Limits: m.limits, Intent: true}
	for _, st := range mf.Stanzas {
		if st.Compose != nil {
			intent.Check = append(intent.Check, st.Compose.Check...)
		}
	}
	intent.Put = append(slices.Clone(t.composing), t.decomposing...)
	for _, r := range t.reserved {
		intent.Delete = append(intent.Delete, store.Deletion{ID: r.ID, Version: r.Version})
	}
	if err := m.store.Apply(ctx, intent); err != nil {
		m.mu.Lock()
		m.unstage(t)
		m.mu.Unlock()
		return nil, fmt.Errorf("record manifest: %w", err)
	}
	for _, r := range t.reserved {
		m.notify(Change{Old: r, Reason: "released"})
	}
	if err := m.realizeManifest(ctx, t); err != nil {
		if m.rollbackManifest(ctx, t) {
			m.mu.Lock()
			m.unstage(t)
			m.mu.Unlock()
		}
		for _, c := range t.composing {
			m.notify(Change{Old: c, Reason: "failed", Err: err})
		}
		return nil, err
	}

	out := store.Plan{Limits: m.limits}
	var done []*inventory.Composition
	for _, c := range t.composing {
		d := c.Clone()
		d.State, d.Version, d.UpdatedAt, d.Group = inventory.Composed, c.Version+1, m.clk.Now().UTC(), ""
		out.Put = append(out.Put, d)
		done = append(done, d)
	}
	for _, d := range t.decomposing {
		out.Delete = append(out.Delete, store.Deletion{ID: d.ID, Version: d.Version})
	}
	if err := m.commitOutcome(ctx, out, fmt.Sprintf("applied %s: %d composed, %d decomposed", group, len(done), len(t.decomposing))); err != nil {
		err = fmt.Errorf("record applied manifest: %w", err)
		if m.rollbackManifest(ctx, t) {
			m.mu.Lock()
			m.unstage(t)
			m.mu.Unlock()
		}
		return nil, err
	}
	m.mu.Lock()
	for _, c := range done {
		m.putComp(c.ID, c)
	}
	for _, d := range t.decomposing {
		m.drop(d, d.Blocks)
		m.dropComp(d.ID)
		delete(m.running, d.ID)
	}
	m.mu.Unlock()
	m.log.Info("applied manifest", "id", group, "composed", len(done), "decomposed", len(t.decomposing))
	out2 := make([]*inventory.Composition, len(done))
	for i, c := range done {
		m.notify(Change{New: c.Clone(), Reason: "composed"})
		out2[i] = c.Clone()
	}
	for _, d := range t.decomposing {
		m.notify(Change{Old: d, Reason: "decomposed"})
	}
	return out2, nil
}

// staged is a manifest placed and held in memory, not yet recorded.
type staged struct {
	composing   []*inventory.Composition // new systems, Composing
	reserved    []*inventory.Composition // reservations consumed
	decomposing []*inventory.Composition // systems to tear down, Decomposing
	previous    []*inventory.Composition // those systems as they were
	detaching   int                      // how many of them had their detach started
}

// stage places and holds every stanza of mf. On error the caller must
// unstage what was staged. m.mu must be held.
func (m *Manager) stage(mf Manifest, group string) (*staged, error) {
	t := &staged{}
	now := m.clk.Now().UTC()
	for i, st := range mf.Stanzas {
		fail := func(err error) error { return &StanzaError{Index: i, Err: err} }
		set := 0
		for _, b := range []bool{st.Compose != nil, st.Reserved != "", st.Decompose != ""} {
			if b {
				set++
			}
		}
		if set != 1 {
			return t, fail(fmt.Errorf("%w: a stanza composes, composes a reservation or decomposes: exactly one", ErrBadRequest))
		}
		switch {
		case st.Compose != nil:
			c, err := m.place(*st.Compose, inventory.Composing, "sys-")
			if err != nil {
				return t, fail(err)
			}
			if err := m.hostOff(c.Host); err != nil {
				return t, fail(err)
			}
			c.Group = group
			m.putComp(c.ID, c)
			m.hold(c, c.Blocks)
			t.composing = append(t.composing, c)
		case st.Reserved != "":
			r := m.comps[st.Reserved]
			if r == nil || r.State != inventory.Reserved || m.running[r.ID] {
				return t, fail(fmt.Errorf("%w: reservation %s", ErrNotFound, st.Reserved))
			}
			if err := m.hostOff(r.Host); err != nil {
				return t, fail(err)
			}
			c := r.Clone()
			c.ID, c.State, c.Version, c.CreatedAt, c.UpdatedAt, c.ExpiresAt, c.Group = newID("sys-"), inventory.Composing, 1, now, now, time.Time{}, group
			if c.Name == r.ID {
				c.Name = c.ID
			}
			m.drop(r, r.Blocks)
			m.dropComp(r.ID)
			m.putComp(c.ID, c)
			m.hold(c, c.Blocks)
			t.reserved = append(t.reserved, r)
			t.composing = append(t.composing, c)
		default:
			id := st.Decompose
			c := m.comps[id]
			switch {
			case !system(c):
				return t, fail(fmt.Errorf("%w: %s", ErrNotFound, id))
			case c.State != inventory.Composed || m.running[id] || m.powering[c.Host]:
				return t, fail(fmt.Errorf("%w: %s is %s", ErrBusy, id, c.State))
			case !c.Power.IsOff():
				// A manifest is all or nothing: it does not power systems
				// off on the way (a DELETE does).
				return t, fail(fmt.Errorf("%w: %s is %s; power it off (ComputerSystem.Reset ForceOff or GracefulShutdown) or DELETE it, which powers it off first", ErrPowered, id, c.Power.State))
			}
			d := c.Clone()
			d.State, d.Version, d.UpdatedAt, d.Group = inventory.Decomposing, c.Version+1, now, group
			m.putComp(id, d)
			m.running[id] = true
			t.decomposing = append(t.decomposing, d)
			t.previous = append(t.previous, c)
		}
	}
	return t, nil
}

// unstage undoes stage in memory. m.mu must be held.
func (m *Manager) unstage(t *staged) {
	if t == nil {
		return
	}
	for _, c := range t.composing {
		m.drop(c, c.Blocks)
		m.dropComp(c.ID)
	}
	for _, r := range t.reserved {
		// Not recorded as consumed: the reservation stands.
		m.putComp(r.ID, r)
		m.hold(r, r.Blocks)
	}
	for i, d := range t.decomposing {
		m.putComp(d.ID, t.previous[i])
		delete(m.running, d.ID)
	}
}

// realizeManifest attaches every new system, then detaches every old one.
func (m *Manager) realizeManifest(ctx context.Context, t *staged) error {
	for _, c := range t.composing {
		if err := m.attach(ctx, c, c.Blocks); err != nil {
			return err
		}
	}
	for i, d := range t.decomposing {
		t.detaching = i + 1
		if err := m.detach(ctx, d, d.Blocks); err != nil {
			return err
		}
	}
	return nil
}

// rollbackManifest puts the fabrics and the store back as they were before
// a recorded manifest: new systems detached and deleted, old ones whose
// detach had started re-attached (attaching is idempotent), and all old
// ones recorded Composed at a new version. It reports whether it did; a
// failure is left for recovery at start-up, which rolls the manifest back
// the same way.
func (m *Manager) rollbackManifest(ctx context.Context, t *staged) bool {
	var errs []error
	for _, c := range t.composing {
		errs = append(errs, m.detach(ctx, c, c.Blocks))
	}
	for _, d := range t.decomposing[:t.detaching] {
		errs = append(errs, m.attach(ctx, d, d.Blocks))
	}
	if err := errors.Join(errs...); err != nil {
		m.log.Error("manifest rollback left the fabrics changed; recovery will finish it at start-up", "err", err)
		return false
	}
	back := store.Plan{Limits: m.limits}
	for _, c := range t.composing {
		back.Delete = append(back.Delete, store.Deletion{ID: c.ID, Version: c.Version})
	}
	for i, d := range t.decomposing {
		p := t.previous[i].Clone()
		p.Version, p.UpdatedAt = d.Version+1, m.clk.Now().UTC()
		back.Put = append(back.Put, p)
		t.previous[i] = p
	}
	if err := m.store.Apply(ctx, back); err != nil {
		m.log.Error("manifest rollback not recorded; recovery will finish it at start-up", "err", err)
		return false
	}
	// The consumed reservations are gone from the store for good.
	t.reserved = nil
	return true
}
