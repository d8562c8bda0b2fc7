package memory

import (
	"context"
	"io"
	"net"
	"testing"
)

// TestReadWriteDoNotAllocate checks the steady-state hot path, client and
// server both (they share the process), allocates nothing.
func TestReadWriteDoNotAllocate(t *testing.T) {
	if raceEnabled {
		t.Skip("sync.Pool drops items at random under the race detector")
	}
	n := startNode(t, nil)
	c := n.dial(t, n.token(t, nil))
	buf := make([]byte, 4096)
	a, b := buf[:1000], buf[1000:]
	warm := func() {
		if err := c.Read(bg, 0, buf); err != nil {
			t.Fatal(err)
		}
		if err := c.Write(bg, 0, a, b); err != nil {
			t.Fatal(err)
		}
	}
	warm()
	if got := testing.AllocsPerRun(200, warm); got > 0 {
		t.Errorf("a 4 KiB Read and Write allocate %.1f times", got)
	}
}

// BenchmarkRead4K is a client Read of 4 KiB over loopback, one at a time:
// compare with BenchmarkTCPEcho4K.
func BenchmarkRead4K(b *testing.B) {
	n := startNode(b, nil)
	c := n.dial(b, n.token(b, nil))
	buf := make([]byte, 4096)
	b.SetBytes(int64(len(buf)))
	b.ReportAllocs()
	for b.Loop() {
		if err := c.Read(context.Background(), 0, buf); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkRead4KParallel is many goroutines reading 4 KiB through one
// client: pipelining and write batching at work.
func BenchmarkRead4KParallel(b *testing.B) {
	n := startNode(b, nil)
	c := n.dial(b, n.token(b, nil))
	b.SetBytes(4096)
	b.ReportAllocs()
	b.SetParallelism(8)
	b.RunParallel(func(pb *testing.PB) {
		buf := make([]byte, 4096)
		for pb.Next() {
			if err := c.Read(context.Background(), 0, buf); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

// BenchmarkWrite4K is a client Write of 4 KiB in two pieces.
func BenchmarkWrite4K(b *testing.B) {
	n := startNode(b, nil)
	c := n.dial(b, n.token(b, nil))
	buf := make([]byte, 4096)
	b.SetBytes(int64(len(buf)))
	b.ReportAllocs()
	for b.Loop() {
		if err := c.Write(context.Background(), 0, buf[:100], buf[100:]); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkTCPEcho4K is the baseline: a raw loopback ping-pong of 4 KiB
// between two Go sockets, each side reading the whole message before it
// answers.
func BenchmarkTCPEcho4K(b *testing.B) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	go func() {
		nc, err := l.Accept()
		if err != nil {
			return
		}
		defer nc.Close()
		buf := make([]byte, 4096)
		for {
			if _, err := io.ReadFull(nc, buf); err != nil {
				return
			}
			if _, err := nc.Write(buf); err != nil {
				return
			}
		}
	}()
	nc, err := net.Dial("tcp", l.Addr().String())
	if err != nil {
		b.Fatal(err)
	}
	defer nc.Close()
	buf := make([]byte, 4096)
	b.SetBytes(int64(len(buf)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := nc.Write(buf); err != nil {
			b.Fatal(err)
		}
		if _, err := io.ReadFull(nc, buf); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkRead4KCancelCtx is BenchmarkRead4K with a context that can be
// cancelled, which costs the reader a context.AfterFunc per call.
func BenchmarkRead4KCancelCtx(b *testing.B) {
	n := startNode(b, nil)
	c := n.dial(b, n.token(b, nil))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	buf := make([]byte, 4096)
	b.SetBytes(int64(len(buf)))
	b.ReportAllocs()
	for b.Loop() {
		if err := c.Read(ctx, 0, buf); err != nil {
			b.Fatal(err)
		}
	}
}
