package cache

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"rackpool/internal/clock"
)

// stepSizer asks for next on every sample and records the samples.
type stepSizer struct {
	mu      sync.Mutex
	size    int64
	next    int64
	samples []int64
	applied []int64
}

func (s *stepSizer) Size() int64 { s.mu.Lock(); defer s.mu.Unlock(); return s.size }
func (s *stepSizer) Decide(demand int64) (int64, bool, string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.samples = append(s.samples, demand)
	return s.next, s.next != s.size, fmt.Sprintf("grow %d → %d", s.size, s.next)
}
func (s *stepSizer) Applied(size int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.size = size
	s.applied = append(s.applied, size)
}

// leaseFunc is a LeaseResizer of a function.
type leaseFunc func(ctx context.Context, size uint64) error

func (f leaseFunc) Resize(ctx context.Context, size uint64) error { return f(ctx, size) }

// TestAutoSizeStep: the working set is the remote log's live bytes plus
// what it evicted since the last step; a decision to change resizes the
// lease, and only a resize that succeeded is applied.
func TestAutoSizeStep(t *testing.T) {
	r := newMemRemote(256 << 10)
	c := mustNew(t, tierOpts(r, 256<<10))
	var logs bytes.Buffer
	sz := &stepSizer{size: 256 << 10, next: 512 << 10}
	var resized []uint64
	fail := errors.New("no memory node has room")
	var err error
	a := &autoSizer{c: c, o: AutoSizeOptions{Sizer: sz, Lease: leaseFunc(func(_ context.Context, n uint64) error {
		resized = append(resized, n)
		return err
	}), Logger: slog.New(slog.NewTextHandler(&logs, nil))}}
	for i := range 1200 { // more than the log holds: it evicts
		cset(c, fmt.Sprintf("key%d", i), value("k", i, 1000))
	}
	st := c.Stats()
	if st.RemoteEvictedBytes == 0 {
		t.Fatalf("the remote log evicted nothing: %+v", st)
	}
	err = fail
	a.step(context.Background())
	if want := st.RemoteBytes + st.RemoteEvictedBytes; len(sz.samples) != 1 || sz.samples[0] != want {
		t.Fatalf("samples %v, want live %d + evicted %d", sz.samples, st.RemoteBytes, st.RemoteEvictedBytes)
	}
	if len(resized) != 1 || resized[0] != 512<<10 || len(sz.applied) != 0 {
		t.Errorf("a failed resize: resized %v, applied %v", resized, sz.applied)
	}
	if !strings.Contains(logs.String(), "remote tier not resized") || !strings.Contains(logs.String(), "no memory node has room") {
		t.Errorf("log %q", logs.String())
	}
	err = nil
	a.step(context.Background())
	// Nothing was evicted since: the sample is the live bytes alone.
	if len(sz.samples) != 2 || sz.samples[1] != c.Stats().RemoteBytes {
		t.Errorf("second sample %v, want the live bytes %d", sz.samples, c.Stats().RemoteBytes)
	}
	if len(sz.applied) != 1 || sz.applied[0] != 512<<10 {
		t.Errorf("applied %v after a resize that succeeded", sz.applied)
	}
	a.step(context.Background()) // no change asked: no resize
	if len(resized) != 2 {
		t.Errorf("resized %v when the sizer held", resized)
	}
}

// TestAutoSizeRuns: AutoSize samples on the steps of its clock and stops
// with its context.
func TestAutoSizeRuns(t *testing.T) {
	c := mustNew(t, tierOpts(newMemRemote(256<<10), 256<<10))
	clk := clock.NewManual(time.Unix(0, 0))
	sz := &stepSizer{size: 1, next: 1}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		c.AutoSize(ctx, AutoSizeOptions{Sizer: sz, Lease: leaseFunc(func(context.Context, uint64) error { return nil }), Step: 10 * time.Second, Clock: clk})
		close(done)
	}()
	samples := func() int { sz.mu.Lock(); defer sz.mu.Unlock(); return len(sz.samples) }
	for want := 1; want <= 3; want++ {
		deadline := time.Now().Add(10 * time.Second)
		for samples() < want {
			clk.Advance(10 * time.Second) // also covers a ticker made after an earlier Advance
			time.Sleep(time.Millisecond)
			if time.Now().After(deadline) {
				t.Fatalf("%d samples, want %d", samples(), want)
			}
		}
	}
	cancel()
	<-done
}
