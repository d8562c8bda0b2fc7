package memory

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"rackpool/internal/clock"
	"rackpool/internal/netserve"
)

// ServerOptions configures a Server. The zero value of each optional field
// means its default.
type ServerOptions struct {
	Node     string       // this memnode's ID (tokens naming another node are refused)
	Capacity uint64       // bytes of memory to serve
	Key      Key          // token key; may be replaced later with SetKey
	Clock    clock.Clock  // nil means clock.Real{}
	Logger   *slog.Logger // nil means discard
	MaxFrame int          // largest request payload or READ accepted; 0 means DefaultMaxFrame
}

// maxMaxFrame is the largest frame limit a server accepts.
const maxMaxFrame = 1 << 30

// Validate reports whether the options can make a server.
func (o ServerOptions) Validate() error {
	switch {
	case o.Node == "" || len(o.Node) > maxIDLen:
		return fmt.Errorf("memory: node ID must be 1 to %d bytes", maxIDLen)
	case o.Capacity == 0:
		return errors.New("memory: capacity must be positive")
	case o.Capacity > math.MaxInt:
		return fmt.Errorf("memory: capacity %d too large", o.Capacity)
	case o.MaxFrame != 0 && (o.MaxFrame < minMaxFrame || o.MaxFrame > maxMaxFrame):
		return fmt.Errorf("memory: frame limit must be 0 or %d to %d bytes", minMaxFrame, maxMaxFrame)
	}
	return o.Key.check()
}

// ServerStats are a server's counters since it started.
type ServerStats struct {
	Conns    int64  // connections open now
	Accepted uint64 // connections accepted

	Auth   uint64 // AUTH requests, refused ones included
	Read   uint64 // READ requests
	Write  uint64 // WRITE requests
	Append uint64 // APPEND requests
	Stat   uint64 // STAT requests
	Zero   uint64 // ZERO requests
	Ping   uint64 // PING requests
	Map    uint64 // MAP requests

	BytesRead    uint64 // bytes returned by successful READs
	BytesWritten uint64 // bytes stored by successful WRITEs and APPENDs
	Errors       uint64 // requests answered with an error status, and connections dropped for framing errors
}

type serverCounters struct {
	conns        atomic.Int64
	accepted     atomic.Uint64
	ops          [opMax + 1]atomic.Uint64
	bytesRead    atomic.Uint64
	bytesWritten atomic.Uint64
	errors       atomic.Uint64
}

// Server is a memnode: it serves leased regions of its capacity to clients
// that present capability tokens. It is safe for concurrent use.
type Server struct {
	node     string
	capacity uint64
	clock    clock.Clock
	log      *slog.Logger
	maxFrame int
	epoch    uint64
	key      atomic.Pointer[Key]
	mem      *arena
	stats    serverCounters

	// net holds the listeners and connections; its goroutines are the
	// connections' and the reaper's.
	net netserve.Server[struct{}]

	leaseMu      sync.Mutex
	leases       map[string]*lease
	leasePruneAt int

	reapOnce sync.Once

	revMu   sync.RWMutex
	revoked map[string]time.Time // lease -> refused until
	revGen  atomic.Uint64        // bumped by every Revoke
}

// lease is the per-lease state the server keeps.
type lease struct {
	// mu is held shared while a WRITE or APPEND of this lease checks its
	// token and applies, and exclusively by ZERO, so ZERO comes after every
	// write already accepted and before every later one is checked.
	mu   sync.RWMutex
	head atomic.Uint64 // append head, relative to the region start
	// expiry is the latest token expiry seen for the lease; guarded by
	// Server.leaseMu.
	expiry time.Time
	// off and length are the lease's region of the capacity (the same in
	// every token of the lease); guarded by Server.leaseMu.
	off, length uint64
	// grant is the lease's own backing object once a local client has
	// mapped it (MAP): from then on every access to the region, over TCP
	// as well, goes to it instead of the capacity. It is set and cleared
	// under mu held exclusively and the region's stripe locks held for
	// writing, so an access that holds a stripe lock sees one or the
	// other for its whole length.
	grant atomic.Pointer[grantMem]
}

// leaseGrace is how long after its last token expired a lease's state
// (the append head) is kept before it may be pruned.
const leaseGrace = 10 * time.Minute

// NewServer validates opts and returns a server with all of its capacity
// mapped but untouched. Call Serve to accept connections and Close to stop.
func NewServer(opts ServerOptions) (*Server, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	var eb [8]byte
	if _, err := rand.Read(eb[:]); err != nil {
		return nil, fmt.Errorf("memory: epoch: %w", err)
	}
	mem, err := newArena(opts.Capacity)
	if err != nil {
		return nil, err
	}
	s := &Server{
		node:         opts.Node,
		capacity:     opts.Capacity,
		clock:        opts.Clock,
		log:          opts.Logger,
		maxFrame:     opts.MaxFrame,
		epoch:        binary.BigEndian.Uint64(eb[:]) | 1, // never 0
		mem:          mem,
		leases:       make(map[string]*lease),
		leasePruneAt: 64,
		revoked:      make(map[string]time.Time),
	}
	if s.clock == nil {
		s.clock = clock.Real{}
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if s.maxFrame == 0 {
		s.maxFrame = DefaultMaxFrame
	}
	s.SetKey(opts.Key)
	return s, nil
}

// SetKey replaces the key tokens are verified with. Connections keep the
// claims they already verified; later AUTHs (Dial, Renew) need tokens signed
// with k. A key that is not KeySize bytes makes every AUTH fail.
func (s *Server) SetKey(k Key) {
	k = slices.Clone(k)
	s.key.Store(&k)
}

// Epoch returns the random number drawn when the server was created;
// clients see it in the AUTH reply.
func (s *Server) Epoch() uint64 { return s.epoch }

// Revoke makes the server refuse tokens for lease until the instant until,
// on connections already authenticated as well as in new AUTHs. A later
// Revoke of the same lease replaces the instant (an instant not after now
// lifts the revocation). Revocations are pruned once they pass.
//
// Revoking a mapped lease until a future instant discards its backing
// object at once: every mapping of it reads zeros from then on.
func (s *Server) Revoke(lease string, until time.Time) {
	if !s.revoke(lease, until) {
		return
	}
	s.leaseMu.Lock()
	l := s.leases[lease]
	s.leaseMu.Unlock()
	if l != nil {
		l.mu.Lock()
		s.dropGrantLocked(lease, l)
		l.mu.Unlock()
	}
}

// revoke records a revocation and reports whether it is in force.
func (s *Server) revoke(lease string, until time.Time) bool {
	now := s.clock.Now()
	s.revMu.Lock()
	for id, u := range s.revoked {
		if !now.Before(u) {
			delete(s.revoked, id)
		}
	}
	if now.Before(until) {
		s.revoked[lease] = until
	} else {
		delete(s.revoked, lease)
	}
	s.revGen.Add(1)
	s.revMu.Unlock()
	s.log.Info("lease revoked", "lease", lease, "until", until)
	return now.Before(until)
}

func (s *Server) isRevoked(lease string, now time.Time) bool {
	s.revMu.RLock()
	until, ok := s.revoked[lease]
	s.revMu.RUnlock()
	return ok && now.Before(until)
}

// leaseFor returns the state of the lease c names, creating it if needed.
func (s *Server) leaseFor(c Claims, now time.Time) *lease {
	s.leaseMu.Lock()
	defer s.leaseMu.Unlock()
	l := s.leases[c.Lease]
	if l == nil {
		if len(s.leases) >= s.leasePruneAt {
			for id, old := range s.leases {
				if now.Sub(old.expiry) > leaseGrace {
					delete(s.leases, id)
				}
			}
			s.leasePruneAt = max(64, 2*len(s.leases))
		}
		l = &lease{off: c.Offset, length: c.Length}
		s.leases[c.Lease] = l
	}
	if c.Expiry.After(l.expiry) {
		l.expiry = c.Expiry
	}
	return l
}

// LeaseUsage returns, for every lease a client has presented a token for
// that is neither expired nor revoked, the bytes of its region in use: the
// 4 KiB pages written since the server started or the lease was last
// zeroed. A page once written counts until ZERO, since the memory stays
// committed (the client has no way to give a page back).
func (s *Server) LeaseUsage() map[string]uint64 {
	now := s.clock.Now()
	s.leaseMu.Lock()
	type region struct {
		off, length uint64
		l           *lease
	}
	live := make(map[string]region, len(s.leases))
	for id, l := range s.leases {
		if now.Before(l.expiry) {
			live[id] = region{l.off, l.length, l}
		}
	}
	s.leaseMu.Unlock()
	out := make(map[string]uint64, len(live))
	for id, r := range live {
		if s.isRevoked(id, now) || r.off+r.length > s.capacity {
			continue
		}
		if g := r.l.grant.Load(); g != nil {
			out[id] = g.used()
			continue
		}
		out[id] = s.mem.touchedBytes(r.off, r.length)
	}
	return out
}

// Stats returns the server's counters.
func (s *Server) Stats() ServerStats {
	c := &s.stats
	return ServerStats{
		Conns:        c.conns.Load(),
		Accepted:     c.accepted.Load(),
		Auth:         c.ops[opAuth].Load(),
		Read:         c.ops[opRead].Load(),
		Write:        c.ops[opWrite].Load(),
		Append:       c.ops[opAppend].Load(),
		Stat:         c.ops[opStat].Load(),
		Zero:         c.ops[opZero].Load(),
		Ping:         c.ops[opPing].Load(),
		Map:          c.ops[opMap].Load(),
		BytesRead:    c.bytesRead.Load(),
		BytesWritten: c.bytesWritten.Load(),
		Errors:       c.errors.Load(),
	}
}

// Serve accepts connections on l and serves each in its own goroutine until
// Close, then returns nil. It returns an error if l fails for another reason.
// Serve may be called on several listeners.
func (s *Server) Serve(l net.Listener) error {
	if err := s.net.Serve(l, netserve.Handler[struct{}]{Serve: s.serveConn, Logger: s.log}); err != nil {
		return fmt.Errorf("memory: accept: %w", err)
	}
	return nil
}

func (s *Server) serveConn(_ context.Context, tc *netserve.Conn[struct{}]) {
	nc := tc.NC
	c := s.newConn(nc, nc)
	c.nc = nc
	s.stats.accepted.Add(1)
	s.stats.conns.Add(1)
	err := c.serve()
	nc.Close()
	s.stats.conns.Add(-1)
	if err != nil && !s.net.Closed() {
		s.log.Debug("connection closed", "remote", nc.RemoteAddr().String(), "lease", c.claims.Lease, "err", err)
	}
}

// Close stops every Serve, closes every connection, waits for their
// goroutines and unmaps the capacity. It is idempotent.
func (s *Server) Close() error {
	if !s.net.Close() {
		return nil
	}
	s.dropAllGrants()
	return s.mem.close()
}

// Per-connection buffering.
const (
	readBufSize = 64 << 10
	// flushAt is how many bytes of responses a connection gathers before
	// writing them even if more requests are already buffered.
	flushAt = 256 << 10
	// growStep is the smallest step by which the payload buffer grows
	// while a payload arrives.
	growStep = 64 << 10
)

// serverConn is one client connection. Only its goroutine touches it, apart
// from Close closing nc.
type serverConn struct {
	s       *Server
	nc      net.Conn // nil when serving a bare stream (tests)
	br      *bufio.Reader
	w       io.Writer
	out     []byte // responses not yet written
	payload []byte // the current request's payload

	authed  bool
	claims  Claims
	lease   *lease
	revGen  uint64 // s.revGen when revocation was last checked
	revoked bool   // whether the lease was revoked at revGen
}

func (s *Server) newConn(r io.Reader, w io.Writer) *serverConn {
	return &serverConn{
		s:   s,
		br:  bufio.NewReaderSize(r, readBufSize),
		w:   w,
		out: make([]byte, 0, 16<<10),
	}
}

var (
	errTruncated  = errors.New("memory: truncated frame")
	errBadVersion = errors.New("memory: bad protocol version")
	errOversized  = errors.New("memory: frame exceeds limit")
)

// serve reads and answers requests until the stream ends or breaks. It
// returns nil at a clean end of stream between frames.
func (c *serverConn) serve() error {
	for {
		if c.br.Buffered() < reqHdrLen {
			// About to block: send what is gathered first.
			if err := c.flush(); err != nil {
				return err
			}
		}
		b, err := c.br.Peek(reqHdrLen)
		if err != nil {
			if errors.Is(err, io.EOF) && len(b) == 0 {
				return nil
			}
			if errors.Is(err, io.EOF) {
				c.s.stats.errors.Add(1)
				return errTruncated
			}
			return err
		}
		var h reqHeader
		h.decode(b)
		c.br.Discard(reqHdrLen)

		if h.version != protoVersion {
			c.fail(h.tag, statusProtocol, "bad protocol version")
			c.flush()
			return errBadVersion
		}
		if int64(h.length) > int64(c.s.maxFrame) {
			c.fail(h.tag, statusTooLarge, fmt.Sprintf("payload of %d bytes exceeds the frame limit %d", h.length, c.s.maxFrame))
			c.flush()
			return errOversized
		}
		n := int(h.length)
		switch {
		case n == 0:
			c.payload = c.payload[:0]
		case h.op == opWrite || h.op == opAppend || (h.op == opAuth && n <= maxTokenLen):
			if err := c.readPayload(n); err != nil {
				return err
			}
		default:
			// A payload this request does not take: skip it, then refuse.
			if c.br.Buffered() < n {
				if err := c.flush(); err != nil {
					return err
				}
			}
			if _, err := c.br.Discard(n); err != nil {
				c.s.stats.errors.Add(1)
				return errTruncated
			}
			if h.op == opAuth {
				c.fail(h.tag, statusBadToken, "token too long")
			} else {
				c.fail(h.tag, statusProtocol, "unexpected payload")
			}
			continue
		}
		c.handle(&h, c.payload)
		if len(c.out) >= flushAt {
			if err := c.flush(); err != nil {
				return err
			}
		}
	}
}

// readPayload reads n bytes into c.payload. The buffer grows only as the
// bytes arrive, so a peer that announces a large payload and sends nothing
// costs no memory.
func (c *serverConn) readPayload(n int) error {
	if c.br.Buffered() < n {
		if err := c.flush(); err != nil {
			return err
		}
	}
	b := c.payload[:0]
	for len(b) < n {
		if len(b) == cap(b) {
			nb := make([]byte, len(b), min(n, max(2*cap(b), growStep)))
			copy(nb, b)
			b = nb
		}
		m, err := io.ReadFull(c.br, b[len(b):min(n, cap(b))])
		b = b[:len(b)+m]
		if err != nil {
			c.payload = b[:0]
			c.s.stats.errors.Add(1)
			if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
				return errTruncated
			}
			return err
		}
	}
	c.payload = b
	return nil
}

// flush writes the gathered responses.
func (c *serverConn) flush() error {
	if len(c.out) == 0 {
		return nil
	}
	_, err := c.w.Write(c.out)
	c.out = c.out[:0]
	return err
}

// fail queues an error response.
func (c *serverConn) fail(tag uint32, status byte, msg string) {
	c.s.stats.errors.Add(1)
	if len(msg) > maxErrMsg {
		msg = msg[:maxErrMsg]
	}
	c.out = appendRespHeader(c.out, tag, status, uint32(len(msg)))
	c.out = append(c.out, msg...)
}

// ok queues a successful response header for a payload of n bytes, which
// the caller appends.
func (c *serverConn) ok(tag uint32, n int) {
	c.out = appendRespHeader(c.out, tag, statusOK, uint32(n))
}

// rightsFor is what each opcode needs beyond a valid token.
var rightsFor = [...]Rights{
	opRead:   RightRead,
	opWrite:  RightWrite,
	opAppend: RightWrite,
	opStat:   0,
	opZero:   RightAdmin,
	opMap:    RightRead,
}

func (c *serverConn) handle(h *reqHeader, payload []byte) {
	if h.op == 0 || h.op > opMax {
		c.fail(h.tag, statusProtocol, fmt.Sprintf("unknown opcode %d", h.op))
		return
	}
	c.s.stats.ops[h.op].Add(1)
	if h.flags != 0 {
		c.fail(h.tag, statusProtocol, "flags must be 0")
		return
	}
	switch h.op {
	case opPing:
		c.ok(h.tag, 0)
	case opAuth:
		c.auth(h.tag, payload)
	case opRead:
		c.read(h)
	case opWrite:
		c.write(h, payload)
	case opAppend:
		c.append(h, payload)
	case opStat:
		c.stat(h)
	case opZero:
		c.zero(h)
	case opMap:
		c.mapRegion(h)
	}
}

// check reports why the connection's token does not allow op now, as a
// status and message; status 0 means it does.
func (c *serverConn) check(op byte) (byte, string) {
	if !c.authed {
		return statusNoAuth, "no token presented"
	}
	now := c.s.clock.Now()
	if !now.Before(c.claims.Expiry) {
		return statusExpired, "token expired"
	}
	if g := c.s.revGen.Load(); g != c.revGen || c.revoked {
		c.revoked = c.s.isRevoked(c.claims.Lease, now)
		c.revGen = g
	}
	if c.revoked {
		return statusRevoked, "lease revoked"
	}
	if need := rightsFor[op]; c.claims.Rights&need != need {
		return statusRights, fmt.Sprintf("%s needs rights %v, token has %v", opName(op), need, c.claims.Rights)
	}
	return statusOK, ""
}

// inRegion reports whether [off, off+n) lies in the token's region.
func (c *serverConn) inRegion(off, n uint64) bool {
	return off <= c.claims.Length && n <= c.claims.Length-off
}

func (c *serverConn) rangeErr(tag uint32, off, n uint64) {
	c.fail(tag, statusRange, fmt.Sprintf("%d bytes at %d outside region of %d bytes", n, off, c.claims.Length))
}

func (c *serverConn) auth(tag uint32, payload []byte) {
	s := c.s
	now := s.clock.Now()
	claims, err := (*s.key.Load()).Verify(string(payload), now)
	switch {
	case errors.Is(err, ErrExpired):
		c.fail(tag, statusExpired, "token expired")
		return
	case err != nil:
		c.fail(tag, statusBadToken, "token refused")
		return
	case claims.Node != s.node:
		c.fail(tag, statusWrongNode, "token is for node "+claims.Node+", this is "+s.node)
		return
	case claims.Offset > s.capacity || claims.Length > s.capacity-claims.Offset:
		c.fail(tag, statusWrongNode, "token region outside this node's capacity")
		return
	}
	g := s.revGen.Load()
	if s.isRevoked(claims.Lease, now) {
		c.fail(tag, statusRevoked, "lease revoked")
		return
	}
	c.authed = true
	c.claims = claims
	c.lease = s.leaseFor(claims, now)
	c.revGen, c.revoked = g, false
	s.log.Debug("authenticated", "lease", claims.Lease, "rights", claims.Rights.String(), "expiry", claims.Expiry)

	c.ok(tag, authRespLen)
	c.out = binary.BigEndian.AppendUint64(c.out, s.epoch)
	c.out = binary.BigEndian.AppendUint32(c.out, uint32(s.maxFrame))
	c.out = binary.BigEndian.AppendUint32(c.out, 0)
}

func (c *serverConn) read(h *reqHeader) {
	if st, msg := c.check(opRead); st != statusOK {
		c.fail(h.tag, st, msg)
		return
	}
	n := uint64(h.count)
	if n > uint64(c.s.maxFrame) {
		c.fail(h.tag, statusTooLarge, fmt.Sprintf("read of %d bytes exceeds the frame limit %d", n, c.s.maxFrame))
		return
	}
	if !c.inRegion(h.offset, n) {
		c.rangeErr(h.tag, h.offset, n)
		return
	}
	c.ok(h.tag, int(n))
	start := len(c.out)
	c.out = slices.Grow(c.out, int(n))[:start+int(n)]
	c.s.readRegion(c.lease, c.out[start:], c.claims.Offset, h.offset)
	c.s.stats.bytesRead.Add(n)
}

func (c *serverConn) write(h *reqHeader, payload []byte) {
	n := uint64(len(payload))
	l := c.lease
	if l != nil {
		l.mu.RLock()
		defer l.mu.RUnlock()
	}
	if st, msg := c.check(opWrite); st != statusOK {
		c.fail(h.tag, st, msg)
		return
	}
	if !c.inRegion(h.offset, n) {
		c.rangeErr(h.tag, h.offset, n)
		return
	}
	c.s.writeRegion(l, c.claims.Offset, h.offset, payload)
	c.s.stats.bytesWritten.Add(n)
	c.ok(h.tag, 0)
}

func (c *serverConn) append(h *reqHeader, payload []byte) {
	n := uint64(len(payload))
	l := c.lease
	if l != nil {
		l.mu.RLock()
		defer l.mu.RUnlock()
	}
	if st, msg := c.check(opAppend); st != statusOK {
		c.fail(h.tag, st, msg)
		return
	}
	var head uint64
	for {
		head = l.head.Load()
		if !c.inRegion(head, n) {
			c.fail(h.tag, statusNoSpace, fmt.Sprintf("%d bytes at head %d do not fit in region of %d bytes", n, head, c.claims.Length))
			return
		}
		if l.head.CompareAndSwap(head, head+n) {
			break
		}
	}
	c.s.writeRegion(l, c.claims.Offset, head, payload)
	c.s.stats.bytesWritten.Add(n)
	c.ok(h.tag, appendRespLen)
	c.out = binary.BigEndian.AppendUint64(c.out, head)
}

func (c *serverConn) stat(h *reqHeader) {
	if st, msg := c.check(opStat); st != statusOK {
		c.fail(h.tag, st, msg)
		return
	}
	c.ok(h.tag, statRespLen)
	c.out = binary.BigEndian.AppendUint64(c.out, c.claims.Length)
	c.out = binary.BigEndian.AppendUint64(c.out, c.lease.head.Load())
	c.out = binary.BigEndian.AppendUint64(c.out, uint64(c.claims.Expiry.UnixNano()))
	c.out = binary.BigEndian.AppendUint64(c.out, c.s.epoch)
}

func (c *serverConn) zero(h *reqHeader) {
	if st, msg := c.check(opZero); st != statusOK {
		c.fail(h.tag, st, msg)
		return
	}
	until := time.Unix(0, int64(h.offset))
	l := c.lease
	l.mu.Lock()
	c.s.revoke(c.claims.Lease, until)
	c.s.dropGrantLocked(c.claims.Lease, l)
	c.s.mem.zero(c.claims.Offset, c.claims.Length)
	l.head.Store(0)
	l.mu.Unlock()
	c.s.log.Info("region zeroed", "lease", c.claims.Lease, "offset", c.claims.Offset, "length", c.claims.Length)
	c.ok(h.tag, 0)
}
