package compose_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"

	"rackpool/internal/compose"
	"rackpool/internal/inventory"
	"rackpool/internal/store"
	"rackpool/internal/topology"
)

// downStore fails every plan that is not an intent while down is set: the
// database went away after a workflow recorded its intent.
type downStore struct {
	store.Store
	down atomic.Bool
}

func (d *downStore) Apply(ctx context.Context, p store.Plan) error {
	if d.down.Load() && !p.Intent {
		return store.ErrUnavailable
	}
	return d.Store.Apply(ctx, p)
}

// TestRetryStuck: a compose whose outcome and rollback could not be
// recorded (the database went away) stays Composing and keeps its blocks;
// once the database is back, RetryStuck rolls it back, and the blocks can
// be composed again. A decompose whose intent was recorded but whose end
// could not be answers ErrUnfinished, and RetryStuck finishes it.
func TestRetryStuck(t *testing.T) {
	e := newEnv(t, topology.LoadDefault())
	ds := &downStore{Store: e.store}
	m, err := compose.New(ctx, compose.Options{Topology: e.top, Store: ds, Drivers: e.drivers, Clock: e.clk})
	if err != nil {
		t.Fatal(err)
	}
	req := compose.Request{Host: "host1", Blocks: []string{"host1", "gpu1"}}
	ds.down.Store(true)
	if _, err := m.Compose(ctx, req); !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("compose with the database gone = %v, want ErrUnavailable", err)
	}
	list := m.List()
	if len(list) != 1 || list[0].State != inventory.Composing {
		t.Fatalf("after the failed rollback: %v, want one composition left Composing", list)
	}
	m.RetryStuck(ctx) // still down: nothing changes
	if len(m.List()) != 1 {
		t.Fatal("RetryStuck dropped a composition it could not roll back")
	}
	ds.down.Store(false)
	m.RetryStuck(ctx)
	if left := m.List(); len(left) != 0 {
		t.Fatalf("after RetryStuck with the database back: %v", left)
	}
	if got := discovered(t, e.drivers); len(got) != 0 {
		t.Errorf("fabrics still hold %v", got)
	}
	if cs := e.stored(); len(cs) != 0 {
		t.Errorf("store still holds %d compositions", len(cs))
	}
	sys, err := m.Compose(ctx, req)
	if err != nil {
		t.Fatalf("compose again: %v", err)
	}

	// A decompose recorded (Decomposing) whose end cannot be: not
	// "nothing changed" but unfinished, and finished once the database
	// is back.
	ds.down.Store(true)
	if err := m.Decompose(ctx, sys.ID, 0); !errors.Is(err, compose.ErrUnfinished) || errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("decompose with the database gone = %v, want ErrUnfinished (and not ErrUnavailable)", err)
	}
	m.RetryStuck(ctx)
	if c, err := m.Get(sys.ID); err != nil || c.State != inventory.Decomposing {
		t.Fatalf("after RetryStuck with the database still gone: %v, %v; want it Decomposing", c, err)
	}
	ds.down.Store(false)
	m.RetryStuck(ctx)
	if left := m.List(); len(left) != 0 {
		t.Fatalf("after RetryStuck with the database back: %v", left)
	}
	if got := discovered(t, e.drivers); len(got) != 0 {
		t.Errorf("fabrics still hold %v", got)
	}
}
