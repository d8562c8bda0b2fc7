package sqlite_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"rackpool/internal/inventory"
	"rackpool/internal/store"
	"rackpool/internal/store/sqlite"
	"rackpool/internal/store/storetest"
)

func openAt(t *testing.T, dir string) *sqlite.Store {
	t.Helper()
	s, err := sqlite.Open(dir)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	return s
}

func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T, dir string) store.Store {
		s := openAt(t, dir)
		checkOnClose(t, dir)
		return s
	})
}

// checkOnClose checks the database in dir once the test (and its stores)
// are done.
func checkOnClose(t *testing.T, dir string) {
	t.Cleanup(func() { checkConsistent(t, filepath.Join(dir, sqlite.FileName)) })
}

// checkConsistent opens the database file directly and checks SQLite's
// integrity, the foreign keys, and that the allocations table says exactly
// what the stored compositions hold.
func checkConsistent(t *testing.T, path string) {
	t.Helper()
	if _, err := os.Stat(path); err != nil {
		return // the test never opened a store here
	}
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var ok string
	if err := db.QueryRow("PRAGMA integrity_check").Scan(&ok); err != nil || ok != "ok" {
		t.Errorf("integrity_check = %q, %v", ok, err)
	}
	rows, err := db.Query("PRAGMA foreign_key_check")
	if err != nil {
		t.Fatal(err)
	}
	if rows.Next() {
		t.Errorf("foreign_key_check reports violations")
	}
	rows.Close()
	var orphans int
	if err := db.QueryRow(`SELECT COUNT(*) FROM allocations a
		LEFT JOIN compositions c ON c.id = a.composition_id WHERE c.id IS NULL`).Scan(&orphans); err != nil {
		t.Fatal(err)
	}
	if orphans != 0 {
		t.Errorf("%d allocations without a composition", orphans)
	}
	held := map[string][]string{}
	rows, err = db.Query(`SELECT composition_id, block_id FROM allocations ORDER BY composition_id, block_id`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var c, b string
		if err := rows.Scan(&c, &b); err != nil {
			t.Fatal(err)
		}
		held[c] = append(held[c], b)
	}
	rows.Close()
	s, err := sqlite.Open(filepath.Dir(path))
	if err != nil {
		t.Fatalf("reopen: %v", err)
	}
	defer s.Close()
	cs, err := s.Compositions(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cs {
		want := c.AllBlocks()
		slices.Sort(want)
		want = slices.Compact(want)
		if got := held[c.ID]; !slices.Equal(got, want) {
			t.Errorf("composition %s: allocations %v, holds %v", c.ID, got, want)
		}
		delete(held, c.ID)
	}
	if len(held) != 0 {
		t.Errorf("allocations of missing compositions: %v", held)
	}
}

func TestOpenCreatesDirAndSchema(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "a", "b")
	s := openAt(t, dir)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	db, err := sql.Open("sqlite", filepath.Join(dir, sqlite.FileName))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	tests := []struct {
		query, want string
	}{
		{"PRAGMA journal_mode", "wal"},
		{"SELECT CAST(MAX(version) AS TEXT) FROM schema_version", "5"},
		{"SELECT group_concat(name, ',') FROM (SELECT name FROM sqlite_schema WHERE type = 'table' ORDER BY name)",
			"allocations,audit,compositions,objects,schema_version,settings,sqlite_sequence"},
		{"SELECT group_concat(name, ',') FROM (SELECT name FROM sqlite_schema WHERE type = 'index' AND sql IS NOT NULL ORDER BY name)",
			"allocations_by_composition,audit_by_time"},
	}
	for _, tt := range tests {
		var got string
		if err := db.QueryRow(tt.query).Scan(&got); err != nil {
			t.Fatalf("%s: %v", tt.query, err)
		}
		if got != tt.want {
			t.Errorf("%s = %q, want %q", tt.query, got, tt.want)
		}
	}
	// A database from a newer binary is refused.
	if _, err := db.Exec("UPDATE schema_version SET version = 99"); err != nil {
		t.Fatal(err)
	}
	if s, err := sqlite.Open(dir); err == nil {
		s.Close()
		t.Fatal("Open accepted a newer schema")
	} else if !strings.Contains(err.Error(), "newer") {
		t.Fatalf("Open = %v, want a newer-schema error", err)
	}
}

func comp(id string, blocks ...string) *inventory.Composition {
	now := time.Now()
	return &inventory.Composition{
		ID: id, Host: blocks[0], Blocks: blocks, State: inventory.Composed,
		Version: 1, CreatedAt: now, UpdatedAt: now,
	}
}

// TestGroupCommitIsolatesFailures applies many plans at once, half of them
// conflicting, so that batches mix good and bad plans: each gets its own
// outcome.
func TestGroupCommitIsolatesFailures(t *testing.T) {
	dir := t.TempDir()
	s := openAt(t, dir)
	checkOnClose(t, dir)
	defer s.Close()
	ctx := context.Background()
	// Blocks taken-0..taken-99 are held, so any plan claiming one conflicts.
	var seed []*inventory.Composition
	for i := range 100 {
		seed = append(seed, comp(fmt.Sprintf("seed-%03d", i), fmt.Sprintf("h-seed-%d", i), fmt.Sprintf("taken-%d", i)))
	}
	if err := s.Apply(ctx, store.Plan{Put: seed}); err != nil {
		t.Fatal(err)
	}
	const n = 400
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			c := comp(fmt.Sprintf("c-%03d", i), fmt.Sprintf("h-%d", i), fmt.Sprintf("free-%d", i))
			if i%2 == 1 {
				c.Blocks = append(c.Blocks, fmt.Sprintf("taken-%d", i%100))
			}
			errs[i] = s.Apply(ctx, store.Plan{Put: []*inventory.Composition{c}})
		})
	}
	wg.Wait()
	cs, err := s.Compositions(ctx)
	if err != nil {
		t.Fatal(err)
	}
	stored := map[string]bool{}
	for _, c := range cs {
		stored[c.ID] = true
	}
	for i, err := range errs {
		id := fmt.Sprintf("c-%03d", i)
		switch {
		case i%2 == 0 && (err != nil || !stored[id]):
			t.Errorf("%s: Apply = %v, stored %v; want success", id, err, stored[id])
		case i%2 == 1 && (!errors.Is(err, store.ErrConflict) || stored[id]):
			t.Errorf("%s: Apply = %v, stored %v; want ErrConflict", id, err, stored[id])
		case i%2 == 1 && !strings.Contains(err.Error(), fmt.Sprintf("block taken-%d", i%100)):
			t.Errorf("%s: error %q does not name the block", id, err)
		}
	}
}

// TestCancelWhileQueued holds the write lock from another connection so that
// the writer stalls on its first plan; a second plan whose context ends while
// it waits in the queue is not applied, and the first still commits.
func TestCancelWhileQueued(t *testing.T) {
	dir := t.TempDir()
	s := openAt(t, dir)
	checkOnClose(t, dir)
	defer s.Close()
	ctx := context.Background()

	db, err := sql.Open("sqlite", filepath.Join(dir, sqlite.FileName)+"?_pragma=busy_timeout(5000)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	lock, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Close()
	if _, err := lock.ExecContext(ctx, "BEGIN IMMEDIATE"); err != nil {
		t.Fatal(err)
	}

	first := make(chan error, 1)
	go func() { first <- s.Apply(ctx, store.Plan{Put: []*inventory.Composition{comp("first", "h1")}}) }()
	time.Sleep(50 * time.Millisecond) // let the writer take it and stall

	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	err = s.Apply(short, store.Plan{Put: []*inventory.Composition{comp("second", "h2")}})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("queued Apply = %v, want DeadlineExceeded", err)
	}
	if _, err := lock.ExecContext(ctx, "COMMIT"); err != nil {
		t.Fatal(err)
	}
	if err := <-first; err != nil {
		t.Fatalf("first Apply = %v", err)
	}
	// One more plan goes through the queue after the abandoned one.
	if err := s.Apply(ctx, store.Plan{Put: []*inventory.Composition{comp("third", "h3")}}); err != nil {
		t.Fatal(err)
	}
	cs, err := s.Compositions(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, c := range cs {
		ids = append(ids, c.ID)
	}
	if want := []string{"first", "third"}; !slices.Equal(ids, want) {
		t.Fatalf("stored %v, want %v", ids, want)
	}
}

// TestCloseWithPendingApplies closes the store while plans are in flight:
// each Apply either succeeds (and its plan is stored) or returns ErrClosed
// (and it is not).
func TestCloseWithPendingApplies(t *testing.T) {
	dir := t.TempDir()
	s := openAt(t, dir)
	checkOnClose(t, dir)
	ctx := context.Background()
	const n = 200
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			errs[i] = s.Apply(ctx, store.Plan{Put: []*inventory.Composition{comp(fmt.Sprintf("c-%03d", i), fmt.Sprintf("h-%d", i))}})
		})
		if i == n/2 {
			wg.Go(func() { s.Close() })
		}
	}
	wg.Wait()
	s = openAt(t, dir)
	defer s.Close()
	cs, err := s.Compositions(ctx)
	if err != nil {
		t.Fatal(err)
	}
	stored := map[string]bool{}
	for _, c := range cs {
		stored[c.ID] = true
	}
	for i, err := range errs {
		id := fmt.Sprintf("c-%03d", i)
		switch {
		case err == nil && !stored[id]:
			t.Errorf("%s acknowledged but not stored", id)
		case err != nil && (!errors.Is(err, store.ErrClosed) || stored[id]):
			t.Errorf("%s: Apply = %v, stored %v", id, err, stored[id])
		}
	}
}

// crashDirEnv, when set, makes TestCrashChild the child of TestCrash.
const crashDirEnv = "RACKPOOL_SQLITE_CRASH_DIR"

// TestCrashChild is the child process of TestCrash.
func TestCrashChild(t *testing.T) {
	dir := os.Getenv(crashDirEnv)
	if dir == "" {
		t.Skip("child of TestCrash only")
	}
	s, err := sqlite.Open(dir)
	if err != nil {
		fmt.Println("error", err)
		os.Exit(1)
	}
	storetest.CrashChild(s)
}

// TestCrash kills a process that is applying plans and checks that every
// plan it acknowledged survived and the database is consistent.
func TestCrash(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a child process")
	}
	dir := t.TempDir()
	storetest.Crash(t, storetest.CrashConfig{
		ChildTest: "TestCrashChild",
		Env:       crashDirEnv + "=" + dir,
		Open:      func(t *testing.T) store.Store { return openAt(t, dir) },
		Check:     func(t *testing.T) { checkConsistent(t, filepath.Join(dir, sqlite.FileName)) },
	})
}

// TestIntentSkipsSync: a batch of intents alone is committed without an
// fsync (synchronous=NORMAL); any other commit is committed with FULL, and
// the switch goes both ways.
func TestIntentSkipsSync(t *testing.T) {
	s := openAt(t, t.TempDir())
	for i, intent := range []bool{false, true, true, false, true, false} {
		m, err := sqlite.SyncMode(s, intent)
		if err != nil {
			t.Fatal(err)
		}
		want := 2
		if intent {
			want = 1
		}
		if m != want {
			t.Errorf("request %d (intent %v) committed with synchronous=%d, want %d", i, intent, m, want)
		}
	}
}
