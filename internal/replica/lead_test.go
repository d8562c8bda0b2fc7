package replica_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"rackpool/internal/clock"
	"rackpool/internal/replica"
	"rackpool/internal/store"
	"rackpool/internal/store/postgres"
	"rackpool/internal/store/postgres/pgtest"
)

// gateClock is a manual clock whose Sleep waits for the test: it reports
// the wait on sleeps and returns when the test sends on wake, so the test
// decides what happens between a lost session and the next attempt.
type gateClock struct {
	*clock.Manual
	sleeps chan time.Duration
	wake   chan struct{}
}

func newGateClock() *gateClock {
	return &gateClock{Manual: clock.NewManual(time.Unix(0, 0)), sleeps: make(chan time.Duration), wake: make(chan struct{})}
}

func (g *gateClock) Sleep(d time.Duration) {
	g.sleeps <- d
	<-g.wake
	g.Advance(d)
}

// terminate ends the database sessions named who, as the server ends a
// silent one.
func terminate(t *testing.T, url, who string) {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = $1`, who); err != nil {
		t.Fatal(err)
	}
}

func openStore(t *testing.T, url string) *postgres.Store {
	t.Helper()
	st, err := postgres.Open(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// TestLead: a lost session is taken again with the next epoch; when
// another process holds the role, or held it in between, the Lead reports
// ErrDeposed (serve then exits with status 3) and holds nothing.
func TestLead(t *testing.T) {
	if testing.Short() {
		t.Skip("starts PostgreSQL")
	}
	pg := pgtest.Start(t)
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		// between runs while the lead is lost, before the next attempt.
		between func(t *testing.T, other *postgres.Store)
		deposed bool
	}{
		{"taken again", func(*testing.T, *postgres.Store) {}, false},
		{"held by another", func(t *testing.T, other *postgres.Store) {
			l, err := other.Lead(ctx, replica.ServeRole, "replica-b", postgres.LeadOptions{Wait: true})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(l.Release)
		}, true},
		{"held by another meanwhile", func(t *testing.T, other *postgres.Store) {
			l, err := other.Lead(ctx, replica.ServeRole, "replica-b", postgres.LeadOptions{Wait: true})
			if err != nil {
				t.Fatal(err)
			}
			l.Release()
		}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			url := pg.CreateDatabase(t, pgtest.DatabaseName(t))
			st, other := openStore(t, url), openStore(t, url)
			l, err := st.Lead(ctx, replica.ServeRole, "replica-a", postgres.LeadOptions{})
			if err != nil {
				t.Fatal(err)
			}
			clk := newGateClock()
			k := replica.Keep(st, l, replica.LeadOptions{Role: replica.ServeRole, Who: "replica-a", Clock: clk})
			defer k.Release()
			if !k.Holding() || k.Epoch() != l.Epoch || k.Check(ctx) != nil {
				t.Fatalf("holding %v, epoch %d (want %d), check %v", k.Holding(), k.Epoch(), l.Epoch, k.Check(ctx))
			}
			terminate(t, url, "replica-a")
			<-clk.sleeps // the Lead saw the loss and waits to try again
			if k.Holding() {
				t.Error("holding with a lost session")
			}
			tc.between(t, other)
			clk.wake <- struct{}{}
			if tc.deposed {
				select {
				case err := <-k.Deposed():
					if !errors.Is(err, replica.ErrDeposed) {
						t.Errorf("deposed with %v, want ErrDeposed", err)
					}
				case <-time.After(10 * time.Second):
					t.Fatal("not deposed")
				}
				if k.Holding() || k.Epoch() != 0 || !errors.Is(k.Check(ctx), postgres.ErrFenced) {
					t.Errorf("after deposition: holding %v, epoch %d, check %v", k.Holding(), k.Epoch(), k.Check(ctx))
				}
				return
			}
			deadline := time.Now().Add(10 * time.Second)
			for k.Epoch() != l.Epoch+1 || !k.Holding() {
				select {
				case d := <-clk.sleeps: // a failed attempt: let it try again
					t.Logf("waits %v more", d)
					clk.wake <- struct{}{}
				case err := <-k.Deposed():
					t.Fatalf("deposed: %v", err)
				case <-time.After(10 * time.Millisecond):
				}
				if time.Now().After(deadline) {
					t.Fatalf("lead not taken again: epoch %d, holding %v", k.Epoch(), k.Holding())
				}
			}
			if err := st.PutSetting(ctx, "k", "v"); err != nil {
				t.Errorf("a write after the lead was taken again: %v", err)
			}
			k.Release()
			if k.Holding() {
				t.Error("holding after Release")
			}
		})
	}
}

// TestLeadAlone: one replica serves a database alone; another is refused
// unless it is a standby, which waits and takes over when the first stops;
// a standby of another datacenter is refused at once; a replica leading on
// its own records an edited topology.
func TestLeadAlone(t *testing.T) {
	if testing.Short() {
		t.Skip("starts PostgreSQL")
	}
	pg := pgtest.Start(t)
	url := pg.CreateDatabase(t, pgtest.DatabaseName(t))
	ctx := context.Background()
	opts := replica.AloneOptions{Name: "rack", Digest: "d1"}
	a, err := replica.LeadAlone(ctx, openStore(t, url), opts)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Release()
	if _, err := replica.LeadAlone(ctx, openStore(t, url), opts); !errors.Is(err, postgres.ErrLocked) {
		t.Fatalf("a second replica serving alone: %v, want ErrLocked", err)
	}
	var mismatch *store.TopologyMismatch
	if _, err := replica.LeadAlone(ctx, openStore(t, url), replica.AloneOptions{Name: "pod", Digest: "d2", Standby: true}); !errors.As(err, &mismatch) {
		t.Fatalf("a standby of another datacenter: %v, want a TopologyMismatch", err)
	}
	standby := make(chan *replica.Lead, 1)
	go func() {
		o := opts
		o.Standby = true
		l, err := replica.LeadAlone(ctx, openStore(t, url), o)
		if err != nil {
			t.Error(err)
		}
		standby <- l
	}()
	select {
	case <-standby:
		t.Fatal("the standby led while another served")
	case <-time.After(300 * time.Millisecond):
	}
	first := a.Epoch()
	a.Release()
	var b *replica.Lead
	select {
	case b = <-standby:
	case <-time.After(10 * time.Second):
		t.Fatal("the standby did not take over")
	}
	if b == nil {
		t.FailNow()
	}
	if b.Epoch() != first+1 || !b.Holding() {
		t.Errorf("standby epoch %d (first %d), holding %v", b.Epoch(), first, b.Holding())
	}
	b.Release()

	st := openStore(t, url)
	c, err := replica.LeadAlone(ctx, st, replica.AloneOptions{Name: "rack-edited", Digest: "d3"})
	if err != nil {
		t.Fatalf("a replica leading alone with an edited topology: %v", err)
	}
	defer c.Release()
	if d, _, _ := st.Setting(ctx, store.TopologyDigestKey); d != "d3" {
		t.Errorf("recorded digest %q, want d3", d)
	}
}
