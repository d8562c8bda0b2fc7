package compose_test

import (
	"context"
	"testing"
	"time"

	"rackpool/internal/compose"
	"rackpool/internal/store"
)

// TestOutcomeCarriesAudit: a workflow whose context carries a pending
// audit entry commits it with its outcome — once, with the workflow's
// detail — and a workflow that fails commits none.
func TestOutcomeCarriesAudit(t *testing.T) {
	e := newEnv(t, loadRack(t))
	entry := func() *store.PendingAudit {
		return store.NewPendingAudit(store.AuditEntry{Time: time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC), User: "alice",
			Method: "POST", Target: "/redfish/v1/Systems", Action: "Compose", Outcome: store.AuditSuccess, Status: 201})
	}
	entries := func() []store.AuditEntry {
		t.Helper()
		es, err := e.store.Audit(ctx, store.AuditQuery{})
		if err != nil {
			t.Fatal(err)
		}
		return es
	}

	p := entry()
	c, err := e.m.Compose(store.WithPendingAudit(ctx, p), specific("host1", "gpu1", "hdd1"))
	if err != nil {
		t.Fatal(err)
	}
	if !p.Recorded() {
		t.Error("compose did not record the pending audit entry")
	}
	es := entries()
	if len(es) != 1 || es[0].Detail != "composed "+c.ID || es[0].User != "alice" || es[0].Status != 201 {
		t.Fatalf("audit after compose: %+v, want one entry by alice, \"composed %s\"", es, c.ID)
	}
	// Taken once: a second workflow under the same request adds nothing.
	if _, err := e.m.Update(store.WithPendingAudit(ctx, p), c.ID, compose.UpdateRequest{Blocks: []string{"nvme1"}}); err != nil {
		t.Fatal(err)
	}
	if n := len(entries()); n != 1 {
		t.Errorf("a recorded entry was committed again: %d entries", n)
	}

	// A failed compose records nothing and leaves the entry to its caller.
	e.faulty["falcon1"].FailNthAttach(1)
	p = entry()
	if _, err := e.m.Compose(store.WithPendingAudit(ctx, p), specific("host2", "gpu5")); err == nil {
		t.Fatal("compose succeeded despite the failed attach")
	}
	if p.Recorded() || len(entries()) != 1 {
		t.Errorf("failed compose: recorded %v, %d entries; want the entry left unrecorded", p.Recorded(), len(entries()))
	}

	p = entry()
	if err := e.m.Decompose(store.WithPendingAudit(context.Background(), p), c.ID, 0); err != nil {
		t.Fatal(err)
	}
	if es := entries(); !p.Recorded() || len(es) != 2 || es[1].Detail != "decomposed "+c.ID {
		t.Errorf("audit after decompose: recorded %v, %+v", p.Recorded(), es)
	}
	e.checkEmpty()
}
