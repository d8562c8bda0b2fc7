package fabrictest

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

// TestBounded: a call that honours its context ends with it; one that
// ignores it is reported, naming the call, once the grace has passed, and
// the suite goes on; a call that returns is passed through.
func TestBounded(t *testing.T) {
	v, err := bounded("quick", time.Minute, time.Minute, func(context.Context) (int, error) { return 7, nil })
	if v != 7 || err != nil {
		t.Fatalf("quick call = %d, %v; want 7, nil", v, err)
	}

	_, err = bounded("Attach(x)", 50*time.Millisecond, time.Minute, func(ctx context.Context) (int, error) {
		<-ctx.Done()
		return 0, ctx.Err()
	})
	if !errors.Is(err, context.DeadlineExceeded) || errors.Is(err, ErrNoReturn) {
		t.Fatalf("a call that honours its deadline = %v, want its deadline", err)
	}

	never := make(chan struct{})
	defer close(never)
	start := time.Now()
	_, err = bounded("Attach(x)", 50*time.Millisecond, 100*time.Millisecond, func(context.Context) (int, error) {
		<-never // ignores its context
		return 0, nil
	})
	if !errors.Is(err, ErrNoReturn) || !strings.HasPrefix(err.Error(), "Attach(x): ") {
		t.Fatalf("a call that ignores its context = %v, want ErrNoReturn naming the call", err)
	}
	if took := time.Since(start); took > 30*time.Second {
		t.Fatalf("the bound of a call that ignores its context took %s", took)
	}
}
