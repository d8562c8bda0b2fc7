package e2e

import (
	"context"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"rackpool/api"
	"rackpool/internal/childproc"
	"rackpool/internal/store/postgres"
	"rackpool/internal/store/postgres/pgtest"
	"rackpool/internal/topology"
)

// startPostgres starts a PostgreSQL server for the test and returns the URL
// of a new database on it.
func startPostgres(t *testing.T) (*pgtest.Server, string) {
	t.Helper()
	pg := pgtest.Start(t)
	return pg, pg.CreateDatabase(t, pgtest.DatabaseName(t))
}

// TestPostgresKillDuringComposeStorm is the kill -9 storm on the
// PostgreSQL store.
func TestPostgresKillDuringComposeStorm(t *testing.T) {
	skipShort(t)
	_, url := startPostgres(t)
	killDuringComposeStorm(t, "--store", url)
}

// TestPostgresServe: serve keeps its state in PostgreSQL (a replica with a
// fresh data directory finds it), refuses a second replica on the same
// database while one serves, and refuses URLs without credentials and
// databases of a newer schema at start-up, with clear errors that never
// show the password.
func TestPostgresServe(t *testing.T) {
	skipShort(t)
	pg, url := startPostgres(t)
	env := []string{"RACKPOOL_ADMIN_PASSWORD=" + password}
	srv := start(t, t.TempDir(), env, "--store", url)
	if !strings.Contains(srv.stderr.String(), "store=\"postgres postgres://rackpool:xxxxx@") {
		t.Errorf("serve's log does not name the store with its password redacted:\n%s", srv.stderr)
	}
	if strings.Contains(srv.stderr.String(), pg.Password) {
		t.Errorf("serve's log shows the database password")
	}
	ctx := context.Background()
	sys, err := srv.client().Compose(ctx, api.ComposeRequest{Needs: []api.Need{{Kind: "gpu", Count: 1}}})
	if err != nil {
		t.Fatal(err)
	}

	// A second replica on the same database is refused while one serves.
	out, err := runServe(t, t.TempDir(), env, "--store", url)
	if err == nil || !strings.Contains(out, "in use by another rackpool serve") || !strings.Contains(out, "rackpool serve pid") {
		t.Errorf("second serve on one database: %v\n%s", err, out)
	}

	// kill -9, then a replica with another data directory (another
	// machine) serves the same state.
	srv.kill()
	srv = start(t, t.TempDir(), env, "--store", url)
	got, err := srv.client().System(ctx, sys.ID)
	if err != nil {
		t.Fatalf("system %s after kill -9 and a new replica: %v", sys.ID, err)
	}
	if len(got.Links.ResourceBlocks) != len(sys.Links.ResourceBlocks) {
		t.Errorf("system %s has %d blocks, had %d", sys.ID, len(got.Links.ResourceBlocks), len(sys.Links.ResourceBlocks))
	}

	// A standby describing another datacenter is refused at once, naming
	// both topologies; nothing changes.
	other := filepath.Join(t.TempDir(), "racks.yaml")
	if err := os.WriteFile(other, topology.GenerateRacks(2), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err = runServe(t, t.TempDir(), env, "--store", url, "--standby", "--topology", other)
	if err == nil || !strings.Contains(out, "is not the one the database is served with") || !strings.Contains(out, "example-rack") {
		t.Errorf("standby with another topology: %v\n%s", err, out)
	}
	if _, err := srv.client().System(ctx, sys.ID); err != nil {
		t.Errorf("system %s after the refused standby: %v", sys.ID, err)
	}
	srv.kill()

	for _, tc := range []struct {
		name, url, want string
	}{
		{"no credentials", strings.Replace(url, "rackpool:"+pg.Password+"@", "", 1), "no user name"},
		{"no password", strings.Replace(url, ":"+pg.Password+"@", "@", 1), "no password"},
		{"wrong password", strings.Replace(url, pg.Password, "wrong-password", 1), "password authentication failed"},
		{"not a URL", "mysql://u:p@127.0.0.1/db", "want sqlite or a postgres://"},
	} {
		out, err := runServe(t, t.TempDir(), append(env, "PGPASSWORD=", "PGPASSFILE="+os.DevNull), "--store", tc.url)
		if err == nil || !strings.Contains(out, tc.want) {
			t.Errorf("%s: serve = %v, want an error containing %q:\n%s", tc.name, err, tc.want, out)
		}
		if strings.Contains(out, pg.Password) || strings.Contains(out, "wrong-password") {
			t.Errorf("%s: the error shows a password:\n%s", tc.name, out)
		}
	}
}

// runServe runs serve until it exits (a start-up error), for at most a
// minute, and returns its output.
func runServe(t *testing.T, data string, env []string, flags ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := childproc.CommandContext(ctx, binary, append([]string{"serve", "--addr", freeAddr(t), "--data", data}, flags...)...)
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// TestPostgresStandby: a standby replica takes over when the serving one
// is paused (SIGSTOP) for longer than the lease, and the paused one, once
// resumed (SIGCONT), commits nothing more and exits: its writes are fenced
// by the leadership epoch.
func TestPostgresStandby(t *testing.T) {
	skipShort(t)
	_, url := startPostgres(t)
	env := []string{"RACKPOOL_ADMIN_PASSWORD=" + password}
	a := start(t, t.TempDir(), env, "--store", url, "--fabric-time", "instant")
	ctx := context.Background()
	sys, err := a.client().Compose(ctx, api.ComposeRequest{Needs: []api.Need{{Kind: "gpu", Count: 1}}})
	if err != nil {
		t.Fatal(err)
	}

	// The standby waits without listening.
	b := startStandby(t, url, env)

	if err := a.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	stopped := time.Now()
	waitLog(t, b, "rackpool serving", 30*time.Second)
	t.Logf("standby took over %s after the SIGSTOP (lease %s)", time.Since(stopped).Round(time.Millisecond), postgres.DefaultLeaseTTL)
	if _, err := b.client().System(ctx, sys.ID); err != nil {
		t.Fatalf("system %s on the replica that took over: %v", sys.ID, err)
	}

	// The old replica resumes: whatever it tries is refused, and it exits.
	if err := a.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	late, err := a.client().Compose(ctx, api.ComposeRequest{Needs: []api.Need{{Kind: "gpu", Count: 1}}})
	if err == nil {
		t.Errorf("the resumed replica composed %s after another took over", late.ID)
	} else {
		t.Logf("compose at the resumed replica: %v", err)
	}
	expectExit3(t, a, "the resumed replica")
	systems, err := b.client().Systems(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, s := range systems {
		if s.SystemType == "Composed" {
			ids = append(ids, s.ID)
		}
	}
	if len(ids) != 1 || ids[0] != sys.ID {
		t.Errorf("systems after the takeover: %v, want only %s", ids, sys.ID)
	}
	if !strings.Contains(a.stderr.String(), "exiting") {
		t.Errorf("the resumed replica did not say why it exits:\n%s", a.stderr)
	}

	// kill -9 of the serving replica: the kernel closes its sessions, so a
	// standby takes over without waiting for the lease.
	c := startStandby(t, url, env)
	b.kill()
	killed := time.Now()
	waitLog(t, c, "rackpool serving", 30*time.Second)
	t.Logf("standby took over %s after a kill -9", time.Since(killed).Round(time.Millisecond))
	if _, err := c.client().System(ctx, sys.ID); err != nil {
		t.Fatalf("system %s on the third replica: %v", sys.ID, err)
	}
}

// startStandby starts serve --standby on url (with flags, by default
// --fabric-time instant) and waits until it says it is waiting. Its client is usable once it logs "rackpool serving".
func startStandby(t *testing.T, url string, env []string, flags ...string) *server {
	t.Helper()
	addr, data := freeAddr(t), t.TempDir()
	s := &server{t: t, url: "https://" + addr, addr: addr, data: data, ca: filepath.Join(data, "tls", "ca.pem"), stderr: &syncBuffer{}}
	if len(flags) == 0 {
		flags = []string{"--fabric-time", "instant"}
	}
	s.cmd = childproc.Command(binary, append([]string{"serve", "--addr", addr, "--data", data, "--store", url, "--standby"}, flags...)...)
	s.cmd.Env = append(os.Environ(), env...)
	s.cmd.Stderr = s.stderr
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.kill)
	waitLog(t, s, "standby: another replica serves this database", 20*time.Second)
	// Its CA exists from the start (serve makes it before waiting).
	cfg, err := api.TLSConfig(s.ca)
	if err != nil {
		t.Fatal(err)
	}
	s.http = &http.Client{Transport: &http.Transport{TLSClientConfig: cfg}}
	return s
}

// waitLog waits until s has logged want.
func waitLog(t *testing.T, s *server, want string, within time.Duration) {
	t.Helper()
	for deadline := time.Now().Add(within); !strings.Contains(s.stderr.String(), want); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no %q in the log within %s:\n%s", want, within, s.stderr)
		}
	}
}

// TestPostgresRestart: PostgreSQL crashes (pg_ctl stop -m immediate) and
// comes back under a serving replica. Requests fail while it is down and
// change nothing; the replica takes its lead again (the next epoch, nobody
// led in between) and serves; nothing acknowledged is lost.
func TestPostgresRestart(t *testing.T) {
	skipShort(t)
	pg, url := startPostgres(t)
	env := []string{"RACKPOOL_ADMIN_PASSWORD=" + password}
	srv := start(t, t.TempDir(), env, "--store", url, "--fabric-time", "instant")
	c := srv.client()
	ctx := context.Background()
	need := api.ComposeRequest{Needs: []api.Need{{Kind: "gpu", Count: 1}}}
	before, err := c.Compose(ctx, need)
	if err != nil {
		t.Fatal(err)
	}
	if err := pg.Stop("immediate"); err != nil {
		t.Fatal(err)
	}
	if sys, err := c.Compose(ctx, need); err == nil {
		t.Errorf("composed %s with the database down", sys.ID)
	} else if ae, ok := err.(*api.Error); !ok || ae.Status != http.StatusServiceUnavailable {
		t.Errorf("compose with the database down = %v, want 503 ServiceTemporarilyUnavailable", err)
	}
	if err := pg.Start(); err != nil {
		t.Fatal(err)
	}
	up := time.Now()
	var after *api.System
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if after, err = c.Compose(ctx, need); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no compose succeeded within 30 s of the database's return: %v\n%s", err, srv.stderr)
		}
	}
	t.Logf("first compose %s after the database came back", time.Since(up).Round(time.Millisecond))
	waitLog(t, srv, "lead of the store taken again", 10*time.Second)
	systems, err := c.Systems(ctx)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{}
	for _, s := range systems {
		if s.SystemType == "Composed" {
			got[s.ID] = true
		}
	}
	if len(got) != 2 || !got[before.ID] || !got[after.ID] {
		t.Errorf("systems after the restart: %v, want %s and %s", got, before.ID, after.ID)
	}
	// The replica's state and the store's agree: a fresh replica sees the
	// same systems.
	srv.kill()
	srv = start(t, t.TempDir(), env, "--store", url, "--fabric-time", "instant")
	systems, err = srv.client().Systems(ctx)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, s := range systems {
		if s.SystemType == "Composed" {
			n++
			if !got[s.ID] {
				t.Errorf("a fresh replica finds %s, which the old one did not have", s.ID)
			}
		}
	}
	if n != len(got) {
		t.Errorf("a fresh replica finds %d systems, want %d", n, len(got))
	}
}

// TestPostgresFabricFencing: a replica cut from the database (through a
// proxy the test controls) and paused in the middle of a composition (its
// first device attached, five to go),
// while its fabric manager (fabric-emulator, real modelled time) is
// attaching, loses its lead; the standby takes over and settles the
// half-done composition on the fabric with the next epoch. Resumed but
// still cut off, the old replica cannot learn it lost the lead, and its
// next fabric change carries its old epoch: the fabric manager refuses it.
// Nothing of the composition is left on the fabric or in the store, and
// once the proxy is back the old replica finds another leading and exits.
func TestPostgresFabricFencing(t *testing.T) {
	skipShort(t)
	pg, url := startPostgres(t)
	proxy := startProxy(t, pg.Addr())
	viaProxy := strings.Replace(url, pg.Addr(), proxy.addr(), 1)
	fm := startFabricEmulator(t, "falcon1", "--fabric-time", "real")
	topo := redfishRack(t, fm)
	env := []string{"RACKPOOL_ADMIN_PASSWORD=" + password, "FALCON1_PASSWORD=" + fmPassword}
	a := start(t, t.TempDir(), env, "--store", viaProxy, "--topology", topo, "--fabric-time", "real")
	b := startStandby(t, url, env, "--topology", topo, "--fabric-time", "real")

	// Six PCIe devices, attached one after another at 100 ms each: cut and
	// pause the replica once the fabric shows the first.
	composed := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		_, err := a.client().Compose(ctx, api.ComposeRequest{Host: "host1", Blocks: []string{"gpu1", "gpu2", "gpu3", "gpu4", "nvme1", "nic1"}})
		composed <- err
	}()
	for deadline := time.Now().Add(30 * time.Second); len(fm.zoneMembers(t, "falcon1", "host1-pcie")) < 2; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the composition never reached the fabric:\n%s", a.stderr)
		}
	}
	proxy.cut()
	if err := a.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	waitLog(t, b, "rackpool serving", 30*time.Second)
	if err := a.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-composed:
		if err == nil {
			t.Fatal("the cut-off replica's composition succeeded after another replica took over")
		}
		t.Logf("the resumed replica's compose: %v", err)
	case <-time.After(time.Minute):
		t.Fatal("the resumed replica never answered its compose")
	}
	if !strings.Contains(a.stderr.String(), "stale leadership epoch") {
		t.Errorf("the resumed replica's fabric changes were not refused for their epoch:\n%s", a.stderr)
	}
	if got := fm.zoneMembers(t, "falcon1", "host1-pcie"); len(got) > 1 {
		t.Errorf("the fabric keeps %v for host1 after the takeover", got)
	}
	systems, err := b.client().Systems(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range systems {
		if s.SystemType == "Composed" {
			t.Errorf("system %s (%s) is stored after the takeover", s.ID, s.Status.State)
		}
	}
	// The database is reachable again: the old replica finds another
	// leading and exits.
	proxy.restore()
	expectExit3(t, a, "the old replica, once it could reach the database,")
}

// tcpProxy forwards loopback connections to a target until cut: then it
// closes every connection and refuses new ones, until restored.
type tcpProxy struct {
	ln     net.Listener
	target string
	mu     sync.Mutex
	down   bool
	conns  map[net.Conn]bool
}

func startProxy(t *testing.T, target string) *tcpProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &tcpProxy{ln: ln, target: target, conns: map[net.Conn]bool{}}
	t.Cleanup(func() { ln.Close(); p.cut() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go p.serve(c)
		}
	}()
	return p
}

func (p *tcpProxy) addr() string { return p.ln.Addr().String() }

func (p *tcpProxy) serve(c net.Conn) {
	p.mu.Lock()
	if p.down {
		p.mu.Unlock()
		c.Close()
		return
	}
	p.mu.Unlock()
	up, err := net.Dial("tcp", p.target)
	if err != nil {
		c.Close()
		return
	}
	p.mu.Lock()
	if p.down {
		p.mu.Unlock()
		c.Close()
		up.Close()
		return
	}
	p.conns[c], p.conns[up] = true, true
	p.mu.Unlock()
	go func() { io.Copy(up, c); up.Close() }()
	io.Copy(c, up)
	c.Close()
}

// cut closes every connection and refuses new ones.
func (p *tcpProxy) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.down = true
	for c := range p.conns {
		c.Close()
	}
	clear(p.conns)
}

// restore forwards new connections again.
func (p *tcpProxy) restore() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.down = false
}

// expectExit3 waits up to 30 s for s, a replica whose place another took
// (who: how the error names it), to exit with status 3.
func expectExit3(t *testing.T, s *server, who string) {
	t.Helper()
	exited := make(chan error, 1)
	go func() { exited <- s.cmd.Wait() }()
	select {
	case err := <-exited:
		if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 3 {
			t.Errorf("%s exited with %v, want exit status 3", who, err)
		}
	case <-time.After(30 * time.Second):
		t.Errorf("%s did not exit:\n%s", who, s.stderr)
	}
}
