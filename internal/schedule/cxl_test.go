package schedule

import (
	"errors"
	"strings"
	"testing"

	"rackpool/examples"
	"rackpool/internal/inventory"
	"rackpool/internal/topology"
	"rackpool/internal/units"
)

// TestCXLMemoryLatencyBound: CXL memory blocks (logical devices and
// extents) go through the same memory walk and latency bound as any other
// memory. From host4, cxlmem3 is one CXL switch away (352.4 ns), cxlmem1
// and cxlmem2 two (662.4 ns), memcard1 one optical switch (92.4 ns).
func TestCXLMemoryLatencyBound(t *testing.T) {
	top, err := topology.Parse("cxl-rack.yaml", examples.CXLRack)
	if err != nil {
		t.Fatal(err)
	}
	s := New(top)
	mem := func(gib int64, bound float64) Request {
		return Request{Host: "host4", Needs: []Need{{Kind: inventory.Memory, CapacityBytes: gib * units.GiB, MaxLatencyNS: bound}}}
	}

	// Within 500 ns: the optical card first, then the near CXL device.
	p, err := s.Schedule(NewState(top), mem(144, 500))
	if err != nil {
		t.Fatalf("144 GiB within 500 ns: %v", err)
	}
	var got int64
	for _, a := range p.Assignments[1:] {
		got += a.Block.CapacityBytes
		if a.RTTNS > 500 || (a.Block.Device.ID != "cxlmem3" && a.Block.Device.ID != "memcard1") {
			t.Errorf("%s at %.1f ns placed under a 500 ns bound", a.Block.ID, a.RTTNS)
		}
	}
	if got < 144*units.GiB {
		t.Errorf("placed %d bytes, want 144 GiB", got)
	}

	// More than the near devices hold: the far ones are dropped for latency.
	_, err = s.Schedule(NewState(top), mem(512, 500))
	var u *Unsatisfiable
	if !errors.As(err, &u) {
		t.Fatalf("512 GiB within 500 ns: %v, want Unsatisfiable", err)
	}
	far := 0
	for _, r := range u.Rejections {
		if r.Reason == TooFar && r.Host == "host4" {
			far++
		}
	}
	if far == 0 {
		t.Errorf("rejections %+v name no %q reason", u.Rejections, TooFar)
	}

	// The default memory bound (P0 Table 1: within the rack, 1 µs) admits
	// two CXL switches.
	p, err = s.Schedule(NewState(top), mem(512, 0))
	if err != nil {
		t.Fatalf("512 GiB under the default bound: %v", err)
	}
	var devs []string
	for _, a := range p.Assignments[1:] {
		if a.RTTNS > DefaultMaxLatencyNS[inventory.Memory] {
			t.Errorf("%s at %.1f ns beyond the default bound", a.Block.ID, a.RTTNS)
		}
		if !strings.Contains(strings.Join(devs, ","), a.Block.Device.ID) {
			devs = append(devs, a.Block.Device.ID)
		}
	}
	t.Logf("512 GiB on host4 under the default bound: devices %v, total rtt %.1f ns", devs, p.TotalRTTNS)
}
