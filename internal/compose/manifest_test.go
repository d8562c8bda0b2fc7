package compose_test

import (
	"errors"
	"slices"
	"testing"
	"time"

	"rackpool/internal/compose"
	"rackpool/internal/fabric"
	"rackpool/internal/inventory"
	"rackpool/internal/topology"
)

func composeStanza(req compose.Request) compose.Stanza { return compose.Stanza{Compose: &req} }

// TestManifestApply: compose stanzas, a consumed reservation and a
// decompose stanza all happen together.
func TestManifestApply(t *testing.T) {
	e := newEnv(t, loadRack(t))
	old := e.compose(specific("host1", "gpu1", "hdd1"))
	res, err := e.m.Reserve(ctx, specific("host3", "gpu3"), time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	done, err := e.m.Apply(ctx, compose.Manifest{Stanzas: []compose.Stanza{
		composeStanza(specific("host2", "gpu2", "memnode1-b02")),
		{Reserved: res.ID},
		{Decompose: old.ID},
		composeStanza(specific("host4", "gpu1")), // the block the decompose frees is taken only after it: refused
	}})
	var se *compose.StanzaError
	if !errors.As(err, &se) || se.Index != 3 {
		t.Fatalf("Apply = %v, want a failure at stanza 3 (gpu1 is still held when it is placed)", err)
	}
	if len(done) != 0 {
		t.Fatalf("a failed manifest returned systems %q", summaries(done))
	}
	// Nothing changed: the old system, the reservation.
	checkFabrics(t, e.top, e.drivers, e.m.List())
	if n := len(e.stored()); n != 2 {
		t.Errorf("store holds %d records after a refused manifest, want 2 (the system, the reservation)", n)
	}
	if _, err := e.m.GetReservation(res.ID); err != nil {
		t.Fatalf("the reservation is gone after a manifest that failed to place: %v", err)
	}
	if got := e.m.List(); len(got) != 1 || got[0].ID != old.ID {
		t.Fatalf("after a refused manifest: %q", summaries(got))
	}

	done, err = e.m.Apply(ctx, compose.Manifest{Stanzas: []compose.Stanza{
		composeStanza(specific("host2", "gpu2", "memnode1-b02")),
		{Reserved: res.ID},
		{Decompose: old.ID},
	}})
	if err != nil {
		t.Fatal(err)
	}
	if len(done) != 2 || done[0].Host != "host2" || done[1].Host != "host3" || !slices.Contains(done[1].Blocks, "gpu3") {
		t.Fatalf("Apply returned %q", summaries(done))
	}
	for _, c := range done {
		if c.State != inventory.Composed || c.Group != "" {
			t.Errorf("%s", summary(c))
		}
	}
	if _, err := e.m.Get(old.ID); !errors.Is(err, compose.ErrNotFound) {
		t.Errorf("the decomposed system is still there: %v", err)
	}
	if _, err := e.m.GetReservation(res.ID); !errors.Is(err, compose.ErrNotFound) {
		t.Errorf("the consumed reservation is still there: %v", err)
	}
	e.checkConsistent()
	for _, c := range done {
		if err := e.m.Decompose(ctx, c.ID, 0); err != nil {
			t.Fatal(err)
		}
	}
	e.checkEmpty()
}

// TestManifestRollback: a fabric failure anywhere in a recorded manifest
// puts everything back: new systems gone, old ones composed and attached.
func TestManifestRollback(t *testing.T) {
	for _, tc := range []struct {
		name string
		fail func(e *env)
	}{
		{"attach of the second new system fails", func(e *env) { e.faulty["falcon1"].FailNthAttach(2) }},
		{"detach of the old system fails", func(e *env) { e.faulty["sas1"].FailNextDetaches(1) }},
		// The old system was never detached: the rollback must not touch
		// it (a re-attach could fail too and leave it in transition).
		{"attach fails, and would again", func(e *env) { e.faulty["falcon1"].FailNthAttach(2); e.faulty["falcon1"].FailNthAttach(3) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, loadRack(t))
			old := e.compose(specific("host1", "gpu1", "hdd1"))
			res, err := e.m.Reserve(ctx, specific("host3", "gpu3"), time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			tc.fail(e)
			_, err = e.m.Apply(ctx, compose.Manifest{Stanzas: []compose.Stanza{
				composeStanza(specific("host2", "gpu2")),
				{Reserved: res.ID},
				{Decompose: old.ID},
			}})
			if err == nil {
				t.Fatal("Apply succeeded despite the fabric failure")
			}
			got := e.m.List()
			if len(got) != 1 || got[0].ID != old.ID || !slices.Equal(got[0].Blocks, old.Blocks) {
				t.Fatalf("after the rollback: %q, want only %s", summaries(got), summary(old))
			}
			e.checkConsistent()
			// The consumed reservation stays consumed.
			if _, err := e.m.GetReservation(res.ID); !errors.Is(err, compose.ErrNotFound) {
				t.Errorf("reservation after a failed manifest: %v", err)
			}
			if err := e.m.Decompose(ctx, old.ID, 0); err != nil {
				t.Fatal(err)
			}
			e.checkEmpty()
		})
	}
}

// TestRecoverManifest: a manifest found in transition at start-up (its
// intent recorded, some of its attaches and detaches done) is rolled back
// as a whole.
func TestRecoverManifest(t *testing.T) {
	top := loadRack(t)
	e := newEnv(t, top)
	old := e.compose(specific("host1", "gpu1", "hdd1", "memnode1-b01"))
	other := e.compose(specific("host3", "gpu3"))
	at := e.clk.Now()
	const group = "manifest-0123"
	newSys := &inventory.Composition{ID: "sys-new", Name: "sys-new", Host: "host2", State: inventory.Composing, Version: 1,
		CreatedAt: at, UpdatedAt: at, Group: group, Blocks: []string{"host2", "gpu2", "hdd2"},
		Ports: map[string]string{"gpu2": "pcie", "hdd2": "sas"}}
	dec := old.Clone()
	dec.State, dec.Version, dec.Group = inventory.Decomposing, old.Version+1, group
	// A plain decompose in flight is finished, not rolled back.
	plain := other.Clone()
	plain.State, plain.Version = inventory.Decomposing, other.Version+1
	e.put(newSys, dec, plain)
	e.attach(e.drivers, newSys, "gpu2")
	if _, err := e.drivers["sas1"].Detach(ctx, attachmentOf(top, old, "hdd1")); err != nil {
		t.Fatal(err)
	}

	e.m = e.manager(e.drivers)
	got := e.m.List()
	if len(got) != 1 || got[0].ID != old.ID || got[0].State != inventory.Composed || got[0].Group != "" ||
		!slices.Equal(got[0].Blocks, old.Blocks) {
		t.Fatalf("after recovery: %q, want %s composed again", summaries(got), old.ID)
	}
	e.checkConsistent()
}

// attachmentOf is the fabric attachment of block b of c.
func attachmentOf(top *topology.Topology, c *inventory.Composition, b string) fabric.Attachment {
	blk := top.Block(b)
	return fabric.Attachment{Block: b, Device: blk.Device.ID, Host: c.Host, HostPort: c.Ports[b]}
}
