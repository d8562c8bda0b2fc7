package forecast

import (
	"fmt"
	"math"
	"strconv"
)

// Model is a fitted forecasting model.
type Model interface {
	// Name says which model, with its orders, e.g. "AR(3)".
	Name() string
	// Forecast writes the point forecasts of the next len(dst) steps.
	Forecast(dst []float64)
	// Variance writes the forecast-error variance of each of the next
	// len(dst) steps.
	Variance(dst []float64)
	// Residuals are the in-sample one-step errors the variance is estimated
	// from (valid until the model's fitter is used again).
	Residuals() []float64
}

// AR is an autoregression with a constant:
// y(t) = Const + Coef[0]·y(t-1) + … + Coef[p-1]·y(t-p) + e(t).
type AR struct {
	Const  float64
	Coef   []float64
	Sigma2 float64 // residual sum of squares / observations (statsmodels' AutoReg sigma2)
	Nobs   int     // observations the fit used: len(history) - p
	AIC    float64 // of the order selection's common sample (SelectAR), else of this fit

	tail  []float64 // the last p observations, oldest first
	resid []float64
}

// Name implements Model.
func (m *AR) Name() string { return "AR(" + strconv.Itoa(len(m.Coef)) + ")" }

// Residuals implements Model.
func (m *AR) Residuals() []float64 { return m.resid }

// Forecast implements Model: the recursion on past values and earlier
// forecasts.
func (m *AR) Forecast(dst []float64) { m.forecastFrom(m.tail, len(m.tail), dst) }

// Variance implements Model: σ²·Σ_{j<h} ψ_j² with ψ_0 = 1 and
// ψ_j = Σ_i φ_i ψ_{j-i}.
func (m *AR) Variance(dst []float64) { psiVariance(dst, m.Coef, nil, m.Sigma2) }

// psiVariance writes σ²·Σ_{j<h} ψ_j² for h = 1..len(dst), the ψ-weights of
// the ARMA model with the given AR and MA coefficients. dst doubles as the
// ψ store before it is turned into cumulative sums.
func psiVariance(dst, ar, ma []float64, sigma2 float64) {
	psiWeights(dst, ar, ma)
	sum := 0.0
	for j := range dst {
		sum += dst[j] * dst[j]
		dst[j] = sigma2 * sum
	}
}

// psiWeights writes the first len(dst) ψ-weights of an ARMA model:
// ψ_0 = 1, ψ_j = θ_j + Σ_i φ_i ψ_{j−i}.
func psiWeights(dst, ar, ma []float64) {
	for j := range dst {
		v := 1.0
		if j > 0 {
			v = 0
			if j-1 < len(ma) {
				v = ma[j-1]
			}
			for i := 1; i <= len(ar) && i <= j; i++ {
				v += ar[i-1] * dst[j-i]
			}
		}
		dst[j] = v
	}
}

// Fitter fits models, keeping its buffers between calls; a model it
// returns is valid until its next call. Not safe for concurrent use.
type Fitter struct {
	// commonSample keeps SelectAR's chosen order fitted on the sample the
	// orders were compared on (the observations after the first maxLag)
	// instead of refitting it on the whole history: one factorization
	// instead of two. The Predictor sets it; SelectAR, as statsmodels,
	// refits.
	commonSample bool
	ls           lsq
	ar           AR
	arma         ARMA
	ewma         EWMA
	sn           SeasonalNaive
	buf          []float64
	ic           []float64
}

func grow(s []float64, n int) []float64 {
	if cap(s) < n {
		return make([]float64, n)
	}
	return s[:n]
}

// FitAR fits an AR(p) with a constant to y by least squares (statsmodels'
// AutoReg(y, lags=p, trend="c")).
func FitAR(y []float64, p int) (*AR, error) { return new(Fitter).FitAR(y, p) }

// SelectAR fits AR models of order 0..maxLag on a common sample (the
// observations after the first maxLag), picks the order with the least AIC,
// and refits that order on all of y (statsmodels' ar_select_order(y,
// maxLag, ic="aic", trend="c") and its model's fit).
func SelectAR(y []float64, maxLag int) (*AR, error) { return new(Fitter).SelectAR(y, maxLag) }

// FitAR is the package's FitAR on the fitter's buffers.
func (f *Fitter) FitAR(y []float64, p int) (*AR, error) {
	if err := checkSeries(y); err != nil {
		return nil, err
	}
	if p < 0 {
		return nil, fmt.Errorf("forecast: AR order %d is negative", p)
	}
	n := len(y) - p
	if n < p+2 {
		return nil, fmt.Errorf("forecast: AR(%d) needs at least %d observations, have %d", p, 2*p+2, len(y))
	}
	f.design(y, p, p)
	f.ls.factor()
	if f.ls.fullRank() < p+1 {
		return nil, ErrSingular
	}
	beta, err := f.ls.solve(p + 1)
	if err != nil {
		return nil, err
	}
	m := f.setAR(y, beta, p, p)
	m.AIC = arAIC(f.ls.ssr(p+1), n, p)
	return m, nil
}

// setAR fills the fitter's AR from the coefficients of an order-p fit on
// the observations after the first hold: σ² from the factorization, the
// residuals over the same observations, the tail to forecast from.
func (f *Fitter) setAR(y, beta []float64, p, hold int) *AR {
	n := len(y) - hold
	m := &f.ar
	m.Const = beta[0]
	m.Coef = grow(m.Coef, p)
	copy(m.Coef, beta[1:])
	m.Nobs = n
	m.Sigma2 = f.ls.ssr(p+1) / float64(n)
	m.tail = y[len(y)-p:]
	m.resid = grow(m.resid, n)
	for t := hold; t < len(y); t++ {
		m.resid[t-hold] = y[t] - m.Const - dot(m.Coef, y, t)
	}
	return m
}

// SelectAR is the package's SelectAR on the fitter's buffers.
func (f *Fitter) SelectAR(y []float64, maxLag int) (*AR, error) {
	if err := checkSeries(y); err != nil {
		return nil, err
	}
	if maxLag < 0 {
		return nil, fmt.Errorf("forecast: maximum AR order %d is negative", maxLag)
	}
	n := len(y) - maxLag
	if n < maxLag+2 {
		return nil, fmt.Errorf("forecast: choosing an AR order up to %d needs at least %d observations, have %d", maxLag, 2*maxLag+2, len(y))
	}
	f.design(y, maxLag, maxLag)
	f.ls.factor()
	best, bestAIC := -1, math.Inf(1)
	rank := f.ls.fullRank()
	for p := 0; p+1 <= rank; p++ {
		if aic := arAIC(f.ls.ssr(p+1), n, p); aic < bestAIC {
			best, bestAIC = p, aic
		}
	}
	if best < 0 {
		return nil, ErrSingular
	}
	if !f.commonSample {
		m, err := f.FitAR(y, best)
		if err != nil {
			return nil, err
		}
		m.AIC = bestAIC
		return m, nil
	}
	// The chosen order's fit on the common sample, from the same
	// factorization.
	beta, err := f.ls.solve(best + 1)
	if err != nil {
		return nil, err
	}
	m := f.setAR(y, beta, best, maxLag)
	m.AIC = bestAIC
	return m, nil
}

// design fills the least-squares buffer with rows t = hold..len(y)-1 of
// [1, y(t-1), …, y(t-p), y(t)].
func (f *Fitter) design(y []float64, p, hold int) {
	n := len(y) - hold
	a := f.ls.reset(n, p+1)
	w := p + 2
	for r := range n {
		t := hold + r
		row := a[r*w : (r+1)*w]
		row[0] = 1
		for i := 1; i <= p; i++ {
			row[i] = y[t-i]
		}
		row[p+1] = y[t]
	}
}

// arAIC is statsmodels' AIC for an AR(p) with a constant on n observations
// with residual sum of squares ssr: −2·llf + 2·(p+1), the Gaussian
// log-likelihood at σ² = ssr/n.
func arAIC(ssr float64, n, p int) float64 {
	s2 := ssr / float64(n)
	if s2 <= 0 {
		return math.Inf(-1)
	}
	return float64(n)*(math.Log(2*math.Pi*s2)+1) + 2*float64(p+1)
}

func checkSeries(y []float64) error {
	for i, v := range y {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return fmt.Errorf("forecast: observation %d is %v", i, v)
		}
	}
	return nil
}

func (m *AR) minOrigin() int { return len(m.Coef) }

func (m *AR) forecastFrom(y []float64, origin int, dst []float64) {
	p := len(m.Coef)
	for h := range dst {
		v := m.Const
		for i := 1; i <= p; i++ {
			if k := h - i; k >= 0 {
				v += m.Coef[i-1] * dst[k]
			} else {
				v += m.Coef[i-1] * y[origin+k]
			}
		}
		dst[h] = v
	}
}
