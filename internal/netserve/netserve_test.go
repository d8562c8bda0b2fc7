package netserve_test

import (
	"errors"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"rackpool/internal/netserve"
)

// failing fails the first n Accepts with err, as the kernel does when the
// process is out of file descriptors, then accepts for real.
type failing struct {
	net.Listener
	mu  sync.Mutex
	n   int
	err error
}

func (f *failing) Accept() (net.Conn, error) {
	f.mu.Lock()
	if f.n > 0 {
		f.n--
		f.mu.Unlock()
		return nil, &net.OpError{Op: "accept", Net: "tcp", Err: os.NewSyscallError("accept4", f.err)}
	}
	f.mu.Unlock()
	return f.Listener.Accept()
}

func listen(t *testing.T) net.Listener {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

// Out of file descriptors, the loop waits with a growing backoff and
// serves the connection once accepting works again; closing the server
// ends it with nil.
func TestRetriesEMFILE(t *testing.T) {
	l := &failing{Listener: listen(t), n: 9, err: syscall.EMFILE}
	var closed atomic.Bool
	var waits []time.Duration
	got := make(chan net.Conn, 1)
	done := make(chan error, 1)
	go func() {
		done <- netserve.Loop{
			Closed: closed.Load,
			Handle: func(c net.Conn) { got <- c },
			Sleep:  func(d time.Duration) { waits = append(waits, d) },
		}.Serve(l)
	}()
	c, err := net.Dial("tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	select {
	case sc := <-got:
		sc.Close()
	case <-time.After(10 * time.Second):
		t.Fatal("no connection served after the failures")
	}
	want := []time.Duration{5, 10, 20, 40, 80, 160, 320, 640, 1000}
	if len(waits) != len(want) {
		t.Fatalf("waits %v", waits)
	}
	for i, w := range want {
		if waits[i] != w*time.Millisecond {
			t.Fatalf("waits %v, want %v ms", waits, want)
		}
	}
	closed.Store(true)
	l.Close()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Serve after close: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Serve did not return after close")
	}
}

// A listener closed under a server that is still open is an error.
func TestListenerClosedUnderneath(t *testing.T) {
	l := listen(t)
	done := make(chan error, 1)
	go func() {
		done <- netserve.Loop{Closed: func() bool { return false }, Handle: func(c net.Conn) { c.Close() }}.Serve(l)
	}()
	l.Close()
	select {
	case err := <-done:
		if !errors.Is(err, net.ErrClosed) {
			t.Fatalf("Serve: %v, want net.ErrClosed", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Serve did not return")
	}
}
