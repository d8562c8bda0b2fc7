package topology

import (
	"math"
	"strings"
	"testing"

	"rackpool/examples"
	"rackpool/internal/inventory"
	"rackpool/internal/units"
)

// tray is the "tN" prefix of a MONet pod card id (t3-cpu7, t3-p2-mem1).
func tray(id string) string {
	t, _, _ := strings.Cut(id, "-")
	return t
}

// TestMONetPod checks the embedded MONet pod (P4): 8 trays of 12 CPU and 12
// memory cards over 3 parallel optical planes, every memory card within 3
// hops of every CPU card, and 1 hop inside a tray.
func TestMONetPod(t *testing.T) {
	top, err := Parse("monet-pod.yaml", examples.MONetPod)
	if err != nil {
		t.Fatal(err)
	}
	if got := len(top.Hosts); got != 96 {
		t.Errorf("hosts = %d, want 96 CPU cards", got)
	}
	var mems []*inventory.Device
	for _, d := range top.Devices {
		if d.Kind == inventory.Memory {
			mems = append(mems, d)
		}
	}
	if len(mems) != 96 {
		t.Errorf("memory cards = %d, want 96 (CPU:memory 1:1)", len(mems))
	}
	blocks := 0
	for _, b := range top.Blocks {
		if b.Kind == inventory.Memory {
			blocks++
			if b.CapacityBytes != 4*units.GiB {
				t.Fatalf("block %s is %d bytes, want 4 GiB", b.ID, b.CapacityBytes)
			}
		}
	}
	if blocks != 96*4 {
		t.Errorf("memory blocks = %d, want 384 (96 cards x 16 GiB / 4 GiB)", blocks)
	}
	if len(top.Fabrics) < 2 {
		t.Errorf("fabrics = %d, want 2 or more parallel planes", len(top.Fabrics))
	}
	for _, h := range top.Hosts {
		if h.Cores != 4 || len(h.Ports) != len(top.Fabrics) {
			t.Fatalf("host %s: %d cores, %d ports; want 4 cores and one port per plane", h.ID, h.Cores, len(h.Ports))
		}
	}

	// Same tray: 1 switch, 0.25 m each side, both ways, plus the read overhead.
	const ocsNS = 25.0
	sameTray := 2*(ocsNS+0.5*NSPerMetre) + 37.4
	// Other tray: intra, inter, intra switches; 0.25+3+3+0.25 m of cable.
	otherTray := 2*(3*ocsNS+6.5*NSPerMetre) + 37.4

	hops := map[int]int{}
	pairs := 0
	var rttSum float64
	for _, h := range top.Hosts {
		for _, d := range mems {
			p, ok := top.Path(h, d.Blocks[0])
			if !ok {
				t.Fatalf("%s cannot reach %s", h.ID, d.ID)
			}
			pairs++
			hops[p.Hops]++
			rttSum += p.RTTNS
			if p.Hops > 3 {
				t.Errorf("%s -> %s: %d hops, want at most 3", h.ID, d.ID, p.Hops)
			}
			want, wantHops := otherTray, 3
			if tray(h.ID) == tray(d.ID) {
				want, wantHops = sameTray, 1
			}
			if p.Hops != wantHops || math.Abs(p.RTTNS-want) > 1e-9 {
				t.Errorf("%s -> %s: %d hops, %.1f ns; want %d hops, %.1f ns", h.ID, d.ID, p.Hops, p.RTTNS, wantHops, want)
			}
		}
	}
	if hops[1]+hops[3] != pairs {
		t.Errorf("hop counts %v: only 1 and 3 hops expected", hops)
	}
	t.Logf("%d (CPU card, memory card) pairs: 1 hop %d (%.1f%%, %.1f ns), 3 hops %d (%.1f%%, %.1f ns); mean round trip %.1f ns",
		pairs, hops[1], 100*float64(hops[1])/float64(pairs), sameTray,
		hops[3], 100*float64(hops[3])/float64(pairs), otherTray, rttSum/float64(pairs))
}
