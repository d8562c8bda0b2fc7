package emulated

import (
	"context"
	"math"
	"math/rand/v2"
	"testing"

	"rackpool/examples"
	"rackpool/internal/clock"
	"rackpool/internal/fabric"
	"rackpool/internal/inventory"
	"rackpool/internal/schedule"
	"rackpool/internal/topology"
	"rackpool/internal/units"
)

// p4RoundTrip is P4's remote latency model (Eq. 1), R(d) = L_local +
// L_m·d + M_overhead, with d the round-trip fibre metres, L_m 5 ns/m and
// M_overhead the 37.4 ns read overhead, and the switches' port-to-port
// latency crossed both ways (P0 Table 1; MONet's OCS < 30 ns). L_local,
// the CPU's own DRAM access, is left out: rackpool reports what the fabric
// adds. It is written here from the paper, apart from package topology's
// path code, so the check is not the code checking itself.
func p4RoundTrip(oneWaySwitchNS, roundTripMetres float64) float64 {
	const lm, overhead = 5.0, 37.4
	return 2*oneWaySwitchNS + lm*roundTripMetres + overhead
}

// placed is what the drivers report for one block placed by the engine.
type placed struct {
	hops int
	rtt  float64
}

// placeAndMeasure places each request with the one placement engine,
// attaches every block through the emulated drivers on the port the plan
// chose, and returns the round trips the drivers report.
func placeAndMeasure(t *testing.T, top *topology.Topology, reqs []schedule.Request) []placed {
	t.Helper()
	ctx := context.Background()
	drivers, err := NewAll(top, clock.NewManual(epoch))
	if err != nil {
		t.Fatal(err)
	}
	s, st := schedule.New(top), schedule.NewState(top)
	var out []placed
	for _, req := range reqs {
		p, err := s.Schedule(st, req)
		if err != nil {
			continue // the pod is full for this request, as P4 drops it
		}
		st.Commit(p)
		for _, a := range p.Assignments {
			if a.Port == nil {
				continue
			}
			d := drivers[a.Port.Fabric.ID]
			att := fabric.Attachment{Block: a.Block.ID, Host: p.Host.ID, HostPort: a.Port.ID}
			if _, err := d.Attach(ctx, att); err != nil {
				t.Fatalf("attach %v placed by the engine: %v", att, err)
			}
			lat, err := d.(fabric.LatencyReporter).Latency(ctx, att)
			if err != nil {
				t.Fatal(err)
			}
			if lat.Hops != a.Hops || lat.RTTNS != a.RTTNS {
				t.Errorf("%v: driver reports %+v, the engine planned %d hops %.1f ns", att, lat, a.Hops, a.RTTNS)
			}
			out = append(out, placed{lat.Hops, lat.RTTNS})
		}
	}
	return out
}

// TestP4LatencyModel checks the round trips the emulated optical and CXL
// fabrics report, for memory the placement engine allocates, against P4's
// model: ~95 ns round trip within a tray (1 hop), every memory card within
// 3 hops, and most traffic within 1 hop under a locality-based allocation
// (P4 §5.A: 77% within 1 hop, 23% within 3). The same formula gives the
// CXL fabric's 1- and 2-switch round trips.
func TestP4LatencyModel(t *testing.T) {
	// MONet pod: each CPU card asks for 4-28 GiB in 4 GiB blocks (P4:
	// memory modules of 2-16 GB, several per VM), 16 GiB on average: the
	// pod's memory fully subscribed, so not every card finds all it wants
	// in its own tray. Cards ask in a seeded random order.
	pod, err := topology.Parse("monet-pod.yaml", examples.MONetPod)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(4, 17))
	var reqs []schedule.Request
	for _, i := range rng.Perm(len(pod.Hosts)) {
		gib := int64(4 * (1 + rng.IntN(7)))
		reqs = append(reqs, schedule.Request{Host: pod.Hosts[i].ID,
			Needs: []schedule.Need{{Kind: inventory.Memory, CapacityBytes: gib * units.GiB}}})
	}
	got := placeAndMeasure(t, pod, reqs)
	const ocs = 25.0
	want := map[int]float64{
		1: p4RoundTrip(ocs, 2*(0.25+0.25)),       // intra-tray OCS, 0.25 m each side
		3: p4RoundTrip(3*ocs, 2*(0.25+3+3+0.25)), // intra, inter, intra
	}
	hops, sum := map[int]int{}, 0.0
	for _, p := range got {
		w, ok := want[p.hops]
		if !ok || math.Abs(p.rtt-w) > 1e-9 {
			t.Errorf("optical: %d hops %.1f ns, P4's model gives %v", p.hops, p.rtt, want)
		}
		hops[p.hops]++
		sum += p.rtt
	}
	if len(got) == 0 {
		t.Fatal("nothing placed")
	}
	if r := want[1]; math.Abs(r-95)/95 > 0.05 {
		t.Errorf("1-hop round trip %.1f ns, P4 reports ~95 ns", r)
	}
	share1 := float64(hops[1]) / float64(len(got))
	if mean := sum / float64(len(got)); math.Abs(mean-95)/95 > 0.05 {
		t.Errorf("mean round trip %.1f ns, P4 reports ~95 ns", mean)
	}
	if share1 < 0.77 {
		t.Errorf("%.0f%% of blocks within 1 hop, P4's locality-based allocation keeps 77%%", 100*share1)
	}
	t.Logf("optical (MONet pod, %d blocks placed for %d requests): 1 hop %d (%.1f%%) at %.1f ns, 3 hops %d (%.1f%%) at %.1f ns, mean %.1f ns",
		len(got), len(reqs), hops[1], 100*share1, want[1], hops[3], 100*float64(hops[3])/float64(len(got)), want[3], sum/float64(len(got)))

	// CXL rack: every host asks for 96 GiB, the engine fills from the
	// nearest memory (the optical card first, then CXL).
	rack, err := topology.Parse("cxl-rack.yaml", examples.CXLRack)
	if err != nil {
		t.Fatal(err)
	}
	reqs = nil
	for _, h := range rack.Hosts {
		reqs = append(reqs, schedule.Request{Host: h.ID, Needs: []schedule.Need{{Kind: inventory.Memory, CapacityBytes: 96 * units.GiB}}})
	}
	got = placeAndMeasure(t, rack, reqs)
	const cxlSwitch = 150.0
	want = map[int]float64{
		1: p4RoundTrip(cxlSwitch, 2*(1+0.5)),     // one CXL switch, 1 m host + 0.5 m device cable
		2: p4RoundTrip(2*cxlSwitch, 2*(1+1+0.5)), // two switches and the 1 m link between them
	}
	opt := p4RoundTrip(ocs, 2*(0.25+0.25))
	hops = map[int]int{}
	for _, p := range got {
		if p.rtt == opt && p.hops == 1 {
			hops[0]++ // the optical card
			continue
		}
		if w, ok := want[p.hops]; !ok || math.Abs(p.rtt-w) > 1e-9 {
			t.Errorf("cxl: %d hops %.1f ns, the model gives %v", p.hops, p.rtt, want)
		}
		hops[p.hops]++
	}
	if hops[0] == 0 || hops[1] == 0 {
		t.Errorf("placements %v: want optical and 1-switch CXL blocks", hops)
	}
	t.Logf("cxl rack (%d blocks): optical %d at %.1f ns, CXL 1 switch %d at %.1f ns, 2 switches %d at %.1f ns",
		len(got), hops[0], opt, hops[1], want[1], hops[2], want[2])
}
