//go:build linux && (amd64 || arm64 || riscv64 || loong64)

package pager

import (
	"context"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"rackpool/internal/memory"
)

// fill writes a pattern that differs in every 8 bytes and every seed.
func fill(b []byte, seed uint32) {
	for i := 0; i+8 <= len(b); i += 8 {
		v := uint64(i)*0x9E3779B97F4A7C15 ^ uint64(seed)<<32
		for k := range 8 {
			b[i+k] = byte(v >> (8 * k))
		}
	}
}

func access(t *testing.T, p *Pager, f func([]byte)) {
	t.Helper()
	if err := p.Access(f); err != nil {
		t.Fatalf("Access: %v", err)
	}
}

// Data written through a region four times the local budget survives
// eviction: every page is written back once, comes back with its
// contents, and a read-only pass writes nothing back. Over TCP pages go in
// write-protected and a first write marks one dirty; from a mapped lease
// they go in writable and eviction writes back those that changed: the
// counts are the same.
func TestSurvivesEviction(t *testing.T) {
	const size = 4 << 20
	pages := uint64(size / pageSize)
	for _, tr := range transports {
		for _, prefetch := range []int{1, 8, 64} {
			t.Run(fmt.Sprintf("%s/prefetch=%d", tr.name, prefetch), func(t *testing.T) {
				testSurvivesEviction(t, tr.edit, tr.name == "mapped", prefetch, pages)
			})
		}
	}
}

func testSurvivesEviction(t *testing.T, transport func(*node) func(*Options), mapped bool, prefetch int, pages uint64) {
	const size = 4 << 20
	n := startNode(t, size)
	p := n.open(t, size, size/4, then(transport(n), func(o *Options) { o.Prefetch = prefetch }))
	want := make([]byte, size)
	fill(want, uint32(prefetch))
	// Write the region once, page by page in order, so that the
	// counts below are exact. A single copy(r, want) is not one
	// pass: memmove may store a saved head block last (amd64's
	// AVX path keeps the first 32 bytes of a large copy for the
	// end), touching page 0 again after it was evicted, which
	// fetches its group back and evicts another batch. That is
	// a legal access the pager serves correctly, but not the
	// one this test counts.
	ps := int(pageSize)
	access(t, p, func(r []byte) {
		for i := 0; i < len(r); i += ps {
			copy(r[i:i+ps], want[i:i+ps])
		}
	})
	s := p.Stats()
	if s.Resident > s.Budget || s.Budget != pages/4 {
		t.Fatalf("resident %d pages, budget %d, want budget %d", s.Resident, s.Budget, pages/4)
	}
	if s.Writebacks != s.Evictions || s.Evictions != pages-s.Resident {
		t.Fatalf("after writing every page: %d evictions, %d writebacks, %d resident; want %d evictions, all written back",
			s.Evictions, s.Writebacks, s.Resident, pages-s.Resident)
	}
	if s.Fetches != 0 {
		t.Fatalf("%d fetches while writing fresh pages, want 0 (never-written pages are zeros)", s.Fetches)
	}
	if mapped && s.WriteFaults != 0 {
		t.Fatalf("%d write-protect faults from a mapped lease, want 0 (pages go in writable)", s.WriteFaults)
	}
	var got uint32
	access(t, p, func(r []byte) { got = crc32.ChecksumIEEE(r) })
	if w := crc32.ChecksumIEEE(want); got != w {
		t.Fatalf("checksum %08x after eviction, want %08x", got, w)
	}
	s2 := p.Stats()
	if s2.Writebacks != pages {
		t.Fatalf("after reading back: %d pages written back, want each of the %d once", s2.Writebacks, pages)
	}
	if s2.Fetched == 0 || s2.Faults == 0 {
		t.Fatalf("read back with no fetch: %+v", s2)
	}
	// Read-only passes drop clean pages without writing them.
	access(t, p, func(r []byte) { got = crc32.ChecksumIEEE(r) })
	access(t, p, func(r []byte) { got ^= crc32.ChecksumIEEE(r) })
	s3 := p.Stats()
	if got != 0 {
		t.Fatal("two reads of the region differ")
	}
	if s3.Writebacks != s2.Writebacks || s3.Evictions <= s2.Evictions {
		t.Fatalf("read-only passes: writebacks %d → %d (want unchanged), evictions %d → %d (want more)",
			s2.Writebacks, s3.Writebacks, s2.Evictions, s3.Evictions)
	}
	// Dirtying one page in four writes back exactly those once
	// they are evicted.
	access(t, p, func(r []byte) {
		for i := 0; i < len(r); i += 4 * int(pageSize) {
			r[i]++
			want[i]++
		}
	})
	access(t, p, func(r []byte) { got = crc32.ChecksumIEEE(r) })
	access(t, p, func(r []byte) { got = crc32.ChecksumIEEE(r) })
	s4 := p.Stats()
	if w := crc32.ChecksumIEEE(want); got != w {
		t.Fatalf("checksum %08x after a sparse update, want %08x", got, w)
	}
	if d := s4.Writebacks - s3.Writebacks; d != pages/4 {
		t.Fatalf("sparse update of %d pages wrote back %d", pages/4, d)
	}
	var sum uint64
	for _, c := range s4.Latency {
		sum += c
	}
	if sum != s4.Faults || s4.LatencyQuantile(0.5) == 0 {
		t.Fatalf("latency histogram holds %d faults, want %d", sum, s4.Faults)
	}
}

// Filling a fresh region takes a fault per window of zeroWindow pages,
// not per prefetch group, while the budget has free frames: pages never
// written to the pool are zeros, and nothing is evicted for them. Once
// the budget is full, a fault brings in its prefetch group again.
func TestZeroWindow(t *testing.T) {
	const size = 4 << 20
	pages := uint64(size / pageSize)
	for _, tr := range transports {
		t.Run(tr.name, func(t *testing.T) {
			n := startNode(t, size)
			p := n.open(t, size, size, tr.edit(n))
			ps := int(pageSize)
			access(t, p, func(r []byte) {
				for i := 0; i < len(r); i += ps {
					r[i] = 1
				}
			})
			s := p.Stats()
			if want := pages / zeroWindow; s.Faults != want || s.ZeroFills != pages || s.Prefetched != pages-want || s.Fetches != 0 {
				t.Fatalf("filling %d fresh pages: %d faults (want %d), %d zero-filled, %d prefetched, %d fetches",
					pages, s.Faults, want, s.ZeroFills, s.Prefetched, s.Fetches)
			}
			// A quarter budget: the windows fill it, then every fault is
			// a prefetch group (8 pages) with evictions.
			n2 := startNode(t, size)
			p2 := n2.open(t, size, size/4, tr.edit(n2))
			access(t, p2, func(r []byte) {
				for i := 0; i < len(r); i += ps {
					r[i] = 1
				}
			})
			s = p2.Stats()
			if want := pages/4/zeroWindow + (pages-pages/4)/DefaultPrefetch; s.Faults != want {
				t.Fatalf("filling %d fresh pages with a budget of %d: %d faults, want %d", pages, pages/4, s.Faults, want)
			}
		})
	}
}

// Pages that hold zeros when they are evicted are not written back unless
// the pool holds other contents for them: zeros go in writable (no
// write-protect fault on their first write, over TCP too) and eviction
// tells them from written pages. A page the pool holds that is zeroed is
// written back.
func TestZerosNotWrittenBack(t *testing.T) {
	const size = 4 << 20
	pages := uint64(size / pageSize)
	ps := int(pageSize)
	for _, tr := range transports {
		t.Run(tr.name, func(t *testing.T) {
			n := startNode(t, size)
			p := n.open(t, size, size/4, tr.edit(n))
			access(t, p, func(r []byte) {
				for i := 0; i < len(r); i += ps {
					r[i] = 0 // a write that leaves the page zeros
				}
			})
			s := p.Stats()
			if s.Evictions == 0 || s.Writebacks != 0 || s.WriteFaults != 0 {
				t.Fatalf("writing zeros over fresh pages: %d evictions, %d writebacks, %d write-protect faults; want evictions and no writeback or write-protect fault",
					s.Evictions, s.Writebacks, s.WriteFaults)
			}
			access(t, p, func(r []byte) {
				for i := 0; i < len(r); i += ps {
					r[i] = 1
				}
			})
			access(t, p, func(r []byte) {
				for i := 0; i < len(r); i += ps {
					r[i] = 0
				}
			})
			access(t, p, func(r []byte) {
				for i := 0; i < len(r); i += ps {
					if r[i] != 0 {
						t.Fatalf("page %d reads %d after it was zeroed", i/ps, r[i])
					}
				}
			})
			if s := p.Stats(); s.Writebacks < 2*pages-2*pages/4 {
				t.Fatalf("writing ones then zeros over %d pages in a budget of %d: %d writebacks, want each evicted page written back both times",
					pages, pages/4, s.Writebacks)
			}
		})
	}
}

// Goroutines with interleaved pages (so they share prefetch groups and
// victims) write and check their own pages over several rounds.
func TestConcurrentAccessors(t *testing.T) {
	for _, tr := range transports {
		t.Run(tr.name, func(t *testing.T) { testConcurrentAccessors(t, tr.edit) })
	}
}

func testConcurrentAccessors(t *testing.T, transport func(*node) func(*Options)) {
	const size, workers, rounds = 4 << 20, 4, 3
	n := startNode(t, size)
	p := n.open(t, size, size/4, transport(n))
	ps := int(pageSize)
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		wg.Go(func() {
			page := make([]byte, ps)
			for round := range rounds {
				err := p.Access(func(r []byte) {
					for i := w * ps; i < len(r); i += workers * ps {
						fill(page, uint32(round*1000+i))
						copy(r[i:i+ps], page)
					}
					for i := w * ps; i < len(r); i += workers * ps {
						fill(page, uint32(round*1000+i))
						if string(r[i:i+ps]) != string(page) {
							errs <- fmt.Errorf("worker %d round %d: page at %d lost its contents", w, round, i)
							return
						}
					}
				})
				if err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if s := p.Stats(); s.Evictions == 0 || s.Writebacks == 0 {
		t.Fatalf("no eviction with a region four times the budget: %+v", s)
	}
}

var sink byte

// proxy forwards to a memnode and can stall the requests.
type proxy struct {
	addr string
	gate sync.RWMutex // held for writing while stalled
}

func startProxy(t *testing.T, backend string) *proxy {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	px := &proxy{addr: l.Addr().String()}
	var conns []net.Conn
	var mu sync.Mutex
	t.Cleanup(func() {
		l.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
	})
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			b, err := net.Dial("tcp", backend)
			if err != nil {
				c.Close()
				continue
			}
			mu.Lock()
			conns = append(conns, c, b)
			mu.Unlock()
			go io.Copy(c, b)
			go func() {
				buf := make([]byte, 64<<10)
				for {
					n, err := c.Read(buf)
					if err != nil {
						b.Close()
						return
					}
					px.gate.RLock()
					_, err = b.Write(buf[:n])
					px.gate.RUnlock()
					if err != nil {
						return
					}
				}
			}()
		}
	}()
	return px
}

// waitFor polls cond every 10ms for up to 20s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for range 2000 {
		if cond() {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("timed out waiting for %s", what)
}

func recvWithin(t *testing.T, what string, c <-chan error) error {
	t.Helper()
	select {
	case err := <-c:
		return err
	case <-time.After(20 * time.Second):
		t.Fatalf("%s: still blocked after 20s", what)
		return nil
	}
}

// Close while a thread waits on a fault the memnode does not answer: Close
// returns, and the thread is woken with ErrClosed.
func TestCloseDuringFault(t *testing.T) {
	const size = 1 << 20
	n := startNode(t, size)
	px := startProxy(t, n.addr)
	p := n.open(t, size, size/4, func(o *Options) { o.Endpoint = px.addr; o.IOTimeout = time.Minute })
	access(t, p, func(r []byte) { fill(r, 7) }) // the first pages are now in the pool only
	px.gate.Lock()
	stalled := true
	defer func() {
		if stalled {
			px.gate.Unlock()
		}
	}()
	done := make(chan error, 1)
	go func() { done <- p.Access(func(r []byte) { sink = r[0] }) }()
	waitFor(t, "the fault to reach the helper", func() bool { return p.Stats().InFlight > 0 })
	closed := make(chan error, 1)
	go func() { closed <- p.Close() }()
	if err := recvWithin(t, "Close", closed); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := recvWithin(t, "the faulting Access", done); !errors.Is(err, ErrClosed) {
		t.Fatalf("faulting Access returned %v, want ErrClosed", err)
	}
	px.gate.Unlock()
	stalled = false
	if err := p.Access(func([]byte) { t.Error("Access ran f after Close") }); !errors.Is(err, ErrClosed) {
		t.Fatalf("Access after Close: %v, want ErrClosed", err)
	}
	if err := p.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
}

// A memnode that refuses or loses the lease fails the pager: the access
// that needed it, and every later one, even of a page that was resident,
// gets the error; nothing reads zeros.
//
// From a mapped lease the memnode discarding the lease is seen either by
// the fault, whose page comes back other than it went (a discarded lease
// reads zeros), or by the helper's check of the lease every second; a
// node that is gone is seen by that check (its pages are still in the
// mapping, but no longer the lease's), so the mapped cases wait for the
// failure before they access the region.
func TestMemnodeErrors(t *testing.T) {
	const size = 1 << 20
	for _, tr := range transports {
		for _, tc := range []struct {
			name   string
			break_ func(*testing.T, *node)
			want   error
		}{
			{"revoked", func(t *testing.T, n *node) { n.revoke(t) }, memory.ErrRevoked},
			{"node gone", func(t *testing.T, n *node) { n.stop() }, memory.ErrClosed},
		} {
			t.Run(tr.name+"/"+tc.name, func(t *testing.T) {
				n := startNode(t, size)
				p := n.open(t, size, size/4, tr.edit(n))
				testMemnodeError(t, n, p, tr.name == "mapped" && tc.name == "node gone", tc.break_, tc.want)
			})
		}
	}
}

func testMemnodeError(t *testing.T, n *node, p *Pager, await bool, break_ func(*testing.T, *node), want error) {
	access(t, p, func(r []byte) { fill(r, 3) })
	last := len(p.Bytes()) - 1 // resident: written last
	break_(t, n)
	if await {
		select {
		case <-p.Failed():
		case <-time.After(20 * time.Second):
			t.Fatal("the pager did not fail within 20s of its memnode's exit")
		}
	}
	var read byte
	err := p.Access(func(r []byte) { read = r[0] }) // evicted: needs a fetch
	if !errors.Is(err, ErrFailed) || !errors.Is(err, want) {
		t.Fatalf("Access of an evicted page: %v (read %d), want ErrFailed and %v", err, read, want)
	}
	select {
	case <-p.Failed():
	default:
		t.Fatal("Failed() not closed after a failure")
	}
	if !errors.Is(p.Err(), want) {
		t.Fatalf("Err() = %v", p.Err())
	}
	if err := p.Access(func(r []byte) { read = r[last] }); !errors.Is(err, ErrFailed) {
		t.Fatalf("Access of a once-resident page after the failure: %v (read %d), want ErrFailed", err, read)
	}
	if err := p.Close(); err != nil {
		t.Fatalf("Close after failure: %v", err)
	}
}

func TestBadInput(t *testing.T) {
	n := startNode(t, 4<<20)
	ps := pageSize
	good := func() Options {
		return Options{Size: 64 * ps, Local: 16 * ps, Endpoint: n.addr, Token: n.token(t, uint64(64*ps), nil)}
	}
	for _, tc := range []struct {
		name string
		edit func(*Options)
		want string // in the error
		is   error
	}{
		{"zero size", func(o *Options) { o.Size = 0 }, "must be positive", nil},
		{"negative size", func(o *Options) { o.Size = -ps }, "must be positive", nil},
		{"unaligned size", func(o *Options) { o.Size = 64*ps + 1 }, "not a multiple of the page size", nil},
		{"zero budget", func(o *Options) { o.Local = 0 }, "local budget 0 must be positive", nil},
		{"unaligned budget", func(o *Options) { o.Local = ps + 100 }, "not a multiple of the page size", nil},
		{"budget over region", func(o *Options) { o.Local = 65 * ps }, "larger than the region", nil},
		{"no endpoint", func(o *Options) { o.Endpoint = "" }, "no memnode endpoint", nil},
		{"no token", func(o *Options) { o.Token = "" }, "no token", nil},
		{"prefetch not a power of two", func(o *Options) { o.Prefetch = 3 }, "power of two", nil},
		{"prefetch too large", func(o *Options) { o.Prefetch = 512 }, "power of two", nil},
		{"unaligned lease offset", func(o *Options) { o.Offset = 10 }, "lease offset", nil},
		{"lease too small", func(o *Options) { o.Token = n.token(t, uint64(32*ps), nil) }, "lease holds", errLeaseTooSmall},
		{"offset past the lease", func(o *Options) { o.Offset = uint64(ps) }, "lease holds", errLeaseTooSmall},
		{"read-only token", func(o *Options) {
			o.Token = n.token(t, uint64(64*ps), func(c *memory.Claims) { c.Rights = memory.RightRead })
		}, "write rights", memory.ErrRights},
		{"expired token", func(o *Options) {
			o.Token = n.token(t, uint64(64*ps), func(c *memory.Claims) { c.Expiry = time.Now().Add(-time.Second) })
		}, "expired", memory.ErrExpired},
		{"forged token", func(o *Options) { o.Token = strings.ToUpper(o.Token) }, "bad token", memory.ErrBadToken},
		{"nobody there", func(o *Options) { o.Endpoint = "127.0.0.1:1" }, "refused", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := good()
			tc.edit(&o)
			openRefuses(t, o, tc.want, tc.is)
		})
	}
	t.Run("good", func(t *testing.T) {
		p, err := Open(context.Background(), good())
		if err != nil {
			t.Fatalf("Open: %v", err)
		}
		p.Close()
	})
}

// Open with a mapped lease refuses what it refuses over TCP, for the same
// reasons, and a socket nobody serves.
func TestBadInputMapped(t *testing.T) {
	n := startNode(t, 4<<20)
	ps := pageSize
	good := func() Options {
		return Options{Size: 64 * ps, Local: 16 * ps, MapSocket: n.sock, Token: n.token(t, uint64(64*ps), nil)}
	}
	for _, tc := range []struct {
		name string
		edit func(*Options)
		want string // in the error
		is   error
	}{
		{"no endpoint or socket", func(o *Options) { o.MapSocket = "" }, "no memnode endpoint", nil},
		{"lease too small", func(o *Options) { o.Token = n.token(t, uint64(32*ps), nil) }, "lease holds", errLeaseTooSmall},
		{"offset past the lease", func(o *Options) { o.Offset = uint64(ps) }, "lease holds", errLeaseTooSmall},
		{"read-only token", func(o *Options) {
			o.Token = n.token(t, uint64(64*ps), func(c *memory.Claims) { c.Rights = memory.RightRead })
		}, "write rights", memory.ErrRights},
		{"expired token", func(o *Options) {
			o.Token = n.token(t, uint64(64*ps), func(c *memory.Claims) { c.Expiry = time.Now().Add(-time.Second) })
		}, "expired", memory.ErrExpired},
		{"forged token", func(o *Options) { o.Token = strings.ToUpper(o.Token) }, "bad token", memory.ErrBadToken},
		{"nobody there", func(o *Options) { o.MapSocket = n.sock + ".none" }, "no such file", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := good()
			tc.edit(&o)
			openRefuses(t, o, tc.want, tc.is)
		})
	}
}

// A lease that expires under the pager fails it with memory.ErrExpired at
// the next fetch, over TCP (the memnode refuses) and from a mapping (the
// mapping refuses by its clock, or the node's check does).
func TestLeaseExpires(t *testing.T) {
	const size = 1 << 20
	for _, tr := range transports {
		t.Run(tr.name, func(t *testing.T) {
			n := startNode(t, size)
			expiry := time.Now().Add(2 * time.Second)
			p := n.open(t, size, size/4, then(tr.edit(n), func(o *Options) {
				o.Token = n.token(t, size, func(c *memory.Claims) { c.Expiry = expiry })
			}))
			access(t, p, func(r []byte) { fill(r, 5) })
			time.Sleep(time.Until(expiry) + 100*time.Millisecond)
			var read byte
			err := p.Access(func(r []byte) { read = r[0] }) // evicted: needs a fetch
			if !errors.Is(err, ErrFailed) || !errors.Is(err, memory.ErrExpired) {
				t.Fatalf("Access after the lease expired: %v (read %d), want ErrFailed and ErrExpired", err, read)
			}
		})
	}
}

// A page that comes back from a mapped lease other than it went (here
// another holder of the lease writes it) fails the pager rather than be
// installed: the helper checks every page it fetches against the hash it
// kept when it wrote the page.
func TestMappedPageChanged(t *testing.T) {
	const size = 1 << 20
	n := startNode(t, size)
	p := n.open(t, size, size/4, func(o *Options) { o.MapSocket, o.Endpoint = n.sock, "" })
	access(t, p, func(r []byte) { fill(r, 9) }) // the first pages are now in the pool only
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	other, err := memory.Map(ctx, n.sock, n.token(t, size, nil))
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if err := other.Write(ctx, 100, []byte{0xFF}); err != nil {
		t.Fatal(err)
	}
	var read byte
	err = p.Access(func(r []byte) { read = r[0] })
	if !errors.Is(err, ErrFailed) || !strings.Contains(err.Error(), "page 0 of the mapped lease changed") {
		t.Fatalf("Access of a page changed in the pool: %v (read %d), want ErrFailed naming page 0", err, read)
	}
}

// Access passes panics that are not faults on the region through, and
// leaves the pager working.
func TestAccessPanicPassesThrough(t *testing.T) {
	n := startNode(t, 1<<20)
	p := n.open(t, 1<<20, 1<<18, nil)
	func() {
		defer func() {
			if r := recover(); r != "boom" {
				t.Fatalf("recovered %v, want boom", r)
			}
		}()
		p.Access(func([]byte) { panic("boom") })
	}()
	access(t, p, func(r []byte) { r[0] = 1 })
	if p.Bytes()[0] != 1 {
		t.Fatal("write through Access not seen")
	}
}

// openRefuses checks that Open refuses o with an error containing want
// (and wrapping is, if set).
func openRefuses(t *testing.T, o Options, want string, is error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	p, err := Open(ctx, o)
	if err == nil {
		p.Close()
		t.Fatal("Open succeeded")
	}
	if !strings.Contains(err.Error(), want) || (is != nil && !errors.Is(err, is)) {
		t.Fatalf("Open: %v; want an error containing %q (is %v)", err, want, is)
	}
}
