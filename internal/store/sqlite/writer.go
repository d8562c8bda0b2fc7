package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"rackpool/internal/store"
)

// writer owns the single write connection and its prepared statements. Only
// the writer goroutine (and Close, after it has stopped) uses it.
type writer struct {
	conn *sql.Conn
	// lazy: the connection commits with synchronous=NORMAL (intents only)
	// rather than FULL.
	lazy bool

	begin, commitTx, rollback   *sql.Stmt
	savepoint, release, undo    *sql.Stmt
	insComp, updComp, delComp   *sql.Stmt
	selVersion, selAllocs       *sql.Stmt
	insAlloc, delAlloc, countOf *sql.Stmt
	putSet, insAudit            *sql.Stmt
	putObj, delObj              *sql.Stmt
	insObjV, updObjV, delObjV   *sql.Stmt
	selObjV                     *sql.Stmt

	stmts []*sql.Stmt
}

func newWriter(ctx context.Context, conn *sql.Conn) (*writer, error) {
	w := &writer{conn: conn}
	for _, p := range []struct {
		dst **sql.Stmt
		sql string
	}{
		{&w.begin, `BEGIN IMMEDIATE`},
		{&w.commitTx, `COMMIT`},
		{&w.rollback, `ROLLBACK`},
		{&w.savepoint, `SAVEPOINT plan`},
		{&w.release, `RELEASE plan`},
		{&w.undo, `ROLLBACK TO plan`},
		{&w.insComp, `INSERT INTO compositions (id, version, state, host, data) VALUES (?, 1, ?, ?, ?)
			ON CONFLICT (id) DO NOTHING`},
		{&w.updComp, `UPDATE compositions SET version = ?, state = ?, host = ?, data = ?
			WHERE id = ? AND version = ?`},
		{&w.delComp, `DELETE FROM compositions WHERE id = ? AND version = ?`},
		{&w.selVersion, `SELECT version FROM compositions WHERE id = ?`},
		{&w.selAllocs, `SELECT block_id FROM allocations WHERE composition_id = ?`},
		{&w.insAlloc, `INSERT INTO allocations (block_id, composition_id) VALUES (?, ?)`},
		{&w.delAlloc, `DELETE FROM allocations WHERE block_id = ? AND composition_id = ?`},
		{&w.countOf, `SELECT COUNT(*) FROM allocations WHERE block_id = ?`},
		{&w.putSet, `INSERT INTO settings (key, value) VALUES (?, ?)
			ON CONFLICT (key) DO UPDATE SET value = excluded.value`},
		{&w.putObj, `INSERT INTO objects (kind, id, data) VALUES (?, ?, ?)
			ON CONFLICT (kind, id) DO UPDATE SET data = excluded.data, version = objects.version + 1`},
		{&w.insObjV, `INSERT INTO objects (kind, id, data, version) VALUES (?, ?, ?, 1) ON CONFLICT (kind, id) DO NOTHING`},
		{&w.updObjV, `UPDATE objects SET data = ?, version = ? WHERE kind = ? AND id = ? AND version = ?`},
		{&w.delObjV, `DELETE FROM objects WHERE kind = ? AND id = ? AND version = ?`},
		{&w.selObjV, `SELECT version FROM objects WHERE kind = ? AND id = ?`},
		{&w.delObj, `DELETE FROM objects WHERE kind = ? AND id = ?`},
		{&w.insAudit, store.AuditInsert(store.QuestionMark)},
	} {
		st, err := conn.PrepareContext(ctx, p.sql)
		if err != nil {
			w.closeStmts()
			return nil, fmt.Errorf("prepare %q: %w", p.sql, err)
		}
		*p.dst = st
		w.stmts = append(w.stmts, st)
	}
	return w, nil
}

func (w *writer) closeStmts() error {
	var errs []error
	for _, st := range w.stmts {
		errs = append(errs, st.Close())
	}
	w.stmts = nil
	return errors.Join(errs...)
}

// close closes the statements and the connection. It is idempotent.
func (w *writer) close() error {
	err := w.closeStmts()
	if w.conn != nil {
		err = errors.Join(err, w.conn.Close())
		w.conn = nil
	}
	return err
}

// commit runs batch in one transaction, each request inside its own
// savepoint so that a failing one is undone alone, commits once and answers
// every request it took. Requests their callers abandoned are skipped.
func (w *writer) commit(batch []*request) {
	taken := batch[:0:0]
	for _, r := range batch {
		if r.state.CompareAndSwap(reqQueued, reqTaken) {
			taken = append(taken, r)
		}
	}
	if len(taken) == 0 {
		return
	}
	errs := make([]error, len(taken))
	fail := func(err error) {
		for _, r := range taken {
			r.done <- err
		}
	}
	if err := w.setSync(taken); err != nil {
		fail(err)
		return
	}
	if _, err := w.begin.Exec(); err != nil {
		fail(fmt.Errorf("begin: %w", err))
		return
	}
	// A lone request needs no savepoint: a failure rolls back the whole
	// transaction instead.
	alone := len(taken) == 1
	for i, r := range taken {
		if alone {
			errs[i] = r.op(w)
			continue
		}
		if _, err := w.savepoint.Exec(); err != nil {
			w.abort(taken, fmt.Errorf("savepoint: %w", err))
			return
		}
		if errs[i] = r.op(w); errs[i] != nil {
			if _, err := w.undo.Exec(); err != nil {
				w.abort(taken, fmt.Errorf("roll back to savepoint: %w", err))
				return
			}
		}
		if _, err := w.release.Exec(); err != nil {
			w.abort(taken, fmt.Errorf("release savepoint: %w", err))
			return
		}
	}
	if alone && errs[0] != nil {
		if _, err := w.rollback.Exec(); err != nil {
			errs[0] = errors.Join(errs[0], fmt.Errorf("roll back: %w", err))
		}
		taken[0].done <- errs[0]
		return
	}
	if _, err := w.commitTx.Exec(); err != nil {
		w.abort(taken, fmt.Errorf("commit: %w", err))
		return
	}
	for i, r := range taken {
		r.done <- errs[i]
	}
}

// setSync chooses how the next commit reaches the disk. A batch of intents
// only is committed with synchronous=NORMAL: the WAL is written (so the
// commit survives the process's crash) but not fsynced. Any other batch is
// committed with synchronous=FULL, whose fsync of the WAL also makes every
// earlier intent's frames durable: commits reach stable storage in order.
func (w *writer) setSync(batch []*request) error {
	lazy := true
	for _, r := range batch {
		lazy = lazy && r.intent
	}
	if lazy == w.lazy {
		return nil
	}
	mode := "FULL"
	if lazy {
		mode = "NORMAL"
	}
	if _, err := w.conn.ExecContext(context.Background(), "PRAGMA synchronous = "+mode); err != nil {
		return fmt.Errorf("set synchronous %s: %w", mode, err)
	}
	w.lazy = lazy
	return nil
}

// abort rolls the transaction back and fails every request with err.
func (w *writer) abort(taken []*request, err error) {
	if _, rerr := w.rollback.Exec(); rerr != nil {
		err = errors.Join(err, fmt.Errorf("roll back: %w", rerr))
	}
	for _, r := range taken {
		r.done <- err
	}
}

func (w *writer) putSetting(key, value string) error {
	if _, err := w.putSet.Exec(key, value); err != nil {
		return fmt.Errorf("put setting %s: %w", key, err)
	}
	return nil
}

func (w *writer) putObject(kind string, o store.Object) error {
	if _, err := w.putObj.Exec(kind, o.ID, o.Data); err != nil {
		return fmt.Errorf("put %s %s: %w", kind, o.ID, err)
	}
	return nil
}

func (w *writer) deleteObject(kind, id string) error {
	if _, err := w.delObj.Exec(kind, id); err != nil {
		return fmt.Errorf("delete %s %s: %w", kind, id, err)
	}
	return nil
}

// allocation is a block a plan adds to a composition.
type allocation struct{ block, comp string }

// applyPlan runs pp's statements inside the current transaction. On error
// the caller rolls back whatever it did.
func (w *writer) applyPlan(pp *store.PreparedPlan) error {
	for _, d := range pp.Deletes {
		res, err := w.delComp.Exec(d.ID, d.Version)
		if err != nil {
			return fmt.Errorf("delete composition %s: %w", d.ID, err)
		}
		if n, err := res.RowsAffected(); err != nil || n == 0 {
			return w.versionConflict("delete", d.ID, d.Version, d.Version, err)
		}
	}
	var added []allocation
	for i := range pp.Puts {
		op := &pp.Puts[i]
		if op.Version == 1 {
			res, err := w.insComp.Exec(op.ID, op.State, op.Host, op.Data)
			if err != nil {
				return fmt.Errorf("insert composition %s: %w", op.ID, err)
			}
			if n, err := res.RowsAffected(); err != nil || n == 0 {
				return w.versionConflict("put", op.ID, op.Version, 0, err)
			}
			for _, b := range op.Blocks {
				if _, err := w.insAlloc.Exec(b, op.ID); err != nil {
					return fmt.Errorf("allocate block %s to composition %s: %w", b, op.ID, err)
				}
			}
			for _, b := range op.Blocks {
				added = append(added, allocation{b, op.ID})
			}
			continue
		}
		res, err := w.updComp.Exec(op.Version, op.State, op.Host, op.Data, op.ID, op.Version-1)
		if err != nil {
			return fmt.Errorf("update composition %s: %w", op.ID, err)
		}
		if n, err := res.RowsAffected(); err != nil || n == 0 {
			return w.versionConflict("put", op.ID, op.Version, op.Version-1, err)
		}
		held, err := w.allocations(op.ID)
		if err != nil {
			return err
		}
		for _, b := range op.Blocks {
			if held[b] {
				delete(held, b)
				continue
			}
			if _, err := w.insAlloc.Exec(b, op.ID); err != nil {
				return fmt.Errorf("allocate block %s to composition %s: %w", b, op.ID, err)
			}
			added = append(added, allocation{b, op.ID})
		}
		for b := range held {
			if _, err := w.delAlloc.Exec(b, op.ID); err != nil {
				return fmt.Errorf("release block %s from composition %s: %w", b, op.ID, err)
			}
		}
	}
	checked := make(map[string]bool, len(added))
	for _, a := range added {
		if checked[a.block] {
			continue
		}
		checked[a.block] = true
		var n int
		if err := w.countOf.QueryRow(a.block).Scan(&n); err != nil {
			return fmt.Errorf("count compositions of block %s: %w", a.block, err)
		}
		if lim := pp.Limit(a.block); n > lim {
			return fmt.Errorf("put composition %s: block %s would be in %d compositions, limit %d: %w",
				a.comp, a.block, n, lim, store.ErrConflict)
		}
	}
	for _, c := range pp.Checks {
		if err := w.checkObject(c.Kind, c.ID, c.Version); err != nil {
			return err
		}
	}
	for _, o := range pp.Objects {
		if err := w.changeObject(o); err != nil {
			return err
		}
	}
	for _, e := range pp.Audit {
		if _, err := w.appendAudit(e); err != nil {
			return err
		}
	}
	return nil
}

// versionConflict explains why a put or delete of id matched no row: err if
// the driver failed, otherwise ErrConflict with the stored version. want is
// the version the plan expected to find stored (0: none).
func (w *writer) versionConflict(verb, id string, version, want int64, err error) error {
	if err != nil {
		return fmt.Errorf("%s composition %s: %w", verb, id, err)
	}
	var stored int64
	switch err := w.selVersion.QueryRow(id).Scan(&stored); {
	case errors.Is(err, sql.ErrNoRows):
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

// allocations returns the blocks composition id holds.
func (w *writer) allocations(id string) (map[string]bool, error) {
	rows, err := w.selAllocs.Query(id)
	if err != nil {
		return nil, fmt.Errorf("read blocks of composition %s: %w", id, err)
	}
	defer rows.Close()
	held := map[string]bool{}
	for rows.Next() {
		var b string
		if err := rows.Scan(&b); err != nil {
			return nil, fmt.Errorf("read blocks of composition %s: %w", id, err)
		}
		held[b] = true
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read blocks of composition %s: %w", id, err)
	}
	return held, nil
}

// objectVersion returns the stored version of an object, 0 if absent.
func (w *writer) objectVersion(kind, id string) (int64, error) {
	var v int64
	switch err := w.selObjV.QueryRow(kind, id).Scan(&v); {
	case errors.Is(err, sql.ErrNoRows):
		return 0, nil
	case err != nil:
		return 0, fmt.Errorf("read version of %s %s: %w", kind, id, err)
	}
	return v, nil
}

// checkObject fails with ErrConflict unless the object is stored at
// version (0: absent).
func (w *writer) checkObject(kind, id string, version int64) error {
	v, err := w.objectVersion(kind, id)
	if err != nil {
		return err
	}
	if v != version {
		return fmt.Errorf("%s %s is at version %d, the plan expects %d: %w", kind, id, v, version, store.ErrConflict)
	}
	return nil
}

// changeObject applies one ObjectChange inside the current transaction.
func (w *writer) changeObject(o store.ObjectChange) error {
	kind, ob := o.Kind, o.Object
	switch {
	case o.Delete && ob.Version == 0:
		return w.deleteObject(kind, ob.ID)
	case o.Delete:
		res, err := w.delObjV.Exec(kind, ob.ID, ob.Version)
		return w.objectOutcome(res, err, "delete", kind, ob.ID, ob.Version)
	case ob.Version == 0:
		return w.putObject(kind, ob)
	case ob.Version == 1:
		res, err := w.insObjV.Exec(kind, ob.ID, ob.Data)
		return w.objectOutcome(res, err, "create", kind, ob.ID, 0)
	default:
		res, err := w.updObjV.Exec(ob.Data, ob.Version, kind, ob.ID, ob.Version-1)
		return w.objectOutcome(res, err, "update", kind, ob.ID, ob.Version-1)
	}
}

// objectOutcome turns a versioned object statement's result into nil or an
// error: ErrConflict when it matched no row because the object is not at
// version want (0: must be absent).
func (w *writer) objectOutcome(res sql.Result, err error, verb, kind, id string, want int64) error {
	if err != nil {
		return fmt.Errorf("%s %s %s: %w", verb, kind, id, err)
	}
	if n, err := res.RowsAffected(); err != nil {
		return fmt.Errorf("%s %s %s: %w", verb, kind, id, err)
	} else if n == 1 {
		return nil
	}
	v, err := w.objectVersion(kind, id)
	if err != nil {
		return err
	}
	return fmt.Errorf("%s %s %s: stored at version %d, the plan expects %d: %w", verb, kind, id, v, want, store.ErrConflict)
}
