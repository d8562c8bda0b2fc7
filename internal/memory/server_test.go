package memory

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"
)

var bg = context.Background()

func TestReadWriteAppendStat(t *testing.T) {
	n := startNode(t, nil)
	const length = 256 << 10
	c := n.dial(t, n.token(t, func(c *Claims) { c.Length = length }))
	if c.Epoch() != n.s.Epoch() || c.Epoch() == 0 {
		t.Fatalf("client epoch %x, server %x", c.Epoch(), n.s.Epoch())
	}

	// A fresh region reads as zeros.
	got := make([]byte, 4096)
	if err := c.Read(bg, 0, got); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, make([]byte, 4096)) {
		t.Fatal("fresh region is not zero")
	}

	// A vectored write lands as the concatenation, across a stripe boundary.
	a, b, d := pattern(1, 3000), []byte{}, pattern(2, 70000)
	off := uint64(1<<16 - 1000)
	if err := c.Write(bg, off, a, b, d); err != nil {
		t.Fatal(err)
	}
	want := append(bytes.Clone(a), d...)
	got = make([]byte, len(want))
	if err := c.Read(bg, off, got); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatal("read back differs from the vectored write")
	}
	// The bytes around it are untouched.
	edge := make([]byte, 1)
	for _, o := range []uint64{off - 1, off + uint64(len(want))} {
		if err := c.Read(bg, o, edge); err != nil || edge[0] != 0 {
			t.Fatalf("byte at %d = %d, %v; want 0", o, edge[0], err)
		}
	}
	// Reading the last byte of the region works; zero-length reads too.
	if err := c.Read(bg, length-1, edge); err != nil {
		t.Fatal(err)
	}
	if err := c.Read(bg, length, nil); err != nil {
		t.Fatal(err)
	}

	// Appends go at the head, one after another.
	st, err := c.Stat(bg)
	if err != nil {
		t.Fatal(err)
	}
	if st.Size != length || st.Head != 0 || !st.Expiry.Equal(testClaims().Expiry) || st.Epoch != n.s.Epoch() {
		t.Fatalf("Stat = %+v", st)
	}
	var offs []uint64
	for i := range 3 {
		o, err := c.Append(bg, []byte("rec"), pattern(byte(i), 10))
		if err != nil {
			t.Fatal(err)
		}
		offs = append(offs, o)
	}
	if offs[0] != 0 || offs[1] != 13 || offs[2] != 26 {
		t.Fatalf("append offsets %v", offs)
	}
	rec := make([]byte, 13)
	if err := c.Read(bg, 13, rec); err != nil || !bytes.Equal(rec, append([]byte("rec"), pattern(1, 10)...)) {
		t.Fatalf("appended record reads %q, %v", rec, err)
	}
	if st, _ = c.Stat(bg); st.Head != 39 {
		t.Fatalf("head %d after three appends, want 39", st.Head)
	}
	// An append that does not fit fails and moves nothing.
	if _, err := c.Append(bg, make([]byte, length-38)); !errors.Is(err, ErrNoSpace) {
		t.Fatalf("oversized append: %v, want ErrNoSpace", err)
	}
	if o, err := c.Append(bg, make([]byte, length-39)); err != nil || o != 39 {
		t.Fatalf("append filling the region: %d, %v", o, err)
	}
	if _, err := c.Append(bg, []byte{1}); !errors.Is(err, ErrNoSpace) {
		t.Fatalf("append to a full region: %v, want ErrNoSpace", err)
	}
	if err := c.Ping(bg); err != nil {
		t.Fatal(err)
	}

	s := n.s.Stats()
	if s.Conns != 1 || s.Accepted != 1 || s.Auth != 1 || s.Append != 6 || s.Write != 1 || s.Ping != 1 ||
		s.BytesWritten != uint64(len(want))+39+length-39 || s.Errors != 2 || s.Read < 5 {
		t.Errorf("Stats = %+v", s)
	}
}

func TestRegionsAreIsolated(t *testing.T) {
	n := startNode(t, nil)
	// Two adjacent leases, each writing its whole region.
	c1 := n.dial(t, n.token(t, func(c *Claims) { c.Lease, c.Offset, c.Length = "a", 0, 100 }))
	c2 := n.dial(t, n.token(t, func(c *Claims) { c.Lease, c.Offset, c.Length = "b", 100, 100 }))
	if err := c1.Write(bg, 0, bytes.Repeat([]byte{1}, 100)); err != nil {
		t.Fatal(err)
	}
	if err := c2.Write(bg, 0, bytes.Repeat([]byte{2}, 100)); err != nil {
		t.Fatal(err)
	}
	// Append heads are per lease.
	if o, err := c2.Append(bg, []byte{3}); err != nil || o != 0 {
		t.Fatalf("append on b: %d, %v", o, err)
	}
	if o, err := c1.Append(bg, []byte{4, 4}); err != nil || o != 0 {
		t.Fatalf("append on a: %d, %v", o, err)
	}
	whole := n.dial(t, n.token(t, func(c *Claims) { c.Lease, c.Offset, c.Length, c.Rights = "all", 0, 200, RightRead }))
	got := make([]byte, 200)
	if err := whole.Read(bg, 0, got); err != nil {
		t.Fatal(err)
	}
	want := append(append([]byte{4, 4}, bytes.Repeat([]byte{1}, 98)...), append([]byte{3}, bytes.Repeat([]byte{2}, 99)...)...)
	if !bytes.Equal(got, want) {
		t.Fatalf("capacity reads %v\nwant %v", got, want)
	}
}

func TestAccessErrors(t *testing.T) {
	n := startNode(t, nil)
	full := n.dial(t, n.token(t, func(c *Claims) { c.Lease = "full"; c.Rights = RightRead | RightWrite | RightAdmin }))
	seed := pattern(9, int(testClaims().Length))
	if err := full.Write(bg, 0, seed); err != nil {
		t.Fatal(err)
	}
	ro := n.dial(t, n.token(t, func(c *Claims) { c.Rights = RightRead }))
	wo := n.dial(t, n.token(t, func(c *Claims) { c.Rights = RightWrite }))
	rw := n.dial(t, n.token(t, nil))
	length := testClaims().Length
	buf := make([]byte, 10)

	for _, tc := range []struct {
		name string
		do   func() error
		want error
	}{
		{"read past end", func() error { return rw.Read(bg, length-5, buf) }, ErrRange},
		{"read offset past end", func() error { return rw.Read(bg, length+1, nil) }, ErrRange},
		{"read offset overflow", func() error { return rw.Read(bg, 1<<64-5, buf) }, ErrRange},
		{"write past end", func() error { return rw.Write(bg, length-5, buf) }, ErrRange},
		{"write offset overflow", func() error { return rw.Write(bg, 1<<64-1, buf) }, ErrRange},
		{"write with read rights", func() error { return ro.Write(bg, 0, buf) }, ErrRights},
		{"append with read rights", func() error { _, err := ro.Append(bg, buf); return err }, ErrRights},
		{"read with write rights", func() error { return wo.Read(bg, 0, buf) }, ErrRights},
		{"zero without admin", func() error { return rw.Zero(bg, t0.Add(time.Hour)) }, ErrRights},
		{"read larger than frame", func() error { return rw.Read(bg, 0, make([]byte, DefaultMaxFrame+1)) }, ErrTooLarge},
		{"write larger than frame", func() error { return rw.Write(bg, 0, make([]byte, DefaultMaxFrame), buf) }, ErrTooLarge},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.do(); !errors.Is(err, tc.want) {
				t.Fatalf("got %v, want %v", err, tc.want)
			}
		})
	}
	// The connections survive their errors and nothing changed.
	got := make([]byte, length)
	if err := ro.Read(bg, 0, got); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, seed) {
		t.Fatal("a refused request changed memory")
	}
	if st, err := rw.Stat(bg); err != nil || st.Head != 0 {
		t.Fatalf("Stat after refused appends: %+v, %v", st, err)
	}
}

func TestDialRefusals(t *testing.T) {
	n := startNode(t, func(o *ServerOptions) { o.Capacity = 2 << 20 })
	other := Key(bytes.Repeat([]byte{7}, KeySize))
	for _, tc := range []struct {
		name  string
		token string
		want  error
	}{
		{"garbage", "not a token", ErrBadToken},
		{"forged", mustSign(t, other, testClaims()), ErrBadToken},
		{"wrong node", n.token(t, func(c *Claims) { c.Node = "mem1" }), ErrWrongNode},
		{"outside capacity", n.token(t, func(c *Claims) { c.Offset = 2<<20 - 10 }), ErrWrongNode},
		{"expired", n.token(t, func(c *Claims) { c.Expiry = t0 }), ErrExpired},
		{"too long", string(make([]byte, maxTokenLen+1)), ErrBadToken},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Dial(bg, n.addr, tc.token)
			if !errors.Is(err, tc.want) {
				t.Fatalf("Dial: %v, want %v", err, tc.want)
			}
			if c != nil {
				t.Fatal("Dial returned a client with an error")
			}
		})
	}
	n.s.Revoke("lease-1", t0.Add(time.Minute))
	if _, err := Dial(bg, n.addr, n.token(t, nil)); !errors.Is(err, ErrRevoked) {
		t.Fatalf("Dial with a revoked lease: %v", err)
	}
}

func TestExpiryAndRevocation(t *testing.T) {
	n := startNode(t, nil)
	c := n.dial(t, n.token(t, func(c *Claims) { c.Expiry = t0.Add(time.Minute) }))
	other := n.dial(t, n.token(t, func(c *Claims) { c.Lease = "other" }))
	buf := make([]byte, 8)
	if err := c.Read(bg, 0, buf); err != nil {
		t.Fatal(err)
	}

	n.s.Revoke("lease-1", t0.Add(30*time.Second))
	if err := c.Read(bg, 0, buf); !errors.Is(err, ErrRevoked) {
		t.Fatalf("read after Revoke: %v", err)
	}
	if err := c.Write(bg, 0, buf); !errors.Is(err, ErrRevoked) {
		t.Fatalf("write after Revoke: %v", err)
	}
	if err := other.Read(bg, 0, buf); err != nil {
		t.Fatalf("another lease's read after Revoke: %v", err)
	}
	n.clk.Advance(30 * time.Second) // revocation over
	if err := c.Read(bg, 0, buf); err != nil {
		t.Fatalf("read after the revocation passed: %v", err)
	}
	n.s.Revoke("lease-1", t0.Add(time.Hour))
	n.s.Revoke("lease-1", t0) // lifts it
	if err := c.Read(bg, 0, buf); err != nil {
		t.Fatalf("read after the revocation was lifted: %v", err)
	}

	n.clk.Advance(30 * time.Second) // at expiry
	if err := c.Read(bg, 0, buf); !errors.Is(err, ErrExpired) {
		t.Fatalf("read at expiry: %v", err)
	}
	if _, err := c.Stat(bg); !errors.Is(err, ErrExpired) {
		t.Fatalf("stat at expiry: %v", err)
	}

	// Renew brings it back; a refused Renew keeps the claims it had.
	if err := c.Renew(bg, n.token(t, func(c *Claims) { c.Expiry = t0.Add(2 * time.Minute) })); err != nil {
		t.Fatalf("Renew: %v", err)
	}
	if err := c.Read(bg, 0, buf); err != nil {
		t.Fatalf("read after Renew: %v", err)
	}
	if err := c.Renew(bg, "garbage"); !errors.Is(err, ErrBadToken) {
		t.Fatalf("Renew with garbage: %v", err)
	}
	if err := c.Renew(bg, n.token(t, func(c *Claims) { c.Node = "elsewhere" })); !errors.Is(err, ErrWrongNode) {
		t.Fatalf("Renew for another node: %v", err)
	}
	if st, err := c.Stat(bg); err != nil || !st.Expiry.Equal(t0.Add(2*time.Minute)) {
		t.Fatalf("Stat after refused Renews: %+v, %v", st, err)
	}
}

func TestZero(t *testing.T) {
	n := startNode(t, nil)
	// A wide lease over the capacity around the region sees what ZERO does.
	const regionOff, regionLen = 70000, 300001 // unaligned, over several stripes and pages
	wide := n.dial(t, n.token(t, func(c *Claims) { c.Lease, c.Offset, c.Length = "wide", 0, 1<<20 }))
	if err := wide.Write(bg, 0, pattern(3, 1<<20)); err != nil {
		t.Fatal(err)
	}
	region := func(c *Claims) {
		c.Offset, c.Length, c.Expiry = regionOff, regionLen, t0.Add(time.Hour)
		c.Rights = RightRead | RightWrite | RightAdmin
	}
	admin := n.dial(t, n.token(t, region))
	if _, err := admin.Append(bg, []byte("some log")); err != nil {
		t.Fatal(err)
	}
	if err := admin.Zero(bg, t0.Add(time.Minute)); err != nil {
		t.Fatalf("Zero: %v", err)
	}

	got := make([]byte, 1<<20)
	if err := wide.Read(bg, 0, got); err != nil {
		t.Fatal(err)
	}
	want := pattern(3, 1<<20)
	clear(want[regionOff : regionOff+regionLen])
	if !bytes.Equal(got, want) {
		i := 0
		for got[i] == want[i] {
			i++
		}
		t.Fatalf("after ZERO the capacity differs first at %d: %d, want %d", i, got[i], want[i])
	}

	// The lease is revoked until the given expiry, for every token.
	if err := admin.Read(bg, 0, got[:1]); !errors.Is(err, ErrRevoked) {
		t.Fatalf("read on the zeroed lease: %v", err)
	}
	if _, err := Dial(bg, n.addr, n.token(t, region)); !errors.Is(err, ErrRevoked) {
		t.Fatalf("dial on the zeroed lease: %v", err)
	}
	n.clk.Advance(time.Minute)
	st, err := admin.Stat(bg)
	if err != nil || st.Head != 0 {
		t.Fatalf("Stat after ZERO: %+v, %v; want head 0", st, err)
	}
	if o, err := admin.Append(bg, []byte("x")); err != nil || o != 0 {
		t.Fatalf("append after ZERO: %d, %v", o, err)
	}
	if n.s.Stats().Zero != 1 {
		t.Errorf("Stats: %+v", n.s.Stats())
	}
}

func TestConcurrentPipelined(t *testing.T) {
	n := startNode(t, nil)
	c := n.dial(t, n.token(t, func(c *Claims) { c.Length = 1 << 20 }))
	const workers, rounds, slot = 16, 40, 32 << 10
	var wg sync.WaitGroup
	errs := make(chan error, workers*2)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			off := uint64(w * slot)
			got := make([]byte, slot/2)
			for r := range rounds {
				size := 1 + (w*131+r*977)%(slot/2)
				data := pattern(byte(w*rounds+r), size)
				half := size / 3
				if err := c.Write(bg, off, data[:half], data[half:]); err != nil {
					errs <- err
					return
				}
				if err := c.Read(bg, off, got[:size]); err != nil {
					errs <- err
					return
				}
				if !bytes.Equal(got[:size], data) {
					errs <- fmt.Errorf("worker %d round %d: read back differs", w, r)
					return
				}
			}
		}()
	}
	// Concurrent appends from another connection on another lease get
	// distinct, adjacent slots holding their own data.
	ac := n.dial(t, n.token(t, func(c *Claims) { c.Lease, c.Offset, c.Length = "log", 2<<20, 1<<20 }))
	var mu sync.Mutex
	appended := map[uint64]byte{}
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for r := range 50 {
				v := byte(w*50 + r)
				o, err := ac.Append(bg, []byte{v, v}, []byte{v})
				if err != nil {
					errs <- err
					return
				}
				mu.Lock()
				appended[o] = v
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if len(appended) != 200 {
		t.Fatalf("%d distinct append offsets, want 200", len(appended))
	}
	log := make([]byte, 600)
	if err := ac.Read(bg, 0, log); err != nil {
		t.Fatal(err)
	}
	for o, v := range appended {
		if o%3 != 0 || o >= 600 || !bytes.Equal(log[o:o+3], []byte{v, v, v}) {
			t.Fatalf("append at %d: %v, want %d x3", o, log[min(o, 597):min(o, 597)+3], v)
		}
	}
}

// TestReadsAreAtomic has writers fill a range that spans many stripes with
// one byte value each while readers check every read sees a single value.
func TestReadsAreAtomic(t *testing.T) {
	n := startNode(t, nil)
	tok := n.token(t, func(c *Claims) { c.Length = 1 << 20 })
	const size = 3<<16 + 100
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for w := range 2 {
		c := n.dial(t, tok)
		wg.Add(1)
		go func() {
			defer wg.Done()
			buf := make([]byte, size)
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				for j := range buf {
					buf[j] = byte(w*100 + i%100)
				}
				if err := c.Write(bg, 10, buf[:size/2], buf[size/2:]); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	r := n.dial(t, tok)
	got := make([]byte, size)
	for range 100 {
		if err := r.Read(bg, 10, got); err != nil {
			t.Fatal(err)
		}
		for i := range got {
			if got[i] != got[0] {
				t.Fatalf("torn read: byte %d is %d, byte 0 is %d", i, got[i], got[0])
			}
		}
	}
	close(stop)
	wg.Wait()
}

func TestRenewEpochChange(t *testing.T) {
	f := startFake(t)
	c, err := Dial(bg, f.addr, "anything")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	r := f.next(t)
	if c.Epoch() != fakeEpoch {
		t.Fatalf("epoch %x", c.Epoch())
	}
	done := make(chan error, 1)
	go func() { done <- c.Renew(bg, "new token") }()
	h, p := r.req()
	if h.op != opAuth || string(p) != "new token" {
		t.Fatalf("Renew sent op %d payload %q", h.op, p)
	}
	r.send(authReply(h.tag, fakeEpoch+1))
	if err := <-done; !errors.Is(err, ErrNodeRestarted) {
		t.Fatalf("Renew after restart: %v", err)
	}
}

func TestContextCancel(t *testing.T) {
	f := startFake(t)
	c, err := Dial(bg, f.addr, "tok")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	r := f.next(t)

	// Already cancelled: nothing is sent.
	ctx, cancel := context.WithCancel(bg)
	cancel()
	if err := c.Ping(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("Ping with a cancelled context: %v", err)
	}

	// Cancelled while waiting: returns promptly; the late answer is dropped
	// and does not touch the caller's buffer.
	ctx, cancel = context.WithTimeout(bg, 50*time.Millisecond)
	defer cancel()
	buf := make([]byte, 100)
	start := time.Now()
	if err := c.Read(ctx, 0, buf); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Read past its deadline: %v", err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("Read took %v to notice its deadline", d)
	}
	h, _ := r.req()
	if h.op != opRead || h.count != 100 {
		t.Fatalf("fake got op %d count %d", h.op, h.count)
	}
	r.reply(h.tag, statusOK, bytes.Repeat([]byte{0xee}, 100))

	// The connection still works; the next answer goes to the next call.
	done := make(chan error, 1)
	go func() { done <- c.Ping(bg) }()
	h2, _ := r.req()
	if h2.tag == h.tag {
		t.Fatal("tag reused")
	}
	r.reply(h2.tag, statusOK, nil)
	if err := <-done; err != nil {
		t.Fatalf("Ping after a cancelled Read: %v", err)
	}
	if !bytes.Equal(buf, make([]byte, 100)) {
		t.Fatal("a late response was written into a cancelled Read's buffer")
	}
}

func TestPendingFailOnConnectionLoss(t *testing.T) {
	f := startFake(t)
	c, err := Dial(bg, f.addr, "tok")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	r := f.next(t)
	const calls = 5
	errs := make(chan error, calls)
	for i := range calls {
		go func() { errs <- c.Read(bg, uint64(i), make([]byte, 8)) }()
	}
	for range calls {
		r.req()
	}
	r.nc.Close()
	for range calls {
		select {
		case err := <-errs:
			if !errors.Is(err, ErrClosed) {
				t.Fatalf("pending call: %v, want ErrClosed", err)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("pending call not failed after the connection dropped")
		}
	}
	if err := c.Ping(bg); !errors.Is(err, ErrClosed) {
		t.Fatalf("call after connection loss: %v", err)
	}
}

func TestProtocolViolationByServer(t *testing.T) {
	f := startFake(t)
	c, err := Dial(bg, f.addr, "tok")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	r := f.next(t)
	done := make(chan error, 1)
	go func() { done <- c.Read(bg, 0, make([]byte, 8)) }()
	h, _ := r.req()
	r.reply(h.tag, statusOK, make([]byte, 9)) // wrong length
	if err := <-done; !errors.Is(err, ErrProtocol) || !errors.Is(err, ErrClosed) {
		t.Fatalf("Read answered with the wrong length: %v", err)
	}
}

func TestServerClose(t *testing.T) {
	n := startNode(t, nil)
	c := n.dial(t, n.token(t, nil))
	if err := c.Ping(bg); err != nil {
		t.Fatal(err)
	}
	if err := n.s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := c.Read(bg, 0, make([]byte, 8)); !errors.Is(err, ErrClosed) {
		t.Fatalf("Read after server Close: %v", err)
	}
	if _, err := Dial(bg, n.addr, n.token(t, nil)); err == nil {
		t.Fatal("Dial after server Close succeeded")
	}
	if err := n.s.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
}

func TestClientClose(t *testing.T) {
	n := startNode(t, nil)
	c := n.dial(t, n.token(t, nil))
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if err := c.Write(bg, 0, []byte{1}); !errors.Is(err, ErrClosed) {
		t.Fatalf("Write after Close: %v", err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for n.s.Stats().Conns != 0 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if got := n.s.Stats().Conns; got != 0 {
		t.Fatalf("server still counts %d connections", got)
	}
}

func TestServerOptions(t *testing.T) {
	good := ServerOptions{Node: "n", Capacity: 1, Key: testKey}
	if err := good.Validate(); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		edit func(*ServerOptions)
	}{
		{"no node", func(o *ServerOptions) { o.Node = "" }},
		{"no capacity", func(o *ServerOptions) { o.Capacity = 0 }},
		{"huge capacity", func(o *ServerOptions) { o.Capacity = 1 << 63 }},
		{"short key", func(o *ServerOptions) { o.Key = testKey[:31] }},
		{"tiny frame", func(o *ServerOptions) { o.MaxFrame = 100 }},
		{"huge frame", func(o *ServerOptions) { o.MaxFrame = 1 << 31 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := good
			tc.edit(&o)
			if _, err := NewServer(o); err == nil {
				t.Fatalf("NewServer accepted %+v", o)
			}
		})
	}
}

func TestSetKey(t *testing.T) {
	n := startNode(t, nil)
	c := n.dial(t, n.token(t, nil))
	k2 := Key(bytes.Repeat([]byte{3}, KeySize))
	n.s.SetKey(k2)
	if _, err := Dial(bg, n.addr, n.token(t, nil)); !errors.Is(err, ErrBadToken) {
		t.Fatalf("old-key token after SetKey: %v", err)
	}
	if err := c.Ping(bg); err != nil {
		t.Fatal(err)
	}
	if err := c.Renew(bg, mustSign(t, k2, testClaims())); err != nil {
		t.Fatalf("Renew with new-key token: %v", err)
	}
	if err := c.Read(bg, 0, make([]byte, 1)); err != nil {
		t.Fatalf("read after re-keyed Renew: %v", err)
	}
}

// TestCancelledReaderPassesRole cancels the caller that is reading the
// socket while another waits: the other must still get its answer.
func TestCancelledReaderPassesRole(t *testing.T) {
	f := startFake(t)
	c, err := Dial(bg, f.addr, "tok")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	r := f.next(t)

	ctx, cancel := context.WithCancel(bg)
	errA := make(chan error, 1)
	go func() { errA <- c.Read(ctx, 0, make([]byte, 10)) }()
	hA, _ := r.req() // A is alone, so it holds the reader role
	errB := make(chan error, 1)
	go func() { errB <- c.Ping(bg) }()
	hB, _ := r.req()

	cancel()
	select {
	case err := <-errA:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("cancelled Read: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("cancelled Read did not return")
	}
	r.reply(hB.tag, statusOK, nil)
	select {
	case err := <-errB:
		if err != nil {
			t.Fatalf("Ping: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Ping not answered after the reader was cancelled")
	}
	r.reply(hA.tag, statusOK, make([]byte, 10)) // late, skipped
	go func() { errB <- c.Ping(bg) }()
	h, _ := r.req()
	r.reply(h.tag, statusOK, nil)
	if err := <-errB; err != nil {
		t.Fatalf("Ping after a late answer: %v", err)
	}
}

// TestOrphansAreDrained leaves more answered-but-abandoned data on the wire
// than socket buffers hold, with no caller waiting: the client must still
// read it so the server is not stuck.
func TestOrphansAreDrained(t *testing.T) {
	f := startFake(t)
	c, err := Dial(bg, f.addr, "tok")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	r := f.next(t)

	const calls, size = 24, 1 << 20
	ctx, cancel := context.WithCancel(bg)
	errs := make(chan error, calls)
	for range calls {
		go func() { errs <- c.Read(ctx, 0, make([]byte, size)) }()
	}
	var tags []uint32
	for range calls {
		h, _ := r.req()
		tags = append(tags, h.tag)
	}
	cancel()
	for range calls {
		if err := <-errs; !errors.Is(err, context.Canceled) {
			t.Fatalf("cancelled Read: %v", err)
		}
	}
	wrote := make(chan error, 1)
	go func() {
		payload := make([]byte, size)
		for _, tag := range tags {
			b := appendRespHeader(nil, tag, statusOK, size)
			if _, err := r.nc.Write(append(b, payload...)); err != nil {
				wrote <- err
				return
			}
		}
		wrote <- nil
	}()
	select {
	case err := <-wrote:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("abandoned answers were not drained")
	}
	go func() { errs <- c.Ping(bg) }()
	h, _ := r.req()
	r.reply(h.tag, statusOK, nil)
	if err := <-errs; err != nil {
		t.Fatalf("Ping after drained orphans: %v", err)
	}
}

// TestMixedCancellationUnderLoad mixes callers that give up with callers
// that do not, on a real server, and checks the patient ones all succeed.
func TestMixedCancellationUnderLoad(t *testing.T) {
	n := startNode(t, nil)
	c := n.dial(t, n.token(t, nil))
	want := pattern(4, 32<<10)
	if err := c.Write(bg, 0, want); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			buf := make([]byte, len(want))
			for i := range 30 {
				if w%2 == 0 {
					ctx, cancel := context.WithTimeout(bg, time.Duration(i%5)*20*time.Microsecond)
					err := c.Read(ctx, 0, buf)
					cancel()
					if err != nil && !errors.Is(err, context.DeadlineExceeded) {
						t.Errorf("impatient Read: %v", err)
						return
					}
					continue
				}
				if err := c.Read(bg, 0, buf); err != nil {
					t.Errorf("patient Read: %v", err)
					return
				}
				if !bytes.Equal(buf, want) {
					t.Error("patient Read got wrong data")
					return
				}
			}
		}()
	}
	wg.Wait()
	if err := c.Ping(bg); err != nil {
		t.Fatal(err)
	}
}

// TestBigWriteBehindAbandonedReads queues far more READ data than socket
// buffers hold, abandons the READs, then sends a large WRITE: the server
// can only read the WRITE once the abandoned answers are drained.
func TestBigWriteBehindAbandonedReads(t *testing.T) {
	n := startNode(t, func(o *ServerOptions) { o.Capacity = 64 << 20 })
	c := n.dial(t, n.token(t, func(c *Claims) { c.Offset, c.Length = 0, 32<<20 }))
	const readers, size = 8, 4 << 20
	errs := make(chan error, readers)
	for range readers {
		go func() {
			ctx, cancel := context.WithTimeout(bg, 2*time.Millisecond)
			defer cancel()
			errs <- c.Read(ctx, 0, make([]byte, size))
		}()
	}
	for range readers {
		if err := <-errs; err != nil && !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Read: %v", err)
		}
	}
	ctx, cancel := context.WithTimeout(bg, 10*time.Second)
	defer cancel()
	data := pattern(6, 8<<20)
	if err := c.Write(ctx, 0, data); err != nil {
		t.Fatalf("Write behind abandoned reads: %v", err)
	}
	got := make([]byte, len(data))
	if err := c.Read(bg, 0, got); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("read back: %v", err)
	}
}
