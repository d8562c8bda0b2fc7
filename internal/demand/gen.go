package demand

import (
	"fmt"
	"math"
	"math/rand/v2"
)

// The generators below make synthetic traces, deterministic by seed: the
// same options give the same trace on every platform. Their options
// structs' zero values mean the defaults, named in the field comments.
// Values are rounded to 10^-4 GiB so that the files stay readable.

// GiraphOptions shapes Giraph's trace. Zero fields take the defaults.
type GiraphOptions struct {
	Seed      int64
	Nodes     int     // workers; default 50 (P0 §9)
	Interval  float64 // seconds between samples; default 5
	Duration  float64 // seconds of the run; default 3600
	Superstep float64 // seconds per superstep; default 150
	// NodeAverageGiB is a node's typical mean demand over the run
	// (each node's is it times its partition's relative size, log-normal
	// with σ 0.15); default 32.
	NodeAverageGiB float64
	// NodePeakToAverage is every node's peak:average; default 2.78 (P0 §9).
	NodePeakToAverage float64
	// AggregatePeakToAverage is the peak:average of the sum over nodes;
	// default 1.68 (P0 §9). It must lie between 1 and NodePeakToAverage.
	AggregatePeakToAverage float64
}

func (o *GiraphOptions) defaults() {
	setDefault(&o.Nodes, 50)
	setDefault(&o.Interval, 5)
	setDefault(&o.Duration, 3600)
	setDefault(&o.Superstep, 150)
	setDefault(&o.NodeAverageGiB, 32)
	setDefault(&o.NodePeakToAverage, 2.78)
	setDefault(&o.AggregatePeakToAverage, 1.68)
}

// Giraph generates P0 §9's observation of Giraph running TopKPageRank on
// 50 nodes: each node's memory peaks at 2.78 times its average while the
// sum over nodes peaks at only 1.68 times its average, because nodes do
// not peak together.
//
// The run loads the graph (memory rises to the node's partition over the
// first 8% of the run, at least one superstep), then runs supersteps. In
// each, a node's message store grows, faster and faster, over the first
// 70% of the superstep, is freed over the next 10% (the barrier and a
// garbage collection), and the node computes for the rest. How much a node
// receives varies from superstep to superstep (a log-normal factor) and
// decays slowly as PageRank converges. Nodes are out of phase: partition
// skew and garbage collection timing shift each node's cycle by up to one
// superstep. On top comes slowly varying multiplicative noise (an AR(1)
// process, 3%) and a little white noise (1%).
//
// Each node's series is then scaled and offset (the offset being the JVM's
// resident base) to mean NodeAverageGiB and peak NodePeakToAverage times
// that, measured on the samples. The phase spread is found by bisection so
// that the aggregate's peak:average measured on the samples is
// AggregatePeakToAverage within 0.1%. The result is forecastable: each
// ramp lasts many samples (21 of a superstep's 30 at the defaults) and
// repeats every superstep.
func Giraph(o GiraphOptions) (*Trace, error) {
	o.defaults()
	if err := checkGrid(o.Interval, o.Duration); err != nil {
		return nil, err
	}
	load := max(o.Superstep, 0.08*o.Duration)
	steps := int(math.Floor((o.Duration-load)/o.Superstep)) - 1
	switch {
	case o.Nodes < 2:
		return nil, fmt.Errorf("giraph: %d nodes: want at least 2 (one node's aggregate is the node)", o.Nodes)
	case !(o.Superstep >= 4*o.Interval):
		return nil, fmt.Errorf("giraph: superstep %g s: want at least 4 intervals (%g s)", o.Superstep, 4*o.Interval)
	case steps < 2:
		return nil, fmt.Errorf("giraph: a run of %g s holds %d supersteps of %g s after loading: want at least 2", o.Duration, max(steps, 0), o.Superstep)
	case !(o.NodeAverageGiB > 0) || math.IsInf(o.NodeAverageGiB, 0):
		return nil, fmt.Errorf("giraph: node average %g GiB: want > 0", o.NodeAverageGiB)
	case !(o.NodePeakToAverage > 1) || o.NodePeakToAverage > 10:
		return nil, fmt.Errorf("giraph: node peak:average %g: want more than 1, at most 10", o.NodePeakToAverage)
	case !(o.AggregatePeakToAverage > 1) || !(o.AggregatePeakToAverage < o.NodePeakToAverage):
		return nil, fmt.Errorf("giraph: aggregate peak:average %g: want between 1 and the node's %g", o.AggregatePeakToAverage, o.NodePeakToAverage)
	}
	rng := rand.New(rand.NewPCG(uint64(o.Seed), 0x6769726170682d31))
	n := int(math.Floor(o.Duration/o.Interval)) + 1
	type node struct {
		graph    float64   // partition size, relative
		messages float64   // message store at its peak, relative to graph
		weight   []float64 // per superstep
		phase    float64   // fraction of a superstep, before spreading
		noise    []float64 // multiplicative, per sample
		white    []float64 // additive, per sample
	}
	nodes := make([]node, o.Nodes)
	perm := rng.Perm(o.Nodes)
	for i := range nodes {
		nd := &nodes[i]
		nd.graph = math.Exp(0.15 * rng.NormFloat64())
		// The message store's peak over the graph grows with the node
		// ratio wanted, so that an offset ≥ 0 reaches it (checked below).
		nd.messages = 1.6 * o.NodePeakToAverage * math.Exp(0.1*rng.NormFloat64())
		nd.weight = make([]float64, steps)
		for k := range nd.weight {
			nd.weight[k] = (1 - 0.3*float64(k)/float64(steps)) * math.Exp(0.2*rng.NormFloat64())
		}
		nd.phase = (float64(perm[i]) + rng.Float64()) / float64(o.Nodes)
		nd.noise = ar1(rng, n, 0.9, 0.03)
		nd.white = make([]float64, n)
		for k := range nd.white {
			nd.white[k] = 0.01 * rng.NormFloat64()
		}
	}
	// shape is node i's demand at time t before scaling, with the phases
	// spread over the fraction spread of a superstep.
	shape := func(nd *node, k int, spread float64) float64 {
		t := float64(k) * o.Interval
		g := nd.graph * smoothstep(t/load)
		u := (t - load - spread*nd.phase*o.Superstep) / o.Superstep
		step := int(math.Floor(u))
		m := 0.0
		if u >= 0 && step < steps {
			f := u - float64(step)
			switch {
			case f < 0.7:
				m = (f / 0.7) * (f / 0.7)
			case f < 0.8:
				m = (0.8 - f) / 0.1
			}
			m *= nd.weight[step] * nd.messages * nd.graph
		}
		return max(0, (g+m)*(1+nd.noise[k])+nd.white[k]*nd.graph)
	}
	// A node whose shape peaks too little for an offset ≥ 0 to reach the
	// ratio gets a bigger message store (it then peaks more, relative to
	// its average).
	for i := range nodes {
		for try := 0; ; try++ {
			low := math.Inf(1)
			for _, spread := range []float64{0, 0.5, 1} {
				x := make([]float64, n)
				for k := range x {
					x[k] = shape(&nodes[i], k, spread)
				}
				low = min(low, PeakToAverage(x))
			}
			if low >= 1.05*o.NodePeakToAverage || try == 8 {
				break
			}
			nodes[i].messages *= 1.5
		}
	}
	build := func(spread float64) (*Trace, error) {
		tr := &Trace{Interval: o.Interval, Entities: make([]Series, o.Nodes)}
		for i := range nodes {
			x := make([]float64, n)
			for k := range x {
				x[k] = shape(&nodes[i], k, spread)
			}
			y, err := scaleTo(x, o.NodeAverageGiB*nodes[i].graph, o.NodePeakToAverage)
			if err != nil {
				return nil, fmt.Errorf("giraph: node %d: %w", i, err)
			}
			tr.Entities[i] = Series{Entity: entityName("node", i, o.Nodes), MemoryGiB: y}
		}
		return tr, nil
	}
	aggregate := func(tr *Trace) float64 { _, agg := tr.Aggregate(); return PeakToAverage(agg) }
	lo, hi := 0.0, 1.0
	tlo, err := build(lo)
	if err != nil {
		return nil, err
	}
	thi, err := build(hi)
	if err != nil {
		return nil, err
	}
	want := o.AggregatePeakToAverage
	alo, ahi := aggregate(tlo), aggregate(thi)
	if !(alo >= want && ahi <= want) {
		return nil, fmt.Errorf("giraph: aggregate peak:average %g out of reach with %d nodes (%.3g in phase, %.3g spread over a superstep)",
			want, o.Nodes, alo, ahi)
	}
	best, bestErr := thi, math.Abs(ahi-want)
	for range 60 {
		mid := (lo + hi) / 2
		tr, err := build(mid)
		if err != nil {
			return nil, err
		}
		a := aggregate(tr)
		if e := math.Abs(a - want); e < bestErr {
			best, bestErr = tr, e
		}
		if bestErr <= 1e-3*want {
			break
		}
		if a > want {
			lo = mid
		} else {
			hi = mid
		}
	}
	if bestErr > 1e-3*want {
		return nil, fmt.Errorf("giraph: aggregate peak:average %g reached only within %.2g", want, bestErr)
	}
	return best, nil
}

// scaleTo returns a + b·x, rounded to 10^-4, with mean mean and
// peak:average ratio: a ≥ 0 is the resident base. x must be non-negative
// with a peak:average of at least ratio.
func scaleTo(x []float64, mean, ratio float64) ([]float64, error) {
	peak, mu := math.Inf(-1), 0.0
	for _, v := range x {
		peak = max(peak, v)
		mu += v
	}
	mu /= float64(len(x))
	if !(mu > 0) || peak < ratio*mu {
		return nil, fmt.Errorf("its shape peaks at only %.3g times its average, below %g", peak/mu, ratio)
	}
	// a + b·peak = ratio·(a + b·mu) and a + b·mu = mean.
	a := (peak - ratio*mu) / (ratio - 1)
	b := mean / (mu + a)
	a *= b
	y := make([]float64, len(x))
	for k, v := range x {
		y[k] = round4(a + b*v)
	}
	return y, nil
}

// DiurnalOptions shapes Diurnal's trace. Zero fields take the defaults.
type DiurnalOptions struct {
	Seed     int64
	Entities int     // default 20
	Interval float64 // seconds between samples; default 300
	Duration float64 // seconds; default 7 days
	MeanGiB  float64 // typical mean demand of an entity; default 16
	// Amplitude is the typical daily swing as a fraction of the mean
	// (each entity's varies by ±40% of it, at most 0.95); default 0.5.
	Amplitude float64
	// Noise is the standard deviation of the multiplicative noise;
	// default 0.05.
	Noise float64
}

func (o *DiurnalOptions) defaults() {
	setDefault(&o.Entities, 20)
	setDefault(&o.Interval, 300)
	setDefault(&o.Duration, 7*86400)
	setDefault(&o.MeanGiB, 16)
	setDefault(&o.Amplitude, 0.5)
	setDefault(&o.Noise, 0.05)
}

// Diurnal generates services whose demand follows the day: a sinusoid with
// a period of 24 hours and a smaller second harmonic (a morning and an
// evening shoulder), peaking in the afternoon of each entity's own time
// zone (peaks spread over ±4 hours), 20% lower on days 6 and 7 of each
// week (changing over the 6 hours around midnight), times slowly varying noise (AR(1)). Each entity's mean is the
// typical mean times a log-normal factor (σ 0.3).
func Diurnal(o DiurnalOptions) (*Trace, error) {
	o.defaults()
	if err := checkGrid(o.Interval, o.Duration); err != nil {
		return nil, err
	}
	if err := checkCommon("diurnal", o.Entities, o.MeanGiB, o.Noise); err != nil {
		return nil, err
	}
	if !(o.Amplitude >= 0 && o.Amplitude < 1) {
		return nil, fmt.Errorf("diurnal: amplitude %g: want at least 0, below 1", o.Amplitude)
	}
	rng := rand.New(rand.NewPCG(uint64(o.Seed), 0x646975726e616c31))
	n := int(math.Floor(o.Duration/o.Interval)) + 1
	tr := &Trace{Interval: o.Interval, Entities: make([]Series, o.Entities)}
	const day = 86400.0
	for i := range tr.Entities {
		mean := o.MeanGiB * math.Exp(0.3*rng.NormFloat64())
		amp := min(0.95, o.Amplitude*(0.6+0.8*rng.Float64()))
		peak := (15 + 8*(rng.Float64()-0.5)) * 3600 // seconds after midnight
		noise := ar1(rng, n, 0.95, o.Noise)
		y := make([]float64, n)
		for k := range y {
			t := float64(k) * o.Interval
			phase := 2 * math.Pi * (t - peak) / day
			cycle := (math.Cos(phase) + 0.25*math.Cos(2*phase)) / 1.25
			week := 1 - 0.2*weekend(t/day)
			y[k] = round4(max(0, mean*week*(1+amp*cycle)*(1+noise[k])))
		}
		tr.Entities[i] = Series{Entity: entityName("svc", i, o.Entities), MemoryGiB: y}
	}
	return tr, nil
}

// BurstyOptions shapes Bursty's trace. Zero fields take the defaults.
type BurstyOptions struct {
	Seed     int64
	Entities int     // default 20
	Interval float64 // seconds between samples; default 10
	Duration float64 // seconds; default 6 hours
	BaseGiB  float64 // typical base level; default 4
	// BurstsPerHour is the mean rate of bursts per entity; default 2.
	BurstsPerHour float64
	// BurstFactor is a typical burst's peak over the base level (each
	// burst's varies from half to 1.5 times it); default 4.
	BurstFactor float64
	// Noise is the standard deviation of the multiplicative noise;
	// default 0.03.
	Noise float64
}

func (o *BurstyOptions) defaults() {
	setDefault(&o.Entities, 20)
	setDefault(&o.Interval, 10)
	setDefault(&o.Duration, 6*3600)
	setDefault(&o.BaseGiB, 4)
	setDefault(&o.BurstsPerHour, 2)
	setDefault(&o.BurstFactor, 4)
	setDefault(&o.Noise, 0.03)
}

// Bursty generates entities idling at a base level (each the typical base
// times a log-normal factor, σ 0.3) with bursts at random times (a Poisson
// process): a burst ramps up linearly over 2 to 6 samples, holds for 5 to
// 40 samples, then decays exponentially with a time constant of 3 to 15
// samples. Bursts that overlap add up. Slowly varying multiplicative
// noise (AR(1)) comes on top.
func Bursty(o BurstyOptions) (*Trace, error) {
	o.defaults()
	if err := checkGrid(o.Interval, o.Duration); err != nil {
		return nil, err
	}
	if err := checkCommon("bursty", o.Entities, o.BaseGiB, o.Noise); err != nil {
		return nil, err
	}
	switch {
	case !(o.BurstsPerHour >= 0) || math.IsInf(o.BurstsPerHour, 0):
		return nil, fmt.Errorf("bursty: %g bursts per hour: want a finite number ≥ 0", o.BurstsPerHour)
	case !(o.BurstFactor >= 1) || math.IsInf(o.BurstFactor, 0):
		return nil, fmt.Errorf("bursty: burst factor %g: want at least 1", o.BurstFactor)
	}
	rng := rand.New(rand.NewPCG(uint64(o.Seed), 0x6275727374793031))
	n := int(math.Floor(o.Duration/o.Interval)) + 1
	tr := &Trace{Interval: o.Interval, Entities: make([]Series, o.Entities)}
	perSample := o.BurstsPerHour * o.Interval / 3600
	for i := range tr.Entities {
		base := o.BaseGiB * math.Exp(0.3*rng.NormFloat64())
		extra := make([]float64, n)
		if perSample > 0 {
			for k := rng.ExpFloat64() / perSample; k < float64(n); k += rng.ExpFloat64() / perSample {
				height := base * (o.BurstFactor - 1) * (0.5 + rng.Float64())
				ramp := 2 + rng.IntN(5)
				hold := 5 + rng.IntN(36)
				tau := 3 + 12*rng.Float64()
				start := int(k)
				for j := 0; start+j < n; j++ {
					var v float64
					switch {
					case j < ramp:
						v = height * float64(j+1) / float64(ramp)
					case j < ramp+hold:
						v = height
					default:
						v = height * math.Exp(-float64(j-ramp-hold+1)/tau)
						if float64(j-ramp-hold) > 5*tau {
							v = 0
						}
					}
					if v == 0 {
						break
					}
					extra[start+j] += v
				}
			}
		}
		noise := ar1(rng, n, 0.9, o.Noise)
		y := make([]float64, n)
		for k := range y {
			y[k] = round4(max(0, (base+extra[k])*(1+noise[k])))
		}
		tr.Entities[i] = Series{Entity: entityName("job", i, o.Entities), MemoryGiB: y}
	}
	return tr, nil
}

// weekend is 1 on days 5 and 6 of each week (counting from 0) and 0 on
// the others, changing smoothly over the 6 hours around midnight.
func weekend(days float64) float64 {
	d := math.Mod(days, 7)
	if d < 0.5 {
		d += 7
	}
	return smoothstep((d-4.875)/0.25) - smoothstep((d-6.875)/0.25)
}

// ar1 returns n samples of x[k] = phi·x[k-1] + e with a stationary
// standard deviation of sigma, clamped to ±3 sigma (and above -0.9, so
// that 1+x stays positive).
func ar1(rng *rand.Rand, n int, phi, sigma float64) []float64 {
	x := make([]float64, n)
	innov := sigma * math.Sqrt(1-phi*phi)
	v := sigma * rng.NormFloat64()
	for k := range x {
		if k > 0 {
			v = phi*v + innov*rng.NormFloat64()
		}
		x[k] = max(-0.9, min(3*sigma, max(-3*sigma, v)))
	}
	return x
}

// smoothstep rises from 0 at x ≤ 0 to 1 at x ≥ 1, with zero slope at both
// ends.
func smoothstep(x float64) float64 {
	x = max(0, min(1, x))
	return x * x * (3 - 2*x)
}

func round4(v float64) float64 { return math.Round(v*1e4) / 1e4 }

// entityName is prefix-NN, zero-padded to the width of count-1.
func entityName(prefix string, i, count int) string {
	return fmt.Sprintf("%s-%0*d", prefix, len(fmt.Sprint(max(count-1, 0))), i)
}

func setDefault[T int | float64](v *T, def T) {
	if *v == 0 {
		*v = def
	}
}

// checkGrid checks a generator's interval and duration: an interval that
// a trace file can carry and at least two samples.
func checkGrid(interval, duration float64) error {
	switch {
	case !(interval > 0) || math.IsInf(interval, 0) || interval != roundInterval(interval):
		return fmt.Errorf("interval %g s: want a positive number of at most 6 significant digits", interval)
	case !(duration >= interval) || duration/interval > DefaultMaxRows:
		return fmt.Errorf("duration %g s: want at least one interval (%g s) and at most %d samples", duration, interval, DefaultMaxRows)
	}
	return nil
}

func checkCommon(kind string, entities int, level, noise float64) error {
	switch {
	case entities < 1 || entities > DefaultMaxEntities:
		return fmt.Errorf("%s: %d entities: want 1 to %d", kind, entities, DefaultMaxEntities)
	case !(level > 0) || math.IsInf(level, 0):
		return fmt.Errorf("%s: level %g GiB: want > 0", kind, level)
	case !(noise >= 0 && noise <= 0.3):
		return fmt.Errorf("%s: noise %g: want 0 to 0.3", kind, noise)
	}
	return nil
}

// Kinds lists the generators Generate knows.
var Kinds = []string{"giraph", "diurnal", "bursty"}

// GenerateOptions are the options every generator shares, for Generate;
// zero fields take the generator's defaults.
type GenerateOptions struct {
	Seed     int64
	Entities int
	Interval float64 // seconds
	Duration float64 // seconds
}

// Generate runs the generator named kind (one of Kinds) with o and the
// generator's defaults for everything else.
func Generate(kind string, o GenerateOptions) (*Trace, error) {
	switch kind {
	case "giraph":
		return Giraph(GiraphOptions{Seed: o.Seed, Nodes: o.Entities, Interval: o.Interval, Duration: o.Duration})
	case "diurnal":
		return Diurnal(DiurnalOptions{Seed: o.Seed, Entities: o.Entities, Interval: o.Interval, Duration: o.Duration})
	case "bursty":
		return Bursty(BurstyOptions{Seed: o.Seed, Entities: o.Entities, Interval: o.Interval, Duration: o.Duration})
	}
	return nil, fmt.Errorf("unknown kind %q: want one of %v", kind, Kinds)
}
