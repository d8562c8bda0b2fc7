package compose_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"rackpool/internal/compose"
	"rackpool/internal/store"
)

// A request carries the records it was decided on (a tenant's quota
// record): every plan that takes blocks checks them, and a stale one
// refuses the change with store.ErrConflict and leaves nothing held.
func TestRequestsCheckTheirRecords(t *testing.T) {
	e := newEnv(t, loadRack(t))
	quota := store.ObjectChange{Kind: "tenant", Object: store.Object{ID: "blue", Data: []byte("{}"), Version: 1}}
	if err := e.store.Apply(ctx, store.Plan{Objects: []store.ObjectChange{quota}}); err != nil {
		t.Fatal(err)
	}
	current := []store.ObjectRef{{Kind: "tenant", ID: "blue", Version: 1}}
	stale := []store.ObjectRef{{Kind: "tenant", ID: "blue", Version: 7}}

	req := specific("host1", "gpu1")
	req.Tenant, req.Check = "blue", stale
	if _, err := e.m.Compose(ctx, req); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("compose on a stale record: %v, want a conflict", err)
	}
	e.checkEmpty()
	req.Check = current
	c, err := e.m.Compose(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.m.Update(ctx, c.ID, compose.UpdateRequest{Blocks: []string{"nvme1"}, Check: stale}); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("update on a stale record: %v, want a conflict", err)
	}
	if _, err := e.m.ReserveAll(ctx, []compose.Request{{Host: "host2", Blocks: []string{"gpu2"}, Check: stale}}, time.Minute); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("reserve on a stale record: %v, want a conflict", err)
	}
	mreq := specific("host2", "gpu2")
	mreq.Check = stale
	if _, err := e.m.Apply(ctx, compose.Manifest{Stanzas: []compose.Stanza{{Compose: &mreq}}}); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("manifest on a stale record: %v, want a conflict", err)
	}
	e.checkConsistent()
	if got := e.stored(); len(got) != 1 || len(got[0].Blocks) != 2 {
		t.Fatalf("stored after refused changes: %v", summaries(got))
	}
}

// ExpireLoop runs on the manager's clock: advancing it past a
// reservation's expiry and one period releases the reservation, with no
// wall-clock wait.
func TestExpireLoopOnInjectedClock(t *testing.T) {
	e := newEnv(t, loadRack(t))
	r, err := e.m.Reserve(ctx, specific("host1", "gpu1"), time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	loopCtx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); e.m.ExpireLoop(loopCtx, time.Hour) }()
	defer func() { cancel(); <-done }()
	deadline := time.Now().Add(10 * time.Second)
	for len(e.stored()) != 0 { // Reservations hides an expired one at once; the store shows the release
		if time.Now().After(deadline) {
			t.Fatalf("reservation %s still held after the clock passed its expiry and a period", r.ID)
		}
		e.clk.Advance(time.Hour) // the loop may not have taken its ticker yet: keep ticking
		time.Sleep(10 * time.Millisecond)
	}
	e.checkConsistent()
}
