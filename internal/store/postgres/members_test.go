package postgres_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"rackpool/internal/store/postgres"
	"rackpool/internal/store/postgres/pgtest"
)

// TestMembers: active replicas each hold a membership of their own, taking
// "serve" shared, so a replica serving alone is refused beside them; the
// leader evicts a member whose session ended (raising its epoch for the
// settlement, then removing it) and the evicted member can never write
// again, while the others can.
func TestMembers(t *testing.T) {
	srv := shared(t)
	url := srv.CreateDatabase(t, pgtest.DatabaseName(t))
	ctx := context.Background()
	a, b, c := openURL(t, url), openURL(t, url), openURL(t, url)
	defer a.Close()
	defer b.Close()
	defer c.Close()
	la, err := a.Lead(ctx, postgres.MemberPrefix+"a", "replica-a", postgres.LeadOptions{Shared: "serve"})
	if err != nil {
		t.Fatal(err)
	}
	defer la.Release()
	lb, err := b.Lead(ctx, postgres.MemberPrefix+"b", "replica-b", postgres.LeadOptions{Shared: "serve"})
	if err != nil {
		t.Fatal(err)
	}
	defer lb.Release()
	if _, err := c.Lead(ctx, "serve", "alone", postgres.LeadOptions{}); !errors.Is(err, postgres.ErrLocked) {
		t.Fatalf("a replica serving alone beside active ones: %v, want ErrLocked", err)
	}
	lead, err := c.Lead(ctx, "leader", "replica-c", postgres.LeadOptions{NoFence: true})
	if err != nil {
		t.Fatal(err)
	}
	defer lead.Release()
	if err := c.PutSetting(ctx, "k", "c"); err != nil {
		t.Fatalf("a write not fenced by the leader role: %v", err)
	}
	members, err := c.Members(ctx)
	if err != nil || len(members) != 2 || !members[0].Alive || !members[1].Alive || members[0].Name != "member/a" {
		t.Fatalf("Members = %+v, %v; want a and b alive", members, err)
	}
	if err := c.Evict(ctx, "member/b", func(context.Context, int64) error { t.Error("settled a live member"); return nil }); !errors.Is(err, postgres.ErrAlive) {
		t.Errorf("Evict(live) = %v, want ErrAlive", err)
	}
	if err := c.Evict(ctx, "leader", func(context.Context, int64) error { return nil }); err == nil {
		t.Error("evicted a role that is not a membership")
	}

	// a's session ends as the server ends a silent one.
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = 'replica-a'`); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		members, err = c.Members(ctx)
		if err == nil && len(members) == 2 && !members[0].Alive && members[1].Alive {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("Members = %+v, %v; want a dead, b alive", members, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	// A settlement that fails leaves the member, with its raised epoch.
	boom := errors.New("fabric unreachable")
	if err := c.Evict(ctx, "member/a", func(_ context.Context, e int64) error {
		if e != 2 {
			t.Errorf("settle epoch %d, want 2", e)
		}
		return boom
	}); !errors.Is(err, boom) {
		t.Fatalf("Evict with a failing settlement = %v", err)
	}
	if err := a.PutSetting(ctx, "k", "a"); !errors.Is(err, postgres.ErrFenced) {
		t.Errorf("the member's write after its epoch was raised = %v, want ErrFenced", err)
	}
	settled := 0
	if err := c.Evict(ctx, "member/a", func(_ context.Context, e int64) error {
		settled++
		if e != 3 {
			t.Errorf("settle epoch %d, want 3", e)
		}
		return nil
	}); err != nil || settled != 1 {
		t.Fatalf("Evict = %v (settled %d times)", err, settled)
	}
	if members, err = c.Members(ctx); err != nil || len(members) != 1 || members[0].Name != "member/b" {
		t.Errorf("after the eviction Members = %+v, %v", members, err)
	}
	if err := a.PutSetting(ctx, "k", "a"); !errors.Is(err, postgres.ErrFenced) || !strings.Contains(err.Error(), "evicted") {
		t.Errorf("the evicted member's write = %v, want ErrFenced", err)
	}
	if err := b.PutSetting(ctx, "k", "b"); err != nil {
		t.Errorf("a live member's write: %v", err)
	}
	if v, _, _ := c.Setting(ctx, "k"); v != "b" {
		t.Errorf("setting = %q, want b", v)
	}
}
