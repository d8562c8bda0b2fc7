package postgres_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"rackpool/internal/inventory"
	"rackpool/internal/store"
)

// commitCutter is a TCP proxy in front of PostgreSQL that, once armed,
// swallows the next client message carrying COMMIT and closes that
// connection: the database never sees the COMMIT and rolls the
// transaction back, while the client's COMMIT fails on a broken
// connection, as when the database crashes at that moment.
type commitCutter struct {
	ln     net.Listener
	target string
	armed  atomic.Bool
	cut    atomic.Int32
	wg     sync.WaitGroup
}

func newCommitCutter(t *testing.T, target string) *commitCutter {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &commitCutter{ln: ln, target: target}
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			p.wg.Add(1)
			go func() { defer p.wg.Done(); p.serve(c) }()
		}
	}()
	t.Cleanup(func() { ln.Close(); p.wg.Wait() })
	return p
}

func (p *commitCutter) serve(c net.Conn) {
	defer c.Close()
	s, err := net.Dial("tcp", p.target)
	if err != nil {
		return
	}
	defer s.Close()
	go func() { _, _ = io.Copy(c, s); c.Close() }()
	buf := make([]byte, 64<<10)
	for {
		n, err := c.Read(buf)
		if n > 0 && p.armed.Load() && bytes.Contains(buf[:n], []byte("COMMIT")) && p.armed.CompareAndSwap(true, false) {
			p.cut.Add(1)
			return // the COMMIT is lost with the connection
		}
		if n > 0 {
			if _, werr := s.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// TestCommitLostIsUnavailable: a COMMIT lost with its connection is found
// not applied (resolve looks for the transaction's token) and reported as
// store.ErrUnavailable, which workflows take as "nothing changed, retry
// later" (a decompose then marks itself for RetryStuck); the plan is
// indeed not stored, and the next Apply of it succeeds.
func TestCommitLostIsUnavailable(t *testing.T) {
	srv := shared(t)
	name := "commit_lost"
	direct := srv.CreateDatabase(t, name)
	p := newCommitCutter(t, srv.Addr())
	s := openURL(t, strings.Replace(direct, srv.Addr(), p.ln.Addr().String(), 1))
	defer s.Close()
	ctx := context.Background()
	c1 := &inventory.Composition{ID: "c1", Version: 1, State: inventory.Composed, Blocks: []string{"b1"}}

	p.armed.Store(true)
	err := s.Apply(ctx, store.Plan{Put: []*inventory.Composition{c1}})
	if p.cut.Load() != 1 {
		t.Fatalf("the proxy cut %d COMMITs, want 1 (Apply: %v)", p.cut.Load(), err)
	}
	if !errors.Is(err, store.ErrUnavailable) || !strings.Contains(err.Error(), "nothing applied") {
		t.Fatalf("Apply with its COMMIT lost = %v, want ErrUnavailable, nothing applied", err)
	}
	check := openURL(t, direct)
	defer check.Close()
	if got, err := check.Compositions(ctx); err != nil || len(got) != 0 {
		t.Fatalf("after the lost COMMIT the database holds %v (%v), want nothing", got, err)
	}
	if err := s.Apply(ctx, store.Plan{Put: []*inventory.Composition{c1}}); err != nil {
		t.Fatalf("Apply again: %v", err)
	}
	if got, err := check.Compositions(ctx); err != nil || len(got) != 1 {
		t.Fatalf("after the second Apply the database holds %v (%v), want c1", got, err)
	}
}
