package compose_test

import (
	"errors"
	"testing"

	"rackpool/internal/compose"
	"rackpool/internal/fabric"
	"rackpool/internal/inventory"
	"rackpool/internal/topology"
)

// TestSettleOwner: an active replica (member/a) dies with a composition
// half done: its intent is stored, its attachment is on the shared fabric.
// Another replica starting meanwhile leaves the record alone (it may be a
// workflow under way); the leader settles it for member/a with member/a's
// raised epoch, after which the fabric refuses member/a's late changes but
// not the other replicas'. Every record a replica writes names it.
func TestSettleOwner(t *testing.T) {
	e := newEnv(t, topology.LoadDefault())
	epochA := fabric.Epoch{Domain: "member/a", N: 1}
	ds := &downStore{Store: e.store}
	a, err := compose.New(ctx, compose.Options{Topology: e.top, Store: ds, Drivers: e.drivers, Clock: e.clk,
		Replica: "member/a", Epoch: func() fabric.Epoch { return epochA }})
	if err != nil {
		t.Fatal(err)
	}
	ds.down.Store(true) // a's outcome is never recorded: it died after its intent
	if _, err := a.Compose(ctx, compose.Request{Host: "host1", Blocks: []string{"host1", "gpu1"}}); err == nil {
		t.Fatal("compose with its outcome unrecorded succeeded")
	}
	stored := e.stored()
	if len(stored) != 1 || stored[0].State != inventory.Composing || stored[0].Owner != "member/a" {
		t.Fatalf("stored %+v, want one Composing record owned by member/a", stored)
	}
	// Its rollback detached what it attached, but could not record that;
	// its attach reaches the fabric late (it was paused sending it).
	att := fabric.Attachment{Block: "gpu1", Host: "host1", HostPort: stored[0].Ports["gpu1"]}
	for _, d := range e.drivers {
		_, _ = d.Attach(fabric.WithEpoch(ctx, epochA), att)
	}
	if got := discovered(t, e.drivers); len(got) != 1 {
		t.Fatalf("fabric holds %v, want the half-done attachment", got)
	}

	b, err := compose.New(ctx, compose.Options{Topology: e.top, Store: e.store, Drivers: e.drivers, Clock: e.clk,
		Replica: "member/b", Epoch: func() fabric.Epoch { return fabric.Epoch{Domain: "member/b", N: 1} }})
	if err != nil {
		t.Fatal(err)
	}
	if cs := e.stored(); len(cs) != 1 || len(discovered(t, e.drivers)) != 1 {
		t.Fatal("a replica's start-up settled another's record in transition")
	}
	if _, err := b.Compose(ctx, compose.Request{Host: "host1", Blocks: []string{"host1"}}); err == nil {
		t.Fatal("composed host1, which the half-done composition holds")
	}
	if n, err := b.SettleOwner(ctx, "member/b"); n != 0 || err != nil {
		t.Errorf("SettleOwner(itself) = %d, %v", n, err)
	}
	n, err := b.SettleOwner(fabric.WithEpoch(ctx, fabric.Epoch{Domain: "member/a", N: 2}), "member/a")
	if err != nil || n != 1 {
		t.Fatalf("SettleOwner(member/a) = %d, %v; want 1 settled", n, err)
	}
	if cs := e.stored(); len(cs) != 0 {
		t.Errorf("store holds %v after the settlement", summaries(cs))
	}
	if got := discovered(t, e.drivers); len(got) != 0 {
		t.Errorf("fabric holds %v after the settlement", got)
	}
	if len(b.List()) != 0 {
		t.Errorf("b's snapshot holds %v", summaries(b.List()))
	}
	// member/a resumes: the fabric refuses its epoch now.
	fenced := 0
	for id, d := range e.drivers {
		_, err := d.Attach(fabric.WithEpoch(ctx, epochA), att)
		switch {
		case errors.Is(err, fabric.ErrFenced):
			fenced++
		case err == nil:
			t.Errorf("fabric %s admitted member/a's late attach", id)
		case !errors.Is(err, fabric.ErrUnknown):
			t.Errorf("fabric %s: member/a's late attach = %v", id, err)
		}
	}
	if fenced != 1 {
		t.Errorf("%d fabrics refused member/a's late attach as fenced, want gpu1's", fenced)
	}
	c, err := b.Compose(ctx, compose.Request{Host: "host1", Blocks: []string{"host1", "gpu1"}})
	if err != nil {
		t.Fatalf("b composes after the settlement: %v", err)
	}
	if cs := e.stored(); len(cs) != 1 || cs[0].Owner != "member/b" || cs[0].ID != c.ID {
		t.Errorf("stored %+v, want b's composition naming member/b", cs)
	}
}
