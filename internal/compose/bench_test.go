package compose_test

import (
	"testing"
	"time"

	"rackpool/internal/clock"
	"rackpool/internal/compose"
	"rackpool/internal/fabric/emulated"
	"rackpool/internal/inventory"
	"rackpool/internal/schedule"
	"rackpool/internal/store/sqlite"
	"rackpool/internal/topology"
	"rackpool/internal/units"
)

// BenchmarkComposeDecompose measures compose+decompose pairs per second
// from parallel clients on 100 racks (10,000 blocks) over the SQLite store
// and emulated fabrics on a manual clock (so modelled reconfiguration
// takes no time): each compose asks for a GPU, an NVMe drive and 16 GiB
// of pooled memory on a host the scheduler picks.
func BenchmarkComposeDecompose(b *testing.B) {
	top, err := topology.Parse("generated", topology.GenerateRacks(100))
	if err != nil {
		b.Fatal(err)
	}
	clk := clock.NewManual(time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC))
	st, err := sqlite.Open(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	drivers, err := emulated.NewAll(top, clk)
	if err != nil {
		b.Fatal(err)
	}
	m, err := compose.New(ctx, compose.Options{Topology: top, Store: st, Drivers: drivers, Clock: clk})
	if err != nil {
		b.Fatal(err)
	}
	req := compose.Request{Needs: []schedule.Need{
		{Kind: inventory.GPU, Count: 1},
		{Kind: inventory.NVMe, Count: 1},
		{Kind: inventory.Memory, CapacityBytes: 16 * units.GiB},
	}}
	b.SetParallelism(8) // 8 clients per CPU: the store commits their writes in groups
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			c, err := m.Compose(ctx, req)
			if err != nil {
				b.Error(err)
				return
			}
			if err := m.Decompose(ctx, c.ID, c.Version); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "pairs/s")
	if n := len(m.List()); n != 0 {
		b.Errorf("%d compositions left", n)
	}
}
