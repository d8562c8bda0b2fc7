package provision

import (
	"context"
	"math"
	"strings"
	"sync"
	"testing"
	"time"

	"rackpool/internal/clock"
	"rackpool/internal/compose"
	"rackpool/internal/fabric"
	"rackpool/internal/fabric/emulated"
	"rackpool/internal/forecast"
	"rackpool/internal/inventory"
	"rackpool/internal/store"
	"rackpool/internal/store/sqlite"
	"rackpool/internal/telemetry"
	"rackpool/internal/topology"
	"rackpool/internal/units"
)

type loopEnv struct {
	t      *testing.T
	dir    string
	top    *topology.Topology
	clk    *clock.Manual
	st     store.Store
	comp   *compose.Manager
	tel    *telemetry.Store
	loop   *Loop
	mu     sync.Mutex
	events []Event
}

func newLoopEnv(t *testing.T, mode Mode) *loopEnv {
	t.Helper()
	e := &loopEnv{t: t, dir: t.TempDir(), top: topology.LoadDefault(), clk: clock.NewManual(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))}
	e.open(mode)
	return e
}

func (e *loopEnv) open(mode Mode) {
	e.t.Helper()
	ctx := context.Background()
	st, err := sqlite.Open(e.dir)
	if err != nil {
		e.t.Fatal(err)
	}
	e.st = st
	e.t.Cleanup(func() { _ = st.Close() })
	drivers, err := emulated.NewAll(e.top, e.clk)
	if err != nil {
		e.t.Fatal(err)
	}
	ds := map[string]fabric.Driver{}
	for id, d := range drivers {
		ds[id] = d
	}
	if e.comp, err = compose.New(ctx, compose.Options{Topology: e.top, Store: st, Drivers: ds, Clock: e.clk}); err != nil {
		e.t.Fatal(err)
	}
	if e.tel, err = telemetry.Open(ctx, telemetry.Options{Clock: e.clk}); err != nil {
		e.t.Fatal(err)
	}
	e.loop, err = NewLoop(ctx, LoopOptions{Mode: mode, Interval: 10 * time.Second, Store: st, Compose: e.comp, Telemetry: e.tel,
		Clock: e.clk, Rules: Rules{Window: 64, Horizon: 2, Forecast: forecast0()},
		OnEvent: func(ev Event) { e.mu.Lock(); e.events = append(e.events, ev); e.mu.Unlock() }})
	if err != nil {
		e.t.Fatal(err)
	}
}

func forecast0() forecast.Config { return DefaultForecast }

// step reports use (bytes) for system id, runs one loop step and advances
// the clock by the interval.
func (e *loopEnv) step(id string, use float64) {
	e.t.Helper()
	key := telemetry.Key{Kind: telemetry.System, Source: id, Metric: telemetry.MemoryUsed}
	if err := e.tel.Append(key, []telemetry.Sample{{Time: e.clk.Now(), Value: use}}); err != nil {
		e.t.Fatal(err)
	}
	e.loop.Step(context.Background())
	e.clk.Advance(10 * time.Second)
}

func (e *loopEnv) pooled(id string) int64 {
	c, err := e.comp.Get(id)
	if err != nil {
		e.t.Fatal(err)
	}
	n := int64(0)
	for _, b := range c.Blocks {
		if blk := e.top.Block(b); blk.Kind == inventory.Memory {
			n += blk.CapacityBytes
		}
	}
	return n
}

func (e *loopEnv) compose() (*inventory.Composition, int64) {
	e.t.Helper()
	c, err := e.comp.Compose(context.Background(), compose.Request{Name: "job"})
	if err != nil {
		e.t.Fatal(err)
	}
	return c, int64(e.top.Host(c.Host).MemoryGiB) * units.GiB
}

// demandAt is a job whose use above its host's memory ramps from 4 GiB to
// 100 GiB, holds, and falls back to 10 GiB, with a little noise.
func demandAt(i int) float64 {
	var gib float64
	switch {
	case i < 40:
		gib = 4
	case i < 100:
		gib = 4 + 96*float64(i-40)/60
	case i < 140:
		gib = 100
	default:
		gib = 10
	}
	return (gib + 0.3*math.Sin(float64(i))) * float64(units.GiB)
}

// TestLoopFollowsDemand: a system's pooled memory grows ahead of a ramp,
// shrinks when the use falls, never below the use, with every change
// audited and explained.
func TestLoopFollowsDemand(t *testing.T) {
	e := newLoopEnv(t, ModeOn)
	c, local := e.compose()
	if _, err := e.loop.Subscribe(context.Background(), Subscription{System: c.ID, Mode: ModeOn}); err != nil {
		t.Fatal(err)
	}
	short, maxPooled := 0, int64(0)
	for i := range 200 {
		use := demandAt(i)
		if i > 0 && float64(local+e.pooled(c.ID)) < float64(local)+use {
			short++
		}
		e.step(c.ID, float64(local)+use)
		maxPooled = max(maxPooled, e.pooled(c.ID))
		if p := e.pooled(c.ID); float64(p) < use {
			t.Fatalf("step %d: pooled %s below the use %s it was decided on", i, units.FormatBytes(p), units.FormatBytes(int64(use)))
		}
	}
	t.Logf("%d of 200 steps short; peak pooled %s; now %s", short, units.FormatBytes(maxPooled), units.FormatBytes(e.pooled(c.ID)))
	if short > 6 {
		t.Errorf("%d of 200 steps short of the demand", short)
	}
	if maxPooled < 100*units.GiB {
		t.Errorf("never grew to the 100 GiB peak: %s", units.FormatBytes(maxPooled))
	}
	if p := e.pooled(c.ID); p > 32*units.GiB {
		t.Errorf("did not shrink after the demand fell to 10 GiB: holds %s", units.FormatBytes(p))
	}
	entries, err := e.st.Audit(context.Background(), store.AuditQuery{})
	if err != nil {
		t.Fatal(err)
	}
	grows, shrinks := 0, 0
	for _, a := range entries {
		if a.Action != "Provisioning" {
			continue
		}
		if !strings.Contains(a.Detail, "observed") || !strings.Contains(a.Detail, "forecasts a peak") {
			t.Errorf("unexplained decision: %s", a.Detail)
		}
		switch {
		case strings.Contains(a.Detail, "; grow pooled"):
			grows++
		case strings.Contains(a.Detail, "; shrink pooled"):
			shrinks++
		}
	}
	t.Logf("%d grows, %d shrinks audited", grows, shrinks)
	if grows == 0 || shrinks == 0 {
		t.Errorf("audit holds %d grows and %d shrinks", grows, shrinks)
	}
	st, ok := e.loop.Get(c.ID)
	if !ok || st.Last == nil || st.Effective != ModeOn {
		t.Errorf("status %+v", st)
	}
}

func TestLoopDryRunChangesNothing(t *testing.T) {
	e := newLoopEnv(t, ModeDryRun)
	c, local := e.compose()
	if _, err := e.loop.Subscribe(context.Background(), Subscription{System: c.ID, Mode: ModeOn}); err != nil {
		t.Fatal(err)
	}
	for i := range 120 {
		e.step(c.ID, float64(local)+demandAt(i))
	}
	if p := e.pooled(c.ID); p != 0 {
		t.Fatalf("dry run changed the system: pooled %s", units.FormatBytes(p))
	}
	entries, _ := e.st.Audit(context.Background(), store.AuditQuery{})
	n := 0
	for _, a := range entries {
		if a.Action == "Provisioning" {
			n++
			if !strings.Contains(a.Detail, "not applied") {
				t.Errorf("dry-run entry reads as applied: %s", a.Detail)
			}
		}
	}
	if n == 0 || n > 120/2 {
		t.Errorf("%d dry-run entries for 120 steps: want some, not one per step", n)
	}
}

// TestLoopSaysWhenThePoolCannotServe: a forecast above the bound is an
// event before the demand arrives.
func TestLoopSaysWhenThePoolCannotServe(t *testing.T) {
	e := newLoopEnv(t, ModeOn)
	c, local := e.compose()
	if _, err := e.loop.Subscribe(context.Background(), Subscription{System: c.ID, Mode: ModeOn, MaxBytes: 40 * units.GiB}); err != nil {
		t.Fatal(err)
	}
	first := -1
	for i := range 100 {
		e.step(c.ID, float64(local)+demandAt(i))
		e.mu.Lock()
		for _, ev := range e.events {
			if first < 0 && ev.Severity == "Warning" && strings.Contains(ev.Message, "MaxBytes") {
				first = i
			}
		}
		e.mu.Unlock()
	}
	if first < 0 {
		t.Fatal("no event said the forecast is above the bound")
	}
	// The demand first exceeds 40 GiB at step 63; the event must come
	// before it.
	if demandAt(first) >= 40*float64(units.GiB) {
		t.Errorf("event at step %d, when the demand (%s) already exceeded the bound", first, units.FormatBytes(int64(demandAt(first))))
	}
	if p := e.pooled(c.ID); p > 40*units.GiB {
		t.Errorf("grew past MaxBytes: %s", units.FormatBytes(p))
	}
}

func TestLoopSubscriptions(t *testing.T) {
	e := newLoopEnv(t, ModeOn)
	ctx := context.Background()
	c, _ := e.compose()
	for _, bad := range []Subscription{
		{System: "nope", Mode: ModeOn},
		{System: c.ID, Mode: "sometimes"},
		{System: c.ID, Mode: ModeOn, MinBytes: 10, MaxBytes: 5},
		{System: c.ID, Mode: ModeOn, MaxBytes: -1},
	} {
		if _, err := e.loop.Subscribe(ctx, bad); err == nil {
			t.Errorf("accepted %+v", bad)
		}
	}
	if len(e.loop.List()) != 0 {
		t.Fatal("a refused subscription was kept")
	}
	if _, err := e.loop.Subscribe(ctx, Subscription{System: c.ID, Mode: ModeDryRun}); err != nil {
		t.Fatal(err)
	}
	// Survives a restart of the control plane.
	if err := e.st.Close(); err != nil {
		t.Fatal(err)
	}
	e.open(ModeOn)
	if st, ok := e.loop.Get(c.ID); !ok || st.Mode != ModeDryRun || st.Effective != ModeDryRun {
		t.Fatalf("after restart: %+v %v", st, ok)
	}
	// Goes with its system.
	if err := e.comp.Decompose(ctx, c.ID, 0); err != nil {
		t.Fatal(err)
	}
	e.step(c.ID, 1)
	if _, ok := e.loop.Get(c.ID); ok {
		t.Error("subscription outlived its system")
	}
	if objs, _ := e.st.Objects(ctx, KindSubscription); len(objs) != 0 {
		t.Errorf("stored subscriptions left: %d", len(objs))
	}
}
