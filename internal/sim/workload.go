package sim

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"

	"rackpool/internal/demand"
	"rackpool/internal/inventory"
	"rackpool/internal/provision"
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

// readDemand reads a demand trace (internal/demand's format) as a
// giraphDemand: one node per entity, one step per interval. Entities that
// start later or end earlier hold nothing outside their samples.
func readDemand(path string) (*giraphDemand, error) {
	tr, err := demand.ReadFile(path)
	if err != nil {
		return nil, err
	}
	if !(tr.Interval > 0) {
		return nil, fmt.Errorf("%s: no entity has two samples", path)
	}
	first, last := math.Inf(1), math.Inf(-1)
	for i := range tr.Entities {
		first = min(first, tr.Entities[i].Start)
		last = max(last, tr.End(&tr.Entities[i]))
	}
	steps := int(math.Round((last-first)/tr.Interval)) + 1
	d := &giraphDemand{steps: steps, stepLen: tr.Interval, gb: make([][]float64, len(tr.Entities)), nodePeak: make([]float64, len(tr.Entities))}
	for i, s := range tr.Entities {
		off := int(math.Round((s.Start - first) / tr.Interval))
		series := make([]float64, steps)
		for k, v := range s.MemoryGiB {
			series[off+k] = v
			d.nodePeak[i] = max(d.nodePeak[i], v)
		}
		d.gb[i] = series
	}
	return d, nil
}

// provisioner decides each node's pooled memory, in blocks, step by step,
// by a provisioning policy (internal/provision).
type provisioner struct {
	policy provision.Policy
	dec    *provision.Decider
	block  float64
	held   []int       // steps each node's level has been held
	hist   [][]float64 // each node's demand so far, in blocks
}

func newProvisioner(policy string, nodes int, blockGB float64) (*provisioner, error) {
	if policy == "" {
		policy = string(provision.Oracle)
	}
	p := &provisioner{policy: provision.Policy(policy), block: blockGB, held: make([]int, nodes), hist: make([][]float64, nodes)}
	if p.policy == provision.Reactive || p.policy == provision.Predictive {
		dec, err := provision.NewDecider(p.policy, provision.Rules{Granule: 1})
		if err != nil {
			return nil, err
		}
		p.dec = dec
	}
	return p, nil
}

// want is node i's level at step s, in blocks, given the blocks it holds
// and its demand series; only the reactive and predictive policies are
// limited to the past (demand before s).
func (p *provisioner) want(i, s, have int, d *giraphDemand) int {
	gb := d.gb[i][s]
	defer func() { p.hist[i] = append(p.hist[i], d.gb[i][s]/p.block) }()
	switch p.policy {
	case provision.StaticPeak:
		return int(math.Ceil(d.nodePeak[i] / p.block))
	case provision.Oracle:
		return int(math.Ceil(gb / p.block))
	}
	if s == 0 {
		return int(math.Ceil(gb / p.block))
	}
	dec, err := p.dec.Decide(float64(have), p.held[i], p.hist[i])
	if err != nil {
		return have
	}
	if int(dec.To) == have {
		p.held[i]++
	} else {
		p.held[i] = 0
	}
	return int(dec.To)
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
	prov, err := newProvisioner(e.c.Workload.Provisioning, n, blockGB)
	if err != nil {
		return err
	}
	dem.Provisioning = string(prov.policy)
	place := func(i int, req schedule.Request) bool {
		e.requests++
		e.decisions++
		p, err := e.sched.Place(e.st, req)
		if err != nil {
			e.reasons[ReasonInvalid]++
			return false
		}
		if p == nil {
			e.reject(req)
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
		want := int64(prov.want(i, 0, 0, d)) * int64(e.c.MemoryBlockGB) * units.GiB
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
			for i := range n {
				dem.ProvisionedGBSteps += math.Ceil(d.nodePeak[i])
				dem.DemandGBSteps += d.gb[i][s]
			}
			e.notePeak()
			continue
		}
		held := 0.0
		for i := range n {
			nd := &nodes[i]
			if nd.plan == nil {
				continue
			}
			have := len(nd.held)
			want := have
			if s > 0 {
				want = prov.want(i, s, have, d)
			}
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
			gb := float64(len(nd.held)) * blockGB
			held += gb
			dem.ProvisionedGBSteps += gb
			dem.DemandGBSteps += d.gb[i][s]
			if gb < d.gb[i][s] {
				dem.ShortNodeSteps++
			}
		}
		dem.PeakProvisionedGB = max(dem.PeakProvisionedGB, held)
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
	dem.ShortNodeStepsRatio = float64(dem.ShortNodeSteps) / float64(n*d.steps)
	if e.c.Architecture == Traditional {
		dem.PeakProvisionedGB = 0
		for i := range n {
			dem.PeakProvisionedGB += math.Ceil(d.nodePeak[i])
		}
	}
	e.demand = dem
	return nil
}
