package compose

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"

	"rackpool/internal/fabric"
	"rackpool/internal/inventory"
	"rackpool/internal/store"
)

// Several replicas on one database (docs/ha.md). Each replica's Manager
// places on its own snapshot and commits with version checks; the store
// re-checks versions and block limits, so two replicas never hand out one
// block. What a replica learns from the database's change log it gives to
// Sync, which brings its snapshot up to date. Its own commits come back
// through the log too: the manager remembers the versions it committed
// (the committed map, filled by a wrapper of its store) and leaves those
// records to the workflow that wrote them.

// committed remembers, per composition, the highest version this manager
// committed, or deleted for one it deleted.
type committed struct {
	mu sync.Mutex
	v  map[string]int64
}

// deleted marks a composition this manager deleted.
const deleted = -1

// recordingStore is the manager's store: it notes every composition the
// manager's own plans put or delete, and names owner (an active replica's
// membership) as the Owner of every record it puts.
type recordingStore struct {
	store.Store
	c     *committed
	owner string
}

func (r recordingStore) Apply(ctx context.Context, p store.Plan) error {
	if r.owner != "" {
		put := make([]*inventory.Composition, len(p.Put))
		for i, c := range p.Put {
			put[i] = c
			if c.Owner != r.owner {
				put[i] = c.Clone()
				put[i].Owner = r.owner
			}
		}
		p.Put = put
	}
	err := r.Store.Apply(ctx, p)
	if err != nil {
		return err
	}
	r.c.mu.Lock()
	defer r.c.mu.Unlock()
	for _, c := range p.Put {
		if c.Version > r.c.v[c.ID] {
			r.c.v[c.ID] = c.Version
		}
	}
	for _, d := range p.Delete {
		r.c.v[d.ID] = deleted
	}
	return nil
}

// mine reports whether the stored state of id (version v, 0 if absent),
// as read from the database, is one this manager committed itself or one
// older than a deletion it committed, and forgets the entry once the
// manager's snapshot has caught up with it. (A record is read before Sync
// takes the manager's lock, so it may be older than the snapshot.)
func (m *Manager) mine(id string, v int64, local *inventory.Composition) bool {
	m.committed.mu.Lock()
	defer m.committed.mu.Unlock()
	got, ok := m.committed.v[id]
	if !ok {
		return false
	}
	switch {
	case got == deleted:
		// Whatever was read of it (a record read before the deletion
		// committed, too) is older than the deletion.
		if v == 0 && local == nil {
			delete(m.committed.v, id)
		}
		return true
	case v > 0 && got >= v:
		if local != nil && local.Version >= got {
			delete(m.committed.v, id)
		}
		return true
	}
	return false
}

// Sync brings the snapshot up to date with records another replica
// committed: recs maps each changed composition's ID to its stored record,
// or to nil if it is gone. Records this manager committed itself are left
// to the workflow that wrote them, and so are compositions this manager is
// taking through a transition; everything else replaces the snapshot's
// record and the blocks it holds, and is reported to OnChange.
func (m *Manager) Sync(recs map[string]*inventory.Composition) {
	var changes []Change
	m.mu.Lock()
	for id, rec := range recs {
		local := m.comps[id]
		var v int64
		if rec != nil {
			v = rec.Version
		}
		if m.mine(id, v, local) || local == nil && rec == nil {
			continue
		}
		if local != nil && rec != nil && local.Version >= rec.Version {
			continue
		}
		if local != nil && m.inFlight(local) {
			continue // its workflow ends it; a version check stops it if another replica moved it
		}
		if local != nil {
			m.drop(local, local.AllBlocks())
			m.dropComp(id)
		}
		if rec != nil {
			if m.top.Host(rec.Host) == nil && (rec.State != inventory.Held || rec.Host != "") {
				m.log.Error("replica: another replica stored a composition on a host this topology lacks; check that every replica has the same topology",
					"id", rec.ID, "host", rec.Host)
				continue
			}
			m.putComp(id, rec)
			m.remote[id] = true
			m.hold(rec, rec.AllBlocks())
		} else {
			delete(m.remote, id)
		}
		changes = append(changes, Change{Old: local, New: rec, Reason: syncReason(local, rec), Remote: true})
	}
	m.mu.Unlock()
	for _, ch := range changes {
		m.notify(ch)
	}
}

// inFlight reports whether c is this manager's own composition in a
// transition: a workflow of this process is running it. m.mu must be held.
func (m *Manager) inFlight(c *inventory.Composition) bool {
	if m.running[c.ID] {
		return true
	}
	if m.remote[c.ID] {
		return false
	}
	switch c.State {
	case inventory.Composing, inventory.Updating, inventory.Decomposing:
		return true
	}
	return false
}

// behind reports whether err may come from a snapshot that has not yet
// seen another replica's commit (the composition is unknown, in a
// transition another replica has finished, or at an older version than the
// client read), and if so catches the snapshot up: the caller then tries
// once more.
func (m *Manager) behind(ctx context.Context, err *error) bool {
	if m.catchUp == nil || !(errors.Is(*err, ErrNotFound) || errors.Is(*err, ErrBusy) || errors.Is(*err, ErrVersion)) {
		return false
	}
	if cerr := m.catchUp(ctx); cerr != nil {
		// Unknown here may be known to the database, which this replica
		// cannot read now: not a 404 but "try again".
		*err = fmt.Errorf("%w: catching up with the other replicas: %v (after: %v)", store.ErrUnavailable, cerr, *err)
		return false
	}
	return true
}

// syncReason names a change another replica made, for OnChange.
func syncReason(old, rec *inventory.Composition) string {
	switch {
	case rec == nil && old != nil && old.State == inventory.Reserved:
		return "released"
	case rec == nil:
		return "decomposed"
	case rec.State == inventory.Reserved:
		return "reserved"
	case old == nil && rec.State == inventory.Composed:
		return "composed"
	default:
		return "updated"
	}
}

// Stale returns the IDs whose stored version (versions: every stored
// composition's) differs from the snapshot's, leaving out compositions this
// manager is taking through a transition: what a replica re-reads and
// gives to Sync when it checks its snapshot against the database.
func (m *Manager) Stale(versions map[string]int64) []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.forgetCommitted()
	var out []string
	for id, v := range versions {
		if c := m.comps[id]; c == nil || c.Version != v {
			if c == nil || !m.inFlight(c) {
				out = append(out, id)
			}
		}
	}
	for id, c := range m.comps {
		if _, ok := versions[id]; !ok && !m.inFlight(c) && c.Version > 0 {
			out = append(out, id)
		}
	}
	slices.Sort(out)
	return out
}

// errIntentConflict marks a compose whose first record conflicted: another
// replica took a block (or a record the request was decided on) that this
// snapshot had not yet seen. Nothing was attached; placing again on a
// fresh snapshot may succeed.
var errIntentConflict = errors.New("placement conflicted with another replica's")

// maxReplans bounds how often a compose is placed again after conflicts.
const maxReplans = 3

// retryConflicts runs compose, and after a conflict with another replica
// catches the snapshot up (Options.CatchUp) and runs it again, at most
// maxReplans more times.
func (m *Manager) retryConflicts(ctx context.Context, compose func() (*inventory.Composition, error)) (*inventory.Composition, error) {
	for attempt := 0; ; attempt++ {
		c, err := compose()
		if err == nil || !errors.Is(err, errIntentConflict) || m.catchUp == nil || attempt == maxReplans {
			if err != nil && errors.Is(err, errIntentConflict) {
				m.conflicts.Add(1)
			}
			return c, err
		}
		m.conflicts.Add(1)
		m.replans.Add(1)
		if cerr := m.catchUp(ctx); cerr != nil {
			return nil, errors.Join(err, cerr)
		}
	}
}

// Conflicts returns how many composes conflicted with another replica's
// commit, and how many of them were placed again.
func (m *Manager) Conflicts() (conflicts, replans int64) {
	return m.conflicts.Load(), m.replans.Load()
}

// fenced returns ctx carrying the leadership epoch (Options.Epoch) for a
// fabric change, unless ctx carries one already (the leader settling
// another replica's work carries that replica's raised epoch).
func (m *Manager) fenced(ctx context.Context) context.Context {
	if _, ok := fabric.EpochFrom(ctx); ok || m.epoch == nil {
		return ctx
	}
	return fabric.WithEpoch(ctx, m.epoch())
}

// forgetCommitted drops the versions this manager committed that its
// snapshot has caught up with: its own changes never come back through the
// log to be forgotten there. m.mu must be held.
func (m *Manager) forgetCommitted() {
	m.committed.mu.Lock()
	defer m.committed.mu.Unlock()
	for id, v := range m.committed.v {
		c := m.comps[id]
		// Gone from the snapshot (deleted here, or by another replica
		// since), or caught up with.
		if c == nil || v != deleted && c.Version >= v {
			delete(m.committed.v, id)
		}
	}
}

// SettleOwner finishes or rolls back, as start-up recovery does, every
// stored composition that owner (an active replica's membership, or "" for
// a replica that served alone) left in a transition: the leader calls it
// for a replica that died, from postgres.Evict, with ctx carrying that
// replica's raised epoch (fabric.WithEpoch), so that a late change the dead
// replica still sends to a fabric this settlement touched is refused. It
// reads the records from the store, not the snapshot, and returns how many
// it settled.
func (m *Manager) SettleOwner(ctx context.Context, owner string) (int, error) {
	comps, err := m.store.Compositions(ctx)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, c := range comps {
		if c.Owner == owner && c.State == inventory.Composed && inTransition(c.Power) && (owner != m.replica || owner == "") {
			if err := m.settlePower(ctx, c); err != nil {
				return n, err
			}
			n++
			continue
		}
		if c.Owner != owner || !system(c) || c.State == inventory.Composed || owner == m.replica && owner != "" {
			continue
		}
		if err := m.settleOne(ctx, c); err != nil {
			return n, fmt.Errorf("settle %s (%s) of %s: %w", c.ID, c.State, ownerName(owner), err)
		}
		n++
	}
	if owner == m.replica && owner != "" {
		return n, nil
	}
	// Free hosts whose reset the owner left in transition.
	m.loadHostPower(ctx)
	hosts, err := m.settleHostPowers(ctx, false, owner)
	return n + hosts, err
}

func ownerName(owner string) string {
	if owner == "" {
		return "a replica that served alone"
	}
	return owner
}

// settleOne settles one stored record in transition with the manager's lock
// held (start-up recovery's settle; Resume does the same).
func (m *Manager) settleOne(ctx context.Context, c *inventory.Composition) error {
	ch, err := m.settleLocked(ctx, c)
	if ch != nil {
		m.notify(*ch)
	}
	return err
}

func (m *Manager) settleLocked(ctx context.Context, c *inventory.Composition) (*Change, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.running[c.ID] {
		return nil, nil // this replica's own workflow (not a dead one's)
	}
	old := m.comps[c.ID]
	if old != nil {
		m.drop(old, old.AllBlocks())
	}
	m.putComp(c.ID, c)
	m.remote[c.ID] = true
	m.hold(c, c.AllBlocks())
	if err := m.settle(ctx, c, func(f func()) { f() }); err != nil {
		return nil, err
	}
	if now := m.comps[c.ID]; now != nil {
		return &Change{Old: c, New: now, Reason: "updated"}, nil
	}
	delete(m.remote, c.ID)
	return &Change{Old: c, Reason: "decomposed"}, nil
}

// StepOwner returns the Owner (an active replica's membership) of a
// composition on host that waits on a host step (Composition.Step), ""
// when none does: where that host's agent must be served (docs/ha.md).
// From the snapshot: call CatchUp first to see other replicas' latest.
func (m *Manager) StepOwner(host string) string {
	m.mu.Lock()
	defer m.mu.Unlock()
	owner := ""
	for _, id := range m.stepping[host] {
		switch c := m.comps[id]; {
		case m.running[id]:
			return "" // this replica's own workflow (its snapshot's Owner may be an earlier one's)
		case c != nil && owner == "":
			owner = c.Owner
		}
	}
	return owner
}

// noteStep keeps stepping, the compositions waiting on a host step by
// host, as composition id changes from old to c (either nil); m.mu is
// held.
func (m *Manager) noteStep(id string, old, c *inventory.Composition) {
	if old != nil && old.Step != "" {
		list := slices.DeleteFunc(m.stepping[old.Host], func(s string) bool { return s == id })
		if len(list) == 0 {
			delete(m.stepping, old.Host)
		} else {
			m.stepping[old.Host] = list
		}
	}
	if c != nil && c.Step != "" {
		if m.stepping == nil {
			m.stepping = map[string][]string{}
		}
		m.stepping[c.Host] = append(m.stepping[c.Host], id)
	}
}
