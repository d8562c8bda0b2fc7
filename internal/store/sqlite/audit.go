package sqlite

import (
	"context"
	"fmt"

	"rackpool/internal/store"
)

// AppendAudit adds e to the audit table through the group-commit writer,
// so it is durable when AppendAudit returns nil, exactly as Apply is. The
// returned entry carries the assigned ID and e.Time in UTC.
func (s *Store) AppendAudit(ctx context.Context, e store.AuditEntry) (store.AuditEntry, error) {
	return store.AppendAudit(ctx, s.closed(), e, func(e store.AuditEntry) (id int64, err error) {
		err = s.submit(ctx, func(w *writer) error {
			var err error
			id, err = w.appendAudit(e)
			return err
		})
		return id, err
	})
}

// appendAudit inserts e inside the current transaction and returns its ID.
func (w *writer) appendAudit(e store.AuditEntry) (int64, error) {
	res, err := w.insAudit.Exec(e.InsertArgs()...)
	if err != nil {
		return 0, fmt.Errorf("append audit entry: %w", err)
	}
	id, err := res.LastInsertId()
	if err != nil {
		return 0, fmt.Errorf("append audit entry: %w", err)
	}
	return id, nil
}

// Audit returns the entries q selects, ordered by ID. A time bound uses the
// index on time; AfterID paging uses the primary key.
func (s *Store) Audit(ctx context.Context, q store.AuditQuery) ([]store.AuditEntry, error) {
	if s.closed() {
		return nil, store.ErrClosed
	}
	query, args := q.Select(store.QuestionMark)
	rows, err := s.readDB.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, s.readErr("read audit log", err)
	}
	defer rows.Close()
	out, err := store.ScanAudit(rows)
	if err != nil {
		return nil, s.readErr("read audit log", err)
	}
	return out, nil
}

// AuditCount returns how many entries the audit table holds.
func (s *Store) AuditCount(ctx context.Context) (int64, error) {
	if s.closed() {
		return 0, store.ErrClosed
	}
	var n int64
	if err := s.readDB.QueryRowContext(ctx, `SELECT COUNT(*) FROM audit`).Scan(&n); err != nil {
		return 0, s.readErr("count audit log", err)
	}
	return n, nil
}
