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
	"rackpool/internal/inventory"
	"rackpool/internal/topology"
)

func cxlRack(t *testing.T) (*topology.Topology, *CXL, *clock.Manual) {
	t.Helper()
	top, err := topology.Parse("cxl-rack.yaml", examples.CXLRack)
	if err != nil {
		t.Fatal(err)
	}
	clk := clock.NewManual(epoch)
	d, err := NewCXL(top, top.Fabric("cxl1"), clk)
	if err != nil {
		t.Fatal(err)
	}
	return top, d, clk
}

// TestCXLBlocks checks the example's CXL devices are split as the file
// says: logical devices first, then extents, offsets contiguous.
func TestCXLBlocks(t *testing.T) {
	top, _, _ := cxlRack(t)
	want := map[string]struct{ lds, extents int }{"cxlmem1": {4, 0}, "cxlmem2": {0, 16}, "cxlmem3": {2, 8}}
	for id, w := range want {
		d := top.Device(id)
		lds, extents := 0, 0
		var off int64
		for _, b := range d.Blocks {
			switch b.Region {
			case inventory.LogicalDevice:
				lds++
			case inventory.DynamicExtent:
				extents++
			default:
				t.Errorf("%s: region %q", b.ID, b.Region)
			}
			if b.OffsetBytes != off {
				t.Errorf("%s at offset %d, want %d", b.ID, b.OffsetBytes, off)
			}
			off += b.CapacityBytes
		}
		if lds != w.lds || extents != w.extents || off != d.CapacityBytes {
			t.Errorf("%s: %d LDs, %d extents covering %d bytes; want %d, %d, %d", id, lds, extents, off, w.lds, w.extents, d.CapacityBytes)
		}
	}
}

// TestCXLTimesAndRelease: binding an LD or adding an extent costs one
// fabric-manager operation (10 ms in the example); a cooperative release
// the same; a host that stalls its release is waited for the release
// timeout (5 s) on the driver's clock and then forced, and the block is
// free again either way.
func TestCXLTimesAndRelease(t *testing.T) {
	_, d, clk := cxlRack(t)
	ctx := context.Background()
	op, timeout := 10*time.Millisecond, 5*time.Second
	ld := fabric.Attachment{Block: "cxlmem1-ld1", Host: "host1", HostPort: "cxl"}
	ext := fabric.Attachment{Block: "cxlmem2-x01", Host: "host2", HostPort: "cxl"}
	for _, a := range []fabric.Attachment{ld, ext} {
		before := clk.Now()
		r, err := d.Attach(ctx, a)
		if err != nil || r != (fabric.Result{Took: op, Changed: true}) || clk.Now().Sub(before) != op {
			t.Fatalf("Attach(%v) = %+v, %v after %v; want %v on the clock", a, r, err, clk.Now().Sub(before), op)
		}
	}
	if r, err := d.Detach(ctx, ld); err != nil || r.Took != op {
		t.Fatalf("cooperative Detach(%v) = %+v, %v; want %v", ld, r, err, op)
	}
	if err := d.InjectFault(fabric.Fault{Kind: fabric.ReleaseStalls, Target: "host2"}); err != nil {
		t.Fatal(err)
	}
	before := clk.Now()
	r, err := d.Detach(ctx, ext)
	if err != nil || r.Took != timeout+op || clk.Now().Sub(before) != timeout+op {
		t.Fatalf("Detach from a stalling host = %+v, %v after %v; want %v (timeout, then forced)", r, err, clk.Now().Sub(before), timeout+op)
	}
	rel := d.Releases()
	if len(rel) != 2 || rel[0].Forced || !rel[1].Forced || rel[1].Region != inventory.DynamicExtent || rel[0].Region != inventory.LogicalDevice {
		t.Fatalf("Releases = %+v, want a cooperative LD release then a forced extent release", rel)
	}
	if !rel[1].Requested.Equal(before) {
		t.Errorf("forced release requested at %v, want %v", rel[1].Requested, before)
	}
	// The block is free: another host gets it at once.
	if _, err := d.Attach(ctx, fabric.Attachment{Block: "cxlmem2-x01", Host: "host3", HostPort: "cxl"}); err != nil {
		t.Fatalf("re-attach after a forced release: %v", err)
	}
	// A failed host cannot acknowledge either.
	d.ClearFaults()
	a := fabric.Attachment{Block: "cxlmem1-ld2", Host: "host1", HostPort: "cxl"}
	if _, err := d.Attach(ctx, a); err != nil {
		t.Fatal(err)
	}
	if err := d.InjectFault(fabric.Fault{Kind: fabric.HostFails, Target: "host1"}); err != nil {
		t.Fatal(err)
	}
	if r, err := d.Detach(ctx, a); err != nil || r.Took != timeout+op {
		t.Errorf("Detach from a failed host = %+v, %v; want forced after %v", r, err, timeout+op)
	}
	// Bad fault targets change nothing.
	for _, bad := range []string{"no-such-host", "host1/no-such-port", "host1/ocs"} {
		if err := d.InjectFault(fabric.Fault{Kind: fabric.ReleaseStalls, Target: bad}); !errors.Is(err, fabric.ErrUnknown) {
			t.Errorf("InjectFault(release-stalls, %q) = %v, want ErrUnknown", bad, err)
		}
	}
}

// TestReleaseStallsOnlyCXL: fabrics whose detach needs no host
// acknowledgement refuse the fault kind.
func TestReleaseStallsOnlyCXL(t *testing.T) {
	top := topology.LoadDefault()
	for _, f := range top.Fabrics {
		d, err := New(top, f, clock.NewManual(epoch))
		if err != nil {
			t.Fatal(err)
		}
		if err := d.(fabric.FaultInjector).InjectFault(fabric.Fault{Kind: fabric.ReleaseStalls}); err == nil {
			t.Errorf("%s (%s) accepted %s", f.ID, f.Kind, fabric.ReleaseStalls)
		}
	}
}

// TestCXLLDIDs: a device serves at most 16 hosts at once, one LD-ID each;
// a 17th host is refused with ErrPortBusy until one of the 16 lets go, and
// a host already served takes more extents freely.
func TestCXLLDIDs(t *testing.T) {
	src := `
name: ldids
racks:
  - id: r1
    hosts:
      - {id: "h{n}", count: 17, cores: 4, memory: 8GiB, ports: [{id: cxl, fabric: cxl1, port: "1", metres: 1}]}
fabrics:
  - id: cxl1
    kind: cxl-memory
    switches: [{id: sw, ports: 32, latency_ns: 150}]
    devices:
      - {id: dcd1, kind: memory, capacity: 64GiB, extent_size: 1GiB, switch: sw, port: "32"}
`
	top, err := topology.Parse("ldids.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	d, err := NewCXL(top, top.Fabric("cxl1"), clock.NewManual(epoch))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	ext := func(i int) string { return fmt.Sprintf("dcd1-x%02d", i) }
	for h := 1; h <= 16; h++ {
		if _, err := d.Attach(ctx, fabric.Attachment{Block: ext(h), Host: fmt.Sprintf("h%d", h), HostPort: "cxl"}); err != nil {
			t.Fatalf("host %d: %v", h, err)
		}
	}
	if got := len(d.HostsServed("dcd1")); got != 16 {
		t.Fatalf("HostsServed = %d, want 16", got)
	}
	h17 := fabric.Attachment{Block: ext(17), Host: "h17", HostPort: "cxl"}
	if _, err := d.Attach(ctx, h17); !errors.Is(err, fabric.ErrPortBusy) {
		t.Fatalf("17th host: %v, want ErrPortBusy", err)
	}
	if _, err := d.Attach(ctx, fabric.Attachment{Block: ext(18), Host: "h1", HostPort: "cxl"}); err != nil {
		t.Fatalf("a served host's second extent: %v", err)
	}
	if _, err := d.Attach(ctx, fabric.Attachment{Block: ext(1), Host: "h2", HostPort: "cxl"}); !errors.Is(err, fabric.ErrInUse) {
		t.Fatalf("an extent held by another host: %v, want ErrInUse", err)
	}
	if _, err := d.Detach(ctx, fabric.Attachment{Block: ext(5), Host: "h5", HostPort: "cxl"}); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Attach(ctx, h17); err != nil {
		t.Fatalf("17th host after h5 let go: %v", err)
	}
	st, err := d.Stats(ctx)
	if err != nil || len(st) != 1 || st[0].LinkSpeed != "32GT/s" || st[0].LinkWidth != 16 {
		t.Fatalf("Stats = %+v, %v", st, err)
	}
	if want := 100 * 17.0 / 64; st[0].UtilisationPercent != want {
		t.Errorf("utilisation %.2f%%, want %.2f%% (17 of 64 extents)", st[0].UtilisationPercent, want)
	}
}
