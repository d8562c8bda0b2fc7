package drive_test

import (
	"strings"
	"testing"
	"time"

	"rackpool/internal/compose"
	"rackpool/internal/drive"
	"rackpool/internal/store"
)

// elasticEnv is three blocknodes with six drives each (spares keep the
// rest unassigned) under the elastic policy.
func elasticEnv(t *testing.T, mode drive.ElasticMode) (*env, *drive.Manager) {
	e := newEnv(t, 6)
	var err error
	e.m, err = drive.New(ctx, drive.Options{Store: e.store, Topology: e.top, Holders: e.comp, Clock: e.clk, Spares: 6,
		OnEvent: func(ev drive.Event) { e.events = append(e.events, ev) },
		Elastic: drive.Elastic{Mode: mode, NodeOps: 1000, Low: 0.3, High: 0.7, Hold: time.Minute, Window: 10 * time.Second}})
	if err != nil {
		t.Fatal(err)
	}
	return e, e.m
}

// run advances the clock by d in 100 ms heartbeats, each node reporting
// rate[node] operations per second.
func run(e *env, d time.Duration, ops map[string]*uint64, rate map[string]uint64) {
	for step := time.Duration(0); step < d; step += 100 * time.Millisecond {
		e.clk.Advance(100 * time.Millisecond)
		for i, h := range []string{"host1", "host2", "host3"} {
			*ops[h] += rate[h] / 10
			if _, err := e.m.Heartbeat(ctx, drive.Heartbeat{Host: h, Endpoint: "127.0.0.1:1" + h[4:], Epoch: uint64(10 + i), MaxDrives: 12,
				Load: drive.Load{Ops: *ops[h]}}); err != nil {
				e.t.Fatal(err)
			}
		}
		e.m.Step(ctx)
	}
}

func counters() map[string]*uint64 {
	return map[string]*uint64{"host1": new(uint64), "host2": new(uint64), "host3": new(uint64)}
}

// TestElasticParksAndUnparks: under low load the least-loaded blocknode's
// drives go to the others and its host becomes composable; under high
// load it comes back and takes drives; every decision is audited and
// explained, at most one per Hold.
func TestElasticParksAndUnparks(t *testing.T) {
	e, m := elasticEnv(t, drive.ElasticOn)
	ops := counters()
	run(e, time.Second, ops, map[string]uint64{"host1": 50, "host2": 40, "host3": 10})
	if len(m.Decisions()) != 0 {
		t.Fatalf("decided before the load settled? %+v", m.Decisions())
	}
	run(e, 20*time.Second, ops, map[string]uint64{"host1": 50, "host2": 40, "host3": 10})
	ds := m.Decisions()
	if len(ds) != 1 || ds[0].Action != "park" || ds[0].Node != "host3" || !ds[0].Applied || len(ds[0].Moves) != 6 {
		t.Fatalf("decisions %+v", ds)
	}
	n, _ := m.Node("host3")
	if !n.Parked || len(n.Drives) != 0 {
		t.Fatalf("host3 after parking: %+v", n)
	}
	for _, d := range m.Drives() {
		if d.Node != "" && !d.InService {
			t.Errorf("drive %s on %s not in service after the handover", d.ID, d.Node)
		}
	}
	e.check()
	c, err := e.comp.Compose(ctx, compose.Request{Host: "host3"})
	if err != nil {
		t.Fatalf("a parked blocknode's host is not composable: %v", err)
	}
	if err := e.comp.Decompose(ctx, c.ID, 0); err != nil {
		t.Fatal(err)
	}
	// High load: host3 comes back, but not before Hold has passed.
	run(e, 20*time.Second, ops, map[string]uint64{"host1": 900, "host2": 900, "host3": 0})
	if got := len(m.Decisions()); got != 1 {
		t.Fatalf("%d decisions within Hold", got)
	}
	run(e, 45*time.Second, ops, map[string]uint64{"host1": 900, "host2": 900, "host3": 0})
	ds = m.Decisions()
	if len(ds) != 2 || ds[1].Action != "unpark" || ds[1].Node != "host3" || len(ds[1].Moves) == 0 {
		t.Fatalf("decisions %+v", ds)
	}
	n, _ = m.Node("host3")
	if n.Parked || len(n.Drives) != len(ds[1].Moves) {
		t.Fatalf("host3 after unparking: %+v, moves %v", n, ds[1].Moves)
	}
	e.check()
	entries, err := e.store.Audit(ctx, store.AuditQuery{})
	if err != nil {
		t.Fatal(err)
	}
	audited := 0
	for _, a := range entries {
		if a.Action == "ElasticDisaggregation" && strings.Contains(a.Detail, "ops/s") {
			audited++
		}
	}
	if audited != 2 {
		t.Errorf("%d elastic decisions audited, want 2: %+v", audited, entries)
	}
}

// TestElasticDryRunMovesNothing: dry-run decides and says so, and changes
// nothing.
func TestElasticDryRunMovesNothing(t *testing.T) {
	e, m := elasticEnv(t, drive.ElasticDryRun)
	ops := counters()
	run(e, 21*time.Second, ops, map[string]uint64{"host1": 50, "host2": 40, "host3": 10})
	ds := m.Decisions()
	if len(ds) != 1 || ds[0].Applied || ds[0].Node != "host3" {
		t.Fatalf("decisions %+v", ds)
	}
	if n, _ := m.Node("host3"); n.Parked || len(n.Drives) != 6 {
		t.Fatalf("dry-run changed host3: %+v", n)
	}
	var said bool
	for _, ev := range e.events {
		said = said || strings.Contains(ev.Message, "not applied")
	}
	if !said {
		t.Errorf("no dry-run event in %+v", e.events)
	}
}
