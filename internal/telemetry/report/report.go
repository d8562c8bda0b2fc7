// Package report is the client side of usage telemetry: a Reporter takes
// a sample of its source every interval (rackpool agent: the host;
// rackpool cache: its remote tier) and pushes the samples to the control
// plane, batching what has piled up.
//
// When a push fails the samples stay in a bounded buffer (the oldest are
// dropped first, and counted) and are pushed again later, with a backoff
// that doubles from one interval up to MaxBackoff; the control plane skips
// samples it already has, so a push whose answer was lost can be repeated
// safely. A push the control plane refuses as bad input (400) is dropped:
// sending it again would be refused again. Errors are logged once per run
// of failures, without credentials (the API client's errors carry none).
package report

import (
	"context"
	"errors"
	"log/slog"
	"maps"
	"net/http"
	"slices"
	"time"

	"rackpool/api"
	"rackpool/internal/clock"
)

// Defaults of Options.
const (
	DefaultMaxBuffered = 8640
	DefaultMaxBackoff  = 5 * time.Minute
)

// Options configure a Reporter.
type Options struct {
	// Interval between samples (and pushes while they succeed). Required.
	Interval time.Duration
	// Sample reads the source now: metric name → value. An error skips
	// this sample.
	Sample func(ctx context.Context, now time.Time) (map[string]float64, error)
	// Push sends samples, oldest first, at most api.MaxUsageSamples.
	Push func(ctx context.Context, samples []api.UsageSample) error
	// MaxBuffered bounds the samples kept while pushes fail; default
	// 8640.
	MaxBuffered int
	// MaxBackoff bounds the wait between failed pushes; default 5 min.
	MaxBackoff time.Duration
	// Clock; default clock.Real{}.
	Clock clock.Clock
	// Logger; default discard.
	Logger *slog.Logger
}

// Reporter samples and pushes. Step is not safe for concurrent use; Run
// calls it from one goroutine.
type Reporter struct {
	o       Options
	buf     []api.UsageSample
	dropped int // samples dropped from a full buffer, not yet logged
	backoff time.Duration
	next    time.Time // no push before this
	failing bool      // the last push failed (logged once)
	sampErr bool      // the last sample failed (logged once)
}

// New returns a Reporter.
func New(o Options) (*Reporter, error) {
	if o.Interval <= 0 || o.Sample == nil || o.Push == nil {
		return nil, errors.New("report: Interval, Sample and Push are required")
	}
	if o.MaxBuffered <= 0 {
		o.MaxBuffered = DefaultMaxBuffered
	}
	if o.MaxBackoff <= 0 {
		o.MaxBackoff = DefaultMaxBackoff
	}
	if o.Clock == nil {
		o.Clock = clock.Real{}
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return &Reporter{o: o}, nil
}

// Buffered returns the samples waiting to be pushed.
func (r *Reporter) Buffered() int { return len(r.buf) }

// Run steps every interval until ctx ends, then tries once (for at most
// a few seconds) to push what is left.
func (r *Reporter) Run(ctx context.Context) {
	t := clock.NewTicker(r.o.Clock, r.o.Interval)
	defer t.Stop()
	r.Step(ctx, r.o.Clock.Now())
	for {
		select {
		case <-ctx.Done():
			if len(r.buf) > 0 {
				fctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
				r.next = time.Time{}
				r.flush(fctx, r.o.Clock.Now())
				cancel()
			}
			return
		case now := <-t.C():
			r.Step(ctx, now)
		}
	}
}

// Step takes one sample at now and pushes what is buffered, unless a
// failed push's backoff has not passed.
func (r *Reporter) Step(ctx context.Context, now time.Time) {
	vals, err := r.o.Sample(ctx, now)
	switch {
	case err != nil:
		if !r.sampErr {
			r.o.Logger.Warn("usage not read; retrying every interval", "err", err)
		}
		r.sampErr = true
	default:
		if r.sampErr {
			r.o.Logger.Info("usage read again")
		}
		r.sampErr = false
		for _, m := range slices.Sorted(maps.Keys(vals)) {
			r.buf = append(r.buf, api.UsageSample{MetricId: m, Timestamp: now, Value: vals[m]})
		}
		if over := len(r.buf) - r.o.MaxBuffered; over > 0 {
			r.buf = slices.Delete(r.buf, 0, over)
			r.dropped += over
		}
	}
	r.flush(ctx, now)
}

// flush pushes the buffer in chunks, oldest first, stopping at the first
// failure.
func (r *Reporter) flush(ctx context.Context, now time.Time) {
	if len(r.buf) == 0 || now.Before(r.next) {
		return
	}
	for len(r.buf) > 0 {
		n := min(len(r.buf), api.MaxUsageSamples)
		err := r.o.Push(ctx, r.buf[:n])
		var ae *api.Error
		switch {
		case err == nil:
		case errors.As(err, &ae) && ae.Status == http.StatusBadRequest:
			// Refused as bad input: it would be refused again.
			r.o.Logger.Error("usage samples refused by the control plane; dropped", "samples", n, "err", err)
		default:
			if !r.failing {
				r.o.Logger.Warn("usage push failed; keeping the samples and retrying with backoff", "buffered", len(r.buf), "err", err)
			}
			r.failing = true
			r.backoff = min(max(2*r.backoff, r.o.Interval), r.o.MaxBackoff)
			r.next = now.Add(r.backoff)
			return
		}
		r.buf = slices.Delete(r.buf, 0, n)
	}
	if r.failing {
		r.o.Logger.Info("usage push restored")
	}
	if r.dropped > 0 {
		r.o.Logger.Warn("usage samples dropped while the control plane could not be reached (buffer full)", "samples", r.dropped)
		r.dropped = 0
	}
	r.failing, r.backoff, r.next = false, 0, time.Time{}
}
