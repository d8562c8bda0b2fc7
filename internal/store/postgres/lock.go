package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// Lock keys of the session locks rackpool takes (pg_advisory_lock's
// bigint space; the per-record keys of write are hashes and may collide
// with these only by a 2^-64 chance).
const (
	// ServeLock is held by the one replica serving a database.
	ServeLock int64 = 0x7270_7365_7276_6531 // "rpserve1"
)

// ErrLocked: another session holds the lock.
var ErrLocked = errors.New("lock held by another session")

// SessionLock is a PostgreSQL session-level advisory lock held on a
// connection of its own: the server releases it when that connection ends
// (the process died, the network failed), and Lost tells the holder.
type SessionLock struct {
	conn   *pgx.Conn
	key    int64
	lost   chan struct{}
	cancel context.CancelFunc
	done   chan struct{}
}

// TryLock takes the session lock key on a new connection, as who (shown to
// the sessions that find it taken). If another session holds it, it
// returns an error wrapping ErrLocked that names the holder.
func (s *Store) TryLock(ctx context.Context, key int64, who string) (*SessionLock, error) {
	cfg := s.cfg.ConnConfig.Copy()
	cfg.RuntimeParams["application_name"] = who
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("lock: connect: %w", err)
	}
	var ok bool
	if err := conn.QueryRow(ctx, `SELECT pg_try_advisory_lock($1)`, key).Scan(&ok); err != nil {
		conn.Close(ctx)
		return nil, fmt.Errorf("lock: %w", err)
	}
	if !ok {
		var holder string
		var since time.Time
		err := conn.QueryRow(ctx, `SELECT a.application_name, a.backend_start FROM pg_locks l
			JOIN pg_stat_activity a ON a.pid = l.pid
			WHERE l.locktype = 'advisory' AND l.granted
			AND ((l.classid::bigint << 32) | l.objid::bigint) = $1 LIMIT 1`, key).Scan(&holder, &since)
		conn.Close(ctx)
		if err != nil {
			return nil, fmt.Errorf("%w", ErrLocked)
		}
		return nil, fmt.Errorf("%w: %s, connected since %s", ErrLocked, holder, since.UTC().Format(time.RFC3339))
	}
	wctx, cancel := context.WithCancel(context.Background())
	l := &SessionLock{conn: conn, key: key, lost: make(chan struct{}), cancel: cancel, done: make(chan struct{})}
	go l.watch(wctx)
	return l, nil
}

// watch pings the lock's connection every second; the first failure means
// the lock may be gone (the server releases it with the session).
func (l *SessionLock) watch(ctx context.Context) {
	defer close(l.done)
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		err := l.conn.Ping(pctx)
		cancel()
		if err != nil && ctx.Err() == nil {
			close(l.lost)
			return
		}
	}
}

// Lost is closed when the lock's connection failed: the lock must be taken
// as gone.
func (l *SessionLock) Lost() <-chan struct{} { return l.lost }

// Release releases the lock and closes its connection.
func (l *SessionLock) Release() {
	l.cancel()
	<-l.done
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	l.conn.Exec(ctx, `SELECT pg_advisory_unlock($1)`, l.key)
	l.conn.Close(ctx)
}
