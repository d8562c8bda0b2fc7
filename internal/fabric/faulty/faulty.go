// Package faulty wraps any fabric.Driver in a decorator that injects
// failures the wrapped driver would not produce on its own: the N-th attach
// failing, attaches failing at random with a seeded (so repeatable)
// probability, detaches failing, and extra latency on a clock. It records
// every call so tests can check what the control plane asked of the fabric.
//
// Injected failures wrap fabric.ErrInjected and never reach the wrapped
// driver, so they change nothing. The decorator forwards the optional
// fabric.StatsReporter, fabric.FaultInjector and fabric.LatencyReporter
// capabilities when the wrapped driver has them.
package faulty

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"rackpool/internal/clock"
	"rackpool/internal/fabric"
)

// Op names a recorded driver call.
type Op string

// Recorded operations.
const (
	OpAttach   Op = "attach"
	OpDetach   Op = "detach"
	OpDiscover Op = "discover"
)

// Call is one recorded call and its outcome.
type Call struct {
	Op         Op
	Attachment fabric.Attachment // zero for Discover
	Result     fabric.Result
	Err        error
	Injected   bool // the decorator failed the call; the inner driver never saw it
}

// Driver is the fault-injecting decorator. Its methods are safe for
// concurrent use; the injection settings may be changed at any time.
type Driver struct {
	inner fabric.Driver

	mu           sync.Mutex
	attaches     int          // Attach calls seen
	failAttachAt map[int]bool // attach ordinals (1-based) to fail
	prob         float64
	rng          *rand.Rand
	failDetaches int // the next this many detaches fail
	clk          clock.Clock
	latency      time.Duration
	calls        []Call
}

var (
	_ fabric.Driver          = (*Driver)(nil)
	_ fabric.StatsReporter   = (*Driver)(nil)
	_ fabric.FaultInjector   = (*Driver)(nil)
	_ fabric.LatencyReporter = (*Driver)(nil)
)

// Wrap returns a decorator around d that injects nothing until told to.
func Wrap(d fabric.Driver) *Driver {
	return &Driver{inner: d, failAttachAt: map[int]bool{}}
}

// Unwrap returns the wrapped driver.
func (d *Driver) Unwrap() fabric.Driver { return d.inner }

// FailNthAttach makes the n-th Attach call from now on fail (1 = the next
// one). Calls accumulate: FailNthAttach(1) then FailNthAttach(3) fails the
// next call and the one two after it.
func (d *Driver) FailNthAttach(n int) {
	if n < 1 {
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	d.failAttachAt[d.attaches+n] = true
}

// FailAttachesWithProbability makes every Attach fail with probability p,
// drawn from rng so that a seeded rng gives the same failures every run.
// p <= 0 or a nil rng turns it off.
func (d *Driver) FailAttachesWithProbability(p float64, rng *rand.Rand) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if rng == nil {
		p = 0
	}
	d.prob, d.rng = p, rng
}

// FailNextDetaches makes the next n Detach calls fail.
func (d *Driver) FailNextDetaches(n int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.failDetaches = max(n, 0)
}

// SetLatency adds latency, slept on clk, before every Attach and Detach
// (injected failures included). A nil clk or zero latency turns it off.
func (d *Driver) SetLatency(clk clock.Clock, latency time.Duration) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.clk, d.latency = clk, latency
}

// Reset disarms the decorator's own failures and latency and forgets the
// recorded calls. It leaves the wrapped driver alone.
func (d *Driver) Reset() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.failAttachAt = map[int]bool{}
	d.prob, d.rng = 0, nil
	d.failDetaches = 0
	d.clk, d.latency = nil, 0
	d.calls = nil
}

// Calls returns the recorded calls in the order they completed.
func (d *Driver) Calls() []Call {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Clone(d.calls)
}

func (d *Driver) record(c Call) {
	d.mu.Lock()
	d.calls = append(d.calls, c)
	d.mu.Unlock()
}

func (d *Driver) sleep() {
	d.mu.Lock()
	clk, lat := d.clk, d.latency
	d.mu.Unlock()
	if clk != nil && lat > 0 {
		clk.Sleep(lat)
	}
}

// Attach forwards to the wrapped driver unless an injected failure fires.
func (d *Driver) Attach(ctx context.Context, a fabric.Attachment) (fabric.Result, error) {
	d.mu.Lock()
	d.attaches++
	n := d.attaches
	fail := d.failAttachAt[n]
	delete(d.failAttachAt, n)
	if !fail && d.prob > 0 {
		fail = d.rng.Float64() < d.prob
	}
	d.mu.Unlock()
	d.sleep()
	if fail {
		err := fmt.Errorf("attach %s to %s/%s: faulty: attach #%d: %w", a.Block, a.Host, a.HostPort, n, fabric.ErrInjected)
		d.record(Call{Op: OpAttach, Attachment: a, Err: err, Injected: true})
		return fabric.Result{}, err
	}
	r, err := d.inner.Attach(ctx, a)
	d.record(Call{Op: OpAttach, Attachment: a, Result: r, Err: err})
	return r, err
}

// Detach forwards to the wrapped driver unless an injected failure fires.
func (d *Driver) Detach(ctx context.Context, a fabric.Attachment) (fabric.Result, error) {
	d.mu.Lock()
	fail := d.failDetaches > 0
	if fail {
		d.failDetaches--
	}
	d.mu.Unlock()
	d.sleep()
	if fail {
		err := fmt.Errorf("detach %s from %s/%s: faulty: %w", a.Block, a.Host, a.HostPort, fabric.ErrInjected)
		d.record(Call{Op: OpDetach, Attachment: a, Err: err, Injected: true})
		return fabric.Result{}, err
	}
	r, err := d.inner.Detach(ctx, a)
	d.record(Call{Op: OpDetach, Attachment: a, Result: r, Err: err})
	return r, err
}

// Discover forwards to the wrapped driver.
func (d *Driver) Discover(ctx context.Context) (fabric.State, error) {
	st, err := d.inner.Discover(ctx)
	d.record(Call{Op: OpDiscover, Err: err})
	return st, err
}

// Stats forwards to the wrapped driver's fabric.StatsReporter, or fails
// with errors.ErrUnsupported when it has none.
func (d *Driver) Stats(ctx context.Context) ([]fabric.DeviceStats, error) {
	sr, ok := d.inner.(fabric.StatsReporter)
	if !ok {
		return nil, fmt.Errorf("stats: %T: %w", d.inner, errors.ErrUnsupported)
	}
	return sr.Stats(ctx)
}

// Latency forwards to the wrapped driver's fabric.LatencyReporter, or
// fails with errors.ErrUnsupported when it has none.
func (d *Driver) Latency(ctx context.Context, a fabric.Attachment) (fabric.Latency, error) {
	lr, ok := d.inner.(fabric.LatencyReporter)
	if !ok {
		return fabric.Latency{}, fmt.Errorf("latency: %T: %w", d.inner, errors.ErrUnsupported)
	}
	return lr.Latency(ctx, a)
}

// InjectFault forwards to the wrapped driver's fabric.FaultInjector, or
// fails with errors.ErrUnsupported when it has none.
func (d *Driver) InjectFault(f fabric.Fault) error {
	fi, ok := d.inner.(fabric.FaultInjector)
	if !ok {
		return fmt.Errorf("inject %s: %T: %w", f.Kind, d.inner, errors.ErrUnsupported)
	}
	return fi.InjectFault(f)
}

// ClearFaults clears the wrapped driver's faults when it is a
// fabric.FaultInjector. The decorator's own failures are disarmed by Reset.
func (d *Driver) ClearFaults() {
	if fi, ok := d.inner.(fabric.FaultInjector); ok {
		fi.ClearFaults()
	}
}
