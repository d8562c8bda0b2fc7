package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"rackpool/internal/inventory"
	"rackpool/internal/store"
	"rackpool/internal/store/postgres"
	"rackpool/internal/store/postgres/pgtest"
	"rackpool/internal/store/storetest"

	"github.com/jackc/pgx/v5"
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

// crashURLEnv, when set, makes TestCrashChild the child of the crash tests.
const crashURLEnv = "RACKPOOL_POSTGRES_CRASH_URL"

// TestCrashChild is the child process of TestCrash and TestServerCrash.
func TestCrashChild(t *testing.T) {
	url := os.Getenv(crashURLEnv)
	if url == "" {
		t.Skip("child of TestCrash only")
	}
	s, err := postgres.Open(context.Background(), url)
	if err != nil {
		fmt.Println("error", err)
		os.Exit(1)
	}
	storetest.CrashChild(s)
}

// TestCrash kills (SIGKILL) a process that is applying plans and checks
// that every change it acknowledged survived.
func TestCrash(t *testing.T) {
	srv := shared(t)
	url := srv.CreateDatabase(t, pgtest.DatabaseName(t))
	storetest.Crash(t, storetest.CrashConfig{
		ChildTest: "TestCrashChild",
		Env:       crashURLEnv + "=" + url,
		Open:      func(t *testing.T) store.Store { return openURL(t, url) },
		Check:     func(t *testing.T) { checkConsistent(t, url) },
	})
}

// TestServerCrash crashes the database server (pg_ctl stop -m immediate:
// no checkpoint, recovery from the WAL at the next start) under a process
// applying plans, then kills the process: every change acknowledged before
// the crash must be there after recovery.
func TestServerCrash(t *testing.T) {
	if testing.Short() {
		t.Skip("starts PostgreSQL")
	}
	srv := pgtest.Start(t)
	url := srv.CreateDatabase(t, pgtest.DatabaseName(t))
	storetest.Crash(t, storetest.CrashConfig{
		ChildTest: "TestCrashChild",
		Env:       crashURLEnv + "=" + url,
		Open:      func(t *testing.T) store.Store { return openURL(t, url) },
		Check:     func(t *testing.T) { checkConsistent(t, url) },
		Crash: func(t *testing.T) {
			if err := srv.Stop("immediate"); err != nil {
				t.Error(err)
			}
			if err := srv.Start(); err != nil {
				t.Error(err)
			}
		},
	})
}

// checkConsistent checks that the allocations table says exactly what the
// stored compositions hold, reading both in one snapshot once the killed
// child's sessions are gone.
func checkConsistent(t *testing.T, url string) {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		var n int
		if err := conn.QueryRow(ctx, `SELECT COUNT(*) FROM pg_stat_activity
			WHERE datname = current_database() AND pid <> pg_backend_pid()`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d sessions of the killed child still open", n)
		}
	}
	tx, err := conn.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	rows, err := tx.Query(ctx, `SELECT composition_id, block_id FROM allocations ORDER BY composition_id, block_id`)
	if err != nil {
		t.Fatal(err)
	}
	held := map[string][]string{}
	var c, b string
	if _, err := pgx.ForEachRow(rows, []any{&c, &b}, func() error { held[c] = append(held[c], b); return nil }); err != nil {
		t.Fatal(err)
	}
	rows, err = tx.Query(ctx, `SELECT version, data FROM compositions`)
	if err != nil {
		t.Fatal(err)
	}
	var (
		version int64
		data    []byte
	)
	_, err = pgx.ForEachRow(rows, []any{&version, &data}, func() error {
		c, err := store.DecodeComposition(version, data)
		if err != nil {
			return err
		}
		want := c.AllBlocks()
		slices.Sort(want)
		want = slices.Compact(want)
		if got := held[c.ID]; !slices.Equal(got, want) {
			t.Errorf("composition %s: allocations %v, holds %v", c.ID, got, want)
		}
		delete(held, c.ID)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(held) != 0 {
		t.Errorf("allocations of missing compositions: %v", held)
	}
}

// TestOpenRefusesNewerSchema: a database migrated by a newer binary is
// refused at Open with a clear error, and left as it was.
func TestOpenRefusesNewerSchema(t *testing.T) {
	srv := shared(t)
	url := srv.CreateDatabase(t, pgtest.DatabaseName(t))
	openURL(t, url).Close()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, `UPDATE schema_version SET version = 99`); err != nil {
		t.Fatal(err)
	}
	_, err = postgres.Open(ctx, url)
	if !errors.Is(err, postgres.ErrNewerSchema) || !strings.Contains(err.Error(), "version 99") {
		t.Fatalf("Open = %v, want ErrNewerSchema naming version 99", err)
	}
	if strings.Contains(err.Error(), srv.Password) {
		t.Errorf("error shows the password: %v", err)
	}
	var v int
	if err := conn.QueryRow(ctx, `SELECT version FROM schema_version`).Scan(&v); err != nil || v != 99 {
		t.Fatalf("schema_version = %d, %v after the refused Open", v, err)
	}
}

// TestOpenWrongPassword: a wrong password is refused without showing it.
func TestOpenWrongPassword(t *testing.T) {
	srv := shared(t)
	url := strings.Replace(srv.URL(srv.Addr(), "postgres"), srv.Password, "not-the-password", 1)
	_, err := postgres.Open(context.Background(), url)
	if err == nil || strings.Contains(err.Error(), "not-the-password") {
		t.Fatalf("Open with a wrong password = %v, want an error without the password", err)
	}
	t.Log(err)
}

// TestLeadFencing: one session leads a role at a time; when the leader's
// session ends, the next leader gets the next epoch and the old leader's
// writes are refused with ErrFenced and change nothing.
func TestLeadFencing(t *testing.T) {
	srv := shared(t)
	url := srv.CreateDatabase(t, pgtest.DatabaseName(t))
	ctx := context.Background()
	a, b := openURL(t, url), openURL(t, url)
	defer a.Close()
	defer b.Close()
	la, err := a.Lead(ctx, "serve", "replica-a", postgres.LeadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if la.Epoch != 1 {
		t.Errorf("first epoch = %d, want 1", la.Epoch)
	}
	_, err = b.Lead(ctx, "serve", "replica-b", postgres.LeadOptions{})
	if !errors.Is(err, postgres.ErrLocked) || !strings.Contains(err.Error(), "replica-a") {
		t.Fatalf("second Lead = %v, want ErrLocked naming replica-a", err)
	}
	if err := a.Apply(ctx, store.Plan{Put: []*inventory.Composition{{ID: "c1", Version: 1, State: inventory.Composed, Blocks: []string{"b1"}}}}); err != nil {
		t.Fatalf("leader's Apply: %v", err)
	}

	// The leader's session ends (as the server ends a silent one); b,
	// waiting, takes over with the next epoch.
	got := make(chan *postgres.Leadership, 1)
	go func() {
		lb, err := b.Lead(ctx, "serve", "replica-b", postgres.LeadOptions{Wait: true, TTL: time.Second})
		if err != nil {
			t.Error(err)
		}
		got <- lb
	}()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = 'replica-a'`); err != nil {
		t.Fatal(err)
	}
	var lb *postgres.Leadership
	select {
	case lb = <-got:
	case <-time.After(10 * time.Second):
		t.Fatal("the standby did not take over")
	}
	if lb == nil {
		t.Fatal("no leadership")
	}
	defer lb.Release()
	if lb.Epoch != 2 {
		t.Errorf("second epoch = %d, want 2", lb.Epoch)
	}
	select {
	case <-la.Lost():
	case <-time.After(5 * time.Second):
		t.Error("the old leader was not told it lost the lead")
	}
	for _, err := range []error{
		a.Apply(ctx, store.Plan{Delete: []store.Deletion{{ID: "c1", Version: 1}}}),
		a.PutSetting(ctx, "k", "v"),
		a.PutObject(ctx, "k", store.Object{ID: "o"}),
	} {
		if !errors.Is(err, postgres.ErrFenced) {
			t.Errorf("old leader's write = %v, want ErrFenced", err)
		}
	}
	if _, err := a.AppendAudit(ctx, store.AuditEntry{Time: time.Now(), User: "x", Outcome: store.AuditSuccess}); !errors.Is(err, postgres.ErrFenced) {
		t.Errorf("old leader's AppendAudit = %v, want ErrFenced", err)
	}
	cs, err := b.Compositions(ctx)
	if err != nil || len(cs) != 1 {
		t.Fatalf("compositions after the fenced writes: %v, %v", cs, err)
	}
	if _, ok, _ := b.Setting(ctx, "k"); ok {
		t.Error("a fenced PutSetting was stored")
	}
	if err := b.Apply(ctx, store.Plan{Delete: []store.Deletion{{ID: "c1", Version: 1}}}); err != nil {
		t.Errorf("new leader's Apply: %v", err)
	}
}

// TestFeed: the change log names every record a commit changed, once, in
// sequence order; a change whose transaction took an earlier sequence
// number but committed later is still delivered (the gap is read again).
func TestFeed(t *testing.T) {
	srv := shared(t)
	url := srv.CreateDatabase(t, pgtest.DatabaseName(t))
	ctx := context.Background()
	s := openURL(t, url)
	defer s.Close()
	head, err := s.Head(ctx)
	if err != nil || head != 0 {
		t.Fatalf("Head of an empty log = %d, %v", head, err)
	}
	feed := s.Feed(head)
	c1 := &inventory.Composition{ID: "c1", Version: 1, State: inventory.Composed, Blocks: []string{"b1"}}
	if err := s.Apply(ctx, store.Plan{Put: []*inventory.Composition{c1},
		Objects: []store.ObjectChange{{Kind: "lease", Object: store.Object{ID: "l1", Data: []byte("x")}}}}); err != nil {
		t.Fatal(err)
	}
	if err := s.PutSetting(ctx, "k", "v"); err != nil {
		t.Fatal(err)
	}
	// A refused plan logs nothing.
	if err := s.Apply(ctx, store.Plan{Put: []*inventory.Composition{{ID: "c2", Version: 1, Blocks: []string{"b1"}}}}); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("conflicting Apply = %v", err)
	}
	got, err := feed.Next(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, c := range got {
		names = append(names, c.Kind+"/"+c.ID)
	}
	if want := []string{"composition/c1", "lease/l1", "setting/k"}; !slices.Equal(names, want) {
		t.Fatalf("feed = %v, want %v", names, want)
	}

	// A transaction takes a sequence number and commits after a later one.
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, `INSERT INTO changes (kind, id, token) VALUES ('composition', 'slow', '\x00')`); err != nil {
		t.Fatal(err)
	}
	if err := s.PutSetting(ctx, "k", "w"); err != nil {
		t.Fatal(err)
	}
	got, err = feed.Next(ctx)
	if err != nil || len(got) != 1 || got[0].ID != "k" {
		t.Fatalf("feed = %v, %v, want setting k alone", got, err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	got, err = feed.Next(ctx)
	if err != nil || len(got) != 1 || got[0].ID != "slow" {
		t.Fatalf("feed after the slow commit = %v, %v, want composition slow", got, err)
	}
	if got, _ := feed.Next(ctx); len(got) != 0 {
		t.Fatalf("feed repeats %v", got)
	}

	// Listen tells of a commit by notification.
	fctx, cancel := context.WithCancel(ctx)
	defer cancel()
	delivered := make(chan postgres.Change, 16)
	go s.Listen(fctx, time.Minute, slog.New(slog.DiscardHandler), func() {
		cs, err := feed.Next(fctx)
		if err != nil && fctx.Err() == nil {
			t.Error(err)
		}
		for _, c := range cs {
			delivered <- c
		}
	})
	time.Sleep(200 * time.Millisecond) // listening
	// Another replica's commit: a store is not told of its own.
	other := openURL(t, url)
	defer other.Close()
	start := time.Now()
	if err := other.PutSetting(ctx, "k", "z"); err != nil {
		t.Fatal(err)
	}
	select {
	case c := <-delivered:
		if c.ID != "k" || c.Own {
			t.Fatalf("followed %+v, want another store's change of k", c)
		}
		t.Logf("delivered %s after the commit (poll interval 1 min)", time.Since(start).Round(time.Microsecond))
	case <-time.After(10 * time.Second):
		t.Fatal("no change delivered by notification")
	}
}

// TestPruneChanges: changes older than the retention are deleted, newer
// ones kept.
func TestPruneChanges(t *testing.T) {
	srv := shared(t)
	url := srv.CreateDatabase(t, pgtest.DatabaseName(t))
	ctx := context.Background()
	s := openURL(t, url)
	defer s.Close()
	for i := range 3 {
		if err := s.PutSetting(ctx, fmt.Sprint("k", i), "v"); err != nil {
			t.Fatal(err)
		}
	}
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, `UPDATE changes SET at = now() - interval '1 hour' WHERE id <> 'k2'`); err != nil {
		t.Fatal(err)
	}
	n, err := s.PruneChanges(ctx, postgres.ChangeRetention)
	if err != nil || n != 2 {
		t.Fatalf("PruneChanges = %d, %v, want 2", n, err)
	}
	got, err := s.Feed(0).Next(ctx)
	if err != nil || len(got) != 1 || got[0].ID != "k2" {
		t.Fatalf("the log after pruning holds %v, %v; want the change of k2", got, err)
	}
}

// TestParseURLHosts: a URL may list the database's hosts (a primary and
// its standby), as docs/ha.md suggests; the password never appears in
// errors about a URL.
func TestParseURLHosts(t *testing.T) {
	cfg, err := postgres.ParseURL("postgres://u:pw@db1,db2:5433/rackpool?target_session_attrs=read-write")
	if err != nil {
		t.Fatal(err)
	}
	hosts := []string{cfg.ConnConfig.Host}
	for _, f := range cfg.ConnConfig.Fallbacks {
		hosts = append(hosts, f.Host)
	}
	if !slices.Contains(hosts, "db1") || !slices.Contains(hosts, "db2") {
		t.Errorf("hosts %v, want db1 and db2", hosts)
	}
	if _, err := postgres.ParseURL("postgres://u:s3cret@db1:99999999/x"); err == nil || strings.Contains(err.Error(), "s3cret") {
		t.Errorf("a bad port = %v; want an error without the password", err)
	}
}
