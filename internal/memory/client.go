package memory

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// RegionStat describes the region a client's token grants.
type RegionStat struct {
	Size   uint64    // region length in bytes
	Head   uint64    // the lease's append head
	Expiry time.Time // the connection's token expiry
	Epoch  uint64    // the server's epoch
}

// Client is a connection to a memnode, authenticated with one token at a
// time. It is safe for concurrent use: requests from many goroutines are
// pipelined on the one connection. If the connection fails, every pending
// and later call fails with an error wrapping ErrClosed; Dial again to go on.
//
// There is no reader goroutine. The socket is read by whichever waiting
// caller holds the reader role: it reads responses, hands each to its
// caller by tag, and when its own has come passes the role to another
// waiting caller. A lone caller thus reads its own response, with no
// goroutine switch between the socket and the caller (a reader goroutine
// roughly doubled the round trip in BenchmarkRead4K). If responses are due
// that no caller waits for (their callers gave up), a short-lived goroutine
// drains them, so the server never blocks on a full socket. The package
// documentation describes how contexts bound each call.
type Client struct {
	nc       net.Conn
	epoch    uint64        // server epoch seen at Dial
	maxFrame atomic.Uint32 // server frame limit from the last AUTH

	mu         sync.Mutex
	pending    map[uint32]*call // sent or queued, awaiting a response
	nextTag    uint32
	queue      []*call // frames waiting for a writer
	writing    bool    // a caller is writing queued frames
	writerCall *call   // that caller's own call
	takenSeq   uint64  // batches taken from the queue by writers
	sentSeq    uint64  // batches whose write has finished, well or not
	sent       sync.Cond
	reading    bool  // the reader role is held
	orphans    int   // responses due whose callers gave up
	err        error // why the connection failed; nil while it works

	// Owned by the caller that set writing.
	iov     [][]byte
	wbuf    net.Buffers
	writeDL bool // a probe write deadline may be set

	// Signalled by interruptRead and interruptWrite.
	readFired, writeFired chan struct{}

	// Owned by the holder of the reader role.
	readDL bool // a probe read deadline may be set
	rd     frameReader
	cur    *call  // claimed call whose payload is being read
	dst    []byte // the rest of cur's payload destination
	skip   int    // payload bytes of an unclaimed response still to skip
}

// call is one request in flight. Calls are pooled; a call is reused only
// once neither the writer nor the reader can touch it again.
type call struct {
	op      byte
	tag     uint32
	hdr     [reqHdrLen]byte
	payload [][]byte // WRITE, APPEND, AUTH payload pieces, as given
	dst     []byte   // READ destination

	// Guarded by Client.mu.
	seq      uint64 // batch carrying the frame; 0 while queued
	claimed  bool   // taken out of pending by a reader or by fail
	promoted bool   // handed the reader role

	// done carries sigDone once the call is answered or failed (unless
	// the caller read the answer itself as reader) and sigLead when the
	// caller is handed the reader role: at most one of each.
	done chan uint8

	// Set by whoever claimed the call, before it signals sigDone.
	status byte
	resp   [statRespLen]byte // small response payloads
	msg    [maxErrMsg]byte   // error message from the server
	msgLen int
	err    error // connection failure
}

const (
	sigDone = iota + 1
	sigLead
)

var callPool = sync.Pool{New: func() any { return &call{done: make(chan uint8, 2)} }}

func getCall(op byte) *call {
	cl := callPool.Get().(*call)
	cl.op = op
	cl.status = statusOK
	cl.err = nil
	cl.msgLen = 0
	return cl
}

func putCall(cl *call) {
	if cl.err != nil {
		// Failed with the connection: a writer may still hold its frame.
		return
	}
	clear(cl.payload)
	cl.payload = cl.payload[:0]
	cl.dst = nil
	callPool.Put(cl)
}

func (cl *call) setHeader(off uint64, count, length uint32) {
	h := reqHeader{version: protoVersion, op: cl.op, offset: off, count: count, length: length}
	h.encode(cl.hdr[:])
}

// result turns the call's outcome into an error.
func (cl *call) result() error {
	if cl.err != nil {
		return fmt.Errorf("%s: %w", opName(cl.op), cl.err)
	}
	if cl.status != statusOK {
		return fmt.Errorf("%s: %w (%s)", opName(cl.op), statusErr(cl.status), cl.msg[:cl.msgLen])
	}
	return nil
}

// aLongTimeAgo is a deadline in the past, to interrupt blocked I/O.
var aLongTimeAgo = time.Unix(1, 0)

// Dial connects to the memnode at addr and authenticates with token. It
// returns the server's refusal (ErrBadToken, ErrExpired, ErrRevoked,
// ErrWrongNode) if the token is not accepted.
func Dial(ctx context.Context, addr, token string) (*Client, error) {
	if len(token) > maxTokenLen {
		return nil, fmt.Errorf("dial %s: %w: token too long", addr, ErrBadToken)
	}
	var d net.Dialer
	nc, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("dial %s: %w", addr, err)
	}
	c := &Client{
		nc:      nc,
		pending: make(map[uint32]*call),
		rd:      frameReader{r: nc, buf: make([]byte, clientReadBuf)},

		readFired:  make(chan struct{}, 1),
		writeFired: make(chan struct{}, 1),
	}
	c.sent.L = &c.mu
	if err := c.handshake(ctx, token); err != nil {
		nc.Close()
		return nil, fmt.Errorf("dial %s: %w", addr, err)
	}
	return c, nil
}

// handshake sends the first AUTH and reads its answer before any other
// request can be made.
func (c *Client) handshake(ctx context.Context, token string) (err error) {
	if dl, ok := ctx.Deadline(); ok {
		c.nc.SetDeadline(dl)
	}
	stop := context.AfterFunc(ctx, func() { c.nc.SetDeadline(aLongTimeAgo) })
	defer func() {
		if !stop() {
			err = ctx.Err()
		}
	}()

	const tag = 1
	c.nextTag = tag
	var hdr [reqHdrLen]byte
	h := reqHeader{version: protoVersion, op: opAuth, tag: tag, length: uint32(len(token))}
	h.encode(hdr[:])
	bufs := net.Buffers{hdr[:], []byte(token)}
	if _, err := bufs.WriteTo(c.nc); err != nil {
		return err
	}
	rh, err := c.rd.next(respHdrLen)
	if err != nil {
		return err
	}
	rtag, status, n := binary.BigEndian.Uint32(rh), rh[4], binary.BigEndian.Uint32(rh[8:])
	if rtag != tag {
		return fmt.Errorf("%w: AUTH answered with tag %d", ErrProtocol, rtag)
	}
	if status != statusOK {
		if n > maxErrMsg {
			return fmt.Errorf("%w: error message of %d bytes", ErrProtocol, n)
		}
		msg, err := c.rd.next(int(n))
		if err != nil {
			return err
		}
		return fmt.Errorf("auth: %w (%s)", statusErr(status), msg)
	}
	if n != authRespLen {
		return fmt.Errorf("%w: AUTH reply of %d bytes", ErrProtocol, n)
	}
	p, err := c.rd.next(authRespLen)
	if err != nil {
		return err
	}
	c.epoch = binary.BigEndian.Uint64(p)
	c.maxFrame.Store(binary.BigEndian.Uint32(p[8:]))
	return c.nc.SetDeadline(time.Time{})
}

// Epoch returns the server epoch seen at Dial.
func (c *Client) Epoch() uint64 { return c.epoch }

// Close closes the connection; pending calls fail with ErrClosed. It is
// idempotent.
func (c *Client) Close() error {
	c.fail(ErrClosed)
	return nil
}

// Read reads exactly len(p) bytes at region offset off into p. It does not
// allocate. A read larger than the server's frame limit fails with
// ErrTooLarge.
func (c *Client) Read(ctx context.Context, off uint64, p []byte) error {
	if uint64(len(p)) > uint64(c.maxFrame.Load()) {
		return fmt.Errorf("read %d bytes: %w", len(p), ErrTooLarge)
	}
	cl := getCall(opRead)
	cl.dst = p
	cl.setHeader(off, uint32(len(p)), 0)
	err := c.do(ctx, cl)
	if err == nil {
		err = cl.result()
	}
	putCall(cl)
	return err
}

// Write writes the concatenation of bufs at region offset off. The buffers
// go to the socket as they are (writev); they must not change until Write
// returns. A write larger than the server's frame limit fails with
// ErrTooLarge.
func (c *Client) Write(ctx context.Context, off uint64, bufs ...[]byte) error {
	cl, err := c.payloadCall(opWrite, bufs)
	if err != nil {
		return err
	}
	cl.setHeader(off, 0, cl.hdrLen())
	err = c.do(ctx, cl)
	if err == nil {
		err = cl.result()
	}
	putCall(cl)
	return err
}

// Append writes the concatenation of bufs at the lease's append head, moves
// the head past it and returns the region offset it was written at. It fails
// with ErrNoSpace if the data does not fit before the region's end.
func (c *Client) Append(ctx context.Context, bufs ...[]byte) (uint64, error) {
	cl, err := c.payloadCall(opAppend, bufs)
	if err != nil {
		return 0, err
	}
	cl.setHeader(0, 0, cl.hdrLen())
	err = c.do(ctx, cl)
	if err == nil {
		err = cl.result()
	}
	off := binary.BigEndian.Uint64(cl.resp[:])
	putCall(cl)
	if err != nil {
		return 0, err
	}
	return off, nil
}

// payloadCall prepares a call whose payload is bufs.
func (c *Client) payloadCall(op byte, bufs [][]byte) (*call, error) {
	total := 0
	for _, b := range bufs {
		total += len(b)
	}
	if total > int(c.maxFrame.Load()) {
		return nil, fmt.Errorf("%s %d bytes: %w", opName(op), total, ErrTooLarge)
	}
	cl := getCall(op)
	for _, b := range bufs {
		if len(b) > 0 {
			cl.payload = append(cl.payload, b)
		}
	}
	return cl, nil
}

// hdrLen is the total payload length; payloadCall bounded it.
func (cl *call) hdrLen() uint32 {
	n := 0
	for _, b := range cl.payload {
		n += len(b)
	}
	return uint32(n)
}

// Stat returns the region's size and append head, the token's expiry and the
// server's epoch.
func (c *Client) Stat(ctx context.Context) (RegionStat, error) {
	cl := getCall(opStat)
	cl.setHeader(0, 0, 0)
	err := c.do(ctx, cl)
	if err == nil {
		err = cl.result()
	}
	r := cl.resp
	putCall(cl)
	if err != nil {
		return RegionStat{}, err
	}
	return RegionStat{
		Size:   binary.BigEndian.Uint64(r[0:]),
		Head:   binary.BigEndian.Uint64(r[8:]),
		Expiry: time.Unix(0, int64(binary.BigEndian.Uint64(r[16:]))),
		Epoch:  binary.BigEndian.Uint64(r[24:]),
	}, nil
}

// Zero needs RightAdmin. It revokes the token's lease until leaseExpiry,
// zeroes the whole region and resets its append head. Writes to the lease
// accepted before it land before the zeroing; later requests with tokens for
// the lease, this connection's included, fail with ErrRevoked until
// leaseExpiry.
func (c *Client) Zero(ctx context.Context, leaseExpiry time.Time) error {
	cl := getCall(opZero)
	cl.setHeader(uint64(leaseExpiry.UnixNano()), 0, 0)
	err := c.do(ctx, cl)
	if err == nil {
		err = cl.result()
	}
	putCall(cl)
	return err
}

// Ping makes a round trip that needs no token.
func (c *Client) Ping(ctx context.Context) error {
	cl := getCall(opPing)
	cl.setHeader(0, 0, 0)
	err := c.do(ctx, cl)
	if err == nil {
		err = cl.result()
	}
	putCall(cl)
	return err
}

// Renew authenticates the connection again with token, typically a renewed
// lease's. Requests sent after Renew returns use the new token's claims. If
// the server refuses the token the connection keeps its old claims. If the
// server's epoch differs from the one seen at Dial, Renew returns
// ErrNodeRestarted.
func (c *Client) Renew(ctx context.Context, token string) error {
	if len(token) > maxTokenLen {
		return fmt.Errorf("auth: %w: token too long", ErrBadToken)
	}
	cl := getCall(opAuth)
	cl.payload = append(cl.payload, []byte(token))
	cl.setHeader(0, 0, uint32(len(token)))
	err := c.do(ctx, cl)
	if err == nil {
		err = cl.result()
	}
	r := cl.resp
	putCall(cl)
	if err != nil {
		return err
	}
	if e := binary.BigEndian.Uint64(r[:]); e != c.epoch {
		return fmt.Errorf("auth: %w: epoch %x, was %x", ErrNodeRestarted, e, c.epoch)
	}
	c.maxFrame.Store(binary.BigEndian.Uint32(r[8:]))
	return nil
}

// do sends cl and waits for its response. It returns nil once the response
// (or a connection failure) is in cl, or an error if the call was never
// answered: the context ended, or the connection had already failed.
func (c *Client) do(ctx context.Context, cl *call) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	c.mu.Lock()
	if c.err != nil {
		err := c.err
		c.mu.Unlock()
		return err
	}
	for {
		c.nextTag++
		if _, busy := c.pending[c.nextTag]; !busy {
			break
		}
	}
	cl.tag = c.nextTag
	binary.BigEndian.PutUint32(cl.hdr[4:], cl.tag)
	cl.seq, cl.claimed, cl.promoted = 0, false, false
	c.pending[cl.tag] = cl
	c.queue = append(c.queue, cl)
	if !c.writing {
		c.writing, c.writerCall = true, cl
		c.writeQueue(ctx)
		c.writing, c.writerCall = false, nil
	}
	lead := false
	if !c.reading && !cl.claimed && c.err == nil {
		c.reading, cl.promoted, lead = true, true, true
	}
	c.mu.Unlock()
	return c.wait(ctx, cl, lead)
}

// wait waits for cl's response, reading the socket while it holds the
// reader role (from the start if lead is set).
func (c *Client) wait(ctx context.Context, cl *call, lead bool) error {
	done := ctx.Done()
	for {
		if lead {
			if c.lead(ctx, cl) {
				return nil
			}
			if ctx.Err() != nil {
				return c.abandon(ctx, cl)
			}
			// The connection failed; fail signals cl.
		}
		var sig uint8
		if done == nil {
			sig = <-cl.done
		} else {
			select {
			case sig = <-cl.done:
			case <-done:
				return c.abandon(ctx, cl)
			}
		}
		if sig == sigDone {
			return nil
		}
		lead = true
	}
}

// abandon gives up on cl because ctx ended, unless its answer is already
// being read into it, in which case it waits for that.
func (c *Client) abandon(ctx context.Context, cl *call) error {
	c.mu.Lock()
	if cl.claimed {
		// Being read into (or failed): the answer is moments away, and
		// cl.dst is in use until then.
		c.mu.Unlock()
		return c.wait(context.Background(), cl, false)
	}
	delete(c.pending, cl.tag) // a late response is skipped by tag
	if cl.promoted {
		// Handed the reader role but never took it up: pass it on.
		<-cl.done
		c.passRoleLocked(cl)
	}
	if cl.seq == 0 {
		for i, q := range c.queue {
			if q == cl {
				copy(c.queue[i:], c.queue[i+1:])
				c.queue[len(c.queue)-1] = nil
				c.queue = c.queue[:len(c.queue)-1]
				break
			}
		}
	} else {
		// The frame is sent or being sent from cl's buffers: its
		// response is now an orphan, and the write must finish before
		// the buffers go back to the caller.
		c.orphans++
		if !c.reading {
			c.passRoleLocked(nil)
		}
		for cl.seq > c.sentSeq {
			c.sent.Wait()
		}
	}
	c.mu.Unlock()
	return ctx.Err()
}

// probe is how long a caller with a cancellable context waits on the
// socket before it arms a context.AfterFunc to interrupt the wait when the
// context ends. Most answers come well within it, so most calls skip
// AfterFunc's allocations; a cancellation is noticed at most this late.
const probe = 100 * time.Microsecond

// lead reads responses as the holder of the reader role until cl's own
// has been read (it returns true), ctx ends or the connection fails; then it
// passes the role on. A response already being read when ctx ends is read to
// its end first, since its caller's buffer is in use.
func (c *Client) lead(ctx context.Context, cl *call) (got bool) {
	probing := false     // a probe read deadline is set
	var stop func() bool // an AfterFunc is armed
	if ctx.Done() != nil {
		probing = true
		c.nc.SetReadDeadline(probeDeadline(ctx))
		c.readDL = true
	} else if c.readDL {
		c.nc.SetReadDeadline(time.Time{})
		c.readDL = false
	}
	for {
		done, err := c.step(cl)
		if err != nil {
			if (probing || stop != nil) && errors.Is(err, os.ErrDeadlineExceeded) {
				if probing {
					probing = false
					c.nc.SetReadDeadline(time.Time{})
					c.readDL = false
				} else {
					c.disarm(stop, c.readFired, c.nc.SetReadDeadline)
					stop = nil
				}
				if ctx.Err() == nil {
					// A slow answer: watch the context from now on.
					stop = context.AfterFunc(ctx, c.interruptRead)
					continue
				}
				if c.cur != nil {
					continue // finish the answer in progress
				}
				break
			}
			got = c.failRead(cl, err)
			break
		}
		if done == cl {
			got = true
			break
		}
		if c.cur == nil && ctx.Err() != nil {
			break
		}
	}
	// A probe deadline still set is left for the next reader to replace.
	if stop != nil {
		c.disarm(stop, c.readFired, c.nc.SetReadDeadline)
	}
	c.mu.Lock()
	c.passRoleLocked(cl)
	c.mu.Unlock()
	return got
}

// probeDeadline is when a probe for ctx ends: after probe, or at ctx's
// deadline if that is sooner.
func probeDeadline(ctx context.Context) time.Time {
	dl := time.Now().Add(probe)
	if d, ok := ctx.Deadline(); ok && d.Before(dl) {
		return d
	}
	return dl
}

// interruptRead and interruptWrite run from context.AfterFunc when a
// waiting caller's context ends: they make the blocked read or write return.
func (c *Client) interruptRead() {
	c.nc.SetReadDeadline(aLongTimeAgo)
	c.readFired <- struct{}{}
}

func (c *Client) interruptWrite() {
	c.nc.SetWriteDeadline(aLongTimeAgo)
	c.writeFired <- struct{}{}
}

// disarm stops an AfterFunc that interrupts I/O, undoing the deadline it
// set if it ran.
func (c *Client) disarm(stop func() bool, fired chan struct{}, setDeadline func(time.Time) error) {
	if !stop() {
		<-fired
		setDeadline(time.Time{})
	}
}

// passRoleLocked gives up the reader role held by prev (nil for the
// drainer) and hands it to a waiting caller, or to a new drainer if only
// orphan responses are due.
func (c *Client) passRoleLocked(prev *call) {
	if prev != nil {
		prev.promoted = false
	}
	c.reading = false
	if c.err != nil {
		return
	}
	if w := c.heirLocked(prev); w != nil {
		c.reading, w.promoted = true, true
		w.done <- sigLead
		return
	}
	if c.orphans > 0 {
		c.reading = true
		go c.drain()
	}
}

// heirLocked returns a waiting caller other than prev that can take the
// reader role, or nil. The writing caller cannot: it reads nothing until its
// write is done, and a blocked write may need the socket read to progress.
func (c *Client) heirLocked(prev *call) *call {
	for _, w := range c.pending {
		if w != prev && w != c.writerCall {
			return w
		}
	}
	return nil
}

// drain holds the reader role while orphan responses are due and no caller
// can take it.
func (c *Client) drain() {
	for {
		c.mu.Lock()
		if c.err != nil {
			c.reading = false
			c.mu.Unlock()
			return
		}
		if c.orphans <= 0 || c.heirLocked(nil) != nil {
			c.passRoleLocked(nil) // hands it to the heir, or lets it go
			c.mu.Unlock()
			return
		}
		c.mu.Unlock()
		if c.readDL {
			c.nc.SetReadDeadline(time.Time{})
			c.readDL = false
		}
		if _, err := c.step(nil); err != nil {
			c.failRead(nil, err)
			c.mu.Lock()
			c.reading = false
			c.mu.Unlock()
			return
		}
	}
}

// step reads until one response is complete and returns its call, or nil
// for a response nobody waits for. Responses for calls other than self are
// signalled. It resumes wherever the previous holder of the reader role
// stopped.
func (c *Client) step(self *call) (*call, error) {
	if c.cur == nil && c.skip == 0 {
		h, err := c.rd.next(respHdrLen)
		if err != nil {
			return nil, err
		}
		tag, status, n := binary.BigEndian.Uint32(h), h[4], binary.BigEndian.Uint32(h[8:])
		c.mu.Lock()
		cl := c.pending[tag]
		if cl != nil {
			delete(c.pending, tag)
			cl.claimed = true
		} else if c.orphans > 0 {
			c.orphans--
		}
		c.mu.Unlock()
		if cl == nil {
			if n > max(c.maxFrame.Load(), maxErrMsg) {
				return nil, fmt.Errorf("%w: response of %d bytes", ErrProtocol, n)
			}
			c.skip = int(n)
		} else {
			c.cur = cl
			if c.dst, err = cl.target(status, n); err != nil {
				return nil, err
			}
		}
	}
	for c.skip > 0 {
		k, err := c.rd.discard(c.skip)
		c.skip -= k
		if err != nil {
			return nil, err
		}
	}
	if c.cur == nil {
		return nil, nil
	}
	for len(c.dst) > 0 {
		k, err := c.rd.readSome(c.dst)
		c.dst = c.dst[k:]
		if err != nil {
			return nil, err
		}
	}
	cl := c.cur
	c.cur = nil
	if cl != self {
		cl.done <- sigDone
	}
	return cl, nil
}

// target records a response's status and returns where its n-byte payload
// goes.
func (cl *call) target(status byte, n uint32) ([]byte, error) {
	cl.status = status
	if status != statusOK {
		if n > maxErrMsg {
			return nil, fmt.Errorf("%w: error message of %d bytes", ErrProtocol, n)
		}
		cl.msgLen = int(n)
		return cl.msg[:n], nil
	}
	want := uint32(0)
	switch cl.op {
	case opRead:
		want = uint32(len(cl.dst))
	case opAppend:
		want = appendRespLen
	case opStat:
		want = statRespLen
	case opAuth:
		want = authRespLen
	}
	if n != want {
		return nil, fmt.Errorf("%w: %s response of %d bytes, want %d", ErrProtocol, opName(cl.op), n, want)
	}
	if cl.op == opRead {
		return cl.dst, nil
	}
	return cl.resp[:n], nil
}

// failRead fails the connection after a read error, and the call whose
// response was being read. It reports whether that call was self.
func (c *Client) failRead(self *call, err error) bool {
	if !errors.Is(err, ErrClosed) {
		err = fmt.Errorf("%w: connection lost: %w", ErrClosed, err)
	}
	c.fail(err)
	cur := c.cur
	c.cur, c.dst, c.skip = nil, nil, 0
	if cur == nil {
		return false
	}
	cur.err = err
	if cur == self {
		return true
	}
	cur.done <- sigDone
	return false
}

// writeQueue writes queued frames, batch after batch, until the queue is
// empty. It is called and returns with c.mu held and c.writing set. ctx is the writing caller's: if it ends while a write is
// blocked, the write is interrupted and the connection fails, since a partly
// written frame cannot be taken back.
func (c *Client) writeQueue(ctx context.Context) {
	for len(c.queue) > 0 && c.err == nil {
		c.takenSeq++
		seq := c.takenSeq
		iov := c.iov[:0]
		for i, q := range c.queue {
			q.seq = seq
			iov = append(iov, q.hdr[:])
			iov = append(iov, q.payload...)
			c.queue[i] = nil
		}
		c.queue = c.queue[:0]
		c.iov = iov
		c.mu.Unlock()

		err := c.writeIOV(ctx)
		clear(c.iov)

		c.mu.Lock()
		c.sentSeq = seq
		c.sent.Broadcast()
		if err != nil {
			c.failLocked(err)
		}
	}
}

func (c *Client) writeIOV(ctx context.Context) error {
	c.wbuf = c.iov
	if ctx.Done() == nil {
		if c.writeDL {
			c.nc.SetWriteDeadline(time.Time{})
			c.writeDL = false
		}
		if _, err := c.wbuf.WriteTo(c.nc); err != nil {
			return fmt.Errorf("%w: write: %w", ErrClosed, err)
		}
		return nil
	}
	// As in lead, a probe deadline first and an AfterFunc if the write is
	// still blocked after it; but the probe ignores ctx's deadline, since
	// interrupting a write fails the connection: only a write that is
	// blocked (the socket buffer full) is cut short by ctx. WriteTo leaves
	// in c.wbuf what is unwritten.
	probing := true
	var stop func() bool
	c.nc.SetWriteDeadline(time.Now().Add(probe))
	c.writeDL = true
	var err error
	for {
		_, err = c.wbuf.WriteTo(c.nc)
		if err == nil || !errors.Is(err, os.ErrDeadlineExceeded) {
			break
		}
		if probing {
			probing = false
			c.nc.SetWriteDeadline(time.Time{})
			c.writeDL = false
		} else {
			c.disarm(stop, c.writeFired, c.nc.SetWriteDeadline)
			stop = nil
		}
		if ctx.Err() != nil {
			err = fmt.Errorf("write interrupted: %w", ctx.Err())
			break
		}
		stop = context.AfterFunc(ctx, c.interruptWrite)
	}
	if stop != nil {
		c.disarm(stop, c.writeFired, c.nc.SetWriteDeadline)
	}
	if err != nil {
		return fmt.Errorf("%w: write: %w", ErrClosed, err)
	}
	return nil
}

// fail marks the connection failed with err, fails every pending call and
// closes the socket.
func (c *Client) fail(err error) {
	c.mu.Lock()
	c.failLocked(err)
	c.mu.Unlock()
}

func (c *Client) failLocked(err error) {
	if c.err == nil {
		c.err = err
		c.nc.Close()
	}
	for tag, cl := range c.pending {
		delete(c.pending, tag)
		cl.claimed = true
		cl.err = c.err
		cl.done <- sigDone
	}
	clear(c.queue)
	c.queue = c.queue[:0]
}

// clientReadBuf is the size of the client's response buffer.
const clientReadBuf = 32 << 10

// frameReader reads frames from r through a buffer, but copies large
// payloads straight from the socket into their destination.
type frameReader struct {
	r      io.Reader
	buf    []byte
	lo, hi int // buffered bytes are buf[lo:hi]
}

// next returns the next n bytes (n <= len(buf)), valid until the next call.
func (f *frameReader) next(n int) ([]byte, error) {
	if f.hi-f.lo < n {
		if err := f.fill(n); err != nil {
			return nil, err
		}
	}
	b := f.buf[f.lo : f.lo+n]
	f.lo += n
	return b, nil
}

// fill reads until at least n bytes are buffered.
func (f *frameReader) fill(n int) error {
	if f.lo > 0 {
		f.hi = copy(f.buf, f.buf[f.lo:f.hi])
		f.lo = 0
	}
	for f.hi < n {
		m, err := f.r.Read(f.buf[f.hi:])
		f.hi += m
		if err != nil {
			if f.hi >= n {
				return nil
			}
			if errors.Is(err, io.EOF) && f.hi > 0 {
				return io.ErrUnexpectedEOF
			}
			return err
		}
	}
	return nil
}

// readSome reads into p from the buffer if it holds anything, else from the
// socket directly, and returns how much it read.
func (f *frameReader) readSome(p []byte) (int, error) {
	if f.lo < f.hi {
		k := copy(p, f.buf[f.lo:f.hi])
		f.lo += k
		return k, nil
	}
	k, err := f.r.Read(p)
	if k > 0 {
		return k, nil
	}
	if err == nil || errors.Is(err, io.EOF) {
		err = io.ErrUnexpectedEOF
	}
	return 0, err
}

// discard skips up to n bytes and returns how many it skipped.
func (f *frameReader) discard(n int) (int, error) {
	if f.lo == f.hi {
		if err := f.fill(1); err != nil {
			if errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF
			}
			return 0, err
		}
	}
	k := min(n, f.hi-f.lo)
	f.lo += k
	return k, nil
}
