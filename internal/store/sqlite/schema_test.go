package sqlite

import (
	"context"
	"database/sql"
	"path/filepath"
	"testing"
	"time"

	"rackpool/internal/store"
)

// TestMigrateFromVersion1 builds a database the way a version-1 binary
// left it, with a composition and a setting, and checks that Open brings
// it to the current version without losing either and that the audit log
// then works.
func TestMigrateFromVersion1(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, FileName)
	ctx := context.Background()

	db, err := sql.Open("sqlite", dsn(path, "journal_mode(WAL)"))
	if err != nil {
		t.Fatal(err)
	}
	conn, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	saved := migrations
	migrations = migrations[:1]
	err = migrate(ctx, conn)
	migrations = saved
	if err != nil {
		t.Fatalf("migrate to version 1: %v", err)
	}
	for _, q := range []string{
		`INSERT INTO compositions (id, version, state, host, data) VALUES ('c1', 3, 'Composed', 'h1',
			'{"id":"c1","host":"h1","blocks":["h1","gpu-1"],"state":"Composed","created_at":"2025-01-02T03:04:05Z","updated_at":"2025-01-02T03:04:05Z"}')`,
		`INSERT INTO allocations (block_id, composition_id) VALUES ('h1', 'c1'), ('gpu-1', 'c1')`,
		`INSERT INTO settings (key, value) VALUES ('admin', 'hash')`,
	} {
		if _, err := conn.ExecContext(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	conn.Close()
	db.Close()

	s, err := Open(dir)
	if err != nil {
		t.Fatalf("Open a version-1 database: %v", err)
	}
	defer s.Close()
	cs, err := s.Compositions(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(cs) != 1 || cs[0].ID != "c1" || cs[0].Version != 3 || len(cs[0].Blocks) != 2 {
		t.Fatalf("compositions after migration: %+v", cs)
	}
	if v, ok, err := s.Setting(ctx, "admin"); err != nil || !ok || v != "hash" {
		t.Fatalf("Setting(admin) = %q, %v, %v after migration", v, ok, err)
	}
	e, err := s.AppendAudit(ctx, store.AuditEntry{Time: time.Now(), User: "admin", Outcome: store.AuditSuccess})
	if err != nil || e.ID != 1 {
		t.Fatalf("AppendAudit after migration = %+v, %v; want ID 1", e, err)
	}
	var version int
	if err := s.readDB.QueryRowContext(ctx, `SELECT MAX(version) FROM schema_version`).Scan(&version); err != nil {
		t.Fatal(err)
	}
	if version != len(migrations) {
		t.Fatalf("schema version %d, want %d", version, len(migrations))
	}
}

// TestMigrationsApplyOneByOne runs every migration from an empty database
// one version at a time, as successive releases would, and checks the
// final schema is the one a fresh database gets.
func TestMigrationsApplyOneByOne(t *testing.T) {
	ctx := context.Background()
	schema := func(path string) string {
		t.Helper()
		db, err := sql.Open("sqlite", path)
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		var s string
		if err := db.QueryRowContext(ctx, `SELECT group_concat(sql, ';') FROM
			(SELECT sql FROM sqlite_schema WHERE sql IS NOT NULL ORDER BY name)`).Scan(&s); err != nil {
			t.Fatal(err)
		}
		return s
	}
	fresh := filepath.Join(t.TempDir(), FileName)
	stepped := filepath.Join(t.TempDir(), FileName)
	saved := migrations
	defer func() { migrations = saved }()
	for _, run := range []struct {
		path  string
		steps []int
	}{
		{fresh, []int{len(saved)}},
		{stepped, func() []int {
			var v []int
			for i := 1; i <= len(saved); i++ {
				v = append(v, i)
			}
			return v
		}()},
	} {
		for _, n := range run.steps {
			migrations = saved[:n]
			db, err := sql.Open("sqlite", dsn(run.path))
			if err != nil {
				t.Fatal(err)
			}
			conn, err := db.Conn(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if err := migrate(ctx, conn); err != nil {
				t.Fatalf("migrate to %d: %v", n, err)
			}
			conn.Close()
			db.Close()
		}
	}
	if a, b := schema(fresh), schema(stepped); a != b {
		t.Fatalf("schema differs:\nfresh:   %s\nstepped: %s", a, b)
	}
}
