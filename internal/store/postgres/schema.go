package postgres

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// migrations are applied in order; migrations[i] brings the schema from
// version i to version i+1. Never edit a released migration: append a new
// one. Identifiers are COLLATE "C" so that ORDER BY id is byte order, as
// in the SQLite backend, whatever the database's locale.
var migrations = []string{
	// 1: everything the SQLite backend holds after its fourth migration,
	// plus the change log replicas follow.
	`CREATE TABLE compositions (
		id      text COLLATE "C" PRIMARY KEY,
		version bigint NOT NULL CHECK (version >= 1),
		state   text NOT NULL,
		host    text NOT NULL,
		data    bytea NOT NULL -- JSON, store.EncodeComposition
	);
	CREATE TABLE allocations (
		block_id       text COLLATE "C" NOT NULL,
		composition_id text COLLATE "C" NOT NULL REFERENCES compositions (id) ON DELETE CASCADE,
		PRIMARY KEY (block_id, composition_id)
	);
	CREATE INDEX allocations_by_composition ON allocations (composition_id);
	CREATE TABLE settings (
		key   text COLLATE "C" PRIMARY KEY,
		value bytea NOT NULL -- any bytes: text cannot hold NUL
	);
	CREATE TABLE audit (
		id       bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
		time     bigint NOT NULL, -- nanoseconds since the Unix epoch
		username text NOT NULL,
		tenant   text NOT NULL,
		remote   text NOT NULL,
		method   text NOT NULL,
		target   text NOT NULL,
		action   text NOT NULL,
		outcome  text NOT NULL CHECK (outcome IN ('success', 'failure', 'denied')),
		status   integer NOT NULL,
		detail   text NOT NULL
	);
	CREATE INDEX audit_by_time ON audit (time);
	CREATE TABLE objects (
		kind    text COLLATE "C" NOT NULL,
		id      text COLLATE "C" NOT NULL,
		data    bytea NOT NULL,
		version bigint NOT NULL DEFAULT 1 CHECK (version >= 1),
		PRIMARY KEY (kind, id)
	);
	CREATE TABLE changes (
		seq   bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
		kind  text NOT NULL, -- "composition", "setting" or an object kind
		id    text NOT NULL,
		token bytea NOT NULL, -- the committing transaction's, see resolve
		at    timestamptz NOT NULL DEFAULT now()
	);
	CREATE INDEX changes_by_token ON changes (token);`,

	// 2: leadership epochs (Lead), checked by every write of a leader.
	`CREATE TABLE fence (
		name  text COLLATE "C" PRIMARY KEY,
		epoch bigint NOT NULL CHECK (epoch >= 1)
	);`,

	// 3: which store (replica) committed a change, so that a replica
	// following the log skips its own.
	`ALTER TABLE changes ADD COLUMN origin bytea NOT NULL DEFAULT ''::bytea;`,

	// 4: audit entries name their outcome by a registry MessageId.
	`ALTER TABLE audit ADD COLUMN message_id text NOT NULL DEFAULT '';`,

	// 5: the event log active replicas share (events.go). Its sequence
	// numbers are the events' IDs; they start at the time of the
	// migration in microseconds, where a replica serving alone starts
	// its own, so that IDs keep growing when a database goes from one
	// replica to several.
	`CREATE TABLE events (
		seq     bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
		replica text COLLATE "C" NOT NULL, -- the tag of the replica that published it
		num     bigint NOT NULL,           -- its number at that replica
		data    bytea NOT NULL,            -- JSON
		at      timestamptz NOT NULL DEFAULT now(),
		UNIQUE (replica, num)
	);
	CREATE INDEX events_by_time ON events (at);
	SELECT setval(pg_get_serial_sequence('events', 'seq'), (extract(epoch FROM clock_timestamp()) * 1000000)::bigint);`,
}

// migrationLock is the advisory lock key replicas starting together take,
// so that one of them migrates and the others wait and find it done.
const migrationLock = 0x7261636b706f6f6c // "rackpool"

// migrate brings the database up to len(migrations) in one transaction, or
// refuses a schema newer than this binary's.
func migrate(ctx context.Context, conn *pgx.Conn) error {
	tx, err := conn.Begin(ctx)
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, int64(migrationLock)); err != nil {
		return fmt.Errorf("lock: %w", err)
	}
	if _, err := tx.Exec(ctx, `CREATE TABLE IF NOT EXISTS schema_version (version integer NOT NULL)`); err != nil {
		return fmt.Errorf("create schema_version: %w", err)
	}
	var current int
	if err := tx.QueryRow(ctx, `SELECT COALESCE(MAX(version), 0) FROM schema_version`).Scan(&current); err != nil {
		return fmt.Errorf("read schema version: %w", err)
	}
	if current > len(migrations) {
		return fmt.Errorf("%w: the database's schema is version %d, this binary knows %d: run the newer rackpool, or restore a backup taken before the upgrade",
			ErrNewerSchema, current, len(migrations))
	}
	if current == len(migrations) {
		return nil
	}
	for v := current; v < len(migrations); v++ {
		if _, err := tx.Exec(ctx, migrations[v]); err != nil {
			return fmt.Errorf("migration %d: %w", v+1, err)
		}
	}
	if _, err := tx.Exec(ctx, `DELETE FROM schema_version`); err != nil {
		return fmt.Errorf("clear schema version: %w", err)
	}
	if _, err := tx.Exec(ctx, `INSERT INTO schema_version (version) VALUES ($1)`, len(migrations)); err != nil {
		return fmt.Errorf("record schema version: %w", err)
	}
	return tx.Commit(ctx)
}
