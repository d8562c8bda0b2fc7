package faulty_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"rackpool/internal/clock"
	"rackpool/internal/fabric"
	"rackpool/internal/fabric/emulated"
	"rackpool/internal/fabric/fabrictest"
	"rackpool/internal/fabric/faulty"
	"rackpool/internal/topology"
)

var epoch = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)

func wrapped(t *testing.T, fabricID string) (*faulty.Driver, *clock.Manual) {
	t.Helper()
	top := topology.LoadDefault()
	clk := clock.NewManual(epoch)
	inner, err := emulated.New(top, top.Fabric(fabricID), clk)
	if err != nil {
		t.Fatal(err)
	}
	return faulty.Wrap(inner), clk
}

// An unarmed decorator is transparent: it passes the conformance suite,
// faults and stats included.
func TestConformance(t *testing.T) {
	top := topology.LoadDefault()
	fabrictest.Run(t, top, "sas1", func(t *testing.T) fabric.Driver {
		d, _ := wrapped(t, "sas1")
		return d
	})
}

var (
	ctx   = context.Background()
	hdd1  = fabric.Attachment{Block: "hdd1", Device: "hdd1", Host: "host1", HostPort: "sas"}
	hdd2  = fabric.Attachment{Block: "hdd2", Device: "hdd2", Host: "host1", HostPort: "sas"}
	hdd3  = fabric.Attachment{Block: "hdd3", Device: "hdd3", Host: "host1", HostPort: "sas"}
	pairs = []fabric.Attachment{hdd1, hdd2, hdd3}
)

func attached(t *testing.T, d fabric.Driver) []string {
	t.Helper()
	st, err := d.Discover(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, a := range st.Attachments {
		out = append(out, a.Block)
	}
	return out
}

func TestFailNthAttach(t *testing.T) {
	d, _ := wrapped(t, "sas1")
	d.FailNthAttach(2)
	var errs []bool
	for _, a := range pairs {
		_, err := d.Attach(ctx, a)
		if err != nil && !errors.Is(err, fabric.ErrInjected) {
			t.Fatalf("Attach(%v): %v", a, err)
		}
		errs = append(errs, err != nil)
	}
	if want := []bool{false, true, false}; !slices.Equal(errs, want) {
		t.Fatalf("failures = %v, want %v", errs, want)
	}
	if got, want := attached(t, d), []string{"hdd1", "hdd3"}; !slices.Equal(got, want) {
		t.Fatalf("attached = %v, want %v: an injected failure must change nothing", got, want)
	}
	calls := d.Calls()
	if len(calls) != 4 || !calls[1].Injected || calls[1].Attachment != hdd2 || calls[3].Op != faulty.OpDiscover {
		t.Fatalf("Calls = %+v", calls)
	}
}

func TestFailDetaches(t *testing.T) {
	d, _ := wrapped(t, "sas1")
	if _, err := d.Attach(ctx, hdd1); err != nil {
		t.Fatal(err)
	}
	d.FailNextDetaches(1)
	if _, err := d.Detach(ctx, hdd1); !errors.Is(err, fabric.ErrInjected) {
		t.Fatalf("Detach = %v, want ErrInjected", err)
	}
	if got := attached(t, d); !slices.Equal(got, []string{"hdd1"}) {
		t.Fatalf("attached = %v after a failed detach", got)
	}
	if r, err := d.Detach(ctx, hdd1); err != nil || !r.Changed {
		t.Fatalf("second Detach = %+v, %v", r, err)
	}
}

// Probabilistic failures come from a seeded source: the same seed fails the
// same calls.
func TestProbabilityIsDeterministic(t *testing.T) {
	pattern := func() []bool {
		d, _ := wrapped(t, "sas1")
		d.FailAttachesWithProbability(0.5, rand.New(rand.NewPCG(7, 7)))
		var out []bool
		for range 64 {
			_, err := d.Attach(ctx, hdd1)
			if err != nil && !errors.Is(err, fabric.ErrInjected) {
				t.Fatal(err)
			}
			out = append(out, err != nil)
		}
		return out
	}
	a, b := pattern(), pattern()
	if !slices.Equal(a, b) {
		t.Fatalf("same seed, different failures:\n%v\n%v", a, b)
	}
	n := 0
	for _, f := range a {
		if f {
			n++
		}
	}
	if n == 0 || n == len(a) {
		t.Fatalf("%d of %d attaches failed at p=0.5", n, len(a))
	}
}

func TestLatency(t *testing.T) {
	d, clk := wrapped(t, "sas1")
	d.SetLatency(clk, 7*time.Millisecond)
	if _, err := d.Attach(ctx, hdd1); err != nil {
		t.Fatal(err)
	}
	// 7ms injected + 1ms remap + 1ms drive online.
	if got := clk.Now().Sub(epoch); got != 9*time.Millisecond {
		t.Fatalf("clock advanced %v, want 9ms", got)
	}
	d.Reset()
	if _, err := d.Detach(ctx, hdd1); err != nil {
		t.Fatal(err)
	}
	if got := clk.Now().Sub(epoch); got != 10*time.Millisecond {
		t.Fatalf("clock advanced %v after Reset, want 10ms", got)
	}
	if n := len(d.Calls()); n != 1 {
		t.Fatalf("%d calls recorded after Reset, want 1", n)
	}
}

// bare is a driver with no optional capabilities.
type bare struct{ fabric.Driver }

func TestForwarding(t *testing.T) {
	d, _ := wrapped(t, "sas1")
	if err := d.InjectFault(fabric.Fault{Kind: fabric.DeviceFails, Target: "hdd1"}); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Attach(ctx, hdd1); !errors.Is(err, fabric.ErrFailed) {
		t.Fatalf("Attach of a failed drive through the decorator = %v, want ErrFailed", err)
	}
	st, err := d.Stats(ctx)
	if err != nil || len(st) == 0 {
		t.Fatalf("Stats = %v, %v", st, err)
	}
	d.ClearFaults()
	if _, err := d.Attach(ctx, hdd1); err != nil {
		t.Fatal(err)
	}

	b := faulty.Wrap(bare{d.Unwrap()})
	if _, err := b.Stats(ctx); !errors.Is(err, errors.ErrUnsupported) {
		t.Errorf("Stats without a StatsReporter = %v, want ErrUnsupported", err)
	}
	if err := b.InjectFault(fabric.Fault{Kind: fabric.DeviceFails, Target: "hdd1"}); !errors.Is(err, errors.ErrUnsupported) {
		t.Errorf("InjectFault without a FaultInjector = %v, want ErrUnsupported", err)
	}
	b.ClearFaults() // must not panic
}
