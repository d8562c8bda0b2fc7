package postgres

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"net"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"rackpool/internal/store"
)

// Change kinds besides the object kinds, in the changes table.
const (
	KindComposition = "composition"
	KindSetting     = "setting"
)

// NotifyChannel is the channel every commit that changes a record notifies.
const NotifyChannel = "rackpool_changes"

// txn is one write: the advisory locks it takes first, the statements it
// queues (each with a callback that checks its outcome), and the changes
// it logs.
type txn struct {
	locks   []int64
	changes [][2]string // kind, id
	queue   func(b *pgx.Batch)
}

// conflict is a failed version check found by a statement's callback; the
// message, with the stored version, is written after the rollback.
type conflict struct {
	kind, verb, id string
	version, want  int64 // the version the plan writes, and expected to find (0: none)
}

func (c *conflict) Error() string { return "version conflict" }

// lockKey is the advisory lock key of a block or an object: 64 bits of FNV-1a
// over a prefix and the name. Two names that collide share a lock, which
// serialises them needlessly but never wrongly.
func lockKey(parts ...string) int64 {
	h := fnv.New64a()
	for _, p := range parts {
		h.Write([]byte(p))
		h.Write([]byte{0})
	}
	return int64(h.Sum64())
}

// write runs t in one transaction. Once the transaction has begun it runs
// to its outcome whatever happens to ctx (bounded by txTimeout): a caller
// that gives up must not leave a commit whose outcome it misreports. A
// commit whose outcome is unknown (the connection broke during COMMIT) is
// resolved by looking for the transaction's token in the change log.
func (s *Store) write(ctx context.Context, t txn) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return store.ErrClosed
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), txTimeout)
	defer cancel()

	slices.Sort(t.locks)
	t.locks = slices.Compact(t.locks)
	token := make([]byte, 16)
	rand.Read(token)

	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return mapErr("connect", err)
	}
	defer conn.Release()
	pid := conn.Conn().PgConn().PID()

	// The whole transaction but COMMIT goes in one pipelined batch: one
	// round trip, whatever the plan holds. A statement's failure makes the
	// server skip the rest; a callback's (a version check) only stops the
	// commit.
	b := &pgx.Batch{}
	b.Queue("BEGIN")
	if f := s.fence.Load(); f != nil {
		b.Queue(`SELECT epoch FROM fence WHERE name = $1 FOR SHARE`, f.name).QueryRow(func(row pgx.Row) error {
			return checkFence(row, f)
		})
	}
	if len(t.locks) > 0 {
		// unnest yields the keys in array order, so every transaction takes
		// its locks in ascending order: no deadlock among them.
		b.Queue(`SELECT pg_advisory_xact_lock(k) FROM unnest($1::bigint[]) AS k`, t.locks)
	}
	t.queue(b)
	if len(t.changes) > 0 {
		kinds := make([]string, len(t.changes))
		ids := make([]string, len(t.changes))
		for i, c := range t.changes {
			kinds[i], ids[i] = c[0], c[1]
		}
		b.Queue(`INSERT INTO changes (kind, id, token, origin) SELECT k, i, $3, $4 FROM unnest($1::text[], $2::text[]) AS u(k, i)`,
			kinds, ids, token, s.origin)
		b.Queue(`SELECT pg_notify($1, $2)`, NotifyChannel, hex.EncodeToString(s.origin))
	}
	if err := conn.SendBatch(ctx, b).Close(); err != nil {
		if _, rerr := conn.Exec(ctx, "ROLLBACK"); rerr != nil {
			conn.Conn().Close(ctx) // in an unknown state: not back to the pool
		}
		var c *conflict
		if errors.As(err, &c) {
			return s.explain(ctx, c)
		}
		return mapErr("", err)
	}
	_, err = conn.Exec(ctx, "COMMIT")
	if err == nil {
		return nil
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return mapErr("commit", err)
	}
	if len(t.changes) == 0 {
		// Nothing to look for (an audit entry alone): the outcome stays
		// unknown, and is not reported as "nothing changed".
		return fmt.Errorf("store: commit outcome unknown: %w", err)
	}
	// The connection failed during COMMIT: the server may or may not have
	// committed. Find out before answering.
	return s.resolve(ctx, pid, token, err)
}

// explain turns a failed version check into store.ErrConflict with the
// version stored now.
func (s *Store) explain(ctx context.Context, c *conflict) error {
	var stored int64
	var err error
	if c.kind == KindComposition {
		err = s.pool.QueryRow(ctx, `SELECT COALESCE((SELECT version FROM compositions WHERE id = $1), 0)`, c.id).Scan(&stored)
	} else {
		err = s.pool.QueryRow(ctx, `SELECT COALESCE((SELECT version FROM objects WHERE kind = $1 AND id = $2), 0)`, c.kind, c.id).Scan(&stored)
	}
	if err != nil {
		return fmt.Errorf("%s %s %s: %w (reading its version: %v)", c.verb, c.kind, c.id, store.ErrConflict, err)
	}
	if c.kind != KindComposition {
		return fmt.Errorf("%s %s %s: stored at version %d, the plan expects %d: %w", c.verb, c.kind, c.id, stored, c.want, store.ErrConflict)
	}
	switch {
	case stored == 0:
		return fmt.Errorf("%s composition %s version %d: not stored: %w", c.verb, c.id, c.version, store.ErrConflict)
	case c.want == 0:
		return fmt.Errorf("%s composition %s version %d: already stored at version %d: %w",
			c.verb, c.id, c.version, stored, store.ErrConflict)
	default:
		return fmt.Errorf("%s composition %s version %d: stored at version %d, want %d: %w",
			c.verb, c.id, c.version, stored, c.want, store.ErrConflict)
	}
}

// resolve decides an in-doubt commit: it ends the backend that ran it (or
// waits for it to be gone) and then looks for the transaction's token in
// the change log. It answers nil if the transaction committed, and the
// commit's error, marked as not applied and wrapping store.ErrUnavailable,
// otherwise.
func (s *Store) resolve(ctx context.Context, pid uint32, token []byte, commitErr error) error {
	for delay := 50 * time.Millisecond; ; delay = min(2*delay, time.Second) {
		var committed bool
		err := func() error {
			conn, err := s.pool.Acquire(ctx)
			if err != nil {
				return err
			}
			defer conn.Release()
			var alive bool
			if err := conn.QueryRow(ctx, `SELECT pg_terminate_backend($1) OR
				EXISTS (SELECT 1 FROM pg_stat_activity WHERE pid = $1)`, int32(pid)).Scan(&alive); err != nil {
				return err
			}
			if alive {
				return errors.New("the backend is still running")
			}
			return conn.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM changes WHERE token = $1)`, token).Scan(&committed)
		}()
		if err == nil {
			if committed {
				return nil
			}
			// The connection broke before COMMIT took effect: nothing
			// changed, as ErrUnavailable promises, so a caller retries
			// (a workflow marks itself for RetryStuck) instead of taking
			// it for a failure of its own.
			return fmt.Errorf("store: commit failed, nothing applied: %w: %w", commitErr, store.ErrUnavailable)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("store: commit outcome unknown after %s (%v): %w", txTimeout, err, commitErr)
		case <-time.After(delay):
		}
	}
}

// mapErr turns PostgreSQL's serialization failures and deadlocks into
// store.ErrConflict (re-read and retry), a server that cannot be reached
// or is shutting down into store.ErrUnavailable, and wraps other errors.
// It is used before COMMIT only: there a failure changed nothing.
func mapErr(what string, err error) error {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch {
		case pgErr.Code == "40001", pgErr.Code == "40P01":
			return fmt.Errorf("store: %s: %s: %w", what, pgErr.Message, store.ErrConflict)
		case strings.HasPrefix(pgErr.Code, "08"), strings.HasPrefix(pgErr.Code, "57P"):
			// Connection exceptions; admin shutdown, crash shutdown,
			// cannot connect now.
			return fmt.Errorf("store: %s: %s: %w", what, pgErr.Message, store.ErrUnavailable)
		}
	} else if unreachable(err) {
		return fmt.Errorf("store: %s: %v: %w", what, err, store.ErrUnavailable)
	}
	if what == "" {
		return err
	}
	return fmt.Errorf("store: %s: %w", what, err)
}

// unreachable reports whether err is a failure to reach the server (no
// answer, a broken connection) rather than an answer.
func unreachable(err error) bool {
	var (
		netErr  net.Error
		connErr *pgconn.ConnectError
	)
	return errors.As(err, &netErr) || errors.As(err, &connErr) || errors.Is(err, io.EOF) ||
		errors.Is(err, io.ErrUnexpectedEOF) || pgconn.SafeToRetry(err)
}

// Apply commits p atomically and durably, as store.Store documents, in one
// transaction: deletions, puts, block limits, checks, objects, audit
// entries, and the change log. Intents are committed as durably as any
// plan (see doc.go).
func (s *Store) Apply(ctx context.Context, p store.Plan) error {
	pp, err := store.PrepareApply(ctx, s.isClosed(), p)
	if err != nil || pp == nil {
		return err
	}
	t := txn{queue: func(b *pgx.Batch) { queuePlan(b, pp) }}
	for _, op := range pp.Puts {
		for _, b := range op.Blocks {
			t.locks = append(t.locks, lockKey("block", b))
		}
		t.changes = append(t.changes, [2]string{KindComposition, op.ID})
	}
	for _, d := range pp.Deletes {
		t.changes = append(t.changes, [2]string{KindComposition, d.ID})
	}
	for _, c := range pp.Checks {
		t.locks = append(t.locks, lockKey("object", c.Kind, c.ID))
	}
	for _, o := range pp.Objects {
		t.locks = append(t.locks, lockKey("object", o.Kind, o.Object.ID))
		t.changes = append(t.changes, [2]string{o.Kind, o.Object.ID})
	}
	return s.write(ctx, t)
}

// PutSetting stores value under key, replacing any previous value, durably.
func (s *Store) PutSetting(ctx context.Context, key, value string) error {
	return s.write(ctx, txn{changes: [][2]string{{KindSetting, key}}, queue: func(b *pgx.Batch) {
		b.Queue(`INSERT INTO settings (key, value) VALUES ($1, $2)
			ON CONFLICT (key) DO UPDATE SET value = excluded.value`, key, []byte(value))
	}})
}

// PutObject stores o under kind, durably, replacing any object with its ID.
func (s *Store) PutObject(ctx context.Context, kind string, o store.Object) error {
	if kind == "" || o.ID == "" {
		return errors.New("put object: kind and ID are required")
	}
	o.Data = append([]byte{}, o.Data...)
	return s.write(ctx, txn{
		locks:   []int64{lockKey("object", kind, o.ID)},
		changes: [][2]string{{kind, o.ID}},
		queue: func(b *pgx.Batch) {
			queueObject(b, store.ObjectChange{Kind: kind, Object: store.Object{ID: o.ID, Data: o.Data}})
		},
	})
}

// DeleteObject removes the object of kind with id, durably.
func (s *Store) DeleteObject(ctx context.Context, kind, id string) error {
	return s.write(ctx, txn{
		locks:   []int64{lockKey("object", kind, id)},
		changes: [][2]string{{kind, id}},
		queue: func(b *pgx.Batch) {
			queueObject(b, store.ObjectChange{Kind: kind, Object: store.Object{ID: id}, Delete: true})
		},
	})
}

// rowsAffected returns a callback that fails with c unless a statement
// changed exactly one row.
func rowsAffected(c *conflict) func(pgconn.CommandTag) error {
	return func(tag pgconn.CommandTag) error {
		if tag.RowsAffected() != 1 {
			return c
		}
		return nil
	}
}

// queuePlan queues pp's statements. Every block a put holds is locked
// (write queued the advisory locks first), so counting a block's holders
// sees every transaction that added it and committed before.
func queuePlan(b *pgx.Batch, pp *store.PreparedPlan) {
	for _, d := range pp.Deletes {
		b.Queue(`DELETE FROM compositions WHERE id = $1 AND version = $2`, d.ID, d.Version).
			Exec(rowsAffected(&conflict{kind: KindComposition, verb: "delete", id: d.ID, version: d.Version, want: d.Version}))
	}
	type allocation struct{ block, comp string }
	var (
		added []allocation
		all   []string
	)
	for i := range pp.Puts {
		op := &pp.Puts[i]
		if op.Version == 1 {
			b.Queue(`INSERT INTO compositions (id, version, state, host, data) VALUES ($1, 1, $2, $3, $4)
				ON CONFLICT (id) DO NOTHING`, op.ID, op.State, op.Host, op.Data).
				Exec(rowsAffected(&conflict{kind: KindComposition, verb: "put", id: op.ID, version: 1}))
		} else {
			b.Queue(`UPDATE compositions SET version = $1, state = $2, host = $3, data = $4
				WHERE id = $5 AND version = $6`, op.Version, op.State, op.Host, op.Data, op.ID, op.Version-1).
				Exec(rowsAffected(&conflict{kind: KindComposition, verb: "put", id: op.ID, version: op.Version, want: op.Version - 1}))
			// Release what the new version no longer holds.
			b.Queue(`DELETE FROM allocations WHERE composition_id = $1 AND NOT (block_id = ANY($2::text[]))`, op.ID, op.Blocks)
		}
		// Hold what it newly holds; RETURNING names those blocks.
		id := op.ID
		b.Queue(`INSERT INTO allocations (block_id, composition_id) SELECT b, $2 FROM unnest($1::text[]) AS b
			ON CONFLICT DO NOTHING RETURNING block_id`, op.Blocks, op.ID).Query(func(rows pgx.Rows) error {
			fresh, err := pgx.CollectRows(rows, pgx.RowTo[string])
			for _, blk := range fresh {
				added = append(added, allocation{blk, id})
			}
			return err
		})
		all = append(all, op.Blocks...)
	}
	if len(all) > 0 {
		b.Queue(`SELECT block_id, COUNT(*) FROM allocations WHERE block_id = ANY($1::text[]) GROUP BY block_id`, all).
			Query(func(rows pgx.Rows) error {
				counts := map[string]int{}
				var (
					blk string
					n   int
				)
				if _, err := pgx.ForEachRow(rows, []any{&blk, &n}, func() error { counts[blk] = n; return nil }); err != nil {
					return fmt.Errorf("count compositions of blocks: %w", err)
				}
				for _, a := range added {
					if n, lim := counts[a.block], pp.Limit(a.block); n > lim {
						return fmt.Errorf("put composition %s: block %s would be in %d compositions, limit %d: %w",
							a.comp, a.block, n, lim, store.ErrConflict)
					}
				}
				return nil
			})
	}
	for _, c := range pp.Checks {
		b.Queue(`SELECT COALESCE((SELECT version FROM objects WHERE kind = $1 AND id = $2), 0)`, c.Kind, c.ID).
			QueryRow(func(row pgx.Row) error {
				var v int64
				if err := row.Scan(&v); err != nil {
					return fmt.Errorf("read version of %s %s: %w", c.Kind, c.ID, err)
				}
				if v != c.Version {
					return fmt.Errorf("%s %s is at version %d, the plan expects %d: %w", c.Kind, c.ID, v, c.Version, store.ErrConflict)
				}
				return nil
			})
	}
	for _, o := range pp.Objects {
		queueObject(b, o)
	}
	for _, e := range pp.Audit {
		queueAudit(b, e, nil)
	}
}

// queueObject queues one ObjectChange, as store.ObjectChange documents.
func queueObject(b *pgx.Batch, o store.ObjectChange) {
	kind, ob := o.Kind, o.Object
	switch {
	case o.Delete && ob.Version == 0:
		b.Queue(`DELETE FROM objects WHERE kind = $1 AND id = $2`, kind, ob.ID)
	case o.Delete:
		b.Queue(`DELETE FROM objects WHERE kind = $1 AND id = $2 AND version = $3`, kind, ob.ID, ob.Version).
			Exec(rowsAffected(&conflict{kind: kind, verb: "delete", id: ob.ID, version: ob.Version, want: ob.Version}))
	case ob.Version == 0:
		b.Queue(`INSERT INTO objects (kind, id, data) VALUES ($1, $2, $3)
			ON CONFLICT (kind, id) DO UPDATE SET data = excluded.data, version = objects.version + 1`, kind, ob.ID, ob.Data)
	case ob.Version == 1:
		b.Queue(`INSERT INTO objects (kind, id, data, version) VALUES ($1, $2, $3, 1)
			ON CONFLICT (kind, id) DO NOTHING`, kind, ob.ID, ob.Data).
			Exec(rowsAffected(&conflict{kind: kind, verb: "create", id: ob.ID, version: 1}))
	default:
		b.Queue(`UPDATE objects SET data = $1, version = $2 WHERE kind = $3 AND id = $4 AND version = $5`,
			ob.Data, ob.Version, kind, ob.ID, ob.Version-1).
			Exec(rowsAffected(&conflict{kind: kind, verb: "update", id: ob.ID, version: ob.Version, want: ob.Version - 1}))
	}
}
