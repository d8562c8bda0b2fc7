package sqlite

import (
	"context"
	"database/sql"
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

// sqlRows are database/sql rows as store.ClosingRows.
type sqlRows struct{ *sql.Rows }

func (r sqlRows) Close() { _ = r.Rows.Close() }

// closing returns what a database/sql query returned as store.ClosingRows.
func closing(rows *sql.Rows, err error) (store.ClosingRows, error) {
	if err != nil {
		return nil, err
	}
	return sqlRows{rows}, nil
}
