// Package hba is the host side of a pooled drive, as an HBA driver with
// multipath is for a SAS drive: `rackpool drive connect` serves the drive
// locally over NBD to any NBD client and forwards every request to the
// blocknode that owns the drive now.
//
// # Paths and failover
//
// A path is the drive's current owner: the control plane's answer to
// Resolve (two-level indirection: drive → blocknode endpoint, export name
// with a token at the drive's ownership epoch) and Conns NBD connections
// to that blocknode. Requests from the local clients are spread over the
// connections. A request fails over — it is sent again on the next path,
// the local client never sees the failure — when its connection breaks
// (the blocknode died or closed it) or the blocknode refuses it with EPERM
// (fenced: the drive moved, the token's epoch is stale, or the node's
// lease lapsed). Any other error (EINVAL, ENOSPC, EIO from the drive) goes
// back to the local client as is.
//
// A blocknode that stops answering without closing anything (paused,
// partitioned) is found by a watchdog: when the current path has had
// requests outstanding with no reply for Stall, the drive is resolved
// again, and if the control plane names another owner or epoch the path is
// dropped and its outstanding requests are replayed on the new one. While
// no path works (the control plane is still failing the drive over),
// requests wait, resolving every 20–200 ms, up to Timeout; then they fail
// with EIO.
//
// # Revoked
//
// A Resolver error that matches ErrRevoked means no retry will help: the
// control plane no longer grants this host the drive (another holder took
// its write reservation over, docs/storage.md). Requests outstanding and
// to come then fail with EPERM at once, and Revoked is closed so the
// program can stop. A write the blocknode refused (EPERM: fenced by the
// new holder's generation) is not replayed anywhere.
//
// # Why replay is safe
//
// A request is acknowledged to the local client only once a blocknode
// acknowledged it, so replaying an unacknowledged request repeats a write
// of the same bytes to the same offset (idempotent) or a read. A
// blocknode that was cut off can no longer apply an old request after the
// drive moved: it checks ownership and its lease before every request
// (internal/blocknode), so the replayed write is the last one to land.
// Writes acknowledged before a failover were applied to the drive image,
// which moves with the drive; a FLUSH after the failover makes them
// durable on the new owner as NBD requires.
package hba

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"rackpool/internal/nbd"
)

// Path is where a drive is served now.
type Path struct {
	Endpoint string // blocknode NBD address (host:port)
	Export   string // export name, drive@token
	Epoch    uint64
	Node     string
}

// ErrRevoked marks a Resolver error that no retry cures: the control plane
// refuses this client the drive for good.
var ErrRevoked = errors.New("hba: the drive was taken away from this client")

// Resolver asks the control plane where drive is served now. An error
// matching ErrRevoked ends the Multipath's service (see Revoked).
type Resolver interface {
	Resolve(ctx context.Context, drive string) (Path, error)
}

// ResolverFunc adapts a function to Resolver.
type ResolverFunc func(ctx context.Context, drive string) (Path, error)

// Resolve calls f.
func (f ResolverFunc) Resolve(ctx context.Context, drive string) (Path, error) { return f(ctx, drive) }

// Defaults.
const (
	DefaultConns   = 4
	DefaultTimeout = time.Minute
	DefaultStall   = 500 * time.Millisecond
)

// Options configure a Multipath.
type Options struct {
	Drive    string
	Resolver Resolver
	// Conns is the number of NBD connections to the owning blocknode.
	Conns int
	// Timeout bounds how long a request waits for a working path.
	Timeout time.Duration
	// Stall is how long outstanding requests may go unanswered before the
	// drive is resolved again to see whether it moved.
	Stall  time.Duration
	Logger *slog.Logger
	// Dial connects to a blocknode (default: nbd.Dial over TCP with a
	// one-second handshake deadline).
	Dial func(ctx context.Context, endpoint, export string) (*nbd.Client, error)
}

// Multipath serves one pooled drive through whichever blocknode owns it.
// It implements nbd.Exports: one export, named after the drive.
type Multipath struct {
	o     Options
	log   *slog.Logger
	size  uint64
	flags nbd.ExportFlags

	mu   sync.Mutex
	cur  *path
	wait chan struct{} // closed when the path being established is ready

	rr        atomic.Uint64
	closed    atomic.Bool
	failovers []Failover
	stop      context.CancelFunc

	revokeOnce sync.Once
	revoked    chan struct{} // closed by revoke
	revokedBy  error         // set before revoked is closed
}

// Failover is one change of path, as measured by the host.
type Failover struct {
	From, To     string // nodes
	Epoch        uint64
	FirstFailure time.Time // first request that failed on the old path
	Ready        time.Time // the new path's connections were up
	Cause        string
}

type path struct {
	Path
	conns    []*nbd.Client
	broken   atomic.Bool
	inflight atomic.Int64
	progress atomic.Int64 // unix nanos of the last reply or of going busy
	failedAt atomic.Int64 // unix nanos of the first failure
	cause    atomic.Value // string
}

// New resolves the drive and connects to its owner.
func New(ctx context.Context, o Options) (*Multipath, error) {
	if o.Drive == "" || o.Resolver == nil {
		return nil, errors.New("hba: a drive and a resolver are required")
	}
	if o.Conns <= 0 {
		o.Conns = DefaultConns
	}
	if o.Timeout <= 0 {
		o.Timeout = DefaultTimeout
	}
	if o.Stall <= 0 {
		o.Stall = DefaultStall
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Dial == nil {
		o.Dial = func(ctx context.Context, endpoint, export string) (*nbd.Client, error) {
			ctx, cancel := context.WithTimeout(ctx, time.Second)
			defer cancel()
			return nbd.Dial(ctx, "tcp", endpoint, export)
		}
	}
	m := &Multipath{o: o, log: o.Logger, revoked: make(chan struct{})}
	p, err := m.connect(ctx)
	if err != nil {
		return nil, err
	}
	m.cur = p
	m.size, m.flags = p.conns[0].Size(), p.conns[0].Flags()
	m.flags.CanMultiConn = true
	wctx, cancel := context.WithCancel(context.Background())
	m.stop = cancel
	go m.watch(wctx)
	return m, nil
}

// connect resolves the drive once and opens Conns connections.
func (m *Multipath) connect(ctx context.Context) (*path, error) {
	r, err := m.o.Resolver.Resolve(ctx, m.o.Drive)
	if err != nil {
		return nil, fmt.Errorf("resolve %s: %w", m.o.Drive, err)
	}
	p := &path{Path: r}
	for range m.o.Conns {
		c, err := m.o.Dial(ctx, r.Endpoint, r.Export)
		if err != nil {
			// A node that takes some connections and not the next may be
			// hanging: leave it without waiting on it.
			p.abort()
			return nil, fmt.Errorf("connect to %s's blocknode %s at %s: %w", m.o.Drive, r.Node, r.Endpoint, err)
		}
		p.conns = append(p.conns, c)
	}
	if m.size != 0 && p.conns[0].Size() != m.size {
		p.abort()
		return nil, fmt.Errorf("%s's blocknode %s serves %d bytes, not %d", m.o.Drive, r.Node, p.conns[0].Size(), m.size)
	}
	return p, nil
}

// Close closes every connection; requests in flight fail.
func (m *Multipath) Close() error {
	if m.closed.Swap(true) {
		return nil
	}
	m.stop()
	m.mu.Lock()
	p := m.cur
	m.mu.Unlock()
	if p != nil {
		p.close()
	}
	return nil
}

// close closes p's connections gracefully, all at once: each sends
// NBD_CMD_DISC and waits (up to nbd's grace) for the replies in flight.
func (p *path) close() {
	p.each((*nbd.Client).Close)
}

// abort drops p's connections at once, none waiting for the node: a path
// that failed may lead to a node that is hung (stopped, partitioned) and
// will answer nothing, and a graceful close would wait its grace for each
// connection (seconds of stalled I/O) before the requests in flight could
// be replayed. Those requests fail with nbd.ErrClosed and are replayed.
func (p *path) abort() {
	p.each(func(c *nbd.Client) error { c.Abort(); return nil })
}

// each runs f on every connection of p concurrently and waits for all.
func (p *path) each(f func(*nbd.Client) error) {
	var wg sync.WaitGroup
	for _, c := range p.conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_ = f(c)
		}()
	}
	wg.Wait()
}

// Current returns the current path (nil while none works).
func (m *Multipath) Current() *Path {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.cur == nil || m.cur.broken.Load() {
		return nil
	}
	out := m.cur.Path
	return &out
}

// Failovers returns the path changes so far.
func (m *Multipath) Failovers() []Failover {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]Failover(nil), m.failovers...)
}

// fail marks p broken (once) and aborts its connections, so that every
// request outstanding there returns at once and is replayed: a hung node
// costs the time it took to find it hung, no more than a dead one.
func (m *Multipath) fail(p *path, cause string) {
	if p.broken.Swap(true) {
		return
	}
	p.failedAt.CompareAndSwap(0, time.Now().UnixNano())
	p.cause.Store(cause)
	m.log.Warn("path to drive failed; failing over", "drive", m.o.Drive, "node", p.Node, "endpoint", p.Endpoint, "cause", cause)
	p.abort()
}

// Revoked is closed once a Resolver answer matched ErrRevoked; Err then
// says why.
func (m *Multipath) Revoked() <-chan struct{} { return m.revoked }

// Err is the revocation's cause (nil until Revoked is closed).
func (m *Multipath) Err() error {
	select {
	case <-m.revoked:
		return m.revokedBy
	default:
		return nil
	}
}

// revoke ends service for good: every request fails with EPERM.
func (m *Multipath) revoke(cause error) {
	m.revokeOnce.Do(func() {
		m.revokedBy = fmt.Errorf("%w: drive %s: %w", nbd.ErrPermission, m.o.Drive, cause)
		m.log.Warn("drive taken away; requests fail with EPERM", "drive", m.o.Drive, "cause", cause)
		close(m.revoked)
	})
}

// path returns a working path, establishing one if the current one broke.
func (m *Multipath) path(ctx context.Context) (*path, error) {
	deadline := time.Now().Add(m.o.Timeout)
	for {
		if m.closed.Load() {
			return nil, nbd.ErrClosed
		}
		if err := m.Err(); err != nil {
			return nil, err
		}
		m.mu.Lock()
		if p := m.cur; p != nil && !p.broken.Load() {
			m.mu.Unlock()
			return p, nil
		}
		if w := m.wait; w != nil {
			m.mu.Unlock()
			select {
			case <-w:
				continue
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		w := make(chan struct{})
		m.wait = w
		old := m.cur
		m.mu.Unlock()
		p, err := m.reconnect(ctx, deadline)
		m.mu.Lock()
		m.wait = nil
		if err == nil {
			m.cur = p
			f := Failover{To: p.Node, Epoch: p.Epoch, Ready: time.Now()}
			if old != nil {
				f.From, f.FirstFailure = old.Node, time.Unix(0, old.failedAt.Load())
				f.Cause, _ = old.cause.Load().(string)
			}
			m.failovers = append(m.failovers, f)
			m.log.Info("path to drive restored", "drive", m.o.Drive, "node", p.Node, "epoch", p.Epoch,
				"after", f.Ready.Sub(f.FirstFailure).Round(time.Millisecond))
		}
		m.mu.Unlock()
		close(w)
		if err != nil {
			return nil, err
		}
	}
}

// reconnect resolves and connects until it works or deadline passes.
func (m *Multipath) reconnect(ctx context.Context, deadline time.Time) (*path, error) {
	backoff := 20 * time.Millisecond
	var last error
	for {
		p, err := m.connect(ctx)
		if err == nil {
			return p, nil
		}
		if errors.Is(err, ErrRevoked) {
			m.revoke(err)
			return nil, m.Err()
		}
		last = err
		if time.Now().Add(backoff).After(deadline) {
			return nil, fmt.Errorf("%w: no path to drive %s for %v: %v", errNoPath, m.o.Drive, m.o.Timeout, last)
		}
		select {
		case <-time.After(backoff):
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		backoff = min(backoff*2, 200*time.Millisecond)
	}
}

var errNoPath = fmt.Errorf("%w: drive unreachable", syscall.EIO)

// retryable reports whether err means "this path is gone", as opposed to
// an answer about the request itself.
func retryable(err error) bool {
	if errors.Is(err, nbd.ErrClosed) {
		return true
	}
	var ne *nbd.Error
	if errors.As(err, &ne) {
		return errors.Is(err, nbd.ErrPermission) || ne.Errno == uint32(syscall.ESHUTDOWN)
	}
	return false
}

// do runs one request on a working path, replaying it on the next path
// when this one fails. Run inline by the local server (nbd.RunsInline),
// it forwards only on a working path: a request that would have to wait
// for one, or be replayed, goes back to the server as nbd.ErrNotInline,
// which runs it again on a worker goroutine while the server goes on
// reading, so that a local client that hangs up meanwhile ends ctx and
// its request is not replayed after it gave up.
func (m *Multipath) do(ctx context.Context, fn func(c *nbd.Client) error) error {
	inline := nbd.RunsInline(ctx)
	for {
		var p *path
		if inline {
			if p = m.working(); p == nil {
				return nbd.ErrNotInline
			}
		} else {
			var err error
			if p, err = m.path(ctx); err != nil {
				return err
			}
		}
		c := p.conns[m.rr.Add(1)%uint64(len(p.conns))]
		if p.inflight.Add(1) == 1 {
			p.progress.Store(time.Now().UnixNano())
		}
		err := fn(c)
		p.inflight.Add(-1)
		p.progress.Store(time.Now().UnixNano())
		if err == nil || !retryable(err) {
			return err
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		m.fail(p, err.Error())
		if inline {
			return nbd.ErrNotInline
		}
	}
}

// working returns the current path if it works (as far as is known),
// without waiting for one; nil otherwise.
func (m *Multipath) working() *path {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed.Load() || m.cur == nil || m.cur.broken.Load() || m.wait != nil || m.Err() != nil {
		return nil
	}
	return m.cur
}

// watch resolves the drive again whenever the current path has stalled,
// and drops the path if the drive has moved.
func (m *Multipath) watch(ctx context.Context) {
	t := time.NewTicker(max(m.o.Stall/5, 10*time.Millisecond))
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		m.mu.Lock()
		p := m.cur
		m.mu.Unlock()
		if p == nil || p.broken.Load() || p.inflight.Load() == 0 {
			continue
		}
		if time.Since(time.Unix(0, p.progress.Load())) < m.o.Stall {
			continue
		}
		rctx, cancel := context.WithTimeout(ctx, m.o.Stall)
		r, err := m.o.Resolver.Resolve(rctx, m.o.Drive)
		cancel()
		if errors.Is(err, ErrRevoked) {
			m.revoke(err)
			m.fail(p, err.Error())
			continue
		}
		if err != nil {
			continue // failing over: the next answer decides
		}
		if r.Epoch != p.Epoch || r.Endpoint != p.Endpoint {
			m.fail(p, fmt.Sprintf("no reply for %v and the drive moved to %s (epoch %d)", m.o.Stall, r.Node, r.Epoch))
		}
	}
}

// Open serves the drive under its own name (and as the default export).
func (m *Multipath) Open(_ context.Context, name string) (nbd.Export, error) {
	if name != m.o.Drive && name != "" {
		return nil, fmt.Errorf("%w: this server serves only %s", nbd.ErrUnknownExport, m.o.Drive)
	}
	return local{m}, nil
}

// local is the export one local connection uses; closing it leaves the
// upstream connections to the others.
type local struct{ *Multipath }

func (local) Close() error { return nil }

// InlineWhenIdle reports true: a lone request is forwarded from the
// server's reading goroutine (see nbd.IdleInlineExport).
func (local) InlineWhenIdle() bool { return true }

// List names the one export.
func (m *Multipath) List(context.Context) ([]nbd.ExportInfo, error) {
	return []nbd.ExportInfo{{Name: m.o.Drive, Description: "pooled drive " + m.o.Drive + " (rackpool drive connect)"}}, nil
}

// Size is the drive's size.
func (m *Multipath) Size() uint64 { return m.size }

// Flags are the owner's, with multi-conn: every local connection shares
// the same upstream connections, whose flushes cover every completed
// write.
func (m *Multipath) Flags() nbd.ExportFlags { return m.flags }

// ReadAt forwards a read.
func (m *Multipath) ReadAt(ctx context.Context, p []byte, off uint64) error {
	return m.do(ctx, func(c *nbd.Client) error { return c.ReadAt(ctx, p, off) })
}

// WriteAt forwards a write.
func (m *Multipath) WriteAt(ctx context.Context, p []byte, off uint64, fua bool) error {
	return m.do(ctx, func(c *nbd.Client) error { return c.WriteAt(ctx, p, off, fua) })
}

// Flush forwards a flush.
func (m *Multipath) Flush(ctx context.Context) error {
	return m.do(ctx, func(c *nbd.Client) error { return c.Flush(ctx) })
}

// Trim forwards a trim.
func (m *Multipath) Trim(ctx context.Context, off, length uint64, fua bool) error {
	return m.do(ctx, func(c *nbd.Client) error { return c.Trim(ctx, off, length, fua) })
}

// Zero forwards a write-zeroes.
func (m *Multipath) Zero(ctx context.Context, off, length uint64, f nbd.ZeroFlags) error {
	return m.do(ctx, func(c *nbd.Client) error { return c.Zero(ctx, off, length, f) })
}

// BlockStatus forwards a block-status query.
func (m *Multipath) BlockStatus(ctx context.Context, off, length uint64) ([]nbd.Extent, error) {
	var out []nbd.Extent
	err := m.do(ctx, func(c *nbd.Client) error {
		var err error
		out, err = c.BlockStatus(ctx, off, length)
		return err
	})
	return out, err
}
