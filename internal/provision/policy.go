// Package provision decides how much of a resource each consumer should
// hold, ahead of its demand (P0 §8): it observes a window of recent usage,
// forecasts the peak of the next prediction window (internal/forecast), and
// grows at once or shrinks with hysteresis and a minimum hold. The same
// rules run offline on traces (Evaluate, `rackpool provision eval`) against
// the baselines — static peak, reactive, and an oracle that knows the
// future — and live in `serve` (Loop), where a decision becomes a placement
// and a store plan like any other change.
package provision

import (
	"errors"
	"fmt"
	"math"
	"slices"

	"rackpool/internal/forecast"
)

// Policy names how a target is chosen.
type Policy string

// The policies. Only Reactive and Predictive can run live: StaticPeak and
// Oracle look at the future and exist to bound the others offline.
const (
	// StaticPeak holds each consumer at its own lifetime peak: what a
	// server provisioned for its job's peak holds.
	StaticPeak Policy = "static-peak"
	// Reactive follows the last observed use plus Headroom.
	Reactive Policy = "reactive"
	// Predictive provisions for the forecast peak of the prediction
	// window at the rules' upper quantile, never below the last observed
	// use.
	Predictive Policy = "predictive"
	// Oracle provisions for the true peak of the prediction window: the
	// ceiling of any forecast with that horizon.
	Oracle Policy = "oracle"
)

// Policies lists the policies, for flags and errors.
var Policies = []Policy{StaticPeak, Reactive, Predictive, Oracle}

// ParsePolicy checks a policy name.
func ParsePolicy(s string) (Policy, error) {
	p := Policy(s)
	if !slices.Contains(Policies, p) {
		return "", fmt.Errorf("unknown policy %q (one of %v)", s, Policies)
	}
	return p, nil
}

// Rules are the knobs shared by every policy. Zero fields take the
// defaults named.
type Rules struct {
	// Window is the observation window w in steps: how much history the
	// forecast is fitted on (default 128).
	Window int
	// Horizon is the prediction window in steps: a decision provisions for
	// the peak of the next Horizon steps (default 2). A horizon as long as
	// the job is peak provisioning.
	Horizon int
	// Lead is how many steps a change takes to be in force (default 1: a
	// decision made at the end of a step holds from the next one). Growing
	// pooled memory is not instant — placement, the fabric's attach, the
	// host bringing it online — and a provisioner that only reacts pays for
	// that time in shortfall or in headroom. Lead must not exceed Horizon,
	// so a decision covers every step until the next one is in force.
	Lead int
	// Granule is the unit resources are provisioned in (default 1): a
	// target is rounded up to a multiple of it (memory blocks, lease
	// sizes, whole GPUs).
	Granule float64
	// Headroom is the reactive policy's margin over the last observed use,
	// as a fraction (default 0.1).
	Headroom float64
	// Hysteresis is how far below the current level a target must be
	// before the level shrinks, as a fraction of the current level
	// (default 0.1); growth is never delayed.
	Hysteresis float64
	// MinHold is how many steps a level is held before it may shrink
	// (default Horizon).
	MinHold int
	// Forecast configures the predictive policy's model; its Horizon is
	// the rules'. A zero Method means DefaultForecast.
	Forecast forecast.Config
}

// DefaultForecast is the predictive policy's model unless the rules name
// one: an AR of the log growth rate (ARIMA(p,1,0) on log demand) with the
// order chosen by AIC up to 32, its window-peak margin at the 0.99 quantile
// of its own relative peak errors, and the peak never below the last use.
// docs/provisioning.md shows how it was chosen and what the others do.
var DefaultForecast = forecast.Config{Method: forecast.MethodAR, MaxLag: 32, Quantile: 0.99, Growth: true, FloorAtLast: true}

// WithDefaults returns the rules with their zero fields filled, or an error
// naming the first invalid one.
func (r Rules) WithDefaults() (Rules, error) {
	if r.Window == 0 {
		r.Window = 128
	}
	if r.Horizon == 0 {
		r.Horizon = 2
	}
	if r.Forecast.Method == "" {
		r.Forecast = DefaultForecast
	}
	if r.Granule == 0 {
		r.Granule = 1
	}
	if r.Lead == 0 {
		r.Lead = 1
	}
	if r.Headroom == 0 {
		r.Headroom = 0.1
	}
	if r.Hysteresis == 0 {
		r.Hysteresis = 0.1
	}
	if r.MinHold == 0 {
		r.MinHold = r.Horizon
	}
	r.Forecast.Horizon = r.Horizon
	switch {
	case r.Window < 2 || r.Window > 1<<16:
		return r, fmt.Errorf("observation window of %d steps is outside 2..65536", r.Window)
	case r.Horizon < 1 || r.Horizon > 1<<16:
		return r, fmt.Errorf("prediction window of %d steps is outside 1..65536", r.Horizon)
	case r.Lead < 1 || r.Lead > r.Horizon:
		return r, fmt.Errorf("lead of %d steps is outside 1..%d (the prediction window)", r.Lead, r.Horizon)
	case !(r.Granule > 0) || math.IsInf(r.Granule, 0):
		return r, fmt.Errorf("granule %v must be a positive number", r.Granule)
	case r.Headroom < 0 || r.Headroom > 10:
		return r, fmt.Errorf("headroom %v is outside 0..10", r.Headroom)
	case r.Hysteresis < 0 || r.Hysteresis >= 1:
		return r, fmt.Errorf("hysteresis %v is outside [0, 1)", r.Hysteresis)
	case r.MinHold < 0:
		return r, errors.New("minimum hold must not be negative")
	}
	if _, err := forecast.NewPredictor(r.Forecast); err != nil {
		return r, err
	}
	return r, nil
}

// Action is what a decision does to the level.
type Action string

// The actions.
const (
	Hold   Action = "hold"
	Grow   Action = "grow"
	Shrink Action = "shrink"
)

// Decision is one step's outcome, with what it was decided from: every
// live decision is explained and audited with these fields.
type Decision struct {
	Action Action  `json:"action"`
	From   float64 `json:"from"`
	To     float64 `json:"to"`
	// Target is what the policy asked for before rounding and hysteresis.
	Target float64 `json:"target"`
	// LastUse is the most recent observation: the floor of every level.
	LastUse float64 `json:"last_use"`
	// Observed is the window's size, minimum and maximum.
	Observed      int     `json:"observed"`
	ObservedMin   float64 `json:"observed_min"`
	ObservedMax   float64 `json:"observed_max"`
	Model         string  `json:"model,omitempty"`
	Fallback      string  `json:"fallback,omitempty"`
	ForecastPeak  float64 `json:"forecast_peak,omitempty"`
	ForecastUpper float64 `json:"forecast_upper,omitempty"`
	// Warmup says the history was too short to calibrate the forecast's
	// margin, so the reactive headroom applied too.
	Warmup bool `json:"warmup,omitempty"`
	// Reason says in words why the action, e.g. "held: target within
	// hysteresis".
	Reason string `json:"reason"`
}

// Decider applies the rules for one policy. It keeps a predictor and its
// buffers; not safe for concurrent use (one per worker).
type Decider struct {
	policy Policy
	rules  Rules
	pred   *forecast.Predictor
}

// NewDecider checks the rules for a live-capable policy (Reactive or
// Predictive).
func NewDecider(policy Policy, rules Rules) (*Decider, error) {
	if policy != Reactive && policy != Predictive {
		return nil, fmt.Errorf("policy %q sees the future and cannot decide live", policy)
	}
	r, err := rules.WithDefaults()
	if err != nil {
		return nil, err
	}
	d := &Decider{policy: policy, rules: r}
	if d.pred, err = forecast.NewPredictor(r.Forecast); err != nil {
		return nil, err
	}
	return d, nil
}

// Rules returns the decider's rules with defaults filled.
func (d *Decider) Rules() Rules { return d.rules }

// Decide takes the current level, how many steps it has been held, and the
// observed history (oldest first; only its last Window values are used),
// and returns the next level with its explanation. It never returns a
// level below the last observed use.
func (d *Decider) Decide(current float64, held int, history []float64) (Decision, error) {
	if len(history) == 0 {
		return Decision{}, errors.New("no observations")
	}
	w := history[max(0, len(history)-d.rules.Window):]
	dec := Decision{From: current, LastUse: w[len(w)-1], Observed: len(w),
		ObservedMin: slices.Min(w), ObservedMax: slices.Max(w)}
	switch d.policy {
	case Reactive:
		dec.Target = dec.LastUse * (1 + d.rules.Headroom)
	case Predictive:
		p, err := d.pred.Predict(w)
		if err != nil {
			return Decision{}, err
		}
		dec.Model, dec.Fallback = p.Model, p.Fallback
		dec.ForecastPeak, dec.ForecastUpper = p.Peak, p.PeakUpper
		dec.Target = max(p.PeakUpper, dec.LastUse)
		if !p.Calibrated {
			// Too little history to measure the model's errors: keep the
			// reactive headroom as well until there is.
			dec.Warmup = true
			dec.Target = max(dec.Target, dec.LastUse*(1+d.rules.Headroom))
		}
	}
	d.rules.apply(&dec, held)
	return dec, nil
}

// apply turns a target into the next level: rounded up to the granule,
// grown at once, shrunk only past the hysteresis after the minimum hold,
// never below the last observed use.
func (r Rules) apply(dec *Decision, held int) {
	floor := r.round(dec.LastUse)
	want := max(r.round(dec.Target), floor)
	switch {
	case want > dec.From:
		dec.Action, dec.To = Grow, want
		dec.Reason = "grow: target above the current level"
	case dec.From < floor:
		dec.Action, dec.To = Grow, floor
		dec.Reason = "grow: use above the current level"
	case want >= dec.From*(1-r.Hysteresis):
		dec.Action, dec.To = Hold, dec.From
		dec.Reason = "hold: target within the hysteresis band"
	case held < r.MinHold:
		dec.Action, dec.To = Hold, dec.From
		dec.Reason = fmt.Sprintf("hold: level held %d of the minimum %d steps", held, r.MinHold)
	default:
		dec.Action, dec.To = Shrink, want
		dec.Reason = "shrink: target below the hysteresis band"
	}
	if dec.To == dec.From {
		dec.Action = Hold
	}
}

// round rounds v up to a whole number of granules (with a little slack for
// floating-point noise).
func (r Rules) round(v float64) float64 {
	if v <= 0 {
		return 0
	}
	return math.Ceil(v/r.Granule-1e-9) * r.Granule
}
