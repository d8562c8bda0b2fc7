package sqlite_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"rackpool/internal/inventory"
	"rackpool/internal/store"
	"rackpool/internal/store/sqlite"
)

// latencies collects per-call durations from many goroutines.
type latencies struct {
	mu sync.Mutex
	d  []time.Duration
}

func (l *latencies) add(d []time.Duration) {
	l.mu.Lock()
	l.d = append(l.d, d...)
	l.mu.Unlock()
}

// quantile returns the p-quantile in microseconds.
func (l *latencies) quantile(p float64) float64 {
	if len(l.d) == 0 {
		return 0
	}
	slices.Sort(l.d)
	return float64(l.d[min(len(l.d)-1, int(p*float64(len(l.d))))].Microseconds())
}

// report adds throughput and latency percentiles to b's results.
func (l *latencies) report(b *testing.B, elapsed time.Duration) {
	b.ReportMetric(float64(len(l.d))/elapsed.Seconds(), "applies/s")
	b.ReportMetric(l.quantile(0.50), "p50-µs")
	b.ReportMetric(l.quantile(0.99), "p99-µs")
	b.ReportMetric(l.quantile(1), "max-µs")
}

// cycle runs the i'th step of a client's insert → update → delete cycle.
func cycle(ctx context.Context, s store.Store, client, i int) error {
	id := fmt.Sprintf("c%03d-%08d", client, i/3)
	c := &inventory.Composition{
		ID: id, Name: id, Host: "h-" + id,
		Blocks:    []string{"h-" + id, "gpu-" + id},
		State:     inventory.Composing,
		Version:   1,
		CreatedAt: time.Now(),
	}
	c.UpdatedAt = c.CreatedAt
	switch i % 3 {
	case 0:
		return s.Apply(ctx, store.Plan{Put: []*inventory.Composition{c}})
	case 1:
		c.Version, c.State, c.Adding = 2, inventory.Updating, []string{"nvme-" + id}
		return s.Apply(ctx, store.Plan{Put: []*inventory.Composition{c}})
	default:
		return s.Apply(ctx, store.Plan{Delete: []store.Deletion{{ID: id, Version: 2}}})
	}
}

// BenchmarkApplyParallel measures durable Apply throughput and latency with
// a fixed number of closed-loop clients, each cycling its own compositions
// through insert, update and delete.
func BenchmarkApplyParallel(b *testing.B) {
	for _, clients := range []int{1, 8, 32, 128} {
		b.Run(fmt.Sprintf("clients=%d", clients), func(b *testing.B) {
			s, err := sqlite.Open(b.TempDir())
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			ctx := context.Background()
			var (
				next int64
				lat  latencies
				wg   sync.WaitGroup
			)
			b.ResetTimer()
			start := time.Now()
			for cl := range clients {
				wg.Go(func() {
					var mine []time.Duration
					for i := 0; atomic.AddInt64(&next, 1) <= int64(b.N); i++ {
						t := time.Now()
						if err := cycle(ctx, s, cl, i); err != nil {
							b.Error(err)
							return
						}
						mine = append(mine, time.Since(t))
					}
					lat.add(mine)
				})
			}
			wg.Wait()
			elapsed := time.Since(start)
			b.StopTimer()
			lat.report(b, elapsed)
		})
	}
}

// BenchmarkApplyOpenLoop issues Apply calls at a fixed rate regardless of how
// fast earlier ones finish, as independent API requests would arrive, and
// measures each call's latency from its scheduled start, so that a stall is
// charged to every call it delays (p50/p99/max), and from the moment Apply
// was called (call-p99: without the benchmark's own timer wake-up delay).
func BenchmarkApplyOpenLoop(b *testing.B) {
	for _, rate := range []int{4000, 8000} {
		b.Run(fmt.Sprintf("rate=%d", rate), func(b *testing.B) {
			s, err := sqlite.Open(b.TempDir())
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			ctx := context.Background()
			const clients = 512 // each client runs every clients'th call
			interval := time.Second / time.Duration(rate)
			var (
				lat, call latencies
				wg        sync.WaitGroup
			)
			b.ResetTimer()
			start := time.Now()
			for cl := range clients {
				wg.Go(func() {
					var mine, own []time.Duration
					for i, n := 0, cl; n < b.N; i, n = i+1, n+clients {
						due := start.Add(time.Duration(n) * interval)
						time.Sleep(time.Until(due))
						t := time.Now()
						if err := cycle(ctx, s, cl, i); err != nil {
							b.Error(err)
							return
						}
						mine = append(mine, time.Since(due))
						own = append(own, time.Since(t))
					}
					lat.add(mine)
					call.add(own)
				})
			}
			wg.Wait()
			elapsed := time.Since(start)
			b.StopTimer()
			lat.report(b, elapsed)
			b.ReportMetric(call.quantile(0.99), "call-p99-µs")
		})
	}
}
