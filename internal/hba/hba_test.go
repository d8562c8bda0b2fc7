package hba_test

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"rackpool/internal/hba"
	"rackpool/internal/nbd"
)

var ctx = context.Background()

// owner is one "blocknode": an NBD server over the shared image that can
// be killed (listener and connections closed) or paused (connections
// accepted, nothing answered).
type owner struct {
	srv  *nbd.Server
	addr string
	l    net.Listener
}

func startOwner(t *testing.T, img string) *owner {
	t.Helper()
	fx, err := nbd.NewFileExport(img, false)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = fx.Close() })
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	o := &owner{srv: &nbd.Server{Exports: single{fx}}, addr: l.Addr().String(), l: l}
	go func() { _ = o.srv.Serve(l) }()
	t.Cleanup(func() { _ = o.srv.Close() })
	return o
}

type single struct{ *nbd.FileExport }

func (s single) Open(context.Context, string) (nbd.Export, error) { return noClose(s), nil }
func (s single) List(context.Context) ([]nbd.ExportInfo, error) {
	return []nbd.ExportInfo{{Name: "d"}}, nil
}

type noClose struct{ *nbd.FileExport }

func (noClose) Close() error { return nil }

// table is the control plane: which owner serves the drive, at which epoch.
type table struct {
	mu    sync.Mutex
	addr  string
	epoch uint64
	calls atomic.Int64
}

func (tb *table) set(addr string) {
	tb.mu.Lock()
	tb.addr, tb.epoch = addr, tb.epoch+1
	tb.mu.Unlock()
}

func (tb *table) Resolve(context.Context, string) (hba.Path, error) {
	tb.calls.Add(1)
	tb.mu.Lock()
	defer tb.mu.Unlock()
	if tb.addr == "" {
		return hba.Path{}, fmt.Errorf("failing over")
	}
	return hba.Path{Endpoint: tb.addr, Export: "d", Epoch: tb.epoch, Node: tb.addr}, nil
}

func image(t *testing.T) string {
	img := filepath.Join(t.TempDir(), "d.img")
	if err := os.WriteFile(img, make([]byte, 8<<20), 0o600); err != nil {
		t.Fatal(err)
	}
	return img
}

// TestFailoverReplaysEveryRequest: writers keep going while the owner is
// killed and the control plane names the next one a little later; every
// write is acknowledged exactly once to its caller and reads back.
// twoOwners starts two owners of one image and a multipath on the first.
func twoOwners(t *testing.T) (a, b *owner, tb *table, m *hba.Multipath) {
	t.Helper()
	img := image(t)
	a, b = startOwner(t, img), startOwner(t, img)
	tb = &table{}
	tb.set(a.addr)
	m, err := hba.New(ctx, hba.Options{Drive: "d", Resolver: tb, Conns: 2, Timeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return a, b, tb, m
}

func TestFailoverReplaysEveryRequest(t *testing.T) {
	a, b, tb, m := twoOwners(t)
	exp, err := m.Open(ctx, "d")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 200 {
				off := uint64((w*200 + i) * 4096)
				buf := bytes.Repeat([]byte{byte(w*31 + i)}, 4096)
				if err := exp.WriteAt(ctx, buf, off, i%10 == 0); err != nil {
					errs <- fmt.Errorf("write %d/%d: %w", w, i, err)
					return
				}
			}
		}()
	}
	time.Sleep(20 * time.Millisecond)
	// The owner dies; for 150 ms the control plane still names it.
	tb.mu.Lock()
	tb.addr = ""
	tb.mu.Unlock()
	_ = a.srv.Close()
	time.Sleep(150 * time.Millisecond)
	tb.set(b.addr)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if err := exp.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, 4096)
	for w := range 8 {
		for i := range 200 {
			if err := exp.ReadAt(ctx, got, uint64((w*200+i)*4096)); err != nil {
				t.Fatal(err)
			}
			if got[0] != byte(w*31+i) || got[4095] != byte(w*31+i) {
				t.Fatalf("block %d/%d reads %x", w, i, got[0])
			}
		}
	}
	fs := m.Failovers()
	if len(fs) != 1 || fs[0].To != b.addr || fs[0].From != a.addr || fs[0].Epoch != 2 {
		t.Fatalf("failovers %+v", fs)
	}
}

// pausedOwner accepts connections and the handshake's first bytes never
// come: a stopped process whose kernel still accepts.
func pausedOwner(t *testing.T) (addr string, freeze func()) {
	img := image(t)
	o := startOwner(t, img)
	// A proxy that stops forwarding when frozen.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	var frozen atomic.Bool
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			up, err := net.Dial("tcp", o.addr)
			if err != nil {
				c.Close()
				continue
			}
			pipe := func(dst, src net.Conn) {
				buf := make([]byte, 64<<10)
				for {
					n, err := src.Read(buf)
					for frozen.Load() {
						time.Sleep(time.Millisecond)
					}
					if n > 0 {
						if _, err := dst.Write(buf[:n]); err != nil {
							return
						}
					}
					if err != nil {
						return
					}
				}
			}
			go pipe(up, c)
			go pipe(c, up)
		}
	}()
	return l.Addr().String(), func() { frozen.Store(true) }
}

// TestStalledOwnerIsLeft: an owner that stops answering without closing
// anything is left once the control plane names another; the requests
// outstanding on it are replayed there.
func TestStalledOwnerIsLeft(t *testing.T) {
	addr, freeze := pausedOwner(t)
	b := startOwner(t, image(t))
	tb := &table{}
	tb.set(addr)
	m, err := hba.New(ctx, hba.Options{Drive: "d", Resolver: tb, Conns: 1, Stall: 100 * time.Millisecond, Timeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	exp, _ := m.Open(ctx, "d")
	freeze()
	done := make(chan error, 1)
	go func() { done <- exp.WriteAt(ctx, bytes.Repeat([]byte{7}, 4096), 0, true) }()
	time.Sleep(300 * time.Millisecond)
	select {
	case err := <-done:
		t.Fatalf("a write to a stalled owner returned %v before the drive moved", err)
	default:
	}
	tb.set(b.addr)
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the write stayed on the stalled owner")
	}
	got := make([]byte, 4096)
	if err := exp.ReadAt(ctx, got, 0); err != nil || got[0] != 7 {
		t.Fatalf("read %x, %v", got[0], err)
	}
}

// TestNoPathFailsWithEIOAfterTimeout: when no owner comes back, requests
// fail once Timeout has passed instead of hanging.
func TestNoPathFailsWithEIOAfterTimeout(t *testing.T) {
	a := startOwner(t, image(t))
	tb := &table{}
	tb.set(a.addr)
	m, err := hba.New(ctx, hba.Options{Drive: "d", Resolver: tb, Conns: 1, Timeout: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	exp, _ := m.Open(ctx, "d")
	_ = a.srv.Close()
	start := time.Now()
	err = exp.ReadAt(ctx, make([]byte, 512), 0)
	if err == nil || time.Since(start) > 5*time.Second {
		t.Fatalf("read with no path: %v after %v", err, time.Since(start))
	}
	if nbd.Errno(err) != 5 {
		t.Errorf("errno %d, want EIO (5): %v", nbd.Errno(err), err)
	}
}

// TestFailoverThroughLocalServer: a local NBD client at queue depth 1,
// whose requests the local server runs inline, writes across a failover;
// the requests caught by it run again on workers and land on the new
// owner; every block reads back.
func TestFailoverThroughLocalServer(t *testing.T) {
	a, b, tb, m := twoOwners(t)
	dir, err := os.MkdirTemp("", "hba")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	sock := filepath.Join(dir, "s")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := &nbd.Server{Exports: m}
	go func() { _ = srv.Serve(l) }()
	defer srv.Close()
	c, err := nbd.Dial(ctx, "unix", sock, "d")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	const blocks = 300
	done := make(chan error, 1)
	go func() {
		for i := range blocks {
			if err := c.WriteAt(ctx, bytes.Repeat([]byte{byte(i)}, 4096), uint64(i*4096), i%10 == 0); err != nil {
				done <- fmt.Errorf("write %d: %w", i, err)
				return
			}
		}
		done <- nil
	}()
	time.Sleep(10 * time.Millisecond)
	tb.mu.Lock()
	tb.addr = ""
	tb.mu.Unlock()
	_ = a.srv.Close()
	time.Sleep(100 * time.Millisecond)
	tb.set(b.addr)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if err := c.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, 4096)
	for i := range blocks {
		if err := c.ReadAt(ctx, got, uint64(i*4096)); err != nil {
			t.Fatal(err)
		}
		if got[0] != byte(i) || got[4095] != byte(i) {
			t.Fatalf("block %d reads %x", i, got[0])
		}
	}
	if fs := m.Failovers(); len(fs) != 1 || fs[0].To != b.addr {
		t.Fatalf("failovers %+v", fs)
	}
}

// patientConn is a connection whose deadlines never fire: a wait on the
// peer through it lasts until the peer answers or the connection is
// closed. It counts itself in closes when first closed.
type patientConn struct {
	net.Conn
	closes *atomic.Int64
	closed atomic.Bool
}

func (*patientConn) SetDeadline(time.Time) error      { return nil }
func (*patientConn) SetReadDeadline(time.Time) error  { return nil }
func (*patientConn) SetWriteDeadline(time.Time) error { return nil }
func (c *patientConn) Close() error {
	if !c.closed.Swap(true) {
		c.closes.Add(1)
	}
	return c.Conn.Close()
}

// TestHungOwnerIsLeftWithoutWaitingForIt: an owner that is stopped, not
// dead (SIGSTOP: its connections stay open and nothing is answered), is
// left as soon as the control plane names another owner, without waiting
// on any of its connections. Once its connections were closed one after
// another, each waiting for the stopped node to answer NBD_CMD_DISC for
// closeGrace (2 s), so I/O stalled for seconds more than for a dead node.
// Here the connections' deadlines never fire, so any wait on the stopped
// node lasts for ever: the write completes on the new owner only if no
// close of the old path waits for the old owner.
func TestHungOwnerIsLeftWithoutWaitingForIt(t *testing.T) {
	addr, freeze := pausedOwner(t)
	b := startOwner(t, image(t))
	tb := &table{}
	tb.set(addr)
	var (
		mu       sync.Mutex
		raw      []net.Conn
		oldClose atomic.Int64 // closes of connections to the stopped owner
		newClose atomic.Int64
	)
	dial := func(ctx context.Context, endpoint, export string) (*nbd.Client, error) {
		var d net.Dialer
		nc, err := d.DialContext(ctx, "tcp", endpoint)
		if err != nil {
			return nil, err
		}
		mu.Lock()
		raw = append(raw, nc)
		mu.Unlock()
		closes := &newClose
		if endpoint == addr {
			closes = &oldClose
		}
		c, err := nbd.NewClient(ctx, &patientConn{Conn: nc, closes: closes}, export)
		if err != nil {
			nc.Close()
			return nil, err
		}
		return c, nil
	}
	const conns = 4
	m, err := hba.New(ctx, hba.Options{Drive: "d", Resolver: tb, Conns: conns, Stall: 50 * time.Millisecond,
		Timeout: time.Minute, Dial: dial})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	// Runs first: if a close is stuck waiting on the stopped owner, this
	// ends it so that the test can finish.
	t.Cleanup(func() {
		mu.Lock()
		defer mu.Unlock()
		for _, nc := range raw {
			nc.Close()
		}
	})
	exp, _ := m.Open(ctx, "d")
	freeze()
	tb.set(b.addr)
	done := make(chan error, 1)
	go func() { done <- exp.WriteAt(ctx, bytes.Repeat([]byte{7}, 4096), 0, true) }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second): // liveness only: waiting on the stopped owner never ends
		t.Fatalf("the write is still waiting; %d of the stopped owner's %d connections were closed", oldClose.Load(), conns)
	}
	if n := oldClose.Load(); n != conns {
		t.Errorf("%d of the stopped owner's %d connections closed when the write was replayed, want all", n, conns)
	}
	if n := newClose.Load(); n != 0 {
		t.Errorf("%d connections to the new owner closed", n)
	}
	if fs := m.Failovers(); len(fs) != 1 || fs[0].From != addr || fs[0].To != b.addr {
		t.Fatalf("failovers %+v", fs)
	}
	got := make([]byte, 4096)
	if err := exp.ReadAt(ctx, got, 0); err != nil || got[0] != 7 {
		t.Fatalf("read %x, %v", got[0], err)
	}
}
