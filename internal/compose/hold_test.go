package compose_test

import (
	"errors"
	"slices"
	"testing"

	"rackpool/internal/compose"
	"rackpool/internal/inventory"
	"rackpool/internal/schedule"
	"rackpool/internal/store"
)

// TestSetHeld: a holder's blocks are never composed or placed, a composed
// block cannot be held, a change is all or nothing with the holder's
// objects, the record survives a restart, and giving blocks back makes
// them composable again.
func TestSetHeld(t *testing.T) {
	e := newEnv(t, loadRack(t))
	e.compose(specific("host1", "memnode1-b01"))
	obj := func(id, data string) []store.ObjectChange {
		return []store.ObjectChange{{Kind: "memlease", Object: store.Object{ID: id, Data: []byte(data)}}}
	}
	objects := func() []string {
		t.Helper()
		os, err := e.store.Objects(ctx, "memlease")
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, o := range os {
			out = append(out, o.ID+"="+string(o.Data))
		}
		return out
	}
	if err := e.m.SetHeld(ctx, "leases-memnode1", "memory-leases", []string{"memnode1-b02", "memnode1-b01"}, obj("l1", "x")); !errors.Is(err, compose.ErrBlockBusy) {
		t.Fatalf("holding a composed block = %v, want ErrBlockBusy", err)
	}
	if st := e.m.BlockStatus("memnode1-b02"); st.State != "Unused" || len(objects()) != 0 {
		t.Fatalf("a failed hold left memnode1-b02 %s and objects %v", st.State, objects())
	}
	for _, bad := range []string{"host1", "no-such-block"} {
		if err := e.m.SetHeld(ctx, "leases-memnode1", "memory-leases", []string{bad}, nil); !errors.Is(err, compose.ErrBadRequest) {
			t.Errorf("holding %s = %v, want ErrBadRequest", bad, err)
		}
	}
	if err := e.m.SetHeld(ctx, "leases-memnode1", "memory-leases", []string{"memnode1-b02"}, obj("l1", "one")); err != nil {
		t.Fatal(err)
	}
	if err := e.m.SetHeld(ctx, "leases-memnode1", "memory-leases", []string{"memnode1-b02", "memnode1-b03"}, obj("l2", "two")); err != nil {
		t.Fatalf("growing the hold: %v", err)
	}
	if err := e.m.SetHeld(ctx, "other", "someone", []string{"memnode1-b02"}, nil); !errors.Is(err, compose.ErrBlockBusy) {
		t.Fatalf("another holder's hold = %v, want ErrBlockBusy", err)
	}
	if st := e.m.BlockStatus("memnode1-b02"); st.State != "Unavailable" || st.HeldBy != "memory-leases" {
		t.Fatalf("held block status = %+v", st)
	}
	if _, err := e.m.Compose(ctx, specific("host2", "memnode1-b02")); err == nil {
		t.Fatal("composed a held block")
	}
	if p, err := e.m.Plan(compose.Request{Host: "host2", Needs: []schedule.Need{{Kind: inventory.Memory, Count: 12}}}); err == nil {
		for _, a := range p.Assignments {
			if a.Block.ID == "memnode1-b02" || a.Block.ID == "memnode1-b03" {
				t.Fatalf("the scheduler placed held block %s", a.Block.ID)
			}
		}
	}
	if got := objects(); !slices.Equal(got, []string{"l1=one", "l2=two"}) {
		t.Errorf("objects committed with the holds: %v", got)
	}
	// The store holds the record; a restart keeps it and its blocks.
	e.m = e.manager(e.drivers)
	if got := e.m.Held("leases-memnode1"); !slices.Equal(got, []string{"memnode1-b02", "memnode1-b03"}) {
		t.Fatalf("after a restart the holder holds %v", got)
	}
	if got := e.m.List(); len(got) != 1 {
		t.Errorf("a holder's record is listed as a system: %q", summaries(got))
	}
	if _, err := e.m.Compose(ctx, specific("host2", "memnode1-b03")); err == nil {
		t.Fatal("composed a held block after a restart")
	}
	// Shrink, then let go: the blocks are composable again.
	del := []store.ObjectChange{{Kind: "memlease", Object: store.Object{ID: "l2"}, Delete: true}}
	if err := e.m.SetHeld(ctx, "leases-memnode1", "memory-leases", []string{"memnode1-b02"}, del); err != nil {
		t.Fatal(err)
	}
	e.compose(specific("host2", "memnode1-b03"))
	if err := e.m.SetHeld(ctx, "leases-memnode1", "memory-leases", nil, nil); err != nil {
		t.Fatal(err)
	}
	if got := e.m.Held("leases-memnode1"); got != nil {
		t.Errorf("an empty hold still holds %v", got)
	}
	if st := e.m.BlockStatus("memnode1-b02"); st.State != "Unused" {
		t.Errorf("a block given back is %+v, want Unused", st)
	}
	e.checkConsistent()
}

// TestSetHolders: holders on hosts (blocknodes) hold their host and the
// drives mapped to them; a drive moves between two holders in one plan
// with no instant where a third party could take it; a restart restores
// their fabric attachments instead of detaching them as strays; a refused
// plan changes nothing.
func TestSetHolders(t *testing.T) {
	e := newEnv(t, loadRack(t))
	a := compose.Holding{ID: "blocknode-host1", Owner: "drives", Host: "host1", Blocks: []string{"host1", "hdd1", "hdd2"},
		Ports: map[string]string{"hdd1": "sas", "hdd2": "sas"}}
	b := compose.Holding{ID: "blocknode-host2", Owner: "drives", Host: "host2", Blocks: []string{"host2", "hdd3"},
		Ports: map[string]string{"hdd3": "sas"}}
	if err := e.m.SetHolders(ctx, []compose.Holding{a, b}, nil); err != nil {
		t.Fatal(err)
	}
	e.attach(e.drivers, &inventory.Composition{Host: "host1", Ports: a.Ports}, "hdd1", "hdd2")
	e.attach(e.drivers, &inventory.Composition{Host: "host2", Ports: b.Ports}, "hdd3")
	if _, err := e.m.Compose(ctx, specific("host1")); err == nil {
		t.Fatal("composed a host a holder runs on")
	}
	if _, err := e.m.Compose(ctx, specific("host3", "hdd1")); err == nil {
		t.Fatal("composed a held drive")
	}
	// A holder holds only its own host.
	bad := b
	bad.Blocks = []string{"host2", "host3"}
	if err := e.m.SetHolders(ctx, []compose.Holding{bad}, nil); !errors.Is(err, compose.ErrBadRequest) {
		t.Fatalf("holding another host = %v, want ErrBadRequest", err)
	}
	// Move hdd2 from host1's holder to host2's in one plan.
	a.Blocks = []string{"host1", "hdd1"}
	delete(a.Ports, "hdd2")
	b.Blocks = []string{"host2", "hdd2", "hdd3"}
	b.Ports = map[string]string{"hdd2": "sas", "hdd3": "sas"}
	obj := []store.ObjectChange{{Kind: "drive", Object: store.Object{ID: "hdd2", Data: []byte(`{"owner":"host2"}`)}}}
	if err := e.m.SetHolders(ctx, []compose.Holding{a, b}, obj); err != nil {
		t.Fatalf("move: %v", err)
	}
	if got := e.m.Held("blocknode-host2"); !slices.Equal(got, []string{"hdd2", "hdd3", "host2"}) {
		t.Fatalf("host2's holder holds %v", got)
	}
	if st := e.m.BlockStatus("hdd2"); st.State != "Unavailable" || st.HeldBy != "drives" {
		t.Fatalf("moved drive status %+v", st)
	}
	// Taking a block another holder keeps is refused, and nothing changes.
	c := compose.Holding{ID: "blocknode-host3", Owner: "drives", Host: "host3", Blocks: []string{"host3", "hdd1"}}
	if err := e.m.SetHolders(ctx, []compose.Holding{c}, nil); !errors.Is(err, compose.ErrBlockBusy) {
		t.Fatalf("taking a kept drive = %v, want ErrBlockBusy", err)
	}
	if e.m.Held("blocknode-host3") != nil {
		t.Fatal("a refused holder was recorded")
	}
	// Restart on fresh drivers: the holders' attachments come back.
	e.faulty, e.drivers = e.freshDrivers()
	e.m = e.manager(e.drivers)
	got := discovered(t, e.drivers)
	want := []string{"sas1: hdd1 -> host1/sas", "sas1: hdd2 -> host2/sas", "sas1: hdd3 -> host2/sas"}
	if !slices.Equal(got, want) {
		t.Fatalf("after a restart the fabrics hold %q, want %q", got, want)
	}
	// Letting go of everything makes the host composable again.
	a.Blocks = nil
	if err := e.m.SetHolders(ctx, []compose.Holding{a}, nil); err != nil {
		t.Fatal(err)
	}
	e.compose(specific("host1", "hdd4"))
}
