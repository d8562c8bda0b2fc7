package cache

import (
	"context"
	"errors"
	"fmt"
	"hash/maphash"
	"log/slog"
	"math"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"rackpool/internal/clock"
	"rackpool/internal/netserve"
)

// Remote is the far tier: a byte region the cache manages as a log.
// *memory.Client (internal/memory) satisfies it. Implementations must be safe
// for concurrent use.
type Remote interface {
	// Read reads exactly len(p) bytes at off into p.
	Read(ctx context.Context, off uint64, p []byte) error
	// Write writes the concatenation of bufs at off.
	Write(ctx context.Context, off uint64, bufs ...[]byte) error
}

// Immediate is implemented by a Remote whose accesses are loads and stores
// of memory mapped into this process (a mapped lease): they cannot stall on
// a network, so the cache does not bound each one with a timeout.
type Immediate interface {
	Immediate() bool
}

// Options configure a Cache. The zero value of every field but LocalMemory
// means its default.
type Options struct {
	// LocalMemory is the number of bytes of item data (key, value and
	// per-item overhead, plus the index entries of remote items) kept in
	// local memory. Required, > 0.
	LocalMemory int64
	// Remote is the far tier; nil means local only (evictions drop, like
	// memcached).
	Remote Remote
	// RemoteSize is the size in bytes of the remote region.
	RemoteSize uint64
	// PromoteOnHit moves an item found in the remote tier back to local
	// memory (the local LRU victim goes remote in its place).
	PromoteOnHit bool
	// MaxItemSize is the largest value accepted, like memcached's -I; larger
	// values are refused with "SERVER_ERROR object too large for cache".
	// Default 1 MiB.
	MaxItemSize int
	// Logger receives state changes (remote tier failed or recovered);
	// default slog.Default().
	Logger *slog.Logger
	// Clock is the time source for exptime, touch and flush_all delays;
	// default clock.Real{}.
	Clock clock.Clock
	// RemoteTimeout bounds one remote read or write; default 2s.
	RemoteTimeout time.Duration

	// shards overrides the number of local shards (tests; power of two).
	shards int
}

// Defaults.
const (
	DefaultMaxItemSize   = 1 << 20
	DefaultRemoteTimeout = 2 * time.Second
	defaultShards        = 64
	// remoteRetry is how long evictions drop before the cache tries a failed
	// remote tier again.
	remoteRetry = time.Second
)

// Validate reports whether the options are usable.
func (o *Options) Validate() error {
	if o.LocalMemory <= 0 {
		return fmt.Errorf("%w: LocalMemory must be > 0", ErrBadOptions)
	}
	if o.MaxItemSize < 0 {
		return fmt.Errorf("%w: MaxItemSize must be >= 0", ErrBadOptions)
	}
	if o.shards != 0 && o.shards&(o.shards-1) != 0 {
		return fmt.Errorf("%w: shard count must be a power of two", ErrBadOptions)
	}
	return nil
}

// Cache is a memcached-compatible cache with a local LRU tier and an optional
// remote log tier. It is safe for concurrent use.
type Cache struct {
	logger        *slog.Logger
	clock         clock.Clock
	maxItem       int
	promote       bool
	remoteTimeout time.Duration
	started       time.Time

	seed   maphash.Seed
	shards []shard
	mask   uint64
	// classes are the memcached slab-class accounting (slabs.go).
	classes [maxSlabClasses]classStats
	sizes   atomic.Pointer[sizeHistogram] // nil until stats sizes_enable
	// statsBase is the counters at the last `stats reset` (nil: none),
	// which the protocol's stats report from (Stats stays cumulative).
	statsBase atomic.Pointer[statsBaseline]
	detail    prefixStats // stats detail

	limit atomic.Int64  // LocalMemory (cache_memlimit changes it)
	used  atomic.Int64  // bytes charged against limit
	tick  atomic.Uint64 // LRU access clock
	cas   atomic.Uint64 // last CAS unique handed out
	// flushAt is the unix second at which a delayed flush_all takes effect
	// (0: none pending); items stored before it are invalid from then on.
	flushAt atomic.Int64

	tier   atomic.Pointer[tier] // nil: local only
	tierMu sync.Mutex           // serialises SetRemote

	st globalStats

	// net holds the listeners and the connections, each with its ID in
	// stats conns.
	net netserve.Server[*conn]
	// bytesMu is held while a closing connection adds the bytes it read
	// to st.bytesRead and while Stats sums those with the live ones, so
	// no byte is counted twice or never.
	bytesMu   sync.Mutex
	verbosity atomic.Int32
}

// New returns a cache configured by opts.
func New(opts Options) (*Cache, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	c := &Cache{
		logger:        opts.Logger,
		clock:         opts.Clock,
		maxItem:       opts.MaxItemSize,
		promote:       opts.PromoteOnHit,
		remoteTimeout: opts.RemoteTimeout,
		seed:          maphash.MakeSeed(),
	}
	if c.logger == nil {
		c.logger = slog.Default()
	}
	if c.clock == nil {
		c.clock = clock.Real{}
	}
	if c.maxItem == 0 {
		c.maxItem = DefaultMaxItemSize
	}
	if c.remoteTimeout == 0 {
		c.remoteTimeout = DefaultRemoteTimeout
	}
	n := opts.shards
	if n == 0 {
		n = defaultShards
	}
	c.shards = make([]shard, n)
	for i := range c.shards {
		c.shards[i].m = make(map[string]*item)
		c.shards[i].tailTick.Store(math.MaxUint64)
	}
	c.mask = uint64(n - 1)
	c.limit.Store(opts.LocalMemory)
	c.started = c.clock.Now()
	if opts.Remote != nil {
		c.SetRemote(opts.Remote, opts.RemoteSize)
	}
	return c, nil
}

// Serve accepts memcached protocol connections on l until Close. Accept
// failures a wait can cure (out of file descriptors) are retried with
// backoff (internal/netserve). It returns nil after Close, and an error
// when l is closed under an open cache.
func (c *Cache) Serve(l net.Listener) error {
	return c.net.Serve(l, netserve.Handler[*conn]{Open: c.openConn, Serve: c.serveConn, Logger: c.logger})
}

// openConn makes the state of a connection accepted as number id.
func (c *Cache) openConn(nc net.Conn, id int64) *conn {
	cn := newConn(c, nc)
	cn.id = id
	cn.lastCmd.Store(c.now())
	return cn
}

func (c *Cache) serveConn(_ context.Context, tc *netserve.Conn[*conn]) {
	c.st.currConns.Add(1)
	c.st.totalConns.Add(1)
	tc.State.serve()
	c.st.currConns.Add(-1)
}

// Close stops every Serve loop, closes client connections and waits for
// their goroutines. It is idempotent.
func (c *Cache) Close() error {
	c.net.Close()
	return nil
}

// SetRemote attaches r (a region of size bytes) as the remote tier, replacing
// any previous one, whose index is dropped: its items become misses. A nil r
// detaches the remote tier. A region too small for two segments leaves the
// cache local only.
func (c *Cache) SetRemote(r Remote, size uint64) {
	c.tierMu.Lock()
	defer c.tierMu.Unlock()
	var t *tier
	if r != nil {
		var err error
		t, err = newTier(c, r, size)
		if err != nil {
			c.logger.Warn("cache: remote tier not attached", "err", err)
			t = nil
		}
	}
	old := c.tier.Swap(t)
	if old != nil {
		old.retire()
		c.dropTier(old)
	}
	if t != nil {
		c.logger.Info("cache: remote tier attached", "bytes", size, "segments", len(t.segs), "segment_bytes", t.segSize)
	}
}

// MoveRemote replaces the remote tier with r (size bytes) and moves the
// old tier's live records into it, so a resize of the pooled memory under
// the cache loses nothing that fits: new evictions go to r at once, a
// record still in the old tier is read from it until it is moved (each
// index entry names its own tier), and the old tier is retired only once
// every record was moved or could not be (a failed read, or a new tier too
// small: those become misses). The caller releases the old region after
// MoveRemote returns. It returns how many records moved and how many were
// lost.
func (c *Cache) MoveRemote(r Remote, size uint64) (moved, lost int, err error) {
	if r == nil {
		return 0, 0, errors.New("cache: no remote to move to")
	}
	c.tierMu.Lock()
	defer c.tierMu.Unlock()
	t, err := newTier(c, r, size)
	if err != nil {
		return 0, 0, err
	}
	old := c.tier.Swap(t)
	c.st.remoteMoves.Add(1)
	c.logger.Info("cache: remote tier attached", "bytes", size, "segments", len(t.segs), "segment_bytes", t.segSize, "moving", old != nil)
	if old == nil {
		return 0, 0, nil
	}
	type pending struct {
		ref   remoteRef
		flags uint32
		exp   int64
		cas   uint64
	}
	var todo []pending
	for i := range c.shards {
		sh := &c.shards[i]
		sh.mu.Lock()
		for _, e := range sh.m {
			if e.where == whereRemote && e.seg.t == old {
				todo = append(todo, pending{ref: refOf(e), flags: e.flags, exp: e.exp, cas: e.cas})
			}
		}
		sh.mu.Unlock()
	}
	for _, p := range todo {
		pb, v, rerr := c.readRemote(&p.ref)
		if rerr != nil {
			continue // moved meanwhile (overwritten, deleted) or unreadable: dropped below if still there
		}
		rec := spillRec{key: p.ref.e.key, value: v, flags: p.flags, exp: p.exp, cas: p.cas}
		t.mu.Lock()
		seg, off, crc, werr := t.appendLocked(&rec)
		if werr == nil {
			sh := c.shardForString(p.ref.e.key)
			sh.mu.Lock()
			e := p.ref.e
			if sh.m[e.key] == e && e.where == whereRemote && e.seg == p.ref.seg && e.pos == p.ref.pos {
				p.ref.seg.unlink(e)
				e.seg, e.pos, e.crc = seg, off, crc
				seg.link(e)
				moved++
			}
			sh.mu.Unlock()
		} else if werr != errRecordTooLarge {
			t.dirty = true
			t.mu.Unlock()
			putBuf(pb)
			t.fail(werr)
			break
		}
		t.mu.Unlock()
		putBuf(pb)
	}
	old.retire()
	lost = c.dropTier(old)
	c.st.remoteMoved.Add(int64(moved))
	c.st.remoteMoveDrops.Add(int64(lost))
	return moved, lost, nil
}

// now is the cache's current unix time in seconds.
func (c *Cache) now() int64 { return c.clock.Now().Unix() }

// nextCAS hands out a fresh CAS unique.
func (c *Cache) nextCAS() uint64 { return c.cas.Add(1) }

// shardFor returns the shard owning key.
func (c *Cache) shardFor(key []byte) *shard {
	return &c.shards[maphash.Bytes(c.seed, key)&c.mask]
}

func (c *Cache) shardForString(key string) *shard {
	return &c.shards[maphash.String(c.seed, key)&c.mask]
}
