package postgres_test

import (
	"context"
	"errors"
	"os"
	"sync"
	"testing"

	"rackpool/internal/store"
	"rackpool/internal/store/postgres"
	"rackpool/internal/store/postgres/pgtest"
	"rackpool/internal/store/storetest"
)

var (
	serverOnce sync.Once
	server     *pgtest.Server
	serverErr  error
)

// TestMain stops the shared server after the package's tests.
func TestMain(m *testing.M) {
	code := m.Run()
	if server != nil {
		server.Stop("immediate")
		os.RemoveAll(server.Dir)
	}
	os.Exit(code)
}

// shared returns the package's server, started by the first test that
// needs one; tests that stop or restart a server start their own.
func shared(t *testing.T) *pgtest.Server {
	t.Helper()
	if testing.Short() {
		t.Skip("starts PostgreSQL")
	}
	serverOnce.Do(func() {
		bin, err := pgtest.Bin()
		if err != nil {
			serverErr = err
			return
		}
		server, serverErr = pgtest.New(bin)
	})
	if serverErr != nil {
		if os.Getenv("RACKPOOL_E2E") == "1" {
			t.Fatalf("RACKPOOL_E2E=1 needs PostgreSQL: %v", serverErr)
		}
		t.Skipf("skipping: %v", serverErr)
	}
	return server
}

func openURL(t *testing.T, url string) *postgres.Store {
	t.Helper()
	s, err := postgres.Open(context.Background(), url)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	return s
}

// TestConformance runs the store conformance suite: each directory the
// suite opens is one database, so reopening a directory reopens its
// database.
func TestConformance(t *testing.T) {
	srv := shared(t)
	var (
		mu  sync.Mutex
		dbs = map[string]string{}
	)
	storetest.Run(t, func(t *testing.T, dir string) store.Store {
		mu.Lock()
		url, ok := dbs[dir]
		if !ok {
			url = srv.CreateDatabase(t, pgtest.DatabaseName(t))
			dbs[dir] = url
		}
		mu.Unlock()
		return openURL(t, url)
	})
}

func TestOpenRefusesBadURLs(t *testing.T) {
	t.Setenv("PGPASSWORD", "")
	t.Setenv("PGPASSFILE", os.DevNull)
	for _, url := range []string{
		"postgres://127.0.0.1:5432/rackpool",
		"postgres://rackpool@127.0.0.1:5432/rackpool",
		"postgres://:secret@127.0.0.1:5432/rackpool",
		"mysql://u:p@127.0.0.1/rackpool",
		"postgres://u:p@127.0.0.1:notaport/rackpool",
		"not a url",
	} {
		_, err := postgres.Open(context.Background(), url)
		if !errors.Is(err, postgres.ErrURL) {
			t.Errorf("Open(%q) = %v, want ErrURL", url, err)
		}
	}
}
