package nbd

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"runtime"
	"runtime/debug"
	"sync"

	"rackpool/internal/kwait"
)

const (
	// maxExtents bounds the descriptors of one block status reply.
	maxExtents = 1 << 17
	// bigWrite is the WRITE length from which a payload not yet buffered
	// is read straight into its buffer (see conn.bigWrites).
	bigWrite = 16 << 10
)

// conn is the transmission phase of one connection. One goroutine (serve)
// reads requests; each request that reaches the export runs on a
// goroutine of its own; replies are queued and written by whichever
// goroutine finds the writer idle (send).
type conn struct {
	nc          net.Conn
	br          *reader
	kr          *kwait.Reader // br's source, when waits for requests may block in the kernel
	ex          Export
	name        string
	size        uint64
	flags       ExportFlags
	tflags      uint16 // advertised transmission flags
	structured  bool
	blockStatus bool // base:allocation negotiated
	inline      bool // the export is an InlineExport that wants it
	inlineIdle  bool // the export is an IdleInlineExport that wants it
	// blind is set while the buffer says nothing of what follows in the
	// socket: the header after a large write is read on its own, and a
	// large write's payload comes straight from the socket.
	blind bool

	st         settings
	log        *slog.Logger
	ctx        context.Context
	inlineCtx  context.Context // ctx, marked for requests run on the reader
	cancel     context.CancelFunc
	discardMax uint64 // longest oversized WRITE payload skipped

	// bigWrites is set after a large WRITE whose payload was not yet
	// buffered: the next header is then read alone, so that if it is
	// another such WRITE its payload goes from the socket straight into
	// its own buffer.
	bigWrites bool

	// work hands a request to an idle worker goroutine; workers wait on
	// it for the next request until the connection ends, so that their
	// grown stacks are reused rather than grown again for every request.
	work    chan *op
	workers sync.WaitGroup

	// In-flight accounting: requests read and not yet answered, and the
	// payload bytes they hold. Only serve waits on cond.
	mu       sync.Mutex
	cond     sync.Cond
	inFlight int
	bytes    int

	// Reply writer state, guarded by wmu.
	wmu     sync.Mutex
	writing bool
	queue   []*op
	spare   []*op
	bufs    net.Buffers
	werr    error
}

// op is one request on its way to its reply.
type op struct {
	c       *conn
	req     request
	payload *[]byte // WRITE data read, or READ data to send
	cost    int     // bytes counted in conn.bytes
	out     []byte  // reply header and small payloads
	data    []byte  // READ data following out
	inline  bool    // running on the reader goroutine
}

var opPool = sync.Pool{New: func() any { return &op{out: make([]byte, 0, 64)} }}

func newConn(ctx context.Context, nc net.Conn, br *reader, neg negotiated, st settings, log *slog.Logger) *conn {
	c := &conn{
		nc:          nc,
		br:          br,
		ex:          neg.export,
		name:        neg.name,
		size:        neg.export.Size(),
		flags:       neg.export.Flags(),
		structured:  neg.structured,
		blockStatus: neg.blockStatus,
		st:          st,
		log:         log.With("export", st.logName(neg.name)),
		discardMax:  max(2*uint64(st.maxPayload), discardMin),
	}
	if ie, ok := neg.export.(InlineExport); ok {
		c.inline = ie.Inline()
	}
	if ie, ok := neg.export.(IdleInlineExport); ok {
		c.inlineIdle = ie.InlineWhenIdle()
	}
	if c.inlineIdle {
		// A forwarding export's lone request runs on the reader: while
		// none is in flight, its wait for the next one is the
		// connection's only work. (Not for InlineExport's storage, the
		// blocknode: there the waits measured no gain at queue depth 1
		// on a quiet machine, 0.87-1.0x nbdkit with and without.)
		if kr := kwait.NewReader(nc, true); kr != nil {
			br.rd, c.kr = kr, kr
		}
	}
	c.tflags = flagsToWire(c.flags)
	if c.structured {
		c.tflags |= tflagSendDF
	}
	c.ctx, c.cancel = context.WithCancel(ctx)
	c.inlineCtx = context.WithValue(c.ctx, inlineKey{}, true)
	c.work = make(chan *op)
	c.cond.L = &c.mu
	return c
}

var (
	errBadMagic = errors.New("nbd: bad request magic")
	errDisc     = errors.New("nbd: client disconnected")
	// errDrop ends a connection after the replies in flight, the last
	// of which tells the client why.
	errDrop = errors.New("nbd: request too large to skip")
)

// serve reads requests until the client disconnects or the connection
// breaks, waits for the requests in flight, and closes the export.
func (c *conn) serve() {
	err := c.readLoop()
	closing := c.ctx.Err() != nil // the server (or ServeConn's caller) ended the connection
	switch {
	case errors.Is(err, errDisc), errors.Is(err, errDrop):
		// NBD_CMD_DISC: answer what is in flight, then close.
		c.waitIdle()
		c.cancel()
	default:
		// A hard disconnect or a broken stream: nobody will read the
		// replies, so stop the requests in flight.
		c.cancel()
		c.nc.Close()
		c.waitIdle()
	}
	switch {
	case closing || errors.Is(err, errDisc) || errors.Is(err, io.EOF):
		c.log.Debug("nbd connection closed", "err", err)
	case errors.Is(err, errBadMagic):
		c.log.Warn("nbd connection dropped: bad request", "err", err)
	default:
		c.log.Info("nbd connection dropped", "err", err)
	}
	c.workers.Wait()
	if c.kr != nil {
		c.kr.Close()
	}
	if cerr := c.ex.Close(); cerr != nil {
		c.log.Warn("nbd export close failed", "err", cerr)
	}
}

// readLoop reads and dispatches requests. It returns errDisc after
// NBD_CMD_DISC, io.EOF at a clean end of stream, and another error when
// the stream breaks or the client breaks the protocol.
func (c *conn) readLoop() error {
	for {
		max := readBufSize
		if c.bigWrites {
			max = requestLen
		}
		if c.kr != nil {
			c.kr.Block = c.br.Buffered() < requestLen && c.idle()
		}
		hdr, err := c.br.next(requestLen, max)
		if err != nil {
			if errors.Is(err, io.ErrUnexpectedEOF) {
				return fmt.Errorf("truncated request header: %w", err)
			}
			return err
		}
		if binary.BigEndian.Uint32(hdr) != requestMagic {
			return fmt.Errorf("%w %#x", errBadMagic, binary.BigEndian.Uint32(hdr))
		}
		r := decodeRequest(hdr)
		c.blind = c.bigWrites
		c.bigWrites = false
		switch r.typ {
		case cmdDisc:
			return errDisc
		case cmdWrite:
			if err := c.readWrite(r); err != nil {
				return err
			}
			continue
		}
		if errno, msg := c.check(r); errno != 0 {
			c.fail(r, errno, msg)
			continue
		}
		if (r.length == 0 && r.typ != cmdFlush) || r.typ == cmdCache {
			// Zero-length requests (allowed, unspecified) and cache
			// hints do nothing and succeed.
			c.succeed(r)
			continue
		}
		cost := 0
		if r.typ == cmdRead {
			cost = int(r.length)
		}
		o := c.start(r, cost)
		c.dispatch(o)
	}
}

// dispatch runs o on a goroutine of its own, or on the reader goroutine
// when no other request is buffered behind o and the export is inline,
// or inline when idle, o is the only request in flight and the buffer
// tells (a request read around a large write could have others right
// behind it in the socket).
func (c *conn) dispatch(o *op) {
	if c.br.Buffered() == 0 && (c.inline || c.inlineIdle && !c.blind && c.alone()) {
		o.inline = true
		c.handle(o)
		return
	}
	c.toWorker(o)
}

// toWorker hands o to an idle worker, or to a new one.
func (c *conn) toWorker(o *op) {
	select {
	case c.work <- o:
	default:
		c.workers.Add(1)
		go c.worker(o)
	}
}

// worker handles o, then the requests dispatch hands it, until the
// connection ends.
func (c *conn) worker(o *op) {
	defer c.workers.Done()
	for {
		c.handle(o)
		select {
		case o = <-c.work:
		case <-c.ctx.Done():
			return
		}
	}
}

// alone reports whether one request is in flight: the one being
// dispatched.
func (c *conn) alone() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.inFlight == 1
}

// readWrite reads a WRITE's payload and dispatches it, or answers it with
// an error; it returns an error only if the connection must end.
func (c *conn) readWrite(r request) error {
	if r.length > c.st.maxPayload {
		// Oversized: skip the payload to keep the stream in step, up to
		// discardMax; beyond, answer and drop (see doc.go).
		msg := fmt.Sprintf("write of %d bytes exceeds the maximum %d", r.length, c.st.maxPayload)
		if uint64(r.length) > c.discardMax {
			c.fail(r, errnoOverflow, msg)
			return fmt.Errorf("%w: write of %d bytes", errDrop, r.length)
		}
		if _, err := c.br.Discard(int(r.length)); err != nil {
			return fmt.Errorf("truncated write payload: %w", err)
		}
		c.fail(r, errnoOverflow, msg)
		return nil
	}
	o := c.start(r, int(r.length))
	o.payload = getBuf(int(r.length))
	c.bigWrites = c.br.Buffered() < int(r.length) && r.length >= bigWrite
	c.blind = c.blind || c.bigWrites
	if err := c.br.ReadFull(*o.payload); err != nil {
		c.release(o)
		return fmt.Errorf("truncated write payload: %w", err)
	}
	if errno, msg := c.check(r); errno != 0 {
		c.opFail(o, errno, msg, nil)
		return nil
	}
	if r.length == 0 {
		c.opSucceed(o)
		return nil
	}
	c.dispatch(o)
	return nil
}

// check validates a request against the negotiated features and the
// export's size, returning the error value and message to answer with,
// or 0.
func (c *conn) check(r request) (uint32, string) {
	var allowed uint16
	switch r.typ {
	case cmdRead:
		allowed = cmdFlagDF
	case cmdWrite, cmdCache:
	case cmdFlush:
		if !c.flags.CanFlush {
			return errnoInval, "flush not offered"
		}
	case cmdTrim:
		if !c.flags.CanTrim {
			return errnoInval, "trim not offered"
		}
	case cmdWriteZeroes:
		if !c.flags.CanWriteZeroes {
			return errnoInval, "write zeroes not offered"
		}
		allowed = cmdFlagNoHole
		if c.tflags&tflagSendFastZero != 0 {
			allowed |= cmdFlagFastZero
		}
	case cmdBlockStatus:
		if !c.blockStatus {
			return errnoInval, "no metadata context negotiated"
		}
		allowed = cmdFlagReqOne
	default:
		return errnoInval, fmt.Sprintf("unknown command %d", r.typ)
	}
	if c.flags.CanFUA {
		allowed |= cmdFlagFUA
	}
	if r.typ == cmdRead && !c.structured {
		allowed &^= cmdFlagDF
	}
	if r.flags&^allowed != 0 {
		return errnoInval, fmt.Sprintf("flags %#x not valid for %s", r.flags&^allowed, cmdName(r.typ))
	}
	if r.typ == cmdFlush {
		if r.off != 0 || r.length != 0 {
			return errnoInval, "flush offset and length must be zero"
		}
		return 0, ""
	}
	if r.typ == cmdRead && r.length > c.st.maxPayload {
		return errnoOverflow, fmt.Sprintf("read of %d bytes exceeds the maximum %d", r.length, c.st.maxPayload)
	}
	write := r.typ == cmdWrite || r.typ == cmdTrim || r.typ == cmdWriteZeroes
	if write && c.flags.ReadOnly {
		return errnoPerm, "export is read-only"
	}
	if r.off > c.size || uint64(r.length) > c.size-r.off {
		if r.typ == cmdWrite || r.typ == cmdWriteZeroes {
			return errnoNoSpc, fmt.Sprintf("%d bytes at %d are past the end (%d)", r.length, r.off, c.size)
		}
		return errnoInval, fmt.Sprintf("%d bytes at %d are past the end (%d)", r.length, r.off, c.size)
	}
	if r.typ == cmdBlockStatus && r.length == 0 {
		return errnoInval, "block status of zero bytes"
	}
	return 0, ""
}

// start counts a request in flight, waiting while the connection is at
// its limits (so the reader stops reading: backpressure).
func (c *conn) start(r request, cost int) *op {
	c.mu.Lock()
	for c.inFlight >= c.st.maxInFlight || (c.inFlight > 0 && c.bytes+cost > inFlightBytes) {
		c.cond.Wait()
	}
	c.inFlight++
	c.bytes += cost
	c.mu.Unlock()
	o := opPool.Get().(*op)
	o.c, o.req, o.cost = c, r, cost
	return o
}

// release ends a request: its buffers go back to their pools and its
// slot is freed.
func (c *conn) release(o *op) {
	putBuf(o.payload)
	cost := o.cost
	*o = op{out: o.out[:0]}
	if cap(o.out) <= 4096 {
		opPool.Put(o)
	}
	c.mu.Lock()
	c.inFlight--
	c.bytes -= cost
	c.cond.Signal()
	c.mu.Unlock()
}

// idle reports whether no request is in flight.
func (c *conn) idle() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.inFlight == 0
}

// busy reports whether requests other than one are in flight.
func (c *conn) busy() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.inFlight > 1
}

// waitIdle waits until every request in flight has been answered.
func (c *conn) waitIdle() {
	c.mu.Lock()
	for c.inFlight > 0 {
		c.cond.Wait()
	}
	c.mu.Unlock()
}

// handle runs one request against the export and queues its reply.
func (c *conn) handle(o *op) {
	ext, err := c.do(o)
	if o.inline {
		o.inline = false
		if errors.Is(err, ErrNotInline) {
			// The export must wait: run it again on a worker, and go
			// back to reading.
			if o.req.typ == cmdRead {
				putBuf(o.payload)
				o.payload = nil
			}
			c.toWorker(o)
			return
		}
	}
	switch {
	case err != nil:
		c.exportFailed(o, err)
	case o.req.typ == cmdRead:
		c.readReply(o)
	case o.req.typ == cmdBlockStatus:
		c.blockStatusReply(o, ext)
	default:
		c.opSucceed(o)
	}
}

// errPanic stands for a panic in an export method.
var errPanic = errors.New("nbd: export panicked")

// do calls the export for o. A panic in the export is logged and becomes
// an EIO reply, as a failed request rather than a dead server.
func (c *conn) do(o *op) (ext []Extent, err error) {
	defer func() {
		if p := recover(); p != nil {
			c.log.Error("nbd export panicked", "cmd", cmdName(o.req.typ), "panic", p, "stack", string(debug.Stack()))
			ext, err = nil, errPanic
		}
	}()
	r := o.req
	fua := r.flags&cmdFlagFUA != 0
	ctx := c.ctx
	if o.inline {
		ctx = c.inlineCtx
	}
	switch r.typ {
	case cmdRead:
		o.payload = getBuf(int(r.length))
		return nil, c.ex.ReadAt(ctx, *o.payload, r.off)
	case cmdWrite:
		return nil, c.ex.WriteAt(ctx, *o.payload, r.off, fua)
	case cmdFlush:
		return nil, c.ex.Flush(ctx)
	case cmdTrim:
		return nil, c.ex.Trim(ctx, r.off, uint64(r.length), fua)
	case cmdWriteZeroes:
		return nil, c.ex.Zero(ctx, r.off, uint64(r.length), ZeroFlags{
			NoHole: r.flags&cmdFlagNoHole != 0,
			Fast:   r.flags&cmdFlagFastZero != 0,
			FUA:    fua,
		})
	case cmdBlockStatus:
		if !c.flags.CanBlockStatus {
			return nil, nil
		}
		return c.ex.BlockStatus(ctx, r.off, uint64(r.length))
	}
	return nil, nil
}

// exportFailed answers a request whose export method failed.
func (c *conn) exportFailed(o *op, err error) {
	errno := Errno(err)
	if c.ctx.Err() == nil {
		lvl := slog.LevelDebug
		if errno == errnoIO {
			lvl = slog.LevelWarn
		}
		c.log.Log(c.ctx, lvl, "nbd request failed", "cmd", cmdName(o.req.typ), "offset", o.req.off,
			"length", o.req.length, "errno", errnoName(errno), "err", err)
	}
	c.opFail(o, errno, "", err)
}

// readReply queues the data of a successful READ.
func (c *conn) readReply(o *op) {
	r := o.req
	o.data = *o.payload
	if c.structured {
		// One OFFSET_DATA chunk, final: the data is all read already.
		o.out = o.out[:chunkHdrLen+8]
		putChunkHeader(o.out, replyFlagDone, replyTypeOffsetData, r.cookie, 8+r.length)
		binary.BigEndian.PutUint64(o.out[chunkHdrLen:], r.off)
	} else {
		o.out = o.out[:simpleReplyLen]
		putSimpleReply(o.out, 0, r.cookie)
	}
	c.send(o)
}

// blockStatusReply answers NBD_CMD_BLOCK_STATUS with the runs ext, cut
// to the request.
func (c *conn) blockStatusReply(o *op, ext []Extent) {
	r := o.req
	o.out = o.out[:chunkHdrLen+4]
	o.out = binary.BigEndian.AppendUint32(o.out[:chunkHdrLen], metaContextID)
	left := uint64(r.length) // the reply never goes past the request
	n := 0
	for _, e := range ext {
		if left == 0 || n == maxExtents || (n == 1 && r.flags&cmdFlagReqOne != 0) {
			break
		}
		l := min(e.Length, left)
		if l == 0 {
			continue
		}
		var flags uint32
		if e.Hole {
			flags |= stateHole
		}
		if e.Zero {
			flags |= stateZero
		}
		o.out = binary.BigEndian.AppendUint32(o.out, uint32(l))
		o.out = binary.BigEndian.AppendUint32(o.out, flags)
		left -= l
		n++
	}
	if n == 0 {
		// Nothing usable from the export: everything allocated, contents
		// unknown, which is always a correct answer.
		o.out = binary.BigEndian.AppendUint32(o.out, r.length)
		o.out = binary.BigEndian.AppendUint32(o.out, 0)
	}
	putChunkHeader(o.out, replyFlagDone, replyTypeBlockStatus, r.cookie, uint32(len(o.out)-chunkHdrLen))
	c.send(o)
}

// succeed answers a request that needed no export call.
func (c *conn) succeed(r request) {
	c.opSucceed(c.start(r, 0))
}

// opSucceed queues a success without data.
func (c *conn) opSucceed(o *op) {
	if o.req.typ == cmdRead && c.structured {
		// A read must get a structured reply: only a zero-length read
		// gets here, and NONE covers it.
		o.out = o.out[:chunkHdrLen]
		putChunkHeader(o.out, replyFlagDone, replyTypeNone, o.req.cookie, 0)
	} else {
		o.out = o.out[:simpleReplyLen]
		putSimpleReply(o.out, 0, o.req.cookie)
	}
	c.send(o)
}

// fail answers a request the reader refused.
func (c *conn) fail(r request, errno uint32, msg string) {
	c.opFail(c.start(r, 0), errno, msg, nil)
}

// opFail queues an error reply with msg, or, if msg is empty, with the
// text peerMessage gives for cause.
func (c *conn) opFail(o *op, errno uint32, msg string, cause error) {
	putBuf(o.payload)
	o.payload = nil
	if !c.structured {
		o.out = o.out[:simpleReplyLen]
		putSimpleReply(o.out, errno, o.req.cookie)
		c.send(o)
		return
	}
	if msg == "" {
		msg = peerMessage(cause, errnoText(errno))
	}
	msg = truncateUTF8(msg, maxMessage)
	o.out = o.out[:chunkHdrLen+6]
	putChunkHeader(o.out, replyFlagDone, replyTypeError, o.req.cookie, uint32(6+len(msg)))
	binary.BigEndian.PutUint32(o.out[chunkHdrLen:], errno)
	binary.BigEndian.PutUint16(o.out[chunkHdrLen+4:], uint16(len(msg)))
	o.out = append(o.out, msg...)
	c.send(o)
}

// send queues o's reply. If no goroutine is writing, this one writes the
// queue, and what is queued meanwhile, in one writev per batch, and
// releases the ops written. While other requests are in flight it first
// yields, so that the workers ready to run queue their replies and one
// writev carries them all.
func (c *conn) send(o *op) {
	c.wmu.Lock()
	c.queue = append(c.queue, o)
	if c.writing {
		c.wmu.Unlock()
		return
	}
	if c.busy() {
		c.wmu.Unlock()
		runtime.Gosched()
		c.wmu.Lock()
		if c.writing || len(c.queue) == 0 {
			c.wmu.Unlock()
			return
		}
	}
	c.writing = true
	for len(c.queue) > 0 {
		batch := c.queue
		c.queue = c.spare[:0]
		c.wmu.Unlock()
		c.write(batch)
		c.wmu.Lock()
		clear(batch)
		c.spare = batch[:0]
	}
	c.writing = false
	c.wmu.Unlock()
}

// write sends a batch of replies and releases their ops. Only the
// goroutine holding the writer role calls it.
func (c *conn) write(batch []*op) {
	if c.werr == nil {
		bufs := c.bufs[:0]
		for _, o := range batch {
			bufs = append(bufs, o.out)
			if len(o.data) > 0 {
				bufs = append(bufs, o.data)
			}
		}
		c.bufs = bufs
		if _, err := writeBuffers(c.nc, &c.bufs); err != nil {
			// A partly written reply cannot be taken back: end the
			// connection; later replies are dropped.
			c.werr = err
			c.nc.Close()
		}
		clear(bufs)
		c.bufs = bufs[:0]
	}
	for _, o := range batch {
		c.release(o)
	}
}
