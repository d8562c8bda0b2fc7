// Package postgres is the store.Store for several control-plane replicas
// on one PostgreSQL database (`serve --store postgres://…`), through pgx.
// It passes the same conformance suite as the embedded SQLite backend
// (storetest) and adds a change log that replicas follow.
//
// # Schema
//
// Migrations in schema.go run in one transaction at Open, under an
// advisory lock so that replicas starting together migrate once;
// schema_version records how many have run, and Open refuses a database
// migrated by a newer binary. The tables are those of the SQLite backend
// (compositions, allocations, settings, audit, objects; identifiers
// COLLATE "C", so ORDER BY id is byte order) plus
//
//	changes (seq identity PK, kind, id, token, at)
//	    one row per record a transaction changed: a composition (kind
//	    "composition"), a setting ("setting") or an object (its kind);
//	    token is the transaction's random token (see In-doubt commits).
//	events (seq identity PK, replica, num, data, at)
//	    the event log active replicas share (events.go): every replica's
//	    events in one order, seq their IDs; (replica, num) is unique, so
//	    a retried append adds nothing twice.
//
// # Concurrency
//
// Every write is one READ COMMITTED transaction. Optimistic versions are
// checked by the statements themselves (UPDATE … WHERE version = n-1,
// INSERT … ON CONFLICT DO NOTHING), which PostgreSQL's row locks make
// exact under concurrency. Block limits and object checks need more: two
// transactions adding the same block to two compositions insert different
// rows, and each would count only its own. So a transaction first takes a
// transaction-scoped advisory lock for every block its compositions hold
// and every object it checks or changes (64-bit FNV-1a keys, in ascending
// order so that no two transactions deadlock on them); a statement that
// counts a block's holders then sees every committed transaction that held
// the lock before. Serialization failures and deadlocks detected by the
// server answer store.ErrConflict.
//
// # Durability
//
// Every commit is synchronous (synchronous_commit=on is set on each
// connection): once Apply, PutSetting or AppendAudit returns nil the change
// survives a crash of the database server too. Intents are committed the
// same way. SQLite may hold an intent back from the disk because only its
// own process can act on it; with several replicas, a replica outlives a
// database crash, and an intent lost there would leave an attachment no
// record names while its replica carries on.
//
// # In-doubt commits
//
// A transaction begun runs to its outcome whatever happens to the
// caller's context (bounded by 30 s), as the SQLite writer does. When the
// connection breaks during COMMIT, the outcome is unknown to the client:
// the store then terminates the backend that ran the transaction (or
// waits until it is gone) and looks for the transaction's token in the
// change log, answering nil if it committed and an error otherwise. An
// acknowledged change is thus always committed, and a refused one never
// is.
//
// # Credentials
//
// rackpool never connects without credentials: the URL must name a user,
// and a password must come from the URL, PGPASSWORD or a password file.
// Errors and logs show the URL with its password redacted.
package postgres
