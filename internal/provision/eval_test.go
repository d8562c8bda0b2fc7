package provision

import (
	"math"
	"math/rand/v2"
	"testing"

	"rackpool/internal/forecast"
)

// ramps is a Giraph-like consumer: supersteps whose memory grows while
// messages accumulate and drops at the barrier, with noise.
func ramps(n int, seed uint64) []float64 {
	rng := rand.New(rand.NewPCG(seed, 1))
	y := make([]float64, n)
	phase := rng.IntN(30)
	for t := range y {
		y[t] = max(0, 10+1.5*float64((t+phase)%30)+rng.NormFloat64()*0.5)
	}
	return y
}

func rampInput(entities, n int) Input {
	in := Input{Interval: 60}
	for i := range entities {
		in.Series = append(in.Series, Series{Entity: string(rune('a' + i)), Values: ramps(n, uint64(i))})
	}
	return in
}

// steep is a ramp too fast for a margin over the last value: 10 GiB to 66
// in 15 steps, then down.
func steep(n int, seed uint64) []float64 {
	rng := rand.New(rand.NewPCG(seed, 2))
	y := make([]float64, n)
	phase := rng.IntN(15)
	for t := range y {
		y[t] = max(0, 10+4*float64((t+phase)%15)+rng.NormFloat64()*0.3)
	}
	return y
}

func TestStaticPeakAndOracle(t *testing.T) {
	in := Input{Interval: 3600, Series: []Series{{Entity: "a", Values: []float64{1, 3.5, 2}}}}
	sp, err := Evaluate(in, StaticPeak, Rules{})
	if err != nil {
		t.Fatal(err)
	}
	s := sp.Summary
	if s.ProvisionedGiBHours != 12 || s.StaticPeakGiBHours != 10.5 || s.DemandGiBHours != 6.5 || s.ShortIntervalFraction != 0 {
		t.Errorf("static peak: %+v (want 12 provisioned: 4 GiB granules for 3 hours)", s)
	}
	or, err := Evaluate(in, Oracle, Rules{})
	if err != nil {
		t.Fatal(err)
	}
	if got := or.Entities[0].Provisioned; got[0] != 1 || got[1] != 4 || got[2] != 2 {
		t.Errorf("oracle levels %v, want 1 4 2", got)
	}
	if or.Summary.Reconfigurations != 2 || or.Summary.ShortfallGiBHours != 0 {
		t.Errorf("oracle: %+v", or.Summary)
	}
}

// TestPoliciesSeeOnlyThePast changes the future of every series and checks
// that no decision up to the change moved.
func TestPoliciesSeeOnlyThePast(t *testing.T) {
	in := rampInput(4, 200)
	for _, p := range []Policy{Reactive, Predictive} {
		base, err := Evaluate(in, p, Rules{Window: 40, Horizon: 3})
		if err != nil {
			t.Fatal(err)
		}
		for _, cut := range []int{10, 60, 150} {
			alt := Input{Interval: in.Interval}
			for _, s := range in.Series {
				v := append([]float64(nil), s.Values...)
				for t := cut; t < len(v); t++ {
					v[t] = v[t]*3 + 50
				}
				alt.Series = append(alt.Series, Series{Entity: s.Entity, Values: v})
			}
			got, err := Evaluate(alt, p, Rules{Window: 40, Horizon: 3})
			if err != nil {
				t.Fatal(err)
			}
			for e := range got.Entities {
				a, b := base.Entities[e].Provisioned, got.Entities[e].Provisioned
				// The level of interval t is decided from Values[:t]: up to
				// and including interval cut nothing may change.
				for i := 0; i <= cut; i++ {
					if a[i] != b[i] {
						t.Fatalf("%s: entity %d interval %d: level %v became %v when the trace changed from interval %d on", p, e, i, a[i], b[i], cut)
					}
				}
				if p == Predictive && cut < 150 && equalTail(a, b, cut+1) {
					t.Errorf("%s: changing the future changed no later decision: the test cannot tell", p)
				}
			}
		}
	}
}

func equalTail(a, b []float64, from int) bool {
	for t := from; t < len(a); t++ {
		if a[t] != b[t] {
			return false
		}
	}
	return true
}

// TestNeverBelowUse: every level holds at least the use observed when it
// was decided.
func TestNeverBelowUse(t *testing.T) {
	in := rampInput(3, 300)
	for _, p := range []Policy{Reactive, Predictive} {
		r, err := Evaluate(in, p, Rules{Granule: 2, Hysteresis: 0.5})
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range r.Entities {
			for i := 1; i < len(e.Demand); i++ {
				if e.Provisioned[i] < e.Demand[i-1] {
					t.Fatalf("%s: interval %d level %v below the use %v seen before it", p, i, e.Provisioned[i], e.Demand[i-1])
				}
				if math.Mod(e.Provisioned[i], 2) != 0 {
					t.Fatalf("%s: level %v is not a whole number of 2-unit granules", p, e.Provisioned[i])
				}
			}
		}
	}
}

// TestPredictiveAheadOfRamps: on ramps a forecast sees the growth coming;
// at the same provisioned quantity the reactive policy falls short more.
func TestPredictiveAheadOfRamps(t *testing.T) {
	in := Input{Interval: 60}
	for i := range 6 {
		in.Series = append(in.Series, Series{Entity: string(rune('a' + i)), Values: steep(600, uint64(i))})
	}
	rules := Rules{Window: 90, Horizon: 2, Forecast: forecast.Config{MaxLag: 16}}
	pr, err := Evaluate(in, Predictive, rules)
	if err != nil {
		t.Fatal(err)
	}
	re, err := MatchReactive(in, rules, pr.Summary.ProvisionedGiBHours)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("predictive %+v", pr.Summary)
	t.Logf("reactive   %+v", re.Summary)
	if re.Summary.ProvisionedGiBHours < pr.Summary.ProvisionedGiBHours {
		t.Fatalf("matching failed: reactive %v < predictive %v", re.Summary.ProvisionedGiBHours, pr.Summary.ProvisionedGiBHours)
	}
	if pr.Summary.ShortfallGiBHours >= re.Summary.ShortfallGiBHours {
		t.Errorf("predictive shortfall %v not below reactive's %v at equal memory", pr.Summary.ShortfallGiBHours, re.Summary.ShortfallGiBHours)
	}
}

func TestEvaluateBadInput(t *testing.T) {
	good := Series{Entity: "a", Values: []float64{1, 2}}
	for name, tc := range map[string]struct {
		in Input
		p  Policy
		r  Rules
	}{
		"no entities":   {Input{Interval: 1}, Predictive, Rules{}},
		"zero interval": {Input{Series: []Series{good}}, Predictive, Rules{}},
		"negative":      {Input{Interval: 1, Series: []Series{{Entity: "a", Values: []float64{1, -2}}}}, Reactive, Rules{}},
		"NaN":           {Input{Interval: 1, Series: []Series{{Entity: "a", Values: []float64{math.NaN()}}}}, Oracle, Rules{}},
		"policy":        {Input{Interval: 1, Series: []Series{good}}, "greedy", Rules{}},
		"window":        {Input{Interval: 1, Series: []Series{good}}, Predictive, Rules{Window: 1}},
		"hysteresis":    {Input{Interval: 1, Series: []Series{good}}, Predictive, Rules{Hysteresis: 1}},
	} {
		if _, err := Evaluate(tc.in, tc.p, tc.r); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}
