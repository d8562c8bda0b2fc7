package nbd

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"io"
	"net"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

// fuzzDeadline bounds one fuzz input: everything must be over by then.
const fuzzDeadline = 5 * time.Second

// fuzzServer is a server over one small file export, shared by a fuzz
// target's inputs.
func fuzzServer(f *testing.F) (*Server, *testExports) {
	dir := f.TempDir()
	path := filepath.Join(dir, "img")
	if err := os.WriteFile(path, bytes.Repeat([]byte{0x5a}, 1<<20), 0o600); err != nil {
		f.Fatal(err)
	}
	x := newTestExports()
	x.add("disk", path, "fuzz disk", false)
	x.add("ro", path, "", true)
	srv := &Server{Exports: x, MaxPayload: 64 << 10, HandshakeTimeout: fuzzDeadline}
	f.Cleanup(func() { srv.Close() })
	return srv, x
}

// serveBytes feeds in to one server connection, drains its replies, and
// fails if the connection outlives the deadline or leaves an export open.
func serveBytes(t *testing.T, srv *Server, x *testExports, in []byte) {
	a, b := net.Pipe()
	deadline := time.Now().Add(fuzzDeadline)
	a.SetDeadline(deadline)
	done := make(chan struct{})
	go func() {
		defer close(done)
		srv.ServeConn(context.Background(), b)
	}()
	drained := make(chan struct{})
	go func() {
		defer close(drained)
		io.Copy(io.Discard, a)
	}()
	a.Write(in)
	a.Close()
	select {
	case <-done:
	case <-time.After(time.Until(deadline) + 5*time.Second):
		t.Fatal("server connection did not end")
	}
	<-drained
	if o, c := x.opens.Load(), x.closes.Load(); o != c {
		t.Fatalf("exports opened %d times, closed %d", o, c)
	}
}

func FuzzServerOptions(f *testing.F) {
	srv, x := fuzzServer(f)
	prefix := binary.BigEndian.AppendUint32(nil, clientFixedNewstyle|clientNoZeroes)
	seeds := [][]byte{
		appendOption(nil, optList, nil),
		appendOption(appendOption(nil, optStructuredReply, nil), optGo, goData("disk", infoName, infoDescription)),
		appendOption(nil, optInfo, goData("ro", infoBlockSize)),
		appendOption(nil, optExportName, []byte("disk")),
		appendOption(nil, optExportName, []byte("nope")),
		appendOption(appendOption(nil, optStructuredReply, nil), optListMetaContext, metaData("disk", "base:")),
		appendOption(appendOption(nil, optStructuredReply, nil), optSetMetaContext, metaData("disk", "base:allocation", "x-y:z")),
		appendOption(nil, optSetMetaContext, []byte{0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff}),
		appendOption(nil, optStartTLS, nil),
		appendOption(nil, optAbort, nil),
		appendOption(nil, optGo, []byte{0xff, 0xff, 0xff, 0xff, 0, 0}),
		append(binary.BigEndian.AppendUint64(nil, optMagic), 0, 0, 0, 7, 0xff, 0xff, 0xff, 0xff),
		{},
	}
	for _, s := range seeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		serveBytes(t, srv, x, append(append([]byte(nil), prefix...), data...))
	})
}

// transmissionPrefix negotiates export "disk" into transmission, with or
// without structured replies and base:allocation.
func transmissionPrefix(structured bool) []byte {
	b := binary.BigEndian.AppendUint32(nil, clientFixedNewstyle|clientNoZeroes)
	if structured {
		b = appendOption(b, optStructuredReply, nil)
		b = appendOption(b, optSetMetaContext, metaData("disk", metaBaseAllocation))
	}
	return appendOption(b, optGo, goData("disk"))
}

func reqBytes(flags, typ uint16, cookie, off uint64, length uint32, payload []byte) []byte {
	b := make([]byte, requestLen, requestLen+len(payload))
	putRequest(b, request{flags: flags, typ: typ, cookie: cookie, off: off, length: length})
	return append(b, payload...)
}

func FuzzServerRequests(f *testing.F) {
	srv, x := fuzzServer(f)
	join := func(bs ...[]byte) []byte { return bytes.Join(bs, nil) }
	seeds := [][]byte{
		join(reqBytes(0, cmdRead, 1, 0, 4096, nil), reqBytes(0, cmdDisc, 2, 0, 0, nil)),
		join(reqBytes(cmdFlagFUA, cmdWrite, 1, 512, 4, []byte("data")), reqBytes(0, cmdFlush, 2, 0, 0, nil)),
		reqBytes(cmdFlagNoHole|cmdFlagFastZero, cmdWriteZeroes, 1, 0, 1<<20, nil),
		reqBytes(cmdFlagReqOne, cmdBlockStatus, 1, 4096, 8192, nil),
		reqBytes(0, cmdTrim, 1, 1<<20-1, 2, nil),
		reqBytes(0, cmdWrite, 1, 0, 100<<10, nil),
		reqBytes(0, cmdWrite, 1, 0, 1<<30, nil),
		reqBytes(0, cmdRead, 1, ^uint64(0), 10, nil),
		reqBytes(0xffff, 0xffff, 1, 0, 0, nil),
		reqBytes(0, cmdCache, 1, 0, 0, nil),
		bytes.Repeat([]byte{0x25, 0x60, 0x95, 0x13}, 20),
	}
	for _, s := range seeds {
		f.Add(true, s)
		f.Add(false, s)
	}
	f.Fuzz(func(t *testing.T, structured bool, data []byte) {
		serveBytes(t, srv, x, append(transmissionPrefix(structured), data...))
	})
}

// fuzzRequests are the requests FuzzClientReplies has in flight, in
// cookie order (the client numbers cookies from 1).
var fuzzRequests = []func(ctx context.Context, c *Client) error{
	func(ctx context.Context, c *Client) error { return c.ReadAt(ctx, make([]byte, 512), 0) },
	func(ctx context.Context, c *Client) error { _, err := c.BlockStatus(ctx, 0, 1<<20); return err },
	func(ctx context.Context, c *Client) error { return c.WriteAt(ctx, make([]byte, 512), 0, true) },
	func(ctx context.Context, c *Client) error { return c.Flush(ctx) },
	func(ctx context.Context, c *Client) error { return c.ReadAt(ctx, make([]byte, 16), 100) },
	func(ctx context.Context, c *Client) error { return c.Zero(ctx, 0, 4096, ZeroFlags{NoHole: true}) },
}

func FuzzClientReplies(f *testing.F) {
	join := func(bs ...[]byte) []byte { return bytes.Join(bs, nil) }
	data := bytes.Repeat([]byte{1}, 512) // small: the fuzzer minimizes every new input
	simple := func(errno uint32, cookie uint64) []byte {
		b := make([]byte, simpleReplyLen)
		putSimpleReply(b, errno, cookie)
		return b
	}
	f.Add(join(
		chunk(replyFlagDone, replyTypeOffsetData, 1, u64(0), data),
		chunk(replyFlagDone, replyTypeBlockStatus, 2, u32(metaContextID), u32(4096), u32(3), u32(8192), u32(0)),
		simple(0, 3), simple(0, 4),
		chunk(0, replyTypeOffsetHole, 5, u64(100), u32(16)), chunk(replyFlagDone, replyTypeNone, 5),
		chunk(replyFlagDone, replyTypeError, 6, u32(errnoNoSpc), u16(3), []byte("msg")),
	))
	f.Add(join(
		chunk(0, replyTypeOffsetData, 1, u64(256), data[:256]),
		chunk(0, replyTypeErrorOffset, 1, u32(errnoIO), u16(0), u64(0)),
		chunk(replyFlagDone, replyTypeNone, 1),
		chunk(replyFlagDone, replyTypeErrBit|9, 2, u32(1), u16(0), []byte{9, 9}),
	))
	f.Add(join(simple(0, 1), data))
	f.Add(join(simple(5, 1), simple(0, 99)))
	f.Add(chunk(replyFlagDone, replyTypeOffsetData, 1, u64(1<<40), data))
	f.Add(chunk(replyFlagDone, replyTypeBlockStatus, 2, u32(metaContextID), u32(0), u32(0)))
	f.Add(chunk(replyFlagDone, replyTypeError, 3, u32(1), u16(0xffff)))
	f.Add([]byte{0x66, 0x8e, 0x33, 0xef, 0, 1, 0, 1})
	f.Fuzz(fuzzClientReplies)
}

func fuzzClientReplies(t *testing.T, replies []byte) {
	a, b := net.Pipe()
	deadline := time.Now().Add(fuzzDeadline)
	a.SetDeadline(deadline)
	b.SetDeadline(deadline)
	fs := &fakeServer{nc: b, br: bufio.NewReader(b)}
	got := make(chan struct{}, len(fuzzRequests))
	server := make(chan struct{})
	go func() {
		defer close(server)
		defer b.Close()
		if err := fakeGo(fs); err != nil {
			return
		}
		for range fuzzRequests {
			r, err := fs.request()
			if err != nil {
				return
			}
			if r.typ == cmdWrite {
				fs.br.Discard(int(r.length))
			}
			got <- struct{}{}
		}
		// Then close: requests left unanswered fail with ErrClosed.
		fs.write(replies)
	}()

	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	c, err := NewClient(ctx, a, "disk")
	if err != nil {
		t.Fatalf("NewClient: %v", err)
	}
	var wg sync.WaitGroup
	for _, req := range fuzzRequests {
		wg.Go(func() { req(ctx, c) })
		select {
		case <-got:
		case <-time.After(time.Until(deadline)):
			t.Fatal("the fake server did not receive the requests")
		}
	}
	finished := make(chan struct{})
	go func() {
		wg.Wait()
		close(finished)
	}()
	select {
	case <-finished:
	case <-time.After(time.Until(deadline) + 5*time.Second):
		t.Fatal("requests did not finish")
	}
	c.Close()
	<-server
}

// fakeGo negotiates like our server: structured replies, base:allocation
// with ID metaContextID, and a 1 MiB export with every flag.
func fakeGo(f *fakeServer) error {
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
	for {
		var h [optHdrLen]byte
		if _, err := io.ReadFull(f.br, h[:]); err != nil {
			return err
		}
		opt := binary.BigEndian.Uint32(h[8:])
		if _, err := f.br.Discard(int(binary.BigEndian.Uint32(h[12:]))); err != nil {
			return err
		}
		var out []byte
		switch opt {
		case optSetMetaContext:
			out = appendOptReply(out, opt, repMetaContext, 4+len(metaBaseAllocation))
			out = append(binary.BigEndian.AppendUint32(out, metaContextID), metaBaseAllocation...)
		case optGo:
			out = appendOptReply(out, opt, repInfo, 12)
			out = binary.BigEndian.AppendUint16(out, infoExport)
			out = binary.BigEndian.AppendUint64(out, 1<<20)
			out = binary.BigEndian.AppendUint16(out, flagsToWire(ExportFlags{CanFlush: true, CanFUA: true,
				CanTrim: true, CanWriteZeroes: true, CanFastZero: true}))
		}
		out = appendOptReply(out, opt, repAck, 0)
		if err := f.write(out); err != nil {
			return err
		}
		if opt == optGo {
			return nil
		}
	}
}
