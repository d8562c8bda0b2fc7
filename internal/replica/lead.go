package replica

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"rackpool/internal/clock"
	"rackpool/internal/store"
	"rackpool/internal/store/postgres"
)

// ErrDeposed is what a Lead reports when another process took its role
// while its session was lost: this process's state is stale and its
// writes are fenced already, so it must stop (serve exits with status 3,
// docs/ha.md).
var ErrDeposed = errors.New("deposed")

// Lead is a leadership role this process holds for as long as it runs
// (the role of the replica serving a database alone, or an active
// replica's membership). When the session holding it fails (the database
// restarted, the network broke) Lead takes the role again: the store's
// own calls fail meanwhile and are answered as errors. If another process
// led in between (the epoch moved by more than one) or leads now, Lead
// gives up and reports ErrDeposed on Deposed.
type Lead struct {
	st   *postgres.Store
	opts LeadOptions

	held    atomic.Pointer[postgres.Leadership]
	deposed chan error
	stop    chan struct{}
	once    sync.Once
}

// LeadOptions configure Keep.
type LeadOptions struct {
	Role, Who string               // as given to postgres.Store.Lead
	Lead      postgres.LeadOptions // the options the role is taken again with
	Store     string               // how logs name the store (postgres.Redact)
	Clock     clock.Clock          // waits between attempts (default clock.Real)
	Logger    *slog.Logger
}

// Keep holds l, opts.Role taken on st, until Release.
func Keep(st *postgres.Store, l *postgres.Leadership, opts LeadOptions) *Lead {
	if opts.Clock == nil {
		opts.Clock = clock.Real{}
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	k := &Lead{st: st, opts: opts, deposed: make(chan error, 1), stop: make(chan struct{})}
	k.held.Store(l)
	go k.keep()
	return k
}

// Leadership returns the role's hold now: nil once released or deposed.
func (k *Lead) Leadership() *postgres.Leadership { return k.held.Load() }

// Epoch is the role's epoch now (0 once released or deposed).
func (k *Lead) Epoch() int64 {
	if l := k.held.Load(); l != nil {
		return l.Epoch
	}
	return 0
}

// Holding reports whether the role is held by a session that is not lost.
func (k *Lead) Holding() bool {
	l := k.held.Load()
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

// Check confirms that the role is still held (postgres.Leadership.Check):
// a replica serving alone calls it before it answers that something does
// not exist. It fails with postgres.ErrFenced when the role is not held.
func (k *Lead) Check(ctx context.Context) error {
	if l := k.held.Load(); l != nil {
		return l.Check(ctx)
	}
	return postgres.ErrFenced
}

// Deposed delivers ErrDeposed, wrapped with what happened, once another
// process has taken the role.
func (k *Lead) Deposed() <-chan error { return k.deposed }

// Release gives the role up and stops taking it again.
func (k *Lead) Release() {
	k.once.Do(func() { close(k.stop) })
	if l := k.held.Swap(nil); l != nil {
		l.Release()
	}
}

func (k *Lead) keep() {
	log, role, store := k.opts.Logger, k.opts.Role, k.opts.Store
	for {
		l := k.held.Load()
		if l == nil {
			return
		}
		select {
		case <-l.Lost():
		case <-k.stop:
			return
		}
		l.Release()
		log.Warn("lost the session holding the lead of the store; taking it again", "store", store, "epoch", l.Epoch)
		for delay := 100 * time.Millisecond; ; delay = min(2*delay, time.Second) {
			k.opts.Clock.Sleep(delay)
			if k.held.Load() != l {
				return // released meanwhile
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			nl, err := k.st.Lead(ctx, role, k.opts.Who, k.opts.Lead)
			cancel()
			if errors.Is(err, postgres.ErrLocked) {
				log.Error("another rackpool serve holds this replica's role now; exiting", "role", role, "store", store, "err", err)
				k.depose(l, fmt.Errorf("%w: another rackpool serve holds this replica's role %s now: %w", ErrDeposed, role, err))
				return
			}
			if err != nil {
				continue
			}
			if nl.Epoch != l.Epoch+1 {
				log.Error("another rackpool serve took this replica's role meanwhile (for an active replica: the leader evicted it); exiting", "role", role, "store", store,
					"epoch", l.Epoch, "now", nl.Epoch)
				nl.Release()
				k.depose(l, fmt.Errorf("%w: another rackpool serve took this replica's role %s meanwhile (epoch %d, now %d)", ErrDeposed, role, l.Epoch, nl.Epoch))
				return
			}
			if !k.held.CompareAndSwap(l, nl) {
				nl.Release() // released meanwhile
				return
			}
			log.Info("lead of the store taken again", "store", store, "epoch", nl.Epoch)
			break
		}
	}
}

// depose ends the hold l and reports err, unless the role was released
// meanwhile.
func (k *Lead) depose(l *postgres.Leadership, err error) {
	if k.held.CompareAndSwap(l, nil) {
		k.deposed <- err
	}
}

// AloneOptions configure LeadAlone.
type AloneOptions struct {
	Name   string // the topology's name
	Digest string // the topology's digest (topology.Digest)
	// Standby waits while another replica serves the database and takes
	// over when it stops or falls silent; it refuses at once a database
	// served with another topology.
	Standby bool
	Store   string      // how logs name the store (postgres.Redact)
	Clock   clock.Clock // default clock.Real
	Logger  *slog.Logger
}

// LeadAlone takes the lead of st's database as the replica serving it
// alone (ServeRole), records this replica's topology and keeps the lead.
// Without opts.Standby it fails with an error wrapping postgres.ErrLocked
// when another replica serves the database; it fails with a
// *store.TopologyMismatch when a standby's topology is not the database's.
// A replica that leads without being a standby takes a changed topology as
// an operator's edit: it logs it and records the new one.
func LeadAlone(ctx context.Context, st *postgres.Store, opts AloneOptions) (*Lead, error) {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	log := opts.Logger
	if opts.Standby {
		// Refuse at once, not at the takeover: the serving replica
		// describes another datacenter.
		if err := store.CheckTopology(ctx, st, opts.Name, opts.Digest); err != nil {
			return nil, err
		}
	}
	host, _ := os.Hostname()
	who := fmt.Sprintf("rackpool serve pid %d on %s", os.Getpid(), host)
	l, err := st.Lead(ctx, ServeRole, who, postgres.LeadOptions{Wait: opts.Standby, OnWait: func(leader string) {
		log.Info("standby: another replica serves this database; waiting to take over", "leader", leader, "store", opts.Store)
	}})
	if err != nil {
		return nil, err
	}
	was, err := store.RecordTopology(ctx, st, opts.Name, opts.Digest, opts.Standby)
	if err != nil {
		l.Release()
		return nil, err
	}
	if was != "" {
		log.Warn("the topology differs from the one this database was last served with", "topology", opts.Name, "digest", opts.Digest, "was", was)
	}
	log.Info("serving the database", "store", opts.Store, "epoch", l.Epoch)
	return Keep(st, l, LeadOptions{Role: ServeRole, Who: who, Store: opts.Store, Clock: opts.Clock, Logger: log}), nil
}
