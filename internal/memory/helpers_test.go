package memory

import (
	"context"
	"encoding/binary"
	"io"
	"net"
	"testing"
	"time"

	"rackpool/internal/clock"
)

// testNode is a real server on loopback with a manual clock.
type testNode struct {
	s    *Server
	addr string
	clk  *clock.Manual
}

func startNode(t testing.TB, edit func(*ServerOptions)) *testNode {
	t.Helper()
	clk := clock.NewManual(t0)
	opts := ServerOptions{Node: "mem0", Capacity: 4 << 20, Key: testKey, Clock: clk}
	if edit != nil {
		edit(&opts)
	}
	s, err := NewServer(opts)
	if err != nil {
		t.Fatalf("NewServer: %v", err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- s.Serve(l) }()
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
		if err := <-done; err != nil {
			t.Errorf("Serve returned %v after Close", err)
		}
	})
	return &testNode{s: s, addr: l.Addr().String(), clk: clk}
}

// token signs claims for this node: testClaims edited by edit.
func (n *testNode) token(t testing.TB, edit func(*Claims)) string {
	t.Helper()
	c := testClaims()
	if edit != nil {
		edit(&c)
	}
	return mustSign(t, testKey, c)
}

func (n *testNode) dial(t testing.TB, tok string) *Client {
	t.Helper()
	c, err := Dial(context.Background(), n.addr, tok)
	if err != nil {
		t.Fatalf("Dial: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// rawConn speaks the wire protocol by hand.
type rawConn struct {
	t  testing.TB
	nc net.Conn
}

func (n *testNode) raw(t testing.TB) *rawConn {
	t.Helper()
	nc, err := net.Dial("tcp", n.addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	return &rawConn{t: t, nc: nc}
}

func reqFrame(h reqHeader, payload []byte) []byte {
	if h.version == 0 {
		h.version = protoVersion
	}
	if h.length == 0 {
		h.length = uint32(len(payload))
	}
	b := make([]byte, reqHdrLen, reqHdrLen+len(payload))
	h.encode(b)
	return append(b, payload...)
}

func (r *rawConn) send(b []byte) {
	r.t.Helper()
	if _, err := r.nc.Write(b); err != nil {
		r.t.Fatalf("raw write: %v", err)
	}
}

// recv reads one response frame.
func (r *rawConn) recv() (tag uint32, status byte, payload []byte) {
	r.t.Helper()
	r.nc.SetReadDeadline(time.Now().Add(5 * time.Second))
	var h [respHdrLen]byte
	if _, err := io.ReadFull(r.nc, h[:]); err != nil {
		r.t.Fatalf("raw read header: %v", err)
	}
	n := binary.BigEndian.Uint32(h[8:])
	if n > 1<<20 {
		r.t.Fatalf("response of %d bytes", n)
	}
	payload = make([]byte, n)
	if _, err := io.ReadFull(r.nc, payload); err != nil {
		r.t.Fatalf("raw read payload: %v", err)
	}
	return binary.BigEndian.Uint32(h[:]), h[4], payload
}

// expect reads one response and checks its tag and status.
func (r *rawConn) expect(tag uint32, status byte) []byte {
	r.t.Helper()
	gotTag, gotStatus, p := r.recv()
	if gotTag != tag || gotStatus != status {
		r.t.Fatalf("response tag %d status %d (%q), want tag %d status %d", gotTag, gotStatus, p, tag, status)
	}
	return p
}

// expectClosed checks that the server closes the connection, after
// optionally sending some final responses, which are skipped.
func (r *rawConn) expectClosed() {
	r.t.Helper()
	r.nc.SetReadDeadline(time.Now().Add(5 * time.Second))
	_, err := io.Copy(io.Discard, r.nc)
	if err != nil {
		r.t.Fatalf("connection not closed cleanly by the server: %v", err)
	}
}

// fakeNode is a scripted server: it accepts AUTH with any token and then
// hands each connection to the test.
type fakeNode struct {
	addr  string
	conns chan *rawConn
}

const fakeEpoch = 0x1234

func startFake(t *testing.T) *fakeNode {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f := &fakeNode{addr: l.Addr().String(), conns: make(chan *rawConn, 4)}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			nc, err := l.Accept()
			if err != nil {
				return
			}
			r := &rawConn{t: t, nc: nc}
			h, _, err := readReq(nc)
			if err != nil {
				nc.Close()
				continue
			}
			nc.Write(authReply(h.tag, fakeEpoch))
			f.conns <- r
		}
	}()
	return f
}

func authReply(tag uint32, epoch uint64) []byte {
	b := appendRespHeader(nil, tag, statusOK, authRespLen)
	b = binary.BigEndian.AppendUint64(b, epoch)
	b = binary.BigEndian.AppendUint32(b, 1<<20)
	return binary.BigEndian.AppendUint32(b, 0)
}

// next returns the fake's next authenticated connection.
func (f *fakeNode) next(t *testing.T) *rawConn {
	t.Helper()
	select {
	case r := <-f.conns:
		t.Cleanup(func() { r.nc.Close() })
		return r
	case <-time.After(5 * time.Second):
		t.Fatal("no connection to the fake node")
		return nil
	}
}

func readReq(nc net.Conn) (reqHeader, []byte, error) {
	var b [reqHdrLen]byte
	var h reqHeader
	if _, err := io.ReadFull(nc, b[:]); err != nil {
		return h, nil, err
	}
	h.decode(b[:])
	p := make([]byte, min(h.length, 1<<20))
	_, err := io.ReadFull(nc, p)
	return h, p, err
}

func (r *rawConn) req() (reqHeader, []byte) {
	r.t.Helper()
	r.nc.SetReadDeadline(time.Now().Add(5 * time.Second))
	h, p, err := readReq(r.nc)
	if err != nil {
		r.t.Fatalf("fake read request: %v", err)
	}
	return h, p
}

func (r *rawConn) reply(tag uint32, status byte, payload []byte) {
	r.t.Helper()
	b := appendRespHeader(nil, tag, status, uint32(len(payload)))
	r.send(append(b, payload...))
}

func pattern(seed byte, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = seed + byte(i*7) + byte(i>>8)
	}
	return b
}
