package postgres

import (
	"context"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"

	"rackpool/internal/store"
)

// The event log: the events every active replica publishes, in one order
// (docs/ha.md, "The event stream"). A replica appends its events
// (AppendEvents) and reads everyone's by sequence (EventsAfter), woken by
// a notification on EventsChannel (ListenEvents).
//
// Appends take one advisory lock, so they commit in the order of their
// sequence numbers: a reader that sees a number has seen every smaller
// one that will ever commit (a number missing below a visible one belonged
// to a transaction that rolled back), and reads on without waiting for
// gaps to fill, as the change log's Feed must.

// EventsChannel is the channel every append to the event log notifies,
// with the appending replica's tag.
const EventsChannel = "rackpool_events"

// EventRetention is how long the event log keeps an event: long enough
// for every replica to have read it (a replica away longer has missed it;
// its SSE clients resume from what its bus holds).
const EventRetention = 10 * time.Minute

// eventsLock is the advisory lock every append takes.
var eventsLock = lockKey("events")

// LoggedEvent is one event in the event log.
type LoggedEvent struct {
	// Seq is its place in the log, among every replica's events: the ID
	// every replica's bus gives it.
	Seq int64
	// Replica is the tag of the replica that published it, and Num its
	// number there: the first append of (Replica, Num) adds it, a
	// repeated one (a retry after a commit of unknown outcome) adds
	// nothing.
	Replica string
	Num     int64
	// Data is the event, as its replica encoded it.
	Data []byte
}

// AppendEvents adds evs, published at the replica tagged replica, to the
// event log in their order, durably, and notifies EventsChannel. Seq is
// ignored; an event whose (Replica, Num) is logged already is not added
// again. An active replica's appends are fenced like its other writes: an
// evicted replica's fail with ErrFenced.
func (s *Store) AppendEvents(ctx context.Context, replica string, evs []LoggedEvent) error {
	if len(evs) == 0 {
		return nil
	}
	nums := make([]int64, len(evs))
	data := make([][]byte, len(evs))
	for i, e := range evs {
		nums[i], data[i] = e.Num, e.Data
	}
	return s.write(ctx, txn{locks: []int64{eventsLock}, queue: func(b *pgx.Batch) {
		// The identity is taken in the SELECT's order: the events'.
		b.Queue(`INSERT INTO events (replica, num, data)
			SELECT $1, n, d FROM unnest($2::bigint[], $3::bytea[]) WITH ORDINALITY AS u(n, d, i) ORDER BY i
			ON CONFLICT (replica, num) DO NOTHING`, replica, nums, data)
		b.Queue(`SELECT pg_notify($1, $2)`, EventsChannel, replica)
	}})
}

// EventsAfter returns up to limit logged events after sequence number
// after, in sequence order.
func (s *Store) EventsAfter(ctx context.Context, after int64, limit int) ([]LoggedEvent, error) {
	if s.isClosed() {
		return nil, store.ErrClosed
	}
	rows, err := s.pool.Query(ctx, `SELECT seq, replica, num, data FROM events WHERE seq > $1 ORDER BY seq LIMIT $2`, after, limit)
	if err != nil {
		return nil, s.readErr("read the event log", err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowToStructByPos[LoggedEvent])
	if err != nil {
		return nil, s.readErr("read the event log", err)
	}
	return out, nil
}

// EventsStart returns the sequence number just before the newest back
// events of the log (0 when the log is empty): where a replica that starts
// reads from, so that its bus holds what the others' hold.
func (s *Store) EventsStart(ctx context.Context, back int) (int64, error) {
	if s.isClosed() {
		return 0, store.ErrClosed
	}
	q, args := `SELECT COALESCE(MAX(seq), 0) FROM events`, []any{}
	if back > 0 {
		q, args = `SELECT COALESCE(MIN(seq) - 1, 0) FROM (SELECT seq FROM events ORDER BY seq DESC LIMIT $1) AS newest`, []any{back}
	}
	var seq int64
	if err := s.pool.QueryRow(ctx, q, args...).Scan(&seq); err != nil {
		return 0, s.readErr("read the event log", err)
	}
	return seq, nil
}

// ListenEvents calls fn whenever a replica appends to the event log (this
// one included), and every poll interval in any case, until ctx ends.
func (s *Store) ListenEvents(ctx context.Context, poll time.Duration, log *slog.Logger, fn func()) {
	s.listen(ctx, EventsChannel, "", poll, log, fn)
}

// PruneEvents deletes the events logged before the retention, and returns
// how many. The leader calls it periodically (PruneLoop).
func (s *Store) PruneEvents(ctx context.Context, retention time.Duration) (int64, error) {
	if s.isClosed() {
		return 0, store.ErrClosed
	}
	tag, err := s.pool.Exec(ctx, `DELETE FROM events WHERE at < now() - make_interval(secs => $1)`, retention.Seconds())
	if err != nil {
		return 0, s.readErr("prune the event log", err)
	}
	return tag.RowsAffected(), nil
}
