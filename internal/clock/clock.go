// Package clock provides the Clock interface used wherever rackpool waits or
// reads the time, with a real implementation and a manual one for tests and
// for virtual-time simulation.
package clock

import (
	"context"
	"sync"
	"time"
)

// Clock is the source of time for fabrics, reservations and sessions.
type Clock interface {
	Now() time.Time
	// Sleep blocks until d has elapsed on this clock.
	Sleep(d time.Duration)
}

// Real is the wall clock.
type Real struct{}

var _ Clock = Real{}

// Now returns time.Now.
func (Real) Now() time.Time { return time.Now() }

// Sleep calls time.Sleep.
func (Real) Sleep(d time.Duration) { time.Sleep(d) }

// SleepContext is c.Sleep(d) that ends early, with ctx's error, when ctx
// ends. Only the wall clock waits, so only its sleep is cut short; a Manual
// clock advances at once and an Instant one does not wait, and both then
// report ctx's error, if any.
func SleepContext(ctx context.Context, c Clock, d time.Duration) error {
	if _, real := c.(Real); real && d > 0 {
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
			return nil
		}
	}
	c.Sleep(d)
	return ctx.Err()
}

// Manual is a clock that only moves when told to. Sleep advances it instead of
// blocking, so code that models hardware delays runs instantly while still
// accounting for the modelled time. It is safe for concurrent use.
type Manual struct {
	mu      sync.Mutex
	now     time.Time
	tickers map[*manualTicker]struct{}
}

var _ Clock = (*Manual)(nil)

// NewManual returns a manual clock set to start.
func NewManual(start time.Time) *Manual { return &Manual{now: start} }

// Now returns the clock's current time.
func (m *Manual) Now() time.Time {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.now
}

// Sleep advances the clock by d and returns at once.
func (m *Manual) Sleep(d time.Duration) { m.Advance(d) }

// Advance moves the clock forward by d and fires the tickers that came
// due (once each, however many periods passed: like time.Ticker, a slow
// reader loses ticks rather than getting a burst).
func (m *Manual) Advance(d time.Duration) {
	if d <= 0 {
		return
	}
	m.mu.Lock()
	m.now = m.now.Add(d)
	now := m.now
	for t := range m.tickers {
		if now.Before(t.next) {
			continue
		}
		for !now.Before(t.next) {
			t.next = t.next.Add(t.period)
		}
		select {
		case t.c <- now:
		default:
		}
	}
	m.mu.Unlock()
}

// Ticker delivers the time on C every period of its clock until Stop.
type Ticker interface {
	C() <-chan time.Time
	Stop()
}

// NewTicker returns a ticker on c: a time.Ticker for a clock that reads
// the wall clock, and for a Manual clock one that ticks as Advance (or
// Sleep) moves it past each period. Background loops (expiry, heartbeats,
// fabric polling) take their ticker from their injected clock, so tests
// drive them by advancing it. period must be positive.
func NewTicker(c Clock, period time.Duration) Ticker {
	if period <= 0 {
		panic("clock: non-positive ticker period")
	}
	if m, ok := c.(*Manual); ok {
		return m.newTicker(period)
	}
	return realTicker{time.NewTicker(period)}
}

type realTicker struct{ t *time.Ticker }

func (r realTicker) C() <-chan time.Time { return r.t.C }
func (r realTicker) Stop()               { r.t.Stop() }

type manualTicker struct {
	m      *Manual
	period time.Duration
	next   time.Time
	c      chan time.Time
}

func (m *Manual) newTicker(period time.Duration) *manualTicker {
	m.mu.Lock()
	defer m.mu.Unlock()
	t := &manualTicker{m: m, period: period, next: m.now.Add(period), c: make(chan time.Time, 1)}
	if m.tickers == nil {
		m.tickers = map[*manualTicker]struct{}{}
	}
	m.tickers[t] = struct{}{}
	return t
}

func (t *manualTicker) C() <-chan time.Time { return t.c }

func (t *manualTicker) Stop() {
	t.m.mu.Lock()
	delete(t.m.tickers, t)
	t.m.mu.Unlock()
}

// Instant reads the wall clock but never waits: Sleep returns at once. The
// control plane gives it to emulated fabrics to leave their modelled
// reconfiguration times out of wall-clock latency (benchmarks, tests).
type Instant struct{}

var _ Clock = Instant{}

// Now returns time.Now.
func (Instant) Now() time.Time { return time.Now() }

// Sleep returns at once.
func (Instant) Sleep(time.Duration) {}
