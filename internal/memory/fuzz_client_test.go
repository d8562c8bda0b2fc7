package memory

import (
	"context"
	"encoding/binary"
	"net"
	"sync"
	"testing"
	"time"
)

// FuzzResponseFrame feeds arbitrary bytes to a client as the memnode's
// answers to three pipelined requests (READ, STAT, WRITE). Whatever the
// bytes, every call returns (no hang, no panic), a READ that succeeds got
// exactly the bytes a well-formed answer carried, and the client fails
// cleanly afterwards.
func FuzzResponseFrame(f *testing.F) {
	read := appendRespHeader(nil, 2, statusOK, 8)
	read = append(read, "abcdefgh"...)
	stat := appendRespHeader(nil, 3, statusOK, statRespLen)
	stat = append(stat, make([]byte, statRespLen)...)
	write := appendRespHeader(nil, 4, statusOK, 0)
	f.Add(append(append(append([]byte{}, read...), stat...), write...))
	f.Add(append(appendRespHeader(nil, 2, statusRange, 5), "range"...))
	f.Add(appendRespHeader(nil, 2, statusOK, 9))     // wrong length for an 8-byte READ
	f.Add(appendRespHeader(nil, 99, statusOK, 0))    // unknown tag
	f.Add(appendRespHeader(nil, 3, statusOK, 1<<31)) // absurd length
	f.Add(read[:7])                                  // truncated header
	f.Add(append(appendRespHeader(nil, 3, 200, 2), "??"...))

	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		f.Fatal(err)
	}
	defer l.Close()
	f.Fuzz(func(t *testing.T, answers []byte) {
		srv := make(chan error, 1)
		go func() {
			nc, err := l.Accept()
			if err != nil {
				srv <- err
				return
			}
			defer nc.Close()
			nc.SetDeadline(time.Now().Add(5 * time.Second))
			h, _, err := readReq(nc)
			if err != nil {
				srv <- err
				return
			}
			nc.Write(authReply(h.tag, fakeEpoch))
			for range 3 {
				if _, _, err := readReq(nc); err != nil {
					break // the client gave up early: fine
				}
			}
			nc.Write(answers)
			srv <- nil
		}()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		c, err := Dial(ctx, l.Addr().String(), "tok")
		if err != nil {
			t.Fatalf("dial: %v", err)
		}
		defer c.Close()
		got := make([]byte, 8)
		var readErr error
		var wg sync.WaitGroup
		wg.Add(3)
		go func() { defer wg.Done(); readErr = c.Read(ctx, 0, got) }()
		go func() { defer wg.Done(); c.Stat(ctx) }()
		go func() { defer wg.Done(); c.Write(ctx, 0, []byte("x")) }()
		done := make(chan struct{})
		go func() { wg.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Fatal("calls did not return")
		}
		if readErr == nil && !validRead(answers, got) {
			t.Fatalf("READ succeeded with %q, which no well-formed answer carried", got)
		}
		if err := <-srv; err != nil {
			t.Fatalf("fake node: %v", err)
		}
	})
}

// validRead reports whether answers hold, among whole frames from the
// start, an OK answer of 8 bytes equal to got.
func validRead(answers, got []byte) bool {
	for len(answers) >= respHdrLen {
		status, n := answers[4], binary.BigEndian.Uint32(answers[8:])
		if uint64(len(answers)-respHdrLen) < uint64(n) {
			return false
		}
		body := answers[respHdrLen : respHdrLen+int(n)]
		if status == statusOK && n == 8 && string(body) == string(got) {
			return true
		}
		answers = answers[respHdrLen+int(n):]
	}
	return false
}
