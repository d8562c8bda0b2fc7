// Package bmctest runs the real sushy-emulator (sushy-tools, from .venv-rf,
// which scripts/pyenv.sh creates) for tests: its fake driver, HTTP Basic
// authentication (User, Password) and, when asked, HTTPS with pki's
// certificate. A test checks every change against the emulator's own state
// by a direct GET of its system (Emulator.System), not through the client
// under test.
//
// Without sushy-emulator a test is skipped, unless RACKPOOL_E2E is 1 (as
// make test sets it), where it fails.
//
// What the fake driver does (sushy-tools 2.2.0, fakedriver.py), and where
// it differs from a real BMC:
//
//   - A power change is not immediate: Reset records a pending state that
//     applies 1 to 11 s later (a random whole second), when the system is
//     next read. On and ForceOn go to On, ForceOff and GracefulShutdown to
//     Off; GracefulRestart and ForceRestart set Off at once and On later.
//     A Reset to the state the system is already in changes nothing.
//   - Nmi is listed in ResetType@Redfish.AllowableValues but refused with
//     501 Base.1.0.GeneralError ("Power state Nmi is not supported"); so is
//     any type it does not know (PowerCycle, PushPowerButton, ...), where a
//     real BMC answers 400. The bmc Client refuses unlisted types itself.
//   - BootSourceOverrideEnabled is always reported "Continuous": a PATCH of
//     Enabled is ignored, so Once never clears after a boot (the fake does
//     not boot). A PATCH with Enabled alone is refused with 400 and a plain
//     text body, not a Redfish error.
//   - Any BootSourceOverrideTarget is stored, even one outside its
//     AllowableValues (a real BMC answers 400 PropertyValueNotInList); the
//     bmc Client refuses those itself. The allowable targets lose UefiHttp
//     when the mode is not UEFI.
//   - No ETag, no @odata.etag, and If-Match is ignored.
//   - The service root is readable without authentication; everything
//     else answers 401 with a Base.1.0.GeneralError body.
//   - A system addressed by its Name is redirected (307) to its UUID.
//   - It has no SessionService: only Basic authentication.
package bmctest

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"

	"rackpool/internal/childproc"
	"rackpool/internal/pki"
)

// User and Password are the emulator's account. The password must never
// appear in an error.
const (
	User     = "rackpool"
	Password = "s3cret-Pa55word"
)

// PowerWithin bounds a fake power transition (1 to 11 s) with room to
// spare.
const PowerWithin = 25 * time.Second

// Need skips the test for a missing tool, or fails it under RACKPOOL_E2E=1
// (where everything must run).
func Need(t testing.TB, format string, args ...any) {
	t.Helper()
	msg := fmt.Sprintf(format, args...)
	if os.Getenv("RACKPOOL_E2E") == "1" {
		t.Fatal(msg)
	}
	t.Skip(msg)
}

// Binary is sushy-emulator, absolute: $RACKPOOL_SUSHY_EMULATOR, else
// .venv-rf/bin/sushy-emulator at the repository root (the first directory
// holding go.mod, walking up from the working directory; scripts/pyenv.sh
// installs it there). When it is missing the test Needs it.
func Binary(t testing.TB) string {
	t.Helper()
	p := os.Getenv("RACKPOOL_SUSHY_EMULATOR")
	if p == "" {
		root, err := repoRoot()
		if err != nil {
			Need(t, "sushy-emulator: %v (set RACKPOOL_SUSHY_EMULATOR)", err)
		}
		p = filepath.Join(root, ".venv-rf", "bin", "sushy-emulator")
	}
	if _, err := os.Stat(p); err != nil {
		Need(t, "sushy-emulator not found at %s: run scripts/pyenv.sh (or set RACKPOOL_SUSHY_EMULATOR)", p)
	}
	abs, err := filepath.Abs(p)
	if err != nil {
		t.Fatal(err)
	}
	return abs
}

// repoRoot walks up from the working directory to the one holding go.mod.
func repoRoot() (string, error) {
	wd, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for dir := wd; ; {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		up := filepath.Dir(dir)
		if up == dir {
			return "", fmt.Errorf("no go.mod in %s or above it", wd)
		}
		dir = up
	}
}

func freePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// System is one of the fake driver's systems
// (SUSHY_EMULATOR_FAKE_SYSTEMS).
type System struct {
	UUID, Name, Power string
}

// Path is the system's path on the emulator.
func (s System) Path() string { return "/redfish/v1/Systems/" + s.UUID }

// Emulator is a running sushy-emulator (fake driver, Basic authentication
// User/Password).
type Emulator struct {
	URL  string       // http(s)://127.0.0.1:PORT
	HTTP *http.Client // trusts its certificate when it has one
	TLS  *tls.Config  // nil for http
}

// Start runs sushy-emulator with the fake driver on systems, Basic
// authentication (User, Password) and, when tlsDir is not "", HTTPS with
// pki's certificate in tlsDir. The process is killed when the test ends;
// its log is printed when the test failed.
func Start(t testing.TB, systems []System, tlsDir string) *Emulator {
	t.Helper()
	bin := Binary(t)
	dir := t.TempDir()
	hash, err := bcrypt.GenerateFromPassword([]byte(Password), bcrypt.MinCost) // the emulator checks it on every request
	if err != nil {
		t.Fatal(err)
	}
	htpasswd := filepath.Join(dir, "htpasswd")
	if err := os.WriteFile(htpasswd, []byte(User+":"+string(hash)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	// The config is Python; a JSON string is a Python string literal.
	py := func(v string) string { b, _ := json.Marshal(v); return string(b) }
	var cfg strings.Builder
	fmt.Fprintf(&cfg, "SUSHY_EMULATOR_FAKE_DRIVER = True\n")
	// The fake driver keeps its systems in SQLite there (default: a
	// directory in the system temporary directory, shared by every emulator).
	fmt.Fprintf(&cfg, "SUSHY_EMULATOR_STATE_DIR = %s\n", py(filepath.Join(dir, "state")))
	fmt.Fprintf(&cfg, "SUSHY_EMULATOR_AUTH_FILE = %s\n", py(htpasswd))
	fmt.Fprintf(&cfg, "SUSHY_EMULATOR_FAKE_SYSTEMS = [\n")
	for i, s := range systems {
		fmt.Fprintf(&cfg, "    {'uuid': %s, 'name': %s, 'power_state': %s, 'nics': [{'mac': '00:5c:52:31:3a:%02x', 'ip': '172.22.0.%d'}]},\n",
			py(s.UUID), py(s.Name), py(s.Power), i, 100+i)
	}
	fmt.Fprintf(&cfg, "]\n")
	e := &Emulator{HTTP: &http.Client{Timeout: 10 * time.Second}}
	scheme := "http"
	if tlsDir != "" {
		m, err := pki.Ensure(tlsDir, []string{"127.0.0.1"}, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&cfg, "SUSHY_EMULATOR_SSL_CERT = %s\n", py(filepath.Join(tlsDir, "server.pem")))
		fmt.Fprintf(&cfg, "SUSHY_EMULATOR_SSL_KEY = %s\n", py(filepath.Join(tlsDir, "server-key.pem")))
		e.TLS = &tls.Config{RootCAs: caPool(t, m.CAFile)}
		e.HTTP.Transport = &http.Transport{TLSClientConfig: e.TLS}
		scheme = "https"
	}
	conf := filepath.Join(dir, "emulator.conf")
	if err := os.WriteFile(conf, []byte(cfg.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	port := freePort(t)
	cmd := childproc.Command(bin, "--config", conf, "--interface", "127.0.0.1", "--port", fmt.Sprint(port))
	// SUSHY_EMULATOR_CONFIG would load another config first.
	cmd.Env = slices.DeleteFunc(os.Environ(), func(kv string) bool { return strings.HasPrefix(kv, "SUSHY_EMULATOR_CONFIG=") })
	var log syncBuffer
	cmd.Stdout, cmd.Stderr = &log, &log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
		if t.Failed() {
			t.Logf("sushy-emulator's log:\n%s", log.String())
		}
	})
	e.URL = fmt.Sprintf("%s://127.0.0.1:%d", scheme, port)
	deadline := time.Now().Add(30 * time.Second)
	for {
		// The service root needs no authentication; the Systems
		// collection proves the account and the fake driver work.
		resp, err := e.Get(e.URL + "/redfish/v1/Systems")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return e
			}
		}
		select {
		case err := <-exited:
			t.Fatalf("sushy-emulator exited: %v\n%s", err, log.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("sushy-emulator did not answer on %s within 30s (last: %v)\n%s", e.URL, err, log.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// syncBuffer is a bytes.Buffer for a process's output and a test's log.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

func caPool(t testing.TB, file string) *x509.CertPool {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(data) {
		t.Fatalf("%s holds no certificate", file)
	}
	return pool
}

// Get sends an authenticated GET of u (a full URL).
func (e *Emulator) Get(u string) (*http.Response, error) {
	req, err := http.NewRequest(http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	req.SetBasicAuth(User, Password)
	return e.HTTP.Do(req)
}

// SystemState is what the emulator itself says of a system.
type SystemState struct {
	PowerState string
	Boot       struct {
		BootSourceOverrideEnabled string
		BootSourceOverrideTarget  string
		BootSourceOverrideMode    string
	}
}

// System GETs the system from the emulator directly.
func (e *Emulator) System(t testing.TB, s System) SystemState {
	t.Helper()
	resp, err := e.Get(e.URL + s.Path())
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d %s", s.Path(), resp.StatusCode, body)
	}
	var out SystemState
	if err := json.Unmarshal(body, &out); err != nil {
		t.Fatalf("GET %s: %v", s.Path(), err)
	}
	return out
}

// WaitPower polls the emulator until the system's PowerState is want (at
// most PowerWithin) and returns how long it took.
func (e *Emulator) WaitPower(t testing.TB, s System, want string) time.Duration {
	t.Helper()
	began := time.Now()
	for {
		got := e.System(t, s).PowerState
		if got == want {
			return time.Since(began)
		}
		if time.Since(began) > PowerWithin {
			t.Fatalf("%s: PowerState still %s after %s, want %s", s.Name, got, PowerWithin, want)
		}
		time.Sleep(250 * time.Millisecond)
	}
}
