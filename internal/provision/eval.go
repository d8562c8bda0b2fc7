package provision

import (
	"errors"
	"fmt"
	"math"
	"slices"

	"rackpool/internal/demand"
)

// Series is one consumer's demand at a constant interval.
type Series struct {
	Entity string
	Start  float64 // seconds, the time of Values[0]
	Values []float64
}

// Input is what an evaluation replays: every consumer's demand for one
// resource, sampled every Interval seconds.
type Input struct {
	Interval float64
	Series   []Series
}

// Summary is an evaluation's outcome (summary.json). Quantities are in the
// resource's unit (GiB for memory) times hours.
type Summary struct {
	Policy Policy `json:"policy"`
	// Resource is the trace column evaluated (memory unless told).
	Resource  string `json:"resource,omitempty"`
	Entities  int    `json:"entities"`
	Intervals int    `json:"intervals"`
	// IntervalSeconds is the sampling interval; Window and Horizon are the
	// rules' observation and prediction windows in intervals.
	IntervalSeconds float64 `json:"interval_s"`
	Window          int     `json:"window"`
	Horizon         int     `json:"horizon"`
	Granule         float64 `json:"granule"`
	Headroom        float64 `json:"headroom,omitempty"`

	ProvisionedGiBHours float64 `json:"provisioned_gib_hours"`
	DemandGiBHours      float64 `json:"demand_gib_hours"`
	// StaticPeakGiBHours holds each entity at its own peak for its
	// lifetime.
	StaticPeakGiBHours float64 `json:"static_peak_gib_hours"`
	// SavingVsStaticPeak is 1 − provisioned / static peak.
	SavingVsStaticPeak float64 `json:"saving_vs_static_peak"`
	// ShortIntervalFraction is the share of entity-intervals with less
	// provisioned than demanded.
	ShortIntervalFraction float64 `json:"short_interval_fraction"`
	ShortfallGiBHours     float64 `json:"shortfall_gib_hours"`
	// ReconfigurationsPerHour counts level changes (grow or shrink) of all
	// entities per hour of the trace's span.
	ReconfigurationsPerHour float64 `json:"reconfigurations_per_hour"`
	Reconfigurations        int     `json:"reconfigurations"`
	SpanHours               float64 `json:"span_hours"`
	// Fallbacks counts predictive decisions a simpler model answered
	// (too little history, a constant window).
	Fallbacks int `json:"fallbacks,omitempty"`
}

// EntityResult is one entity's demand and provisioned level, step by step.
type EntityResult struct {
	Entity      string
	Start       float64
	Demand      []float64
	Provisioned []float64
}

// Result is an evaluation: the summary and every entity's levels.
type Result struct {
	Summary  Summary
	Entities []EntityResult
}

// Evaluate replays the input under the policy. Levels are decided at the
// end of each interval from the demand observed up to it and are in force
// Lead intervals later; until the first decision is, a consumer holds its
// first interval's demand (the size it asks for when it is composed),
// except under StaticPeak and Oracle. Live policies see only the past: the
// level of interval t is decided from Values[:t-Lead+1].
func Evaluate(in Input, policy Policy, rules Rules) (*Result, error) {
	if _, err := ParsePolicy(string(policy)); err != nil {
		return nil, err
	}
	r, err := rules.WithDefaults()
	if err != nil {
		return nil, err
	}
	if !(in.Interval > 0) || math.IsInf(in.Interval, 0) {
		return nil, fmt.Errorf("interval %v must be a positive number of seconds", in.Interval)
	}
	if len(in.Series) == 0 {
		return nil, errors.New("no entities to evaluate")
	}
	var dec *Decider
	if policy == Reactive || policy == Predictive {
		if dec, err = NewDecider(policy, r); err != nil {
			return nil, err
		}
	}
	hours := in.Interval / 3600
	s := Summary{Policy: policy, Entities: len(in.Series), IntervalSeconds: in.Interval,
		Window: r.Window, Horizon: r.Horizon, Granule: r.Granule}
	if policy == Reactive {
		s.Headroom = r.Headroom
	}
	res := &Result{Entities: make([]EntityResult, len(in.Series))}
	first, last := math.Inf(1), math.Inf(-1)
	short := 0
	for i, se := range in.Series {
		y := se.Values
		if len(y) == 0 {
			return nil, fmt.Errorf("entity %q has no samples", se.Entity)
		}
		first = min(first, se.Start)
		last = max(last, se.Start+float64(len(y))*in.Interval)
		peak := 0.0
		for _, v := range y {
			if v < 0 || math.IsNaN(v) || math.IsInf(v, 0) {
				return nil, fmt.Errorf("entity %q: demand %v is not a non-negative number", se.Entity, v)
			}
			peak = max(peak, v)
		}
		lv := make([]float64, len(y))
		switch policy {
		case StaticPeak:
			for t := range lv {
				lv[t] = r.round(peak)
			}
		case Oracle:
			for t := range lv {
				lv[t] = r.round(y[t])
			}
		default:
			// The decision made from y[:k] is in force from interval
			// k+Lead-1; until the first is, the consumer holds what it
			// asked for at the start.
			L := r.Lead
			for t := 0; t < min(L, len(y)); t++ {
				lv[t] = r.round(y[0])
			}
			held := 0
			for t := L; t < len(y); t++ {
				d, err := dec.Decide(lv[t-1], held, y[:t-L+1])
				if err != nil {
					return nil, fmt.Errorf("entity %q, interval %d: %w", se.Entity, t, err)
				}
				if d.Fallback != "" {
					s.Fallbacks++
				}
				lv[t] = d.To
				if d.To == lv[t-1] {
					held++
				} else {
					held = 0
				}
			}
		}
		for t := range y {
			s.DemandGiBHours += y[t] * hours
			s.ProvisionedGiBHours += lv[t] * hours
			if lv[t] < y[t] {
				short++
				s.ShortfallGiBHours += (y[t] - lv[t]) * hours
			}
			if t > 0 && lv[t] != lv[t-1] {
				s.Reconfigurations++
			}
		}
		s.StaticPeakGiBHours += peak * float64(len(y)) * hours
		s.Intervals += len(y)
		res.Entities[i] = EntityResult{Entity: se.Entity, Start: se.Start, Demand: y, Provisioned: lv}
	}
	if s.StaticPeakGiBHours > 0 {
		s.SavingVsStaticPeak = 1 - s.ProvisionedGiBHours/s.StaticPeakGiBHours
	}
	s.ShortIntervalFraction = float64(short) / float64(s.Intervals)
	s.SpanHours = (last - first) / 3600
	if s.SpanHours > 0 {
		s.ReconfigurationsPerHour = float64(s.Reconfigurations) / s.SpanHours
	}
	res.Summary = s
	return res, nil
}

// MatchReactive finds the least headroom at which the reactive policy
// provisions at least the given quantity (the predictive policy's, for a
// comparison at equal memory), by bisection to 0.1% of headroom. It
// returns that evaluation; when even a headroom of 10 provisions less, it
// returns that one.
func MatchReactive(in Input, rules Rules, gibHours float64) (*Result, error) {
	eval := func(h float64) (*Result, error) {
		r := rules
		r.Headroom = h
		if h == 0 {
			r.Headroom = 1e-12 // zero means "the default"
		}
		return Evaluate(in, Reactive, r)
	}
	lo, hi := 0.0, 10.0
	best, err := eval(hi)
	if err != nil || best.Summary.ProvisionedGiBHours < gibHours {
		return best, err
	}
	if r, err := eval(lo); err != nil || r.Summary.ProvisionedGiBHours >= gibHours {
		return r, err
	}
	for hi-lo > 1e-3 {
		mid := (lo + hi) / 2
		r, err := eval(mid)
		if err != nil {
			return nil, err
		}
		if r.Summary.ProvisionedGiBHours >= gibHours {
			hi, best = mid, r
		} else {
			lo = mid
		}
	}
	return best, nil
}

// Compare evaluates every policy in the order of Policies. With match set,
// the reactive policy's headroom is the least that provisions as much as
// the predictive policy (MatchReactive), so the two compare at equal
// quantity; otherwise it is the rules'.
func Compare(in Input, rules Rules, match bool) ([]*Result, error) {
	out := make([]*Result, len(Policies))
	pi := slices.Index(Policies, Predictive)
	pr, err := Evaluate(in, Predictive, rules)
	if err != nil {
		return nil, err
	}
	out[pi] = pr
	for i, p := range Policies {
		switch {
		case p == Predictive:
			continue
		case p == Reactive && match:
			out[i], err = MatchReactive(in, rules, pr.Summary.ProvisionedGiBHours)
		default:
			out[i], err = Evaluate(in, p, rules)
		}
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

// AutoGranule is the granule an evaluation uses unless told: 1 (GiB), or,
// for a trace whose largest entity peaks below 16, the largest power of
// two at most a sixteenth of that peak, so a trace of small processes is
// not all rounded up to one unit.
func AutoGranule(in Input) float64 {
	peak := 0.0
	for _, s := range in.Series {
		for _, v := range s.Values {
			peak = max(peak, v)
		}
	}
	if peak >= 16 || peak <= 0 {
		return 1
	}
	return math.Pow(2, math.Floor(math.Log2(peak/16)))
}

// InputOf takes one column of a demand trace: "memory" (memory_gib), "gpus"
// or "io_mbps".
func InputOf(tr *demand.Trace, resource string) (Input, error) {
	in := Input{Interval: tr.Interval}
	if !(tr.Interval > 0) {
		return in, errors.New("the trace has no entity with two samples: nothing to evaluate")
	}
	for _, s := range tr.Entities {
		var v []float64
		switch resource {
		case "memory", "memory_gib":
			v = s.MemoryGiB
		case "gpus":
			v = s.GPUs
		case "io_mbps", "io":
			v = s.IOMBps
		default:
			return in, fmt.Errorf("resource %q: memory, gpus or io_mbps", resource)
		}
		if v == nil {
			return in, fmt.Errorf("resource %s: the trace has no such column", resource)
		}
		in.Series = append(in.Series, Series{Entity: s.Entity, Start: s.Start, Values: v})
	}
	return in, nil
}
