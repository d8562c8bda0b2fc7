package nbd

import (
	"context"
	"errors"
	"net"
	"sync"
	"testing"
	"time"
)

// gated is a forwarding-style export whose reads wait: a read at an
// offset in after waits until the read at after[off] has started, or
// until release is closed when after[off] is gateOff.
type gated struct {
	Export
	mu      sync.Mutex
	started map[uint64]chan struct{}
	after   map[uint64]uint64
	release chan struct{}
}

const gateOff = 1 << 20

func (g *gated) InlineWhenIdle() bool { return true }

func (g *gated) startedCh(off uint64) chan struct{} {
	g.mu.Lock()
	defer g.mu.Unlock()
	ch, ok := g.started[off]
	if !ok {
		ch = make(chan struct{})
		g.started[off] = ch
	}
	return ch
}

func (g *gated) ReadAt(ctx context.Context, p []byte, off uint64) error {
	close(g.startedCh(off))
	g.mu.Lock()
	other, waits := g.after[off]
	g.mu.Unlock()
	if waits {
		wait := g.release
		if other != gateOff {
			wait = g.startedCh(other)
		}
		select {
		case <-wait:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return g.Export.ReadAt(ctx, p, off)
}

// TestIdleInline: a lone request of an IdleInlineExport runs on the
// reader, so a request sent during it waits in the socket until it is
// done; a request that finds another in flight runs on a goroutine of
// its own, so it may wait for a later request without stalling the
// connection.
func TestIdleInline(t *testing.T) {
	checkNoLeak(t)
	g := &gated{started: map[uint64]chan struct{}{}, release: make(chan struct{}),
		after: map[uint64]uint64{0: gateOff, 4096: 16384, 12288: 16384}}
	env := startEnv(t, func(_ *Server, x *testExports) {
		x.wrap = func(_ string, e Export) Export { g.Export = e; return g }
	})
	c := env.dial(t, "disk")
	ctx := testCtx(t)
	errs := make(chan error, 8)
	read := func(off uint64) { errs <- c.ReadAt(ctx, make([]byte, 512), off) }
	collect := func(n int) {
		t.Helper()
		for range n {
			if err := <-errs; err != nil {
				t.Fatal(err)
			}
		}
	}

	// A lone request (0) holds the reader until released: 8192 and
	// 4096, sent meanwhile, do not start.
	go read(0)
	<-g.startedCh(0)
	go read(4096)
	time.Sleep(50 * time.Millisecond) // 4096 goes out first, so 8192 is buffered behind it
	go read(8192)
	select {
	case <-g.startedCh(8192):
		t.Fatal("a request started while the lone inline request held the reader")
	case <-time.After(200 * time.Millisecond):
	}
	close(g.release)
	collect(2) // 0 and 8192; 4096, with 8192 behind it, waits for 16384 on a goroutine

	// 12288 arrives alone in the socket but with 4096 in flight: it must
	// not run on the reader, or 16384, which both wait for, is never read.
	go read(12288)
	<-g.startedCh(12288)
	go read(16384)
	collect(3)
}

// deferring is an IdleInlineExport whose reads refuse to run inline and,
// on a worker, wait for their context to end.
type deferring struct {
	Export
	calls chan bool // RunsInline of each call
	ended chan error
}

func (d *deferring) InlineWhenIdle() bool { return true }

func (d *deferring) ReadAt(ctx context.Context, p []byte, off uint64) error {
	inline := RunsInline(ctx)
	d.calls <- inline
	if inline {
		return ErrNotInline
	}
	<-ctx.Done()
	d.ended <- ctx.Err()
	return ctx.Err()
}

// TestNotInline: a request that returns ErrNotInline runs again on a
// worker, and the server goes back to reading, so a client that hangs up
// ends the request's context.
func TestNotInline(t *testing.T) {
	checkNoLeak(t)
	d := &deferring{calls: make(chan bool, 4), ended: make(chan error, 1)}
	env := startEnv(t, func(_ *Server, x *testExports) {
		x.wrap = func(_ string, e Export) Export { d.Export = e; return d }
	})
	nc, err := net.Dial("unix", env.sock)
	if err != nil {
		t.Fatal(err)
	}
	c, err := NewClient(testCtx(t), nc, "disk")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	read := make(chan error, 1)
	go func() { read <- c.ReadAt(testCtx(t), make([]byte, 512), 0) }()
	for i, want := range []bool{true, false} {
		if got := <-d.calls; got != want {
			t.Fatalf("call %d: inline %v, want %v", i, got, want)
		}
	}
	nc.Close() // the client hangs up
	select {
	case err := <-d.ended:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("request ended with %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the server did not notice the client hang up")
	}
	if err := <-read; err == nil {
		t.Fatal("the read succeeded on a closed connection")
	}
}
