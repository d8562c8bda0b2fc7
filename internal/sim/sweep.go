package sim

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
)

// RunSweep runs every point of sw whose index modulo shards is shard (all
// of them with shards == 1), workers at a time (0: one per core), each a
// whole simulation of base with the point's parameters applied. Rows come
// back in point order. A sweep too big for one machine is split with
// shards and its shards' outputs merged (report.MergeSweeps).
func RunSweep(ctx context.Context, base Config, sw *Sweep, shard, shards, workers int, progress Progress) ([]SweepRow, error) {
	if shards < 1 || shard < 0 || shard >= shards {
		return nil, fmt.Errorf("sim: shard %d of %d: want 0 <= shard < shards", shard, shards)
	}
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	var points []map[string]float64
	for i, p := range sw.Points() {
		if i%shards == shard {
			points = append(points, p)
		}
	}
	rows := make([]SweepRow, len(points))
	errs := make([]error, len(points))
	var next, done atomic.Int64
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	for range min(workers, len(points)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= len(points) || ctx.Err() != nil {
					return
				}
				c := base
				c.Name = base.Name + " " + pointName(points[i])
				for _, k := range slices.Sorted(maps.Keys(points[i])) {
					if err := ApplyParam(&c, k, points[i][k]); err != nil {
						errs[i] = err
						cancel()
						return
					}
				}
				res, err := Run(ctx, c, nil)
				if err != nil {
					errs[i] = fmt.Errorf("sim: sweep point %s: %w", pointName(points[i]), err)
					cancel()
					return
				}
				rows[i] = SweepRow{Params: points[i], Shard: shard, Summary: res.Summary}
				if n := int(done.Add(1)); progress != nil {
					progress(n, len(points))
				}
			}
		}()
	}
	wg.Wait()
	// The point that failed first, not the points its failure cancelled.
	for _, err := range errs {
		if err != nil && !errors.Is(err, context.Canceled) {
			return nil, err
		}
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return rows, nil
}

// pointName is "a=1 b=2" in key order.
func pointName(p map[string]float64) string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(p)) {
		parts = append(parts, fmt.Sprintf("%s=%g", k, p[k]))
	}
	return strings.Join(parts, " ")
}

// SweepAxes returns the parameter names of rows, sorted (merged shards
// have lost their file's axis order).
func SweepAxes(rows []SweepRow) []string {
	seen := map[string]bool{}
	for _, r := range rows {
		for k := range r.Params {
			seen[k] = true
		}
	}
	return slices.Sorted(maps.Keys(seen))
}
