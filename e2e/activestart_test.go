package e2e

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"rackpool/api"
	"rackpool/internal/childproc"
	"rackpool/internal/store/postgres/pgtest"
)

// TestPostgresActiveStartTogether: three active replicas started at the
// same instant on a fresh database all come up, round after round: every
// start-up step that creates state (the schema, the Administrator, the
// records each subsystem seeds) is idempotent under concurrency. With
// RACKPOOL_ADMIN_PASSWORD every replica accepts it; without it exactly one
// replica generates and prints a password, and that password works at
// every replica.
func TestPostgresActiveStartTogether(t *testing.T) {
	skipShort(t)
	pg := pgtest.Start(t)
	fms := sharedFabrics(t, "instant")
	topo := redfishRack(t, fms...)
	const rounds, replicas = 6, 3
	for round := range rounds {
		withPassword := round%2 == 0
		url := pg.CreateDatabase(t, fmt.Sprintf("%s_%d", pgtest.DatabaseName(t), round))
		env := fmEnv(fms...)
		if withPassword {
			env = append(env, "RACKPOOL_ADMIN_PASSWORD="+password)
		}
		procs := startTogether(t, replicas, env, "--active", "--topology", topo, "--store", url)
		pass := password
		if !withPassword {
			var printed []string
			for _, p := range procs {
				if m := regexp.MustCompile(`Generated Administrator password[^:]*: (\S+)`).FindStringSubmatch(p.stderr.String()); m != nil {
					printed = append(printed, m[1])
				}
			}
			if len(printed) != 1 {
				t.Fatalf("round %d: %d replicas printed a generated password, want exactly one", round, len(printed))
			}
			pass = printed[0]
		}
		for i, p := range procs {
			c := p.clientAs("Administrator", pass)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			_, err := c.Blocks(ctx)
			cancel()
			if err != nil {
				t.Fatalf("round %d: replica %d refuses the Administrator's password: %v\n%s", round, i, err, p.stderr)
			}
		}
		for _, p := range procs {
			p.kill()
		}
	}
}

// startTogether starts n serve processes with the same flags, each with
// its own address and data directory, one right after the other, and
// waits until each serves. A replica that exits first fails the test with
// its log, unless another process took its address (then it starts again
// on another).
func startTogether(t *testing.T, n int, env []string, flags ...string) []*server {
	t.Helper()
	prepare := func() (*server, *os.File, chan struct{}) {
		addr, data := freeAddr(t), t.TempDir()
		cmd := childproc.Command(binary, append([]string{"serve", "--addr", addr, "--data", data}, flags...)...)
		cmd.Env = append(os.Environ(), env...)
		p := &server{t: t, cmd: cmd, url: "https://" + addr, addr: addr, data: data, ca: filepath.Join(data, "tls", "ca.pem"), stderr: &syncBuffer{}}
		// The log through a pipe: its end is the process's exit.
		r, w, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		cmd.Stderr = w
		exited := make(chan struct{})
		go func() {
			defer close(exited)
			defer r.Close()
			_, _ = io.Copy(p.stderr, r)
		}()
		return p, w, exited
	}
	launch := func(p *server, w *os.File) {
		err := p.cmd.Start()
		w.Close()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(p.kill)
	}
	procs := make([]*server, n)
	pipes := make([]*os.File, n)
	exited := make([]chan struct{}, n)
	for i := range procs {
		procs[i], pipes[i], exited[i] = prepare()
	}
	for i, p := range procs {
		launch(p, pipes[i])
	}
	deadline := time.Now().Add(3 * startTimeout)
	for i := 0; i < n; i++ {
		p := procs[i]
		for !strings.Contains(p.stderr.String(), "rackpool serving") {
			select {
			case <-exited[i]:
				if strings.Contains(p.stderr.String(), "address already in use") {
					procs[i], pipes[i], exited[i] = prepare()
					launch(procs[i], pipes[i])
					p = procs[i]
					continue
				}
				t.Fatalf("replica %d of %d started together exited:\n%s", i+1, n, p.stderr)
			case <-time.After(20 * time.Millisecond):
			}
			if time.Now().After(deadline) {
				t.Fatalf("replica %d of %d started together did not serve:\n%s", i+1, n, p.stderr)
			}
		}
		cfg, err := api.TLSConfig(p.ca)
		if err != nil {
			t.Fatal(err)
		}
		p.http = &http.Client{Transport: &http.Transport{TLSClientConfig: cfg}}
	}
	return procs
}
