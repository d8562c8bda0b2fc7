package report

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"rackpool/api"
	"rackpool/internal/clock"
)

var t0 = time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)

// fake is a control plane that fails while fail says so.
type fake struct {
	fail   error
	got    []api.UsageSample
	pushes int
}

func (f *fake) push(_ context.Context, s []api.UsageSample) error {
	f.pushes++
	if len(s) > api.MaxUsageSamples {
		panic("a push larger than the API takes")
	}
	if f.fail != nil {
		return f.fail
	}
	f.got = append(f.got, s...)
	return nil
}

func newReporter(t *testing.T, f *fake, o Options) (*Reporter, *bytes.Buffer) {
	t.Helper()
	logs := &bytes.Buffer{}
	o.Interval = 10 * time.Second
	n := 0.0
	o.Sample = func(context.Context, time.Time) (map[string]float64, error) {
		n++
		return map[string]float64{"memory_used_bytes": n, "io_read_bytes_per_second": 2 * n}, nil
	}
	o.Push = f.push
	o.Logger = slog.New(slog.NewTextHandler(logs, nil))
	r, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	return r, logs
}

func TestPushesEveryInterval(t *testing.T) {
	f := &fake{}
	r, _ := newReporter(t, f, Options{})
	for i := range 3 {
		r.Step(context.Background(), t0.Add(time.Duration(i)*10*time.Second))
	}
	if len(f.got) != 6 || f.pushes != 3 || r.Buffered() != 0 {
		t.Fatalf("pushed %d samples in %d pushes, %d buffered", len(f.got), f.pushes, r.Buffered())
	}
	if f.got[0].MetricId != "io_read_bytes_per_second" || f.got[1].Value != 1 || !f.got[5].Timestamp.Equal(t0.Add(20*time.Second)) {
		t.Errorf("samples = %+v", f.got)
	}
}

// TestOutage: while pushes fail the samples are kept (up to the bound,
// oldest dropped first) and retried with a doubling backoff; once the
// control plane answers, everything kept arrives in order, in chunks.
func TestOutage(t *testing.T) {
	f := &fake{fail: errors.New("connection refused")}
	r, logs := newReporter(t, f, Options{MaxBuffered: 10, MaxBackoff: 40 * time.Second})
	now := t0
	var tries []time.Duration
	for range 12 {
		before := f.pushes
		r.Step(context.Background(), now)
		if f.pushes > before {
			tries = append(tries, now.Sub(t0))
		}
		now = now.Add(10 * time.Second)
	}
	// Tries at 0, then after 10, 20, 40, 40 s of backoff.
	want := []time.Duration{0, 10 * time.Second, 30 * time.Second, 70 * time.Second, 110 * time.Second}
	if len(tries) != len(want) {
		t.Fatalf("tried at %v, want %v", tries, want)
	}
	for i := range want {
		if tries[i] != want[i] {
			t.Fatalf("tried at %v, want %v", tries, want)
		}
	}
	if r.Buffered() != 10 {
		t.Fatalf("%d buffered, want the bound 10", r.Buffered())
	}
	if n := strings.Count(logs.String(), "usage push failed"); n != 1 {
		t.Errorf("failure logged %d times", n)
	}
	f.fail = nil
	r.next = time.Time{} // the backoff has passed
	r.Step(context.Background(), now)
	if len(f.got) != 10 || r.Buffered() != 0 { // the bound: 26 samples taken, 16 dropped
		t.Fatalf("after recovery: %d pushed, %d buffered", len(f.got), r.Buffered())
	}
	for i := 1; i < len(f.got); i++ {
		if f.got[i].Timestamp.Before(f.got[i-1].Timestamp) {
			t.Fatalf("samples out of order: %+v", f.got)
		}
	}
	if !strings.Contains(logs.String(), "usage push restored") || !strings.Contains(logs.String(), "samples=16") {
		t.Errorf("logs:\n%s", logs)
	}
}

func TestBadInputDropped(t *testing.T) {
	f := &fake{fail: &api.Error{Status: http.StatusBadRequest, Message: "value is negative"}}
	r, logs := newReporter(t, f, Options{})
	r.Step(context.Background(), t0)
	if r.Buffered() != 0 || !strings.Contains(logs.String(), "refused by the control plane") {
		t.Errorf("a refused push kept (%d buffered):\n%s", r.Buffered(), logs)
	}
	// 404 (the system is gone, or not this account's): kept, retried.
	f.fail = &api.Error{Status: http.StatusNotFound}
	r.Step(context.Background(), t0.Add(10*time.Second))
	if r.Buffered() != 2 {
		t.Errorf("after a 404: %d buffered", r.Buffered())
	}
}

func TestRunStopsAndFlushes(t *testing.T) {
	f := &fake{}
	clk := clock.NewManual(t0)
	r, _ := newReporter(t, f, Options{Clock: clk})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { r.Run(ctx); close(done) }()
	cancel()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not stop")
	}
	if len(f.got) != 2 {
		t.Errorf("pushed %d samples, want the first step's 2", len(f.got))
	}
}

func TestNewRequires(t *testing.T) {
	if _, err := New(Options{}); err == nil {
		t.Error("New without interval, sample and push")
	}
}

func TestChunks(t *testing.T) {
	f := &fake{fail: errors.New("down")}
	r, _ := newReporter(t, f, Options{MaxBackoff: time.Hour})
	now := t0
	for range 2100 {
		r.Step(context.Background(), now)
		now = now.Add(10 * time.Second)
	}
	f.fail, r.next = nil, time.Time{}
	before := f.pushes
	r.Step(context.Background(), now)
	if len(f.got) != 4202 || f.pushes-before != 2 {
		t.Errorf("%d samples in %d pushes", len(f.got), f.pushes-before)
	}
}
