package forecast

import (
	"fmt"
	"strconv"
)

// EWMA is simple exponential smoothing: the level follows
// l(t) = α·y(t) + (1−α)·l(t−1) from l(0) = y(0), and every step ahead is
// forecast at the last level (statsmodels' SimpleExpSmoothing with a known
// initial level y(0) and a fixed smoothing level).
type EWMA struct {
	Alpha  float64
	Level  float64
	Sigma2 float64 // mean squared one-step error
	resid  []float64
}

// FitEWMA smooths y with smoothing level alpha in (0, 1].
func FitEWMA(y []float64, alpha float64) (*EWMA, error) { return new(Fitter).FitEWMA(y, alpha) }

// FitEWMA is the package's FitEWMA on the fitter's buffers.
func (f *Fitter) FitEWMA(y []float64, alpha float64) (*EWMA, error) {
	if err := checkSeries(y); err != nil {
		return nil, err
	}
	if !(alpha > 0 && alpha <= 1) {
		return nil, fmt.Errorf("forecast: EWMA smoothing level %v is outside (0, 1]", alpha)
	}
	if len(y) == 0 {
		return nil, fmt.Errorf("forecast: no observations")
	}
	m := &f.ewma
	*m = EWMA{Alpha: alpha, Level: y[0]}
	m.resid = grow(f.buf, len(y)-1)
	f.buf = m.resid[:cap(m.resid)]
	ss := 0.0
	for t := 1; t < len(y); t++ {
		e := y[t] - m.Level
		m.resid[t-1] = e
		ss += e * e
		m.Level += alpha * e
	}
	if len(y) > 1 {
		m.Sigma2 = ss / float64(len(y)-1)
	}
	return m, nil
}

// Name implements Model.
func (m *EWMA) Name() string { return "EWMA(" + strconv.FormatFloat(m.Alpha, 'g', 3, 64) + ")" }

// Forecast implements Model.
func (m *EWMA) Forecast(dst []float64) {
	for h := range dst {
		dst[h] = m.Level
	}
}

// Variance implements Model: σ²·(1 + (h−1)·α²), the ETS(A,N,N) forecast
// variance.
func (m *EWMA) Variance(dst []float64) {
	for h := range dst {
		dst[h] = m.Sigma2 * (1 + float64(h)*m.Alpha*m.Alpha)
	}
}

// Residuals implements Model.
func (m *EWMA) Residuals() []float64 { return m.resid }

// SeasonalNaive forecasts each step with the value one period before it.
type SeasonalNaive struct {
	Period int
	Sigma2 float64 // mean squared seasonal difference
	last   []float64
	resid  []float64
}

// FitSeasonalNaive keeps the last period of y. A period of 1 is the naive
// (last value) forecast.
func FitSeasonalNaive(y []float64, period int) (*SeasonalNaive, error) {
	return new(Fitter).FitSeasonalNaive(y, period)
}

// FitSeasonalNaive is the package's FitSeasonalNaive on the fitter's
// buffers.
func (f *Fitter) FitSeasonalNaive(y []float64, period int) (*SeasonalNaive, error) {
	if err := checkSeries(y); err != nil {
		return nil, err
	}
	if period < 1 {
		return nil, fmt.Errorf("forecast: season of %d steps", period)
	}
	if len(y) < period {
		return nil, fmt.Errorf("forecast: a season of %d steps needs at least %d observations, have %d", period, period, len(y))
	}
	m := &f.sn
	*m = SeasonalNaive{Period: period, last: y[len(y)-period:]}
	m.resid = grow(f.buf, len(y)-period)
	f.buf = m.resid[:cap(m.resid)]
	ss := 0.0
	for t := period; t < len(y); t++ {
		e := y[t] - y[t-period]
		m.resid[t-period] = e
		ss += e * e
	}
	if len(m.resid) > 0 {
		m.Sigma2 = ss / float64(len(m.resid))
	}
	return m, nil
}

// Name implements Model.
func (m *SeasonalNaive) Name() string {
	if m.Period == 1 {
		return "naive"
	}
	return "seasonal-naive(" + strconv.Itoa(m.Period) + ")"
}

// Forecast implements Model.
func (m *SeasonalNaive) Forecast(dst []float64) {
	for h := range dst {
		dst[h] = m.last[h%m.Period]
	}
}

// Variance implements Model: σ² per whole period ahead.
func (m *SeasonalNaive) Variance(dst []float64) {
	for h := range dst {
		dst[h] = m.Sigma2 * float64(h/m.Period+1)
	}
}

// Residuals implements Model.
func (m *SeasonalNaive) Residuals() []float64 { return m.resid }

func (m *EWMA) minOrigin() int { return 1 }

// forecastFrom is the level after y[:origin]: the one-step residuals are
// the level's errors, so level(origin) = y[origin] − resid[origin−1].
func (m *EWMA) forecastFrom(y []float64, origin int, dst []float64) {
	level := y[0]
	if origin < len(y) {
		level = y[origin] - m.resid[origin-1]
	}
	for h := range dst {
		dst[h] = level
	}
}

func (m *SeasonalNaive) minOrigin() int { return m.Period }

func (m *SeasonalNaive) forecastFrom(y []float64, origin int, dst []float64) {
	for h := range dst {
		dst[h] = y[origin-m.Period+h%m.Period]
	}
}
