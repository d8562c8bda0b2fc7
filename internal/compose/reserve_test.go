package compose_test

import (
	"errors"
	"testing"
	"time"

	"rackpool/internal/compose"
	"rackpool/internal/fabric"
	"rackpool/internal/inventory"
	"rackpool/internal/schedule"
)

func TestReservation(t *testing.T) {
	e := newEnv(t, loadRack(t))
	req := specific("host1", "gpu1", "gpu2")
	req.Tenant = "blue"
	r, err := e.m.Reserve(ctx, req, time.Minute)
	if err != nil {
		t.Fatalf("Reserve: %v", err)
	}
	if r.State != inventory.Reserved || r.Tenant != "blue" || !r.ExpiresAt.Equal(r.CreatedAt.Add(time.Minute)) {
		t.Fatalf("reservation = %+v", r)
	}
	// Reserved blocks are held: nobody else gets them, nothing is attached,
	// and the reservation is not a system.
	if _, err := e.m.Compose(ctx, specific("host2", "gpu1")); err == nil {
		t.Fatal("composed a reserved block")
	}
	if a := discovered(t, e.drivers); len(a) != 0 {
		t.Errorf("reservation attached %q", a)
	}
	if len(e.m.List()) != 0 {
		t.Errorf("List shows the reservation: %q", summaries(e.m.List()))
	}
	if st := e.m.BlockStatus("gpu1"); len(st.Reservations) != 1 || st.State != "Unused" {
		t.Errorf("gpu1 status = %+v", st)
	}
	if err := e.m.Decompose(ctx, r.ID, 0); !errors.Is(err, compose.ErrNotFound) {
		t.Errorf("Decompose(reservation) = %v, want ErrNotFound", err)
	}
	// A restart keeps the reservation.
	e.m = e.manager(e.drivers)
	if got := e.m.Reservations(); len(got) != 1 || got[0].ID != r.ID {
		t.Fatalf("after restart reservations = %q", summaries(got))
	}
	// Composing it attaches exactly its blocks, as a new system, and the
	// reservation is gone.
	done, err := e.m.Apply(ctx, compose.Manifest{Stanzas: []compose.Stanza{{Reserved: r.ID}}})
	if err != nil {
		t.Fatalf("Apply(reservation): %v", err)
	}
	c := done[0]
	if c.ID == r.ID || c.Name != c.ID || c.Tenant != "blue" || c.State != inventory.Composed {
		t.Errorf("composed %+v", c)
	}
	if len(e.m.Reservations()) != 0 {
		t.Errorf("reservation still listed")
	}
	e.checkConsistent()
	if _, err := e.m.Apply(ctx, compose.Manifest{Stanzas: []compose.Stanza{{Reserved: r.ID}}}); !errors.Is(err, compose.ErrNotFound) {
		t.Errorf("composing the reservation again = %v, want ErrNotFound", err)
	}
}

func TestReservationExpires(t *testing.T) {
	e := newEnv(t, loadRack(t))
	var changes []string
	m, err := compose.New(ctx, compose.Options{Topology: e.top, Store: e.store, Drivers: e.drivers, Clock: e.clk,
		OnChange: func(c compose.Change) { changes = append(changes, c.Reason) }})
	if err != nil {
		t.Fatal(err)
	}
	e.m = m
	r, err := e.m.Reserve(ctx, specific("host1", "gpu1"), 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	e.clk.Advance(29 * time.Second)
	if _, err := e.m.Compose(ctx, specific("host2", "gpu1")); err == nil {
		t.Fatal("took a live reservation's block")
	}
	e.clk.Advance(time.Second)
	// The next placement expires it first, so the block is free at once.
	c, err := e.m.Compose(ctx, specific("host2", "gpu1"))
	if err != nil {
		t.Fatalf("compose after expiry: %v", err)
	}
	if _, err := e.m.GetReservation(r.ID); !errors.Is(err, compose.ErrNotFound) {
		t.Errorf("expired reservation still there: %v", err)
	}
	if err := e.m.Decompose(ctx, c.ID, 0); err != nil {
		t.Fatal(err)
	}
	e.checkEmpty()
	want := []string{"reserved", "expired", "composed", "decomposed"}
	if len(changes) != len(want) {
		t.Fatalf("changes = %v, want %v", changes, want)
	}
	for i := range want {
		if changes[i] != want[i] {
			t.Fatalf("changes = %v, want %v", changes, want)
		}
	}
}

func TestReleaseReservation(t *testing.T) {
	e := newEnv(t, loadRack(t))
	r, err := e.m.Reserve(ctx, compose.Request{Needs: []schedule.Need{{Kind: inventory.GPU, Count: 2}}}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.m.Release(ctx, r.ID); err != nil {
		t.Fatal(err)
	}
	if err := e.m.Release(ctx, r.ID); !errors.Is(err, compose.ErrNotFound) {
		t.Errorf("second Release = %v", err)
	}
	e.checkEmpty()
}

func TestApplyReservationAttachFails(t *testing.T) {
	e := newEnv(t, loadRack(t))
	r, err := e.m.Reserve(ctx, specific("host1", "gpu1", "hdd1"), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.faulty["sas1"].InjectFault(fabric.Fault{Kind: fabric.AttachFails, Count: 1}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.m.Apply(ctx, compose.Manifest{Stanzas: []compose.Stanza{{Reserved: r.ID}}}); !errors.Is(err, compose.ErrAttach) {
		t.Fatalf("Apply(reservation) = %v, want ErrAttach", err)
	}
	// All or nothing: nothing attached, nothing stored, the reservation
	// consumed.
	e.checkEmpty()
	if len(e.m.Reservations()) != 0 {
		t.Error("failed compose left the reservation")
	}
}

func TestQuota(t *testing.T) {
	e := newEnv(t, loadRack(t))
	q := compose.Quota{inventory.GPU: 3}
	req := func(host string, n int) compose.Request {
		return compose.Request{Tenant: "blue", Quota: q, Host: host,
			Needs: []schedule.Need{{Kind: inventory.GPU, Count: n}}}
	}
	c, err := e.m.Compose(ctx, req("host1", 2))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.m.Reserve(ctx, req("host3", 2), time.Hour); !errors.Is(err, compose.ErrQuota) {
		t.Fatalf("reserve over quota = %v, want ErrQuota", err)
	}
	if _, err := e.m.Update(ctx, c.ID, compose.UpdateRequest{Needs: []schedule.Need{{Kind: inventory.GPU, Count: 2}}, Quota: q}); !errors.Is(err, compose.ErrQuota) {
		t.Fatalf("expand over quota = %v, want ErrQuota", err)
	}
	// Another tenant is not counted against blue.
	other := req("host3", 2)
	other.Tenant = "red"
	if _, err := e.m.Compose(ctx, other); err != nil {
		t.Fatalf("red compose: %v", err)
	}
	if got := e.m.Usage("blue")[inventory.GPU]; got != 2 {
		t.Errorf("blue uses %d GPUs, want 2", got)
	}
	e.checkConsistent()
}
