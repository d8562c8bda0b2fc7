package sim

import (
	"container/heap"
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sort"
	"strconv"
	"time"

	"rackpool/internal/inventory"
	"rackpool/internal/schedule"
	"rackpool/internal/topology"
	"rackpool/internal/units"
)

// Progress is told how far a run is: done of total requests.
type Progress func(done, total int)

// Run simulates c: it builds the topology, produces the workload, and
// replays it in virtual time through the live scheduler
// (schedule.Scheduler.Place on a schedule.State, exactly as the control
// plane places compositions). It stops early, with ctx's error, when ctx
// is done.
func Run(ctx context.Context, c Config, progress Progress) (*Result, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	top, err := Build(&c)
	if err != nil {
		return nil, err
	}
	var reqs []Request
	var demand *giraphDemand
	switch c.Workload.Kind {
	case WorkloadMONet:
		reqs = GenerateMONet(c.Workload, c.Seed)
	case WorkloadTrace:
		reqs, err = ReadTrace(c.Workload.Trace)
		if err != nil {
			return nil, err
		}
	case WorkloadGiraph:
		if c.Workload.DemandTrace != "" {
			if demand, err = readDemand(c.Workload.DemandTrace); err != nil {
				return nil, err
			}
		} else {
			demand = generateGiraph(c.Workload, c.Seed)
		}
	}
	e := newEngine(&c, top)
	start := time.Now()
	if demand != nil {
		err = e.runDemand(ctx, demand, progress)
	} else {
		err = e.run(ctx, reqs, progress)
	}
	if err != nil {
		return nil, err
	}
	return e.result(time.Since(start)), nil
}

// engine is one run's state: the scheduler and its State, the departure
// queue, and the accumulators behind the metrics.
type engine struct {
	c     *Config
	top   *topology.Topology
	sched *schedule.Scheduler
	st    *schedule.State
	now   float64
	deps  departures
	seq   int

	// Capacity and use per resource type, and their integrals over time.
	capacity map[string]float64
	used     map[string]float64
	area     map[string]float64
	peak     map[string]float64
	lastT    float64
	firstT   float64
	running  int

	// Optical ports carrying circuits, and the integral of their count.
	portW       float64
	installed   int
	activePorts int
	activeArea  float64
	activePeak  int
	circuitHops map[*inventory.HostPort]int

	requests, accepted int
	reasons            map[string]int
	decisions          int
	hopCount           map[int]int
	rtts               []float64
	hops               []int
	rttSeen            int
	rng                *rand.Rand
	slowdowns          []float64

	// For explaining rejections (why): an empty state, built on first
	// use, and the reason of each share no host could ever take.
	empty *schedule.State
	never map[schedule.Share]string

	demand      *Demand
	acceptedIDs []string
	samples     []Sample
	sampleStep  float64
	nextSample  float64
	endHint     float64
}

type departure struct {
	t    float64
	seq  int
	plan *schedule.Plan
	req  *Request
}

type departures []departure

func (d departures) Len() int { return len(d) }
func (d departures) Less(i, j int) bool {
	if d[i].t != d[j].t {
		return d[i].t < d[j].t
	}
	return d[i].seq < d[j].seq
}
func (d departures) Swap(i, j int) { d[i], d[j] = d[j], d[i] }
func (d *departures) Push(x any)   { *d = append(*d, x.(departure)) }
func (d *departures) Pop() any {
	old := *d
	x := old[len(old)-1]
	*d = old[:len(old)-1]
	return x
}

// maxLatencySamples bounds the round-trip samples kept for the CDF
// (reservoir sampling beyond it); hop shares are counted exactly.
const maxLatencySamples = 200_000

func newEngine(c *Config, top *topology.Topology) *engine {
	s := schedule.New(top)
	s.Policy = c.Policy
	e := &engine{
		c: c, top: top, sched: s, st: schedule.NewState(top),
		capacity: map[string]float64{}, used: map[string]float64{}, area: map[string]float64{}, peak: map[string]float64{},
		reasons: map[string]int{}, hopCount: map[int]int{}, circuitHops: map[*inventory.HostPort]int{},
		rng: rand.New(rand.NewPCG(uint64(c.Seed), 0x5eed)), portW: c.PortPowerW,
	}
	for _, h := range top.Hosts {
		e.capacity["cores"] += float64(h.Cores)
		if c.Architecture == Traditional {
			e.capacity["memory_gb"] += float64(h.MemoryGiB)
		}
	}
	for _, d := range top.Devices {
		switch d.Kind {
		case inventory.Memory:
			e.capacity["memory_gb"] += float64(d.CapacityBytes) / float64(units.GiB)
		case inventory.GPU:
			e.capacity["gpus"]++
		case inventory.NVMe:
			e.capacity["storage_gb"] += float64(d.CapacityBytes) / 1e9
		}
	}
	for _, f := range top.Fabrics {
		if f.Kind != inventory.OpticalCircuit {
			continue
		}
		for _, sw := range f.Switches {
			e.installed += sw.Ports
		}
	}
	return e
}

// request turns a workload request into the scheduler's request for this
// architecture; ok is false when the architecture cannot serve it at all
// (GPUs or drives asked of traditional servers, which have none).
func (e *engine) request(r *Request) (schedule.Request, bool) {
	ram := int(math.Ceil(r.RAMGB))
	if e.c.Architecture == Traditional {
		if r.GPUs > 0 || r.StorageGB > 0 {
			return schedule.Request{}, false
		}
		return schedule.Request{Share: schedule.Share{Cores: r.Cores, MemoryGiB: ram}}, true
	}
	req := schedule.Request{Share: schedule.Share{Cores: r.Cores}}
	if r.RAMGB > 0 {
		req.Needs = append(req.Needs, schedule.Need{Kind: inventory.Memory, CapacityBytes: int64(ram) * units.GiB, MaxLatencyNS: r.MaxLatencyNS})
	}
	if r.GPUs > 0 {
		req.Needs = append(req.Needs, schedule.Need{Kind: inventory.GPU, Count: r.GPUs})
	}
	if r.StorageGB > 0 {
		req.Needs = append(req.Needs, schedule.Need{Kind: inventory.NVMe, Count: 1, CapacityBytes: int64(r.StorageGB * 1e9)})
	}
	return req, true
}

func (e *engine) run(ctx context.Context, reqs []Request, progress Progress) error {
	if len(reqs) > 0 {
		e.firstT, e.lastT = reqs[0].Arrival, reqs[0].Arrival
		last := reqs[len(reqs)-1]
		meanHold := 0.0
		for i := range reqs {
			meanHold += reqs[i].Hold
		}
		meanHold /= float64(len(reqs))
		e.endHint = last.Arrival + meanHold
	}
	e.startSampling()
	tick := time.Now()
	for i := range reqs {
		r := &reqs[i]
		e.advance(r.Arrival)
		e.place(r)
		if i%4096 == 0 {
			if err := ctx.Err(); err != nil {
				return err
			}
			if progress != nil && time.Since(tick) > 200*time.Millisecond {
				progress(i, len(reqs))
				tick = time.Now()
			}
		}
	}
	e.drain()
	if progress != nil {
		progress(len(reqs), len(reqs))
	}
	return nil
}

// advance moves virtual time to t: departures due by t leave first (a
// release and an arrival at the same instant: the release happens first),
// samples are taken on the way.
func (e *engine) advance(t float64) {
	for len(e.deps) > 0 && e.deps[0].t <= t {
		d := heap.Pop(&e.deps).(departure)
		e.setTime(d.t)
		e.release(d)
	}
	e.setTime(t)
}

func (e *engine) drain() {
	for len(e.deps) > 0 {
		d := heap.Pop(&e.deps).(departure)
		e.setTime(d.t)
		e.release(d)
	}
	e.sample(e.now)
}

// setTime integrates use up to t and takes the samples due before it.
func (e *engine) setTime(t float64) {
	if t < e.now {
		return
	}
	for e.sampleStep > 0 && e.nextSample <= t {
		e.integrate(e.nextSample)
		e.sample(e.nextSample)
		e.nextSample += e.sampleStep
	}
	e.integrate(t)
}

func (e *engine) integrate(t float64) {
	if dt := t - e.now; dt > 0 {
		for k, v := range e.used {
			e.area[k] += v * dt
		}
		e.activeArea += float64(e.activePorts) * dt
	}
	e.now = t
}

func (e *engine) startSampling() {
	e.sampleStep = e.c.SampleEvery
	if e.sampleStep <= 0 {
		span := e.endHint - e.firstT
		if span <= 0 {
			span = 1
		}
		e.sampleStep = span / 1000
	}
	e.now = e.firstT
	e.nextSample = e.firstT
}

func (e *engine) sample(t float64) {
	if len(e.samples) >= 100_000 {
		return
	}
	s := Sample{T: t, Running: e.running, Used: map[string]float64{}, Capacity: map[string]float64{},
		Requests: e.requests, Accepted: e.accepted}
	for k, v := range e.capacity {
		s.Capacity[k] = v
		s.Used[k] = e.used[k]
	}
	s.ActivePowerW = float64(e.activePorts) * e.portW
	e.samples = append(e.samples, s)
}

// place schedules one arrival and, when it fits, commits it and queues
// its departure.
func (e *engine) place(r *Request) {
	e.requests++
	req, ok := e.request(r)
	if !ok {
		e.reasons[ReasonNotOffered]++
		return
	}
	e.decisions++
	plan, err := e.sched.Place(e.st, req)
	if err != nil {
		e.reasons[ReasonInvalid]++
		return
	}
	if plan == nil {
		e.reject(req)
		return
	}
	e.commit(plan, r)
	e.accepted++
	e.acceptedIDs = append(e.acceptedIDs, r.ID)
	e.seq++
	heap.Push(&e.deps, departure{t: e.now + r.Hold, seq: e.seq, plan: plan, req: r})
}

// reject counts a rejection under the reason the scheduler gives for it
// (see why): every rejected request is counted under exactly one.
func (e *engine) reject(req schedule.Request) {
	e.reasons[e.why(req)]++
}

func (e *engine) commit(p *schedule.Plan, r *Request) {
	// Circuits this plan sets up: memory assignments through host ports
	// that carry none yet.
	for _, a := range p.Assignments {
		if a.Port != nil && a.Block.Kind == inventory.Memory && e.st.Circuit(a.Port) == nil {
			if _, ok := e.circuitHops[a.Port]; !ok {
				e.circuitHops[a.Port] = a.Hops
				e.activePorts += 2 * a.Hops
			}
		}
	}
	e.st.Commit(p)
	e.activePeak = max(e.activePeak, e.activePorts)
	e.running++
	e.use(p, r, 1)
	var sum float64
	n := 0
	for _, a := range p.Assignments {
		if a.Block.Kind != inventory.Memory {
			continue
		}
		e.hopCount[a.Hops]++
		e.rttSeen++
		sum += a.RTTNS
		n++
		if len(e.rtts) < maxLatencySamples {
			e.rtts = append(e.rtts, a.RTTNS)
			e.hops = append(e.hops, a.Hops)
		} else if k := e.rng.IntN(e.rttSeen); k < maxLatencySamples {
			e.rtts[k], e.hops[k] = a.RTTNS, a.Hops
		}
	}
	if n > 0 && e.c.LocalNS > 0 {
		e.slowdowns = append(e.slowdowns, e.c.MFP*(sum/float64(n))/e.c.LocalNS)
	}
}

func (e *engine) release(d departure) {
	e.st.Uncommit(d.plan)
	for _, a := range d.plan.Assignments {
		if a.Port == nil || a.Block.Kind != inventory.Memory {
			continue
		}
		if h, ok := e.circuitHops[a.Port]; ok && e.st.Circuit(a.Port) == nil {
			delete(e.circuitHops, a.Port)
			e.activePorts -= 2 * h
		}
	}
	e.running--
	e.use(d.plan, d.req, -1)
}

// use adds (sign 1) or removes (-1) what p holds to the use per type.
func (e *engine) use(p *schedule.Plan, r *Request, sign float64) {
	e.used["cores"] += sign * float64(p.Share.Cores)
	e.used["memory_gb"] += sign * float64(p.Share.MemoryGiB)
	for _, a := range p.Assignments {
		switch a.Block.Kind {
		case inventory.Memory:
			e.used["memory_gb"] += sign * float64(a.Block.CapacityBytes) / float64(units.GiB)
		case inventory.GPU:
			e.used["gpus"] += sign
		case inventory.NVMe:
			e.used["storage_gb"] += sign * float64(a.Block.CapacityBytes) / 1e9
		}
	}
	if sign > 0 {
		e.notePeak()
	}
}

// notePeak records the current use in the peak utilisation per type.
func (e *engine) notePeak() {
	for k, v := range e.used {
		if c := e.capacity[k]; c > 0 {
			e.peak[k] = max(e.peak[k], v/c)
		}
	}
}

func (e *engine) result(wall time.Duration) *Result {
	c := e.c
	s := Summary{
		Name: c.Name, Seed: c.Seed, Architecture: c.Architecture, Policy: string(c.Policy),
		Requests: e.requests, Accepted: e.accepted, Rejected: e.requests - e.accepted,
		MeanUtilisation: map[string]float64{}, PeakUtilisation: map[string]float64{},
		WallSeconds: wall.Seconds(), VirtualTimeUnits: e.now - e.firstT,
	}
	if s.Policy == "" {
		s.Policy = string(schedule.Locality)
	}
	if c.Architecture == PodPools {
		s.Network = c.Network
	}
	if e.requests > 0 {
		s.AcceptanceRatio = float64(e.accepted) / float64(e.requests)
		s.BlockingRatio = 1 - s.AcceptanceRatio
	}
	if wall > 0 {
		s.DecisionsPerSec = float64(e.decisions) / wall.Seconds()
	}
	if len(e.reasons) > 0 {
		s.Rejections = e.reasons
	}
	span := e.now - e.firstT
	for k, cp := range e.capacity {
		if cp <= 0 {
			continue
		}
		if span > 0 {
			s.MeanUtilisation[k] = e.area[k] / (cp * span)
		}
		s.PeakUtilisation[k] = e.peak[k]
	}
	total := 0
	for _, n := range e.hopCount {
		total += n
	}
	if total > 0 {
		s.HopShare = map[string]float64{}
		for h, n := range e.hopCount {
			s.HopShare[strconv.Itoa(h)] = float64(n) / float64(total)
		}
		sorted := slices.Clone(e.rtts)
		sort.Float64s(sorted)
		sum := 0.0
		for _, v := range sorted {
			sum += v
		}
		s.RTTMeanNS = sum / float64(len(sorted))
		s.RTTP50NS = quantile(sorted, 0.50)
		s.RTTP99NS = quantile(sorted, 0.99)
	}
	if e.installed > 0 {
		p := &Power{PerPortW: e.portW, InstalledPorts: e.installed, InstalledW: float64(e.installed) * e.portW,
			ActivePeakW: float64(e.activePeak) * e.portW}
		if span > 0 {
			p.ActiveMeanW = e.activeArea / span * e.portW
		}
		s.SwitchPowerW = p
	}
	s.Cost = e.cost(s.MeanUtilisation)
	if len(e.slowdowns) > 0 {
		sorted := slices.Clone(e.slowdowns)
		sort.Float64s(sorted)
		sum := 0.0
		for _, v := range sorted {
			sum += v
		}
		s.Slowdown = &Slowdown{MFP: c.MFP, LocalNS: c.LocalNS, MeanRemoteNS: s.RTTMeanNS, Mean: sum / float64(len(sorted)), P99: quantile(sorted, 0.99)}
	}
	s.Demand = e.demand
	return &Result{Summary: s, Samples: e.samples, RTTNS: e.rtts, Hops: e.hops, AcceptedIDs: e.acceptedIDs}
}

// cost is P0 Eq. 1, C_total = Σ N_i·C_i / U_i: N_i is what the workload
// used of type i on average (the work delivered), C_i its unit cost and
// U_i the measured mean utilisation, so N_i/U_i is the capacity paid for
// to deliver it.
func (e *engine) cost(util map[string]float64) *Cost {
	c := &Cost{UnitCost: map[string]float64{}, Units: map[string]float64{}, Utilisation: map[string]float64{}}
	used := 0.0
	for k, u := range util {
		if u <= 0 {
			continue
		}
		unit := e.c.UnitCost[k]
		n := u * e.capacity[k]
		c.UnitCost[k], c.Units[k], c.Utilisation[k] = unit, n, u
		c.Total += n * unit / u
		used += n * unit
	}
	if len(c.Units) == 0 {
		return nil
	}
	if used > 0 {
		c.PerUsedUnit = c.Total / used
	}
	return c
}

func quantile(sorted []float64, q float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	i := int(math.Ceil(q*float64(len(sorted)))) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

// String describes a request for error messages.
func (r *Request) String() string {
	return fmt.Sprintf("%s (%d cores, %g GB)", r.ID, r.Cores, r.RAMGB)
}
