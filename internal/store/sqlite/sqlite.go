package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"

	_ "modernc.org/sqlite" // registers the "sqlite" database/sql driver

	"rackpool/internal/inventory"
	"rackpool/internal/store"
)

// FileName is the database file Open uses inside its directory.
const FileName = "rackpool.db"

const (
	// maxBatch is the most requests the writer commits in one transaction.
	maxBatch = 256
	// queueLen is the capacity of the writer's queue.
	queueLen = 1024
	// readConns is the size of the read connection pool.
	readConns = 4
	// busyTimeoutMS is how long a connection waits for a lock held by
	// another connection (or process) before failing.
	busyTimeoutMS = 5000
)

var _ store.Store = (*Store)(nil)

// Store is the SQLite implementation of store.Store. It is safe for
// concurrent use.
type Store struct {
	store.AuditReader // Audit and AuditCount, on readDB

	path    string
	writeDB *sql.DB // one connection, owned by the writer goroutine
	readDB  *sql.DB // query_only pool for Compositions and Setting
	w       *writer

	selAll     *sql.Stmt
	selSetting *sql.Stmt
	selObjects *sql.Stmt

	reqs      chan *request
	quit      chan struct{} // closed by Close
	done      chan struct{} // closed when the writer has stopped
	closeOnce sync.Once
	closeErr  error
}

// Open opens (creating if needed) the database in dir/rackpool.db, brings
// its schema up to date and starts the writer.
func Open(dir string) (*Store, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("open store: %w", err)
	}
	path := filepath.Join(dir, FileName)
	s, err := open(path)
	if err != nil {
		return nil, fmt.Errorf("open store %s: %w", path, err)
	}
	return s, nil
}

// dsn returns the driver's data source name for path with the pragmas every
// connection gets.
func dsn(path string, pragmas ...string) string {
	q := url.Values{}
	q.Add("_pragma", fmt.Sprintf("busy_timeout(%d)", busyTimeoutMS))
	q.Add("_pragma", "foreign_keys(1)")
	q.Add("_pragma", "synchronous(FULL)")
	for _, p := range pragmas {
		q.Add("_pragma", p)
	}
	return path + "?" + q.Encode()
}

func open(path string) (_ *Store, err error) {
	ctx := context.Background()
	s := &Store{
		path: path,
		reqs: make(chan *request, queueLen),
		quit: make(chan struct{}),
		done: make(chan struct{}),
	}
	s.AuditReader = store.NewAuditReader(s.closed, store.QuestionMark, func(ctx context.Context, query string, args ...any) (store.ClosingRows, error) {
		return closing(s.readDB.QueryContext(ctx, query, args...))
	}, s.readErr)
	var cleanup []func() error
	defer func() {
		if err != nil {
			for i := len(cleanup) - 1; i >= 0; i-- {
				err = errors.Join(err, cleanup[i]())
			}
		}
	}()

	// The writer: exactly one connection, which also switches the file to
	// WAL (a persistent setting) and runs the migrations.
	s.writeDB, err = sql.Open("sqlite", dsn(path, "journal_mode(WAL)"))
	if err != nil {
		return nil, err
	}
	cleanup = append(cleanup, s.writeDB.Close)
	s.writeDB.SetMaxOpenConns(1)
	s.writeDB.SetMaxIdleConns(1)
	s.writeDB.SetConnMaxLifetime(0)
	s.writeDB.SetConnMaxIdleTime(0)
	conn, err := s.writeDB.Conn(ctx)
	if err != nil {
		return nil, err
	}
	cleanup = append(cleanup, conn.Close)
	var mode string
	if err := conn.QueryRowContext(ctx, "PRAGMA journal_mode").Scan(&mode); err != nil {
		return nil, fmt.Errorf("read journal mode: %w", err)
	}
	if mode != "wal" {
		return nil, fmt.Errorf("journal mode is %q, want wal", mode)
	}
	if err := migrate(ctx, conn); err != nil {
		return nil, fmt.Errorf("migrate: %w", err)
	}
	s.w, err = newWriter(ctx, conn)
	if err != nil {
		return nil, err
	}
	cleanup[len(cleanup)-1] = s.w.close // closes conn too

	// Readers: WAL lets them run beside the writer, each on the snapshot
	// of the last commit when its statement starts.
	s.readDB, err = sql.Open("sqlite", dsn(path, "query_only(1)"))
	if err != nil {
		return nil, err
	}
	cleanup = append(cleanup, s.readDB.Close)
	s.readDB.SetMaxOpenConns(readConns)
	s.readDB.SetMaxIdleConns(readConns)
	if s.selAll, err = s.readDB.PrepareContext(ctx,
		`SELECT version, data FROM compositions ORDER BY id`); err != nil {
		return nil, fmt.Errorf("prepare: %w", err)
	}
	cleanup = append(cleanup, s.selAll.Close)
	if s.selSetting, err = s.readDB.PrepareContext(ctx,
		`SELECT value FROM settings WHERE key = ?`); err != nil {
		return nil, fmt.Errorf("prepare: %w", err)
	}
	cleanup = append(cleanup, s.selSetting.Close)
	if s.selObjects, err = s.readDB.PrepareContext(ctx,
		`SELECT id, data, version FROM objects WHERE kind = ? ORDER BY id`); err != nil {
		return nil, fmt.Errorf("prepare: %w", err)
	}
	cleanup = append(cleanup, s.selObjects.Close)

	go s.run()
	return s, nil
}

// Path returns the database file's path.
func (s *Store) Path() string { return s.path }

func (s *Store) closed() bool {
	select {
	case <-s.quit:
		return true
	default:
		return false
	}
}

// readErr turns an error from the read pool into ErrClosed once the store is
// closed, and wraps it otherwise.
func (s *Store) readErr(what string, err error) error {
	if s.closed() {
		return store.ErrClosed
	}
	return fmt.Errorf("%s: %w", what, err)
}

// Compositions returns every stored composition ordered by ID.
func (s *Store) Compositions(ctx context.Context) ([]*inventory.Composition, error) {
	return store.Read(s.closed(), "read compositions", s.readErr,
		func() (store.ClosingRows, error) { return closing(s.selAll.QueryContext(ctx)) }, store.ScanCompositions)
}

// Setting returns the value stored under key, and false if none is.
func (s *Store) Setting(ctx context.Context, key string) (string, bool, error) {
	if s.closed() {
		return "", false, store.ErrClosed
	}
	var v string
	err := s.selSetting.QueryRowContext(ctx, key).Scan(&v)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return "", false, nil
	case err != nil:
		return "", false, s.readErr("read setting "+key, err)
	}
	return v, true, nil
}

// PutSetting stores value under key, replacing any previous value. Like
// Apply, it is committed durably before it returns.
func (s *Store) PutSetting(ctx context.Context, key, value string) error {
	return s.submit(ctx, func(w *writer) error { return w.putSetting(key, value) })
}

// Objects returns every object of kind, ordered by ID.
func (s *Store) Objects(ctx context.Context, kind string) ([]store.Object, error) {
	return store.Read(s.closed(), "read "+kind+" objects", s.readErr,
		func() (store.ClosingRows, error) { return closing(s.selObjects.QueryContext(ctx, kind)) }, store.ScanObjects)
}

// PutObject stores o under kind, durably, replacing any object with its ID.
func (s *Store) PutObject(ctx context.Context, kind string, o store.Object) error {
	if kind == "" || o.ID == "" {
		return errors.New("put object: kind and ID are required")
	}
	o.Data = append([]byte{}, o.Data...) // the caller may reuse its buffer
	return s.submit(ctx, func(w *writer) error { return w.putObject(kind, o) })
}

// DeleteObject removes the object of kind with id, durably.
func (s *Store) DeleteObject(ctx context.Context, kind, id string) error {
	return s.submit(ctx, func(w *writer) error { return w.deleteObject(kind, id) })
}

// Apply commits p atomically and durably, as store.Store documents:
// deletions first, then puts in order, then the block limits. A plan that
// fails a check returns an error wrapping store.ErrConflict and changes
// nothing.
//
// Block limits are checked for the blocks the plan adds to a composition;
// a composition keeping a block it already holds is not re-checked. A limit
// below 1 counts as 1.
//
// Apply returns ctx's error if ctx ends while the plan waits in the queue;
// once the writer has taken the plan, Apply reports its true outcome.
func (s *Store) Apply(ctx context.Context, p store.Plan) error {
	pp, err := store.PrepareApply(ctx, s.closed(), p)
	if err != nil || pp == nil {
		return err
	}
	return s.submitRequest(ctx, &request{op: func(w *writer) error { return w.applyPlan(pp) }, intent: p.Intent})
}

// Request states.
const (
	reqQueued int32 = iota
	reqTaken
	reqAbandoned
)

// request is one unit of work for the writer.
type request struct {
	op func(*writer) error
	// intent: the request may be acknowledged before its commit is on
	// stable storage (store.Plan.Intent).
	intent bool
	state  atomic.Int32 // queued → taken by the writer, or queued → abandoned by its caller
	done   chan error   // buffered; receives the result once when taken
}

// submit queues op for the writer as a durable request and waits for its
// outcome.
func (s *Store) submit(ctx context.Context, op func(*writer) error) error {
	return s.submitRequest(ctx, &request{op: op})
}

// submitRequest queues r for the writer and waits for its outcome.
func (s *Store) submitRequest(ctx context.Context, r *request) error {
	r.done = make(chan error, 1)
	select {
	case s.reqs <- r:
	case <-s.quit:
		return store.ErrClosed
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case err := <-r.done:
		return err
	case <-ctx.Done():
		if r.state.CompareAndSwap(reqQueued, reqAbandoned) {
			return ctx.Err()
		}
		// The writer has it: its outcome is the truth.
		return <-r.done
	case <-s.done:
		// The writer answers every request it took before it stops.
		select {
		case err := <-r.done:
			return err
		default:
			return store.ErrClosed
		}
	}
}

// run is the writer goroutine: it takes whatever requests are queued, up to
// maxBatch, and commits them together.
func (s *Store) run() {
	defer close(s.done)
	batch := make([]*request, 0, maxBatch)
	for {
		select {
		case <-s.quit:
			s.refuseQueued()
			return
		default:
		}
		select {
		case <-s.quit:
			s.refuseQueued()
			return
		case r := <-s.reqs:
			batch = append(batch[:0], r)
		}
	fill:
		for len(batch) < maxBatch {
			select {
			case r := <-s.reqs:
				batch = append(batch, r)
			default:
				break fill
			}
		}
		s.w.commit(batch)
		clear(batch)
	}
}

// refuseQueued answers every request still queued with ErrClosed.
func (s *Store) refuseQueued() {
	for {
		select {
		case r := <-s.reqs:
			if r.state.CompareAndSwap(reqQueued, reqTaken) {
				r.done <- store.ErrClosed
			}
		default:
			return
		}
	}
}

// Close stops the writer, after which every call returns store.ErrClosed,
// and closes the database. Requests still queued get ErrClosed; those
// already being committed finish first. Calling Close again returns the
// first call's result.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		close(s.quit)
		<-s.done
		s.closeErr = errors.Join(
			s.w.close(),
			s.selAll.Close(),
			s.selSetting.Close(),
			s.selObjects.Close(),
			s.readDB.Close(),
			s.writeDB.Close(),
		)
		if s.closeErr != nil {
			s.closeErr = fmt.Errorf("close store: %w", s.closeErr)
		}
	})
	return s.closeErr
}
