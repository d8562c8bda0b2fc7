// Package replica keeps one control-plane replica's in-memory state in step
// with the others' on a shared PostgreSQL database (docs/ha.md). A Follower
// reads the store's change log (LISTEN/NOTIFY, with the sequence to catch
// up after a missed notification), re-reads the compositions that changed
// and gives them to the composition manager's Sync, and calls the handler
// registered for every other kind of record (accounts and sessions, memory
// leases, drives). Every interval it also checks the snapshot's versions
// against the database's, so that nothing a lost or skipped change left
// stale stays stale.
//
// Start order matters: take Head before the managers load their state, so
// that every change committed after the load is followed.
//
// A Lead (lead.go) holds a replica's role for the life of the process:
// the role of the replica serving a database alone, or an active
// replica's membership. It takes the role again after a lost session and
// reports ErrDeposed on a channel when another process took it meanwhile;
// the caller stops (serve exits with status 3). Active (active.go) is an
// active replica among others: its membership, the leader role taken in
// turn, where the other replicas are (for forwarding), and the leader's
// eviction of dead members, whose compositions it settles under their
// raised epoch. Waits run on an injected clock.
//
// Forward (forward.go) stands in front of the service: it proxies a
// request for what the leader serves, or for a task another replica runs,
// to that replica, and Gate answers 503 while the replica's hold is lost.
// Which requests those are, and the error bodies, are the service's
// (Service, implemented by redfish.Forwarding). A Gatherer (gather.go)
// reads what each replica keeps in its process (its tasks, its metrics)
// at every other, and an EventLog (events.go) gives the replicas one
// event stream through the store's event log.
package replica

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"rackpool/internal/compose"
	"rackpool/internal/inventory"
	"rackpool/internal/store/postgres"
)

// Follower applies other replicas' changes to this replica's state.
type Follower struct {
	st  *postgres.Store
	log *slog.Logger

	mu       sync.Mutex // serialises catch-ups
	feed     *postgres.Feed
	mgr      *compose.Manager
	handlers map[string]func(ctx context.Context, ids []string)
}

// New returns a follower of st's change log from sequence number head
// (Store.Head, read before the state was loaded).
func New(st *postgres.Store, head int64, log *slog.Logger) *Follower {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Follower{st: st, log: log, feed: st.Feed(head), handlers: map[string]func(context.Context, []string){}}
}

// Compositions sets the manager whose snapshot follows the compositions'
// changes.
func (f *Follower) Compositions(m *compose.Manager) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.mgr = m
}

// Handle registers fn for the changes of records of kind (an object kind,
// or postgres.KindSetting): it gets the IDs that changed.
func (f *Follower) Handle(kind string, fn func(ctx context.Context, ids []string)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.handlers[kind] = fn
}

// CatchUp reads every change committed before it started and applies it:
// what a manager calls after a conflict, before it places again. (Under
// load the log never runs dry, so it stops at a short page rather than at
// an empty one.)
func (f *Follower) CatchUp(ctx context.Context) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	for {
		changes, err := f.feed.Next(ctx)
		if err != nil {
			return err
		}
		if err := f.apply(ctx, changes); err != nil {
			return err
		}
		if len(changes) < postgres.FeedPage {
			return nil
		}
	}
}

// apply dispatches changes by kind. f.mu must be held.
func (f *Follower) apply(ctx context.Context, changes []postgres.Change) error {
	byKind := map[string][]string{}
	for _, c := range changes {
		if !c.Own { // this replica's own commits are in its state already
			byKind[c.Kind] = append(byKind[c.Kind], c.ID)
		}
	}
	if ids := byKind[postgres.KindComposition]; len(ids) > 0 && f.mgr != nil {
		if err := f.syncCompositions(ctx, ids); err != nil {
			return err
		}
	}
	for kind, ids := range byKind {
		if fn := f.handlers[kind]; fn != nil && kind != postgres.KindComposition {
			fn(ctx, ids)
		}
	}
	return nil
}

// syncCompositions re-reads ids and gives them to the manager.
func (f *Follower) syncCompositions(ctx context.Context, ids []string) error {
	recs, err := f.st.CompositionsByID(ctx, ids)
	if err != nil {
		return err
	}
	all := make(map[string]*inventory.Composition, len(ids))
	for _, id := range ids {
		all[id] = recs[id] // nil: gone
	}
	f.mgr.Sync(all)
	return nil
}

// Run follows the change log until ctx ends: changes are applied as their
// notifications arrive, and every check interval the snapshot's versions
// are compared with the database's.
func (f *Follower) Run(ctx context.Context, check time.Duration) {
	notified := make(chan struct{}, 1)
	go f.st.Listen(ctx, time.Second, f.log, func() {
		select {
		case notified <- struct{}{}:
		default:
		}
	})
	t := time.NewTicker(check)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-notified:
			if err := f.CatchUp(ctx); err != nil && ctx.Err() == nil {
				f.log.Warn("replica: following the change log", "err", err)
			}
		case <-t.C:
			if err := f.CatchUp(ctx); err != nil && ctx.Err() == nil {
				f.log.Warn("replica: following the change log", "err", err)
			}
			if err := f.Check(ctx); err != nil && ctx.Err() == nil {
				f.log.Warn("replica: checking the snapshot", "err", err)
			}
		}
	}
}

// Check compares the composition snapshot's versions with the database's
// and syncs the ones that differ. It returns how many it synced through
// the log.
func (f *Follower) Check(ctx context.Context) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.mgr == nil {
		return nil
	}
	versions, err := f.st.Versions(ctx)
	if err != nil {
		return err
	}
	stale := f.mgr.Stale(versions)
	if len(stale) == 0 {
		return nil
	}
	f.log.Info("replica: snapshot differs from the database; re-reading", "compositions", len(stale))
	return f.syncCompositions(ctx, stale)
}
