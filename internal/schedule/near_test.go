package schedule_test

import (
	"testing"

	"rackpool/internal/inventory"
	"rackpool/internal/schedule"
	"rackpool/internal/topology"
)

// TestRankMemory: memory devices come nearest first (the topology's round
// trip), best fit among equals, and the others come back with the reasons
// a composition gets.
func TestRankMemory(t *testing.T) {
	top := topology.LoadDefault()
	s := schedule.New(top)
	var mems []*inventory.Device
	for _, d := range top.Devices {
		if d.Kind == inventory.Memory {
			mems = append(mems, d)
		}
	}
	if len(mems) < 2 {
		t.Fatalf("the example rack has %d memory devices, want at least 2", len(mems))
	}
	host := top.Host("host1")
	free := make([]uint64, len(mems))
	for i := range free {
		free[i] = 1 << 30
	}
	got, rej := s.RankMemory(host, 0, mems, free)
	if len(got)+len(rej) != len(mems) {
		t.Fatalf("%d ranked + %d rejected of %d devices", len(got), len(rej), len(mems))
	}
	for i := 1; i < len(got); i++ {
		a, b := got[i-1], got[i]
		if a.Path.RTTNS > b.Path.RTTNS || (a.Path.RTTNS == b.Path.RTTNS && a.Path.Hops > b.Path.Hops) {
			t.Errorf("%s (%.1f ns, %d hops) ranked before %s (%.1f ns, %d hops)", a.Device.ID, a.Path.RTTNS, a.Path.Hops,
				b.Device.ID, b.Path.RTTNS, b.Path.Hops)
		}
	}
	for _, c := range got {
		want, ok := top.Path(host, c.Device.Blocks[0])
		if !ok || want.RTTNS != c.Path.RTTNS {
			t.Errorf("%s: round trip %.1f ns, the topology says %.1f ns (%v)", c.Device.ID, c.Path.RTTNS, want.RTTNS, ok)
		}
	}
	// Best fit between equally near devices: the one with less free.
	same := []*inventory.Device{mems[0], mems[0]}
	got, _ = s.RankMemory(host, 0, same, []uint64{8 << 30, 1 << 30})
	if len(got) != 2 || got[0].Free != 1<<30 {
		t.Errorf("best fit: %+v", got)
	}
	// A bound below every round trip, and no room: the reasons.
	got, rej = s.RankMemory(host, 1, mems, free)
	if len(got) != 0 || len(rej) != len(mems) {
		t.Fatalf("bound 1 ns: ranked %d, rejected %d", len(got), len(rej))
	}
	for _, r := range rej {
		if r.Reason != schedule.TooFar && r.Reason != schedule.Unreachable {
			t.Errorf("bound 1 ns: %s rejected for %s (%s)", r.Block, r.Reason, r.Detail)
		}
	}
	got, rej = s.RankMemory(nil, 0, mems, make([]uint64, len(mems)))
	if len(got) != 0 || len(rej) != len(mems) || rej[0].Reason != schedule.TooSmall {
		t.Errorf("no room anywhere: ranked %d, rejected %+v", len(got), rej)
	}
}
