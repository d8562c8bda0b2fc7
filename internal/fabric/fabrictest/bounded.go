package fabrictest

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"rackpool/internal/fabric"
)

// Bounds on every call the suite makes to a driver. Each call's context
// ends after CallTimeout; a call still running CallGrace after that (a
// driver that ignores its context, or waits on something that never
// comes) fails the subtest with what it waited for, instead of holding
// the suite until the test binary's timeout. The calls without a context
// (InjectFault, ClearFaults) get the same bound.
const (
	CallTimeout = 2 * time.Minute
	CallGrace   = time.Minute
)

// ErrNoReturn is the error of a driver call that did not return within
// its bound (see CallTimeout).
var ErrNoReturn = errors.New("the driver did not return")

// bounded runs op with a context that ends after timeout and waits for it
// at most grace beyond that. A call that does not return is left running
// (its result is dropped) and reported with ErrNoReturn; what names the
// call.
func bounded[T any](what string, timeout, grace time.Duration, op func(ctx context.Context) (T, error)) (T, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	type result struct {
		v   T
		err error
	}
	done := make(chan result, 1)
	go func() {
		v, err := op(ctx)
		done <- result{v, err}
	}()
	timer := time.NewTimer(timeout + grace)
	defer timer.Stop()
	select {
	case r := <-done:
		return r.v, r.err
	case <-timer.C:
		var zero T
		return zero, fmt.Errorf("%s: %w %s after its context's deadline of %s ended", what, ErrNoReturn, grace, timeout)
	}
}

func call[T any](what string, op func(ctx context.Context) (T, error)) (T, error) {
	return bounded(what, CallTimeout, CallGrace, op)
}

func callAttach(d fabric.Driver, a fabric.Attachment) (fabric.Result, error) {
	return call(fmt.Sprintf("Attach(%v)", a), func(ctx context.Context) (fabric.Result, error) { return d.Attach(ctx, a) })
}

func callDetach(d fabric.Driver, a fabric.Attachment) (fabric.Result, error) {
	return call(fmt.Sprintf("Detach(%v)", a), func(ctx context.Context) (fabric.Result, error) { return d.Detach(ctx, a) })
}

func callDiscover(d fabric.Driver) (fabric.State, error) {
	return call("Discover", d.Discover)
}

func callLatency(lr fabric.LatencyReporter, a fabric.Attachment) (fabric.Latency, error) {
	return call(fmt.Sprintf("Latency(%v)", a), func(ctx context.Context) (fabric.Latency, error) { return lr.Latency(ctx, a) })
}

func callInject(fi fabric.FaultInjector, f fabric.Fault) error {
	_, err := call(fmt.Sprintf("InjectFault(%+v)", f), func(context.Context) (struct{}, error) {
		return struct{}{}, fi.InjectFault(f)
	})
	return err
}

// clearFaults calls fi.ClearFaults and fails t when it does not return.
func clearFaults(t *testing.T, fi fabric.FaultInjector) {
	t.Helper()
	if _, err := call("ClearFaults", func(context.Context) (struct{}, error) {
		fi.ClearFaults()
		return struct{}{}, nil
	}); err != nil {
		t.Fatal(err)
	}
}
