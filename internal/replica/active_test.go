package replica

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"rackpool/internal/clock"
	"rackpool/internal/fabric"
	"rackpool/internal/store"
	"rackpool/internal/store/postgres"
	"rackpool/internal/store/postgres/pgtest"
)

// settler records the settlements the leader makes.
type settler struct {
	settle func(ctx context.Context, owner string) (int, error)
}

func (s settler) SettleOwner(ctx context.Context, owner string) (int, error) {
	return s.settle(ctx, owner)
}

func open(t *testing.T, url string) *postgres.Store {
	t.Helper()
	st, err := postgres.Open(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// TestActive: replicas join a database served with their topology, and
// not one served alone or with another topology; they find each other
// through their advertisements (cached for peerCacheTTL on the clock);
// the leader evicts a member dead for EvictGrace on the clock, not
// before, settling its compositions under its raised epoch.
func TestActive(t *testing.T) {
	if testing.Short() {
		t.Skip("starts PostgreSQL")
	}
	pg := pgtest.Start(t)
	url := pg.CreateDatabase(t, pgtest.DatabaseName(t))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	clk := clock.NewManual(time.Unix(1000, 0))
	opts := JoinOptions{Name: "rack", Digest: "d1", Clock: clk}

	alone := open(t, url)
	l, err := alone.Lead(ctx, ServeRole, "alone", postgres.LeadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Join(ctx, open(t, url), opts); !errors.Is(err, postgres.ErrLocked) {
		t.Fatalf("joining beside a replica serving alone: %v, want ErrLocked", err)
	}
	l.Release()

	a, err := Join(ctx, open(t, url), opts)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Release()
	var mismatch *store.TopologyMismatch
	if _, err := Join(ctx, open(t, url), JoinOptions{Name: "pod", Digest: "d2", Clock: clk}); !errors.As(err, &mismatch) {
		t.Fatalf("joining with another topology: %v, want a TopologyMismatch", err)
	}
	// b's Lead, once its session is lost, waits on the gate to take its
	// membership again.
	gate := &gated{Manual: clk, wake: make(chan struct{})}
	bopts := opts
	bopts.Clock = gate
	b, err := Join(ctx, open(t, url), bopts)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Release()
	if a.Tag() == b.Tag() || a.Member() != postgres.MemberPrefix+a.Tag() || !a.Serving() {
		t.Fatalf("tags %q and %q, member %q, serving %v", a.Tag(), b.Tag(), a.Member(), a.Serving())
	}
	if e := a.Epoch(); e.Domain != a.Member() || e.N < 1 {
		t.Errorf("membership epoch %+v", e)
	}
	if err := a.Advertise(ctx, "https://a:1", []byte("ca-a")); err != nil {
		t.Fatal(err)
	}
	if err := b.Advertise(ctx, "https://b:1", nil); err != nil {
		t.Fatal(err)
	}
	if p, ok, err := a.Replica(ctx, b.Tag()); err != nil || !ok || p.URL != "https://b:1" {
		t.Fatalf("a finds b: %+v, %v, %v", p, ok, err)
	}
	if _, ok, err := a.Replica(ctx, "nobody"); ok || err != nil {
		t.Errorf("a finds a replica that never joined: %v, %v", ok, err)
	}
	if _, _, err := b.Leader(ctx); err == nil {
		t.Error("b finds a leader before any leads")
	}

	// a leads; b forwards to it.
	led := make(chan context.Context, 1)
	go a.RunLeader(ctx, func(lctx context.Context) error { led <- lctx; return nil })
	var lctx context.Context
	select {
	case lctx = <-led:
	case <-time.After(10 * time.Second):
		t.Fatal("a did not take the lead")
	}
	if _, self, err := a.Leader(ctx); !self || err != nil {
		t.Errorf("a leads, yet Leader says self %v, %v", self, err)
	}
	if e := a.LeaderEpoch(); e.Domain != LeaderRole || e.N < 1 {
		t.Errorf("leader epoch %+v", e)
	}
	clk.Advance(peerCacheTTL) // b's cached "no replica leads" expires
	deadline := time.Now().Add(10 * time.Second)
	for {
		p, self, err := b.Leader(ctx)
		if err == nil && !self && p.URL == "https://a:1" && string(p.CA) == "ca-a" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("b's leader: %+v, %v, %v; want a", p, self, err)
		}
		clk.Advance(peerCacheTTL)
		time.Sleep(10 * time.Millisecond)
	}

	// b stops answering: its session ends and it does not take its
	// membership again (its Lead waits on the gate).
	if _, ok, err := a.Replica(ctx, b.Tag()); !ok || err != nil {
		t.Fatalf("a finds b: %v, %v", ok, err)
	}
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = $1`, b.who); err != nil {
		t.Fatal(err)
	}
	for b.Serving() {
		time.Sleep(10 * time.Millisecond)
	}
	// a still sees b's cached advertisement until it expires.
	if _, ok, _ := a.Replica(ctx, b.Tag()); !ok {
		t.Error("a's cached view of b expired early")
	}
	clk.Advance(peerCacheTTL)
	if _, ok, err := a.Replica(ctx, b.Tag()); ok || err != nil {
		t.Errorf("a finds b after it died: %v, %v", ok, err)
	}

	var settled []string
	e := a.evictor(settler{func(ctx context.Context, owner string) (int, error) {
		ep, _ := fabric.EpochFrom(ctx)
		if ep.Domain != owner || ep.N < 2 {
			t.Errorf("settled %s under epoch %+v, want its raised one", owner, ep)
		}
		settled = append(settled, owner)
		return 0, nil
	}})
	e.pass(lctx) // b seen dead now
	clk.Advance(EvictGrace - time.Millisecond)
	e.pass(lctx)
	if len(settled) != 0 {
		t.Fatalf("evicted %v before the grace", settled)
	}
	clk.Advance(time.Millisecond)
	e.pass(lctx)
	if len(settled) != 1 || settled[0] != b.Member() {
		t.Fatalf("settled %v, want b", settled)
	}
	members, err := a.pg.Members(ctx)
	if err != nil || len(members) != 1 || members[0].Name != a.Member() {
		t.Errorf("members after the eviction: %+v, %v", members, err)
	}
	// b, let go, finds its membership taken and is deposed.
	close(gate.wake)
	select {
	case err := <-b.Deposed():
		if !errors.Is(err, ErrDeposed) {
			t.Errorf("b deposed with %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Error("b, evicted, was not deposed")
	}
}

// gated is a manual clock whose Sleep waits until wake is closed.
type gated struct {
	*clock.Manual
	wake chan struct{}
}

func (g *gated) Sleep(d time.Duration) {
	<-g.wake
	g.Advance(d)
}
