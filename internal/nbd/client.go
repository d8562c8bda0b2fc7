package nbd

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"rackpool/internal/kwait"
)

// Client bounds.
const (
	// defaultMaxIO is the largest READ or WRITE a client sends when the
	// server advertises no smaller maximum: the size the protocol says
	// every server takes.
	defaultMaxIO = 32 << 20
	// maxEffect is the largest TRIM, WRITE_ZEROES (fast) or BLOCK_STATUS
	// length a client sends in one request.
	maxEffect = 1 << 31
	// splitWindow is how many requests of one split call are in flight.
	splitWindow = 16
	// abandonGrace is how long a caller whose context ended waits for the
	// reply data being read into its buffer before breaking the
	// connection.
	abandonGrace = 2 * time.Second
	// closeGrace is how long Close waits for replies to requests in
	// flight after sending NBD_CMD_DISC.
	closeGrace = 2 * time.Second
	// maxOptReply bounds an option reply the client reads.
	maxOptReply = 64 << 10
)

// Client is a connection to one export of an NBD server. It is safe for
// concurrent use, and pipelines: requests from many goroutines are in
// flight at once, their headers written in batches by whichever caller
// holds the writer role (see send), and replies read by the holder of the
// reader role, which hands callers their replies by cookie: the caller
// itself while its call is the only one in flight (at queue depth 1 there
// is no hand-off between goroutines), otherwise a reader goroutine that
// runs while calls are in flight (see wait).
type Client struct {
	nc         net.Conn
	br         *bufio.Reader
	kr         *kwait.Reader // br's source, when the lone caller may wait in the kernel
	size       uint64
	flags      ExportFlags
	structured bool
	tls        bool // nc is a *tlsConn
	metaID     uint32
	minBlock   uint32
	maxIO      uint32 // READ and WRITE are split into requests of at most this
	maxZero    uint64 // WRITE_ZEROES without FAST_ZERO likewise

	wlock chan struct{} // held (full) by the goroutine writing to nc
	wbufs net.Buffers   // the writer's vector for a WRITE

	// qmu guards the headers of requests waiting to be written.
	qmu    sync.Mutex
	queued []byte
	spare  []byte

	// dlmu guards the write deadline a cancelled context sets.
	dlmu     sync.Mutex
	wseq     uint64 // numbers the bounded writes
	inWrite  bool   // write wseq is going on
	deadline bool

	mu     sync.Mutex
	calls  map[uint64]*call
	cookie uint64
	err    error // set once: new requests fail with it

	// rlock is held (full) by the goroutine reading replies. readerDone
	// is closed once the read side has ended and every call in flight
	// has been finished with the connection's error.
	rlock      chan struct{}
	readerDone chan struct{}
	hdr        [chunkHdrLen]byte // the reader's
	scratch    [16]byte          // the reader's

	// lmu guards how the reader is interrupted when its caller's context
	// ends: at the start of a reply by a read deadline, in the middle of
	// one by breaking the connection if the rest does not come within
	// abandonGrace.
	lmu         sync.Mutex
	leadGen     uint64 // numbers the turns in the reader role
	boundary    bool   // the reader waits for the start of a reply
	interrupted bool   // and a read deadline was set to stop it
	stall       *time.Timer
	rdl         time.Time // the read deadline otherwise (Close sets one)
}

// call is one request in flight. The reader alone touches the reply
// fields until it marks the call finished and signals done; mu is held
// by the reader while it works on the call (reading data into p
// included), and by a caller giving up on it.
type call struct {
	typ    uint16
	flags  uint16
	off    uint64
	length uint32
	p      []byte // READ destination, len(p) == length
	hdr    [requestLen]byte
	iov    [2][]byte // a WRITE's header and payload, while it is sent
	done   chan struct{}

	mu        sync.Mutex
	abandoned bool // the caller left; the reader frees the call when it finishes
	finished  bool

	err       error
	covered   uint64 // READ bytes received
	ext       []Extent
	gotStatus bool
}

var callPool = sync.Pool{New: func() any { return &call{done: make(chan struct{}, 1)} }}

func newCall(typ, flags uint16, off uint64, length uint32) *call {
	cl := callPool.Get().(*call)
	cl.typ, cl.flags, cl.off, cl.length = typ, flags, off, length
	return cl
}

func freeCall(cl *call) {
	done := cl.done
	ext := cl.ext[:0]
	if cap(ext) > 1024 {
		ext = nil
	}
	*cl = call{done: done, ext: ext}
	callPool.Put(cl)
}

// Dial connects to the NBD server at addr ("tcp" or "unix" network) and
// opens export; see NewClient.
func Dial(ctx context.Context, network, addr, export string) (*Client, error) {
	var d Dialer
	return d.Dial(ctx, network, addr, export)
}

// NewClient negotiates export over nc and returns a client that owns nc
// (on error, nc is left to the caller).
// It uses fixed newstyle negotiation, asks for structured replies and the
// base:allocation context, and enters transmission with NBD_OPT_GO asking
// for block sizes; it falls back to simple replies, no block status, and
// NBD_OPT_EXPORT_NAME for servers without them. ctx bounds the
// negotiation only. An export the server does not know fails with an
// error wrapping ErrUnknownExport, one it refuses with ErrPolicy, and a
// server that requires TLS with ErrTLSRequired ([Dialer] negotiates it).
func NewClient(ctx context.Context, nc net.Conn, export string) (*Client, error) {
	return newClient(ctx, nc, export, nil)
}

// newClient is NewClient, with TLS when tlsCfg is set.
func newClient(ctx context.Context, nc net.Conn, export string, tlsCfg *tls.Config) (*Client, error) {
	if !validString(export) {
		return nil, fmt.Errorf("nbd: export name %q is not a valid NBD string", export)
	}
	c := &Client{
		nc:         nc,
		br:         bufio.NewReaderSize(nc, readBufSize),
		wlock:      make(chan struct{}, 1),
		rlock:      make(chan struct{}, 1),
		calls:      make(map[uint64]*call),
		readerDone: make(chan struct{}),
	}
	stop := bindDeadline(ctx, nc)
	err := c.handshake(export, tlsCfg)
	if !stop() || err != nil {
		return nil, fmt.Errorf("nbd: negotiate export %q: %w", export, contextErr(ctx, err))
	}
	if kr := kwait.NewReader(c.nc, false); kr != nil && !c.tls && c.br.Buffered() == 0 {
		c.br.Reset(kr) // nothing is buffered after the negotiation's last reply
		c.kr = kr
	}
	return c, nil
}

// bindDeadline makes nc's I/O respect ctx until the returned function is
// called; that function reports whether ctx ended meanwhile, and clears
// the deadline.
func bindDeadline(ctx context.Context, nc net.Conn) func() bool {
	if dl, ok := ctx.Deadline(); ok {
		nc.SetDeadline(dl)
	}
	stop := context.AfterFunc(ctx, func() { nc.SetDeadline(time.Unix(1, 0)) })
	return func() bool {
		ok := stop()
		nc.SetDeadline(time.Time{})
		return ok && ctx.Err() == nil
	}
}

// contextErr returns ctx's error in place of err, an I/O error, if ctx
// ended or its deadline passed (the connection's deadline may fire first).
func contextErr(ctx context.Context, err error) error {
	if cerr := ctx.Err(); cerr != nil {
		return cerr
	}
	if dl, ok := ctx.Deadline(); ok && !time.Now().Before(dl) {
		return context.DeadlineExceeded
	}
	return err
}

// Size is the export's size in bytes.
func (c *Client) Size() uint64 { return c.size }

// Flags are the export's features as the server advertised them;
// CanBlockStatus reports that base:allocation was negotiated.
func (c *Client) Flags() ExportFlags { return c.flags }

// ReadAt fills p from offset off, in requests of at most the server's
// maximum block size (or 32 MiB) pipelined.
func (c *Client) ReadAt(ctx context.Context, p []byte, off uint64) error {
	return c.split(ctx, uint64(len(p)), uint64(c.maxIO), func(i, n uint64) *call {
		cl := newCall(cmdRead, 0, off+i, uint32(n))
		cl.p = p[i : i+n]
		return cl
	})
}

// WriteAt writes p at offset off, durably before it returns if fua; it is
// split like ReadAt. Without server FUA support, fua is a flush after the
// write.
func (c *Client) WriteAt(ctx context.Context, p []byte, off uint64, fua bool) error {
	flags, flush := c.fua(fua)
	err := c.split(ctx, uint64(len(p)), uint64(c.maxIO), func(i, n uint64) *call {
		cl := newCall(cmdWrite, flags, off+i, uint32(n))
		cl.p = p[i : i+n]
		return cl
	})
	if err == nil && flush {
		err = c.Flush(ctx)
	}
	return err
}

// fua returns the command flag for a FUA request, or whether it must be
// done as a flush after.
func (c *Client) fua(fua bool) (flags uint16, flush bool) {
	switch {
	case !fua:
		return 0, false
	case c.flags.CanFUA:
		return cmdFlagFUA, false
	default:
		return 0, c.flags.CanFlush
	}
}

// Flush makes every write that completed before it durable. It fails
// with ErrNotSupported if the server does not take flushes.
func (c *Client) Flush(ctx context.Context) error {
	if !c.flags.CanFlush {
		return fmt.Errorf("nbd: server offers no flush: %w", ErrNotSupported)
	}
	return c.do(ctx, newCall(cmdFlush, 0, 0, 0))
}

// Trim tells the server the range is no longer needed. It fails with
// ErrNotSupported if the server does not take trims.
func (c *Client) Trim(ctx context.Context, off, length uint64, fua bool) error {
	if !c.flags.CanTrim {
		return fmt.Errorf("nbd: server offers no trim: %w", ErrNotSupported)
	}
	flags, flush := c.fua(fua)
	err := c.split(ctx, length, maxEffect, func(i, n uint64) *call {
		return newCall(cmdTrim, flags, off+i, uint32(n))
	})
	if err == nil && flush {
		err = c.Flush(ctx)
	}
	return err
}

// Zero makes the range read as zeroes. Without server support for write
// zeroes it writes zero bytes, unless f.Fast, which then fails with
// ErrNotSupported (as it does when the server cannot zero fast).
func (c *Client) Zero(ctx context.Context, off, length uint64, f ZeroFlags) error {
	if !c.flags.CanWriteZeroes || (f.Fast && !c.flags.CanFastZero) {
		if f.Fast {
			return fmt.Errorf("nbd: server offers no fast zero: %w", ErrNotSupported)
		}
		return c.writeZeroes(ctx, off, length, f.FUA)
	}
	flags, flush := c.fua(f.FUA)
	if f.NoHole {
		flags |= cmdFlagNoHole
	}
	chunk := c.maxZero
	if f.Fast {
		flags |= cmdFlagFastZero
		chunk = maxEffect
	}
	err := c.split(ctx, length, chunk, func(i, n uint64) *call {
		return newCall(cmdWriteZeroes, flags, off+i, uint32(n))
	})
	if err == nil && flush {
		err = c.Flush(ctx)
	}
	return err
}

// writeZeroes zeroes a range with WRITE requests.
func (c *Client) writeZeroes(ctx context.Context, off, length uint64, fua bool) error {
	flags, flush := c.fua(fua)
	err := c.split(ctx, length, uint64(min(c.maxIO, uint32(len(zeroes)))), func(i, n uint64) *call {
		cl := newCall(cmdWrite, flags, off+i, uint32(n))
		cl.p = zeroes[:n]
		return cl
	})
	if err == nil && flush {
		err = c.Flush(ctx)
	}
	return err
}

// BlockStatus returns the base:allocation runs from off, covering at
// most length bytes (possibly fewer: a server may answer for less). It
// fails with ErrNotSupported if the context was not negotiated.
func (c *Client) BlockStatus(ctx context.Context, off, length uint64) ([]Extent, error) {
	if !c.flags.CanBlockStatus {
		return nil, fmt.Errorf("nbd: no block status on this connection: %w", ErrNotSupported)
	}
	if length == 0 {
		return nil, nil
	}
	length = min(length, maxEffect)
	cl := newCall(cmdBlockStatus, 0, off, uint32(length))
	if err := c.send(ctx, cl); err != nil {
		return nil, err
	}
	if err := c.wait(ctx, cl); err != nil {
		return nil, err
	}
	ext := make([]Extent, 0, len(cl.ext))
	left := length
	for _, e := range cl.ext {
		if left == 0 {
			break
		}
		e.Length = min(e.Length, left)
		left -= e.Length
		ext = append(ext, e)
	}
	freeCall(cl)
	return ext, nil
}

// Close sends NBD_CMD_DISC, waits briefly for the replies to requests in
// flight, and closes the connection. Requests after Close fail with an
// error wrapping ErrClosed.
func (c *Client) Close() error {
	c.mu.Lock()
	if c.err != nil {
		c.mu.Unlock()
		c.nc.Close()
		c.readToEnd()
		return nil
	}
	c.err = fmt.Errorf("%w: client closed", ErrClosed)
	c.mu.Unlock()

	deadline := time.Now().Add(closeGrace)
	t := time.NewTimer(closeGrace)
	select {
	case c.wlock <- struct{}{}:
		// The requests queued so far go first.
		c.qmu.Lock()
		b := append(c.queued, make([]byte, requestLen)...)
		c.queued = nil
		c.qmu.Unlock()
		putRequest(b[len(b)-requestLen:], request{typ: cmdDisc})
		c.nc.SetWriteDeadline(deadline)
		c.nc.Write(b)
		<-c.wlock
	case <-t.C:
	}
	t.Stop()
	// The server closes the connection once it has answered what is in
	// flight; the reader finishes those calls, then sees the end.
	c.lmu.Lock()
	c.rdl = deadline
	c.nc.SetReadDeadline(deadline)
	c.lmu.Unlock()
	c.readToEnd()
	c.nc.Close()
	return nil
}

// Abort closes the connection at once, without NBD_CMD_DISC and without
// waiting for the server: for a server that is dead or hung, from which
// Close would wait up to its grace for replies that are not coming (as
// libnbd's nbd_close without nbd_shutdown). Requests in flight fail with
// an error wrapping ErrClosed, as do requests after Abort; a request the
// server had not answered may or may not have been applied. Abort returns
// once every call in flight is finished.
func (c *Client) Abort() {
	c.breakConn(errors.New("client aborted the connection"))
	c.readToEnd()
}

// do sends one request and waits for its reply.
func (c *Client) do(ctx context.Context, cl *call) error {
	if err := c.send(ctx, cl); err != nil {
		return err
	}
	if err := c.wait(ctx, cl); err != nil {
		return err
	}
	freeCall(cl)
	return nil
}

// split covers [0, total) with requests of at most chunk bytes made by
// mk, keeping up to splitWindow in flight, and returns the first error.
func (c *Client) split(ctx context.Context, total, chunk uint64, mk func(i, n uint64) *call) error {
	if total == 0 {
		return nil
	}
	if total <= chunk {
		return c.do(ctx, mk(0, total))
	}
	var (
		ring  [splitWindow]*call
		head  int // oldest in flight
		count int
		first error
	)
	next := uint64(0)
	for next < total || count > 0 {
		if first == nil && next < total && count < splitWindow {
			n := min(chunk, total-next)
			cl := mk(next, n)
			next += n
			if err := c.send(ctx, cl); err != nil {
				first = err
				continue
			}
			ring[(head+count)%splitWindow] = cl
			count++
			continue
		}
		if first != nil && next < total {
			next = total // stop sending; collect what is in flight
		}
		if count == 0 {
			break
		}
		cl := ring[head]
		ring[head] = nil
		head = (head + 1) % splitWindow
		count--
		if err := c.wait(ctx, cl); err != nil {
			if first == nil {
				first = err
			}
			continue
		}
		freeCall(cl)
	}
	return first
}

// send registers cl and has its request written. An error means the
// request was not sent, and cl is no longer the caller's; after a nil
// return the caller must wait. Requests without a payload are queued and
// written in batches: the goroutine that finds nobody writing writes
// every queued header, and what is queued meanwhile, in one write per
// batch, as the server writes its replies; at queue depth 16 that is one
// system call where there were 16. A WRITE takes the writer role itself
// and sends the queued headers, its own and its payload in one writev,
// so that nothing refers to the caller's buffer once it returns. A write
// failing after part of a batch went out breaks the connection, and the
// reader then finishes every call in flight with the connection's error.
func (c *Client) send(ctx context.Context, cl *call) error {
	if cl.typ == cmdWrite && len(cl.p) > 0 {
		return c.sendWrite(ctx, cl)
	}
	if err := ctx.Err(); err != nil {
		freeCall(cl)
		return err
	}
	cookie, inFlight, err := c.register(cl)
	if err != nil {
		freeCall(cl)
		return err
	}
	putRequest(cl.hdr[:], request{flags: cl.flags, typ: cl.typ, cookie: cookie, off: cl.off, length: cl.length})
	c.qmu.Lock()
	c.queued = append(c.queued, cl.hdr[:]...)
	c.qmu.Unlock()
	if inFlight > 1 {
		// Busy: let the goroutines that are ready to run queue their
		// requests first, so that one write carries them all (a burst
		// from a server that read them in one go). A lone request does
		// not yield: that would wake another thread for nothing.
		runtime.Gosched()
	}
	c.flushQueue(ctx)
	return nil
}

// register gives cl a cookie and puts it among the calls in flight,
// whose number it returns.
func (c *Client) register(cl *call) (cookie uint64, inFlight int, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.err; err != nil {
		return 0, 0, err
	}
	c.cookie++
	c.calls[c.cookie] = cl
	callsInFlight.Add(1)
	return c.cookie, len(c.calls), nil
}

// flushQueue writes the queued headers unless another goroutine holds the
// writer role; that one looks at the queue again after letting the role
// go, so nothing queued is left behind. A writer whose context ended
// while nothing of a batch went out puts the batch back and leaves the
// queue to a background writer (flushLater), so that one caller's
// cancellation neither breaks the connection for the others nor strands
// their requests.
func (c *Client) flushQueue(ctx context.Context) {
	for {
		select {
		case c.wlock <- struct{}{}:
		default:
			return
		}
		_, err := c.drain(ctx, nil)
		<-c.wlock
		switch {
		case errors.Is(err, errHandOff):
			c.flushLater()
			return
		case err != nil:
			return // the connection is broken
		}
		if c.queueEmpty() {
			return
		}
	}
}

// flushLater has a goroutine of its own write the queue: it waits for the
// socket as long as it takes, and ends when the queue is written or the
// connection closes.
func (c *Client) flushLater() {
	if !c.queueEmpty() {
		go c.flushQueue(context.Background())
	}
}

func (c *Client) queueEmpty() bool {
	c.qmu.Lock()
	defer c.qmu.Unlock()
	return len(c.queued) == 0
}

// errHandOff reports that a writer gave the queue back: its context ended
// before any of the batch went out.
var errHandOff = errors.New("nbd: queue handed to another writer")

// maxRounds bounds the batches one writer writes before it hands the
// rest to a background writer, so that a caller is not kept writing
// others' requests under sustained load.
const maxRounds = 8

// drain writes the queued headers, with tail (a WRITE's header and
// payload) after the first batch, until the queue is empty. Only the
// holder of the writer role calls it. It returns the bytes of the first
// batch written, and errHandOff if it gave the queue back (nothing of the
// last batch went out and ctx ended, or maxRounds were written: the
// caller calls flushLater); any other error broke the connection.
func (c *Client) drain(ctx context.Context, tail [][]byte) (first int64, err error) {
	for i := 0; ; i++ {
		c.qmu.Lock()
		if len(c.queued) == 0 && (i > 0 || tail == nil) {
			c.qmu.Unlock()
			return first, nil
		}
		if i == maxRounds {
			c.qmu.Unlock()
			return first, errHandOff
		}
		batch := c.queued
		c.queued = c.spare[:0]
		c.qmu.Unlock()
		var n int64
		if i == 0 && tail != nil {
			bufs := append(append(c.wbufs[:0], batch), tail...)
			c.wbufs = bufs // WriteTo advances its own copy, not this one
			w := bufs
			n, err = c.bounded(ctx, func() (int64, error) { return writeBuffers(c.nc, &w) })
			clear(bufs)
			c.wbufs = bufs[:0]
		} else {
			n, err = c.bounded(ctx, func() (int64, error) { m, err := c.nc.Write(batch); return int64(m), err })
		}
		c.qmu.Lock()
		if err != nil && n == 0 && ctx.Err() != nil && !c.tls {
			// Nothing went out: the headers go back to the head of the
			// queue (a WRITE's own header and payload do not: its caller
			// gives it up). Not on TLS: crypto/tls fails every write after
			// one that timed out, part of a record may have gone out, and
			// the connection is broken below.
			rest := c.queued
			c.queued = append(batch, rest...)
			c.spare = rest[:0]
			c.qmu.Unlock()
			return first, errHandOff
		}
		c.spare = batch[:0]
		c.qmu.Unlock()
		if i == 0 {
			first = n
		}
		if err != nil {
			c.breakConn(fmt.Errorf("send requests: %w", err))
			return first, err
		}
	}
}

// bounded runs write, interrupting it if it is still blocked writeGrace
// after ctx ended.
func (c *Client) bounded(ctx context.Context, write func() (int64, error)) (int64, error) {
	if ctx.Done() == nil {
		return write()
	}
	c.dlmu.Lock()
	c.wseq++
	seq := c.wseq
	c.inWrite = true
	c.dlmu.Unlock()
	stop := context.AfterFunc(ctx, func() { c.interruptWrite(seq) })
	n, err := write()
	stop()
	c.dlmu.Lock()
	c.inWrite = false
	if c.deadline {
		c.deadline = false
		c.nc.SetWriteDeadline(time.Time{})
	}
	c.dlmu.Unlock()
	return n, err
}

// sendWrite sends a WRITE with its payload, after the queued headers.
func (c *Client) sendWrite(ctx context.Context, cl *call) error {
	select {
	case c.wlock <- struct{}{}:
	default:
		select {
		case c.wlock <- struct{}{}:
		case <-ctx.Done():
			freeCall(cl)
			return ctx.Err()
		}
	}
	if err := ctx.Err(); err != nil {
		<-c.wlock
		c.flushLater()
		freeCall(cl)
		return err
	}
	cookie, _, err := c.register(cl)
	if err != nil {
		<-c.wlock
		freeCall(cl)
		return err
	}
	putRequest(cl.hdr[:], request{flags: cl.flags, typ: cl.typ, cookie: cookie, off: cl.off, length: cl.length})
	cl.iov = [2][]byte{cl.hdr[:], cl.p}
	n, err := c.drain(ctx, cl.iov[:])
	cl.iov = [2][]byte{}
	<-c.wlock
	switch {
	case errors.Is(err, errHandOff) && n == 0:
		// Interrupted before a byte went out: the request was never
		// sent, and the connection is fine. The call is not pooled
		// again: only a server answering a request it never got could
		// still reach it.
		c.mu.Lock()
		delete(c.calls, cookie)
		callsInFlight.Add(-1)
		c.mu.Unlock()
		c.flushLater()
		return ctx.Err()
	case errors.Is(err, errHandOff):
		c.flushLater()
	case err == nil:
		c.flushQueue(ctx)
	}
	return nil
}

// writeGrace is how long a request write may go on after its caller's
// context ended: a write that is merely in progress completes, one stuck
// on a full socket is interrupted (breaking the connection if part of it
// went out; otherwise the unsent headers of other callers are handed to
// a background writer).
const writeGrace = time.Second

// interruptWrite bounds write seq if it is still going on, because its
// writer's context ended.
func (c *Client) interruptWrite(seq uint64) {
	c.dlmu.Lock()
	if c.inWrite && c.wseq == seq {
		c.deadline = true
		c.nc.SetWriteDeadline(time.Now().Add(writeGrace))
	}
	c.dlmu.Unlock()
}

// breakConn records why the connection failed and closes it; the reader
// then finishes every call in flight with the error.
func (c *Client) breakConn(cause error) {
	c.mu.Lock()
	if c.err == nil {
		c.err = fmt.Errorf("%w: %w", ErrClosed, cause)
	}
	c.mu.Unlock()
	c.nc.Close()
}

// wait waits for cl's reply and returns its error; cl may be freed by
// the caller after a nil return only. A caller whose call is the only
// one in flight reads the reply itself (lead); otherwise a reader
// goroutine reads while calls are in flight (kickReader). If ctx ends
// first, wait gives up on cl (whose late reply the reader discards) and
// returns ctx.Err().
func (c *Client) wait(ctx context.Context, cl *call) error {
	for {
		select {
		case <-cl.done:
			return c.result(ctx, cl)
		default:
		}
		if c.takeRoleIfAlone() {
			c.lead(ctx, cl)
			<-c.rlock
			c.kickReader() // for calls made meanwhile
			continue
		}
		c.kickReader()
		select {
		case <-cl.done:
			return c.result(ctx, cl)
		case <-ctx.Done():
			return c.abandon(ctx, cl)
		}
	}
}

// takeRoleIfAlone takes the reader role if it is free and one call is in
// flight, the caller's: then nothing is gained by a reader goroutine, and
// the caller reads its reply itself. With more in flight a goroutine of
// its own reads (readBackground), so that the socket is read continuously
// while callers come and go (bulk replies would otherwise wait in the
// socket, and TCP slows the sender down).
func (c *Client) takeRoleIfAlone() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.calls) != 1 {
		return false
	}
	select {
	case c.rlock <- struct{}{}:
		return true
	default:
		return false
	}
}

// kickReader starts a reader goroutine if calls are in flight and nobody
// holds the reader role.
func (c *Client) kickReader() {
	select {
	case c.rlock <- struct{}{}:
	default:
		return // a reader is at work
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.calls) == 0 {
		<-c.rlock
		return
	}
	go c.readBackground()
}

// readBackground reads replies, holding the reader role, until no call is
// in flight or the connection ends. Callers get their replies from it as
// from a caller reading.
func (c *Client) readBackground() {
	for {
		c.mu.Lock()
		if len(c.calls) == 0 {
			<-c.rlock
			c.mu.Unlock()
			return
		}
		c.mu.Unlock()
		if err := c.readReply(); err != nil {
			c.endRead(err)
			<-c.rlock
			return
		}
	}
}

// result returns a finished call's error, freeing the call if it failed;
// a call that failed after its context ended (the connection broken while
// its reader gave up) reports the context's error, as abandon does.
func (c *Client) result(ctx context.Context, cl *call) error {
	if err := cl.err; err != nil {
		freeCall(cl)
		if cerr := ctx.Err(); cerr != nil {
			return cerr
		}
		return err
	}
	return nil
}

// abandon gives cl up. Reply data being read into cl.p is read to the end
// first, so that nothing writes to the caller's buffer after return;
// if that takes longer than abandonGrace the connection is broken.
func (c *Client) abandon(ctx context.Context, cl *call) error {
	if !cl.mu.TryLock() {
		t := time.AfterFunc(abandonGrace, func() {
			c.breakConn(errors.New("server stalled in the middle of a reply"))
		})
		cl.mu.Lock()
		t.Stop()
	}
	finished := cl.finished
	cl.abandoned = !finished
	cl.mu.Unlock()
	if finished {
		<-cl.done
		freeCall(cl)
	} else {
		c.kickReader() // someone must read the late reply
	}
	return ctx.Err()
}

// errInterrupted stops a reader whose caller's context ended while no
// reply was being read.
var errInterrupted = errors.New("nbd: reader interrupted")

// lead reads replies, as the holder of the reader role, until cl's is
// whole, the connection ends (every call is then finished with its
// error), or ctx ends while no reply is being read.
func (c *Client) lead(ctx context.Context, cl *call) {
	if c.readEnded() {
		return
	}
	c.lmu.Lock()
	c.leadGen++
	gen := c.leadGen
	c.lmu.Unlock()
	var stop func() bool
	if ctx.Done() != nil {
		stop = context.AfterFunc(ctx, func() { c.interruptRead(gen) })
	}
	err := c.readFor(ctx, cl)
	if stop != nil {
		stop()
	}
	c.lmu.Lock()
	c.leadGen++ // a late interruptRead of this turn does nothing
	if c.stall != nil {
		c.stall.Stop()
		c.stall = nil
	}
	if c.interrupted {
		c.interrupted = false
		c.nc.SetReadDeadline(c.rdl)
	}
	c.boundary = false
	c.lmu.Unlock()
	if c.kr != nil {
		c.kr.Block = false
	}
	if err != nil && err != errInterrupted {
		c.endRead(err)
	}
}

// readFor reads replies until cl's is whole; see lead.
func (c *Client) readFor(ctx context.Context, cl *call) error {
	for {
		cl.mu.Lock()
		finished := cl.finished
		cl.mu.Unlock()
		if finished {
			return nil
		}
		c.lmu.Lock()
		if ctx.Err() != nil {
			c.lmu.Unlock()
			return errInterrupted
		}
		c.boundary = true
		c.lmu.Unlock()
		if c.kr != nil && c.br.Buffered() == 0 {
			// Only cl is in flight, and it is a server's lone request
			// forwarded from that server's reader (RunsInline), which
			// reads nothing until it returns: nothing else can happen
			// until the reply comes, so wait for it blocked in the
			// kernel. (A caller whose server reader goes on reading
			// would keep it from the P: at 64 KiB and queue depth 16
			// behind drive connect that halved the IOPS.)
			c.kr.Block = c.alone() && RunsInline(ctx)
		}
		_, err := c.br.Peek(1)
		c.lmu.Lock()
		c.boundary = false
		interrupted := c.interrupted
		if interrupted {
			c.interrupted = false
			c.nc.SetReadDeadline(c.rdl)
		}
		c.lmu.Unlock()
		if err != nil {
			if interrupted && errors.Is(err, os.ErrDeadlineExceeded) {
				return errInterrupted
			}
			return err
		}
		if err := c.readReply(); err != nil {
			return err
		}
	}
}

// callsInFlight counts the calls in flight on every client of the process.
var callsInFlight atomic.Int64

// alone reports whether one call is in flight, in the whole process: a
// caller waiting in the kernel keeps its thread's P, and with other calls
// in flight (on any connection) their goroutines may need it.
func (c *Client) alone() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.calls) == 1 && callsInFlight.Load() == 1
}

// interruptRead stops the reader of turn gen because its caller's
// context ended: at once if it waits for the start of a reply, and if it
// is in the middle of one, by breaking the connection unless the rest
// comes within abandonGrace.
func (c *Client) interruptRead(gen uint64) {
	c.lmu.Lock()
	defer c.lmu.Unlock()
	if gen != c.leadGen {
		return
	}
	if c.boundary {
		c.interrupted = true
		c.nc.SetReadDeadline(time.Unix(1, 0))
		return
	}
	if c.stall == nil {
		c.stall = time.AfterFunc(abandonGrace, func() {
			c.breakConn(errors.New("server stalled in the middle of a reply"))
		})
	}
}

// readToEnd takes the reader role and reads replies until the connection
// ends, for Close and Abort, which have made sure it will.
func (c *Client) readToEnd() {
	c.rlock <- struct{}{}
	if !c.readEnded() {
		var err error
		for err == nil {
			err = c.readReply()
		}
		c.endRead(err)
	}
	<-c.rlock
}

// readEnded reports whether the read side has ended.
func (c *Client) readEnded() bool {
	select {
	case <-c.readerDone:
		return true
	default:
		return false
	}
}

// endRead ends the read side, by the holder of the reader role: every
// call in flight is finished with the connection's error, as are the
// requests after it.
func (c *Client) endRead(err error) {
	c.mu.Lock()
	if c.err == nil {
		c.err = fmt.Errorf("%w: %w", ErrClosed, err)
	}
	cerr := c.err
	calls := c.calls
	c.calls = nil
	callsInFlight.Add(-int64(len(calls)))
	c.mu.Unlock()
	c.nc.Close()
	for _, cl := range calls {
		cl.mu.Lock()
		cl.err = cerr
		c.finish(cl)
	}
	close(c.readerDone)
}

// finish marks cl finished and hands it to its caller, or frees it if the
// caller left. cl.mu must be held; finish releases it.
func (c *Client) finish(cl *call) {
	cl.finished = true
	abandoned := cl.abandoned
	cl.mu.Unlock()
	if abandoned {
		freeCall(cl)
		return
	}
	cl.done <- struct{}{}
}

func protoErr(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrProtocol}, args...)...)
}

// readReply reads and dispatches one reply chunk; an error ends the
// connection.
func (c *Client) readReply() error {
	hdr := c.hdr[:]
	if _, err := io.ReadFull(c.br, hdr[:4]); err != nil {
		return err
	}
	switch binary.BigEndian.Uint32(hdr) {
	case simpleReplyMagic:
		if _, err := io.ReadFull(c.br, hdr[4:simpleReplyLen]); err != nil {
			return err
		}
		return c.simpleReply(binary.BigEndian.Uint32(hdr[4:]), binary.BigEndian.Uint64(hdr[8:]))
	case structuredReplyMagic:
		if !c.structured {
			return protoErr("structured reply without negotiation")
		}
		if _, err := io.ReadFull(c.br, hdr[4:chunkHdrLen]); err != nil {
			return err
		}
		flags := binary.BigEndian.Uint16(hdr[4:])
		typ := binary.BigEndian.Uint16(hdr[6:])
		cookie := binary.BigEndian.Uint64(hdr[8:])
		length := binary.BigEndian.Uint32(hdr[16:])
		return c.chunk(flags, typ, cookie, length)
	default:
		return protoErr("bad reply magic %#x", binary.BigEndian.Uint32(hdr))
	}
}

// lookup returns the call a reply's cookie names, locked; after a DONE it
// must be removed with done.
func (c *Client) lookup(cookie uint64) (*call, error) {
	c.mu.Lock()
	cl := c.calls[cookie]
	c.mu.Unlock()
	if cl == nil {
		return nil, protoErr("reply to unknown cookie %d", cookie)
	}
	cl.mu.Lock()
	return cl, nil
}

// complete removes a call whose reply is whole and finishes it; cl.mu is
// held and released.
func (c *Client) complete(cookie uint64, cl *call) {
	c.mu.Lock()
	delete(c.calls, cookie)
	callsInFlight.Add(-1)
	c.mu.Unlock()
	c.finish(cl)
}

func (c *Client) simpleReply(errno uint32, cookie uint64) error {
	cl, err := c.lookup(cookie)
	if err != nil {
		return err
	}
	if errno != 0 {
		cl.err = &Error{Errno: errno}
	} else if cl.typ == cmdRead {
		if c.structured {
			cl.mu.Unlock()
			return protoErr("simple reply with data to a read")
		}
		if err := c.readData(cl, cl.p); err != nil {
			cl.mu.Unlock()
			return err
		}
	} else if cl.typ == cmdBlockStatus {
		cl.mu.Unlock()
		return protoErr("simple reply to block status")
	}
	c.complete(cookie, cl)
	return nil
}

// readData reads len(p) bytes of reply data into p, or throws them away
// if the caller left.
func (c *Client) readData(cl *call, p []byte) error {
	if cl.abandoned {
		_, err := c.br.Discard(len(p))
		return err
	}
	_, err := io.ReadFull(c.br, p)
	return err
}

// chunk reads one structured reply chunk's payload.
func (c *Client) chunk(flags, typ uint16, cookie uint64, length uint32) error {
	cl, err := c.lookup(cookie)
	if err != nil {
		return err
	}
	if err := c.chunkPayload(cl, typ, length); err != nil {
		cl.mu.Unlock()
		return err
	}
	if flags&replyFlagDone == 0 {
		if typ == replyTypeNone {
			cl.mu.Unlock()
			return protoErr("NONE chunk without DONE")
		}
		cl.mu.Unlock()
		return nil
	}
	if cl.err == nil {
		switch {
		case cl.typ == cmdRead && cl.covered != uint64(cl.length):
			cl.mu.Unlock()
			return protoErr("read reply covers %d of %d bytes", cl.covered, cl.length)
		case cl.typ == cmdBlockStatus && !cl.gotStatus:
			cl.mu.Unlock()
			return protoErr("block status reply without status")
		}
	}
	c.complete(cookie, cl)
	return nil
}

func (c *Client) chunkPayload(cl *call, typ uint16, length uint32) error {
	b := c.scratch[:]
	switch typ {
	case replyTypeNone:
		if length != 0 {
			return protoErr("NONE chunk of %d bytes", length)
		}
	case replyTypeOffsetData:
		if cl.typ != cmdRead || length < 9 {
			return protoErr("bad OFFSET_DATA chunk")
		}
		if _, err := io.ReadFull(c.br, b[:8]); err != nil {
			return err
		}
		off, n := binary.BigEndian.Uint64(b[:]), uint64(length-8)
		if off < cl.off || off-cl.off > uint64(cl.length) || n > uint64(cl.length)-(off-cl.off) {
			return protoErr("OFFSET_DATA outside the request")
		}
		if err := c.readData(cl, cl.p[off-cl.off:off-cl.off+n]); err != nil {
			return err
		}
		cl.covered += n
	case replyTypeOffsetHole:
		if cl.typ != cmdRead || length != 12 {
			return protoErr("bad OFFSET_HOLE chunk")
		}
		if _, err := io.ReadFull(c.br, b[:12]); err != nil {
			return err
		}
		off, n := binary.BigEndian.Uint64(b[:]), uint64(binary.BigEndian.Uint32(b[8:]))
		if n == 0 || off < cl.off || off-cl.off > uint64(cl.length) || n > uint64(cl.length)-(off-cl.off) {
			return protoErr("OFFSET_HOLE outside the request")
		}
		if !cl.abandoned {
			clear(cl.p[off-cl.off : off-cl.off+n])
		}
		cl.covered += n
	case replyTypeBlockStatus:
		if cl.typ != cmdBlockStatus || length < 12 || (length-4)%8 != 0 || cl.gotStatus {
			return protoErr("bad BLOCK_STATUS chunk")
		}
		if _, err := io.ReadFull(c.br, b[:4]); err != nil {
			return err
		}
		if binary.BigEndian.Uint32(b[:]) != c.metaID {
			return protoErr("BLOCK_STATUS for unknown context %d", binary.BigEndian.Uint32(b[:]))
		}
		cl.gotStatus = true
		for range (length - 4) / 8 {
			if _, err := io.ReadFull(c.br, b[:8]); err != nil {
				return err
			}
			n, st := binary.BigEndian.Uint32(b[:]), binary.BigEndian.Uint32(b[4:])
			if n == 0 {
				return protoErr("BLOCK_STATUS extent of zero length")
			}
			if len(cl.ext) < maxExtents {
				cl.ext = append(cl.ext, Extent{Length: uint64(n), Hole: st&stateHole != 0, Zero: st&stateZero != 0})
			}
		}
	default:
		if typ&replyTypeErrBit == 0 {
			return protoErr("unknown chunk type %d", typ)
		}
		return c.errorChunk(cl, typ, length)
	}
	return nil
}

// errorChunk reads an error chunk: NBD_REPLY_TYPE_ERROR, ERROR_OFFSET, or
// an unknown type with the error bit, which counts as an error too.
func (c *Client) errorChunk(cl *call, typ uint16, length uint32) error {
	var b [6]byte
	if length < 6 {
		return protoErr("error chunk of %d bytes", length)
	}
	if _, err := io.ReadFull(c.br, b[:]); err != nil {
		return err
	}
	errno, ml := binary.BigEndian.Uint32(b[:]), uint32(binary.BigEndian.Uint16(b[4:]))
	rest := length - 6
	if ml > rest || (typ == replyTypeErrorOffset && rest-ml != 8) {
		return protoErr("error chunk message of %d bytes in %d", ml, length)
	}
	if errno == 0 {
		return protoErr("error chunk with error value 0")
	}
	msg := make([]byte, min(ml, maxString))
	if _, err := io.ReadFull(c.br, msg); err != nil {
		return err
	}
	if _, err := c.br.Discard(int(rest - uint32(len(msg)))); err != nil {
		return err
	}
	if cl.err == nil {
		cl.err = &Error{Errno: errno, Message: string(msg)}
	}
	return nil
}
