//go:build linux && (amd64 || arm64 || riscv64 || loong64)

package pager

import (
	"context"
	"net"
	"os"
	"testing"
	"time"

	"rackpool/internal/memory"
)

// The test binary is also the pagers' helper: Open starts it again with
// HelperEnv set.
func TestMain(m *testing.M) {
	if IsHelper() {
		os.Exit(RunHelper())
	}
	os.Exit(m.Run())
}

var pageSize = int64(os.Getpagesize())

// node is a real memnode on loopback.
type node struct {
	srv  *memory.Server
	addr string
	key  memory.Key
	stop func()
}

func startNode(t testing.TB, capacity uint64) *node {
	t.Helper()
	key, err := memory.NewKey()
	if err != nil {
		t.Fatal(err)
	}
	s, err := memory.NewServer(memory.ServerOptions{Node: "mem0", Capacity: capacity, Key: key})
	if err != nil {
		t.Fatalf("NewServer: %v", err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- s.Serve(l) }()
	stopped := false
	n := &node{srv: s, addr: l.Addr().String(), key: key}
	n.stop = func() {
		if stopped {
			return
		}
		stopped = true
		s.Close()
		<-done
	}
	t.Cleanup(n.stop)
	return n
}

// token signs a read-write token for lease "l1" of length bytes at the
// start of the node's capacity, edited by edit.
func (n *node) token(t testing.TB, length uint64, edit func(*memory.Claims)) string {
	t.Helper()
	c := memory.Claims{Lease: "l1", Node: "mem0", Offset: 0, Length: length,
		Rights: memory.RightRead | memory.RightWrite, Expiry: time.Now().Add(time.Hour)}
	if edit != nil {
		edit(&c)
	}
	tok, err := n.key.Sign(c)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// open opens a pager of size bytes with local bytes of budget on n, and
// closes it when the test ends.
func (n *node) open(t testing.TB, size, local int64, edit func(*Options)) *Pager {
	t.Helper()
	opts := Options{Size: size, Local: local, Endpoint: n.addr, Token: n.token(t, uint64(size), nil)}
	if edit != nil {
		edit(&opts)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	p, err := Open(ctx, opts)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}
