package nbd

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"testing"
	"time"
)

// fakeServer is the server end of a pipe driven by hand, for replies our
// own server never sends.
type fakeServer struct {
	nc net.Conn
	br *bufio.Reader
}

func (f *fakeServer) write(b []byte) error {
	_, err := f.nc.Write(b)
	return err
}

// negotiate greets and answers options: structured replies yes, meta
// contexts and GO unsupported, so the client falls back to EXPORT_NAME.
func (f *fakeServer) negotiate(size uint64, tflags uint16) error {
	g := binary.BigEndian.AppendUint64(nil, nbdMagic)
	g = binary.BigEndian.AppendUint64(g, optMagic)
	g = binary.BigEndian.AppendUint16(g, flagFixedNewstyle|flagNoZeroes)
	if err := f.write(g); err != nil {
		return err
	}
	var cf [4]byte
	if _, err := io.ReadFull(f.br, cf[:]); err != nil {
		return err
	}
	if binary.BigEndian.Uint32(cf[:]) != clientFixedNewstyle|clientNoZeroes {
		return fmt.Errorf("client flags % x", cf)
	}
	for {
		var h [optHdrLen]byte
		if _, err := io.ReadFull(f.br, h[:]); err != nil {
			return err
		}
		opt := binary.BigEndian.Uint32(h[8:])
		if _, err := f.br.Discard(int(binary.BigEndian.Uint32(h[12:]))); err != nil {
			return err
		}
		switch opt {
		case optStructuredReply:
			f.write(appendOptReply(nil, opt, repAck, 0))
		case optExportName:
			b := binary.BigEndian.AppendUint64(nil, size)
			return f.write(binary.BigEndian.AppendUint16(b, tflags))
		default:
			f.write(appendOptReply(nil, opt, repErrUnsup, 0))
		}
	}
}

// request reads one request header.
func (f *fakeServer) request() (request, error) {
	var b [requestLen]byte
	if _, err := io.ReadFull(f.br, b[:]); err != nil {
		return request{}, err
	}
	return decodeRequest(b[:]), nil
}

func chunk(flags, typ uint16, cookie uint64, payload ...[]byte) []byte {
	p := bytes.Join(payload, nil)
	b := make([]byte, chunkHdrLen, chunkHdrLen+len(p))
	putChunkHeader(b, flags, typ, cookie, uint32(len(p)))
	return append(b, p...)
}

func u64(v uint64) []byte { return binary.BigEndian.AppendUint64(nil, v) }
func u32(v uint32) []byte { return binary.BigEndian.AppendUint32(nil, v) }
func u16(v uint16) []byte { return binary.BigEndian.AppendUint16(nil, v) }

func TestClientFallbackAndChunks(t *testing.T) {
	checkNoLeak(t)
	a, b := net.Pipe()
	f := &fakeServer{nc: b, br: bufio.NewReader(b)}
	script := make(chan error, 1)
	go func() {
		defer b.Close()
		script <- func() error {
			if err := f.negotiate(1<<20, tflagHasFlags|tflagSendFlush); err != nil {
				return err
			}
			// A read answered out of order: hole, data, then NONE.
			r, err := f.request()
			if err != nil {
				return err
			}
			f.write(chunk(0, replyTypeOffsetHole, r.cookie, u64(r.off+4096), u32(4096)))
			f.write(chunk(0, replyTypeOffsetData, r.cookie, u64(r.off), bytes.Repeat([]byte{7}, 4096)))
			f.write(chunk(replyFlagDone, replyTypeNone, r.cookie))
			// A read with an error at an offset after some data.
			r, err = f.request()
			if err != nil {
				return err
			}
			f.write(chunk(0, replyTypeOffsetData, r.cookie, u64(r.off), bytes.Repeat([]byte{1}, 100)))
			f.write(chunk(0, replyTypeErrorOffset, r.cookie, u32(errnoIO), u16(10), []byte("bad sector"), u64(r.off+100)))
			f.write(chunk(replyFlagDone, replyTypeNone, r.cookie))
			// A flush answered with a simple reply, and an unknown error
			// chunk type, which still counts as an error.
			r, err = f.request()
			if err != nil {
				return err
			}
			f.write(chunk(replyFlagDone, replyTypeErrBit+77, r.cookie, u32(errnoNoSpc), u16(0), []byte("extra")))
			r, err = f.request()
			if err != nil {
				return err
			}
			sr := make([]byte, simpleReplyLen)
			putSimpleReply(sr, 0, r.cookie)
			f.write(sr)
			// A read "completed" without all its data: a broken server.
			r, err = f.request()
			if err != nil {
				return err
			}
			f.write(chunk(replyFlagDone, replyTypeOffsetData, r.cookie, u64(r.off), []byte{1, 2, 3}))
			io.Copy(io.Discard, f.br)
			return nil
		}()
	}()

	ctx := testCtx(t)
	c, err := NewClient(ctx, a, "x")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if !c.structured || c.Flags().CanBlockStatus || !c.Flags().CanFlush || c.Flags().CanTrim || c.Size() != 1<<20 {
		t.Fatalf("negotiated structured %v flags %+v size %d", c.structured, c.Flags(), c.Size())
	}
	if _, err := c.BlockStatus(ctx, 0, 512); !errors.Is(err, ErrNotSupported) {
		t.Fatalf("BlockStatus without a context: %v", err)
	}
	if err := c.Trim(ctx, 0, 512, false); !errors.Is(err, ErrNotSupported) {
		t.Fatalf("Trim not offered: %v", err)
	}

	buf := bytes.Repeat([]byte{0xee}, 8192)
	if err := c.ReadAt(ctx, buf, 0); err != nil {
		t.Fatalf("chunked read: %v", err)
	}
	if !bytes.Equal(buf[:4096], bytes.Repeat([]byte{7}, 4096)) || !bytes.Equal(buf[4096:], make([]byte, 4096)) {
		t.Fatal("chunks not reassembled")
	}
	err = c.ReadAt(ctx, make([]byte, 200), 0)
	var e *Error
	if !errors.As(err, &e) || e.Errno != errnoIO || e.Message != "bad sector" || !errors.Is(err, ErrIO) {
		t.Fatalf("read with an error offset: %v", err)
	}
	if err := c.Flush(ctx); !errors.Is(err, ErrNoSpace) {
		t.Fatalf("unknown error chunk: %v", err)
	}
	if err := c.Flush(ctx); err != nil {
		t.Fatalf("simple reply to flush: %v", err)
	}
	err = c.ReadAt(ctx, make([]byte, 512), 0)
	if !errors.Is(err, ErrClosed) || !errors.Is(err, ErrProtocol) {
		t.Fatalf("short read reply: %v, want ErrClosed and ErrProtocol", err)
	}
	if err := c.ReadAt(ctx, make([]byte, 512), 0); !errors.Is(err, ErrClosed) {
		t.Fatalf("read after the connection broke: %v", err)
	}
	c.Close()
	select {
	case err := <-script:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("fake server did not finish")
	}
}

func TestClientHandshakeErrors(t *testing.T) {
	for _, tc := range []struct {
		name     string
		greeting []byte
	}{
		{"not nbd", []byte("SSH-2.0-OpenSSH_9.2p1 Debian\r\n")},
		{"oldstyle", append(binary.BigEndian.AppendUint64(nil, nbdMagic), u64(oldstyleMagic)...)},
		{"eof", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, b := net.Pipe()
			go func() {
				b.Write(tc.greeting)
				b.Close()
			}()
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			c, err := NewClient(ctx, a, "x")
			a.Close()
			if err == nil {
				c.Close()
				t.Fatal("NewClient succeeded")
			}
		})
	}
	// A server that never answers: the context bounds the negotiation.
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	if _, err := NewClient(ctx, a, "x"); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("NewClient against a silent server: %v", err)
	}
	if time.Since(start) > 3*time.Second {
		t.Fatal("NewClient ignored its context")
	}
}

// stalledFlushServer starts a client on a fake server that reads nothing
// until resume is closed (so the client's writes block), then expects one
// FLUSH, answers it, and reports on served.
func stalledFlushServer(t *testing.T) (c *Client, resume chan struct{}, served chan error) {
	t.Helper()
	a, b := net.Pipe()
	f := &fakeServer{nc: b, br: bufio.NewReader(b)}
	negotiated := make(chan error, 1)
	resume, served = make(chan struct{}), make(chan error, 1)
	go func() {
		defer b.Close()
		negotiated <- f.negotiate(1<<20, tflagHasFlags|tflagSendFlush)
		<-resume
		r, err := f.request()
		if err != nil {
			served <- err
			return
		}
		if r.typ != cmdFlush {
			served <- fmt.Errorf("request %s, want flush: the cancelled write went out", cmdName(r.typ))
			return
		}
		sr := make([]byte, simpleReplyLen)
		putSimpleReply(sr, 0, r.cookie)
		f.write(sr)
		served <- nil
	}()
	c, err := NewClient(testCtx(t), a, "x")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if err := <-negotiated; err != nil {
		t.Fatal(err)
	}
	return c, resume, served
}

// TestClientCancelBlockedWrite cancels a write stuck on a server that
// does not read: after the grace period the call returns ctx.Err(), and
// since nothing of the request went out the connection stays usable.
func TestClientCancelBlockedWrite(t *testing.T) {
	checkNoLeak(t)
	c, resume, served := stalledFlushServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	start := time.Now()
	err := c.WriteAt(ctx, make([]byte, 4096), 0, false)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("blocked write: %v, want the context's error", err)
	}
	if d := time.Since(start); d > writeGrace+2*time.Second {
		t.Fatalf("blocked write returned after %v", d)
	}
	close(resume)
	if err := c.Flush(testCtx(t)); err != nil {
		t.Fatalf("flush after the cancelled write: %v", err)
	}
	if err := <-served; err != nil {
		t.Fatal(err)
	}
}

// TestClientCancelBlockedWriteKeepsOthers: a WRITE cancelled while the
// server does not read gives up only itself. A FLUSH another caller
// queued behind it meanwhile is still sent once the server reads again,
// and the connection is not broken.
func TestClientCancelBlockedWriteKeepsOthers(t *testing.T) {
	checkNoLeak(t)
	c, resume, served := stalledFlushServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	wrote := make(chan error, 1)
	go func() { wrote <- c.WriteAt(ctx, make([]byte, 4096), 0, false) }()
	time.Sleep(20 * time.Millisecond) // the WRITE holds the writer role, blocked
	flushed := make(chan error, 1)
	go func() { flushed <- c.Flush(testCtx(t)) }()
	if err := <-wrote; !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("blocked write: %v, want the context's error", err)
	}
	close(resume)
	if err := <-flushed; err != nil {
		t.Fatalf("flush queued behind the cancelled write: %v", err)
	}
	if err := <-served; err != nil {
		t.Fatal(err)
	}
}

// pipeClient negotiates a client over a pipe with a fake server, which
// script then drives; the script's error is reported on the returned
// channel.
func pipeClient(t *testing.T, script func(f *fakeServer) error) (*Client, chan error) {
	t.Helper()
	a, b := net.Pipe()
	f := &fakeServer{nc: b, br: bufio.NewReader(b)}
	negotiated := make(chan error, 1)
	done := make(chan error, 1)
	go func() {
		defer b.Close()
		if err := f.negotiate(1<<20, tflagHasFlags|tflagSendFlush); err != nil {
			negotiated <- err
			return
		}
		negotiated <- nil
		done <- script(f)
	}()
	c, err := NewClient(testCtx(t), a, "x")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Abort() })
	if err := <-negotiated; err != nil {
		t.Fatal(err)
	}
	return c, done
}

// TestClientReaderRolePassesOn: the caller reading replies gives up when
// its context ends while it waits for the start of a reply, and another
// caller takes the role over: its reply, and a later one, arrive; the
// abandoned caller's late reply touches nothing.
func TestClientReaderRolePassesOn(t *testing.T) {
	checkNoLeak(t)
	reqs := make(chan request, 2)
	answer := make(chan struct{})
	c, done := pipeClient(t, func(f *fakeServer) error {
		var got []request
		for range 2 {
			r, err := f.request()
			if err != nil {
				return err
			}
			got = append(got, r)
			reqs <- r
		}
		<-answer
		// The second caller's reply first, then the abandoned one's.
		for _, r := range []request{got[1], got[0]} {
			if err := f.write(chunk(replyFlagDone, replyTypeOffsetData, r.cookie, u64(r.off), bytes.Repeat([]byte{byte(r.off >> 12)}, int(r.length)))); err != nil {
				return err
			}
		}
		r, err := f.request()
		if err != nil {
			return err
		}
		return f.write(chunk(replyFlagDone, replyTypeOffsetData, r.cookie, u64(r.off), bytes.Repeat([]byte{3}, int(r.length))))
	})
	ctx, cancel := context.WithCancel(testCtx(t))
	first := make([]byte, 4096)
	firstErr := make(chan error, 1)
	go func() { firstErr <- c.ReadAt(ctx, first, 1<<12) }()
	<-reqs // the first caller is in flight, and reads: nobody else waits
	second := make([]byte, 4096)
	secondErr := make(chan error, 1)
	go func() { secondErr <- c.ReadAt(testCtx(t), second, 2<<12) }()
	<-reqs
	cancel()
	if err := <-firstErr; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled reader: %v, want context.Canceled", err)
	}
	close(answer)
	if err := <-secondErr; err != nil {
		t.Fatalf("the other caller: %v", err)
	}
	if !bytes.Equal(second, bytes.Repeat([]byte{2}, 4096)) {
		t.Fatal("the other caller got the wrong data")
	}
	third := make([]byte, 512)
	if err := c.ReadAt(testCtx(t), third, 0); err != nil {
		t.Fatalf("read after the hand-over: %v", err)
	}
	if !bytes.Equal(third, bytes.Repeat([]byte{3}, 512)) {
		t.Fatal("read after the hand-over got the wrong data")
	}
	if !bytes.Equal(first, make([]byte, 4096)) {
		t.Fatal("the abandoned reply was written into the caller's buffer")
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// TestClientReaderStallsMidReply: a server that stops in the middle of a
// reply while its reader's context ends breaks the connection after
// abandonGrace; the caller gets its context's error, later calls
// ErrClosed.
func TestClientReaderStallsMidReply(t *testing.T) {
	checkNoLeak(t)
	hold := make(chan struct{})
	c, done := pipeClient(t, func(f *fakeServer) error {
		r, err := f.request()
		if err != nil {
			return err
		}
		reply := chunk(replyFlagDone, replyTypeOffsetData, r.cookie, u64(r.off), make([]byte, r.length))
		if err := f.write(reply[:len(reply)/2]); err != nil {
			return err
		}
		<-hold
		return nil
	})
	defer close(hold)
	ctx, cancel := context.WithTimeout(testCtx(t), 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	err := c.ReadAt(ctx, make([]byte, 8192), 0)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("stalled read: %v, want context.DeadlineExceeded", err)
	}
	if d := time.Since(start); d < abandonGrace {
		t.Fatalf("stalled read returned after %v, before the grace %v", d, abandonGrace)
	}
	if err := c.ReadAt(testCtx(t), make([]byte, 512), 0); !errors.Is(err, ErrClosed) {
		t.Fatalf("read after the stall: %v, want ErrClosed", err)
	}
	_ = done
}
