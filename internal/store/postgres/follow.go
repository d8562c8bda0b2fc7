package postgres

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"rackpool/internal/inventory"
	"rackpool/internal/store"
)

// Change is one record a committed transaction changed: Kind is
// KindComposition, KindSetting or an object's kind. Own is true for a
// change this store committed.
type Change struct {
	Seq      int64
	Kind, ID string
	Own      bool
}

const (
	// gapTimeout is how long a sequence number missing below a visible
	// one is looked for again: its transaction may still commit (sequence
	// numbers are taken at insert, not at commit) for as long as a
	// transaction may last, txTimeout. After that it belonged to a
	// transaction that rolled back.
	gapTimeout = 2 * txTimeout
	// FeedPage is the most changes one read of the log (Feed.Next)
	// returns.
	FeedPage = 10000
)

// Head returns the sequence number of the newest change, 0 if none: where
// a replica that has just read the whole state starts following.
func (s *Store) Head(ctx context.Context) (int64, error) {
	var seq int64
	if err := s.pool.QueryRow(ctx, `SELECT COALESCE(MAX(seq), 0) FROM changes`).Scan(&seq); err != nil {
		return 0, s.readErr("read the change log", err)
	}
	return seq, nil
}

// Feed reads the change log in order from a sequence number, and again
// the numbers it found missing below a visible one until they appear or
// gapTimeout passes: a transaction that took a number commits after one
// that took a later number, and a reader that only moved forward would
// miss its change.
type Feed struct {
	s     *Store
	after int64
	gaps  map[int64]time.Time // missing sequence number → first seen missing
}

// Feed returns a feed of the changes after seq.
func (s *Store) Feed(after int64) *Feed {
	return &Feed{s: s, after: after, gaps: map[int64]time.Time{}}
}

// Next returns the changes committed since the last call (or since the
// feed's start), in sequence order, with late ones that filled a gap.
func (f *Feed) Next(ctx context.Context) ([]Change, error) {
	gaps := make([]int64, 0, len(f.gaps))
	for seq := range f.gaps {
		gaps = append(gaps, seq)
	}
	rows, err := f.s.pool.Query(ctx, `SELECT seq, kind, id, origin = $4 FROM changes WHERE seq > $1 OR seq = ANY($2::bigint[])
		ORDER BY seq LIMIT $3`, f.after, gaps, FeedPage, f.s.origin)
	if err != nil {
		return nil, f.s.readErr("read the change log", err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowToStructByPos[Change])
	if err != nil {
		return nil, f.s.readErr("read the change log", err)
	}
	now := time.Now()
	for _, c := range out {
		if _, ok := f.gaps[c.Seq]; ok {
			delete(f.gaps, c.Seq)
			continue
		}
		for missing := f.after + 1; missing < c.Seq; missing++ {
			f.gaps[missing] = now
		}
		f.after = c.Seq
	}
	for seq, since := range f.gaps {
		if now.Sub(since) > gapTimeout {
			delete(f.gaps, seq)
		}
	}
	return out, nil
}

// Position returns the highest sequence number the feed has read.
func (f *Feed) Position() int64 { return f.after }

// Listen calls fn whenever another store's commit notifies that it changed
// records (LISTEN on a connection of its own; this store's own commits are
// not reported), and every poll interval in any case: a notification lost
// with a connection is caught up by reading the log by sequence (Feed). A
// failed connection is opened again with backoff. It returns when ctx
// ends.
func (s *Store) Listen(ctx context.Context, poll time.Duration, log *slog.Logger, fn func()) {
	s.listen(ctx, NotifyChannel, hex.EncodeToString(s.origin), poll, log, fn)
}

// listen calls fn whenever channel is notified with a payload other than
// skip ("" skips nothing), and every poll interval in any case, until ctx
// ends (Listen, ListenEvents).
func (s *Store) listen(ctx context.Context, channel, skip string, poll time.Duration, log *slog.Logger, fn func()) {
	var conn *pgx.Conn
	defer func() {
		if conn != nil {
			conn.Close(context.Background())
		}
	}()
	for backoff := 50 * time.Millisecond; ctx.Err() == nil; {
		if conn == nil {
			c, err := pgx.ConnectConfig(ctx, s.cfg.ConnConfig.Copy())
			if err == nil {
				if _, err = c.Exec(ctx, "LISTEN "+channel); err != nil {
					c.Close(ctx)
				}
			}
			if err != nil {
				if ctx.Err() == nil {
					log.Warn("change feed: cannot listen; retrying", "channel", channel, "err", err, "in", backoff)
				}
				fn() // poll meanwhile
				sleep(ctx, backoff)
				backoff = min(2*backoff, poll)
				continue
			}
			conn, backoff = c, 50*time.Millisecond
			fn() // what committed while nobody listened
		}
		wctx, cancel := context.WithTimeout(ctx, poll)
		n, err := conn.WaitForNotification(wctx)
		cancel()
		switch {
		case err == nil && skip != "" && n.Payload == skip:
		case err == nil, errors.Is(err, context.DeadlineExceeded):
			fn()
		case ctx.Err() == nil:
			conn.Close(context.Background()) // listen again on a new one
			conn = nil
		}
	}
}

func sleep(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}

// CompositionsByID returns the stored compositions with the given IDs;
// absent ones are missing from the map.
func (s *Store) CompositionsByID(ctx context.Context, ids []string) (map[string]*inventory.Composition, error) {
	if s.isClosed() {
		return nil, store.ErrClosed
	}
	rows, err := s.pool.Query(ctx, `SELECT version, data FROM compositions WHERE id = ANY($1::text[])`, slices.Compact(slices.Sorted(slices.Values(ids))))
	if err != nil {
		return nil, s.readErr("read compositions", err)
	}
	out := make(map[string]*inventory.Composition, len(ids))
	var (
		version int64
		data    []byte
	)
	_, err = pgx.ForEachRow(rows, []any{&version, &data}, func() error {
		c, err := store.DecodeComposition(version, data)
		if err != nil {
			return err
		}
		out[c.ID] = c
		return nil
	})
	if err != nil {
		return nil, s.readErr("read compositions", err)
	}
	return out, nil
}

// Versions returns the version of every stored composition, for a replica
// checking its snapshot against the database.
func (s *Store) Versions(ctx context.Context) (map[string]int64, error) {
	if s.isClosed() {
		return nil, store.ErrClosed
	}
	rows, err := s.pool.Query(ctx, `SELECT id, version FROM compositions`)
	if err != nil {
		return nil, s.readErr("read composition versions", err)
	}
	out := map[string]int64{}
	var (
		id string
		v  int64
	)
	if _, err := pgx.ForEachRow(rows, []any{&id, &v}, func() error { out[id] = v; return nil }); err != nil {
		return nil, fmt.Errorf("read composition versions: %w", err)
	}
	return out, nil
}

// ChangeRetention is how long the change log keeps a change: a replica
// that was away longer re-reads the compositions whose versions differ
// (replica.Follower.Check) instead of reading the log.
const ChangeRetention = 10 * time.Minute

// PruneChanges deletes the changes committed before the retention, and
// returns how many. The leader calls it periodically.
func (s *Store) PruneChanges(ctx context.Context, retention time.Duration) (int64, error) {
	if s.isClosed() {
		return 0, store.ErrClosed
	}
	tag, err := s.pool.Exec(ctx, `DELETE FROM changes WHERE at < now() - make_interval(secs => $1)`, retention.Seconds())
	if err != nil {
		return 0, s.readErr("prune the change log", err)
	}
	return tag.RowsAffected(), nil
}

// PruneLoop prunes the change log (retention) and the event log
// (EventRetention) every interval until ctx ends.
func (s *Store) PruneLoop(ctx context.Context, every, retention time.Duration, log *slog.Logger) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if n, err := s.PruneChanges(ctx, retention); err != nil && ctx.Err() == nil {
			log.Warn("change log: prune failed", "err", err)
		} else if n > 0 {
			log.Debug("change log pruned", "changes", n)
		}
		if n, err := s.PruneEvents(ctx, EventRetention); err != nil && ctx.Err() == nil {
			log.Warn("event log: prune failed", "err", err)
		} else if n > 0 {
			log.Debug("event log pruned", "events", n)
		}
	}
}
