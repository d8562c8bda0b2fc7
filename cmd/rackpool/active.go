package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"rackpool/internal/compose"
	"rackpool/internal/fabric"
	"rackpool/internal/redfish"
	"rackpool/internal/store/postgres"
	"rackpool/internal/topology"
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

// leaderRole is the role of the leader of active replicas.
const leaderRole = "leader"

// Settings that tell the replicas where the others are.
const (
	peerKeyPrefix = "replica/peer/" // + tag: the replica's advertised peer
	leaderKey     = "replica/leader"
)

// active is this replica's membership and leadership.
type active struct {
	pg     *postgres.Store
	spec   string
	tag    string // letters and digits: it begins this replica's task IDs
	member string // postgres.MemberPrefix + tag
	who    string
	log    *slog.Logger

	held      atomic.Pointer[postgres.Leadership] // the membership
	lead      atomic.Pointer[postgres.Leadership] // the leader role, while held
	leadEpoch atomic.Int64                        // the leader role's epoch last held

	mu     sync.Mutex
	cached map[string]peerEntry // by tag; "" is the leader
}

type peerEntry struct {
	p   redfish.Peer
	ok  bool
	err error
	at  time.Time
}

// peerCacheTTL bounds how stale a looked-up peer may be.
const peerCacheTTL = 500 * time.Millisecond

// evictGrace is how long a member must have been dead before the leader
// evicts it: a replica whose session broke with the database's restart
// takes its membership again within a second or two.
const evictGrace = postgres.DefaultLeaseTTL

// openActive joins the database as an active replica.
func openActive(ctx context.Context, st *postgres.Store, spec string, top *topology.Topology, log *slog.Logger) (*active, error) {
	for _, f := range top.Fabrics {
		if f.Driver != topology.DriverRedfish {
			return nil, fmt.Errorf("--active: fabric %s is driven by %q, inside this process; replicas that all compose need the fabrics they share: drive every fabric with the redfish driver (a fabric manager, or rackpool fabric-emulator)",
				f.ID, f.Driver)
		}
	}
	digest := topology.Digest(top)
	if err := sameTopology(ctx, st, top, digest); err != nil {
		return nil, err
	}
	var r [5]byte
	if _, err := rand.Read(r[:]); err != nil {
		return nil, err
	}
	host, _ := os.Hostname()
	a := &active{pg: st, spec: spec, tag: hex.EncodeToString(r[:]), log: log, cached: map[string]peerEntry{}}
	a.member = postgres.MemberPrefix + a.tag
	a.who = fmt.Sprintf("rackpool serve pid %d on %s, replica %s", os.Getpid(), host, a.tag)
	l, err := st.Lead(ctx, a.member, a.who, postgres.LeadOptions{Shared: serveRole})
	if err != nil {
		if errors.Is(err, postgres.ErrLocked) {
			return nil, fmt.Errorf("--store %s is served by a replica serving alone (%v); stop it, or start this one without --active", postgres.Redact(spec), err)
		}
		return nil, fmt.Errorf("--store: %w", err)
	}
	a.held.Store(l)
	if err := recordTopology(ctx, st, top, digest, true, log); err != nil {
		l.Release()
		return nil, err
	}
	go keepLead(st, &a.held, a.member, postgres.LeadOptions{Shared: serveRole}, a.who, spec, log)
	log.Info("active replica of the database", "store", postgres.Redact(spec), "replica", a.tag, "epoch", l.Epoch)
	return a, nil
}

// epoch is the membership's epoch, which every composition's fabric change
// carries.
func (a *active) epoch() fabric.Epoch {
	if l := a.held.Load(); l != nil {
		return fabric.Epoch{Domain: a.member, N: l.Epoch}
	}
	return fabric.Epoch{}
}

// leaderEpoch is the leader role's epoch, which the drive manager's SAS
// changes carry (it runs on the leader alone). Once the role is lost it
// stays the last one held: a change still under way then is refused by a
// fabric the next leader has changed.
func (a *active) leaderEpoch() fabric.Epoch {
	return fabric.Epoch{Domain: leaderRole, N: a.leadEpoch.Load()}
}

// leads reports whether this replica leads now.
func (a *active) leads() bool { return a.lead.Load() != nil }

// release gives up the leadership and the membership.
func (a *active) release() {
	if l := a.lead.Swap(nil); l != nil {
		l.Release()
	}
	if l := a.held.Swap(nil); l != nil {
		l.Release()
	}
}

// advertise records how the other replicas reach this one: its URL and
// the certificate authority its certificate chains to.
func (a *active) advertise(ctx context.Context, url string, ca []byte) error {
	b, err := json.Marshal(redfish.Peer{URL: url, CA: ca})
	if err != nil {
		return err
	}
	if err := a.pg.PutSetting(ctx, peerKeyPrefix+a.tag, string(b)); err != nil {
		return fmt.Errorf("advertise this replica: %w", err)
	}
	return nil
}

// Leader implements redfish.Peers.
func (a *active) Leader(ctx context.Context) (redfish.Peer, bool, error) {
	if a.leads() {
		return redfish.Peer{}, true, nil
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

// Replica implements redfish.Peers.
func (a *active) Replica(ctx context.Context, tag string) (redfish.Peer, bool, error) {
	e := a.lookup(tag, func() peerEntry {
		p, ok, err := a.peer(ctx, tag)
		return peerEntry{p: p, ok: ok, err: err}
	})
	return e.p, e.ok, e.err
}

// lookup returns the cached entry for key, or a fresh one from find.
func (a *active) lookup(key string, find func() peerEntry) peerEntry {
	a.mu.Lock()
	e, ok := a.cached[key]
	a.mu.Unlock()
	if ok && time.Since(e.at) < peerCacheTTL {
		return e
	}
	e = find()
	e.at = time.Now()
	a.mu.Lock()
	if len(a.cached) > 1024 {
		clear(a.cached)
	}
	a.cached[key] = e
	a.mu.Unlock()
	return e
}

// peer reads tag's advertisement; ok is false unless tag is a live member.
func (a *active) peer(ctx context.Context, tag string) (redfish.Peer, bool, error) {
	members, err := a.pg.Members(ctx)
	if err != nil {
		return redfish.Peer{}, false, err
	}
	alive := false
	for _, m := range members {
		alive = alive || m.Name == postgres.MemberPrefix+tag && m.Alive
	}
	if !alive {
		return redfish.Peer{}, false, nil
	}
	v, ok, err := a.pg.Setting(ctx, peerKeyPrefix+tag)
	if err != nil || !ok {
		return redfish.Peer{}, false, err
	}
	var p redfish.Peer
	if err := json.Unmarshal([]byte(v), &p); err != nil {
		return redfish.Peer{}, false, fmt.Errorf("replica %s's advertisement: %w", tag, err)
	}
	return p, true, nil
}

// runLeader waits for the leader role and, while it holds it, runs duties
// (which starts the leader's loops under the context it gets and returns;
// the context ends when the role is lost). It returns when ctx ends.
func (a *active) runLeader(ctx context.Context, duties func(ctx context.Context) error) {
	for ctx.Err() == nil {
		l, err := a.pg.Lead(ctx, leaderRole, a.who, postgres.LeadOptions{Wait: true, NoFence: true})
		if err != nil {
			if ctx.Err() == nil {
				a.log.Warn("active replica: waiting for the lead", "err", err)
				sleepCtx(ctx, time.Second)
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
			sleepCtx(ctx, time.Second)
		}
	}
}

// evictLoop, on the leader, evicts every member dead for evictGrace,
// settling its unfinished compositions with its raised epoch.
func (a *active) evictLoop(ctx context.Context, mgr *compose.Manager) {
	deadSince := map[string]time.Time{}
	everySecond(ctx, func(ctx context.Context) { a.evict(ctx, mgr, deadSince) })
}

// evict makes one pass of evictLoop; deadSince remembers since when each
// dead member has been seen dead.
func (a *active) evict(ctx context.Context, mgr *compose.Manager, deadSince map[string]time.Time) {
	members, err := a.pg.Members(ctx)
	if err != nil {
		return
	}
	now := time.Now()
	for _, m := range members {
		if m.Alive || m.Name == a.member {
			delete(deadSince, m.Name)
			continue
		}
		if _, ok := deadSince[m.Name]; !ok {
			deadSince[m.Name] = now
		}
		if now.Sub(deadSince[m.Name]) < evictGrace {
			continue
		}
		settled := 0
		err := a.pg.Evict(ctx, m.Name, func(ctx context.Context, epoch int64) error {
			n, err := mgr.SettleOwner(fabric.WithEpoch(ctx, fabric.Epoch{Domain: m.Name, N: epoch}), m.Name)
			settled = n
			return err
		})
		switch {
		case errors.Is(err, postgres.ErrAlive):
		case err != nil:
			a.log.Warn("active replica: evicting a dead replica", "replica", m.Name, "err", err)
		default:
			delete(deadSince, m.Name)
			a.log.Info("evicted a dead replica", "replica", m.Name, "settled_compositions", settled)
		}
	}
}

// advertisedCA is the PEM of the certificate authority this replica's
// certificate chains to: the service's own CA, or the top of the
// operator's chain; nil for plain HTTP.
func advertisedCA(certs *certSource, ownCA bool, data string) ([]byte, error) {
	if certs == nil {
		return nil, nil
	}
	if ownCA {
		return os.ReadFile(filepath.Join(data, "tls", "ca.pem"))
	}
	c := certs.cur.Load()
	if c == nil || len(c.Certificate) == 0 {
		return nil, errors.New("no certificate is served")
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.Certificate[len(c.Certificate)-1]}), nil
}

// sleepCtx sleeps for d or until ctx ends.
func sleepCtx(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}
