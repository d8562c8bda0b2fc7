package netserve_test

import (
	"context"
	"errors"
	"io"
	"net"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"rackpool/internal/netserve"
)

func dial(t *testing.T, l net.Listener) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func wait(t *testing.T, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

func count[C any](s *netserve.Server[C]) (n int) {
	s.Conns(func(*netserve.Conn[C]) { n++ })
	return n
}

// An echo server: each connection's state is its accept number; Close
// ends connections blocked in a read, waits for their goroutines and makes
// Serve return nil.
func TestServerTracksAndCloses(t *testing.T) {
	var s netserve.Server[string]
	l := listen(t)
	var served, ended atomic.Int32
	done := make(chan error, 1)
	go func() {
		done <- s.Serve(l, netserve.Handler[string]{
			Open: func(nc net.Conn, id int64) string { return nc.RemoteAddr().String() },
			Serve: func(ctx context.Context, c *netserve.Conn[string]) {
				served.Add(1)
				defer ended.Add(1)
				io.Copy(c.NC, c.NC)
				if ctx.Err() == nil {
					t.Error("connection's context not cancelled after Close")
				}
			},
		})
	}()
	a, b := dial(t, l), dial(t, l)
	wait(t, "two connections", func() bool { return count(&s) == 2 })
	var states []string
	var ids []int64
	s.Conns(func(c *netserve.Conn[string]) { states, ids = append(states, c.State), append(ids, c.ID) })
	slices.Sort(states)
	want := []string{a.LocalAddr().String(), b.LocalAddr().String()}
	slices.Sort(want)
	if !slices.Equal(states, want) {
		t.Fatalf("states %v, want the clients' addresses %v", states, want)
	}
	var lid int64
	s.Listeners(func(_ net.Listener, id int64) { lid = id })
	slices.Sort(ids)
	if lid != 1 || !slices.Equal(ids, []int64{2, 3}) {
		t.Fatalf("listener ID %d, connection IDs %v; want 1 and [2 3]", lid, ids)
	}
	if _, err := a.Write([]byte("ping")); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 4)
	if _, err := io.ReadFull(a, buf); err != nil || string(buf) != "ping" {
		t.Fatalf("echo: %q, %v", buf, err)
	}

	if !s.Close() {
		t.Fatal("first Close reported the server already closed")
	}
	if n := ended.Load(); n != 2 || served.Load() != 2 {
		t.Fatalf("after Close %d of %d connections ended", n, served.Load())
	}
	if count(&s) != 0 {
		t.Fatal("connections still tracked after Close")
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Serve after Close: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Serve did not return after Close")
	}
	if _, err := io.ReadFull(a, buf); err == nil {
		t.Fatal("client still connected after Close")
	}
	if s.Close() {
		t.Fatal("second Close reported closing the server")
	}
	if !s.Closed() {
		t.Fatal("Closed false after Close")
	}
}

// A connection forgets itself when its serve returns, whatever the client
// does; the connection is closed by then.
func TestServerForgetsEndedConnections(t *testing.T) {
	var s netserve.Server[struct{}]
	defer s.Close()
	l := listen(t)
	go s.Serve(l, netserve.Handler[struct{}]{Serve: func(_ context.Context, c *netserve.Conn[struct{}]) {
		c.NC.Write([]byte("bye"))
	}})
	c := dial(t, l)
	b, err := io.ReadAll(c)
	if err != nil || string(b) != "bye" {
		t.Fatalf("read %q, %v; want bye then EOF", b, err)
	}
	wait(t, "the connection to be forgotten", func() bool { return count(&s) == 0 })
}

// Serve and ServeConn on a closed server close what they are given and
// serve nothing; Go runs nothing.
func TestServerClosed(t *testing.T) {
	var s netserve.Server[struct{}]
	s.Close()
	l := listen(t)
	h := netserve.Handler[struct{}]{Serve: func(context.Context, *netserve.Conn[struct{}]) { t.Error("served on a closed server") }}
	if err := s.Serve(l, h); err != nil {
		t.Fatalf("Serve on a closed server: %v", err)
	}
	if _, err := l.Accept(); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("listener not closed: %v", err)
	}
	a, b := net.Pipe()
	defer a.Close()
	s.ServeConn(context.Background(), b, struct{}{}, h.Serve)
	if _, err := a.Write([]byte{1}); err == nil {
		t.Fatal("connection not closed")
	}
	if s.Go(func() { t.Error("Go ran on a closed server") }) {
		t.Fatal("Go reported running on a closed server")
	}
}

// ServeConn's context ends with its parent's and with Close, which waits
// for it.
func TestServeConnContext(t *testing.T) {
	var s netserve.Server[int]
	a, b := net.Pipe()
	defer a.Close()
	ctx, cancel := context.WithCancel(context.Background())
	ret := make(chan struct{})
	go func() {
		s.ServeConn(ctx, b, 7, func(ctx context.Context, c *netserve.Conn[int]) {
			if c.State != 7 {
				t.Errorf("state %d, want 7", c.State)
			}
			<-ctx.Done()
		})
		close(ret)
	}()
	wait(t, "the connection", func() bool { return count(&s) == 1 })
	cancel()
	select {
	case <-ret:
	case <-time.After(10 * time.Second):
		t.Fatal("ServeConn did not return when its context ended")
	}
	if count(&s) != 0 {
		t.Fatal("connection tracked after ServeConn returned")
	}

	c, d := net.Pipe()
	defer c.Close()
	var ended atomic.Bool
	go s.ServeConn(context.Background(), d, 0, func(ctx context.Context, _ *netserve.Conn[int]) {
		<-ctx.Done()
		time.Sleep(10 * time.Millisecond)
		ended.Store(true)
	})
	wait(t, "the second connection", func() bool { return count(&s) == 1 })
	s.Close()
	if !ended.Load() {
		t.Fatal("Close returned before the connection's serve did")
	}
}

// Close closes Done and waits for what Go started.
func TestServerGo(t *testing.T) {
	var s netserve.Server[struct{}]
	done := s.Done()
	var stopped atomic.Bool
	if !s.Go(func() {
		<-done
		time.Sleep(10 * time.Millisecond)
		stopped.Store(true)
	}) {
		t.Fatal("Go refused on an open server")
	}
	select {
	case <-done:
		t.Fatal("Done closed before Close")
	default:
	}
	s.Close()
	if !stopped.Load() {
		t.Fatal("Close returned before Go's function did")
	}
}
