package compose_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"rackpool/internal/clock"
	"rackpool/internal/compose"
	"rackpool/internal/inventory"
	"rackpool/internal/store"
)

// TestPowerSurvivesRestart: a system's power state and boot override are
// part of its record, and a free host's are kept too.
func TestPowerSurvivesRestart(t *testing.T) {
	e := newEnv(t, loadRack(t))
	c := e.compose(specific("host1", "nvme1"))
	if _, err := e.m.SetBoot(ctx, c.ID, inventory.Boot{Enabled: "Continuous", Target: "Pxe"}, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := e.m.Reset(ctx, c.ID, compose.ResetOn, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := e.m.Reset(ctx, "host2", compose.ResetOn, 0); err != nil {
		t.Fatal(err)
	}
	e.m = e.manager(e.drivers)
	ps, err := e.m.Power(ctx, c.ID)
	if err != nil {
		t.Fatal(err)
	}
	if ps.State != inventory.PowerOn || ps.Boot.Enabled != "Continuous" || ps.Boot.Target != "Pxe" {
		t.Errorf("after a restart the system is %+v", ps.Power)
	}
	if ps, _ := e.m.Power(ctx, "host2"); ps.State != inventory.PowerOn {
		t.Errorf("after a restart the free host2 is %q, want On", ps.State)
	}
	// host1 answers with the system that holds it.
	if ps, _ := e.m.Power(ctx, "host1"); ps.State != inventory.PowerOn {
		t.Errorf("host1 is %q", ps.State)
	}
}

// TestPowerSettlesAfterCrash: a reset a crash left in transition is
// finished at start-up, as the host reports it (the model: done), with a
// Once override used up by the boot; a free host's too.
func TestPowerSettlesAfterCrash(t *testing.T) {
	e := newEnv(t, loadRack(t))
	c := e.compose(specific("host1", "gpu1"))
	crashed := c.Clone()
	crashed.Version++
	crashed.Power = inventory.Power{State: inventory.PowerPoweringOn, Reset: compose.ResetOn, Since: e.clk.Now(),
		Boot: inventory.Boot{Enabled: "Once", Target: "Pxe"}}
	e.put(crashed)
	if err := e.store.Apply(ctx, store.Plan{Objects: []store.ObjectChange{{Kind: compose.HostPowerKind,
		Object: store.Object{ID: "host3", Data: []byte(`{"state":"PoweringOff","reset":"GracefulShutdown","boot":{}}`)}}}}); err != nil {
		t.Fatal(err)
	}
	e.m = e.manager(e.drivers)
	ps, err := e.m.Power(ctx, c.ID)
	if err != nil {
		t.Fatal(err)
	}
	if ps.State != inventory.PowerOn || ps.Reset != "" || ps.Boot.Enabled != "Disabled" {
		t.Errorf("settled system: %+v", ps.Power)
	}
	if got := e.stored()[0]; got.Power.State != inventory.PowerOn || got.Version != crashed.Version+1 {
		t.Errorf("stored after settling: %+v at version %d", got.Power, got.Version)
	}
	if ps, _ := e.m.Power(ctx, "host3"); ps.State != "" && ps.State != inventory.PowerOff {
		t.Errorf("settled free host3: %q, want Off", ps.State)
	}
}

// TestPowerRules: what a running system may not do, and that a refused
// change leaves it as it was.
func TestPowerRules(t *testing.T) {
	e := newEnv(t, loadRack(t))
	c := e.compose(specific("host1", "nvme1"))
	if _, err := e.m.Reset(ctx, c.ID, compose.ResetNmi, 0); !errors.Is(err, compose.ErrPowerState) {
		t.Errorf("Nmi to an Off system: %v", err)
	}
	if _, err := e.m.Reset(ctx, c.ID, "Hibernate", 0); !errors.Is(err, compose.ErrPowerValue) {
		t.Errorf("unknown reset type: %v", err)
	}
	if _, err := e.m.Reset(ctx, c.ID, compose.ResetOn, c.Version+5); !errors.Is(err, compose.ErrVersion) {
		t.Errorf("stale version: %v", err)
	}
	on, err := e.m.Reset(ctx, c.ID, compose.ResetOn, c.Version)
	if err != nil {
		t.Fatal(err)
	}
	if on.Version != c.Version+2 {
		t.Errorf("a reset wrote versions %d → %d, want two records (the transition and its outcome)", c.Version, on.Version)
	}
	// GPUs and FPGAs need the host Off; drives, NICs and CXL memory do not.
	for _, b := range []string{"gpu2", "fpga1"} {
		if _, err := e.m.Update(ctx, c.ID, compose.UpdateRequest{Blocks: []string{b}}); !errors.Is(err, compose.ErrPowered) {
			t.Errorf("add %s to a running system: %v", b, err)
		}
	}
	if _, err := e.m.Update(ctx, c.ID, compose.UpdateRequest{Blocks: []string{"hdd1", "essd1"}}); err != nil {
		t.Errorf("add drives to a running system: %v", err)
	}
	if _, err := e.m.Update(ctx, c.ID, compose.UpdateRequest{Remove: []string{"nvme1"}}); err != nil {
		t.Errorf("remove an NVMe drive from a running system: %v", err)
	}
	if _, err := e.m.Reset(ctx, c.ID, compose.ResetForceOff, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := e.m.Update(ctx, c.ID, compose.UpdateRequest{Blocks: []string{"gpu2"}}); err != nil {
		t.Errorf("add a GPU to a system that is Off: %v", err)
	}
	// A system in transition (a decompose whose detach failed) takes no
	// reset and no boot change, and stays as it was.
	e.faulty["falcon1"].FailNextDetaches(1)
	if err := e.m.Decompose(ctx, c.ID, 0); err == nil {
		t.Fatal("the decompose did not fail")
	}
	before, _ := e.m.Get(c.ID)
	if _, err := e.m.Reset(ctx, c.ID, compose.ResetOn, 0); !errors.Is(err, compose.ErrBusy) {
		t.Errorf("reset of a Decomposing system: %v", err)
	}
	if _, err := e.m.SetBoot(ctx, c.ID, inventory.Boot{Enabled: "Once", Target: "Pxe"}, 0); !errors.Is(err, compose.ErrBusy) {
		t.Errorf("boot change of a Decomposing system: %v", err)
	}
	if after, _ := e.m.Get(c.ID); after.Version != before.Version || after.Power != before.Power {
		t.Errorf("refused changes moved the system: %+v → %+v", before.Power, after.Power)
	}
	if err := e.m.Decompose(ctx, c.ID, 0); err != nil {
		t.Fatalf("retry the decompose: %v", err)
	}
	e.checkConsistent()
}

// TestPowerBusy: while a reset runs, the system answers ErrBusy to a
// second reset, an update and a decompose, and shows PoweringOn.
func TestPowerBusy(t *testing.T) {
	top := loadRack(t)
	e := newEnv(t, top)
	gate := make(chan struct{})
	entered := make(chan struct{}, 1)
	m, err := compose.New(ctx, compose.Options{Topology: top, Store: e.store, Drivers: e.drivers, Clock: e.clk,
		Power: func(*inventory.Host) compose.PowerDriver { return gatedPower{gate: gate, entered: entered} }})
	if err != nil {
		t.Fatal(err)
	}
	c, err := m.Compose(ctx, specific("host2", "ssd1"))
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		if _, err := m.Reset(ctx, c.ID, compose.ResetOn, 0); err != nil {
			t.Errorf("reset: %v", err)
		}
	}()
	select {
	case <-entered:
	case <-time.After(5 * time.Second):
		t.Fatal("the reset did not reach the host")
	}
	if ps, _ := m.Power(ctx, c.ID); ps.State != inventory.PowerPoweringOn {
		t.Errorf("during the reset: %q, want PoweringOn", ps.State)
	}
	if _, err := m.Reset(ctx, c.ID, compose.ResetGracefulShutdown, 0); !errors.Is(err, compose.ErrBusy) {
		t.Errorf("a second reset: %v", err)
	}
	// On while the system powers on is what is under way: done.
	if ps, err := m.Reset(ctx, c.ID, compose.ResetOn, 0); err != nil || ps.State != inventory.PowerPoweringOn {
		t.Errorf("On during PoweringOn: %q, %v", ps.State, err)
	}
	if _, err := m.Update(ctx, c.ID, compose.UpdateRequest{Blocks: []string{"ssd2"}}); !errors.Is(err, compose.ErrBusy) {
		t.Errorf("an update: %v", err)
	}
	if err := m.Decompose(ctx, c.ID, 0); !errors.Is(err, compose.ErrBusy) {
		t.Errorf("a decompose: %v", err)
	}
	close(gate)
	wg.Wait()
	if ps, _ := m.Power(ctx, c.ID); ps.State != inventory.PowerOn {
		t.Errorf("after the reset: %q", ps.State)
	}
	if err := m.Decompose(ctx, c.ID, 0); err != nil {
		t.Fatalf("decompose a running system: %v", err)
	}
	if ps, _ := m.Power(ctx, "host2"); !ps.IsOff() {
		t.Errorf("host2 after the decompose: %q, want Off", ps.State)
	}
}

// TestForceOffWins: a ForceOff stops a reset under way (a hung
// GracefulShutdown can be forced): the reset answers that it was
// overridden, and the system ends Off, with both outcomes recorded.
func TestForceOffWins(t *testing.T) {
	top := loadRack(t)
	e := newEnv(t, top)
	entered := make(chan struct{}, 1)
	m, err := compose.New(ctx, compose.Options{Topology: top, Store: e.store, Drivers: e.drivers, Clock: e.clk,
		Power: func(*inventory.Host) compose.PowerDriver {
			return gatedPower{gate: make(chan struct{}), entered: entered}
		}})
	if err != nil {
		t.Fatal(err)
	}
	c, err := m.Compose(ctx, specific("host2", "ssd1"))
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := m.Reset(ctx, c.ID, compose.ResetOn, 0) // never finishes by itself: its gate stays shut
		done <- err
	}()
	select {
	case <-entered:
	case <-time.After(5 * time.Second):
		t.Fatal("the reset did not reach the host")
	}
	before, _ := m.Get(c.ID)
	ps, err := m.Reset(ctx, c.ID, compose.ResetForceOff, before.Version)
	if err != nil || !ps.IsOff() {
		t.Fatalf("ForceOff during the reset: %q, %v", ps.State, err)
	}
	if err := <-done; !errors.Is(err, compose.ErrBusy) || !strings.Contains(err.Error(), "overridden by a ForceOff") {
		t.Errorf("the stopped reset answered %v", err)
	}
	// The stopped On left the system as it was, Off, and recorded so; the
	// ForceOff then had nothing to do.
	after, _ := m.Get(c.ID)
	if !after.Power.IsOff() || after.Version != before.Version+1 {
		t.Errorf("after: %+v at version %d, want Off at %d (the stopped reset's outcome)", after.Power, after.Version, before.Version+1)
	}
	// Nothing is under way now: a ForceOff of an Off system does nothing.
	if ps, err := m.Reset(ctx, c.ID, compose.ResetForceOff, 0); err != nil || ps.Version != after.Version {
		t.Errorf("ForceOff of an Off system: version %d, %v", ps.Version, err)
	}
}

// TestForceOffForcesAHungShutdown: the model on the wall clock, with a
// shutdown that takes an hour: a ForceOff stops it at once and the system
// is Off.
func TestForceOffForcesAHungShutdown(t *testing.T) {
	top := loadRack(t)
	h := top.Host("host2")
	h.PowerOn, h.Shutdown = 0, time.Hour
	e := newEnv(t, top)
	shutting := make(chan struct{}, 1)
	m, err := compose.New(ctx, compose.Options{Topology: top, Store: e.store, Drivers: e.drivers, Clock: e.clk,
		Power: func(*inventory.Host) compose.PowerDriver { return compose.ModelPower{Clock: clock.Real{}} },
		OnChange: func(ch compose.Change) {
			if ch.New != nil && ch.New.Power.State == inventory.PowerPoweringOff {
				select {
				case shutting <- struct{}{}:
				default:
				}
			}
		}})
	if err != nil {
		t.Fatal(err)
	}
	c, err := m.Compose(ctx, specific("host2", "ssd1"))
	if err != nil {
		t.Fatal(err)
	}
	if ps, err := m.Reset(ctx, c.ID, compose.ResetOn, 0); err != nil || ps.State != inventory.PowerOn {
		t.Fatalf("On: %q, %v", ps.State, err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := m.Reset(ctx, c.ID, compose.ResetGracefulShutdown, 0)
		done <- err
	}()
	select {
	case <-shutting:
	case <-time.After(10 * time.Second):
		t.Fatal("the shutdown did not start")
	}
	if ps, err := m.Reset(ctx, c.ID, compose.ResetForceOff, 0); err != nil || !ps.IsOff() {
		t.Fatalf("ForceOff during the shutdown: %q, %v", ps.State, err)
	}
	select {
	case err := <-done:
		if !errors.Is(err, compose.ErrBusy) {
			t.Errorf("the forced shutdown answered %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the shutdown still runs")
	}
	if ps, _ := m.Power(ctx, c.ID); !ps.IsOff() {
		t.Errorf("after: %q", ps.State)
	}
}

// gatedPower is the model, whose resets wait for gate.
type gatedPower struct {
	gate    chan struct{}
	entered chan struct{}
}

func (g gatedPower) Caps(ctx context.Context, h *inventory.Host) (compose.PowerCaps, error) {
	return compose.ModelPower{}.Caps(ctx, h)
}

func (g gatedPower) Reset(ctx context.Context, h *inventory.Host, cur inventory.Power, t string) (inventory.Power, error) {
	select {
	case g.entered <- struct{}{}:
	default:
	}
	select {
	case <-g.gate:
	case <-ctx.Done(): // stopped by a ForceOff, as a driver's wait is
		return cur, ctx.Err()
	}
	return compose.ModelPower{Clock: nil}.State(ctx, h, inventory.Power{State: map[bool]string{true: inventory.PowerPoweringOn, false: inventory.PowerPoweringOff}[t != compose.ResetForceOff && t != compose.ResetGracefulShutdown], Boot: cur.Boot})
}

func (g gatedPower) SetBoot(ctx context.Context, h *inventory.Host, cur inventory.Power, b inventory.Boot) (inventory.Power, error) {
	cur.Boot = b
	return cur, nil
}

func (g gatedPower) State(ctx context.Context, h *inventory.Host, cur inventory.Power) (inventory.Power, error) {
	return compose.ModelPower{}.State(ctx, h, cur)
}

// TestSettleOwnerHostPower: the leader finishes a dead replica's free-host
// reset, and leaves a live replica's alone.
func TestSettleOwnerHostPower(t *testing.T) {
	e := newEnv(t, loadRack(t))
	put := func(host, owner string) {
		data := []byte(`{"state":"PoweringOn","reset":"On","boot":{"Enabled":"Once","Target":"Pxe"},"owner":"` + owner + `"}`)
		if err := e.store.Apply(ctx, store.Plan{Objects: []store.ObjectChange{{Kind: compose.HostPowerKind, Object: store.Object{ID: host, Data: data}}}}); err != nil {
			t.Fatal(err)
		}
	}
	put("host2", "member/dead")
	put("host3", "member/alive")
	n, err := e.m.SettleOwner(ctx, "member/dead")
	if err != nil || n != 1 {
		t.Fatalf("SettleOwner: %d, %v", n, err)
	}
	if ps, _ := e.m.Power(ctx, "host2"); ps.State != inventory.PowerOn || ps.Boot.Enabled != "Disabled" {
		t.Errorf("the dead replica's host2: %+v", ps.Power)
	}
	if ps, _ := e.m.Power(ctx, "host3"); ps.State != inventory.PowerPoweringOn {
		t.Errorf("the live replica's host3: %+v", ps.Power)
	}
}

// TestEstimateReset: the model's time, none on an instant clock.
func TestEstimateReset(t *testing.T) {
	top := loadRack(t)
	e := newEnv(t, top)
	h := top.Host("host1")
	if got := e.m.EstimateReset(ctx, "host1", compose.ResetOn); got != h.PowerOn || got == 0 {
		t.Errorf("estimate of On: %v, want the host's power_on %v", got, h.PowerOn)
	}
	m, err := compose.New(ctx, compose.Options{Topology: top, Store: e.store, Drivers: e.drivers, Clock: e.clk,
		Power: func(*inventory.Host) compose.PowerDriver { return compose.ModelPower{Clock: clock.Instant{}} }})
	if err != nil {
		t.Fatal(err)
	}
	if got := m.EstimateReset(ctx, "host1", compose.ResetOn); got != 0 {
		t.Errorf("estimate of On on an instant clock: %v, want 0", got)
	}
}

// TestManifestPower: a manifest neither decomposes a running system nor
// composes on a running host; it changes nothing then.
func TestManifestPower(t *testing.T) {
	e := newEnv(t, loadRack(t))
	c := e.compose(specific("host1", "nvme1"))
	if _, err := e.m.Reset(ctx, c.ID, compose.ResetOn, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := e.m.Apply(ctx, compose.Manifest{Stanzas: []compose.Stanza{{Decompose: c.ID}}}); !errors.Is(err, compose.ErrPowered) {
		t.Errorf("manifest decompose of a running system: %v", err)
	}
	if _, err := e.m.Reset(ctx, "host2", compose.ResetOn, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := e.m.Apply(ctx, compose.Manifest{Stanzas: []compose.Stanza{{Compose: &compose.Request{Host: "host2"}}}}); !errors.Is(err, compose.ErrPowered) {
		t.Errorf("manifest compose on a running host: %v", err)
	}
	if got := len(e.stored()); got != 1 {
		t.Errorf("the store holds %d compositions, want 1", got)
	}
	e.checkConsistent()
}

// countingStore counts the reads of objects of one kind.
type countingStore struct {
	store.Store
	kind string
	mu   sync.Mutex
	n    int
}

func (c *countingStore) Objects(ctx context.Context, kind string) ([]store.Object, error) {
	if kind == c.kind {
		c.mu.Lock()
		c.n++
		c.mu.Unlock()
	}
	return c.Store.Objects(ctx, kind)
}

// TestHostPowersReadOnce: under WithHostPowers the free hosts' power
// records are read from the store once for any number of hosts, with the
// same answers as one read per host.
func TestHostPowersReadOnce(t *testing.T) {
	e := newEnv(t, loadRack(t))
	if _, err := e.m.Reset(ctx, "host2", compose.ResetOn, 0); err != nil {
		t.Fatal(err)
	}
	cs := &countingStore{Store: e.store, kind: compose.HostPowerKind}
	m, err := compose.New(ctx, compose.Options{Topology: e.top, Store: cs, Drivers: e.drivers, Clock: e.clk})
	if err != nil {
		t.Fatal(err)
	}
	cs.n = 0
	per := map[string]string{}
	for _, h := range []string{"host2", "host3", "host4"} {
		ps, err := m.Power(ctx, h)
		if err != nil {
			t.Fatal(err)
		}
		per[h] = ps.State
	}
	if cs.n != 3 {
		t.Fatalf("%d reads without WithHostPowers, want one per host", cs.n)
	}
	cs.n = 0
	page := compose.WithHostPowers(ctx)
	for _, h := range []string{"host2", "host3", "host4"} {
		ps, err := m.Power(page, h)
		if err != nil {
			t.Fatal(err)
		}
		if ps.State != per[h] {
			t.Errorf("%s is %q under WithHostPowers, %q without", h, ps.State, per[h])
		}
	}
	if cs.n != 1 || per["host2"] != inventory.PowerOn {
		t.Fatalf("%d reads under WithHostPowers (want 1); host2 %q", cs.n, per["host2"])
	}
}
