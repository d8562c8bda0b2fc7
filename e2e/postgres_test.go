package e2e

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"rackpool/api"
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
