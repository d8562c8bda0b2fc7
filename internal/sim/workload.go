package sim

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"

	"rackpool/internal/inventory"
	"rackpool/internal/schedule"
	"rackpool/internal/units"
)

// GenerateMONet produces P4 §5.A's workload: virtual machine requests
// arriving as a Poisson process (mean inter-arrival MeanInterarrival/Load),
// each holding HoldBase + HoldStep per HoldEvery requests already issued
// (P4: 6300 + 360 per 100), with cores, RAM, a CPU–RAM round-trip bound
// and a bandwidth bound drawn uniformly. The same seed gives the same
// requests.
func GenerateMONet(w Workload, seed int64) []Request {
	rng := rand.New(rand.NewPCG(uint64(seed), 0x4d4f4e6574))
	mean := w.MeanInterarrival / w.Load
	out := make([]Request, w.Requests)
	t := 0.0
	for i := range out {
		t += rng.ExpFloat64() * mean
		r := Request{
			ID:      fmt.Sprintf("r%d", i+1),
			Arrival: t,
			Hold:    w.HoldBase + w.HoldStep*float64(i/w.HoldEvery),
			Cores:   w.CoresMin + rng.IntN(w.CoresMax-w.CoresMin+1),
			RAMGB:   w.RAMGB[rng.IntN(len(w.RAMGB))],
		}
		if w.LatencyMaxNS > 0 {
			r.MaxLatencyNS = w.LatencyMinNS + rng.Float64()*(w.LatencyMaxNS-w.LatencyMinNS)
		}
		if len(w.BandwidthGbps) > 0 {
			r.MinBandwidthGbps = w.BandwidthGbps[rng.IntN(len(w.BandwidthGbps))]
		}
		out[i] = r
	}
	return out
}

// giraphDemand is P0 §9's observation turned into a workload: every node of
// a job has a memory demand that varies over time with a per-node peak to
// average of NodePeakToAverage, while the job's aggregate demand peaks at
// only AggPeakToAverage times its average, because nodes peak at different
// times.
type giraphDemand struct {
	steps    int
	stepLen  float64
	gb       [][]float64 // gb[node][step]
	nodePeak []float64
}

// generateGiraph builds the demand. Each node's demand is a base level
// with one pulse per run lasting a fifth of it; the pulse height gives the
// per-node peak to average exactly. Enough nodes pulse together to reach
// the aggregate peak to average; the others pulse one after another in
// the rest of the run.
func generateGiraph(w Workload, seed int64) *giraphDemand {
	rng := rand.New(rand.NewPCG(uint64(seed), 0x6769726170))
	const duty = 0.2
	R := w.NodePeakToAverage
	// Pulse height over base h from R = h / (1 + (h-1)·duty).
	h := R * (1 - duty) / (1 - R*duty)
	if R*duty >= 1 {
		h = R / duty // a pulse this sharp cannot keep the duty: shorten nothing, cap it
	}
	base := w.NodeAvgGB / (1 + (h-1)*duty)
	n := w.Nodes
	// Nodes pulsing together, m, from A = (n + (h-1)·m) / (n·(1+(h-1)·duty)).
	m := int(math.Round(float64(n) * (w.AggPeakToAverage*(1+(h-1)*duty) - 1) / (h - 1)))
	m = min(max(m, 1), n)
	pulse := max(1, int(math.Round(duty*float64(w.Steps))))
	d := &giraphDemand{steps: w.Steps, stepLen: w.StepLength, gb: make([][]float64, n), nodePeak: make([]float64, n)}
	order := rng.Perm(n)
	rest := n - m
	for k, node := range order {
		start := 0
		if k >= m && rest > 0 {
			// Spread over [pulse, steps-pulse] so they never overlap the
			// synchronised group.
			span := max(w.Steps-2*pulse, 1)
			start = pulse + (k-m)*span/rest
		}
		series := make([]float64, w.Steps)
		for s := range series {
			v := base
			if s >= start && s < start+pulse {
				v = base * h
			}
			series[s] = v
			d.nodePeak[node] = max(d.nodePeak[node], v)
		}
		d.gb[node] = series
	}
	return d
}

// runDemand replays a giraphDemand. On traditional servers every node
// holds its own peak for the whole run (a server cannot borrow memory);
// on composable pools a node is a CPU card share whose pooled memory
// grows and shrinks with its demand, step by step, through the scheduler
// (expansions are placements with Expand, like `rackpool expand`).
func (e *engine) runDemand(ctx context.Context, d *giraphDemand, progress Progress) error {
	n := len(d.gb)
	e.endHint = float64(d.steps) * d.stepLen
	e.startSampling()
	dem := &Demand{Nodes: n}
	type node struct {
		host *inventory.Host
		plan *schedule.Plan
		held []schedule.Assignment
	}
	nodes := make([]node, n)
	blockGB := float64(e.c.MemoryBlockGB)
	place := func(i int, req schedule.Request) bool {
		e.requests++
		e.decisions++
		p, err := e.sched.Place(e.st, req)
		if err != nil || p == nil {
			if err == nil {
				e.reject(req)
			}
			return false
		}
		e.accepted++
		e.st.Commit(p)
		e.running++
		nodes[i] = node{host: p.Host, plan: p, held: append([]schedule.Assignment(nil), p.Assignments...)}
		e.used["cores"] += float64(p.Share.Cores)
		e.used["memory_gb"] += float64(p.Share.MemoryGiB)
		for _, a := range p.Assignments {
			e.used["memory_gb"] += float64(a.Block.CapacityBytes) / float64(units.GiB)
		}
		return true
	}
	for i := range n {
		if e.c.Architecture == Traditional {
			place(i, schedule.Request{Share: schedule.Share{Cores: 1, MemoryGiB: int(math.Ceil(d.nodePeak[i]))}})
			continue
		}
		want := int64(math.Ceil(d.gb[i][0]/blockGB)) * int64(e.c.MemoryBlockGB) * units.GiB
		place(i, schedule.Request{Share: schedule.Share{Cores: 1},
			Needs: []schedule.Need{{Kind: inventory.Memory, CapacityBytes: want, MaxLatencyNS: -1}}})
	}
	for s := range d.steps {
		if err := ctx.Err(); err != nil {
			return err
		}
		e.setTime(float64(s) * d.stepLen)
		agg := 0.0
		for i := range n {
			agg += d.gb[i][s]
		}
		dem.AggregatePeakGB = max(dem.AggregatePeakGB, agg)
		if e.c.Architecture == Traditional {
			e.notePeak()
			continue
		}
		for i := range n {
			nd := &nodes[i]
			if nd.plan == nil {
				continue
			}
			want := int(math.Ceil(d.gb[i][s] / blockGB))
			have := len(nd.held)
			switch {
			case want > have:
				dem.Expansions++
				held := make([]string, len(nd.held))
				for k, a := range nd.held {
					held[k] = a.Block.ID
				}
				p, err := e.sched.Place(e.st, schedule.Request{Host: nd.host.ID, Expand: true, Held: held,
					Needs: []schedule.Need{{Kind: inventory.Memory, Count: want - have, MaxLatencyNS: -1}}})
				if err != nil || p == nil {
					dem.ExpansionsFailed++
					continue
				}
				e.st.Acquire(nd.host, p.Assignments)
				nd.held = append(nd.held, p.Assignments...)
				e.used["memory_gb"] += float64(want-have) * blockGB
			case want < have:
				e.st.Release(nd.host, nd.held[want:])
				nd.held = nd.held[:want]
				e.used["memory_gb"] -= float64(have-want) * blockGB
			}
		}
		e.notePeak()
		if progress != nil {
			progress(s+1, d.steps)
		}
	}
	e.setTime(float64(d.steps) * d.stepLen)
	e.sample(e.now)
	// Measured from the generated series, not assumed.
	var sumAvg, peakRatio float64
	for i := range n {
		avg := 0.0
		for _, v := range d.gb[i] {
			avg += v
		}
		avg /= float64(d.steps)
		sumAvg += avg
		peakRatio += d.nodePeak[i] / avg
		dem.SumOfPeaksGB += d.nodePeak[i]
	}
	dem.NodePeakToAverage = peakRatio / float64(n)
	dem.AggPeakToAverage = dem.AggregatePeakGB / sumAvg
	dem.PoolSavingRatio = 1 - dem.AggregatePeakGB/dem.SumOfPeaksGB
	e.demand = dem
	return nil
}
