package drive_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"rackpool/internal/blocknode"
	"rackpool/internal/drive"
	"rackpool/internal/store"
)

const rw = blocknode.RightRead | blocknode.RightWrite

// generation returns the write reservation generation a's drive id
// carries, failing if a does not assign it.
func generation(t *testing.T, a drive.Assignment, id string) uint64 {
	t.Helper()
	for _, d := range a.Drives {
		if d.ID == id {
			return d.Generation
		}
	}
	t.Fatalf("%s is not assigned %s: %v", a.Node, id, ids(a))
	return 0
}

// claims verifies g's token.
func (e *env) claims(a drive.Assignment, g drive.Grant) blocknode.Claims {
	e.t.Helper()
	c, err := blocknode.Key(a.Key).Verify(g.Token, e.clk.Now())
	if err != nil {
		e.t.Fatal(err)
	}
	return c
}

// TestOneWriterPerDrive: the first writer takes the drive's write
// reservation; the same holder connects again at the same generation; a
// second holder is refused with the holder named and nothing changes;
// readers are never refused and carry no generation; a preempt takes the
// reservation over at the next generation, which the owner's heartbeat
// answer carries; only the holder releases; the reservation survives a
// restart and a failover.
func TestOneWriterPerDrive(t *testing.T) {
	e := newEnv(t, 0)
	e.beat("host1", 1, 64)
	e.m.Step(ctx)
	a := e.beat("host1", 1, 64)
	id := a.Drives[0].ID
	if generation(t, a, id) != 0 {
		t.Fatalf("a drive never written has generation %d", generation(t, a, id))
	}

	g1, err := e.m.Connect(ctx, drive.ConnectRequest{Drive: id, Rights: rw, Holder: "host9/drive-connect/41"})
	if err != nil {
		t.Fatal(err)
	}
	if c := e.claims(a, g1); g1.Generation != 1 || c.Generation != 1 || g1.Holder != "host9/drive-connect/41" {
		t.Fatalf("first writer: grant %+v, claims %+v", g1, c)
	}
	again, err := e.m.Connect(ctx, drive.ConnectRequest{Drive: id, Rights: rw, Holder: "host9/drive-connect/41"})
	if err != nil || again.Generation != 1 {
		t.Fatalf("the holder again: %+v, %v; want generation 1", again, err)
	}

	e.clk.Advance(time.Second)
	_, err = e.m.Connect(ctx, drive.ConnectRequest{Drive: id, Rights: rw, Holder: "host8/drive-connect/7"})
	var re *drive.ReservedError
	if !errors.As(err, &re) || !errors.Is(err, drive.ErrReserved) || !errors.Is(err, drive.ErrConflict) {
		t.Fatalf("a second writer: %v, want a ReservedError", err)
	}
	for _, want := range []string{`"host9/drive-connect/41"`, "2026-01-01T00:00:00Z", "Preempt"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the refusal %q does not say %s", err, want)
		}
	}
	if d, _ := e.m.Drive(id); d.Writer.Holder != "host9/drive-connect/41" || d.Writer.Generation != 1 {
		t.Fatalf("the refusal changed the reservation: %+v", d.Writer)
	}
	// Readers: any number, any time, no generation; Preempt is for writers.
	for range 2 {
		r, err := e.m.Connect(ctx, drive.ConnectRequest{Drive: id, Rights: blocknode.RightRead})
		if err != nil || r.Generation != 0 || e.claims(a, r).Generation != 0 {
			t.Fatalf("reader: %+v, %v", r, err)
		}
	}
	if _, err := e.m.Connect(ctx, drive.ConnectRequest{Drive: id, Rights: blocknode.RightRead, Preempt: true}); !errors.Is(err, drive.ErrBadInput) {
		t.Errorf("a read-only preempt: %v, want ErrBadInput", err)
	}

	// Preempt: the second holder writes at generation 2; the owner hears it
	// in its next heartbeat answer; the first holder is refused now.
	e.events = nil
	g2, err := e.m.Connect(ctx, drive.ConnectRequest{Drive: id, Rights: rw, Holder: "host8/drive-connect/7", Preempt: true})
	if err != nil || g2.Generation != 2 || e.claims(a, g2).Generation != 2 {
		t.Fatalf("preempt: %+v, %v; want generation 2", g2, err)
	}
	if got := generation(t, e.beat("host1", 1, 64), id); got != 2 {
		t.Errorf("heartbeat after the preempt carries generation %d, want 2", got)
	}
	if len(e.events) != 1 || e.events[0].Severity != "Warning" || !strings.Contains(e.events[0].Message, "host9/drive-connect/41") {
		t.Errorf("preempt events: %+v", e.events)
	}
	if _, err := e.m.Connect(ctx, drive.ConnectRequest{Drive: id, Rights: rw, Holder: "host9/drive-connect/41"}); !errors.As(err, &re) ||
		re.Writer.Holder != "host8/drive-connect/7" {
		t.Fatalf("the preempted holder reconnecting: %v, want refused naming host8/drive-connect/7", err)
	}

	// Release: only by the holder; it raises the generation; again is a
	// no-op.
	if _, err := e.m.Release(ctx, id, "host9/drive-connect/41"); !errors.Is(err, drive.ErrReserved) {
		t.Fatalf("release by another: %v", err)
	}
	w, err := e.m.Release(ctx, id, "host8/drive-connect/7")
	if err != nil || w.Holder != "" || w.Generation != 3 {
		t.Fatalf("release: %+v, %v; want none at generation 3", w, err)
	}
	if w, err := e.m.Release(ctx, id, "host8/drive-connect/7"); err != nil || w.Generation != 3 {
		t.Fatalf("release again: %+v, %v", w, err)
	}
	if got := generation(t, e.beat("host1", 1, 64), id); got != 3 {
		t.Errorf("heartbeat after the release carries generation %d, want 3", got)
	}
	g4, err := e.m.Connect(ctx, drive.ConnectRequest{Drive: id, Rights: rw, Holder: "vm-17"})
	if err != nil || g4.Generation != 4 {
		t.Fatalf("a writer after the release: %+v, %v", g4, err)
	}

	// A restart keeps the reservation.
	e.restart()
	if d, _ := e.m.Drive(id); d.Writer.Holder != "vm-17" || d.Writer.Generation != 4 {
		t.Fatalf("after a restart the reservation is %+v", d.Writer)
	}
	e.beat("host1", 1, 64)
	if _, err := e.m.Connect(ctx, drive.ConnectRequest{Drive: id, Rights: rw, Holder: "host8/drive-connect/7"}); !errors.Is(err, drive.ErrReserved) {
		t.Fatalf("another writer after a restart: %v", err)
	}

	// Failover: the new owner learns the generation from its heartbeat;
	// the holder reconnects there at the same generation, a new epoch.
	e.beat("host2", 2, 64)
	for range 6 {
		e.clk.Advance(100 * time.Millisecond)
		e.beat("host2", 2, 64)
		e.m.Step(ctx)
	}
	a2 := e.beat("host2", 2, 64)
	if got := generation(t, a2, id); got != 4 {
		t.Fatalf("the new owner's heartbeat carries generation %d, want 4", got)
	}
	g5, err := e.m.Connect(ctx, drive.ConnectRequest{Drive: id, Rights: rw, Holder: "vm-17"})
	if err != nil || g5.Node != "host2" || g5.Generation != 4 || g5.Epoch <= g4.Epoch {
		t.Fatalf("the holder after the failover: %+v, %v", g5, err)
	}
}

// TestWriterHolderChecked: a writer without a holder name, with an
// overlong one or one with control characters is refused and takes no
// reservation; so is a release for a drive that is not pooled.
func TestWriterHolderChecked(t *testing.T) {
	e := newEnv(t, 0)
	e.beat("host1", 1, 64)
	e.m.Step(ctx)
	id := e.beat("host1", 1, 64).Drives[0].ID
	for _, h := range []string{"", strings.Repeat("h", 257), "a\nb", "a\x00b", "\xff"} {
		if g, err := e.m.Connect(ctx, drive.ConnectRequest{Drive: id, Rights: rw, Holder: h}); !errors.Is(err, drive.ErrBadInput) {
			t.Errorf("holder %q: %+v, %v; want ErrBadInput", h, g, err)
		}
		if _, err := e.m.Release(ctx, id, h); !errors.Is(err, drive.ErrBadInput) {
			t.Errorf("release by %q: %v; want ErrBadInput", h, err)
		}
	}
	if d, _ := e.m.Drive(id); d.Writer != (drive.Writer{}) {
		t.Fatalf("refused writers left a reservation: %+v", d.Writer)
	}
	if _, err := e.m.Release(ctx, "gpu1", "x"); !errors.Is(err, drive.ErrNotFound) {
		t.Errorf("release of a GPU: %v", err)
	}
}

// TestWriterDecidedOnTheStoredRecord: a reservation another replica
// stored meanwhile (this manager has not read it) is found when this one
// tries to write its own: the version check fails, the record is read
// again, and the writer is refused naming the stored holder.
func TestWriterDecidedOnTheStoredRecord(t *testing.T) {
	e := newEnv(t, 0)
	e.beat("host1", 1, 64)
	e.m.Step(ctx)
	id := e.beat("host1", 1, 64).Drives[0].ID
	data, _ := json.Marshal(map[string]any{"drive": id, "holder": "other-replica's", "generation": 1, "since": e.clk.Now()})
	if err := e.store.Apply(ctx, store.Plan{Objects: []store.ObjectChange{{Kind: "drive-writer",
		Object: store.Object{ID: id, Data: data, Version: 1}}}}); err != nil {
		t.Fatal(err)
	}
	_, err := e.m.Connect(ctx, drive.ConnectRequest{Drive: id, Rights: rw, Holder: "mine"})
	var re *drive.ReservedError
	if !errors.As(err, &re) || re.Writer.Holder != "other-replica's" {
		t.Fatalf("writer against a reservation stored by another replica: %v", err)
	}
	g, err := e.m.Connect(ctx, drive.ConnectRequest{Drive: id, Rights: rw, Holder: "mine", Preempt: true})
	if err != nil || g.Generation != 2 {
		t.Fatalf("preempting it: %+v, %v", g, err)
	}
}
