// Package clock provides the Clock interface used wherever rackpool waits or
// reads the time, with a real implementation and a manual one for tests and
// for virtual-time simulation.
package clock

import (
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

// Manual is a clock that only moves when told to. Sleep advances it instead of
// blocking, so code that models hardware delays runs instantly while still
// accounting for the modelled time. It is safe for concurrent use.
type Manual struct {
	mu  sync.Mutex
	now time.Time
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

// Advance moves the clock forward by d.
func (m *Manual) Advance(d time.Duration) {
	if d <= 0 {
		return
	}
	m.mu.Lock()
	m.now = m.now.Add(d)
	m.mu.Unlock()
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
