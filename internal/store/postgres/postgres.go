package postgres

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"rackpool/internal/inventory"
	"rackpool/internal/store"
)

var _ store.Store = (*Store)(nil)

// Errors at Open.
var (
	// ErrURL: the store URL is not a usable PostgreSQL URL.
	ErrURL = errors.New("invalid PostgreSQL store URL")
	// ErrNewerSchema: the database was migrated by a newer rackpool.
	ErrNewerSchema = errors.New("database schema is newer than this binary")
)

const (
	// txTimeout bounds one transaction from BEGIN to COMMIT, and the wait
	// for an in-doubt commit's outcome (resolve).
	txTimeout = 30 * time.Second
	// maxConns is the pool's size.
	maxConns = 16
)

// Store is the PostgreSQL implementation of store.Store. It is safe for
// concurrent use, by several processes on one database too.
type Store struct {
	store.AuditReader // Audit and AuditCount, on the pool

	pool *pgxpool.Pool
	cfg  *pgxpool.Config
	// origin identifies this store's commits in the change log.
	origin []byte

	// fence, once this process leads (Lead), is the epoch every write
	// checks.
	fence atomic.Pointer[fence]

	mu     sync.RWMutex
	closed bool
}

// ParseURL checks that raw is a PostgreSQL URL (postgres:// or
// postgresql://) that names a user and carries a password (in the URL, in
// PGPASSWORD or in a password file), and returns the pool configuration.
// Its errors never repeat the password.
func ParseURL(raw string) (*pgxpool.Config, error) {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
		return nil, fmt.Errorf("%w: want postgres://USER:PASSWORD@HOST:PORT/DATABASE", ErrURL)
	}
	cfg, err := pgxpool.ParseConfig(raw)
	if err != nil {
		return nil, fmt.Errorf("%w %s: %v", ErrURL, Redact(raw), redactErr(err, u))
	}
	if cfg.ConnConfig.Database == "" {
		return nil, fmt.Errorf("%w %s: no database name: write postgres://USER:PASSWORD@HOST:PORT/DATABASE", ErrURL, Redact(raw))
	}
	if u.User == nil || u.User.Username() == "" {
		return nil, fmt.Errorf("%w %s: no user name: rackpool connects with credentials only, write postgres://USER:PASSWORD@HOST:PORT/%s",
			ErrURL, Redact(raw), cfg.ConnConfig.Database)
	}
	if cfg.ConnConfig.Password == "" {
		return nil, fmt.Errorf("%w %s: no password in the URL, in PGPASSWORD or in a password file: rackpool connects with credentials only",
			ErrURL, Redact(raw))
	}
	cfg.MaxConns = maxConns
	cfg.ConnConfig.RuntimeParams["application_name"] = "rackpool"
	// Every commit waits for its WAL to reach the disk, whatever the
	// server's default: an acknowledged plan survives a crash of the
	// database too.
	cfg.ConnConfig.RuntimeParams["synchronous_commit"] = "on"
	// A paused or partitioned replica must not hold row locks (the
	// leadership epoch's above all) for longer than a lease.
	cfg.ConnConfig.RuntimeParams["idle_in_transaction_session_timeout"] = strconv.FormatInt(DefaultLeaseTTL.Milliseconds(), 10)
	return cfg, nil
}

// Redact returns raw with its password replaced by "xxxxx", for logs and
// errors.
func Redact(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(unparsable URL)"
	}
	return u.Redacted()
}

// redactErr returns err's text with u's password taken out.
func redactErr(err error, u *url.URL) string {
	s := err.Error()
	if u.User != nil {
		if pw, ok := u.User.Password(); ok && pw != "" {
			s = strings.ReplaceAll(s, pw, "xxxxx")
		}
	}
	return s
}

// Open connects to the database raw names, brings its schema up to date
// (refusing one newer than this binary's) and returns the store. Several
// processes may open one database: migrations run under a lock.
func Open(ctx context.Context, raw string) (*Store, error) {
	cfg, err := ParseURL(raw)
	if err != nil {
		return nil, err
	}
	u, _ := url.Parse(raw)
	conn, err := pgx.ConnectConfig(ctx, cfg.ConnConfig.Copy())
	if err != nil {
		return nil, fmt.Errorf("connect to %s: %s", Redact(raw), redactErr(err, u))
	}
	err = migrate(ctx, conn)
	conn.Close(ctx)
	if err != nil {
		return nil, fmt.Errorf("store %s: %w", Redact(raw), err)
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("connect to %s: %s", Redact(raw), redactErr(err, u))
	}
	origin := make([]byte, 16)
	rand.Read(origin)
	s := &Store{pool: pool, cfg: cfg, origin: origin}
	s.AuditReader = store.NewAuditReader(s.isClosed, store.DollarN, func(ctx context.Context, query string, args ...any) (store.ClosingRows, error) {
		return s.pool.Query(ctx, query, args...)
	}, s.readErr)
	return s, nil
}

// Pool returns the store's connection pool (for the replica machinery
// beside the store: leadership, the change feed).
func (s *Store) Pool() *pgxpool.Pool { return s.pool }

// isClosed reports whether Close was called.
func (s *Store) isClosed() bool {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.closed
}

// readErr turns an error of a read into ErrClosed once the store is closed,
// and wraps it otherwise.
func (s *Store) readErr(what string, err error) error {
	if s.isClosed() {
		return store.ErrClosed
	}
	if unreachable(err) {
		return fmt.Errorf("%s: %v: %w", what, err, store.ErrUnavailable)
	}
	return fmt.Errorf("%s: %w", what, err)
}

// Compositions returns every stored composition ordered by ID.
func (s *Store) Compositions(ctx context.Context) ([]*inventory.Composition, error) {
	return store.Read(s.isClosed(), "read compositions", s.readErr, func() (store.ClosingRows, error) {
		return s.pool.Query(ctx, `SELECT version, data FROM compositions ORDER BY id`)
	}, store.ScanCompositions)
}

// Setting returns the value stored under key, and false if none is.
func (s *Store) Setting(ctx context.Context, key string) (string, bool, error) {
	if s.isClosed() {
		return "", false, store.ErrClosed
	}
	var v []byte
	err := s.pool.QueryRow(ctx, `SELECT value FROM settings WHERE key = $1`, key).Scan(&v)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return "", false, nil
	case err != nil:
		return "", false, s.readErr("read setting "+key, err)
	}
	return string(v), true, nil
}

// Objects returns every object of kind, ordered by ID.
func (s *Store) Objects(ctx context.Context, kind string) ([]store.Object, error) {
	return store.Read(s.isClosed(), "read "+kind+" objects", s.readErr, func() (store.ClosingRows, error) {
		return s.pool.Query(ctx, `SELECT id, data, version FROM objects WHERE kind = $1 ORDER BY id`, kind)
	}, store.ScanObjects)
}

// Close closes the pool; every later call returns store.ErrClosed.
// Transactions under way finish first.
func (s *Store) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	s.mu.Unlock()
	s.pool.Close()
	return nil
}
