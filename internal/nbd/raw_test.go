package nbd

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"testing"
	"time"
)

// rawClient speaks the protocol byte by byte, to test the server's
// answers to what a well-behaved client never sends.
type rawClient struct {
	t  *testing.T
	nc net.Conn
	br *bufio.Reader
}

func dialRaw(t *testing.T, env *testEnv) *rawClient {
	t.Helper()
	nc, err := net.Dial("unix", env.sock)
	if err != nil {
		t.Fatal(err)
	}
	nc.SetDeadline(time.Now().Add(10 * time.Second))
	t.Cleanup(func() { nc.Close() })
	return &rawClient{t: t, nc: nc, br: bufio.NewReader(nc)}
}

func (r *rawClient) write(b []byte) {
	r.t.Helper()
	if _, err := r.nc.Write(b); err != nil {
		r.t.Fatalf("write: %v", err)
	}
}

func (r *rawClient) read(n int) []byte {
	r.t.Helper()
	b := make([]byte, n)
	if _, err := io.ReadFull(r.br, b); err != nil {
		r.t.Fatalf("read %d bytes: %v", n, err)
	}
	return b
}

// greet reads the greeting and answers with client flags.
func (r *rawClient) greet(flags uint32) {
	r.t.Helper()
	g := r.read(18)
	if binary.BigEndian.Uint64(g) != nbdMagic || binary.BigEndian.Uint64(g[8:]) != optMagic {
		r.t.Fatalf("bad greeting % x", g)
	}
	if hf := binary.BigEndian.Uint16(g[16:]); hf != flagFixedNewstyle|flagNoZeroes {
		r.t.Fatalf("handshake flags %#x", hf)
	}
	r.write(binary.BigEndian.AppendUint32(nil, flags))
}

func (r *rawClient) option(opt uint32, data []byte) {
	r.t.Helper()
	r.write(appendOption(nil, opt, data))
}

// optReply reads one option reply, checking it answers opt.
func (r *rawClient) optReply(opt uint32) (typ uint32, data []byte) {
	r.t.Helper()
	h := r.read(optReplyHdrLen)
	if binary.BigEndian.Uint64(h) != optReplyMagic {
		r.t.Fatalf("bad option reply magic % x", h)
	}
	if got := binary.BigEndian.Uint32(h[8:]); got != opt {
		r.t.Fatalf("reply for option %d, want %d", got, opt)
	}
	return binary.BigEndian.Uint32(h[12:]), r.read(int(binary.BigEndian.Uint32(h[16:])))
}

// wantReply reads replies to opt up to the final one and checks its type.
func (r *rawClient) wantReply(opt, want uint32) (others [][]byte) {
	r.t.Helper()
	for {
		typ, d := r.optReply(opt)
		if typ == repAck || typ&repErrBit != 0 {
			if typ != want {
				r.t.Fatalf("option %d: final reply %#x (%q), want %#x", opt, typ, d, want)
			}
			return others
		}
		others = append(others, d)
	}
}

func goData(name string, infos ...uint16) []byte {
	d := binary.BigEndian.AppendUint32(nil, uint32(len(name)))
	d = append(d, name...)
	d = binary.BigEndian.AppendUint16(d, uint16(len(infos)))
	for _, i := range infos {
		d = binary.BigEndian.AppendUint16(d, i)
	}
	return d
}

func metaData(name string, queries ...string) []byte {
	d := binary.BigEndian.AppendUint32(nil, uint32(len(name)))
	d = append(d, name...)
	d = binary.BigEndian.AppendUint32(d, uint32(len(queries)))
	for _, q := range queries {
		d = binary.BigEndian.AppendUint32(d, uint32(len(q)))
		d = append(d, q...)
	}
	return d
}

// enter negotiates export "disk" and enters transmission.
func (r *rawClient) enter(structured, meta bool) {
	r.t.Helper()
	r.greet(clientFixedNewstyle | clientNoZeroes)
	if structured {
		r.option(optStructuredReply, nil)
		r.wantReply(optStructuredReply, repAck)
	}
	if meta {
		r.option(optSetMetaContext, metaData("disk", metaBaseAllocation))
		r.wantReply(optSetMetaContext, repAck)
	}
	r.option(optGo, goData("disk"))
	r.wantReply(optGo, repAck)
}

func (r *rawClient) request(flags, typ uint16, cookie, off uint64, length uint32, payload []byte) {
	r.t.Helper()
	b := make([]byte, requestLen)
	putRequest(b, request{flags: flags, typ: typ, cookie: cookie, off: off, length: length})
	r.write(append(b, payload...))
}

func (r *rawClient) simpleReply(cookie uint64) (errno uint32) {
	r.t.Helper()
	h := r.read(simpleReplyLen)
	if binary.BigEndian.Uint32(h) != simpleReplyMagic {
		r.t.Fatalf("not a simple reply: % x", h)
	}
	if got := binary.BigEndian.Uint64(h[8:]); got != cookie {
		r.t.Fatalf("reply cookie %d, want %d", got, cookie)
	}
	return binary.BigEndian.Uint32(h[4:])
}

// reply reads a structured chunk or simple reply for cookie; a simple
// reply comes back as type 0xffff with the error value in payload.
func (r *rawClient) reply(cookie uint64) (flags, typ uint16, payload []byte) {
	r.t.Helper()
	magic := binary.BigEndian.Uint32(r.read(4))
	switch magic {
	case simpleReplyMagic:
		h := r.read(12)
		if got := binary.BigEndian.Uint64(h[4:]); got != cookie {
			r.t.Fatalf("reply cookie %d, want %d", got, cookie)
		}
		return replyFlagDone, 0xffff, h[:4]
	case structuredReplyMagic:
		h := r.read(16)
		if got := binary.BigEndian.Uint64(h[4:]); got != cookie {
			r.t.Fatalf("reply cookie %d, want %d", got, cookie)
		}
		return binary.BigEndian.Uint16(h), binary.BigEndian.Uint16(h[2:]), r.read(int(binary.BigEndian.Uint32(h[12:])))
	}
	r.t.Fatalf("bad reply magic %#x", magic)
	return 0, 0, nil
}

// wantErrorChunk reads a reply for cookie and checks it is an error chunk
// with errno.
func (r *rawClient) wantErrorChunk(cookie uint64, errno uint32) {
	r.t.Helper()
	flags, typ, p := r.reply(cookie)
	if typ != replyTypeError || flags&replyFlagDone == 0 || len(p) < 6 {
		r.t.Fatalf("reply type %#x flags %#x, want a final ERROR chunk", typ, flags)
	}
	if got := binary.BigEndian.Uint32(p); got != errno {
		r.t.Fatalf("error %s (%q), want %s", errnoName(got), p[6:], errnoName(errno))
	}
	if ml := binary.BigEndian.Uint16(p[4:]); int(ml) != len(p)-6 {
		r.t.Fatalf("message length %d in a chunk of %d", ml, len(p))
	}
}

// wantOK reads a successful reply to a command without data.
func (r *rawClient) wantOK(cookie uint64) {
	r.t.Helper()
	if _, typ, p := r.reply(cookie); typ != 0xffff || binary.BigEndian.Uint32(p) != 0 {
		r.t.Fatalf("reply type %#x % x, want simple success", typ, p)
	}
}

// wantClosed checks that the server closes the connection.
func (r *rawClient) wantClosed() {
	r.t.Helper()
	r.nc.SetReadDeadline(time.Now().Add(5 * time.Second))
	_, err := io.Copy(io.Discard, r.br)
	if err != nil {
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			r.t.Fatal("server did not close the connection")
		}
	}
}

func TestRawNoFixedNewstyle(t *testing.T) {
	for _, flags := range []uint32{0, clientNoZeroes, clientFixedNewstyle | 4, 0xffffffff} {
		env := startEnv(t, nil)
		r := dialRaw(t, env)
		r.greet(flags)
		r.wantClosed()
	}
}

func TestRawOptions(t *testing.T) {
	env := startEnv(t, nil)
	r := dialRaw(t, env)
	r.greet(clientFixedNewstyle)

	r.option(99, []byte("whatever"))
	r.wantReply(99, repErrUnsup)
	r.option(optPeekExport, nil)
	r.wantReply(optPeekExport, repErrUnsup)
	r.option(optExtendedHeaders, nil)
	r.wantReply(optExtendedHeaders, repErrUnsup)
	r.option(optStartTLS, nil)
	r.wantReply(optStartTLS, repErrUnsup)
	r.option(optStartTLS, []byte{1})
	r.wantReply(optStartTLS, repErrInvalid)
	r.option(optList, []byte{1})
	r.wantReply(optList, repErrInvalid)
	r.option(optStructuredReply, []byte{1})
	r.wantReply(optStructuredReply, repErrInvalid)

	// Meta contexts need structured replies first.
	r.option(optListMetaContext, metaData("disk"))
	r.wantReply(optListMetaContext, repErrInvalid)

	// Malformed INFO/GO data.
	for _, d := range [][]byte{
		nil,
		{0, 0, 0, 9, 'd', 0, 0},   // name longer than the data
		append(goData("disk"), 0), // trailing byte
		append(goData("disk", infoName)[:12], 0, 5, 0), // count larger than the list
		goData("a\x00b"),                   // NUL in the name
		goData(string([]byte{0xff, 0xfe})), // not UTF-8
	} {
		r.option(optInfo, d)
		r.wantReply(optInfo, repErrInvalid)
	}

	// INFO answers with export, block size, name and description.
	r.option(optInfo, goData("disk", infoName, infoDescription, infoBlockSize))
	infos := map[uint16][]byte{}
	for _, d := range r.wantReply(optInfo, repAck) {
		infos[binary.BigEndian.Uint16(d)] = d[2:]
	}
	if e := infos[infoExport]; len(e) != 10 || binary.BigEndian.Uint64(e) != testSize {
		t.Fatalf("NBD_INFO_EXPORT % x", e)
	}
	if b := infos[infoBlockSize]; len(b) != 12 || binary.BigEndian.Uint32(b) != 1 ||
		binary.BigEndian.Uint32(b[4:]) != 4096 || binary.BigEndian.Uint32(b[8:]) != DefaultMaxPayload {
		t.Fatalf("NBD_INFO_BLOCK_SIZE % x", b)
	}
	if string(infos[infoName]) != "disk" || string(infos[infoDescription]) != "a test disk" {
		t.Fatalf("name %q description %q", infos[infoName], infos[infoDescription])
	}

	r.option(optGo, goData("nope"))
	r.wantReply(optGo, repErrUnknown)
	r.option(optGo, goData("secret"))
	r.wantReply(optGo, repErrPolicy)

	// Structured replies, then meta contexts.
	r.option(optStructuredReply, nil)
	r.wantReply(optStructuredReply, repAck)
	for _, tc := range []struct {
		queries []string
		want    int
	}{{nil, 1}, {[]string{"base:"}, 1}, {[]string{"base:allocation"}, 1}, {[]string{"base:other", "qemu:dirty-bitmap:x"}, 0}} {
		r.option(optListMetaContext, metaData("disk", tc.queries...))
		got := r.wantReply(optListMetaContext, repAck)
		if len(got) != tc.want || (tc.want == 1 && string(got[0][4:]) != metaBaseAllocation) {
			t.Fatalf("LIST_META_CONTEXT %q: % x", tc.queries, got)
		}
	}
	r.option(optSetMetaContext, metaData("disk", "base:"))
	if got := r.wantReply(optSetMetaContext, repAck); len(got) != 0 {
		t.Fatalf(`SET_META_CONTEXT "base:" selected %q`, got)
	}
	r.option(optSetMetaContext, []byte{0, 0, 0, 4, 'd', 'i', 's', 'k', 0, 0, 0, 1, 0, 0, 0, 9})
	r.wantReply(optSetMetaContext, repErrInvalid)
	r.option(optSetMetaContext, metaData("disk", metaBaseAllocation))
	got := r.wantReply(optSetMetaContext, repAck)
	if len(got) != 1 || binary.BigEndian.Uint32(got[0]) != metaContextID || string(got[0][4:]) != metaBaseAllocation {
		t.Fatalf("SET_META_CONTEXT base:allocation: %q", got)
	}

	r.option(optGo, goData("disk"))
	r.wantReply(optGo, repAck)
	r.request(0, cmdBlockStatus, 1, 0, 4096, nil)
	_, typ, p := r.reply(1)
	if typ != replyTypeBlockStatus || len(p) != 12 || binary.BigEndian.Uint32(p) != metaContextID ||
		binary.BigEndian.Uint32(p[4:]) != 4096 || binary.BigEndian.Uint32(p[8:]) != stateHole|stateZero {
		t.Fatalf("block status reply type %d % x", typ, p)
	}
	r.request(0, cmdDisc, 2, 0, 0, nil)
	r.wantClosed()
}

func TestRawOversizedOption(t *testing.T) {
	env := startEnv(t, nil)
	r := dialRaw(t, env)
	r.greet(clientFixedNewstyle)
	big := make([]byte, 100<<10)
	r.option(optInfo, big)
	r.wantReply(optInfo, repErrTooBig)
	// Skipped: negotiation goes on.
	r.option(optList, nil)
	if got := r.wantReply(optList, repAck); len(got) != 2 {
		t.Fatalf("LIST after an oversized option: %q", got)
	}
	// Too large to skip: answered, then dropped.
	h := binary.BigEndian.AppendUint64(nil, optMagic)
	h = binary.BigEndian.AppendUint32(h, optInfo)
	h = binary.BigEndian.AppendUint32(h, 1<<30)
	r.write(h)
	r.wantReply(optInfo, repErrTooBig)
	r.wantClosed()

	// An oversized EXPORT_NAME cannot be answered: dropped.
	r = dialRaw(t, env)
	r.greet(clientFixedNewstyle)
	h = binary.BigEndian.AppendUint64(nil, optMagic)
	h = binary.BigEndian.AppendUint32(h, optExportName)
	h = binary.BigEndian.AppendUint32(h, 1<<20)
	r.write(h)
	r.wantClosed()
}

func TestRawBadOptionMagic(t *testing.T) {
	env := startEnv(t, nil)
	r := dialRaw(t, env)
	r.greet(clientFixedNewstyle)
	r.write(bytes.Repeat([]byte{0x42}, optHdrLen))
	r.wantClosed()
}

func TestRawAbort(t *testing.T) {
	env := startEnv(t, nil)
	r := dialRaw(t, env)
	r.greet(clientFixedNewstyle)
	r.option(optAbort, []byte("ignored"))
	r.wantReply(optAbort, repAck)
	r.wantClosed()
}

func TestRawExportName(t *testing.T) {
	for _, noZeroes := range []bool{false, true} {
		env := startEnv(t, nil)
		r := dialRaw(t, env)
		flags := uint32(clientFixedNewstyle)
		if noZeroes {
			flags |= clientNoZeroes
		}
		r.greet(flags)
		r.option(optExportName, []byte("disk"))
		b := r.read(10)
		if binary.BigEndian.Uint64(b) != testSize || binary.BigEndian.Uint16(b[8:])&tflagHasFlags == 0 {
			t.Fatalf("EXPORT_NAME reply % x", b)
		}
		if !noZeroes && !bytes.Equal(r.read(zeroPadLen), make([]byte, zeroPadLen)) {
			t.Fatal("no zero padding")
		}
		// Simple replies: a read carries its data after the header.
		r.request(0, cmdWrite, 1, 0, 4, []byte("abcd"))
		if e := r.simpleReply(1); e != 0 {
			t.Fatalf("write: error %d", e)
		}
		r.request(0, cmdRead, 2, 0, 4, nil)
		if e := r.simpleReply(2); e != 0 {
			t.Fatalf("read: error %d", e)
		}
		if got := r.read(4); string(got) != "abcd" {
			t.Fatalf("read %q", got)
		}
		// A failed read has no data.
		r.request(0, cmdRead, 3, testSize, 4, nil)
		if e := r.simpleReply(3); e != errnoInval {
			t.Fatalf("read past the end: error %d", e)
		}
		// Without structured replies there is no DF and no block status.
		r.request(cmdFlagDF, cmdRead, 4, 0, 4, nil)
		if e := r.simpleReply(4); e != errnoInval {
			t.Fatalf("read with DF: error %d", e)
		}
		r.request(0, cmdBlockStatus, 5, 0, 4, nil)
		if e := r.simpleReply(5); e != errnoInval {
			t.Fatalf("block status without context: error %d", e)
		}
		r.request(0, cmdDisc, 6, 0, 0, nil)
		r.wantClosed()
	}
	// An unknown export ends the session.
	env := startEnv(t, nil)
	r := dialRaw(t, env)
	r.greet(clientFixedNewstyle)
	r.option(optExportName, []byte("nope"))
	r.wantClosed()
}

func TestRawCommands(t *testing.T) {
	env := startEnv(t, func(s *Server, _ *testExports) { s.MaxPayload = 64 << 10 })
	r := dialRaw(t, env)
	r.enter(true, true)

	r.request(0, 42, 1, 0, 0, nil)
	r.wantErrorChunk(1, errnoInval) // unknown command
	r.request(1<<9, cmdWrite, 2, 0, 4, []byte("abcd"))
	r.wantErrorChunk(2, errnoInval) // unknown flag, payload consumed
	r.request(cmdFlagReqOne, cmdRead, 3, 0, 4, nil)
	r.wantErrorChunk(3, errnoInval) // flag of another command
	r.request(0, cmdFlush, 4, 1, 0, nil)
	r.wantErrorChunk(4, errnoInval) // flush with an offset
	r.request(0, cmdRead, 5, 0, 64<<10+1, nil)
	r.wantErrorChunk(5, errnoOverflow)
	r.request(0, cmdBlockStatus, 6, 0, 0, nil)
	r.wantErrorChunk(6, errnoInval)
	r.request(0, cmdCache, 7, 0, 4096, nil)
	r.wantOK(7)
	r.request(0, cmdCache, 8, testSize, 1, nil)
	r.wantErrorChunk(8, errnoInval)
	r.request(0, cmdTrim, 9, 0, 0, nil)
	r.wantOK(9)

	// A zero-length read succeeds with a NONE chunk.
	r.request(0, cmdRead, 10, testSize, 0, nil)
	if flags, typ, p := r.reply(10); typ != replyTypeNone || flags != replyFlagDone || len(p) != 0 {
		t.Fatalf("zero-length read: type %d flags %d", typ, flags)
	}

	// An oversized write is answered EOVERFLOW after its payload is
	// skipped, and the connection goes on.
	r.request(0, cmdWrite, 11, 0, 200<<10, make([]byte, 200<<10))
	r.wantErrorChunk(11, errnoOverflow)
	r.request(cmdFlagFUA, cmdWrite, 12, 100, 3, []byte("xyz"))
	r.wantOK(12)
	r.request(cmdFlagDF, cmdRead, 13, 100, 3, nil)
	flags, typ, p := r.reply(13)
	if typ != replyTypeOffsetData || flags != replyFlagDone || binary.BigEndian.Uint64(p) != 100 || string(p[8:]) != "xyz" {
		t.Fatalf("read: type %d flags %d % x", typ, flags, p)
	}

	// REQ_ONE gets one extent.
	r.request(cmdFlagReqOne, cmdBlockStatus, 14, 0, 1<<20, nil)
	if _, typ, p := r.reply(14); typ != replyTypeBlockStatus || len(p) != 12 {
		t.Fatalf("REQ_ONE block status: type %d % x", typ, p)
	}

	// Pipelined requests are all answered, in any order.
	for i := range uint64(20) {
		r.request(0, cmdRead, 100+i, i*512, 512, nil)
	}
	seen := map[uint64]bool{}
	for range 20 {
		h := r.read(chunkHdrLen)
		cookie := binary.BigEndian.Uint64(h[8:])
		r.read(int(binary.BigEndian.Uint32(h[16:])))
		if cookie < 100 || cookie >= 120 || seen[cookie] {
			t.Fatalf("unexpected reply cookie %d", cookie)
		}
		seen[cookie] = true
	}

	// Too large to skip: answered, then dropped.
	r.request(0, cmdWrite, 15, 0, 1<<30, nil)
	r.wantErrorChunk(15, errnoOverflow)
	r.wantClosed()
}

func TestRawBadRequestMagic(t *testing.T) {
	env := startEnv(t, nil)
	r := dialRaw(t, env)
	r.enter(true, false)
	r.request(0, cmdRead, 1, 0, 512, nil)
	r.reply(1)
	r.write(bytes.Repeat([]byte{0x25}, requestLen))
	r.wantClosed()
}

func TestRawTruncated(t *testing.T) {
	for _, tc := range []struct {
		name string
		send func(r *rawClient)
	}{
		{"mid-header", func(r *rawClient) {
			b := make([]byte, requestLen)
			putRequest(b, request{typ: cmdRead, length: 512})
			r.write(b[:10])
		}},
		{"mid-payload", func(r *rawClient) {
			b := make([]byte, requestLen)
			putRequest(b, request{typ: cmdWrite, length: 8192})
			r.write(append(b, make([]byte, 100)...))
		}},
		{"mid-oversized-payload", func(r *rawClient) {
			b := make([]byte, requestLen)
			putRequest(b, request{typ: cmdWrite, length: 40 << 20})
			r.write(append(b, make([]byte, 100)...))
		}},
		{"between-requests", func(r *rawClient) {}},
		{"mid-option", func(r *rawClient) {}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			checkNoLeak(t)
			env := startEnv(t, nil)
			r := dialRaw(t, env)
			if tc.name == "mid-option" {
				r.greet(clientFixedNewstyle)
				r.write(appendOption(nil, optGo, goData("disk"))[:20])
			} else {
				r.enter(true, true)
				tc.send(r)
			}
			r.nc.(*net.UnixConn).CloseWrite()
			r.wantClosed()
		})
	}
}

func TestRawHandshakeTimeout(t *testing.T) {
	env := startEnv(t, func(s *Server, _ *testExports) { s.HandshakeTimeout = 200 * time.Millisecond })
	r := dialRaw(t, env)
	r.greet(clientFixedNewstyle)
	start := time.Now()
	r.wantClosed()
	if d := time.Since(start); d > 3*time.Second {
		t.Fatalf("stalled client dropped after %v", d)
	}
	// Transmission has no such timeout.
	r = dialRaw(t, env)
	r.enter(false, false)
	time.Sleep(400 * time.Millisecond)
	r.request(0, cmdFlush, 1, 0, 0, nil)
	if e := r.simpleReply(1); e != 0 {
		t.Fatalf("flush after idling: error %d", e)
	}
}
