package replica

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"rackpool/internal/clock"
	"rackpool/internal/fabric"
	"rackpool/internal/store"
	"rackpool/internal/store/postgres"
)

// Several active replicas on one PostgreSQL database (serve --active,
// docs/ha.md). Each replica holds a membership of its own (a leadership
// role "member/TAG" whose epoch fences its writes and its fabric changes)
// and answers compositions, accounts and sessions itself. One of them, the
// leader (role "leader", taken in turn by whichever replica waits for it),
// also serves the subsystems whose state is in one process and runs the
// singleton loops: memory leases, drives, telemetry, provisioning,
// reservation expiry, the change log's pruning, and the eviction of dead
// replicas, whose unfinished compositions it settles.

// LeaderRole is the role of the leader of active replicas.
const LeaderRole = "leader"

// ServeRole is the role of the replica serving a database alone. Active
// replicas take it shared, so that the two kinds never serve one database
// together.
const ServeRole = "serve"

// Settings that tell the replicas where the others are.
const (
	peerKeyPrefix = "replica/peer/" // + tag: the replica's advertised peer
	leaderKey     = "replica/leader"
)

// peerCacheTTL bounds how stale a looked-up peer may be.
const peerCacheTTL = 500 * time.Millisecond

// EvictGrace is how long a member must have been dead before the leader
// evicts it: a replica whose session broke with the database's restart
// takes its membership again within a second or two.
const EvictGrace = postgres.DefaultLeaseTTL

// Active is this replica's membership and leadership among the active
// replicas of a database. Leader and Replica say where the others are,
// for forwarding requests to them (Forward).
type Active struct {
	pg     *postgres.Store
	tag    string // letters and digits: it begins this replica's task IDs
	member string // postgres.MemberPrefix + tag
	who    string
	clk    clock.Clock
	log    *slog.Logger

	held      *Lead                               // the membership
	lead      atomic.Pointer[postgres.Leadership] // the leader role, while held
	leadEpoch atomic.Int64                        // the leader role's epoch last held

	mu     sync.Mutex
	cached map[string]peerEntry // by tag; "" is the leader
}

// Peer is how the other replicas reach one: what it advertises.
type Peer struct {
	URL string // base URL, "https://host:port"
	// CA is the PEM of the certificate authority the replica's certificate
	// chains to (its own CA, or the top of the operator's chain); empty
	// for plain HTTP.
	CA []byte
}

type peerEntry struct {
	p   Peer
	ok  bool
	err error
	at  time.Time
}

// JoinOptions configure Join.
type JoinOptions struct {
	Name   string      // the topology's name
	Digest string      // the topology's digest (topology.Digest)
	Store  string      // how logs name the store (postgres.Redact)
	Clock  clock.Clock // default clock.Real
	Logger *slog.Logger
}

// Join joins st's database as an active replica: it checks that the
// database is served with the same topology, takes a membership of its
// own and keeps it. It fails with an error wrapping postgres.ErrLocked if
// a replica serves the database alone, and with a
// *store.TopologyMismatch if the database describes another datacenter.
func Join(ctx context.Context, st *postgres.Store, opts JoinOptions) (*Active, error) {
	if opts.Clock == nil {
		opts.Clock = clock.Real{}
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if err := store.CheckTopology(ctx, st, opts.Name, opts.Digest); err != nil {
		return nil, err
	}
	var r [5]byte
	if _, err := rand.Read(r[:]); err != nil {
		return nil, err
	}
	host, _ := os.Hostname()
	a := &Active{pg: st, tag: hex.EncodeToString(r[:]), clk: opts.Clock, log: opts.Logger, cached: map[string]peerEntry{}}
	a.member = postgres.MemberPrefix + a.tag
	a.who = fmt.Sprintf("rackpool serve pid %d on %s, replica %s", os.Getpid(), host, a.tag)
	lo := postgres.LeadOptions{Shared: ServeRole}
	l, err := st.Lead(ctx, a.member, a.who, lo)
	if err != nil {
		return nil, err
	}
	if _, err := store.RecordTopology(ctx, st, opts.Name, opts.Digest, true); err != nil {
		l.Release()
		return nil, err
	}
	a.held = Keep(st, l, LeadOptions{Role: a.member, Who: a.who, Lead: lo, Store: opts.Store, Clock: opts.Clock, Logger: opts.Logger})
	a.log.Info("active replica of the database", "store", opts.Store, "replica", a.tag, "epoch", l.Epoch)
	return a, nil
}

// Tag names this replica among the others; it begins its task IDs.
func (a *Active) Tag() string { return a.tag }

// Member is this replica's membership role, postgres.MemberPrefix + Tag:
// the owner its compositions record.
func (a *Active) Member() string { return a.member }

// Epoch is the membership's epoch, which every composition's fabric change
// carries.
func (a *Active) Epoch() fabric.Epoch {
	if n := a.held.Epoch(); n != 0 {
		return fabric.Epoch{Domain: a.member, N: n}
	}
	return fabric.Epoch{}
}

// LeaderEpoch is the leader role's epoch, which the drive manager's SAS
// changes carry (it runs on the leader alone). Once the role is lost it
// stays the last one held: a change still under way then is refused by a
// fabric the next leader has changed.
func (a *Active) LeaderEpoch() fabric.Epoch {
	return fabric.Epoch{Domain: LeaderRole, N: a.leadEpoch.Load()}
}

// Serving reports whether this replica holds its membership (its session
// not lost).
func (a *Active) Serving() bool { return a.held.Holding() }

// Deposed delivers an error wrapping ErrDeposed once the leader has
// evicted this replica (it found its membership taken on reconnecting).
func (a *Active) Deposed() <-chan error { return a.held.Deposed() }

// Leads reports whether this replica leads now: only the leader's fabric
// monitor publishes events, and only its usage series are current.
func (a *Active) Leads() bool { return a.lead.Load() != nil }

// Release gives up the leadership and the membership.
func (a *Active) Release() {
	if l := a.lead.Swap(nil); l != nil {
		l.Release()
	}
	a.held.Release()
}

// Advertise records how the other replicas reach this one: its URL and
// the certificate authority its certificate chains to.
func (a *Active) Advertise(ctx context.Context, url string, ca []byte) error {
	b, err := json.Marshal(Peer{URL: url, CA: ca})
	if err != nil {
		return err
	}
	if err := a.pg.PutSetting(ctx, peerKeyPrefix+a.tag, string(b)); err != nil {
		return fmt.Errorf("advertise this replica: %w", err)
	}
	return nil
}

// Leader returns the leader's advertisement, or self true when this
// replica leads. An error says none leads now or the database is
// unreachable.
func (a *Active) Leader(ctx context.Context) (Peer, bool, error) {
	if a.Leads() {
		return Peer{}, true, nil
	}
	e := a.lookup("", func() peerEntry {
		tag, ok, err := a.pg.Setting(ctx, leaderKey)
		switch {
		case err != nil:
			return peerEntry{err: err}
		case !ok || tag == a.tag:
			return peerEntry{err: errors.New("no replica leads")}
		}
		p, ok, err := a.peer(ctx, tag)
		if err == nil && !ok {
			err = errors.New("the replica that led has stopped")
		}
		return peerEntry{p: p, ok: ok, err: err}
	})
	return e.p, false, e.err
}

// Replica returns the advertisement of the replica whose tag is tag; ok
// false when no live replica has it.
func (a *Active) Replica(ctx context.Context, tag string) (Peer, bool, error) {
	e := a.lookup(tag, func() peerEntry {
		p, ok, err := a.peer(ctx, tag)
		return peerEntry{p: p, ok: ok, err: err}
	})
	return e.p, e.ok, e.err
}

// lookup returns the cached entry for key, or a fresh one from find.
func (a *Active) lookup(key string, find func() peerEntry) peerEntry {
	a.mu.Lock()
	e, ok := a.cached[key]
	a.mu.Unlock()
	if ok && a.clk.Now().Sub(e.at) < peerCacheTTL {
		return e
	}
	e = find()
	e.at = a.clk.Now()
	a.mu.Lock()
	if len(a.cached) > 1024 {
		clear(a.cached)
	}
	a.cached[key] = e
	a.mu.Unlock()
	return e
}

// peer reads tag's advertisement; ok is false unless tag is a live member.
func (a *Active) peer(ctx context.Context, tag string) (Peer, bool, error) {
	members, err := a.pg.Members(ctx)
	if err != nil {
		return Peer{}, false, err
	}
	alive := false
	for _, m := range members {
		alive = alive || m.Name == postgres.MemberPrefix+tag && m.Alive
	}
	if !alive {
		return Peer{}, false, nil
	}
	v, ok, err := a.pg.Setting(ctx, peerKeyPrefix+tag)
	if err != nil || !ok {
		return Peer{}, false, err
	}
	var p Peer
	if err := json.Unmarshal([]byte(v), &p); err != nil {
		return Peer{}, false, fmt.Errorf("replica %s's advertisement: %w", tag, err)
	}
	return p, true, nil
}

// RunLeader waits for the leader role and, while it holds it, runs duties
// (which starts the leader's loops under the context it gets and returns;
// the context ends when the role is lost). It returns when ctx ends.
func (a *Active) RunLeader(ctx context.Context, duties func(ctx context.Context) error) {
	for ctx.Err() == nil {
		l, err := a.pg.Lead(ctx, LeaderRole, a.who, postgres.LeadOptions{Wait: true, NoFence: true})
		if err != nil {
			if ctx.Err() == nil {
				a.log.Warn("active replica: waiting for the lead", "err", err)
				a.sleep(ctx, time.Second)
			}
			continue
		}
		a.leadEpoch.Store(l.Epoch)
		a.lead.Store(l)
		dctx, cancel := context.WithCancel(ctx)
		err = duties(dctx)
		if err == nil {
			err = a.pg.PutSetting(ctx, leaderKey, a.tag)
		}
		if err != nil {
			a.log.Error("active replica: could not take up the lead; giving it up", "err", err)
		} else {
			a.log.Info("active replica leads", "replica", a.tag, "epoch", l.Epoch)
			select {
			case <-l.Lost():
				a.log.Warn("active replica: lost the lead", "replica", a.tag, "epoch", l.Epoch)
			case <-ctx.Done():
			}
		}
		a.lead.Store(nil)
		cancel()
		l.Release()
		if err != nil {
			a.sleep(ctx, time.Second)
		}
	}
}

// Settler settles the unfinished compositions of a replica
// (compose.Manager.SettleOwner) under the epoch its context carries.
type Settler interface {
	SettleOwner(ctx context.Context, owner string) (int, error)
}

// EvictLoop, on the leader, evicts every member dead for EvictGrace,
// settling its unfinished compositions with its raised epoch, until ctx
// ends.
func (a *Active) EvictLoop(ctx context.Context, s Settler) {
	e := a.evictor(s)
	t := clock.NewTicker(a.clk, time.Second)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C():
			e.pass(context.WithoutCancel(ctx))
		}
	}
}

// evictor makes EvictLoop's passes; it remembers since when each dead
// member has been seen dead.
type evictor struct {
	a         *Active
	s         Settler
	deadSince map[string]time.Time
}

func (a *Active) evictor(s Settler) *evictor {
	return &evictor{a: a, s: s, deadSince: map[string]time.Time{}}
}

// pass makes one pass of EvictLoop: it evicts the members seen dead for
// EvictGrace on the clock.
func (e *evictor) pass(ctx context.Context) {
	a := e.a
	members, err := a.pg.Members(ctx)
	if err != nil {
		return
	}
	now := a.clk.Now()
	for _, m := range members {
		if m.Alive || m.Name == a.member {
			delete(e.deadSince, m.Name)
			continue
		}
		if _, ok := e.deadSince[m.Name]; !ok {
			e.deadSince[m.Name] = now
		}
		if now.Sub(e.deadSince[m.Name]) < EvictGrace {
			continue
		}
		settled := 0
		err := a.pg.Evict(ctx, m.Name, func(ctx context.Context, epoch int64) error {
			n, err := e.s.SettleOwner(fabric.WithEpoch(ctx, fabric.Epoch{Domain: m.Name, N: epoch}), m.Name)
			settled = n
			return err
		})
		switch {
		case errors.Is(err, postgres.ErrAlive):
		case err != nil:
			a.log.Warn("active replica: evicting a dead replica", "replica", m.Name, "err", err)
		default:
			delete(e.deadSince, m.Name)
			a.log.Info("evicted a dead replica", "replica", m.Name, "settled_compositions", settled)
		}
	}
}

// sleep sleeps for d on the clock or until ctx ends.
func (a *Active) sleep(ctx context.Context, d time.Duration) {
	t := clock.NewTicker(a.clk, d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C():
	}
}
