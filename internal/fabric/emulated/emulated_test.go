package emulated

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"rackpool/examples"
	"rackpool/internal/clock"
	"rackpool/internal/fabric"
	"rackpool/internal/fabric/fabrictest"
	"rackpool/internal/inventory"
	"rackpool/internal/topology"
)

var epoch = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)

func TestConformance(t *testing.T) {
	for _, ex := range []struct {
		name string
		data []byte
	}{{"rack", examples.Rack}, {"cxl-rack", examples.CXLRack}} {
		t.Run(ex.name, func(t *testing.T) { conformance(t, ex.name, ex.data) })
	}
}

// conformance runs fabrictest against every fabric of an example topology.
func conformance(t *testing.T, name string, data []byte) {
	top, err := topology.Parse(name+".yaml", data)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range top.Fabrics {
		t.Run(f.ID, func(t *testing.T) {
			fabrictest.Run(t, top, f.ID, func(t *testing.T) fabric.Driver {
				d, err := New(top, f, clock.NewManual(epoch))
				if err != nil {
					t.Fatal(err)
				}
				return d
			})
		})
	}
}

func TestBuildersCoverEveryKind(t *testing.T) {
	for _, k := range inventory.FabricKinds {
		if Builders[k] == nil {
			t.Errorf("no emulated driver for fabric kind %s", k)
		}
	}
	top := topology.LoadDefault()
	all, err := NewAll(top, clock.NewManual(epoch))
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != len(top.Fabrics) {
		t.Fatalf("NewAll built %d drivers, want %d", len(all), len(top.Fabrics))
	}
	wantType := map[string]string{"falcon1": "*emulated.PCIe", "sas1": "*emulated.SAS", "ocs1": "*emulated.Optical", "vlan1": "*emulated.VLAN"}
	for id, want := range wantType {
		if got := fmt.Sprintf("%T", all[id]); got != want {
			t.Errorf("driver for %s is %s, want %s", id, got, want)
		}
	}
	other := topology.LoadDefault()
	if _, err := New(top, other.Fabric("sas1"), nil); err == nil {
		t.Error("New accepted a fabric from another topology")
	}
	if _, err := NewPCIe(top, top.Fabric("sas1"), nil); err == nil {
		t.Error("NewPCIe accepted a sas-circuit fabric")
	}
	if _, err := New(top, &inventory.Fabric{ID: "x", Kind: "infiniband"}, nil); err == nil {
		t.Error("New accepted an unknown fabric kind")
	}
}

// TestModelledTimes checks that each model reports and sleeps the example
// rack's reconfiguration times on its clock: PCIe hot-plug 100 ms, SAS remap
// 1 ms + drive online 1 ms (detach: remap only), OCS circuit 25 ms (0 when a
// circuit is reused), VLAN change 5 ms.
func TestModelledTimes(t *testing.T) {
	ms := time.Millisecond
	cases := []struct {
		fabric       string
		steps        []step
		totalElapsed time.Duration
	}{
		{"falcon1", []step{
			{op: "attach", a: at("gpu1", "host1", "pcie"), took: 100 * ms},
			{op: "attach", a: at("gpu1", "host1", "pcie"), took: 0},
			{op: "detach", a: at("gpu1", "host1", "pcie"), took: 100 * ms},
		}, 200 * ms},
		{"sas1", []step{
			{op: "attach", a: at("hdd1", "host1", "sas"), took: 2 * ms},
			{op: "attach", a: at("hdd1", "host1", "sas"), took: 0},
			{op: "detach", a: at("hdd1", "host1", "sas"), took: 1 * ms},
		}, 3 * ms},
		{"ocs1", []step{
			{op: "attach", a: at("memnode1-b01", "host1", "ocs-a"), took: 25 * ms},
			{op: "attach", a: at("memnode1-b02", "host1", "ocs-a"), took: 0, changed: true},
			{op: "detach", a: at("memnode1-b01", "host1", "ocs-a"), took: 0, changed: true},
			{op: "detach", a: at("memnode1-b02", "host1", "ocs-a"), took: 25 * ms},
		}, 50 * ms},
		{"vlan1", []step{
			{op: "attach", a: at("essd1", "host1", "eth"), took: 5 * ms},
			{op: "detach", a: at("essd1", "host1", "eth"), took: 5 * ms},
		}, 10 * ms},
	}
	top := topology.LoadDefault()
	for _, c := range cases {
		t.Run(c.fabric, func(t *testing.T) {
			clk := clock.NewManual(epoch)
			d, err := New(top, top.Fabric(c.fabric), clk)
			if err != nil {
				t.Fatal(err)
			}
			for _, s := range c.steps {
				before := clk.Now()
				r := s.run(t, d)
				want := fabric.Result{Took: s.took, Changed: s.took > 0 || s.changed}
				if r != want {
					t.Errorf("%s %v = %+v, want %+v", s.op, s.a, r, want)
				}
				if got := clk.Now().Sub(before); got != s.took {
					t.Errorf("%s %v advanced the clock by %v, want %v", s.op, s.a, got, s.took)
				}
			}
			if got := clk.Now().Sub(epoch); got != c.totalElapsed {
				t.Errorf("clock advanced %v in all, want %v", got, c.totalElapsed)
			}
		})
	}
}

type step struct {
	op      string // attach or detach
	a       fabric.Attachment
	took    time.Duration
	changed bool // Changed although took is 0
	err     error
}

func (s step) run(t *testing.T, d fabric.Driver) fabric.Result {
	t.Helper()
	var (
		r   fabric.Result
		err error
	)
	switch s.op {
	case "attach":
		r, err = d.Attach(context.Background(), s.a)
	case "detach":
		r, err = d.Detach(context.Background(), s.a)
	default:
		t.Fatalf("unknown op %q", s.op)
	}
	if s.err == nil && err != nil {
		t.Fatalf("%s %v: %v", s.op, s.a, err)
	}
	if s.err != nil && !errors.Is(err, s.err) {
		t.Fatalf("%s %v = %v, want %v", s.op, s.a, err, s.err)
	}
	return r
}

// at names an attachment; the device is the block's (the engine fills it
// in), so tests of memory blocks need not spell it.
func at(block, host, port string) fabric.Attachment {
	return fabric.Attachment{Block: block, Host: host, HostPort: port}
}

func TestFaultTargetsMustBelongToFabric(t *testing.T) {
	top := topology.LoadDefault()
	d, err := NewSAS(top, top.Fabric("sas1"), clock.NewManual(epoch))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []fabric.Fault{
		{Kind: fabric.DeviceFails, Target: "gpu1"},
		{Kind: fabric.AttachFails, Target: "gpu1"},
		{Kind: fabric.PortFails, Target: "host1/pcie"},
		{Kind: fabric.HostFails, Target: "host9"},
	} {
		if err := d.InjectFault(f); !errors.Is(err, fabric.ErrUnknown) {
			t.Errorf("InjectFault(%+v) = %v, want ErrUnknown", f, err)
		}
	}
	if err := d.InjectFault(fabric.Fault{Kind: "meteor"}); err == nil {
		t.Error("InjectFault accepted an unknown kind")
	}
}

func TestStatsModel(t *testing.T) {
	top := topology.LoadDefault()
	ctx := context.Background()
	d, err := NewPCIe(top, top.Fabric("falcon1"), clock.NewManual(epoch))
	if err != nil {
		t.Fatal(err)
	}
	stats := func() map[string]fabric.DeviceStats {
		t.Helper()
		st, err := d.Stats(ctx)
		if err != nil {
			t.Fatal(err)
		}
		m := map[string]fabric.DeviceStats{}
		for _, s := range st {
			m[s.Device] = s
		}
		return m
	}
	idle := stats()["gpu1"]
	if idle.UtilisationPercent != 0 || idle.TemperatureC != 35 || idle.LinkWidth != 16 || idle.LinkSpeed != "16GT/s" || idle.Health != fabric.OK {
		t.Errorf("idle gpu1 = %+v", idle)
	}
	if _, err := d.Attach(ctx, at("gpu1", "host1", "pcie")); err != nil {
		t.Fatal(err)
	}
	busy := stats()["gpu1"]
	if busy.UtilisationPercent < 50 || busy.UtilisationPercent > 100 || busy.TemperatureC <= idle.TemperatureC {
		t.Errorf("attached gpu1 = %+v, want 50-100%% and warmer than idle", busy)
	}
	if again := stats()["gpu1"]; again != busy {
		t.Errorf("Stats is not deterministic: %+v then %+v", busy, again)
	}
	if err := d.InjectFault(fabric.Fault{Kind: fabric.DeviceFails, Target: "gpu1"}); err != nil {
		t.Fatal(err)
	}
	f1 := stats()["gpu1"]
	f2 := stats()["gpu1"]
	if f1.Health != fabric.Critical || f1.LinkWidth != 0 || f1.UncorrectableErrs == 0 {
		t.Errorf("failed gpu1 = %+v", f1)
	}
	if f2.CorrectableErrors != 2*f1.CorrectableErrors || f2.UncorrectableErrs != 2*f1.UncorrectableErrs {
		t.Errorf("error counters did not grow per poll: %+v then %+v", f1, f2)
	}
	d.ClearFaults()
	if err := d.InjectFault(fabric.Fault{Kind: fabric.PortFails, Target: "host1/pcie"}); err != nil {
		t.Fatal(err)
	}
	w := stats()["gpu1"]
	if w.Health != fabric.Warning || w.CorrectableErrors <= f2.CorrectableErrors || w.UncorrectableErrs != f2.UncorrectableErrs {
		t.Errorf("gpu1 over a failed port = %+v, want Warning with more correctable errors", w)
	}
	st, err := d.Discover(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.Health["gpu1"] != fabric.Warning || st.Health["host1/pcie"] != fabric.Critical || st.Health["host1"] != fabric.OK {
		t.Errorf("Discover health = gpu1 %q, host1/pcie %q, host1 %q", st.Health["gpu1"], st.Health["host1/pcie"], st.Health["host1"])
	}
}

func TestRestoreTakesNoTime(t *testing.T) {
	top := topology.LoadDefault()
	clk := clock.NewManual(time.Unix(0, 0))
	drivers, err := NewAll(top, clk)
	if err != nil {
		t.Fatal(err)
	}
	d := drivers["falcon1"].(fabric.Restorer)
	as := []fabric.Attachment{{Block: "gpu1", Device: "gpu1", Host: "host1", HostPort: "pcie"}}
	if err := d.Restore(context.Background(), as); err != nil {
		t.Fatal(err)
	}
	if !clk.Now().Equal(time.Unix(0, 0)) {
		t.Fatalf("restore advanced the clock to %v", clk.Now())
	}
	st, _ := drivers["falcon1"].Discover(context.Background())
	if len(st.Attachments) != 1 || st.Attachments[0].Block != "gpu1" {
		t.Fatalf("attachments after restore = %+v", st.Attachments)
	}
	// Physics still apply: host4 cannot reach gpu2.
	bad := []fabric.Attachment{{Block: "gpu2", Device: "gpu2", Host: "host4", HostPort: "pcie"}}
	if err := d.Restore(context.Background(), bad); err == nil {
		t.Fatal("restore accepted an impossible attachment")
	}
}
