//go:build linux

package memory

import (
	"context"
	"encoding/binary"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// Mapping is a leased region mapped into this process: Bytes is the region
// itself, reached with loads and stores. It stands for a CXL memory device
// (a DAX device or a CPU-less NUMA node) attached to this host; the memnode
// hands it over its local socket (Map) after checking the token.
//
// A Mapping stays valid memory until Close, whatever happens to the lease:
// once the lease is released, revoked or expired the node discards the
// region's pages and Bytes reads zeros. Read and Write check the lease's
// expiry as this process's clock sees it and refuse with ErrExpired after
// it, so a careful holder never mistakes the zeros for data.
type Mapping struct {
	buf    []byte
	epoch  uint64
	rights Rights

	expiry atomic.Int64 // Unix nanoseconds
	now    func() time.Time

	// use is held shared by Read and Write and exclusively by Close, so
	// that the region is never unmapped under a copy.
	use sync.RWMutex

	mu     sync.Mutex // conn, closed; taken after use
	conn   *net.UnixConn
	closed bool
}

// Map asks the memnode listening on the unix socket path for the region
// token grants, maps it and returns it. The node refuses a token that does
// not verify, has expired or was revoked (ErrBadToken, ErrExpired,
// ErrRevoked, ErrWrongNode). A read-only token gives a read-only mapping:
// storing into it faults.
func Map(ctx context.Context, path, token string) (*Mapping, error) {
	if len(token) > maxTokenLen {
		return nil, fmt.Errorf("map %s: %w: token too long", path, ErrBadToken)
	}
	var d net.Dialer
	nc, err := d.DialContext(ctx, "unix", path)
	if err != nil {
		return nil, fmt.Errorf("map %s: %w", path, err)
	}
	uc := nc.(*net.UnixConn)
	m, err := mapOver(ctx, uc, token)
	if err != nil {
		uc.Close()
		return nil, fmt.Errorf("map %s: %w", path, err)
	}
	return m, nil
}

func mapOver(ctx context.Context, uc *net.UnixConn, token string) (m *Mapping, err error) {
	if dl, ok := ctx.Deadline(); ok {
		uc.SetDeadline(dl)
	}
	stop := context.AfterFunc(ctx, func() { uc.SetDeadline(aLongTimeAgo) })
	defer func() {
		if !stop() && err != nil {
			err = ctx.Err()
		}
	}()
	if _, err := authOver(uc, token, 1); err != nil {
		return nil, err
	}
	if err := sendFrame(uc, opMap, 2, nil); err != nil {
		return nil, err
	}
	p, fd, err := readMapReply(uc, 2)
	if err != nil {
		return nil, err
	}
	length := binary.BigEndian.Uint64(p)
	expiry := int64(binary.BigEndian.Uint64(p[8:]))
	epoch := binary.BigEndian.Uint64(p[16:])
	defer unix.Close(fd)
	claims, err := peekClaims(token)
	if err != nil {
		return nil, err // the node accepted it, so this does not happen
	}
	if length != claims.Length {
		return nil, fmt.Errorf("%w: node offers %d bytes, the token grants %d", ErrProtocol, length, claims.Length)
	}
	prot := unix.PROT_READ
	if claims.Rights&RightWrite != 0 {
		prot |= unix.PROT_WRITE
	}
	buf, err := unix.Mmap(fd, 0, int(length), prot, unix.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("mmap %d bytes: %w", length, err)
	}
	if err := uc.SetDeadline(time.Time{}); err != nil {
		unix.Munmap(buf)
		return nil, err
	}
	m = &Mapping{buf: buf, epoch: epoch, rights: claims.Rights, conn: uc, now: time.Now}
	m.expiry.Store(expiry)
	return m, nil
}

// sendFrame writes one request frame.
func sendFrame(uc *net.UnixConn, op byte, tag uint32, payload []byte) error {
	var hdr [reqHdrLen]byte
	h := reqHeader{version: protoVersion, op: op, tag: tag, length: uint32(len(payload))}
	h.encode(hdr[:])
	bufs := net.Buffers{hdr[:], payload}
	_, err := bufs.WriteTo(uc)
	return err
}

// authOver presents token on uc and returns the AUTH reply's epoch.
func authOver(uc *net.UnixConn, token string, tag uint32) (uint64, error) {
	if err := sendFrame(uc, opAuth, tag, []byte(token)); err != nil {
		return 0, err
	}
	p, err := readReply(uc, tag, authRespLen, nil)
	if err != nil {
		return 0, fmt.Errorf("auth: %w", err)
	}
	return binary.BigEndian.Uint64(p), nil
}

// readMapReply reads the MAP answer and the descriptor that comes with it.
func readMapReply(uc *net.UnixConn, tag uint32) ([]byte, int, error) {
	fd := -1
	p, err := readReply(uc, tag, mapRespLen, &fd)
	if err != nil {
		if fd >= 0 {
			unix.Close(fd)
		}
		return nil, -1, err
	}
	if fd < 0 {
		return nil, -1, fmt.Errorf("%w: MAP answered without a descriptor", ErrProtocol)
	}
	return p, fd, nil
}

// readReply reads one response frame with tag and a want-byte payload. When
// fd is not nil, a descriptor passed with the frame is stored there (any
// further ones are closed).
func readReply(uc *net.UnixConn, tag uint32, want int, fd *int) ([]byte, error) {
	var buf [respHdrLen + maxErrMsg]byte
	oob := make([]byte, unix.CmsgSpace(4*4))
	got := 0
	for got < respHdrLen {
		n, oobn, _, _, err := uc.ReadMsgUnix(buf[got:respHdrLen], oob)
		if oobn > 0 {
			if err := takeFDs(oob[:oobn], fd); err != nil {
				return nil, err
			}
		}
		if err != nil {
			return nil, err
		}
		if n == 0 {
			return nil, fmt.Errorf("%w: connection closed", ErrClosed)
		}
		got += n
	}
	rtag, status, n := binary.BigEndian.Uint32(buf[:]), buf[4], binary.BigEndian.Uint32(buf[8:])
	if rtag != tag {
		return nil, fmt.Errorf("%w: answer with tag %d, want %d", ErrProtocol, rtag, tag)
	}
	if status != statusOK {
		if n > maxErrMsg {
			return nil, fmt.Errorf("%w: error message of %d bytes", ErrProtocol, n)
		}
		msg := buf[respHdrLen : respHdrLen+n]
		if err := readFull(uc, msg); err != nil {
			return nil, err
		}
		return nil, fmt.Errorf("%w (%s)", statusErr(status), msg)
	}
	if int(n) != want {
		return nil, fmt.Errorf("%w: answer of %d bytes, want %d", ErrProtocol, n, want)
	}
	p := buf[respHdrLen : respHdrLen+want]
	if err := readFull(uc, p); err != nil {
		return nil, err
	}
	return p, nil
}

func readFull(uc *net.UnixConn, p []byte) error {
	for len(p) > 0 {
		n, err := uc.Read(p)
		if err != nil {
			return err
		}
		p = p[n:]
	}
	return nil
}

// takeFDs parses the control messages in oob: the first descriptor goes to
// *fd (when fd is not nil and empty), every other one is closed.
func takeFDs(oob []byte, fd *int) error {
	msgs, err := unix.ParseSocketControlMessage(oob)
	if err != nil {
		return fmt.Errorf("%w: control message: %w", ErrProtocol, err)
	}
	for _, m := range msgs {
		fds, err := unix.ParseUnixRights(&m)
		if err != nil {
			continue
		}
		for _, f := range fds {
			if fd != nil && *fd < 0 {
				*fd = f
				continue
			}
			unix.Close(f)
		}
	}
	return nil
}

// Bytes returns the mapped region. It stays mapped until Close; do not use
// it after.
func (m *Mapping) Bytes() []byte { return m.buf }

// Len is the region's length.
func (m *Mapping) Len() uint64 { return uint64(len(m.buf)) }

// Epoch is the node's epoch when the region was mapped.
func (m *Mapping) Epoch() uint64 { return m.epoch }

// Expiry is the expiry of the last token presented.
func (m *Mapping) Expiry() time.Time { return time.Unix(0, m.expiry.Load()) }

// check refuses an access after the expiry or Close, or out of range.
func (m *Mapping) check(off uint64, n int) error {
	if m.now().UnixNano() >= m.expiry.Load() {
		return ErrExpired
	}
	if m.buf == nil {
		return ErrClosed
	}
	if off > uint64(len(m.buf)) || uint64(n) > uint64(len(m.buf))-off {
		return fmt.Errorf("%w: %d bytes at %d, region of %d", ErrRange, n, off, len(m.buf))
	}
	return nil
}

// Read copies len(p) bytes at off into p: a load from the mapped region,
// no round trip. It implements the cache's Remote with Write.
func (m *Mapping) Read(_ context.Context, off uint64, p []byte) error {
	m.use.RLock()
	defer m.use.RUnlock()
	if err := m.check(off, len(p)); err != nil {
		return err
	}
	copy(p, m.buf[off:])
	return nil
}

// Write stores the concatenation of bufs at off.
func (m *Mapping) Write(_ context.Context, off uint64, bufs ...[]byte) error {
	n := 0
	for _, b := range bufs {
		n += len(b)
	}
	m.use.RLock()
	defer m.use.RUnlock()
	if err := m.check(off, n); err != nil {
		return err
	}
	if m.rights&RightWrite == 0 {
		return ErrRights
	}
	for _, b := range bufs {
		off += uint64(copy(m.buf[off:], b))
	}
	return nil
}

// Renew presents a renewed token for the same lease to the node, which then
// keeps the region past the old expiry.
func (m *Mapping) Renew(ctx context.Context, token string) error {
	claims, err := peekClaims(token)
	if err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return ErrClosed
	}
	if claims.Length != uint64(len(m.buf)) {
		return fmt.Errorf("%w: the renewed token grants %d bytes, the mapping has %d", ErrRange, claims.Length, len(m.buf))
	}
	if dl, ok := ctx.Deadline(); ok {
		m.conn.SetDeadline(dl)
		defer m.conn.SetDeadline(time.Time{})
	}
	epoch, err := authOver(m.conn, token, 3)
	if err != nil {
		return fmt.Errorf("renew: %w", err)
	}
	if epoch != m.epoch {
		return ErrNodeRestarted
	}
	m.expiry.Store(claims.Expiry.UnixNano())
	return nil
}

// Immediate reports that Read and Write are copies within this process's
// memory: they never wait on the node.
func (m *Mapping) Immediate() bool { return true }

// Stat asks the node about the region over the mapping's socket: it fails
// when the node is gone or the lease was revoked or expired there.
func (m *Mapping) Stat(ctx context.Context) (RegionStat, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return RegionStat{}, ErrClosed
	}
	if dl, ok := ctx.Deadline(); ok {
		m.conn.SetDeadline(dl)
		defer m.conn.SetDeadline(time.Time{})
	}
	if err := sendFrame(m.conn, opStat, 4, nil); err != nil {
		return RegionStat{}, fmt.Errorf("stat: %w: %w", ErrClosed, err)
	}
	p, err := readReply(m.conn, 4, statRespLen, nil)
	if err != nil {
		return RegionStat{}, fmt.Errorf("stat: %w", err)
	}
	st := RegionStat{
		Size:   binary.BigEndian.Uint64(p),
		Head:   binary.BigEndian.Uint64(p[8:]),
		Expiry: time.Unix(0, int64(binary.BigEndian.Uint64(p[16:]))),
		Epoch:  binary.BigEndian.Uint64(p[24:]),
	}
	if st.Epoch != m.epoch {
		return st, ErrNodeRestarted
	}
	return st, nil
}

// Close unmaps the region and closes the socket; it waits for Reads and
// Writes in progress, but Bytes must no longer be in use. The lease itself
// is released through the control plane. Close is idempotent.
func (m *Mapping) Close() error {
	m.use.Lock()
	defer m.use.Unlock()
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return nil
	}
	m.closed = true
	m.expiry.Store(0)
	err := m.conn.Close()
	if e := unix.Munmap(m.buf); e != nil && err == nil {
		err = e
	}
	m.buf = nil
	return err
}
