package schedule

import (
	"testing"

	"rackpool/internal/inventory"
	"rackpool/internal/topology"
	"rackpool/internal/units"
)

// BenchmarkSchedule100k measures decisions on 1,000 racks (100,000 blocks)
// held at about half their hosts composed: each decision places 2 GPUs,
// 32 GiB of pooled memory and an NVMe drive on a host the scheduler picks.
func BenchmarkSchedule100k(b *testing.B) {
	top, err := topology.Parse("generated", topology.GenerateRacks(1000))
	if err != nil {
		b.Fatal(err)
	}
	benchSchedule(b, top)
}

func benchSchedule(b *testing.B, top *topology.Topology) {
	s, st := New(top), NewState(top)
	req := Request{Needs: []Need{
		{Kind: inventory.GPU, Count: 2},
		{Kind: inventory.Memory, CapacityBytes: 32 * units.GiB},
		{Kind: inventory.NVMe, Count: 1},
	}}
	var live []*Plan
	hold := len(top.Hosts) / 2
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		p, err := s.Schedule(st, req)
		if err != nil {
			b.Fatal(err)
		}
		st.Acquire(p.Host, p.Assignments)
		live = append(live, p)
		if len(live) > hold {
			st.Release(live[0].Host, live[0].Assignments)
			live = live[1:]
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "decisions/s")
}
