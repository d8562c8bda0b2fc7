package topology

import (
	"strings"
	"testing"

	"rackpool/examples"
	"rackpool/internal/inventory"
	"rackpool/internal/units"
)

// TestCXLRack checks the embedded CXL example: the devices' split into
// logical devices and extents, the fabric's times, and the round trips of
// one and two CXL switches beside the optical card's.
func TestCXLRack(t *testing.T) {
	top, err := Parse("cxl-rack.yaml", examples.CXLRack)
	if err != nil {
		t.Fatal(err)
	}
	f := top.Fabric("cxl1")
	if f.Kind != inventory.CXLMemory || f.Reconfig != DefaultCXLReconfig || f.ReleaseTimeout != DefaultCXLReleaseTimeout {
		t.Fatalf("cxl1: kind %s, reconfig %v, release timeout %v", f.Kind, f.Reconfig, f.ReleaseTimeout)
	}
	m3 := top.Device("cxlmem3")
	if m3.LogicalDevices != 2 || m3.DCDBytes != 128*units.GiB || m3.ExtentBytes != 16*units.GiB || len(m3.Blocks) != 10 {
		t.Fatalf("cxlmem3: %d LDs, DCD %d, extent %d, %d blocks", m3.LogicalDevices, m3.DCDBytes, m3.ExtentBytes, len(m3.Blocks))
	}
	if b := top.Block("cxlmem3-ld2"); b == nil || b.Region != inventory.LogicalDevice || b.LD != 2 || b.OffsetBytes != 64*units.GiB {
		t.Errorf("cxlmem3-ld2 = %+v", b)
	}
	if b := top.Block("cxlmem3-x08"); b == nil || b.Region != inventory.DynamicExtent || b.OffsetBytes != 240*units.GiB {
		t.Errorf("cxlmem3-x08 = %+v", b)
	}
	// 150 ns per CXL switch, 1 m host cable, 0.5 m device cable, 1 m
	// between the switches; 37.4 ns device overhead (P4 Eq. 1).
	one := 2*(150+1.5*NSPerMetre) + 37.4
	two := 2*(300+2.5*NSPerMetre) + 37.4
	optical := 2*(25+0.5*NSPerMetre) + 37.4
	for _, c := range []struct {
		host, block string
		hops        int
		rtt         float64
	}{
		{"host1", "cxlmem1-ld1", 1, one}, {"host1", "cxlmem2-x01", 1, one}, {"host1", "cxlmem3-x01", 2, two},
		{"host4", "cxlmem3-ld1", 1, one}, {"host4", "cxlmem1-ld1", 2, two}, {"host2", "memcard1-b01", 1, optical},
	} {
		p, ok := top.Path(top.Host(c.host), top.Block(c.block))
		if !ok || p.Hops != c.hops || p.RTTNS != c.rtt {
			t.Errorf("%s -> %s = %d hops %.1f ns (%v), want %d hops %.1f ns", c.host, c.block, p.Hops, p.RTTNS, ok, c.hops, c.rtt)
		}
	}
}

// TestCXLValidation: every bad CXL field is refused with file, line and
// field, and the line is the one holding the edit.
func TestCXLValidation(t *testing.T) {
	base := string(examples.CXLRack)
	mem1 := "capacity: 256GiB, logical_devices: 4,"
	cases := []struct {
		name, old, new, want string
	}{
		{"too many LDs", mem1, "capacity: 256GiB, logical_devices: 17,", "fabrics[0].devices[0].logical_devices: must be 1..16, got 17"},
		{"LDs do not divide", mem1, "capacity: 256GiB, logical_devices: 3,", "3 logical devices do not divide"},
		{"block size on CXL", mem1, "capacity: 256GiB, block_size: 8GiB,", "fabrics[0].devices[0].block_size: a CXL memory device is split by logical_devices and extent_size"},
		{"extent does not divide", "capacity: 256GiB, extent_size: 16GiB,", "capacity: 256GiB, extent_size: 48GiB,", "fabrics[0].devices[1].extent_size: extent size 48GiB must divide"},
		{"too many extents", "capacity: 256GiB, extent_size: 16GiB,", "capacity: 256GiB, extent_size: 32MiB,", "at most 4096 extents"},
		{"LDs without room", "capacity: 256GiB, extent_size: 16GiB,", "capacity: 256GiB, extent_size: 16GiB, logical_devices: 2,", "no room for logical devices"},
		{"DCD without extents", "dcd_capacity: 128GiB, extent_size: 16GiB,", "dcd_capacity: 128GiB,", "fabrics[0].devices[2].dcd_capacity: a dynamic-capacity region needs an extent_size"},
		{"DCD too big", "dcd_capacity: 128GiB,", "dcd_capacity: 512GiB,", "dcd_capacity: must be 1 byte to the capacity"},
		{"not memory", "id: cxlmem1, kind: memory", "id: cxlmem1, kind: gpu", "fabrics[0].devices[0].kind: a cxl-memory fabric carries only memory devices"},
		{"LDs on optical", "capacity: 16GiB, block_size: 4GiB,", "capacity: 16GiB, block_size: 4GiB, logical_devices: 2,", "fabrics[1].devices[0].logical_devices: only memory devices of a cxl-memory fabric"},
		{"release timeout elsewhere", "kind: optical-circuit", "kind: optical-circuit\n    release_timeout: 1s", "fabrics[1].release_timeout: only cxl-memory fabrics"},
		{"bad release timeout", "cxl_release_timeout: 5s", "cxl_release_timeout: soon", `defaults.cxl_release_timeout: "soon" is not a duration`},
		{"switch port range", `switch: cxl-sw1, port: "6"`, `switch: cxl-sw1, port: "9"`, `switch cxl-sw1 has no port "9" (ports 1..8)`},
		{"switch port reuse", `switch: cxl-sw1, port: "6"`, `switch: cxl-sw1, port: "5"`, "already used by device cxlmem1"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			src := strings.Replace(base, tc.old, tc.new, 1)
			if src == base {
				t.Fatalf("test edit %q not applied", tc.old)
			}
			_, err := Parse("cxl-rack.yaml", []byte(src))
			te, ok := err.(*Error)
			if !ok || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want a *Error containing %q", err, tc.want)
			}
			edited := strings.Count(base[:strings.Index(base, tc.old)], "\n") + 1
			if te.Line < edited || te.Line > edited+strings.Count(tc.new, "\n")+1 {
				t.Errorf("error names line %d, the edit is on line %d: %v", te.Line, edited, err)
			}
		})
	}
}
