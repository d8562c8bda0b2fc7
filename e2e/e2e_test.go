// Package e2e holds binary-level tests: they build rackpool, start real
// `rackpool serve` processes on loopback with SQLite state in a temporary
// directory, and drive them through the API and the CLI as a user would.
// They are skipped with -short.
package e2e

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"rackpool/api"
	"rackpool/internal/childproc"
)

const password = "e2e-secret"

var binary string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "rackpool-e2e")
	if err != nil {
		panic(err)
	}
	binary = filepath.Join(dir, "rackpool")
	out, err := childproc.Command("go", "build", "-o", binary, "../cmd/rackpool").CombinedOutput()
	if err != nil {
		fmt.Fprintf(os.Stderr, "build rackpool: %v\n%s", err, out)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// server is one running `rackpool serve`.
type server struct {
	t      *testing.T
	cmd    *exec.Cmd
	url    string // https://addr
	addr   string
	data   string
	ca     string       // data/tls/ca.pem, the service's own CA
	http   *http.Client // trusts ca
	stderr *syncBuffer
}

type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func (b *syncBuffer) len() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Len()
}

// since is what was written from offset off on.
func (b *syncBuffer) since(off int) string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return string(b.buf.Bytes()[off:])
}

func freeAddr(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// start runs serve on data with extra flags; env adds environment entries.
// A free address may be taken by another process before serve binds it;
// start then tries another.
func start(t *testing.T, data string, env []string, flags ...string) *server {
	t.Helper()
	for try := 1; ; try++ {
		s, err := launch(t, freeAddr(t), data, env, flags...)
		if err == nil {
			return s
		}
		if !errors.Is(err, errAddrInUse) || try == 5 {
			t.Fatal(err)
		}
		s.kill()
	}
}

var errAddrInUse = errors.New("address already in use")

// startTimeout is how long start waits for serve to answer.
var startTimeout = 20 * time.Second

// startAt is start on a given address (a restart where clients wait).
func startAt(t *testing.T, addr, data string, env []string, flags ...string) *server {
	t.Helper()
	s, err := launch(t, addr, data, env, flags...)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// launch starts serve on addr and waits until it has logged that it serves
// and answers: an answer alone could come from another process that took
// the address.
func launch(t *testing.T, addr, data string, env []string, flags ...string) (*server, error) {
	t.Helper()
	args := append([]string{"serve", "--addr", addr, "--data", data}, flags...)
	cmd := childproc.Command(binary, args...)
	cmd.Env = append(os.Environ(), env...)
	s := &server{t: t, cmd: cmd, url: "https://" + addr, addr: addr, data: data, ca: filepath.Join(data, "tls", "ca.pem"), stderr: &syncBuffer{}}
	for i, f := range flags {
		switch {
		case f == "--insecure-http":
			s.url, s.ca, s.http = "http://"+addr, "", &http.Client{}
		case f == "--tls-cert" && i+1 < len(flags):
			s.ca = filepath.Join(filepath.Dir(flags[i+1]), "ca.pem") // an operator's chain: its CA beside it
		}
	}
	cmd.Stderr = s.stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.kill() })
	deadline := time.Now().Add(startTimeout)
	for time.Now().Before(deadline) {
		out := s.stderr.String()
		if strings.Contains(out, "address already in use") {
			return s, fmt.Errorf("serve on %s: %w:\n%s", addr, errAddrInUse, out)
		}
		if strings.Contains(out, "rackpool serving") {
			if s.http == nil {
				cfg, err := api.TLSConfig(s.ca)
				if err != nil {
					return s, fmt.Errorf("serve's CA: %w\n%s", err, out)
				}
				s.http = &http.Client{Transport: &http.Transport{TLSClientConfig: cfg}}
			}
			resp, err := s.http.Get(s.url + "/redfish/v1")
			if err == nil {
				resp.Body.Close()
				return s, nil
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	return s, fmt.Errorf("serve did not come up:\n%s", s.stderr)
}

func startDefault(t *testing.T, flags ...string) *server {
	return start(t, t.TempDir(), []string{"RACKPOOL_ADMIN_PASSWORD=" + password}, flags...)
}

func (s *server) kill() {
	if s.cmd.Process != nil && s.cmd.ProcessState == nil {
		childproc.Stop(s.cmd)
		_ = s.cmd.Wait()
	}
}

func (s *server) client() *api.Client { return s.clientAs("Administrator", password) }

// clientAs is a Go client of s that trusts its CA.
func (s *server) clientAs(user, pass string) *api.Client {
	c := api.New(s.url, user, pass)
	c.HTTP = s.http
	return c
}

// dial opens a TLS connection to s, for tests that write raw HTTP.
func (s *server) dial() *tls.Conn {
	s.t.Helper()
	c, err := tls.Dial("tcp", s.addr, s.http.Transport.(*http.Transport).TLSClientConfig)
	if err != nil {
		s.t.Fatal(err)
	}
	return c
}

// env is what client processes (the CLI, memnode, cache, Python) need to
// reach s: its URL, the Administrator's credentials and its CA (for Go,
// Python's ssl module and requests).
func (s *server) env() []string {
	return append(os.Environ(), "RACKPOOL_URL="+s.url, "RACKPOOL_PASSWORD="+password, "RACKPOOL_USER=Administrator",
		"RACKPOOL_CA_FILE="+s.ca, "SSL_CERT_FILE="+s.ca, "REQUESTS_CA_BUNDLE="+s.ca)
}

// request sends a raw request and returns status and body.
func (s *server) request(method, path, body string, auth bool) (int, string) {
	s.t.Helper()
	req, err := http.NewRequest(method, s.url+path, strings.NewReader(body))
	if err != nil {
		s.t.Fatal(err)
	}
	if auth {
		req.SetBasicAuth("Administrator", password)
	}
	resp, err := s.http.Do(req)
	if err != nil {
		s.t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(data)
}

// cli runs a client verb against s.
func (s *server) cli(args ...string) (string, error) {
	cmd := childproc.Command(binary, args...)
	cmd.Env = s.env()
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func skipShort(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test; run without -short")
	}
}

// snapshot is what the API says about compositions and blocks.
type snapshot struct {
	systems map[string][]string // composed system -> blocks
	states  map[string]string   // block -> composition state
	heldBy  map[string]string   // block -> holder outside compositions (memory leases)
}

func take(t *testing.T, c *api.Client) snapshot {
	t.Helper()
	ctx := context.Background()
	systems, err := c.Systems(ctx)
	if err != nil {
		t.Fatal(err)
	}
	blocks, err := c.Blocks(ctx)
	if err != nil {
		t.Fatal(err)
	}
	s := snapshot{systems: map[string][]string{}, states: map[string]string{}, heldBy: map[string]string{}}
	for _, sys := range systems {
		if sys.SystemType != "Composed" {
			continue
		}
		if st := sys.Oem.Rackpool.CompositionState; st != "Composed" {
			t.Errorf("system %s is %s", sys.ID, st)
		}
		for _, b := range sys.Links.ResourceBlocks {
			s.systems[sys.ID] = append(s.systems[sys.ID], b.Last())
		}
	}
	for _, b := range blocks {
		s.states[b.ID] = b.CompositionStatus.CompositionState
		if h := b.Oem.Rackpool.HeldBy; h != "" {
			s.heldBy[b.ID] = h
		}
		if b.CompositionStatus.NumberOfCompositions > b.CompositionStatus.MaxCompositions {
			t.Errorf("block %s in %d compositions, max %d", b.ID, b.CompositionStatus.NumberOfCompositions, b.CompositionStatus.MaxCompositions)
		}
	}
	return s
}

// checkConsistent asserts no block is in transition or double-allocated
// and that block states agree with the systems.
func checkConsistent(t *testing.T, s snapshot, maxComp map[string]int) {
	t.Helper()
	owners := map[string]int{}
	for _, blocks := range s.systems {
		for _, b := range blocks {
			owners[b]++
		}
	}
	for b, st := range s.states {
		if st == "Composing" {
			t.Errorf("block %s stuck Composing", b)
		}
		n := owners[b]
		max := maxComp[b]
		if max == 0 {
			max = 1
		}
		if n > max {
			t.Errorf("block %s allocated %d times (max %d)", b, n, max)
		}
		if h := s.heldBy[b]; h != "" {
			// Held outside compositions (memory leases): in no system.
			if n > 0 || st != "Unavailable" {
				t.Errorf("block %s held by %s is %s and in %d systems", b, h, st, n)
			}
			continue
		}
		if n == 0 && st != "Unused" {
			t.Errorf("block %s is %s but in no system", b, st)
		}
		if n > 0 && st == "Unused" {
			t.Errorf("block %s is Unused but in %d systems", b, n)
		}
	}
}

func lines(s string) []string {
	var out []string
	sc := bufio.NewScanner(strings.NewReader(s))
	for sc.Scan() {
		out = append(out, sc.Text())
	}
	return out
}
