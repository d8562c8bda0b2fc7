package e2e

import (
	"context"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"rackpool/api"
	"rackpool/internal/store/postgres"
	"rackpool/internal/store/postgres/pgtest"
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
	cmd := exec.CommandContext(ctx, binary, append([]string{"serve", "--addr", freeAddr(t), "--data", data}, flags...)...)
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
	exited := make(chan error, 1)
	go func() { exited <- a.cmd.Wait() }()
	select {
	case err := <-exited:
		if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 3 {
			t.Errorf("resumed replica exited with %v, want exit status 3", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("the resumed replica did not exit:\n%s", a.stderr)
	}
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

// startStandby starts serve --standby on url and waits until it says it
// is waiting. Its client is usable once it logs "rackpool serving".
func startStandby(t *testing.T, url string, env []string) *server {
	t.Helper()
	addr, data := freeAddr(t), t.TempDir()
	s := &server{t: t, url: "https://" + addr, addr: addr, data: data, ca: filepath.Join(data, "tls", "ca.pem"), stderr: &syncBuffer{}}
	s.cmd = exec.Command(binary, "serve", "--addr", addr, "--data", data, "--store", url, "--fabric-time", "instant", "--standby")
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
