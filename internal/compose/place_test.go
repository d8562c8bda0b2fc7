package compose_test

import (
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"rackpool/internal/compose"
	"rackpool/internal/inventory"
	"rackpool/internal/schedule"
)

// countingManager is e's manager again, counting the scheduler's
// decisions through Options.OnSchedule.
func countingManager(t *testing.T, e *env) (*compose.Manager, *atomic.Int64) {
	t.Helper()
	var n atomic.Int64
	m, err := compose.New(ctx, compose.Options{Topology: e.top, Store: e.store, Drivers: e.drivers, Clock: e.clk,
		OnSchedule: func(time.Duration, error) { n.Add(1) }})
	if err != nil {
		t.Fatal(err)
	}
	return m, &n
}

// TestPlaceRealize: Place schedules once and holds the blocks in memory
// only; Realize composes them without scheduling again.
func TestPlaceRealize(t *testing.T) {
	e := newEnv(t, loadRack(t))
	m, schedules := countingManager(t, e)
	p, err := m.Place(ctx, specific("host1", "gpu1", "hdd1"))
	if err != nil {
		t.Fatal(err)
	}
	if n := schedules.Load(); n != 1 {
		t.Errorf("Place: %d scheduler decisions, want 1", n)
	}
	if b := p.Blocks(); len(b) != 3 || b[0] != "host1" {
		t.Errorf("placed %v, want host1's compute block and two more", b)
	}
	if got, want := p.EstimateFabricTime(), m.EstimateFabricTime(p.Blocks()); got != want || got <= 0 {
		t.Errorf("estimate %s, want %s (above zero)", got, want)
	}
	if cs := e.stored(); len(cs) != 0 {
		t.Errorf("Place stored %d compositions", len(cs))
	}
	if _, err := m.Place(ctx, specific("", "gpu1")); err == nil {
		t.Error("a second placement got a block the first holds")
	}
	schedules.Store(0)
	c, err := p.Realize(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if n := schedules.Load(); n != 0 {
		t.Errorf("Realize: %d scheduler decisions, want 0", n)
	}
	if c.State != inventory.Composed || c.Host != "host1" || len(e.stored()) != 1 {
		t.Errorf("realized %s, %d stored", compose.Describe(c), len(e.stored()))
	}
	if _, err := p.Realize(ctx); err == nil {
		t.Error("a placement realized twice")
	}
	p.Cancel() // after Realize: nothing
	if _, err := m.Get(c.ID); err != nil {
		t.Errorf("Cancel after Realize: %v", err)
	}
	checkFabrics(t, e.top, e.drivers, m.List())
}

// TestPlaceCancel: Cancel gives the blocks back and leaves nothing behind.
func TestPlaceCancel(t *testing.T) {
	e := newEnv(t, loadRack(t))
	p, err := e.m.Place(ctx, specific("host1", "gpu1"))
	if err != nil {
		t.Fatal(err)
	}
	if st := e.m.BlockStatus("gpu1"); st.State != "Composing" {
		t.Errorf("placed block %s, want Composing", st.State)
	}
	p.Cancel()
	if _, err := p.Realize(ctx); err == nil {
		t.Error("a cancelled placement realized")
	}
	if st := e.m.BlockStatus("gpu1"); st.State != "Unused" {
		t.Errorf("cancelled block %s, want Unused", st.State)
	}
	if cs := e.m.List(); len(cs) != 0 {
		t.Errorf("%d systems after Cancel", len(cs))
	}
	e.checkEmpty()
	e.compose(specific("host1", "gpu1"))
}

// TestComposeAppliesPolicy: the composition policy is applied by compose
// to every request, whoever calls: Compose, Place and Plan agree.
func TestComposeAppliesPolicy(t *testing.T) {
	e := newEnv(t, loadRack(t))
	zone := "host2"
	req := compose.Request{ZoneAffinity: &zone, Needs: []schedule.Need{{Kind: inventory.GPU, Count: 1}}}
	plan, err := e.m.Plan(req)
	if err != nil || plan.Host.ID != "host2" {
		t.Fatalf("Plan: %v, %v; want host2", plan, err)
	}
	if c := e.compose(req); c.Host != "host2" {
		t.Errorf("composed on %s, want host2 (the zone)", c.Host)
	}
	conflict := req
	conflict.Host = "host1"
	if _, err := e.m.Compose(ctx, conflict); !errors.Is(err, compose.ErrZoneConflict) {
		t.Errorf("Compose on host1 in host2's zone: %v, want %v", err, compose.ErrZoneConflict)
	}
	if _, err := e.m.Plan(conflict); !errors.Is(err, compose.ErrZoneConflict) {
		t.Errorf("Plan on host1 in host2's zone: %v, want %v", err, compose.ErrZoneConflict)
	}
	if _, err := e.m.UpdatePolicy(ctx, func(p *compose.Policy) error { p.AllowZoneAffinity = false; return nil }); err != nil {
		t.Fatal(err)
	}
	if _, err := e.m.Place(ctx, req); !errors.Is(err, compose.ErrZoneAffinityOff) {
		t.Errorf("Place with zone affinity off: %v, want %v", err, compose.ErrZoneAffinityOff)
	}
}

// TestStageManifest: Stage places every stanza once and holds the blocks;
// Cancel puts them back; Realize applies the manifest without placing it
// again.
func TestStageManifest(t *testing.T) {
	e := newEnv(t, loadRack(t))
	m, schedules := countingManager(t, e)
	mf := compose.Manifest{Stanzas: []compose.Stanza{
		{Compose: &compose.Request{Host: "host1", Blocks: []string{"gpu1"}}},
		{Compose: &compose.Request{Needs: []schedule.Need{{Kind: inventory.GPU, Count: 1}}}},
	}}
	sm, err := m.Stage(ctx, mf)
	if err != nil {
		t.Fatal(err)
	}
	if n := schedules.Load(); n != 2 {
		t.Errorf("Stage: %d scheduler decisions, want 2", n)
	}
	if sm.EstimateFabricTime() <= 0 {
		t.Errorf("estimate %s", sm.EstimateFabricTime())
	}
	if st := m.BlockStatus("gpu1"); st.State != "Composing" {
		t.Errorf("staged block %s, want Composing", st.State)
	}
	sm.Cancel()
	if st := m.BlockStatus("gpu1"); st.State != "Unused" || len(m.List()) != 0 || len(e.stored()) != 0 {
		t.Errorf("after Cancel: gpu1 %s, %d systems, %d stored", st.State, len(m.List()), len(e.stored()))
	}
	if _, err := sm.Realize(ctx); err == nil {
		t.Error("a cancelled manifest applied")
	}

	sm, err = m.Stage(ctx, mf)
	if err != nil {
		t.Fatal(err)
	}
	schedules.Store(0)
	done, err := sm.Realize(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if n := schedules.Load(); n != 0 {
		t.Errorf("Realize: %d scheduler decisions, want 0", n)
	}
	if len(done) != 2 || len(e.stored()) != 2 {
		t.Errorf("applied %d, stored %d; want 2", len(done), len(e.stored()))
	}
	checkFabrics(t, e.top, e.drivers, m.List())
}
