package memory

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"io"
	"net"
	"runtime"
	"testing"
	"time"

	"rackpool/internal/clock"
)

// TestMalformedRequests speaks to a real server over raw sockets and checks
// each bad frame is refused, the server stays up and memory is unchanged.
func TestMalformedRequests(t *testing.T) {
	n := startNode(t, func(o *ServerOptions) { o.MaxFrame = 64 << 10 })
	seed := pattern(5, int(testClaims().Length))
	owner := n.dial(t, n.token(t, nil))
	if err := owner.Write(bg, 0, seed); err != nil {
		t.Fatal(err)
	}
	roToken := n.token(t, func(c *Claims) { c.Rights = RightRead })
	junk := bytes.Repeat([]byte{0xff}, 100)

	t.Run("recoverable", func(t *testing.T) {
		r := n.raw(t)
		for _, tc := range []struct {
			name   string
			frame  []byte
			status byte
		}{
			{"read before auth", reqFrame(reqHeader{op: opRead, tag: 1, count: 10}, nil), statusNoAuth},
			{"write before auth", reqFrame(reqHeader{op: opWrite, tag: 2}, junk), statusNoAuth},
			{"append before auth", reqFrame(reqHeader{op: opAppend, tag: 3}, junk), statusNoAuth},
			{"zero before auth", reqFrame(reqHeader{op: opZero, tag: 4}, nil), statusNoAuth},
			{"stat before auth", reqFrame(reqHeader{op: opStat, tag: 5}, nil), statusNoAuth},
			{"unknown opcode", reqFrame(reqHeader{op: 99, tag: 6}, junk), statusProtocol},
			{"opcode zero", reqFrame(reqHeader{op: 0, tag: 7}, nil), statusProtocol},
			{"flags set", reqFrame(reqHeader{op: opPing, tag: 8, flags: 1}, nil), statusProtocol},
			{"read with payload", reqFrame(reqHeader{op: opRead, tag: 9}, junk), statusProtocol},
			{"garbage token", reqFrame(reqHeader{op: opAuth, tag: 10}, junk), statusBadToken},
			{"empty token", reqFrame(reqHeader{op: opAuth, tag: 11}, nil), statusBadToken},
			{"forged token", reqFrame(reqHeader{op: opAuth, tag: 12},
				[]byte(mustSign(t, Key(bytes.Repeat([]byte{1}, KeySize)), testClaims()))), statusBadToken},
			{"expired token", reqFrame(reqHeader{op: opAuth, tag: 13},
				[]byte(n.token(t, func(c *Claims) { c.Expiry = t0 }))), statusExpired},
			{"wrong node", reqFrame(reqHeader{op: opAuth, tag: 14},
				[]byte(n.token(t, func(c *Claims) { c.Node = "x" }))), statusWrongNode},
			{"token too long", reqFrame(reqHeader{op: opAuth, tag: 15}, make([]byte, 8000)), statusBadToken},
			{"still before auth", reqFrame(reqHeader{op: opWrite, tag: 16}, junk), statusNoAuth},
			{"ping", reqFrame(reqHeader{op: opPing, tag: 17}, nil), statusOK},
			{"read-only auth", reqFrame(reqHeader{op: opAuth, tag: 18}, []byte(roToken)), statusOK},
			{"write without rights", reqFrame(reqHeader{op: opWrite, tag: 19}, junk), statusRights},
			{"read too large", reqFrame(reqHeader{op: opRead, tag: 20, count: 64<<10 + 1}, nil), statusTooLarge},
			{"read out of range", reqFrame(reqHeader{op: opRead, tag: 21, offset: 1 << 40, count: 1}, nil), statusRange},
		} {
			r.send(tc.frame)
			var h reqHeader
			h.decode(tc.frame)
			p := r.expect(h.tag, tc.status)
			if tc.status != statusOK && len(p) > maxErrMsg {
				t.Errorf("%s: error message of %d bytes", tc.name, len(p))
			}
		}
	})

	t.Run("pipelined", func(t *testing.T) {
		r := n.raw(t)
		var b []byte
		b = append(b, reqFrame(reqHeader{op: opAuth, tag: 100}, []byte(roToken))...)
		for i := range 50 {
			b = append(b, reqFrame(reqHeader{op: opRead, tag: uint32(200 + i), offset: uint64(i), count: 3}, nil)...)
		}
		r.send(b)
		r.expect(100, statusOK)
		for i := range 50 {
			if p := r.expect(uint32(200+i), statusOK); !bytes.Equal(p, seed[i:i+3]) {
				t.Fatalf("pipelined read %d: %v", i, p)
			}
		}
	})

	for _, tc := range []struct {
		name  string
		frame []byte
		reply bool // an error response comes before the close
	}{
		{"bad version", reqFrame(reqHeader{version: 0x47, op: opPing, tag: 1}, nil), true},
		{"oversized length", reqFrame(reqHeader{op: opWrite, tag: 1, length: 64<<10 + 1}, nil), true},
		{"huge length", reqFrame(reqHeader{op: opAuth, tag: 1, length: 0xffffffff}, nil), true},
		{"truncated header", reqFrame(reqHeader{op: opPing, tag: 1}, nil)[:10], false},
		{"truncated auth", reqFrame(reqHeader{op: opAuth, tag: 1, length: 500}, []byte(roToken))[:reqHdrLen+20], false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := n.raw(t)
			r.send(tc.frame)
			r.nc.(*net.TCPConn).CloseWrite()
			if tc.reply {
				_, st, _ := r.recv()
				if st == statusOK {
					t.Fatal("bad frame answered OK")
				}
			}
			r.expectClosed()
		})
	}

	t.Run("truncated write", func(t *testing.T) {
		r := n.raw(t)
		r.send(reqFrame(reqHeader{op: opAuth, tag: 1}, []byte(n.token(t, nil))))
		r.expect(1, statusOK)
		f := reqFrame(reqHeader{op: opWrite, tag: 2, length: 1000}, junk)
		r.send(f)
		r.nc.(*net.TCPConn).CloseWrite()
		r.expectClosed()
	})

	got := make([]byte, len(seed))
	if err := owner.Read(bg, 0, got); err != nil {
		t.Fatalf("server unusable after bad frames: %v", err)
	}
	if !bytes.Equal(got, seed) {
		t.Fatal("bad frames changed memory")
	}
	if _, err := Dial(bg, n.addr, n.token(t, nil)); err != nil {
		t.Fatalf("Dial after bad frames: %v", err)
	}
	if s := n.s.Stats(); s.Errors < 20 {
		t.Errorf("Stats.Errors = %d after the bad frames", s.Errors)
	}
}

func TestLockSpan(t *testing.T) {
	for _, tc := range []struct{ off, n uint64 }{
		{0, 1}, {0, 1 << stripeShift}, {0, 1<<stripeShift + 1}, {1<<stripeShift - 1, 2},
		{255 << stripeShift, 1}, {255 << stripeShift, 2 << stripeShift}, {250 << stripeShift, 10 << stripeShift},
		{7, 255 << stripeShift}, {7, 256 << stripeShift}, {0, 1 << 40}, {1 << 40, 3 << stripeShift},
	} {
		want := map[int]bool{}
		for s := tc.off >> stripeShift; s <= (tc.off+tc.n-1)>>stripeShift && len(want) < nStripeLocks; s++ {
			want[int(s%nStripeLocks)] = true
		}
		lo1, hi1, lo2, hi2 := lockSpan(tc.off, tc.n)
		got := map[int]bool{}
		prev := -1
		for _, r := range [2][2]int{{lo1, hi1}, {lo2, hi2}} {
			for i := r[0]; i <= r[1]; i++ {
				if i <= prev {
					t.Fatalf("lockSpan(%d, %d): lock %d after %d", tc.off, tc.n, i, prev)
				}
				prev = i
				got[i] = true
			}
		}
		if len(got) != len(want) {
			t.Fatalf("lockSpan(%d, %d) takes %d locks, want %d", tc.off, tc.n, len(got), len(want))
		}
		for i := range want {
			if !got[i] {
				t.Fatalf("lockSpan(%d, %d) misses lock %d", tc.off, tc.n, i)
			}
		}
	}
}

func TestArenaZero(t *testing.T) {
	const size = 3*zeroChunk + 12345
	a, err := newArena(size)
	if err != nil {
		t.Fatal(err)
	}
	defer a.close()
	model := pattern(1, size)
	a.writeAt(0, model)
	for _, r := range []struct{ off, n uint64 }{
		{0, 1}, {5, 4096}, {4096, 4096}, {zeroChunk - 10, 20}, {100, 2*zeroChunk + 7}, {size - 3, 3}, {0, size},
	} {
		a.writeAt(0, model)
		a.zero(r.off, r.n)
		want := bytes.Clone(model)
		clear(want[r.off : r.off+r.n])
		got := make([]byte, size)
		a.readAt(got, 0)
		if !bytes.Equal(got, want) {
			t.Fatalf("zero(%d, %d) left the arena wrong", r.off, r.n)
		}
	}
}

// fuzzServer is a small server whose connections the fuzzer drives over
// in-memory streams.
func fuzzServer(tb testing.TB) *Server {
	s, err := NewServer(ServerOptions{
		Node: "mem0", Capacity: 256 << 10, Key: testKey,
		Clock: clock.NewManual(t0), MaxFrame: minMaxFrame * 4,
	})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { s.Close() })
	return s
}

// fuzzToken grants the fuzzer 8 KiB at 64 KiB, all rights.
func fuzzToken(tb testing.TB) string {
	return mustSign(tb, testKey, Claims{Lease: "f", Node: "mem0", Offset: 64 << 10, Length: 8 << 10,
		Rights: RightRead | RightWrite | RightAdmin, Expiry: t0.Add(time.Hour)})
}

func FuzzRequestFrame(f *testing.F) {
	tok := []byte(fuzzToken(f))
	auth := reqFrame(reqHeader{op: opAuth, tag: 1}, tok)
	seeds := [][]byte{
		nil,
		reqFrame(reqHeader{op: opPing, tag: 1}, nil),
		reqFrame(reqHeader{op: opRead, tag: 1, count: 10}, nil),
		reqFrame(reqHeader{op: 99, tag: 1}, []byte("xyz")),
		reqFrame(reqHeader{op: opWrite, tag: 1, length: 0xffffffff}, nil),
		reqFrame(reqHeader{version: 0x47, op: opPing}, nil),
		reqFrame(reqHeader{op: opPing}, nil)[:10],
	}
	for _, body := range [][]byte{
		reqFrame(reqHeader{op: opRead, tag: 2, offset: 100, count: 4096}, nil),
		reqFrame(reqHeader{op: opWrite, tag: 2, offset: 8000}, bytes.Repeat([]byte{7}, 192)),
		reqFrame(reqHeader{op: opAppend, tag: 2}, []byte("log record")),
		reqFrame(reqHeader{op: opStat, tag: 2}, nil),
		reqFrame(reqHeader{op: opZero, tag: 2, offset: uint64(t0.Add(time.Minute).UnixNano())}, nil),
		reqFrame(reqHeader{op: opWrite, tag: 2, length: 1000}, []byte("short")),
		reqFrame(reqHeader{op: opRead, tag: 2, offset: 1 << 63, count: 1}, nil),
	} {
		seeds = append(seeds, append(bytes.Clone(auth), body...))
	}
	for _, s := range seeds {
		f.Add(s)
	}

	const regionOff, regionLen = 64 << 10, 8 << 10
	f.Fuzz(func(t *testing.T, in []byte) {
		s := fuzzServer(t) // fresh: ZERO revokes the lease
		c := s.newConn(bytes.NewReader(in), io.Discard)
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		c.serve()
		runtime.ReadMemStats(&after)
		// Allocation is bounded by what arrived and the frame limit, never
		// by lengths claimed on the wire.
		limit := uint64(4*len(in)) + 4*uint64(s.maxFrame) + 1<<20
		if got := after.TotalAlloc - before.TotalAlloc; got > limit {
			t.Fatalf("serving %d bytes allocated %d bytes", len(in), got)
		}
		// Nothing outside the token's region ever changes.
		outside := make([]byte, s.capacity-regionLen)
		s.mem.readAt(outside[:regionOff], 0)
		s.mem.readAt(outside[regionOff:], regionOff+regionLen)
		if !bytes.Equal(outside, make([]byte, len(outside))) {
			t.Fatal("memory outside the region changed")
		}
	})
}

// TestServeStreamResponses checks responses to a stream of requests go out
// in order and complete, through the same path the fuzzer drives.
func TestServeStreamResponses(t *testing.T) {
	s := fuzzServer(t)
	in := reqFrame(reqHeader{op: opAuth, tag: 1}, []byte(fuzzToken(t)))
	in = append(in, reqFrame(reqHeader{op: opWrite, tag: 2, offset: 10}, []byte("hello"))...)
	in = append(in, reqFrame(reqHeader{op: opRead, tag: 3, offset: 8, count: 9}, nil)...)
	in = append(in, reqFrame(reqHeader{op: opAppend, tag: 4}, []byte("ab"))...)
	in = append(in, reqFrame(reqHeader{op: opAppend, tag: 5}, []byte("cd"))...)
	var out bytes.Buffer
	if err := s.newConn(bytes.NewReader(in), &out).serve(); err != nil {
		t.Fatalf("serve: %v", err)
	}
	br := bufio.NewReader(&out)
	for _, want := range []struct {
		tag     uint32
		payload []byte
	}{
		{1, nil}, {2, nil}, {3, []byte("\x00\x00hello\x00\x00")},
		{4, binary.BigEndian.AppendUint64(nil, 0)}, {5, binary.BigEndian.AppendUint64(nil, 2)},
	} {
		var h [respHdrLen]byte
		if _, err := io.ReadFull(br, h[:]); err != nil {
			t.Fatal(err)
		}
		p := make([]byte, binary.BigEndian.Uint32(h[8:]))
		io.ReadFull(br, p)
		if tag := binary.BigEndian.Uint32(h[:]); tag != want.tag || h[4] != statusOK {
			t.Fatalf("response tag %d status %d, want tag %d OK", tag, h[4], want.tag)
		}
		if want.payload != nil && !bytes.Equal(p, want.payload) {
			t.Fatalf("tag %d payload %q, want %q", want.tag, p, want.payload)
		}
	}
	if br.Buffered() != 0 {
		t.Fatal("extra responses")
	}
}
