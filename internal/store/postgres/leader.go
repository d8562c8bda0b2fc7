package postgres

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"rackpool/internal/store"
)

// Errors of leadership.
var (
	// ErrLocked: another session leads.
	ErrLocked = errors.New("led by another session")
	// ErrFenced: a write carried a leadership epoch that is no longer the
	// current one: another session took the lead since.
	ErrFenced = fmt.Errorf("%w: fenced: this process no longer leads", store.ErrUnavailable)
)

// DefaultLeaseTTL is how long a leader may be silent (paused, partitioned,
// dead) before the server ends its session and another may lead.
const DefaultLeaseTTL = 5 * time.Second

// Leadership is this process's hold on a named role, e.g. the serving
// replica of a database. It is a session-level advisory lock held on a
// connection of its own, so the server releases it when that session ends:
// the process died, or it was silent for longer than the lease (the
// session's idle_session_timeout, while the holder pings it five times per
// lease). Taking the lead increments the role's epoch in the fence table,
// and the store checks that epoch in every write transaction it runs after
// Lead (the epoch row is read FOR SHARE, so the next leader's increment
// waits for the transactions under way and every later one of this
// process fails with ErrFenced): a leader that lost its lease while paused
// can never commit again.
type Leadership struct {
	// Epoch is the role's epoch this process holds: one more than the
	// previous leader's.
	Epoch int64

	store    *Store
	connMu   sync.Mutex // conn is not safe for concurrent use
	conn     *pgx.Conn
	key      int64
	lost     chan struct{}
	loseOnce sync.Once
	cancel   context.CancelFunc
	done     chan struct{}
}

// LeadOptions configure Lead.
type LeadOptions struct {
	// TTL is the lease (default DefaultLeaseTTL, at least a second).
	TTL time.Duration
	// Wait: when another session leads, wait until it is gone (a standby)
	// rather than fail with ErrLocked. OnWait, when set, is called once
	// with the leader's description.
	Wait   bool
	OnWait func(leader string)
	// NoFence: the store's writes are not fenced by this role's epoch (the
	// leader of several active replicas, whose writes are fenced by its
	// membership instead).
	NoFence bool
	// Shared names a role whose lock the session also takes in shared
	// mode: several sessions may hold it so, none while another leads it.
	// Active replicas take "serve" shared, so that a replica serving on its
	// own and active ones never run on one database together.
	Shared string
}

// Lead takes the lead of role name as who (shown to the sessions that find
// it taken), increments the role's epoch and fences this store's writes
// with it. Without opts.Wait it fails with an error wrapping ErrLocked
// that names the leader if another session leads.
func (s *Store) Lead(ctx context.Context, name, who string, opts LeadOptions) (*Leadership, error) {
	if opts.TTL == 0 {
		opts.TTL = DefaultLeaseTTL
	}
	opts.TTL = max(opts.TTL, time.Second)
	key := lockKey("leader", name)
	cfg := s.cfg.ConnConfig.Copy()
	cfg.RuntimeParams["application_name"] = who
	cfg.RuntimeParams["idle_session_timeout"] = strconv.FormatInt(opts.TTL.Milliseconds(), 10)
	for waited := false; ; {
		// A standby, once it has said it waits, blocks in
		// pg_advisory_lock: it leads the moment the server releases the
		// lock, not at its next poll.
		l, holder, err := s.tryLead(ctx, cfg, key, name, waited, opts)
		if err != nil && waited && ctx.Err() == nil {
			// The waiting session failed (the server restarted): wait
			// again on a new one.
			select {
			case <-ctx.Done():
				return nil, ctx.Err()
			case <-time.After(opts.TTL / 5):
			}
			continue
		}
		if err != nil || l != nil {
			if l != nil {
				l.key = key
				wctx, cancel := context.WithCancel(context.Background())
				l.cancel = cancel
				go l.watch(wctx, opts.TTL/5)
			}
			return l, err
		}
		if !opts.Wait {
			return nil, fmt.Errorf("%w: %s", ErrLocked, holder)
		}
		if !waited && opts.OnWait != nil {
			opts.OnWait(holder)
		}
		waited = true
	}
}

// tryLead makes one attempt: a Leadership, or the leader's description.
// With block it waits in pg_advisory_lock until the lock is free (or ctx
// ends).
func (s *Store) tryLead(ctx context.Context, cfg *pgx.ConnConfig, key int64, name string, block bool, opts LeadOptions) (*Leadership, string, error) {
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return nil, "", fmt.Errorf("lead %s: connect: %w", name, err)
	}
	ok := true
	if opts.Shared != "" {
		shared := lockKey("leader", opts.Shared)
		if err := conn.QueryRow(ctx, `SELECT pg_try_advisory_lock_shared($1)`, shared).Scan(&ok); err != nil {
			conn.Close(context.Background())
			return nil, "", fmt.Errorf("lead %s: %w", name, err)
		}
		if !ok {
			holder := lockHolder(ctx, conn, shared)
			conn.Close(ctx)
			return nil, "", fmt.Errorf("%w: %s leads %s", ErrLocked, holder, opts.Shared)
		}
	}
	if block {
		_, err = conn.Exec(ctx, `SELECT pg_advisory_lock($1)`, key)
	} else {
		err = conn.QueryRow(ctx, `SELECT pg_try_advisory_lock($1)`, key).Scan(&ok)
	}
	if err != nil {
		conn.Close(context.Background())
		return nil, "", fmt.Errorf("lead %s: %w", name, err)
	}
	if !ok {
		holder := lockHolder(ctx, conn, key)
		conn.Close(ctx)
		return nil, holder, nil
	}
	var epoch int64
	if err := conn.QueryRow(ctx, `INSERT INTO fence (name, epoch) VALUES ($1, 1)
		ON CONFLICT (name) DO UPDATE SET epoch = fence.epoch + 1 RETURNING epoch`, name).Scan(&epoch); err != nil {
		conn.Close(ctx)
		return nil, "", fmt.Errorf("lead %s: new epoch: %w", name, err)
	}
	l := &Leadership{Epoch: epoch, store: s, conn: conn, lost: make(chan struct{}), done: make(chan struct{})}
	if !opts.NoFence {
		s.fence.Store(&fence{name: name, epoch: epoch})
	}
	return l, "", nil
}

// lockHolder describes the session holding advisory lock key.
func lockHolder(ctx context.Context, conn *pgx.Conn, key int64) string {
	var (
		app   string
		since time.Time
	)
	if err := conn.QueryRow(ctx, `SELECT a.application_name, a.backend_start FROM pg_locks l
		JOIN pg_stat_activity a ON a.pid = l.pid
		WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 1 AND l.pid <> pg_backend_pid()
		AND ((l.classid::bigint << 32) | l.objid::bigint) = $1 LIMIT 1`, key).Scan(&app, &since); err != nil {
		return "another session"
	}
	return fmt.Sprintf("%s, connected since %s", app, since.UTC().Format(time.RFC3339))
}

// watch pings the leader's connection every interval; the first failure
// means the lease may be gone (the server ended the session, or will).
func (l *Leadership) watch(ctx context.Context, every time.Duration) {
	defer close(l.done)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if err := l.ping(ctx, every); err != nil && ctx.Err() == nil {
			l.lose()
			return
		}
	}
}

func (l *Leadership) ping(ctx context.Context, within time.Duration) error {
	l.connMu.Lock()
	defer l.connMu.Unlock()
	pctx, cancel := context.WithTimeout(ctx, within)
	defer cancel()
	return l.conn.Ping(pctx)
}

func (l *Leadership) lose() { l.loseOnce.Do(func() { close(l.lost) }) }

// Check confirms that the lead is still held: it pings the session that
// holds it. A replica calls it before answering from its snapshot that
// something does not exist: the snapshot is the truth only while the lead
// is. It fails with ErrFenced once the lead is lost.
func (l *Leadership) Check(ctx context.Context) error {
	select {
	case <-l.lost:
		return ErrFenced
	default:
	}
	if err := l.ping(ctx, time.Second); err != nil {
		l.lose()
		return fmt.Errorf("%w: %v", ErrFenced, err)
	}
	return nil
}

// Lost is closed when the leader's session failed: the lead must be taken
// as gone (the store's writes fail with ErrFenced once another leads).
func (l *Leadership) Lost() <-chan struct{} { return l.lost }

// Release gives up the lead: another session may lead at once.
func (l *Leadership) Release() {
	l.cancel()
	<-l.done
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	l.connMu.Lock()
	defer l.connMu.Unlock()
	l.conn.Exec(ctx, `SELECT pg_advisory_unlock($1)`, l.key)
	l.conn.Close(ctx)
}

// fence is the leadership epoch a store's writes are checked against.
type fence struct {
	name  string
	epoch int64
}

// checkFence fails with ErrFenced unless the role's epoch, read from row
// (SELECT epoch FROM fence … FOR SHARE: a new leader's increment waits
// for the transaction to end), is still f's.
func checkFence(row pgx.Row, f *fence) error {
	var epoch int64
	if err := row.Scan(&epoch); errors.Is(err, pgx.ErrNoRows) {
		// The leader removes a replica's row once it has settled that
		// replica's work (Evict).
		return fmt.Errorf("%w (%s was evicted)", ErrFenced, f.name)
	} else if err != nil {
		return fmt.Errorf("store: read the leadership epoch: %w", err)
	}
	if epoch != f.epoch {
		return fmt.Errorf("%w (epoch %d, %s is at %d)", ErrFenced, f.epoch, f.name, epoch)
	}
	return nil
}
