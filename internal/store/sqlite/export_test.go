package sqlite

import "context"

// SyncMode commits a request, an intent or not, that reads the writer
// connection's PRAGMA synchronous inside its own transaction: 1 (NORMAL)
// or 2 (FULL).
func SyncMode(s *Store, intent bool) (int, error) {
	var mode int
	err := s.submitRequest(context.Background(), &request{intent: intent, op: func(w *writer) error {
		return w.conn.QueryRowContext(context.Background(), "PRAGMA synchronous").Scan(&mode)
	}})
	return mode, err
}
