package events

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"rackpool/internal/clock"
	"rackpool/internal/fabric"
	"rackpool/internal/fabric/emulated"
	"rackpool/internal/fabric/faulty"
	"rackpool/internal/topology"
)

// summary is an event in one line: the message key, the origin and the
// args.
func summary(e Event) string {
	key := e.MessageID[strings.LastIndexByte(e.MessageID, '.')+1:]
	return strings.TrimSpace(fmt.Sprintf("%s %s %s", key, e.Origin, strings.Join(e.Args, " ")))
}

// drain returns the events waiting in ch, as summaries.
func drain(ch <-chan Event) []string {
	var out []string
	for {
		select {
		case e := <-ch:
			out = append(out, summary(e))
		default:
			return out
		}
	}
}

// rig is a monitor over the default rack's emulated fabrics on a manual
// clock, with a subscriber to what it publishes.
type rig struct {
	drivers map[string]fabric.Driver
	clk     *clock.Manual
	bus     *Bus
	mon     *Monitor
	events  <-chan Event
}

func newRig(t *testing.T, th Thresholds) *rig {
	t.Helper()
	clk := clock.NewManual(t0)
	drivers, err := emulated.NewAll(topology.LoadDefault(), clk)
	if err != nil {
		t.Fatal(err)
	}
	bus := New(Options{Clock: clk.Now, SubscriberBuffer: 10000})
	t.Cleanup(bus.Close)
	ch, _ := bus.Subscribe(nil, 0)
	return &rig{
		drivers: drivers,
		clk:     clk,
		bus:     bus,
		mon:     NewMonitor(bus, drivers, MonitorOptions{Clock: clk, Thresholds: th}),
		events:  ch,
	}
}

func (r *rig) inject(t *testing.T, fab string, f fabric.Fault) {
	t.Helper()
	if err := r.drivers[fab].(fabric.FaultInjector).InjectFault(f); err != nil {
		t.Fatal(err)
	}
}

func (r *rig) clear(fab string) { r.drivers[fab].(fabric.FaultInjector).ClearFaults() }

// poll advances the clock by 2 s, polls, and returns the events published.
func (r *rig) poll(t *testing.T) []string {
	t.Helper()
	r.clk.Advance(2 * time.Second)
	if err := r.mon.Poll(context.Background()); err != nil {
		t.Fatalf("Poll: %v", err)
	}
	return drain(r.events)
}

// TestMonitorDeviceFails injects device-fails into the real emulated PCIe
// driver: the monitor reports the device Critical once (and its
// temperature over the threshold, as a failed device runs hot), then OK
// when the fault clears.
func TestMonitorDeviceFails(t *testing.T) {
	r := newRig(t, Thresholds{})
	if _, ok := r.mon.DeviceHealth("falcon1", "gpu1"); ok {
		t.Fatal("DeviceHealth answered before any poll")
	}
	if got := r.poll(t); len(got) != 0 {
		t.Fatalf("healthy rack: %v", got)
	}
	r.inject(t, "falcon1", fabric.Fault{Kind: fabric.DeviceFails, Target: "gpu1"})
	if h, ok := r.mon.DeviceHealth("falcon1", "gpu1"); !ok || h != fabric.OK {
		t.Fatalf("gpu1 before the next poll: %q %v, want the cached OK", h, ok)
	}
	got := r.poll(t)
	if h, _ := r.mon.DeviceHealth("falcon1", "gpu1"); h != fabric.Critical {
		t.Fatalf("gpu1 after the poll: %q, want Critical", h)
	}
	if h, _ := r.mon.DeviceHealth("falcon1", "gpu2"); h != fabric.OK {
		t.Fatalf("gpu2: %q, want OK", h)
	}
	want := []string{
		"ResourceStatusChangedCritical /redfish/v1/Fabrics/falcon1/Endpoints/gpu1 gpu1 Critical",
		"ResourceErrorThresholdExceeded /redfish/v1/Fabrics/falcon1/Endpoints/gpu1 TemperatureCelsius 85",
	}
	if !slices.Equal(got, want) {
		t.Fatalf("after device-fails:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	// The event itself, as SSE and push consumers get it.
	crit := r.bus.Recent(2, nil)[0]
	if crit.Type != TypeStatusChange || crit.Severity != SeverityCritical || crit.Tenant != "" ||
		crit.MessageID != "ResourceEvent.1.4.ResourceStatusChangedCritical" ||
		crit.Message != "The health of resource 'gpu1' has changed to Critical." ||
		!crit.Time.Equal(r.clk.Now()) {
		t.Errorf("Critical event %+v", crit)
	}
	if oem, _ := crit.Oem["Rackpool"].(map[string]any); oem["Fabric"] != "falcon1" || oem["Device"] != "gpu1" {
		t.Errorf("Oem %v", crit.Oem)
	}
	if got := r.poll(t); len(got) != 0 {
		t.Fatalf("unchanged failure reported again: %v", got)
	}
	r.clear("falcon1")
	got = r.poll(t)
	if h, _ := r.mon.DeviceHealth("falcon1", "gpu1"); h != fabric.OK {
		t.Fatalf("gpu1 after clearing: %q, want OK", h)
	}
	want = []string{
		"ResourceStatusChangedOK /redfish/v1/Fabrics/falcon1/Endpoints/gpu1 gpu1 OK",
		"ResourceErrorThresholdCleared /redfish/v1/Fabrics/falcon1/Endpoints/gpu1 TemperatureCelsius 85",
	}
	if !slices.Equal(got, want) {
		t.Fatalf("after clearing:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if got := r.poll(t); len(got) != 0 {
		t.Fatalf("recovered rack: %v", got)
	}
}

// attachAny attaches the first device of fabric fab that host/port
// reaches and returns its ID.
func (r *rig) attachAny(t *testing.T, fab, host, port string, devices ...string) string {
	t.Helper()
	for _, d := range devices {
		_, err := r.drivers[fab].Attach(context.Background(), fabric.Attachment{Block: d, Device: d, Host: host, HostPort: port})
		if err == nil {
			return d
		}
	}
	t.Fatalf("%s/%s reaches none of %v", host, port, devices)
	return ""
}

// TestMonitorPortAndHostFailures covers port-fails (the port's endpoint
// goes Critical, a device attached through it Warning) and host-fails
// (one event for the host's System, none per port, and the host stays
// Critical while any fabric says so).
func TestMonitorPortAndHostFailures(t *testing.T) {
	r := newRig(t, Thresholds{})
	gpu := r.attachAny(t, "falcon1", "host1", "pcie", "gpu1", "gpu2", "gpu3", "gpu4", "gpu5", "gpu6", "gpu7", "gpu8")
	gpuEP := "/redfish/v1/Fabrics/falcon1/Endpoints/" + gpu
	steps := []struct {
		name string
		do   func()
		want []string
	}{
		{"healthy", func() {}, nil},
		{"port fails", func() { r.inject(t, "falcon1", fabric.Fault{Kind: fabric.PortFails, Target: "host1/pcie"}) }, []string{
			"ResourceStatusChangedWarning " + gpuEP + " " + gpu + " Warning",
			"ResourceStatusChangedCritical /redfish/v1/Fabrics/falcon1/Endpoints/host1-pcie host1-pcie Critical",
		}},
		{"port recovers", func() { r.clear("falcon1") }, []string{
			"ResourceStatusChangedOK " + gpuEP + " " + gpu + " OK",
			"ResourceStatusChangedOK /redfish/v1/Fabrics/falcon1/Endpoints/host1-pcie host1-pcie OK",
		}},
		{"host fails in one fabric", func() { r.inject(t, "falcon1", fabric.Fault{Kind: fabric.HostFails, Target: "host2"}) }, []string{
			"ResourceStatusChangedCritical /redfish/v1/Systems/host2 host2 Critical",
		}},
		{"and in another", func() { r.inject(t, "sas1", fabric.Fault{Kind: fabric.HostFails, Target: "host2"}) }, nil},
		{"cleared in one of them", func() { r.clear("falcon1") }, nil},
		{"cleared everywhere", func() { r.clear("sas1") }, []string{
			"ResourceStatusChangedOK /redfish/v1/Systems/host2 host2 OK",
		}},
		{"host with an attached device fails", func() { r.inject(t, "falcon1", fabric.Fault{Kind: fabric.HostFails, Target: "host1"}) }, []string{
			"ResourceStatusChangedWarning " + gpuEP + " " + gpu + " Warning",
			"ResourceStatusChangedCritical /redfish/v1/Systems/host1 host1 Critical",
		}},
	}
	for _, st := range steps {
		st.do()
		if got := r.poll(t); !slices.Equal(got, st.want) {
			t.Fatalf("%s:\n%s\nwant:\n%s", st.name, strings.Join(got, "\n"), strings.Join(st.want, "\n"))
		}
	}
}

// TestMonitorLinkErrors drives the emulated error counters (a failed
// device logs 9 errors per Stats poll) against a threshold of 20 in a
// 10 s window, polling every 2 s.
func TestMonitorLinkErrors(t *testing.T) {
	r := newRig(t, Thresholds{LinkErrors: 20, LinkErrorWindow: 10 * time.Second, TemperatureC: 1000})
	const ep = "/redfish/v1/Fabrics/sas1/Endpoints/hdd3"
	steps := []struct {
		name string
		do   func()
		want []string
	}{
		{"t=2 baseline", func() {}, nil},
		{"t=4 9 errors", func() { r.inject(t, "sas1", fabric.Fault{Kind: fabric.DeviceFails, Target: "hdd3"}) }, []string{
			"ResourceStatusChangedCritical " + ep + " hdd3 Critical",
		}},
		{"t=6 18 errors", func() {}, nil},
		{"t=8 27 errors", func() {}, []string{"ResourceErrorThresholdExceeded " + ep + " LinkErrors 20"}},
		{"t=10 fault cleared, 27 in window", func() { r.clear("sas1") }, []string{"ResourceStatusChangedOK " + ep + " hdd3 OK"}},
		{"t=12 still 27 since t=2", func() {}, nil},
		{"t=14 18 since t=4", func() {}, []string{"ResourceErrorThresholdCleared " + ep + " LinkErrors 20"}},
		{"t=16 quiet", func() {}, nil},
	}
	for _, st := range steps {
		st.do()
		if got := r.poll(t); !slices.Equal(got, st.want) {
			t.Fatalf("%s:\n%s\nwant:\n%s", st.name, strings.Join(got, "\n"), strings.Join(st.want, "\n"))
		}
	}
}

func TestErrorWindow(t *testing.T) {
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	steps := []struct {
		at    int
		total uint64
		want  uint64
	}{
		{0, 100, 0},   // the first sample is the baseline
		{5, 130, 30},  // since t=0
		{10, 150, 50}, // t=0 is exactly one window old: still the baseline
		{15, 150, 20}, // since t=5
		{16, 151, 21}, // since t=5 (t=6 has no sample)
		{30, 151, 0},  // since t=16
		{31, 40, 0},   // counters reset: a new baseline
		{32, 45, 5},
	}
	var w errorWindow
	for _, st := range steps {
		if got := w.add(at(st.at), st.total, 10*time.Second); got != st.want {
			t.Fatalf("t=%d total %d: %d in window, want %d", st.at, st.total, got, st.want)
		}
		if len(w.samples) > 4 {
			t.Fatalf("t=%d: %d samples kept", st.at, len(w.samples))
		}
	}
}

// fakeDriver is a fabric.Driver whose Discover and Stats are functions; a
// nil stats reports errors.ErrUnsupported.
type fakeDriver struct {
	discover func() (fabric.State, error)
	stats    func() ([]fabric.DeviceStats, error)
}

var _ fabric.StatsReporter = (*fakeDriver)(nil)

func (f *fakeDriver) Discover(context.Context) (fabric.State, error) { return f.discover() }
func (f *fakeDriver) Attach(context.Context, fabric.Attachment) (fabric.Result, error) {
	return fabric.Result{}, nil
}
func (f *fakeDriver) Detach(context.Context, fabric.Attachment) (fabric.Result, error) {
	return fabric.Result{}, nil
}
func (f *fakeDriver) Stats(context.Context) ([]fabric.DeviceStats, error) {
	if f.stats == nil {
		return nil, errors.ErrUnsupported
	}
	return f.stats()
}

// TestMonitorDiscoverErrors: a fabric whose Discover fails keeps its last
// known health (no OK event, the host stays failed), Poll reports the
// error, and the other fabrics are still checked.
func TestMonitorDiscoverErrors(t *testing.T) {
	type answer struct {
		health map[string]fabric.Health
		err    error
	}
	var a, b answer
	drivers := map[string]fabric.Driver{
		"a": &fakeDriver{discover: func() (fabric.State, error) { return fabric.State{Health: a.health}, a.err }},
		"b": faulty.Wrap(&fakeDriver{discover: func() (fabric.State, error) { return fabric.State{Health: b.health}, b.err }}),
	}
	bus := New(Options{})
	defer bus.Close()
	ch, _ := bus.Subscribe(nil, 0)
	m := NewMonitor(bus, drivers, MonitorOptions{})
	broken := errors.New("switch unreachable")
	steps := []struct {
		name    string
		a, b    answer
		wantErr bool
		want    []string
	}{
		{"failures", answer{health: map[string]fabric.Health{"d1": fabric.Critical, "h1": fabric.Critical, "h1/p": fabric.Critical}},
			answer{health: map[string]fabric.Health{"d2": "Degraded", "h1": fabric.OK, "h1/q": fabric.OK}}, false, []string{
				"ResourceStatusChangedCritical /redfish/v1/Fabrics/a/Endpoints/d1 d1 Critical",
				"ResourceStatusChangedWarning /redfish/v1/Fabrics/b/Endpoints/d2 d2 Warning",
				"ResourceStatusChangedCritical /redfish/v1/Systems/h1 h1 Critical",
			}},
		{"a unreachable", answer{err: broken},
			answer{health: map[string]fabric.Health{"d2": fabric.OK, "h1": fabric.OK, "h1/q": fabric.OK}}, true, []string{
				"ResourceStatusChangedOK /redfish/v1/Fabrics/b/Endpoints/d2 d2 OK",
			}},
		{"a back and healthy", answer{health: map[string]fabric.Health{"d1": fabric.OK, "h1": fabric.OK, "h1/p": fabric.OK}},
			answer{health: map[string]fabric.Health{"d2": fabric.OK, "h1": fabric.OK, "h1/q": fabric.OK}}, false, []string{
				"ResourceStatusChangedOK /redfish/v1/Fabrics/a/Endpoints/d1 d1 OK",
				"ResourceStatusChangedOK /redfish/v1/Systems/h1 h1 OK",
			}},
	}
	for _, st := range steps {
		a, b = st.a, st.b
		err := m.Poll(context.Background())
		if st.wantErr != (err != nil) || (err != nil && !errors.Is(err, broken)) {
			t.Fatalf("%s: Poll = %v, want error %v", st.name, err, st.wantErr)
		}
		if got := drain(ch); !slices.Equal(got, st.want) {
			t.Fatalf("%s:\n%s\nwant:\n%s", st.name, strings.Join(got, "\n"), strings.Join(st.want, "\n"))
		}
	}
}

// TestMonitorRun runs the loop against the emulated drivers and waits for
// the Critical event of an injected fault, then stops it.
func TestMonitorRun(t *testing.T) {
	drivers, err := emulated.NewAll(topology.LoadDefault(), clock.Instant{})
	if err != nil {
		t.Fatal(err)
	}
	bus := New(Options{})
	defer bus.Close()
	critical := func(e Event) bool { return e.MessageID == ResourceStatusChangedCritical.ID }
	ch, cancelSub := bus.Subscribe(critical, 0)
	defer cancelSub()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		NewMonitor(bus, drivers, MonitorOptions{Interval: 5 * time.Millisecond}).Run(ctx)
	}()
	if err := drivers["ocs1"].(fabric.FaultInjector).InjectFault(fabric.Fault{Kind: fabric.DeviceFails, Target: "memnode2"}); err != nil {
		t.Fatal(err)
	}
	e := receive(t, ch, 1)[0]
	if e.Origin != "/redfish/v1/Fabrics/ocs1/Endpoints/memnode2" {
		t.Fatalf("event %+v", e)
	}
	cancel()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Run did not return after its context ended")
	}
}

// TestMonitorSpacesLongPasses: a pass that takes more than a tenth of
// the interval (on the wall clock) makes Run skip ticks until ten times
// the pass has gone by; then it polls again.
func TestMonitorSpacesLongPasses(t *testing.T) {
	clk := clock.NewManual(time.Unix(0, 0))
	var mu sync.Mutex
	wall := time.Unix(1000, 0)
	polls := 0
	drivers := map[string]fabric.Driver{"a": &fakeDriver{discover: func() (fabric.State, error) {
		mu.Lock()
		defer mu.Unlock()
		polls++
		wall = wall.Add(time.Second) // each pass takes a second
		return fabric.State{Health: map[string]fabric.Health{"d1": fabric.OK}}, nil
	}}}
	bus := New(Options{})
	defer bus.Close()
	m := NewMonitor(bus, drivers, MonitorOptions{Interval: time.Second, Clock: clk})
	m.wall = func() time.Time {
		mu.Lock()
		defer mu.Unlock()
		return wall
	}
	count := func() int {
		mu.Lock()
		defer mu.Unlock()
		return polls
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		m.Run(ctx)
	}()
	defer func() { cancel(); <-done }()
	waitFor := func(n int) {
		t.Helper()
		for deadline := time.Now().Add(time.Minute); count() < n; time.Sleep(time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("%d polls, want %d", count(), n)
			}
			clk.Advance(time.Second) // a tick
		}
	}
	waitFor(1)
	// Ticks within ten seconds of wall time after the first pass: skipped.
	for range 30 {
		clk.Advance(time.Second)
		time.Sleep(time.Millisecond)
	}
	if n := count(); n != 1 {
		t.Fatalf("%d polls within the spacing, want 1", n)
	}
	mu.Lock()
	wall = wall.Add(10 * time.Second)
	mu.Unlock()
	waitFor(2)
}

// TestMonitorPublishes: a monitor whose Publishes answers false keeps the
// devices' health and publishes nothing (an active replica that does not
// lead); once it answers true, it publishes the changes from then on, not
// what it saw before.
func TestMonitorPublishes(t *testing.T) {
	r := newRig(t, Thresholds{})
	leads := false
	r.mon.publishes = func() bool { return leads }
	r.inject(t, "falcon1", fabric.Fault{Kind: fabric.DeviceFails, Target: "gpu1"})
	if got := r.poll(t); len(got) != 0 {
		t.Fatalf("published while not publishing: %v", got)
	}
	if h, _ := r.mon.DeviceHealth("falcon1", "gpu1"); h != fabric.Critical {
		t.Fatalf("gpu1's health while not publishing: %q, want Critical", h)
	}
	leads = true
	if got := r.poll(t); len(got) != 0 {
		t.Fatalf("an unchanged failure published on taking the lead: %v", got)
	}
	r.clear("falcon1")
	want := []string{
		"ResourceStatusChangedOK /redfish/v1/Fabrics/falcon1/Endpoints/gpu1 gpu1 OK",
		"ResourceErrorThresholdCleared /redfish/v1/Fabrics/falcon1/Endpoints/gpu1 TemperatureCelsius 85",
	}
	if got := r.poll(t); !slices.Equal(got, want) {
		t.Fatalf("after clearing:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
