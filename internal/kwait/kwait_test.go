package kwait

import (
	"bytes"
	"errors"
	"io"
	"net"
	"os"
	"runtime"
	"sync"
	"testing"
	"time"
)

// pair returns the two ends of a loopback TCP connection.
func pair(t *testing.T) (a, b net.Conn) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	ch := make(chan net.Conn, 1)
	go func() {
		c, _ := l.Accept()
		ch <- c
	}()
	a, err = net.Dial("tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	b = <-ch
	if b == nil {
		t.Fatal("accept failed")
	}
	t.Cleanup(func() { a.Close(); b.Close() })
	return a, b
}

func newReader(t *testing.T, nc net.Conn) *Reader {
	t.Helper()
	r := NewReader(nc, false)
	if r == nil {
		if runtime.GOOS == "linux" {
			t.Fatal("NewReader returned nil for a TCP connection on Linux")
		}
		t.Skip("no kernel waits here")
	}
	return r
}

// TestReadsWhatIsSent: with and without Block, every byte arrives in
// order, whether the data is there before the read or comes during the
// wait in the kernel or after it (on the poller).
func TestReadsWhatIsSent(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(2))
	before := waits.Load()
	a, b := pair(t)
	r := newReader(t, b)
	for i, delay := range []time.Duration{0, MaxWait / 4, 3 * MaxWait, 0} {
		r.Block = i%2 == 0 || delay > 0
		msg := bytes.Repeat([]byte{byte('a' + i)}, 1000*(i+1))
		go func() {
			time.Sleep(delay)
			a.Write(msg)
		}()
		got := make([]byte, len(msg))
		if _, err := io.ReadFull(r, got); err != nil {
			t.Fatalf("read %d: %v", i, err)
		}
		if !bytes.Equal(got, msg) {
			t.Fatalf("read %d: wrong bytes", i)
		}
	}
	if n := waiters.Load(); n != 0 {
		t.Fatalf("%d kernel waits still counted after the reads", n)
	}
	if waits.Load() == before {
		t.Fatal("no read waited in the kernel")
	}
	if !r.quiet {
		t.Fatal("a wait that ran out left the reader waiting in the kernel")
	}
}

// TestEndAndErrors: the peer's close is io.EOF; a read deadline and a
// Close of the reader's own connection end a blocked read with the
// connection's errors, the close within MaxWait plus the poller's wake-up.
func TestEndAndErrors(t *testing.T) {
	a, b := pair(t)
	r := newReader(t, b)
	r.Block = true
	a.Close()
	if _, err := r.Read(make([]byte, 10)); err != io.EOF {
		t.Fatalf("after the peer closed: %v, want io.EOF", err)
	}

	_, d := pair(t)
	r = newReader(t, d)
	r.Block = true
	d.SetReadDeadline(time.Now().Add(20 * time.Millisecond))
	if _, err := r.Read(make([]byte, 10)); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("past the deadline: %v, want os.ErrDeadlineExceeded", err)
	}

	_, f := pair(t)
	r = newReader(t, f)
	r.Block = true
	done := make(chan error, 1)
	go func() {
		_, err := r.Read(make([]byte, 10))
		done <- err
	}()
	time.Sleep(5 * time.Millisecond)
	f.Close()
	if err := <-done; !errors.Is(err, net.ErrClosed) {
		t.Fatalf("after Close: %v, want net.ErrClosed", err)
	}
}

// TestWaitsBounded: many readers blocked at once never count more kernel
// waits than GOMAXPROCS-1, and all of them get their data.
func TestWaitsBounded(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(3))
	const n = 8
	var writers []net.Conn
	var readers []*Reader
	for range n {
		a, b := pair(t)
		r := newReader(t, b)
		r.Block = true
		writers, readers = append(writers, a), append(readers, r)
	}
	stop := make(chan struct{})
	var peak int32
	var mu sync.Mutex
	go func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			if v := waiters.Load(); v > peak {
				mu.Lock()
				peak = v
				mu.Unlock()
			}
			runtime.Gosched()
		}
	}()
	var wg sync.WaitGroup
	for i, r := range readers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			b := make([]byte, 4)
			if _, err := io.ReadFull(r, b); err != nil || string(b) != "ping" {
				t.Errorf("reader %d: %q, %v", i, b, err)
			}
		}()
	}
	time.Sleep(2 * MaxWait)
	for _, w := range writers {
		w.Write([]byte("ping"))
	}
	wg.Wait()
	close(stop)
	mu.Lock()
	defer mu.Unlock()
	if limit := max(int32(runtime.GOMAXPROCS(0))-1, 1); peak > limit {
		t.Fatalf("%d kernel waits at once, more than GOMAXPROCS-1 = %d", peak, limit)
	}
}

// TestNotForTLSOrPipes: only plain TCP and unix sockets are taken.
func TestNotForTLSOrPipes(t *testing.T) {
	p1, p2 := net.Pipe()
	defer p1.Close()
	defer p2.Close()
	if NewReader(p1, false) != nil {
		t.Fatal("NewReader took a net.Pipe")
	}
}

// TestOneConversation: while another conversation is busy (it had data
// within MaxWait) nobody waits in the kernel; once it is idle or closed,
// the other does again.
func TestOneConversation(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(2))
	a, b := pair(t)
	c, d := pair(t)
	r := NewReader(b, true)
	other := NewReader(d, true)
	if r == nil || other == nil {
		t.Skip("no kernel waits here")
	}
	defer r.Close()
	r.Block = true
	read := func() uint64 {
		t.Helper()
		r.quiet = false // a writer's sleep may run long on a loaded machine
		before := waits.Load()
		go func() {
			time.Sleep(MaxWait / 4)
			a.Write([]byte("x"))
		}()
		if _, err := io.ReadFull(r, make([]byte, 1)); err != nil {
			t.Fatal(err)
		}
		return waits.Load() - before
	}
	other.lastData.Store(time.Now().Add(time.Hour).UnixNano()) // busy throughout the read
	if n := read(); n != 0 {
		t.Fatalf("%d kernel waits while another conversation is busy", n)
	}
	c.Write([]byte("y"))
	other.Block = true
	if _, err := io.ReadFull(other, make([]byte, 1)); err != nil {
		t.Fatal(err)
	}
	if other.lastData.Load() == 0 {
		t.Fatal("a read with data did not mark the conversation busy")
	}
	other.lastData.Store(time.Now().Add(-time.Second).UnixNano()) // idle
	if n := read(); n == 0 {
		t.Fatal("no kernel wait while the other conversation is idle")
	}
	other.lastData.Store(time.Now().Add(time.Hour).UnixNano())
	other.Close()
	other.Close() // twice is fine
	if n := read(); n == 0 {
		t.Fatal("no kernel wait with the other conversation closed")
	}
}
