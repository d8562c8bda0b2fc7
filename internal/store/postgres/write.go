package postgres

import (
	"context"
	"crypto/rand"
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

// txn is one write: the advisory locks it takes first, what it does, and the
// changes it logs.
type txn struct {
	locks   []int64
	changes [][2]string // kind, id
	do      func(ctx context.Context, tx pgx.Tx) error
}

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
	tx, err := conn.Begin(ctx)
	if err != nil {
		return mapErr("begin", err)
	}
	defer tx.Rollback(context.Background())
	if f := s.fence.Load(); f != nil {
		if err := checkFence(ctx, tx, f); err != nil {
			return err
		}
	}
	if len(t.locks) > 0 {
		// unnest yields the keys in array order, so every transaction takes
		// its locks in ascending order: no deadlock among them.
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(k) FROM unnest($1::bigint[]) AS k`, t.locks); err != nil {
			return mapErr("lock", err)
		}
	}
	if err := t.do(ctx, tx); err != nil {
		return mapErr("", err)
	}
	if len(t.changes) > 0 {
		kinds := make([]string, len(t.changes))
		ids := make([]string, len(t.changes))
		for i, c := range t.changes {
			kinds[i], ids[i] = c[0], c[1]
		}
		if _, err := tx.Exec(ctx, `INSERT INTO changes (kind, id, token) SELECT k, i, $3 FROM unnest($1::text[], $2::text[]) AS u(k, i)`,
			kinds, ids, token); err != nil {
			return mapErr("log changes", err)
		}
		if _, err := tx.Exec(ctx, `SELECT pg_notify($1, '')`, NotifyChannel); err != nil {
			return mapErr("notify", err)
		}
	}
	err = tx.Commit(ctx)
	if err == nil {
		return nil
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) || len(t.changes) == 0 {
		return mapErr("commit", err)
	}
	// The connection failed during COMMIT: the server may or may not have
	// committed. Find out before answering.
	return s.resolve(ctx, pid, token, err)
}

// resolve decides an in-doubt commit: it ends the backend that ran it (or
// waits for it to be gone) and then looks for the transaction's token in
// the change log. It answers nil if the transaction committed, and the
// commit's error, marked as not applied, otherwise.
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
			return fmt.Errorf("store: commit failed, nothing applied: %w", commitErr)
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
	if err := ctx.Err(); err != nil {
		return err
	}
	if s.isClosed() {
		return store.ErrClosed
	}
	pp, err := store.Prepare(p)
	if err != nil {
		return err
	}
	if pp.Empty() {
		return nil
	}
	t := txn{do: func(ctx context.Context, tx pgx.Tx) error { return applyPlan(ctx, tx, pp) }}
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
	return s.write(ctx, txn{changes: [][2]string{{KindSetting, key}}, do: func(ctx context.Context, tx pgx.Tx) error {
		_, err := tx.Exec(ctx, `INSERT INTO settings (key, value) VALUES ($1, $2)
			ON CONFLICT (key) DO UPDATE SET value = excluded.value`, key, []byte(value))
		if err != nil {
			return fmt.Errorf("put setting %s: %w", key, err)
		}
		return nil
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
		do: func(ctx context.Context, tx pgx.Tx) error {
			return changeObject(ctx, tx, store.ObjectChange{Kind: kind, Object: store.Object{ID: o.ID, Data: o.Data}})
		},
	})
}

// DeleteObject removes the object of kind with id, durably.
func (s *Store) DeleteObject(ctx context.Context, kind, id string) error {
	return s.write(ctx, txn{
		locks:   []int64{lockKey("object", kind, id)},
		changes: [][2]string{{kind, id}},
		do: func(ctx context.Context, tx pgx.Tx) error {
			return changeObject(ctx, tx, store.ObjectChange{Kind: kind, Object: store.Object{ID: id}, Delete: true})
		},
	})
}

// applyPlan runs pp's statements inside tx. Every block a put holds is
// locked (write took the advisory locks), so counting a block's holders
// sees every transaction that added it and committed before.
func applyPlan(ctx context.Context, tx pgx.Tx, pp *store.PreparedPlan) error {
	for _, d := range pp.Deletes {
		tag, err := tx.Exec(ctx, `DELETE FROM compositions WHERE id = $1 AND version = $2`, d.ID, d.Version)
		if err != nil {
			return fmt.Errorf("delete composition %s: %w", d.ID, err)
		}
		if tag.RowsAffected() == 0 {
			return versionConflict(ctx, tx, "delete", d.ID, d.Version, d.Version)
		}
	}
	type allocation struct{ block, comp string }
	var added []allocation
	for i := range pp.Puts {
		op := &pp.Puts[i]
		var fresh []string
		if op.Version == 1 {
			tag, err := tx.Exec(ctx, `INSERT INTO compositions (id, version, state, host, data) VALUES ($1, 1, $2, $3, $4)
				ON CONFLICT (id) DO NOTHING`, op.ID, op.State, op.Host, op.Data)
			if err != nil {
				return fmt.Errorf("insert composition %s: %w", op.ID, err)
			}
			if tag.RowsAffected() == 0 {
				return versionConflict(ctx, tx, "put", op.ID, op.Version, 0)
			}
			fresh = op.Blocks
		} else {
			tag, err := tx.Exec(ctx, `UPDATE compositions SET version = $1, state = $2, host = $3, data = $4
				WHERE id = $5 AND version = $6`, op.Version, op.State, op.Host, op.Data, op.ID, op.Version-1)
			if err != nil {
				return fmt.Errorf("update composition %s: %w", op.ID, err)
			}
			if tag.RowsAffected() == 0 {
				return versionConflict(ctx, tx, "put", op.ID, op.Version, op.Version-1)
			}
			// Release what the new version no longer holds; add what it
			// newly holds.
			if _, err := tx.Exec(ctx, `DELETE FROM allocations WHERE composition_id = $1 AND NOT (block_id = ANY($2::text[]))`,
				op.ID, op.Blocks); err != nil {
				return fmt.Errorf("release blocks of composition %s: %w", op.ID, err)
			}
			rows, err := tx.Query(ctx, `SELECT b FROM unnest($2::text[]) AS b
				WHERE NOT EXISTS (SELECT 1 FROM allocations WHERE composition_id = $1 AND block_id = b)`, op.ID, op.Blocks)
			if err != nil {
				return fmt.Errorf("read blocks of composition %s: %w", op.ID, err)
			}
			fresh, err = pgx.CollectRows(rows, pgx.RowTo[string])
			if err != nil {
				return fmt.Errorf("read blocks of composition %s: %w", op.ID, err)
			}
		}
		if len(fresh) > 0 {
			if _, err := tx.Exec(ctx, `INSERT INTO allocations (block_id, composition_id) SELECT b, $2 FROM unnest($1::text[]) AS b`,
				fresh, op.ID); err != nil {
				return fmt.Errorf("allocate blocks to composition %s: %w", op.ID, err)
			}
		}
		for _, b := range fresh {
			added = append(added, allocation{b, op.ID})
		}
	}
	if len(added) > 0 {
		blocks := make([]string, 0, len(added))
		for _, a := range added {
			blocks = append(blocks, a.block)
		}
		rows, err := tx.Query(ctx, `SELECT block_id, COUNT(*) FROM allocations WHERE block_id = ANY($1::text[]) GROUP BY block_id`, blocks)
		if err != nil {
			return fmt.Errorf("count compositions of blocks: %w", err)
		}
		counts := map[string]int{}
		var (
			b string
			n int
		)
		_, err = pgx.ForEachRow(rows, []any{&b, &n}, func() error { counts[b] = n; return nil })
		if err != nil {
			return fmt.Errorf("count compositions of blocks: %w", err)
		}
		for _, a := range added {
			if n, lim := counts[a.block], pp.Limit(a.block); n > lim {
				return fmt.Errorf("put composition %s: block %s would be in %d compositions, limit %d: %w",
					a.comp, a.block, n, lim, store.ErrConflict)
			}
		}
	}
	for _, c := range pp.Checks {
		v, err := objectVersion(ctx, tx, c.Kind, c.ID)
		if err != nil {
			return err
		}
		if v != c.Version {
			return fmt.Errorf("%s %s is at version %d, the plan expects %d: %w", c.Kind, c.ID, v, c.Version, store.ErrConflict)
		}
	}
	for _, o := range pp.Objects {
		if err := changeObject(ctx, tx, o); err != nil {
			return err
		}
	}
	for _, e := range pp.Audit {
		if _, err := insertAudit(ctx, tx, e); err != nil {
			return err
		}
	}
	return nil
}

// versionConflict explains why a put or delete of id matched no row, as
// ErrConflict with the stored version. want is the version the plan
// expected to find stored (0: none).
func versionConflict(ctx context.Context, tx pgx.Tx, verb, id string, version, want int64) error {
	var stored int64
	switch err := tx.QueryRow(ctx, `SELECT version FROM compositions WHERE id = $1`, id).Scan(&stored); {
	case errors.Is(err, pgx.ErrNoRows):
		stored = 0
	case err != nil:
		return fmt.Errorf("%s composition %s: read version: %w", verb, id, err)
	}
	switch {
	case stored == 0:
		return fmt.Errorf("%s composition %s version %d: not stored: %w", verb, id, version, store.ErrConflict)
	case want == 0:
		return fmt.Errorf("%s composition %s version %d: already stored at version %d: %w",
			verb, id, version, stored, store.ErrConflict)
	default:
		return fmt.Errorf("%s composition %s version %d: stored at version %d, want %d: %w",
			verb, id, version, stored, want, store.ErrConflict)
	}
}

// objectVersion returns the stored version of an object, 0 if absent.
func objectVersion(ctx context.Context, tx pgx.Tx, kind, id string) (int64, error) {
	var v int64
	switch err := tx.QueryRow(ctx, `SELECT version FROM objects WHERE kind = $1 AND id = $2`, kind, id).Scan(&v); {
	case errors.Is(err, pgx.ErrNoRows):
		return 0, nil
	case err != nil:
		return 0, fmt.Errorf("read version of %s %s: %w", kind, id, err)
	}
	return v, nil
}

// changeObject applies one ObjectChange inside tx, as store.ObjectChange
// documents.
func changeObject(ctx context.Context, tx pgx.Tx, o store.ObjectChange) error {
	kind, ob := o.Kind, o.Object
	var (
		tag  pgconn.CommandTag
		err  error
		verb string
		want int64
	)
	switch {
	case o.Delete && ob.Version == 0:
		if _, err := tx.Exec(ctx, `DELETE FROM objects WHERE kind = $1 AND id = $2`, kind, ob.ID); err != nil {
			return fmt.Errorf("delete %s %s: %w", kind, ob.ID, err)
		}
		return nil
	case o.Delete:
		verb, want = "delete", ob.Version
		tag, err = tx.Exec(ctx, `DELETE FROM objects WHERE kind = $1 AND id = $2 AND version = $3`, kind, ob.ID, ob.Version)
	case ob.Version == 0:
		if _, err := tx.Exec(ctx, `INSERT INTO objects (kind, id, data) VALUES ($1, $2, $3)
			ON CONFLICT (kind, id) DO UPDATE SET data = excluded.data, version = objects.version + 1`, kind, ob.ID, ob.Data); err != nil {
			return fmt.Errorf("put %s %s: %w", kind, ob.ID, err)
		}
		return nil
	case ob.Version == 1:
		verb, want = "create", 0
		tag, err = tx.Exec(ctx, `INSERT INTO objects (kind, id, data, version) VALUES ($1, $2, $3, 1)
			ON CONFLICT (kind, id) DO NOTHING`, kind, ob.ID, ob.Data)
	default:
		verb, want = "update", ob.Version-1
		tag, err = tx.Exec(ctx, `UPDATE objects SET data = $1, version = $2 WHERE kind = $3 AND id = $4 AND version = $5`,
			ob.Data, ob.Version, kind, ob.ID, ob.Version-1)
	}
	if err != nil {
		return fmt.Errorf("%s %s %s: %w", verb, kind, ob.ID, err)
	}
	if tag.RowsAffected() == 1 {
		return nil
	}
	v, err := objectVersion(ctx, tx, kind, ob.ID)
	if err != nil {
		return err
	}
	return fmt.Errorf("%s %s %s: stored at version %d, the plan expects %d: %w", verb, kind, ob.ID, v, want, store.ErrConflict)
}
