package forecast

import (
	"fmt"
	"math"
	"math/cmplx"
	"strconv"

	"gonum.org/v1/gonum/mat"
)

// ARMA is a zero-mean ARMA(p,q) model of the demeaned series:
// x(t) = Σ AR[i]·x(t-1-i) + e(t) + Σ MA[j]·e(t-1-j), with x = y − Mean.
type ARMA struct {
	Mean   float64
	AR, MA []float64
	Sigma2 float64
	// InitialAROrder is the order of the long autoregression of the first
	// step; Unbiased says whether the bias-correction step ran.
	InitialAROrder int
	Unbiased       bool

	x     []float64 // the demeaned history
	e     []float64 // conditional residuals over the whole history
	resid []float64 // the final least-squares step's residuals
}

// Name implements Model.
func (m *ARMA) Name() string {
	return "ARMA(" + strconv.Itoa(len(m.AR)) + "," + strconv.Itoa(len(m.MA)) + ")"
}

// Residuals implements Model.
func (m *ARMA) Residuals() []float64 { return m.resid }

// Forecast implements Model: the ARMA recursion on the demeaned history,
// with the residuals computed recursively through the whole history from
// zeros (conditional sum of squares); for an invertible model their start
// is forgotten geometrically, so the forecasts agree with a Kalman filter's
// on any but the shortest series.
func (m *ARMA) Forecast(dst []float64) { m.forecastFrom(nil, len(m.x), dst) }

// Variance implements Model.
func (m *ARMA) Variance(dst []float64) { psiVariance(dst, m.AR, m.MA, m.Sigma2) }

// FitARMA estimates an ARMA(p,q) on the demeaned y by Hannan–Rissanen
// (statsmodels' hannan_rissanen(y, p, q, demean=True) with its defaults).
func FitARMA(y []float64, p, q int) (*ARMA, error) { return new(Fitter).FitARMA(y, p, q) }

// FitARMA is the package's FitARMA on the fitter's buffers.
func (f *Fitter) FitARMA(y []float64, p, q int) (*ARMA, error) {
	if err := checkSeries(y); err != nil {
		return nil, err
	}
	if p < 0 || q < 0 {
		return nil, fmt.Errorf("forecast: ARMA orders (%d,%d) must not be negative", p, q)
	}
	n := len(y)
	if n == 0 {
		return nil, fmt.Errorf("forecast: no observations")
	}
	m := &f.arma
	m.AR, m.MA, m.Unbiased, m.InitialAROrder = grow(m.AR, p), grow(m.MA, q), false, 0
	m.Mean = mean(y)
	m.x = grow(m.x, n)
	for i, v := range y {
		m.x[i] = v - m.Mean
	}
	x := m.x
	switch {
	case p == 0 && q == 0:
		m.Sigma2 = variance(x)
		m.resid = append(m.resid[:0], x...)
	case q == 0:
		if n-p < p+1 {
			return nil, fmt.Errorf("forecast: ARMA(%d,0) needs at least %d observations, have %d", p, 2*p+1, n)
		}
		a := f.ls.reset(n-p, p)
		for r := range n - p {
			t := p + r
			row := a[r*(p+1) : (r+1)*(p+1)]
			for i := 1; i <= p; i++ {
				row[i-1] = x[t-i]
			}
			row[p] = x[t]
		}
		f.ls.factor()
		beta, err := f.ls.solve(p)
		if err != nil {
			return nil, err
		}
		copy(m.AR, beta)
		m.Sigma2 = f.ls.ssr(p) / float64(n-p-p)
		m.resid = grow(m.resid, n-p)
		for t := p; t < n; t++ {
			m.resid[t-p] = x[t] - dot(m.AR, x, t)
		}
	default:
		if err := f.hannanRissanen(m, p, q); err != nil {
			return nil, err
		}
	}
	m.conditionalResiduals()
	return m, nil
}

func (f *Fitter) hannanRissanen(m *ARMA, p, q int) error {
	x := m.x
	n := len(x)
	init := max(int(math.Floor(math.Pow(math.Log(float64(n)), 2))), 2*max(p, q))
	m.InitialAROrder = init
	rows := n - init - q
	if rows < p+q+1 || init >= n {
		return fmt.Errorf("forecast: ARMA(%d,%d) by Hannan–Rissanen needs more than %d observations, have %d", p, q, init+q+p+q+1, n)
	}
	// Step 1: a long autoregression by Yule–Walker (biased autocovariances,
	// statsmodels' method="mle"), and its residuals for t ≥ init.
	phi, err := yuleWalker(x, init)
	if err != nil {
		return err
	}
	res1 := grow(f.buf, n)
	f.buf = res1
	for t := range init {
		res1[t] = 0
	}
	for t := init; t < n; t++ {
		res1[t] = x[t] - dot(phi, x, t)
	}
	// Step 2: x(t) on x(t-1..t-p) and e(t-1..t-q), t ≥ init+q.
	k := p + q
	a := f.ls.reset(rows, k)
	for r := range rows {
		t := init + q + r
		row := a[r*(k+1) : (r+1)*(k+1)]
		for i := 1; i <= p; i++ {
			row[i-1] = x[t-i]
		}
		for j := 1; j <= q; j++ {
			row[p+j-1] = res1[t-j]
		}
		row[k] = x[t]
	}
	f.ls.factor()
	beta, err := f.ls.solve(k)
	if err != nil {
		return err
	}
	copy(m.AR, beta[:p])
	copy(m.MA, beta[p:])
	m.Sigma2 = f.ls.ssr(k) / float64(rows-k)
	m.resid = grow(m.resid, rows)
	step2 := func() {
		for r := range rows {
			t := init + q + r
			v := dot(m.AR, x, t)
			for j := 1; j <= q; j++ {
				v += m.MA[j-1] * res1[t-j]
			}
			m.resid[r] = x[t] - v
		}
	}
	step2()
	if !stable(m.AR) || !stable(negated(m.MA)) {
		return nil
	}
	// Step 3: bias correction.
	mx := max(p, q)
	z := grow(f.ic, 3*n)
	f.ic = z
	zz, v, w := z[:n], z[n:2*n], z[2*n:]
	for t := range n {
		zz[t] = 0
		if t >= mx {
			s := x[t] - dot(m.AR, x, t)
			for j := 1; j <= q; j++ {
				s -= m.MA[j-1] * zz[t-j]
			}
			zz[t] = s
		}
	}
	for t := range n {
		v[t] = zz[t]
		for i := 1; i <= p && i <= t; i++ {
			v[t] += m.AR[i-1] * v[t-i]
		}
		w[t] = zz[t]
		for j := 1; j <= q && j <= t; j++ {
			w[t] -= m.MA[j-1] * zz[t-j]
		}
	}
	rows3 := n - mx
	a = f.ls.reset(rows3, k)
	for r := range rows3 {
		t := mx + r
		row := a[r*(k+1) : (r+1)*(k+1)]
		for i := 1; i <= p; i++ {
			row[i-1] = v[t-i]
		}
		for j := 1; j <= q; j++ {
			row[p+j-1] = w[t-j]
		}
		row[k] = zz[t]
	}
	f.ls.factor()
	delta, err := f.ls.solve(k)
	if err != nil {
		return err
	}
	for i := range p {
		m.AR[i] += delta[i]
	}
	for j := range q {
		m.MA[j] += delta[p+j]
	}
	step2()
	ss := 0.0
	for _, e := range m.resid {
		ss += e * e
	}
	m.Sigma2 = ss / float64(rows)
	m.Unbiased = true
	return nil
}

// conditionalResiduals computes e(t) through the whole demeaned history,
// starting from zero residuals and zero values before the first
// observation.
func (m *ARMA) conditionalResiduals() {
	n := len(m.x)
	m.e = grow(m.e, n)
	for t := range n {
		v := dot(m.AR, m.x, t)
		for j := 1; j <= len(m.MA) && j <= t; j++ {
			v += m.MA[j-1] * m.e[t-j]
		}
		m.e[t] = m.x[t] - v
	}
}

// yuleWalker solves the Yule–Walker equations of order k with biased
// autocovariances of x after removing its mean (statsmodels' yule_walker,
// method="mle").
func yuleWalker(x []float64, k int) ([]float64, error) {
	n := len(x)
	mu := mean(x)
	r := make([]float64, k+1)
	for lag := 0; lag <= k; lag++ {
		s := 0.0
		for t := lag; t < n; t++ {
			s += (x[t] - mu) * (x[t-lag] - mu)
		}
		r[lag] = s / float64(n)
	}
	sym := mat.NewSymDense(k, nil)
	for i := range k {
		for j := i; j < k; j++ {
			sym.SetSym(i, j, r[j-i])
		}
	}
	var ch mat.Cholesky
	if !ch.Factorize(sym) {
		return nil, ErrSingular
	}
	var phi mat.VecDense
	if err := ch.SolveVecTo(&phi, mat.NewVecDense(k, r[1:])); err != nil {
		return nil, ErrSingular
	}
	return phi.RawVector().Data, nil
}

// stable reports whether every root of 1 − c₁z − … − c_k z^k lies outside
// the unit circle, by the eigenvalues of its companion matrix.
func stable(c []float64) bool {
	k := len(c)
	switch k {
	case 0:
		return true
	case 1:
		return math.Abs(c[0]) < 1
	}
	comp := mat.NewDense(k, k, nil)
	for j := range k {
		comp.Set(0, j, c[j])
	}
	for i := 1; i < k; i++ {
		comp.Set(i, i-1, 1)
	}
	var eig mat.Eigen
	if !eig.Factorize(comp, mat.EigenNone) {
		return false
	}
	for _, v := range eig.Values(nil) {
		if cmplx.Abs(v) >= 1 {
			return false
		}
	}
	return true
}

func negated(c []float64) []float64 {
	out := make([]float64, len(c))
	for i, v := range c {
		out[i] = -v
	}
	return out
}

// dot is Σ_i c[i]·x[t-1-i] over the lags that exist.
func dot(c, x []float64, t int) float64 {
	s := 0.0
	for i := 1; i <= len(c) && i <= t; i++ {
		s += c[i-1] * x[t-i]
	}
	return s
}

func mean(x []float64) float64 {
	s := 0.0
	for _, v := range x {
		s += v
	}
	return s / float64(len(x))
}

func variance(x []float64) float64 {
	mu := mean(x)
	s := 0.0
	for _, v := range x {
		s += (v - mu) * (v - mu)
	}
	return s / float64(len(x))
}

func (m *ARMA) minOrigin() int { return max(len(m.AR), len(m.MA)) }

// forecastFrom uses the conditional residuals up to the origin.
func (m *ARMA) forecastFrom(_ []float64, origin int, dst []float64) {
	p, q := len(m.AR), len(m.MA)
	for h := range dst {
		v := 0.0
		for i := 1; i <= p; i++ {
			if k := h - i; k >= 0 {
				v += m.AR[i-1] * (dst[k] - m.Mean)
			} else if origin+k >= 0 {
				v += m.AR[i-1] * m.x[origin+k]
			}
		}
		for j := 1; j <= q; j++ {
			if k := origin + h - j; k < origin && k >= 0 {
				v += m.MA[j-1] * m.e[k]
			}
		}
		dst[h] = m.Mean + v
	}
}
