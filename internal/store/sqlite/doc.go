// Package sqlite is rackpool's embedded default store.Store: one SQLite file,
// dir/rackpool.db, driven through modernc.org/sqlite (pure Go, no cgo).
//
// # Schema
//
// Migrations in schema.go run in order inside one transaction at Open; the
// schema_version table records how many have been applied, and Open refuses a
// database written by a newer binary. Version 1 creates:
//
//	compositions (id PK, version, state, host, data)
//	    data is the whole composition as JSON (see record); times are stored
//	    in UTC with nanoseconds. version is only in its column.
//	allocations (block_id, composition_id, PK (block_id, composition_id))
//	    one row per block a composition holds: Blocks ∪ Adding. The
//	    composition_id foreign key cascades on delete; an index on it serves
//	    the per-composition lookups. Block limits are COUNT(*) over the
//	    primary key's block_id prefix.
//	settings (key PK, value)
//
// These tables are WITHOUT ROWID: every lookup is by primary key. Version 2
// adds the audit log:
//
//	audit (id INTEGER PK AUTOINCREMENT, time, username, tenant, remote,
//	       method, target, action, outcome, status, detail)
//	    time is nanoseconds since the Unix epoch, indexed for time-range
//	    queries; outcome is checked to be success, failure or denied.
//	    AUTOINCREMENT keeps IDs increasing even if the newest rows are
//	    ever deleted. Rows are only inserted, never updated.
//
// # Durability
//
// The file is in WAL mode with synchronous=FULL, so every COMMIT fsyncs the
// WAL before it returns: once Apply, PutSetting or AppendAudit has
// returned nil, the change survives kill -9 and power loss (to the extent
// the disk honours fsync). Foreign keys are on and busy_timeout is 5 s on every connection.
//
// A batch made only of intents (store.Plan.Intent) is committed with
// synchronous=NORMAL instead: its frames are written to the WAL (so it
// survives kill -9, which loses no write the kernel has accepted) but not
// fsynced. The WAL is appended in commit order and the next FULL commit's
// fsync covers every frame before it, so an intent is durable no later than
// the next durable commit, as the interface requires. The writer switches
// the pragma only when a batch's kind differs from the last one's.
//
// A plan's audit entries (store.Plan.Audit) are inserted inside the plan's
// savepoint, after its checks pass, so they are committed with it or not
// at all.
// SQLite's automatic checkpoint (every 1000 WAL pages) runs on the writer
// connection right after a commit.
//
// # Group commit
//
// One writer goroutine owns the only write connection. Apply checks and
// encodes the plan on the caller's goroutine, then queues it and waits.
// The writer takes everything queued (up to 256 requests) and runs them in a
// single BEGIN IMMEDIATE transaction, each inside its own SAVEPOINT: a plan
// that fails a version or limit check is rolled back to its savepoint alone
// and answered with its own ErrConflict, while the others go on. One COMMIT,
// one fsync, then every waiter gets its answer. Under load the batch grows
// by itself (requests pile up while a commit is being fsynced), so
// throughput scales with concurrency while an idle store commits each plan
// at once; no timer delays a commit.
//
// A caller whose context ends while its plan is still queued gets the
// context's error and the plan is skipped; once the writer has taken a plan,
// Apply waits for and reports its real outcome, so an acknowledged plan is
// always committed and a failed one never is.
//
// AppendAudit goes through the same writer, so an audit entry costs no
// fsync of its own under load: it shares the batch's COMMIT.
//
// Reads (Compositions, Setting, Audit, AuditCount) use a separate pool of
// query-only connections, which WAL lets run beside the writer; each read
// sees the last commit made before it started.
//
// Close stops accepting work, lets a batch already in progress commit,
// answers anything still queued with store.ErrClosed and closes the
// connections; after it every method returns store.ErrClosed.
package sqlite
