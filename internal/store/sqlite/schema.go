package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
)

// migrations are applied in order; migrations[i] brings the schema from
// version i to version i+1. Never edit a released migration: append a new one.
var migrations = []string{
	// 1: compositions, the blocks they hold, and settings.
	`CREATE TABLE compositions (
		id      TEXT PRIMARY KEY,
		version INTEGER NOT NULL CHECK (version >= 1),
		state   TEXT NOT NULL,
		host    TEXT NOT NULL,
		data    TEXT NOT NULL -- JSON, see record
	) WITHOUT ROWID;
	CREATE TABLE allocations (
		block_id       TEXT NOT NULL,
		composition_id TEXT NOT NULL REFERENCES compositions (id) ON DELETE CASCADE,
		PRIMARY KEY (block_id, composition_id)
	) WITHOUT ROWID;
	CREATE INDEX allocations_by_composition ON allocations (composition_id);
	CREATE TABLE settings (
		key   TEXT PRIMARY KEY,
		value TEXT NOT NULL
	) WITHOUT ROWID;`,

	// 2: the audit log. AUTOINCREMENT so that an ID is never reused, even
	// after the newest rows were deleted.
	`CREATE TABLE audit (
		id       INTEGER PRIMARY KEY AUTOINCREMENT,
		time     INTEGER NOT NULL, -- nanoseconds since the Unix epoch
		username TEXT NOT NULL,
		tenant   TEXT NOT NULL,
		remote   TEXT NOT NULL,
		method   TEXT NOT NULL,
		target   TEXT NOT NULL,
		action   TEXT NOT NULL,
		outcome  TEXT NOT NULL CHECK (outcome IN ('success', 'failure', 'denied')),
		status   INTEGER NOT NULL,
		detail   TEXT NOT NULL
	);
	CREATE INDEX audit_by_time ON audit (time);`,

	// 3: data-plane objects (memory nodes, memory leases), by kind.
	`CREATE TABLE objects (
		kind TEXT NOT NULL,
		id   TEXT NOT NULL,
		data BLOB NOT NULL,
		PRIMARY KEY (kind, id)
	) WITHOUT ROWID;`,

	// 4: objects get a version, counting their changes, for optimistic
	// checks (accounts, tenants, sessions).
	`ALTER TABLE objects ADD COLUMN version INTEGER NOT NULL DEFAULT 1 CHECK (version >= 1);`,

	// 5: audit entries name their outcome by a registry MessageId.
	`ALTER TABLE audit ADD COLUMN message_id TEXT NOT NULL DEFAULT '';`,
}

// migrate brings the database on conn up to len(migrations), in one
// transaction.
func migrate(ctx context.Context, conn *sql.Conn) (err error) {
	if _, err := conn.ExecContext(ctx, "BEGIN IMMEDIATE"); err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	defer func() {
		if err != nil {
			_, rerr := conn.ExecContext(context.Background(), "ROLLBACK")
			err = errors.Join(err, rerr)
		}
	}()
	if _, err := conn.ExecContext(ctx,
		`CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL)`); err != nil {
		return fmt.Errorf("create schema_version: %w", err)
	}
	var current int
	if err := conn.QueryRowContext(ctx,
		`SELECT COALESCE(MAX(version), 0) FROM schema_version`).Scan(&current); err != nil {
		return fmt.Errorf("read schema version: %w", err)
	}
	if current > len(migrations) {
		return fmt.Errorf("schema version %d is newer than this binary's %d", current, len(migrations))
	}
	for v := current; v < len(migrations); v++ {
		if _, err := conn.ExecContext(ctx, migrations[v]); err != nil {
			return fmt.Errorf("migration %d: %w", v+1, err)
		}
	}
	if current < len(migrations) {
		if _, err := conn.ExecContext(ctx, `DELETE FROM schema_version`); err != nil {
			return fmt.Errorf("clear schema version: %w", err)
		}
		if _, err := conn.ExecContext(ctx,
			`INSERT INTO schema_version (version) VALUES (?)`, len(migrations)); err != nil {
			return fmt.Errorf("record schema version: %w", err)
		}
	}
	if _, err := conn.ExecContext(ctx, "COMMIT"); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	return nil
}
