package cache

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
)

// Per-connection limits.
const (
	readBufSize = 16 << 10
	// maxShortLine is memcached's limit on a command line that is not a
	// multi-get: a longer line without a newline closes the connection.
	maxShortLine = 2048
	// maxLine bounds a multi-get line.
	maxLine = 2 << 20
	// smallValue: values up to this size are copied into the output buffer;
	// larger ones are queued by reference for a vectored write.
	smallValue = 2048
	// flushAt: pending output beyond this is written before more is added.
	flushBytes = 1 << 20
	maxIovecs  = 512
	maxTokens  = 24 // memcached's MAX_TOKENS, including the terminal token
)

var (
	errLineTooLong = errors.New("cache: command line too long")
	errQuit        = errors.New("cache: quit")
	errHangUp      = errors.New("cache: HTTP request line: hang up")
)

var readerPool = sync.Pool{New: func() any { return bufio.NewReaderSize(nil, readBufSize) }}

// conn is one client connection. Commands are handled in order; replies
// accumulate in out and are written (one writev) when the connection must
// wait for the client to send more of a command (waitCommand), so
// pipelined requests are answered in batches.
type conn struct {
	c  *Cache
	nc net.Conn
	r  *bufio.Reader
	cr countingReader

	out     outBuf
	long    []byte
	toks    [maxTokens][]byte
	noreply bool
	now     int64
	hdr     []byte // meta reply line scratch
	key     []byte // decoded base64 key scratch

	id      int64        // in stats conns
	lastCmd atomic.Int64 // unix seconds of the last command (stats conns)
}

// countingReader counts the bytes a connection read; Stats adds the live
// connections' counts to the closed ones', so bytes_read is exact at any
// moment, as memcached's per-thread counters are.
type countingReader struct {
	r io.Reader
	n atomic.Int64
}

func (cr *countingReader) Read(p []byte) (int, error) {
	n, err := cr.r.Read(p)
	cr.n.Add(int64(n))
	return n, err
}

func newConn(c *Cache, nc net.Conn) *conn {
	cn := &conn{c: c, nc: nc}
	cn.cr.r = nc
	cn.r = readerPool.Get().(*bufio.Reader)
	cn.r.Reset(&cn.cr)
	cn.out.init()
	return cn
}

func (cn *conn) serve() {
	defer func() {
		cn.out.releaseAll()
		cn.nc.Close()
		cn.r.Reset(nil)
		readerPool.Put(cn.r)
		cn.c.bytesMu.Lock() // with Stats' sum: no byte counted twice or never
		cn.c.st.bytesRead.Add(cn.cr.n.Swap(0))
		cn.c.bytesMu.Unlock()
	}()
	for {
		if cn.waitCommand(1) != nil {
			return
		}
		if b, err := cn.r.Peek(1); err != nil {
			return
		} else if b[0] == binReqMagic {
			if err := cn.binaryCommand(); err != nil {
				cn.flush()
				return
			}
			continue
		}
		line, err := cn.readLine()
		if err != nil {
			return
		}
		cn.now = cn.c.now()
		cn.lastCmd.Store(cn.now)
		if err := cn.dispatch(line); err != nil {
			if err != errHangUp { // memcached drops what it had not sent yet
				cn.flush()
			}
			return
		}
		if cn.out.pending() > flushBytes || len(cn.out.bufs) > maxIovecs {
			if cn.flush() != nil {
				return
			}
		}
	}
}

func (cn *conn) flush() error {
	n, err := cn.out.writeTo(cn.nc)
	cn.c.st.bytesWritten.Add(n)
	return err
}

// waitCommand is called before reading more of a command (its line, a
// binary request header) when have bytes of it would have to be buffered
// first: if fewer are, the connection is about to wait for the client, and
// the replies gathered so far are written first, as memcached does ("need
// more data": it flushes its buffered responses in the meantime). Without
// it a client that sent complete commands and then part of another waited
// for their replies forever (memcached's t/issue_70.t sends a refused length
// followed by bytes without a newline and waits for the CLIENT_ERROR). Like
// memcached, the connection does not write while it reads a data block or
// swallows a refused one: those replies go out with the next command.
func (cn *conn) waitCommand(have int) error {
	if cn.r.Buffered() >= have {
		return nil
	}
	return cn.flush()
}

// readLine returns the next command line without its "\r\n" (or "\n"),
// truncated at a NUL byte as memcached's C string handling does.
//
// Like memcached, it hangs up on more than maxShortLine bytes without a
// newline unless they start a multi-get (memcached checks what it has
// buffered after every read; so does this, before the buffer is full).
func (cn *conn) readLine() ([]byte, error) {
	for {
		n := cn.r.Buffered()
		if n > 0 {
			b, _ := cn.r.Peek(n)
			if bytes.IndexByte(b, '\n') >= 0 {
				break
			}
			if n > maxShortLine && !isMultiGet(b) {
				return nil, errLineTooLong
			}
		}
		if err := cn.waitCommand(n + 1); err != nil {
			return nil, err
		}
		if _, err := cn.r.Peek(n + 1); err != nil {
			if err == bufio.ErrBufferFull {
				break // a line longer than the buffer: gathered below
			}
			return nil, err
		}
	}
	line, err := cn.r.ReadSlice('\n')
	if err == bufio.ErrBufferFull {
		cn.long = append(cn.long[:0], line...)
		for err == bufio.ErrBufferFull {
			if len(cn.long) > maxShortLine && !isMultiGet(cn.long) {
				return nil, errLineTooLong
			}
			if len(cn.long) > maxLine {
				return nil, errLineTooLong
			}
			line, err = cn.r.ReadSlice('\n')
			cn.long = append(cn.long, line...)
		}
		line = cn.long
		if cap(cn.long) > 64<<10 {
			cn.long = nil // do not keep a huge buffer for the connection's life
		}
	}
	if err != nil {
		return nil, err
	}
	line = line[:len(line)-1]
	if len(line) > 1 && line[len(line)-1] == '\r' {
		line = line[:len(line)-1]
	}
	if i := bytes.IndexByte(line, 0); i >= 0 {
		line = line[:i]
	}
	return line, nil
}

// isMultiGet is memcached's test for a long line it keeps reading.
func isMultiGet(b []byte) bool {
	i := 0
	for i < len(b) && b[i] == ' ' {
		i++
	}
	if i > 100 {
		return false
	}
	b = b[i:]
	return bytes.HasPrefix(b, []byte("get ")) || bytes.HasPrefix(b, []byte("gets "))
}

// tokenize splits line on spaces the way memcached does: at most
// maxTokens-1 tokens; rest is what follows when there are more.
func (cn *conn) tokenize(line []byte) (n int, rest []byte) {
	s := 0
	for i := 0; i < len(line); i++ {
		if line[i] != ' ' {
			continue
		}
		if s != i {
			cn.toks[n] = line[s:i]
			n++
			if n == maxTokens-1 {
				if i+1 < len(line) {
					return n, line[i+1:]
				}
				return n, nil
			}
		}
		s = i + 1
	}
	if s < len(line) {
		cn.toks[n] = line[s:]
		n++
	}
	return n, nil
}

// readValue reads a data block of n bytes plus its "\r\n" terminator. ok is
// false when the terminator is wrong (the bytes are consumed either way).
func (cn *conn) readValue(n int) (v []byte, ok bool, err error) {
	v = make([]byte, n)
	if _, err = io.ReadFull(cn.r, v); err != nil {
		return nil, false, err
	}
	var t [2]byte
	if _, err = io.ReadFull(cn.r, t[:]); err != nil {
		return nil, false, err
	}
	return v, t == [2]byte{'\r', '\n'}, nil
}

// swallow discards n bytes of a refused data block.
func (cn *conn) swallow(n int) error {
	_, err := cn.r.Discard(n)
	return err
}

// reply writes a whole response line, unless the command asked for
// noreply (memcached suppresses error lines too in that case).
func (cn *conn) reply(s string) {
	if cn.noreply {
		return
	}
	cn.out.str(s)
	cn.out.str("\r\n")
}

// outBuf gathers a batch of replies as iovecs: small pieces are copied
// into scratch, large values are referenced in place.
type outBuf struct {
	scratch []byte
	start   int // scratch bytes before start are already in bufs
	bufs    net.Buffers
	iov     net.Buffers // backing array reused by bufs
	held    []*pbuf     // pooled buffers referenced by bufs
	total   int
}

func (o *outBuf) init() {
	o.scratch = make([]byte, 0, 16<<10)
	o.iov = make(net.Buffers, 0, 16)
}

func (o *outBuf) pending() int { return o.total + len(o.scratch) - o.start }

// outMark is a position in an outBuf that a command can roll back to.
type outMark struct{ scratch, start, iov, held, total int }

func (o *outBuf) mark() outMark {
	return outMark{scratch: len(o.scratch), start: o.start, iov: len(o.iov), held: len(o.held), total: o.total}
}

// rollback drops what was written since m, which must be after the last
// write to the network (a multi-get that fails on a later key).
func (o *outBuf) rollback(m outMark) {
	for i := m.held; i < len(o.held); i++ {
		putBuf(o.held[i])
		o.held[i] = nil
	}
	o.held = o.held[:m.held]
	clear(o.iov[m.iov:])
	o.iov = o.iov[:m.iov]
	o.scratch = o.scratch[:m.scratch]
	o.start, o.total = m.start, m.total
}

func (o *outBuf) str(s string)   { o.scratch = append(o.scratch, s...) }
func (o *outBuf) bytes(b []byte) { o.scratch = append(o.scratch, b...) }
func (o *outBuf) byte(b byte)    { o.scratch = append(o.scratch, b) }
func (o *outBuf) uint(u uint64)  { o.scratch = strconv.AppendUint(o.scratch, u, 10) }

// cut moves the scratch bytes written since the last cut into the iovecs.
func (o *outBuf) cut() {
	if len(o.scratch) > o.start {
		o.iov = append(o.iov, o.scratch[o.start:len(o.scratch):len(o.scratch)])
		o.total += len(o.scratch) - o.start
		o.start = len(o.scratch)
	}
}

// value writes a data block and its "\r\n". A large value is referenced, not
// copied; pb (may be nil) is released after the write.
func (o *outBuf) value(v []byte, pb *pbuf) {
	o.raw(v, pb)
	o.scratch = append(o.scratch, '\r', '\n')
}

// raw writes v, by reference when it is large; pb (may be nil) is released
// once v has been written.
func (o *outBuf) raw(v []byte, pb *pbuf) {
	if len(v) <= smallValue {
		o.scratch = append(o.scratch, v...)
		putBuf(pb)
		return
	}
	o.cut()
	o.iov = append(o.iov, v)
	o.total += len(v)
	if pb != nil {
		o.held = append(o.held, pb)
	}
}

// writeTo writes everything pending with one vectored write.
func (o *outBuf) writeTo(w net.Conn) (int64, error) {
	o.cut()
	if len(o.iov) == 0 {
		return 0, nil
	}
	var n int64
	var err error
	if len(o.iov) == 1 {
		var k int
		k, err = w.Write(o.iov[0])
		n = int64(k)
	} else {
		o.bufs = o.iov
		n, err = o.bufs.WriteTo(w)
	}
	clear(o.iov[:cap(o.iov)])
	o.iov = o.iov[:0]
	o.bufs = nil
	if cap(o.scratch) > 1<<20 {
		o.scratch = make([]byte, 0, 16<<10)
	}
	o.scratch = o.scratch[:0]
	o.start = 0
	o.total = 0
	o.releaseAll()
	return n, err
}

func (o *outBuf) releaseAll() {
	for i, pb := range o.held {
		putBuf(pb)
		o.held[i] = nil
	}
	o.held = o.held[:0]
}
