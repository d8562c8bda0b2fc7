package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"rackpool/internal/fabric"
	"rackpool/internal/store"
	"rackpool/internal/store/postgres"
	"rackpool/internal/store/sqlite"
	"rackpool/internal/topology"
)

// openStore opens the store --store names: "" or "sqlite" for the SQLite
// database in the data directory, or a postgres:// URL. It returns the
// store, a description for logs (never a password) and a function that
// releases the store (and, for PostgreSQL, the lead), and for PostgreSQL
// the leadership epoch every fabric change carries. With PostgreSQL one
// replica serves a database at a time; standby waits for it to stop (or
// to fall silent for a lease) and then takes over.
func openStore(ctx context.Context, spec, data string, standby, act bool, top *topology.Topology, log *slog.Logger) (*openedStore, error) {
	switch {
	case spec == "" || spec == "sqlite":
		if standby || act {
			return nil, errors.New("--standby and --active need a postgres:// --store: an SQLite database is served by one process on its own machine")
		}
		st, err := sqlite.Open(data)
		if err != nil {
			return nil, err
		}
		return &openedStore{st: st, desc: "sqlite " + st.Path(), release: func() { st.Close() }}, nil
	case strings.HasPrefix(spec, "postgres://") || strings.HasPrefix(spec, "postgresql://"):
		if standby && act {
			return nil, errors.New("--standby and --active exclude each other: active replicas all serve, a standby waits for a replica serving alone")
		}
		st, err := postgres.Open(ctx, spec)
		if err != nil {
			return nil, fmt.Errorf("--store: %w", err)
		}
		if act {
			a, err := openActive(ctx, st, spec, top, log)
			if err != nil {
				st.Close()
				return nil, err
			}
			release := func() {
				a.release()
				st.Close()
			}
			return &openedStore{st: st, pg: st, desc: "postgres " + postgres.Redact(spec) + " (active replica " + a.tag + ")", release: release, epoch: a.epoch, act: a,
				serving: func() bool { return holding(&a.held) }}, nil
		}
		digest := topology.Digest(top)
		if standby {
			// Refuse at once, not at the takeover: the serving replica
			// describes another datacenter.
			if err := sameTopology(ctx, st, top, digest); err != nil {
				st.Close()
				return nil, err
			}
		}
		host, _ := os.Hostname()
		who := fmt.Sprintf("rackpool serve pid %d on %s", os.Getpid(), host)
		lead, err := st.Lead(ctx, serveRole, who, postgres.LeadOptions{Wait: standby, OnWait: func(leader string) {
			log.Info("standby: another replica serves this database; waiting to take over", "leader", leader, "store", postgres.Redact(spec))
		}})
		if err != nil {
			st.Close()
			if errors.Is(err, postgres.ErrLocked) {
				return nil, fmt.Errorf("--store %s is in use by another rackpool serve (%v); start this one with --standby to take over when it stops, or run every replica with --active",
					postgres.Redact(spec), err)
			}
			return nil, fmt.Errorf("--store: %w", err)
		}
		if err := recordTopology(ctx, st, top, digest, standby, log); err != nil {
			lead.Release()
			st.Close()
			return nil, err
		}
		log.Info("serving the database", "store", postgres.Redact(spec), "epoch", lead.Epoch)
		var held atomic.Pointer[postgres.Leadership]
		held.Store(lead)
		go keepLead(st, &held, serveRole, postgres.LeadOptions{}, who, spec, log)
		pctx, stopPrune := context.WithCancel(context.Background())
		go st.PruneLoop(pctx, time.Minute, postgres.ChangeRetention, log)
		release := func() {
			stopPrune()
			if l := held.Swap(nil); l != nil {
				l.Release()
			}
			st.Close()
		}
		epoch := func() fabric.Epoch {
			if l := held.Load(); l != nil {
				return fabric.Epoch{N: l.Epoch}
			}
			return fabric.Epoch{}
		}
		return &openedStore{st: st, pg: st, desc: "postgres " + postgres.Redact(spec), release: release, epoch: epoch,
			serving: func() bool { return holding(&held) },
			check: func(ctx context.Context) error {
				if l := held.Load(); l != nil {
					return l.Check(ctx)
				}
				return postgres.ErrFenced
			}}, nil
	default:
		return nil, fmt.Errorf("--store: want sqlite or a postgres://USER:PASSWORD@HOST:PORT/DATABASE URL, got %q", redactSpec(spec))
	}
}

// openedStore is the store serve runs on.
type openedStore struct {
	st      store.Store
	pg      *postgres.Store // nil for SQLite
	desc    string          // for logs: never a password
	release func()
	// epoch is the epoch every composition's fabric change carries (nil
	// for SQLite).
	epoch func() fabric.Epoch
	act   *active // an active replica's membership (--active)
	// serving reports whether this replica holds the database (its lead
	// or membership, not lost); nil for SQLite.
	serving func() bool
	// check confirms that this replica serving alone still holds the
	// lead (it pings the session that holds it): before it answers that
	// something does not exist. Nil for SQLite and active replicas.
	check func(ctx context.Context) error
}

// holding reports whether held holds a leadership whose session is not
// lost.
func holding(held *atomic.Pointer[postgres.Leadership]) bool {
	l := held.Load()
	if l == nil {
		return false
	}
	select {
	case <-l.Lost():
		return false
	default:
		return true
	}
}

// sameTopology refuses a replica whose topology is not the one the
// database was last served with.
func sameTopology(ctx context.Context, st store.Store, top *topology.Topology, digest string) error {
	if err := store.CheckTopology(ctx, st, top.Name, digest); err != nil {
		return topologyError(err)
	}
	return nil
}

// recordTopology records the leader's topology (store.RecordTopology): a
// standby refuses to take over with another one, a replica that leads on
// its own records the change.
func recordTopology(ctx context.Context, st store.Store, top *topology.Topology, digest string, standby bool, log *slog.Logger) error {
	was, err := store.RecordTopology(ctx, st, top.Name, digest, standby)
	if err != nil {
		return topologyError(err)
	}
	if was != "" {
		log.Warn("the topology differs from the one this database was last served with", "topology", top.Name, "digest", digest, "was", was)
	}
	return nil
}

// topologyError names the flag an error about the recorded topology
// concerns.
func topologyError(err error) error {
	var m *store.TopologyMismatch
	if errors.As(err, &m) {
		return fmt.Errorf("--topology: %w", err)
	}
	return fmt.Errorf("--store: %w", err)
}

// serveRole is the leadership role of the replica serving a database.
const serveRole = "serve"

// keepLead takes the lead again when its session fails (the database
// restarted, the network broke): the store's own calls fail meanwhile and
// are answered as errors. If another replica led in between (the epoch
// moved by more than one) or leads now, this process's state is stale and
// it exits: its writes are fenced already.
func keepLead(st *postgres.Store, held *atomic.Pointer[postgres.Leadership], role string, opts postgres.LeadOptions, who, spec string, log *slog.Logger) {
	for {
		l := held.Load()
		if l == nil {
			return
		}
		<-l.Lost()
		l.Release()
		log.Warn("lost the session holding the lead of the store; taking it again", "store", postgres.Redact(spec), "epoch", l.Epoch)
		for delay := 100 * time.Millisecond; ; delay = min(2*delay, time.Second) {
			time.Sleep(delay)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			nl, err := st.Lead(ctx, role, who, opts)
			cancel()
			if errors.Is(err, postgres.ErrLocked) {
				log.Error("another rackpool serve holds this replica's role now; exiting", "role", role, "store", postgres.Redact(spec), "err", err)
				os.Exit(3)
			}
			if err != nil {
				continue
			}
			if nl.Epoch != l.Epoch+1 {
				log.Error("another rackpool serve took this replica's role meanwhile (for an active replica: the leader evicted it); exiting", "role", role, "store", postgres.Redact(spec),
					"epoch", l.Epoch, "now", nl.Epoch)
				nl.Release()
				os.Exit(3)
			}
			if !held.CompareAndSwap(l, nl) {
				nl.Release() // closed meanwhile
				return
			}
			log.Info("lead of the store taken again", "store", postgres.Redact(spec), "epoch", nl.Epoch)
			break
		}
	}
}

// redactSpec hides anything after "://" that looks like credentials.
func redactSpec(spec string) string {
	if i := strings.Index(spec, "@"); i >= 0 {
		return "…" + spec[i:]
	}
	return spec
}
