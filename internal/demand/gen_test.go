package demand

import (
	"math"
	"reflect"
	"slices"
	"strings"
	"testing"
)

func TestGiraphRatios(t *testing.T) {
	for _, seed := range []int64{1, 2, 3, 42} {
		tr, err := Giraph(GiraphOptions{Seed: seed})
		if err != nil {
			t.Fatal(err)
		}
		if len(tr.Entities) != 50 {
			t.Fatalf("%d nodes, want 50", len(tr.Entities))
		}
		sumMean := 0.0
		for _, s := range tr.Entities {
			if r := PeakToAverage(s.MemoryGiB); math.Abs(r/2.78-1) > 0.01 {
				t.Errorf("seed %d: %s peak:average %.4f, want 2.78 within 1%%", seed, s.Entity, r)
			}
			sumMean += mean(s.MemoryGiB)
		}
		_, agg := tr.Aggregate()
		if r := PeakToAverage(agg); math.Abs(r/1.68-1) > 0.01 {
			t.Errorf("seed %d: aggregate peak:average %.4f, want 1.68 within 1%%", seed, r)
		}
		if avg := sumMean / 50; math.Abs(avg/32-1) > 0.1 {
			t.Errorf("seed %d: mean node average %.2f GiB, want about 32", seed, avg)
		}
	}
}

// TestGiraphIsNotASquarePulse checks the shape: a node's memory rises over
// many consecutive samples (the message phase) instead of jumping.
func TestGiraphIsNotASquarePulse(t *testing.T) {
	tr, err := Giraph(GiraphOptions{Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range tr.Entities[:5] {
		longest, run := 0, 0
		for k := 1; k < s.Len(); k++ {
			if s.MemoryGiB[k] > s.MemoryGiB[k-1] {
				run++
				longest = max(longest, run)
			} else {
				run = 0
			}
		}
		if longest < 10 {
			t.Errorf("%s rises over at most %d consecutive samples, want a ramp of 10 or more", s.Entity, longest)
		}
	}
}

// TestForecastable fits an AR(8) model by least squares on the first half
// of a series and predicts the second half one step ahead: the error must
// be well below the series' own spread, for the Giraph nodes, the Giraph
// aggregate and the other generators.
func TestForecastable(t *testing.T) {
	giraph, err := Giraph(GiraphOptions{Seed: 7})
	if err != nil {
		t.Fatal(err)
	}
	_, agg := giraph.Aggregate()
	diurnal, err := Diurnal(DiurnalOptions{Seed: 7})
	if err != nil {
		t.Fatal(err)
	}
	bursty, err := Bursty(BurstyOptions{Seed: 7})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		series []float64
		max    float64 // RMSE over standard deviation
	}{
		{"giraph node", giraph.Entities[0].MemoryGiB, 0.35},
		{"giraph aggregate", agg, 0.2},
		{"diurnal", diurnal.Entities[0].MemoryGiB, 0.35},
		{"bursty", bursty.Entities[0].MemoryGiB, 0.5},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := arError(tt.series, 8)
			t.Logf("one-step AR(8) RMSE / std = %.3f", got)
			if !(got < tt.max) {
				t.Fatalf("AR(8) one-step error %.3f of the standard deviation, want below %.2f", got, tt.max)
			}
		})
	}
}

func TestGeneratorsBasics(t *testing.T) {
	for _, kind := range Kinds {
		t.Run(kind, func(t *testing.T) {
			o := GenerateOptions{Seed: 5, Entities: 12, Interval: 10, Duration: 4 * 3600}
			tr, err := Generate(kind, o)
			if err != nil {
				t.Fatal(err)
			}
			if err := tr.Validate(); err != nil {
				t.Fatal(err)
			}
			if tr.Interval != 10 || len(tr.Entities) != 12 {
				t.Fatalf("interval %v, %d entities", tr.Interval, len(tr.Entities))
			}
			names := map[string]bool{}
			for _, s := range tr.Entities {
				names[s.Entity] = true
				if s.Start != 0 || s.Len() != 4*360+1 {
					t.Fatalf("%s: start %v, %d samples, want 0 and %d", s.Entity, s.Start, s.Len(), 4*360+1)
				}
				if slices.Min(s.MemoryGiB) < 0 {
					t.Fatalf("%s: negative demand", s.Entity)
				}
				if r := PeakToAverage(s.MemoryGiB); r < 1.1 {
					t.Errorf("%s: peak:average %.3f: flat", s.Entity, r)
				}
			}
			if len(names) != 12 || !names[kind2prefix[kind]+"-00"] {
				t.Fatalf("entity names %v", names)
			}
			roundTrip(t, tr)
			again, err := Generate(kind, o)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(again, tr) {
				t.Fatal("same seed, different trace")
			}
			o.Seed++
			other, err := Generate(kind, o)
			if err != nil {
				t.Fatal(err)
			}
			if reflect.DeepEqual(other, tr) {
				t.Fatal("different seeds, same trace")
			}
		})
	}
	if _, err := Generate("poisson", GenerateOptions{}); err == nil || !strings.Contains(err.Error(), `unknown kind "poisson"`) {
		t.Fatalf("unknown kind: %v", err)
	}
}

var kind2prefix = map[string]string{"giraph": "node", "diurnal": "svc", "bursty": "job"}

func TestDiurnalFollowsTheDay(t *testing.T) {
	tr, err := Diurnal(DiurnalOptions{Seed: 3, Entities: 5})
	if err != nil {
		t.Fatal(err)
	}
	_, agg := tr.Aggregate()
	perDay := int(86400 / tr.Interval)
	if c := autocorrelation(agg, perDay); c < 0.7 {
		t.Errorf("aggregate autocorrelation at one day %.2f, want above 0.7", c)
	}
	if c := autocorrelation(agg, perDay/2); c > 0 {
		t.Errorf("aggregate autocorrelation at half a day %.2f, want negative", c)
	}
	// Weekdays (days 0-4) are busier than the weekend (days 5, 6).
	week, weekend := mean(agg[:5*perDay]), mean(agg[5*perDay:7*perDay])
	if !(weekend < 0.9*week) {
		t.Errorf("weekend mean %.1f, weekday mean %.1f: want the weekend 20%% lower", weekend, week)
	}
}

func TestBurstyHasBursts(t *testing.T) {
	tr, err := Bursty(BurstyOptions{Seed: 3, Entities: 10})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range tr.Entities {
		sorted := slices.Sorted(slices.Values(s.MemoryGiB))
		median, peak := sorted[len(sorted)/2], sorted[len(sorted)-1]
		if peak < 2*median {
			t.Errorf("%s: peak %.1f, median %.1f: no bursts", s.Entity, peak, median)
		}
	}
	flat, err := Bursty(BurstyOptions{Seed: 3, Entities: 1, BurstFactor: 1, Noise: 0.001})
	if err != nil {
		t.Fatal(err)
	}
	if r := PeakToAverage(flat.Entities[0].MemoryGiB); r > 1.01 {
		t.Errorf("burst factor 1, tiny noise: peak:average %.3f", r)
	}
}

func TestGeneratorOptionErrors(t *testing.T) {
	tests := []struct {
		name string
		gen  func() (*Trace, error)
		want string
	}{
		{"one node", func() (*Trace, error) { return Giraph(GiraphOptions{Nodes: 1}) }, "at least 2"},
		{"interval digits", func() (*Trace, error) { return Giraph(GiraphOptions{Interval: 1.0 / 3}) }, "6 significant digits"},
		{"negative interval", func() (*Trace, error) { return Diurnal(DiurnalOptions{Interval: -1}) }, "interval -1"},
		{"too short", func() (*Trace, error) { return Giraph(GiraphOptions{Duration: 300}) }, "supersteps"},
		{"short superstep", func() (*Trace, error) { return Giraph(GiraphOptions{Superstep: 10}) }, "at least 4 intervals"},
		{"aggregate above node", func() (*Trace, error) {
			return Giraph(GiraphOptions{AggregatePeakToAverage: 3})
		}, "between 1 and the node's"},
		{"aggregate out of reach", func() (*Trace, error) {
			return Giraph(GiraphOptions{Nodes: 2, AggregatePeakToAverage: 1.01})
		}, "out of reach"},
		{"too many samples", func() (*Trace, error) { return Bursty(BurstyOptions{Interval: 0.001, Duration: 1e6}) }, "at most"},
		{"amplitude", func() (*Trace, error) { return Diurnal(DiurnalOptions{Amplitude: 1}) }, "amplitude"},
		{"noise", func() (*Trace, error) { return Bursty(BurstyOptions{Noise: 0.5}) }, "noise"},
		{"burst factor", func() (*Trace, error) { return Bursty(BurstyOptions{BurstFactor: 0.5}) }, "burst factor"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := tt.gen()
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error %v, want %q", err, tt.want)
			}
		})
	}
}

func mean(xs []float64) float64 {
	s := 0.0
	for _, x := range xs {
		s += x
	}
	return s / float64(len(xs))
}

func std(xs []float64) float64 {
	m, s := mean(xs), 0.0
	for _, x := range xs {
		s += (x - m) * (x - m)
	}
	return math.Sqrt(s / float64(len(xs)))
}

func autocorrelation(xs []float64, lag int) float64 {
	m, v := mean(xs), std(xs)
	s := 0.0
	for k := lag; k < len(xs); k++ {
		s += (xs[k] - m) * (xs[k-lag] - m)
	}
	return s / float64(len(xs)-lag) / (v * v)
}

// arError fits x[k] = c + Σ a_j·x[k-1-j], j < w, by least squares on the
// first half of xs and returns the RMSE of its one-step predictions over
// the second half, divided by the second half's standard deviation.
func arError(xs []float64, w int) float64 {
	half := len(xs) / 2
	p := w + 1
	ata := make([][]float64, p)
	for i := range ata {
		ata[i] = make([]float64, p+1) // augmented with Aᵀy
	}
	row := make([]float64, p)
	regressors := func(k int) []float64 {
		row[0] = 1
		for j := range w {
			row[j+1] = xs[k-1-j]
		}
		return row
	}
	for k := w; k < half; k++ {
		r := regressors(k)
		for i := range p {
			for j := range p {
				ata[i][j] += r[i] * r[j]
			}
			ata[i][p] += r[i] * xs[k]
		}
	}
	for i := range p {
		ata[i][i] += 1e-9 * (ata[i][i] + 1) // ridge, for flat stretches
	}
	coef := solve(ata)
	se := 0.0
	for k := half; k < len(xs); k++ {
		r := regressors(k)
		pred := 0.0
		for i := range p {
			pred += coef[i] * r[i]
		}
		se += (pred - xs[k]) * (pred - xs[k])
	}
	return math.Sqrt(se/float64(len(xs)-half)) / std(xs[half:])
}

// solve solves an augmented linear system by Gaussian elimination with
// partial pivoting.
func solve(a [][]float64) []float64 {
	n := len(a)
	for c := range n {
		piv := c
		for r := c + 1; r < n; r++ {
			if math.Abs(a[r][c]) > math.Abs(a[piv][c]) {
				piv = r
			}
		}
		a[c], a[piv] = a[piv], a[c]
		for r := c + 1; r < n; r++ {
			f := a[r][c] / a[c][c]
			for k := c; k <= n; k++ {
				a[r][k] -= f * a[c][k]
			}
		}
	}
	x := make([]float64, n)
	for r := n - 1; r >= 0; r-- {
		s := a[r][n]
		for k := r + 1; k < n; k++ {
			s -= a[r][k] * x[k]
		}
		x[r] = s / a[r][r]
	}
	return x
}
