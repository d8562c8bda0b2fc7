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
