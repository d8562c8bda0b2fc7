package nbd

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// testExports serves image files by name. Each Open opens a FileExport
// and wraps it with wrap, if set.
type testExports struct {
	mu     sync.Mutex
	files  map[string]string // name -> path
	desc   map[string]string
	ro     map[string]bool
	wrap   func(name string, e Export) Export
	opens  atomic.Int64
	closes atomic.Int64
}

func newTestExports() *testExports {
	return &testExports{files: map[string]string{}, desc: map[string]string{}, ro: map[string]bool{}}
}

func (x *testExports) add(name, path, desc string, readOnly bool) {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.files[name], x.desc[name], x.ro[name] = path, desc, readOnly
}

func (x *testExports) Open(_ context.Context, name string) (Export, error) {
	x.mu.Lock()
	path, ok := x.files[name]
	ro, desc, wrap := x.ro[name], x.desc[name], x.wrap
	x.mu.Unlock()
	switch {
	case name == "secret":
		return nil, fmt.Errorf("export %q is not yours: %w", name, ErrPolicy)
	case name == "broken":
		return nil, errors.New("open /internal/path/to/broken: input/output error")
	case !ok:
		return nil, fmt.Errorf("no export %q: %w", name, ErrUnknownExport)
	}
	fe, err := NewFileExport(path, ro)
	if err != nil {
		return nil, err
	}
	x.opens.Add(1)
	var e Export = &countedExport{Export: fe, desc: desc, closes: &x.closes}
	if wrap != nil {
		e = wrap(name, e)
	}
	return e, nil
}

func (x *testExports) List(context.Context) ([]ExportInfo, error) {
	x.mu.Lock()
	defer x.mu.Unlock()
	var out []ExportInfo
	for name := range x.files {
		out = append(out, ExportInfo{Name: name, Description: x.desc[name]})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// countedExport counts Close calls and carries a description.
type countedExport struct {
	Export
	desc   string
	closes *atomic.Int64
	once   atomic.Bool
}

func (e *countedExport) Description() string { return e.desc }

// Inline passes the wrapped export's choice on; the other wrappers in
// the tests do not, so both ways of serving requests are exercised.
func (e *countedExport) Inline() bool {
	ie, ok := e.Export.(InlineExport)
	return ok && ie.Inline()
}

func (e *countedExport) Close() error {
	if !e.once.CompareAndSwap(false, true) {
		panic("export closed twice")
	}
	e.closes.Add(1)
	return e.Export.Close()
}

// revocable wraps an export whose ownership can be lost: once revoked,
// every request fails with ErrPermission.
type revocable struct {
	Export
	revoked *atomic.Bool
}

func (e *revocable) check() error {
	if e.revoked.Load() {
		return fmt.Errorf("export revoked: %w", ErrPermission)
	}
	return nil
}

func (e *revocable) ReadAt(ctx context.Context, p []byte, off uint64) error {
	if err := e.check(); err != nil {
		return err
	}
	return e.Export.ReadAt(ctx, p, off)
}

func (e *revocable) WriteAt(ctx context.Context, p []byte, off uint64, fua bool) error {
	if err := e.check(); err != nil {
		return err
	}
	return e.Export.WriteAt(ctx, p, off, fua)
}

func (e *revocable) Flush(ctx context.Context) error {
	if err := e.check(); err != nil {
		return err
	}
	return e.Export.Flush(ctx)
}

// newImage creates a sparse image file of size bytes.
func newImage(t testing.TB, size int64) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "disk.img")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(size); err != nil {
		t.Fatal(err)
	}
	f.Close()
	return path
}

// testEnv is a Server over testExports listening on a unix socket and on
// loopback TCP.
type testEnv struct {
	srv     *Server
	exports *testExports
	sock    string // unix socket path
	tcp     string // loopback address
	image   string // path of export "disk"
}

const testSize = 16 << 20

// startEnv starts a server with export "disk" (testSize bytes, a sparse
// file), "ro" (read-only, the same file), and edit applied to the server.
func startEnv(t testing.TB, edit func(*Server, *testExports)) *testEnv {
	t.Helper()
	env := &testEnv{exports: newTestExports()}
	env.image = newImage(t, testSize)
	env.exports.add("disk", env.image, "a test disk", false)
	env.exports.add("ro", env.image, "read-only view", true)
	env.srv = &Server{Exports: env.exports}
	if testing.Verbose() {
		env.srv.Logger = testLogger(t)
	}
	if edit != nil {
		edit(env.srv, env.exports)
	}

	// sun_path holds 108 bytes: a short directory, not t.TempDir().
	dir, err := os.MkdirTemp("", "nbd")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	env.sock = filepath.Join(dir, "s")
	ul, err := net.Listen("unix", env.sock)
	if err != nil {
		t.Fatal(err)
	}
	tl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	env.tcp = tl.Addr().String()
	done := make(chan error, 2)
	go func() { done <- env.srv.Serve(ul) }()
	go func() { done <- env.srv.Serve(tl) }()
	t.Cleanup(func() {
		if err := env.srv.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
		for range 2 {
			if err := <-done; err != nil {
				t.Errorf("Serve returned %v after Close", err)
			}
		}
		if o, c := env.exports.opens.Load(), env.exports.closes.Load(); o != c {
			t.Errorf("exports opened %d times, closed %d", o, c)
		}
	})
	return env
}

// dial opens a client on export over the unix socket.
func (env *testEnv) dial(t testing.TB, export string) *Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := Dial(ctx, "unix", env.sock, export)
	if err != nil {
		t.Fatalf("Dial %q: %v", export, err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func testCtx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func randBytes(seed uint64, n int) []byte {
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

// checkNoLeak fails if goroutines started in this package outlive the
// test by more than a grace period.
func checkNoLeak(t testing.TB) {
	t.Helper()
	t.Cleanup(func() {
		deadline := time.Now().Add(5 * time.Second)
		for {
			stacks := leakedStacks()
			if stacks == "" {
				return
			}
			if time.Now().After(deadline) {
				t.Errorf("goroutines left behind:\n%s", stacks)
				return
			}
			time.Sleep(20 * time.Millisecond)
		}
	})
}

// leakedStacks returns the stacks of goroutines running this package's
// code, other than test functions.
func leakedStacks() string {
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	var out []string
	for _, g := range strings.Split(string(buf), "\n\n") {
		if !strings.Contains(g, "rackpool/internal/nbd.") || strings.Contains(g, "testing.tRunner") ||
			strings.Contains(g, "checkNoLeak") {
			continue
		}
		out = append(out, g)
	}
	return strings.Join(out, "\n\n")
}

// testLogger logs to t.Log.
func testLogger(t testing.TB) *slog.Logger {
	return slog.New(slog.NewTextHandler(tWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type tWriter struct{ t testing.TB }

func (w tWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}
