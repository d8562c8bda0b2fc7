package clock_test

import (
	"context"
	"testing"
	"time"

	"rackpool/internal/clock"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func ticked(t clock.Ticker) (time.Time, bool) {
	select {
	case at := <-t.C():
		return at, true
	default:
		return time.Time{}, false
	}
}

func TestManualTicker(t *testing.T) {
	m := clock.NewManual(t0)
	tk := clock.NewTicker(m, 10*time.Second)
	m.Advance(9 * time.Second)
	if _, ok := ticked(tk); ok {
		t.Fatal("ticked before its period")
	}
	m.Advance(time.Second)
	if at, ok := ticked(tk); !ok || !at.Equal(t0.Add(10*time.Second)) {
		t.Fatalf("at the period: %v %v", at, ok)
	}
	// Three periods at once: one tick (a slow reader loses ticks), and
	// the next is due on the period grid.
	m.Advance(35 * time.Second)
	if _, ok := ticked(tk); !ok {
		t.Fatal("no tick after three periods")
	}
	if _, ok := ticked(tk); ok {
		t.Fatal("a burst of ticks")
	}
	m.Advance(4 * time.Second) // 49 s
	if _, ok := ticked(tk); ok {
		t.Fatal("ticked off the grid")
	}
	m.Sleep(time.Second) // 50 s: Sleep moves a Manual clock too
	if _, ok := ticked(tk); !ok {
		t.Fatal("no tick at 50 s")
	}
	tk.Stop()
	m.Advance(time.Minute)
	if _, ok := ticked(tk); ok {
		t.Fatal("ticked after Stop")
	}
}

func TestRealTicker(t *testing.T) {
	tk := clock.NewTicker(clock.Real{}, time.Millisecond)
	defer tk.Stop()
	select {
	case <-tk.C():
	case <-time.After(10 * time.Second):
		t.Fatal("the real ticker never ticked")
	}
}

// TestSleepContext: the wall clock's sleep ends when its context does; the
// others return at once, with the context's error.
func TestSleepContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- clock.SleepContext(ctx, clock.Real{}, time.Hour) }()
	cancel()
	select {
	case err := <-done:
		if err != context.Canceled {
			t.Errorf("cancelled wall-clock sleep: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the wall-clock sleep did not end with its context")
	}
	if err := clock.SleepContext(context.Background(), clock.Real{}, time.Millisecond); err != nil {
		t.Errorf("a short sleep: %v", err)
	}
	m := clock.NewManual(time.Unix(0, 0))
	if err := clock.SleepContext(context.Background(), m, time.Hour); err != nil || m.Now() != time.Unix(0, 0).Add(time.Hour) {
		t.Errorf("manual: %v at %v", err, m.Now())
	}
	if err := clock.SleepContext(ctx, clock.Instant{}, time.Hour); err != context.Canceled {
		t.Errorf("instant with an ended context: %v", err)
	}
}
