package nbd

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// transports dial the test server in each way the package supports.
var transports = []struct {
	name string
	dial func(t *testing.T, env *testEnv, export string) *Client
}{
	{"unix", func(t *testing.T, env *testEnv, export string) *Client { return env.dial(t, export) }},
	{"tcp", func(t *testing.T, env *testEnv, export string) *Client {
		c, err := Dial(testCtx(t), "tcp", env.tcp, export)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}},
	{"pipe", func(t *testing.T, env *testEnv, export string) *Client {
		a, b := net.Pipe()
		done := make(chan struct{})
		go func() {
			defer close(done)
			env.srv.ServeConn(context.Background(), b)
		}()
		c, err := NewClient(testCtx(t), a, export)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			c.Close()
			<-done
		})
		return c
	}},
}

func TestReadWriteRoundTrip(t *testing.T) {
	for _, tr := range transports {
		t.Run(tr.name, func(t *testing.T) {
			checkNoLeak(t)
			env := startEnv(t, nil)
			c := tr.dial(t, env, "disk")
			ctx := testCtx(t)
			if c.Size() != testSize {
				t.Fatalf("Size = %d, want %d", c.Size(), testSize)
			}
			want := ExportFlags{CanFlush: true, CanFUA: true, CanTrim: true, CanWriteZeroes: true,
				CanFastZero: true, CanMultiConn: true, CanBlockStatus: true}
			if c.Flags() != want {
				t.Fatalf("Flags = %+v, want %+v", c.Flags(), want)
			}
			for i, tc := range []struct {
				off uint64
				n   int
			}{{0, 512}, {4096, 1 << 20}, {12345, 777}, {testSize - 4096, 4096}, {1, 1}} {
				data := randBytes(uint64(i+1), tc.n)
				if err := c.WriteAt(ctx, data, tc.off, false); err != nil {
					t.Fatalf("WriteAt(%d, %d): %v", tc.off, tc.n, err)
				}
				got := make([]byte, tc.n)
				if err := c.ReadAt(ctx, got, tc.off); err != nil {
					t.Fatalf("ReadAt(%d, %d): %v", tc.off, tc.n, err)
				}
				if !bytes.Equal(got, data) {
					t.Fatalf("read back at %d differs from written", tc.off)
				}
			}
			// The file holds what was written last.
			f, err := os.ReadFile(env.image)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(f[1:2], randBytes(5, 1)) {
				t.Fatal("file does not hold the last write")
			}
		})
	}
}

func TestFUAAndFlush(t *testing.T) {
	env := startEnv(t, nil)
	c := env.dial(t, "disk")
	ctx := testCtx(t)
	data := randBytes(7, 64<<10)
	if err := c.WriteAt(ctx, data, 1<<20, true); err != nil {
		t.Fatalf("FUA WriteAt: %v", err)
	}
	if err := c.WriteAt(ctx, data[:4096], 2<<20, false); err != nil {
		t.Fatal(err)
	}
	if err := c.Flush(ctx); err != nil {
		t.Fatalf("Flush: %v", err)
	}
	if err := c.Trim(ctx, 3<<20, 4096, true); err != nil {
		t.Fatalf("FUA Trim: %v", err)
	}
	if err := c.Zero(ctx, 4<<20, 4096, ZeroFlags{FUA: true, NoHole: true}); err != nil {
		t.Fatalf("FUA Zero: %v", err)
	}
	f, err := os.ReadFile(env.image)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(f[1<<20:1<<20+len(data)], data) || !bytes.Equal(f[2<<20:2<<20+4096], data[:4096]) {
		t.Fatal("file does not hold the writes")
	}
}

func TestTrimShowsHole(t *testing.T) {
	env := startEnv(t, nil)
	c := env.dial(t, "disk")
	ctx := testCtx(t)
	const off, n = 1 << 20, 1 << 20
	if err := c.WriteAt(ctx, bytes.Repeat([]byte{0xaa}, n), off, false); err != nil {
		t.Fatal(err)
	}
	ext, err := c.BlockStatus(ctx, off, n)
	if err != nil {
		t.Fatalf("BlockStatus: %v", err)
	}
	if len(ext) != 1 || ext[0] != (Extent{Length: n}) {
		t.Fatalf("before trim: extents %+v, want one allocated run", ext)
	}
	if err := c.Trim(ctx, off, n, false); err != nil {
		t.Fatalf("Trim: %v", err)
	}
	ext, err = c.BlockStatus(ctx, off, n)
	if err != nil {
		t.Fatalf("BlockStatus: %v", err)
	}
	if len(ext) != 1 || ext[0] != (Extent{Length: n, Hole: true, Zero: true}) {
		t.Fatalf("after trim: extents %+v, want one hole", ext)
	}
	got := make([]byte, n)
	if err := c.ReadAt(ctx, got, off); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, make([]byte, n)) {
		t.Fatal("trimmed range does not read as zeroes")
	}
}

func TestWriteZeroes(t *testing.T) {
	for _, f := range []ZeroFlags{{}, {NoHole: true}, {Fast: true}, {NoHole: true, Fast: true}, {FUA: true}} {
		t.Run(fmt.Sprintf("%+v", f), func(t *testing.T) {
			env := startEnv(t, nil)
			c := env.dial(t, "disk")
			ctx := testCtx(t)
			const off, n = 1<<20 + 512, 300 << 10 // unaligned on purpose
			if err := c.WriteAt(ctx, bytes.Repeat([]byte{0x55}, 2<<20), 1<<20-4096, false); err != nil {
				t.Fatal(err)
			}
			if err := c.Zero(ctx, off, n, f); err != nil {
				t.Fatalf("Zero: %v", err)
			}
			got := make([]byte, 2<<20)
			if err := c.ReadAt(ctx, got, 1<<20-4096); err != nil {
				t.Fatal(err)
			}
			for i, b := range got {
				inside := i >= 4096+512 && i < 4096+512+n
				if inside && b != 0 || !inside && b != 0x55 {
					t.Fatalf("byte %d = %#x after zeroing [%d, %d)", 1<<20-4096+i, b, off, off+n)
				}
			}
			ext, err := c.BlockStatus(ctx, off, n)
			if err != nil {
				t.Fatal(err)
			}
			if f.NoHole {
				for _, e := range ext {
					if e.Hole && !e.Zero {
						t.Fatalf("NO_HOLE zeroing reported as unknown hole: %+v", ext)
					}
				}
			}
		})
	}
}

// TestFastZeroNotSupported runs FileExport on tmpfs, which punches holes
// but has no ZERO_RANGE: a NO_HOLE fast zero must fail with ENOTSUP and
// change nothing, and without FAST_ZERO it must write zeroes.
func TestFastZeroNotSupported(t *testing.T) {
	var st syscall.Statfs_t
	if err := syscall.Statfs("/dev/shm", &st); err != nil || st.Type != 0x01021994 {
		t.Skip("no tmpfs at /dev/shm")
	}
	dir, err := os.MkdirTemp("/dev/shm", "nbdtest")
	if err != nil {
		t.Skip(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	path := dir + "/img"
	if err := os.WriteFile(path, bytes.Repeat([]byte{0x77}, 1<<20), 0o600); err != nil {
		t.Fatal(err)
	}
	env := startEnv(t, func(_ *Server, x *testExports) { x.add("shm", path, "", false) })
	c := env.dial(t, "shm")
	ctx := testCtx(t)
	err = c.Zero(ctx, 4096, 8192, ZeroFlags{NoHole: true, Fast: true})
	var e *Error
	if !errors.As(err, &e) || !errors.Is(err, ErrNotSupported) || errors.Is(err, ErrClosed) {
		t.Fatalf("fast NO_HOLE zero on tmpfs: %v, want *Error matching ErrNotSupported", err)
	}
	got := make([]byte, 1<<20)
	if err := c.ReadAt(ctx, got, 0); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, bytes.Repeat([]byte{0x77}, 1<<20)) {
		t.Fatal("failed fast zero changed the export")
	}
	if err := c.Zero(ctx, 4096, 8192, ZeroFlags{NoHole: true}); err != nil {
		t.Fatalf("slow NO_HOLE zero: %v", err)
	}
	if err := c.ReadAt(ctx, got, 0); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got[4096:4096+8192], make([]byte, 8192)) || got[4095] != 0x77 || got[4096+8192] != 0x77 {
		t.Fatal("slow zero did not zero exactly the range")
	}
	if err := c.Zero(ctx, 0, 4096, ZeroFlags{Fast: true}); err != nil {
		t.Fatalf("fast zero with holes allowed (punch hole): %v", err)
	}
}

func TestBlockStatusSparse(t *testing.T) {
	env := startEnv(t, nil)
	// Data at [1 MiB, 2 MiB) and [5 MiB, 5 MiB + 4 KiB), holes elsewhere.
	f, err := os.OpenFile(env.image, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteAt(bytes.Repeat([]byte{1}, 1<<20), 1<<20)
	f.WriteAt(bytes.Repeat([]byte{2}, 4096), 5<<20)
	f.Close()

	c := env.dial(t, "disk")
	ctx := testCtx(t)
	ext, err := c.BlockStatus(ctx, 0, 8<<20)
	if err != nil {
		t.Fatal(err)
	}
	want := []Extent{
		{Length: 1 << 20, Hole: true, Zero: true},
		{Length: 1 << 20},
		{Length: 3 << 20, Hole: true, Zero: true},
		{Length: 4096},
		{Length: 3<<20 - 4096, Hole: true, Zero: true},
	}
	if fmt.Sprint(ext) != fmt.Sprint(want) {
		t.Fatalf("extents\n got %+v\nwant %+v", ext, want)
	}
	// A query inside a data run, and one cut short by the request.
	ext, err = c.BlockStatus(ctx, 1<<20+100, 1000)
	if err != nil {
		t.Fatal(err)
	}
	if len(ext) != 1 || ext[0] != (Extent{Length: 1000}) {
		t.Fatalf("extents inside data: %+v", ext)
	}
}

func TestConcurrentPipelined(t *testing.T) {
	for _, inline := range []bool{true, false} {
		t.Run(fmt.Sprintf("inline=%v", inline), func(t *testing.T) { testConcurrentPipelined(t, inline) })
	}
}

func testConcurrentPipelined(t *testing.T, inline bool) {
	checkNoLeak(t)
	env := startEnv(t, func(_ *Server, x *testExports) {
		if !inline {
			x.wrap = func(_ string, e Export) Export { return struct{ Export }{e} }
		}
	})
	c := env.dial(t, "disk")
	ctx := testCtx(t)
	const workers, ops, block = 32, 40, 4096
	// Each worker owns the blocks i ≡ w (mod workers) and keeps a model.
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(uint64(w), 99))
			model := map[uint64][]byte{}
			nblocks := uint64(testSize/block) / workers
			for i := range ops {
				blk := (r.Uint64N(nblocks)*workers + uint64(w)) * block
				if r.IntN(3) > 0 || len(model) == 0 {
					data := randBytes(uint64(w*1000+i), block)
					if err := c.WriteAt(ctx, data, blk, false); err != nil {
						errs <- err
						return
					}
					model[blk] = data
					continue
				}
				for off, want := range model {
					got := make([]byte, block)
					if err := c.ReadAt(ctx, got, off); err != nil {
						errs <- err
						return
					}
					if !bytes.Equal(got, want) {
						errs <- fmt.Errorf("worker %d: block at %d differs", w, off)
						return
					}
					break
				}
			}
			for off, want := range model {
				got := make([]byte, block)
				if err := c.ReadAt(ctx, got, off); err != nil {
					errs <- err
					return
				}
				for i := range got {
					if got[i] != want[i] {
						errs <- fmt.Errorf("worker %d: byte %d of block at %d = %#x, want %#x", w, i, off, got[i], want[i])
						return
					}
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

func TestMultiConn(t *testing.T) {
	env := startEnv(t, nil)
	a := env.dial(t, "disk")
	b := env.dial(t, "disk")
	ctx := testCtx(t)
	if !a.Flags().CanMultiConn {
		t.Fatal("FileExport does not offer multi-conn")
	}
	data := randBytes(3, 128<<10)
	if err := a.WriteAt(ctx, data, 8<<20, false); err != nil {
		t.Fatal(err)
	}
	if err := b.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, len(data))
	if err := b.ReadAt(ctx, got, 8<<20); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, data) {
		t.Fatal("connection B does not see A's completed write")
	}
}

// wantErrno checks that err is a server reply with the error value.
func wantErrno(t *testing.T, what string, err error, errno uint32) {
	t.Helper()
	var e *Error
	if !errors.As(err, &e) || e.Errno != errno {
		t.Fatalf("%s: got %v, want a reply with %s", what, err, errnoName(errno))
	}
	if errors.Is(err, ErrClosed) {
		t.Fatalf("%s: %v matches ErrClosed", what, err)
	}
}

func TestOutOfRange(t *testing.T) {
	env := startEnv(t, nil)
	c := env.dial(t, "disk")
	ctx := testCtx(t)
	buf := make([]byte, 8192)
	wantErrno(t, "read past the end", c.ReadAt(ctx, buf, testSize-4096), errnoInval)
	wantErrno(t, "read at offset overflowing", c.ReadAt(ctx, buf, ^uint64(0)-100), errnoInval)
	wantErrno(t, "write past the end", c.WriteAt(ctx, buf, testSize-4096, false), errnoNoSpc)
	wantErrno(t, "write beyond the end", c.WriteAt(ctx, buf, testSize+1<<30, false), errnoNoSpc)
	wantErrno(t, "trim past the end", c.Trim(ctx, testSize, 1, false), errnoInval)
	wantErrno(t, "zero past the end", c.Zero(ctx, testSize-1, 2, ZeroFlags{}), errnoNoSpc)
	_, err := c.BlockStatus(ctx, testSize, 4096)
	wantErrno(t, "block status past the end", err, errnoInval)
	if !errors.Is(c.ReadAt(ctx, buf, testSize-4096), ErrInvalid) {
		t.Fatal("EINVAL reply does not match ErrInvalid")
	}
	if !errors.Is(c.WriteAt(ctx, buf, testSize, false), ErrNoSpace) {
		t.Fatal("ENOSPC reply does not match ErrNoSpace")
	}
	// The connection is still good.
	if err := c.ReadAt(ctx, buf, testSize-8192); err != nil {
		t.Fatalf("read after errors: %v", err)
	}
	// Zero-length requests succeed.
	if err := c.ReadAt(ctx, nil, testSize); err != nil {
		t.Fatal(err)
	}
}

func TestSplitLargeIO(t *testing.T) {
	env := startEnv(t, func(s *Server, _ *testExports) { s.MaxPayload = 64 << 10 })
	c := env.dial(t, "disk")
	ctx := testCtx(t)
	if c.maxIO != 64<<10 {
		t.Fatalf("client request size %d, want the server's 64 KiB", c.maxIO)
	}
	data := randBytes(11, 3<<20+1234)
	if err := c.WriteAt(ctx, data, 777, false); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, len(data))
	if err := c.ReadAt(ctx, got, 777); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, data) {
		t.Fatal("split read differs from split write")
	}
	if err := c.Zero(ctx, 0, 1<<20, ZeroFlags{NoHole: true}); err != nil {
		t.Fatalf("Zero over more than the maximum block size: %v", err)
	}
}

func TestUnknownExport(t *testing.T) {
	env := startEnv(t, nil)
	ctx := testCtx(t)
	for _, tc := range []struct {
		name string
		want error
	}{{"nope", ErrUnknownExport}, {"secret", ErrPolicy}, {"broken", ErrUnknownExport}} {
		_, err := Dial(ctx, "unix", env.sock, tc.name)
		if !errors.Is(err, tc.want) {
			t.Errorf("Dial %q: %v, want %v", tc.name, err, tc.want)
		}
		if err != nil && strings.Contains(err.Error(), "/internal/path") {
			t.Errorf("Dial %q: the server leaked an internal error: %v", tc.name, err)
		}
	}
	// The server is still fine.
	env.dial(t, "disk")
}

func TestRevokedExport(t *testing.T) {
	var revoked atomic.Bool
	env := startEnv(t, func(_ *Server, x *testExports) {
		x.wrap = func(_ string, e Export) Export { return &revocable{Export: e, revoked: &revoked} }
	})
	c := env.dial(t, "disk")
	ctx := testCtx(t)
	buf := make([]byte, 4096)
	if err := c.ReadAt(ctx, buf, 0); err != nil {
		t.Fatal(err)
	}
	revoked.Store(true)
	for _, err := range []error{c.ReadAt(ctx, buf, 0), c.WriteAt(ctx, buf, 0, false), c.Flush(ctx)} {
		wantErrno(t, "request on revoked export", err, errnoPerm)
		if !errors.Is(err, ErrPermission) {
			t.Fatalf("%v does not match ErrPermission", err)
		}
		if !strings.Contains(err.Error(), "export revoked") {
			t.Fatalf("%v: the export's message did not reach the client", err)
		}
	}
}

func TestReadOnly(t *testing.T) {
	env := startEnv(t, nil)
	c := env.dial(t, "ro")
	ctx := testCtx(t)
	if !c.Flags().ReadOnly {
		t.Fatal("read-only export not flagged READ_ONLY")
	}
	buf := make([]byte, 4096)
	wantErrno(t, "write", c.WriteAt(ctx, buf, 0, false), errnoPerm)
	wantErrno(t, "trim", c.Trim(ctx, 0, 4096, false), errnoPerm)
	wantErrno(t, "zero", c.Zero(ctx, 0, 4096, ZeroFlags{}), errnoPerm)
	if err := c.ReadAt(ctx, buf, 0); err != nil {
		t.Fatal(err)
	}
	if err := c.Flush(ctx); err != nil {
		t.Fatal(err)
	}
}

func TestList(t *testing.T) {
	env := startEnv(t, nil)
	for _, addr := range [][2]string{{"unix", env.sock}, {"tcp", env.tcp}} {
		got, err := List(testCtx(t), addr[0], addr[1])
		if err != nil {
			t.Fatal(err)
		}
		want := []ExportInfo{{"disk", "a test disk"}, {"ro", "read-only view"}}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("List = %+v, want %+v", got, want)
		}
	}
}

// gate makes reads block until released; wrap gives each connection its
// own gated export.
type gate struct {
	entered chan struct{}
	release chan struct{}
	active  atomic.Int64
	peak    atomic.Int64
}

func newGate() *gate {
	return &gate{entered: make(chan struct{}, 1), release: make(chan struct{})}
}

func (g *gate) wrap(_ string, e Export) Export { return &gatedExport{Export: e, g: g} }

type gatedExport struct {
	Export
	g *gate
}

func (e *gatedExport) ReadAt(ctx context.Context, p []byte, off uint64) error {
	g := e.g
	n := g.active.Add(1)
	defer g.active.Add(-1)
	for {
		m := g.peak.Load()
		if n <= m || g.peak.CompareAndSwap(m, n) {
			break
		}
	}
	select {
	case g.entered <- struct{}{}:
	default:
	}
	select {
	case <-g.release:
	case <-ctx.Done():
		return ctx.Err()
	}
	return e.Export.ReadAt(ctx, p, off)
}

func TestClientCancel(t *testing.T) {
	checkNoLeak(t)
	g := newGate()
	env := startEnv(t, func(_ *Server, x *testExports) { x.wrap = g.wrap })
	c := env.dial(t, "disk")
	ctx, cancel := context.WithCancel(testCtx(t))
	errc := make(chan error, 1)
	buf := bytes.Repeat([]byte{9}, 64<<10)
	go func() { errc <- c.ReadAt(ctx, buf, 0) }()
	<-g.entered
	cancel()
	select {
	case err := <-errc:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("cancelled ReadAt: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("cancelled ReadAt did not return")
	}
	// The late reply is dropped and does not touch buf.
	close(g.release)
	other := make([]byte, 4096)
	if err := c.ReadAt(testCtx(t), other, 0); err != nil {
		t.Fatalf("read after a cancelled read: %v", err)
	}
	if !bytes.Equal(buf, bytes.Repeat([]byte{9}, 64<<10)) {
		t.Fatal("the abandoned reply was written into the caller's buffer")
	}
}

func TestBackpressure(t *testing.T) {
	g := newGate()
	env := startEnv(t, func(s *Server, x *testExports) {
		s.MaxInFlight = 3
		x.wrap = g.wrap
	})
	c := env.dial(t, "disk")
	ctx := testCtx(t)
	var wg sync.WaitGroup
	for range 20 {
		wg.Go(func() {
			if err := c.ReadAt(ctx, make([]byte, 512), 0); err != nil {
				t.Error(err)
			}
		})
	}
	time.Sleep(200 * time.Millisecond)
	if n := g.active.Load(); n != 3 {
		t.Errorf("%d requests in the export, want MaxInFlight = 3", n)
	}
	close(g.release)
	wg.Wait()
	if p := g.peak.Load(); p > 3 {
		t.Fatalf("peak of %d requests in flight, want at most 3", p)
	}
}

func TestServerCloseWithLiveConnections(t *testing.T) {
	checkNoLeak(t)
	g := newGate()
	x := newTestExports()
	x.add("disk", newImage(t, 1<<20), "", false)
	x.wrap = g.wrap
	srv := &Server{Exports: x}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(l) }()
	ctx := testCtx(t)
	c1, err := Dial(ctx, "tcp", l.Addr().String(), "disk")
	if err != nil {
		t.Fatal(err)
	}
	defer c1.Close()
	c2, err := Dial(ctx, "tcp", l.Addr().String(), "disk")
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	// One connection mid-negotiation, one with a request in the export.
	raw, err := net.Dial("tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	errc := make(chan error, 1)
	go func() { errc <- c1.ReadAt(ctx, make([]byte, 4096), 0) }()
	<-g.entered

	closed := make(chan struct{})
	go func() {
		srv.Close()
		close(closed)
	}()
	select {
	case <-closed:
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not return with live connections")
	}
	if err := <-served; err != nil {
		t.Fatalf("Serve after Close: %v", err)
	}
	if err := <-errc; !errors.Is(err, ErrClosed) {
		t.Fatalf("request in flight at Close: %v, want ErrClosed", err)
	}
	if err := c2.ReadAt(ctx, make([]byte, 512), 0); !errors.Is(err, ErrClosed) {
		t.Fatalf("request after Close: %v, want ErrClosed", err)
	}
	if o, c := x.opens.Load(), x.closes.Load(); o != 2 || c != 2 {
		t.Fatalf("exports opened %d, closed %d; want 2 and 2", o, c)
	}
	if _, err := Dial(ctx, "tcp", l.Addr().String(), "disk"); err == nil {
		t.Fatal("Dial after Close succeeded")
	}
}

func TestClientClosed(t *testing.T) {
	env := startEnv(t, nil)
	c := env.dial(t, "disk")
	ctx := testCtx(t)
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if err := c.ReadAt(ctx, make([]byte, 512), 0); !errors.Is(err, ErrClosed) {
		t.Fatalf("ReadAt after Close: %v", err)
	}
	if err := c.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
}

// deadlineless is a connection whose deadlines never fire.
type deadlineless struct{ net.Conn }

func (deadlineless) SetDeadline(time.Time) error      { return nil }
func (deadlineless) SetReadDeadline(time.Time) error  { return nil }
func (deadlineless) SetWriteDeadline(time.Time) error { return nil }

// TestAbortLeavesAHungServer: Abort ends a connection whose server is
// stuck on a request without waiting for it, where Close waits for the
// replies in flight. The connection's deadlines never fire, so any wait on
// the server lasts until the test releases it; the request in flight
// fails with ErrClosed, and so does the next.
func TestAbortLeavesAHungServer(t *testing.T) {
	checkNoLeak(t)
	g := newGate()
	env := startEnv(t, func(_ *Server, x *testExports) { x.wrap = g.wrap })
	defer close(g.release)
	ctx := testCtx(t)
	nc, err := net.Dial("unix", env.sock)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close() // ends a wait on the server if Abort did not
	c, err := NewClient(ctx, deadlineless{nc}, "disk")
	if err != nil {
		t.Fatal(err)
	}
	errc := make(chan error, 1)
	go func() { errc <- c.ReadAt(ctx, make([]byte, 4096), 0) }()
	<-g.entered
	aborted := make(chan struct{})
	go func() {
		c.Abort()
		close(aborted)
	}()
	select {
	case <-aborted:
	case <-time.After(10 * time.Second): // liveness only: a wait on the server never ends
		t.Fatal("Abort is waiting for the hung server")
	}
	if err := <-errc; !errors.Is(err, ErrClosed) {
		t.Fatalf("request in flight at Abort: %v, want ErrClosed", err)
	}
	if err := c.ReadAt(ctx, make([]byte, 512), 0); !errors.Is(err, ErrClosed) {
		t.Fatalf("request after Abort: %v, want ErrClosed", err)
	}
	c.Abort()
	if err := c.Close(); err != nil {
		t.Fatalf("Close after Abort: %v", err)
	}
}

// panicky panics on every read.
type panicky struct{ Export }

func (panicky) ReadAt(context.Context, []byte, uint64) error { panic("bug in the export") }

func TestExportPanic(t *testing.T) {
	env := startEnv(t, func(_ *Server, x *testExports) {
		x.wrap = func(_ string, e Export) Export { return panicky{e} }
	})
	c := env.dial(t, "disk")
	ctx := testCtx(t)
	err := c.ReadAt(ctx, make([]byte, 512), 0)
	wantErrno(t, "read from a panicking export", err, errnoIO)
	if strings.Contains(err.Error(), "bug in the export") {
		t.Fatalf("the panic's text reached the client: %v", err)
	}
	if err := c.WriteAt(ctx, make([]byte, 512), 0, false); err != nil {
		t.Fatalf("write after the panic: %v", err)
	}
}

func TestServeConnContext(t *testing.T) {
	checkNoLeak(t)
	x := newTestExports()
	x.add("disk", newImage(t, 1<<20), "", false)
	srv := &Server{Exports: x}
	defer srv.Close()
	a, b := net.Pipe()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		srv.ServeConn(ctx, b)
	}()
	c, err := NewClient(testCtx(t), a, "disk")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.Flush(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	cancel()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("ServeConn did not return when its context ended")
	}
	if err := c.Flush(testCtx(t)); !errors.Is(err, ErrClosed) {
		t.Fatalf("flush after the server side ended: %v", err)
	}
	if x.opens.Load() != 1 || x.closes.Load() != 1 {
		t.Fatalf("opens %d closes %d", x.opens.Load(), x.closes.Load())
	}
}
