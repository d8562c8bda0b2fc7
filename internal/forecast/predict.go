package forecast

import (
	"errors"
	"fmt"
	"math"
	"slices"

	"gonum.org/v1/gonum/stat/distuv"
)

// Method names a model family.
type Method string

// The model families.
const (
	MethodAR            Method = "ar"             // AR(p), p by AIC
	MethodARMA          Method = "arma"           // ARMA(p,q) by Hannan–Rissanen
	MethodEWMA          Method = "ewma"           // simple exponential smoothing
	MethodSeasonalNaive Method = "seasonal-naive" // the value one period ago
)

// Methods lists the model families, for flags and errors.
var Methods = []Method{MethodAR, MethodARMA, MethodEWMA, MethodSeasonalNaive}

// Config chooses a model and the prediction window. Zero fields take the
// defaults named.
type Config struct {
	Method   Method  // default MethodAR
	MaxLag   int     // AR: the highest order AIC may choose (default 8)
	P, Q     int     // ARMA orders (default 2 and 1)
	Alpha    float64 // EWMA smoothing level (default 0.3)
	Period   int     // seasonal-naive season in steps (default 1: the last value)
	Horizon  int     // steps in the prediction window (default 1)
	Quantile float64 // upper quantile of the forecast peak (default 0.99)
	// MinResiduals is how many residuals the empirical quantile needs
	// before it replaces the normal one (default 30). Gaussian forces the
	// normal quantile.
	MinResiduals int
	Gaussian     bool
	// StepwiseOnly bounds the peak by the per-step quantiles alone, without
	// the peak residuals (see Prediction.PeakUpper).
	StepwiseOnly bool
	// Growth models the log growth rate log y(t) − log y(t−1) instead of y
	// (ARIMA(p,1,0) on log y for AR) when every observation is positive;
	// forecasts compound the forecast growth from the last value.
	Growth bool
	// FloorAtLast takes the window's peak forecast to be at least the last
	// observation, here and in the peak residuals: a provisioner that never
	// shrinks below measured use only uses forecasts above it, so its
	// margin is calibrated on those.
	FloorAtLast bool
	// AbsoluteMargin measures peak residuals in the series' unit; by
	// default they are relative to the forecast peak when the history is
	// positive, because demand's surprises grow with its level.
	AbsoluteMargin bool
}

// Prediction is one forecast of a prediction window.
type Prediction struct {
	// Model is the model that answered, e.g. "AR(3)"; Fallback says why it
	// is simpler than the configured one, empty when it is not.
	Model    string
	Fallback string
	// Point and Upper are the forecast and its upper quantile for each step
	// of the window (valid until the predictor's next call).
	Point, Upper []float64
	// Peak is the largest point forecast in the window. PeakUpper is what
	// to provision for it: the larger of the largest per-step upper
	// quantile and Peak plus the quantile of the model's in-sample peak
	// residuals — at every origin in the history, the true peak of the
	// following window minus the model's forecast peak from that origin.
	// The per-step quantiles assume the model is right; the peak residuals
	// measure where it is not (a ramp whose fall it expects too early, a
	// burst it cannot foresee), on this consumer's own history.
	Peak, PeakUpper float64
	// PeakMargin is the quantile of the peak residuals (0 when there were
	// too few origins or StepwiseOnly is set).
	PeakMargin float64
	// Calibrated says the peak residuals were used: the history had at
	// least MinResiduals origins with a whole window after them.
	Calibrated bool
	// Multiplier is the number of forecast standard errors between a step's
	// point forecast and its upper quantile.
	Multiplier float64
	// Sigma is the one-step forecast standard error.
	Sigma float64
}

// Predictor forecasts the peak of a prediction window from a history. It
// keeps its buffers between calls; not safe for concurrent use.
type Predictor struct {
	cfg      Config
	fit      Fitter
	naive    Fitter
	point    []float64
	upper    []float64
	sorted   []float64
	scratch  []float64
	lo, hi   float64 // the history's least and greatest values
	relative bool
	growth   growth
	normal   float64
}

// NewPredictor checks cfg and fills its defaults.
func NewPredictor(cfg Config) (*Predictor, error) {
	if cfg.Method == "" {
		cfg.Method = MethodAR
	}
	if !slices.Contains(Methods, cfg.Method) {
		return nil, fmt.Errorf("forecast: unknown method %q (one of %v)", cfg.Method, Methods)
	}
	if cfg.MaxLag == 0 {
		cfg.MaxLag = 8
	}
	if cfg.P == 0 && cfg.Q == 0 {
		cfg.P, cfg.Q = 2, 1
	}
	if cfg.Alpha == 0 {
		cfg.Alpha = 0.3
	}
	if cfg.Period == 0 {
		cfg.Period = 1
	}
	if cfg.Horizon == 0 {
		cfg.Horizon = 1
	}
	if cfg.Quantile == 0 {
		cfg.Quantile = 0.99
	}
	if cfg.MinResiduals == 0 {
		cfg.MinResiduals = 30
	}
	switch {
	case cfg.MaxLag < 0 || cfg.P < 0 || cfg.Q < 0 || cfg.Period < 0 || cfg.MinResiduals < 0:
		return nil, errors.New("forecast: orders, period and residual counts must not be negative")
	case !(cfg.Alpha > 0 && cfg.Alpha <= 1):
		return nil, fmt.Errorf("forecast: smoothing level %v is outside (0, 1]", cfg.Alpha)
	case cfg.Horizon < 1 || cfg.Horizon > 1<<16:
		return nil, fmt.Errorf("forecast: horizon of %d steps is outside 1..65536", cfg.Horizon)
	case !(cfg.Quantile >= 0.5 && cfg.Quantile < 1):
		return nil, fmt.Errorf("forecast: quantile %v is outside [0.5, 1)", cfg.Quantile)
	}
	p := &Predictor{cfg: cfg, point: make([]float64, cfg.Horizon), upper: make([]float64, cfg.Horizon)}
	p.fit.commonSample = true
	p.normal = distuv.UnitNormal.Quantile(cfg.Quantile)
	return p, nil
}

// Config returns the predictor's configuration with its defaults filled.
func (p *Predictor) Config() Config { return p.cfg }

// Predict fits the configured model to y, oldest first, and forecasts the
// prediction window. When y is too short for the model, or constant, the
// last-value forecast answers instead and Fallback says why; only an empty
// history or a non-finite value is an error.
func (p *Predictor) Predict(y []float64) (out Prediction, err error) {
	if len(y) == 0 {
		return Prediction{}, errors.New("forecast: no observations")
	}
	if err := checkSeries(y); err != nil {
		return Prediction{}, err
	}
	p.lo, p.hi = slices.Min(y), slices.Max(y)
	m, err := p.model(y)
	if err == nil {
		if m.Forecast(p.point); !plausible(p.point, p.lo, p.hi) {
			err = fmt.Errorf("forecast: %s forecasts outside twice the observed range", m.Name())
		}
	}
	if err != nil {
		out.Fallback = err.Error()
		if m, err = p.naive.FitSeasonalNaive(y, 1); err != nil {
			return Prediction{}, err
		}
		m.Forecast(p.point)
	}
	out.Model = m.Name()
	m.Variance(p.upper)
	out.Multiplier = p.multiplier(m.Residuals())
	out.Peak, out.PeakUpper = math.Inf(-1), math.Inf(-1)
	for h := range p.point {
		sd := math.Sqrt(max(p.upper[h], 0))
		if h == 0 {
			out.Sigma = sd
		}
		p.upper[h] = p.point[h] + out.Multiplier*sd
		out.Peak = max(out.Peak, p.point[h])
		out.PeakUpper = max(out.PeakUpper, p.upper[h])
	}
	out.Point, out.Upper = p.point, p.upper
	defer func() {
		// The margin may not carry the window's peak past the band point
		// forecasts must stay in (plausible): a margin measured on a jump
		// from almost nothing is a multiple of the level, not of the
		// range.
		lo, hi := p.lo, p.hi
		top := hi + max(hi-lo, 1e-9*max(math.Abs(hi), 1))
		out.PeakUpper = max(min(out.PeakUpper, top), out.Peak)
		for h := range p.upper {
			p.upper[h] = max(min(p.upper[h], top), p.point[h])
		}
	}()
	if p.cfg.FloorAtLast {
		out.Peak = max(out.Peak, y[len(y)-1])
		out.PeakUpper = max(out.PeakUpper, out.Peak)
	}
	if !p.cfg.StepwiseOnly {
		if of, ok := m.(originForecaster); ok {
			p.relative = !p.cfg.AbsoluteMargin && p.lo > 0 && out.Peak > 0
			out.PeakMargin, out.Calibrated = p.peakMargin(of, y)
			if p.relative {
				out.PeakMargin *= out.Peak
			}
			out.PeakUpper = max(out.PeakUpper, out.Peak+out.PeakMargin)
		}
	}
	return out, nil
}

// originForecaster forecasts from an earlier point of the history the model
// was fitted on, with the fitted coefficients.
type originForecaster interface {
	// forecastFrom writes the forecasts of y[origin], y[origin+1], …
	// made from y[:origin].
	forecastFrom(y []float64, origin int, dst []float64)
	// minOrigin is the first origin with enough history.
	minOrigin() int
}

// peakMargin is the upper quantile of the in-sample peak residuals; with
// fewer than MinResiduals origins it is 0 and not calibrated.
func (p *Predictor) peakMargin(m originForecaster, y []float64) (float64, bool) {
	h := p.cfg.Horizon
	first, last := max(m.minOrigin(), 1), len(y)-h
	if last-first+1 < p.cfg.MinResiduals {
		return 0, false
	}
	p.sorted = p.sorted[:0]
	p.scratch = grow(p.scratch, h)
	for o := first; o <= last; o++ {
		m.forecastFrom(y, o, p.scratch)
		fp, tp := math.Inf(-1), math.Inf(-1)
		if p.cfg.FloorAtLast {
			fp = y[o-1]
		}
		for k := range h {
			fp = max(fp, p.scratch[k])
			tp = max(tp, y[o+k])
		}
		if p.relative {
			p.sorted = append(p.sorted, (tp-fp)/max(fp, 1e-9))
		} else {
			p.sorted = append(p.sorted, tp-fp)
		}
	}
	return max(empiricalQuantile(p.cfg.Quantile, p.sorted), 0), true
}

func (p *Predictor) model(y []float64) (Model, error) {
	if !p.cfg.Growth || len(y) < 3 || p.lo <= 0 {
		return p.level(y)
	}
	g := &p.growth
	g.y = y
	g.z = grow(g.z, len(y)-1)
	for i := range g.z {
		g.z[i] = math.Log(y[i+1]) - math.Log(y[i])
	}
	m, err := p.level(g.z)
	if err != nil {
		return nil, err
	}
	of, ok := m.(originForecaster)
	if !ok {
		return nil, fmt.Errorf("forecast: %s cannot model growth", m.Name())
	}
	g.inner, g.of = m, of
	return g, nil
}

// level fits the configured model to y itself.
func (p *Predictor) level(y []float64) (Model, error) {
	c := p.cfg
	switch c.Method {
	case MethodARMA:
		return p.fit.FitARMA(y, c.P, c.Q)
	case MethodEWMA:
		return p.fit.FitEWMA(y, c.Alpha)
	case MethodSeasonalNaive:
		return p.fit.FitSeasonalNaive(y, c.Period)
	default:
		// A short history lowers the highest order rather than falling back:
		// at most a quarter of the observations, so a high order cannot
		// fit a short history exactly and forecast nonsense from it.
		lag := min(c.MaxLag, len(y)/4)
		if len(y) < 2 {
			return nil, fmt.Errorf("forecast: %d observations are too few for an AR model", len(y))
		}
		return p.fit.SelectAR(y, lag)
	}
}

// plausible reports whether every point forecast lies within the history's
// range widened by that range on each side. A model fitted to a short or
// near-singular history can be explosive or wildly extrapolate; a seasonal
// one with roots on the unit circle is neither, so stationarity is not the
// test.
func plausible(point []float64, lo, hi float64) bool {
	span := max(hi-lo, 1e-9*max(math.Abs(hi), 1))
	for _, v := range point {
		if v < lo-span || v > hi+span || math.IsNaN(v) {
			return false
		}
	}
	return true
}

// multiplier is the quantile of the standardized residuals, or the normal
// quantile when there are fewer than MinResiduals of them (or Gaussian is
// set). It is never below zero.
func (p *Predictor) multiplier(resid []float64) float64 {
	if p.cfg.Gaussian || len(resid) < p.cfg.MinResiduals {
		return p.normal
	}
	ss := 0.0
	for _, e := range resid {
		ss += e * e
	}
	if ss == 0 {
		return p.normal
	}
	sd := math.Sqrt(ss / float64(len(resid)))
	p.sorted = append(p.sorted[:0], resid...)
	return max(empiricalQuantile(p.cfg.Quantile, p.sorted)/sd, 0)
}

// empiricalQuantile is gonum's stat.Quantile(q, stat.Empirical, sorted x):
// the least value at or above which lie at least the fraction q of x, found
// by selection instead of a sort (x is reordered).
func empiricalQuantile(q float64, x []float64) float64 {
	k := int(math.Ceil(q*float64(len(x)))) - 1
	k = min(max(k, 0), len(x)-1)
	lo, hi := 0, len(x)-1
	for lo < hi {
		// Hoare partition around the median of three.
		mid := lo + (hi-lo)/2
		if x[mid] < x[lo] {
			x[mid], x[lo] = x[lo], x[mid]
		}
		if x[hi] < x[lo] {
			x[hi], x[lo] = x[lo], x[hi]
		}
		if x[hi] < x[mid] {
			x[hi], x[mid] = x[mid], x[hi]
		}
		pivot := x[mid]
		i, j := lo, hi
		for i <= j {
			for x[i] < pivot {
				i++
			}
			for x[j] > pivot {
				j--
			}
			if i <= j {
				x[i], x[j] = x[j], x[i]
				i++
				j--
			}
		}
		switch {
		case k <= j:
			hi = j
		case k >= i:
			lo = i
		default:
			return x[k]
		}
	}
	return x[k]
}
