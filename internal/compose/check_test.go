package compose_test

import (
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
