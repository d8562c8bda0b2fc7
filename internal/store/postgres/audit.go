package postgres

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"rackpool/internal/store"
)

// AppendAudit adds e to the audit table, durably. The returned entry
// carries the assigned ID and e.Time in UTC.
func (s *Store) AppendAudit(ctx context.Context, e store.AuditEntry) (store.AuditEntry, error) {
	return store.AppendAudit(ctx, s.isClosed(), e, func(e store.AuditEntry) (id int64, err error) {
		err = s.write(ctx, txn{queue: func(b *pgx.Batch) { queueAudit(b, e, &id) }})
		return id, err
	})
}

// auditInsert inserts an entry and returns its ID.
var auditInsert = store.AuditInsert(store.DollarN) + " RETURNING id"

// queueAudit queues the insertion of e, storing its ID in id if id is not
// nil.
func queueAudit(b *pgx.Batch, e store.AuditEntry, id *int64) {
	b.Queue(auditInsert, e.InsertArgs()...).QueryRow(func(row pgx.Row) error {
		var n int64
		if err := row.Scan(&n); err != nil {
			return fmt.Errorf("append audit entry: %w", err)
		}
		if id != nil {
			*id = n
		}
		return nil
	})
}

// Audit returns the entries q selects, ordered by ID.
func (s *Store) Audit(ctx context.Context, q store.AuditQuery) ([]store.AuditEntry, error) {
	if s.isClosed() {
		return nil, store.ErrClosed
	}
	query, args := q.Select(store.DollarN)
	rows, err := s.pool.Query(ctx, query, args...)
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
	if s.isClosed() {
		return 0, store.ErrClosed
	}
	var n int64
	if err := s.pool.QueryRow(ctx, `SELECT COUNT(*) FROM audit`).Scan(&n); err != nil {
		return 0, s.readErr("count audit log", err)
	}
	return n, nil
}
