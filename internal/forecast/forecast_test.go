package forecast

import (
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"gonum.org/v1/gonum/stat"
)

func TestSelectARFindsTheOrder(t *testing.T) {
	y := testSeries()["ar2"]
	m, err := SelectAR(y, 8)
	if err != nil {
		t.Fatal(err)
	}
	// AIC may overfit by a lag or two, never underfit a clear AR(2).
	if len(m.Coef) < 2 || len(m.Coef) > 4 {
		t.Fatalf("chose %s for an AR(2) process", m.Name())
	}
	if math.Abs(m.Coef[0]-0.6) > 0.15 || math.Abs(m.Coef[1]+0.3) > 0.15 {
		t.Errorf("coefficients %v, process 0.6, -0.3", m.Coef)
	}
}

func TestARForecastRecursion(t *testing.T) {
	// An exact AR(1) with no noise: the fit recovers it and forecasts
	// continue the recursion.
	y := []float64{10}
	for range 30 {
		y = append(y, 2+0.5*y[len(y)-1]+0.001*math.Sin(float64(len(y))))
	}
	m, err := FitAR(y, 1)
	if err != nil {
		t.Fatal(err)
	}
	fc := make([]float64, 3)
	m.Forecast(fc)
	want := y[len(y)-1]
	for h := range fc {
		want = m.Const + m.Coef[0]*want
		if math.Abs(fc[h]-want) > 1e-12 {
			t.Errorf("step %d: %v, want %v", h+1, fc[h], want)
		}
	}
	vr := make([]float64, 3)
	m.Variance(vr)
	phi := m.Coef[0]
	if want := m.Sigma2 * (1 + phi*phi + phi*phi*phi*phi); math.Abs(vr[2]-want) > 1e-15 {
		t.Errorf("3-step variance %v, want %v", vr[2], want)
	}
}

func TestSeasonalNaiveAndEWMA(t *testing.T) {
	y := []float64{1, 5, 9, 2, 6, 10, 3, 7, 11}
	sn, err := FitSeasonalNaive(y, 3)
	if err != nil {
		t.Fatal(err)
	}
	fc := make([]float64, 5)
	sn.Forecast(fc)
	if want := []float64{3, 7, 11, 3, 7}; !equal(fc, want) {
		t.Errorf("seasonal naive %v, want %v", fc, want)
	}
	vr := make([]float64, 5)
	sn.Variance(vr)
	if sn.Sigma2 != 1 || vr[2] != 1 || vr[3] != 2 {
		t.Errorf("σ² %v, variances %v: want 1 and a step up after one period", sn.Sigma2, vr)
	}
	e, err := FitEWMA([]float64{10, 20}, 0.5)
	if err != nil {
		t.Fatal(err)
	}
	if e.Level != 15 || e.Sigma2 != 100 {
		t.Errorf("level %v σ² %v, want 15 and 100", e.Level, e.Sigma2)
	}
	e.Variance(vr)
	if vr[0] != 100 || vr[1] != 125 {
		t.Errorf("EWMA variances %v, want 100, 125, …", vr)
	}
}

func equal(a, b []float64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestPredictorPeakCoversTheWindow(t *testing.T) {
	// A ramp that keeps rising: the window's peak is its last step, above
	// the next step's forecast, and the upper quantile is above the peak.
	y := make([]float64, 80)
	for i := range y {
		y[i] = 10 + 0.5*float64(i) + 0.3*math.Sin(float64(i))
	}
	p, err := NewPredictor(Config{Horizon: 10})
	if err != nil {
		t.Fatal(err)
	}
	pr, err := p.Predict(y)
	if err != nil {
		t.Fatal(err)
	}
	if pr.Fallback != "" {
		t.Fatalf("fell back: %s", pr.Fallback)
	}
	if pr.Peak != pr.Point[9] || pr.Peak <= pr.Point[0] {
		t.Errorf("peak %v of %v: want the last step", pr.Peak, pr.Point)
	}
	if pr.Peak < y[len(y)-1]+4 {
		t.Errorf("peak %v does not continue the ramp from %v", pr.Peak, y[len(y)-1])
	}
	if !(pr.PeakUpper > pr.Peak) || pr.Multiplier <= 0 {
		t.Errorf("upper %v not above peak %v (multiplier %v)", pr.PeakUpper, pr.Peak, pr.Multiplier)
	}
}

func TestPredictorEmpiricalQuantile(t *testing.T) {
	// White noise with rare large upward spikes: the empirical 0.99
	// quantile of the residuals is far above the normal one.
	rng := rand.New(rand.NewPCG(1, 2))
	y := make([]float64, 400)
	for i := range y {
		y[i] = 50 + rng.NormFloat64()
		if i%25 == 7 {
			y[i] += 15
		}
	}
	emp, _ := NewPredictor(Config{Method: MethodEWMA, Quantile: 0.99})
	gau, _ := NewPredictor(Config{Method: MethodEWMA, Quantile: 0.99, Gaussian: true})
	a, _ := emp.Predict(y)
	b, _ := gau.Predict(y)
	if math.Abs(b.Multiplier-2.3263478740408408) > 1e-12 {
		t.Errorf("normal multiplier %v", b.Multiplier)
	}
	if a.Multiplier <= b.Multiplier {
		t.Errorf("empirical multiplier %v not above the normal %v for spiky residuals", a.Multiplier, b.Multiplier)
	}
}

func TestPredictorFallsBack(t *testing.T) {
	p, _ := NewPredictor(Config{Horizon: 3})
	for _, tc := range []struct {
		name string
		y    []float64
	}{
		{"constant", []float64{4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4}},
		{"one value", []float64{7}},
	} {
		pr, err := p.Predict(tc.y)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		last := tc.y[len(tc.y)-1]
		if math.Abs(pr.Peak-last) > 1e-9 || math.Abs(pr.PeakUpper-last) > 1e-9 {
			t.Errorf("%s: peak %v upper %v, want %v (model %s, fallback %q)", tc.name, pr.Peak, pr.PeakUpper, last, pr.Model, pr.Fallback)
		}
	}
	// Two values are enough for AR(0), the mean.
	pr, err := p.Predict([]float64{1, 3})
	if err != nil || pr.Model != "AR(0)" || math.Abs(pr.Peak-2) > 1e-9 {
		t.Errorf("two values: %+v, %v", pr, err)
	}
	pa, _ := NewPredictor(Config{Method: MethodARMA})
	pr, err = pa.Predict([]float64{1, 2, 3, 4, 5, 4, 3, 2})
	if err != nil || pr.Fallback == "" || pr.Model != "naive" {
		t.Errorf("ARMA on 8 values: %+v, %v; want the naive fallback with a reason", pr, err)
	}
}

func TestBadInput(t *testing.T) {
	p, _ := NewPredictor(Config{})
	for _, y := range [][]float64{nil, {1, math.NaN(), 3}, {math.Inf(1)}} {
		if _, err := p.Predict(y); err == nil {
			t.Errorf("Predict(%v) accepted", y)
		}
	}
	for _, c := range []Config{
		{Method: "lstm"}, {Quantile: 1}, {Quantile: 0.2}, {Alpha: 1.5}, {Horizon: -1}, {MaxLag: -2},
	} {
		if _, err := NewPredictor(c); err == nil {
			t.Errorf("NewPredictor(%+v) accepted", c)
		}
	}
	if _, err := FitAR([]float64{1, 2, 3}, 2); err == nil || !strings.Contains(err.Error(), "at least 6") {
		t.Errorf("AR(2) on 3 values: %v", err)
	}
	if _, err := FitEWMA([]float64{1}, 0); err == nil {
		t.Error("EWMA with α = 0 accepted")
	}
}

func TestGrowthCompoundsTheRecentRate(t *testing.T) {
	// 5% growth per step with a little noise in the rate: the growth model
	// forecasts the climb to go on; the level model on so short a window
	// cannot.
	rng := rand.New(rand.NewPCG(7, 7))
	y := []float64{10}
	for range 80 {
		y = append(y, y[len(y)-1]*math.Exp(0.05+0.002*rng.NormFloat64()))
	}
	p, _ := NewPredictor(Config{Growth: true, Horizon: 4})
	pr, err := p.Predict(y)
	if err != nil {
		t.Fatal(err)
	}
	last := y[len(y)-1]
	if want := last * math.Exp(0.2); math.Abs(pr.Point[3]-want) > 0.02*want {
		t.Errorf("%s: 4 steps ahead %.2f, want about %.2f", pr.Model, pr.Point[3], want)
	}
	if !strings.Contains(pr.Model, "log growth") {
		t.Errorf("model %q", pr.Model)
	}
	vr := make([]float64, 4)
	p.growth.Variance(vr)
	for h := 1; h < 4; h++ {
		if !(vr[h] > vr[h-1]) {
			t.Errorf("variance does not grow with the horizon: %v", vr)
		}
	}
	// A non-positive observation: the level model answers.
	y[10] = 0
	if pr, _ := p.Predict(y); strings.Contains(pr.Model, "growth") {
		t.Errorf("growth model on a series with a zero: %s", pr.Model)
	}
}

func TestFloorAtLast(t *testing.T) {
	y := make([]float64, 100)
	for i := range y {
		y[i] = 100 - float64(i) + math.Sin(float64(i))
	}
	p, _ := NewPredictor(Config{FloorAtLast: true, Horizon: 3})
	pr, _ := p.Predict(y)
	if pr.Peak < y[99] || pr.PeakUpper < pr.Peak {
		t.Errorf("peak %v upper %v below the last observation %v", pr.Peak, pr.PeakUpper, y[99])
	}
	q, _ := NewPredictor(Config{Horizon: 3})
	if pr, _ := q.Predict(y); pr.Peak >= y[99] {
		t.Errorf("without the floor the falling series' peak %v is not below the last %v", pr.Peak, y[99])
	}
}

// TestEmpiricalQuantile: the selection gives gonum's empirical quantile of
// the sorted values.
func TestEmpiricalQuantile(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 5))
	for n := 1; n < 300; n += 7 {
		x := make([]float64, n)
		for i := range x {
			x[i] = math.Round(rng.NormFloat64() * 4) // ties too
		}
		sorted := append([]float64(nil), x...)
		slices.Sort(sorted)
		for _, q := range []float64{0.5, 0.8, 0.9, 0.95, 0.99, 0.999} {
			want := stat.Quantile(q, stat.Empirical, sorted, nil)
			if got := empiricalQuantile(q, append([]float64(nil), x...)); got != want {
				t.Fatalf("n=%d q=%v: %v, gonum %v", n, q, got, want)
			}
		}
	}
}
