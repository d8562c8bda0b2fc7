package forecast

import "math"

// growth wraps a model of a positive series' log growth rate,
// z(t) = log y(t) − log y(t−1): ARIMA(p,1,0) on log y when the inner model
// is an AR(p). Forecasts compound the forecast growth from the last value,
// so a ramp keeps climbing at its recent rate, a level stays where it is,
// and errors scale with the level, as memory demand's do.
type growth struct {
	inner Model
	of    originForecaster
	y     []float64 // the positive history
	z     []float64 // its log growth rates, z[i] = log y[i+1] − log y[i]
	buf   []float64
}

// Name implements Model.
func (g *growth) Name() string { return g.inner.Name() + " of log growth" }

// Residuals implements Model: the inner model's, in log growth.
func (g *growth) Residuals() []float64 { return g.inner.Residuals() }

// Forecast implements Model.
func (g *growth) Forecast(dst []float64) {
	g.buf = grow(g.buf, len(dst))
	g.inner.Forecast(g.buf)
	compound(dst, g.buf, g.y[len(g.y)-1])
}

// compound writes last·exp(z₁+…+z_h) for each h.
func compound(dst, z []float64, last float64) {
	sum := 0.0
	for h := range dst {
		sum += z[h]
		dst[h] = last * math.Exp(sum)
	}
}

// Variance implements Model, by the delta method: the variance of the sum
// of the growth forecasts' errors — the integrated model's ψ-weights are
// the cumulative sums of the inner model's — times the squared forecast.
// An inner model without ψ-weights has its per-step errors summed as if
// independent.
func (g *growth) Variance(dst []float64) {
	n := len(dst)
	g.buf = grow(g.buf, 2*n)
	w, point := g.buf[:n], g.buf[n:]
	var sigma2 float64
	switch m := g.inner.(type) {
	case *AR:
		psiWeights(w, m.Coef, nil)
		sigma2 = m.Sigma2
	case *ARMA:
		psiWeights(w, m.AR, m.MA)
		sigma2 = m.Sigma2
	default:
		g.inner.Variance(w)
		for h := 1; h < n; h++ {
			w[h] += w[h-1]
		}
		copy(dst, w)
		w = nil
	}
	if w != nil {
		cum, acc := 0.0, 0.0
		for h := range n {
			cum += w[h]
			acc += cum * cum
			dst[h] = sigma2 * acc
		}
	}
	g.inner.Forecast(point)
	compound(point, point, g.y[len(g.y)-1])
	for h := range dst {
		dst[h] *= point[h] * point[h]
	}
}

func (g *growth) minOrigin() int { return g.of.minOrigin() + 1 }

// forecastFrom forecasts y[origin…] from y[:origin]: the growth from
// z[:origin−1], compounded from y[origin−1].
func (g *growth) forecastFrom(y []float64, origin int, dst []float64) {
	g.buf = grow(g.buf, len(dst))
	g.of.forecastFrom(g.z, origin-1, g.buf)
	compound(dst, g.buf, y[origin-1])
}
