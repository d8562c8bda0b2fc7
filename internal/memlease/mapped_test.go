//go:build linux

package memlease_test

import (
	"context"
	"net"
	"path/filepath"
	"testing"
	"time"

	"rackpool/api"
	"rackpool/internal/memlease"
	"rackpool/internal/memory"
)

// TestKeeperKeepsAMapping: a keeper of a mapped lease hands over the
// mapping, renews it through the control plane and on the node's socket,
// so the node keeps the region past the first expiry; released, the
// region reads zeros.
func TestKeeperKeepsAMapping(t *testing.T) {
	p := newPlane(t)
	key, _ := memory.NewKey()
	srv, err := memory.NewServer(memory.ServerOptions{Node: "memnode1", Capacity: 16 << 20, Key: key, Clock: p.clk})
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(t.TempDir(), "memnode1.sock")
	ul, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Serve(l) }()
	go func() { _ = srv.Serve(ul) }()
	t.Cleanup(func() { _ = srv.Close() })
	reg := api.NodeRegistration{Device: "memnode1", Endpoint: l.Addr().String(), CapacityBytes: 16 << 20, Epoch: srv.Epoch(),
		MapSocket: sock, MapHosts: []string{"host1"}}
	n, err := p.api.RegisterMemoryNode(context.Background(), reg)
	if err != nil {
		t.Fatal(err)
	}
	k0, _ := n.Key()
	srv.SetKey(k0)
	p.regs["memnode1"] = reg

	var a attached
	k, err := memlease.New(memlease.Options{Control: p.api, Clock: p.clk, Attach: a.attach,
		Request: api.LeaseRequest{Size: 1 << 20, TTL: 30 * time.Second, Host: "host1", Mapped: true}})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := k.Acquire(ctx); err != nil {
		t.Fatal(err)
	}
	r, size, _ := a.get()
	m, ok := r.(*memory.Mapping)
	if !ok || size != 1<<20 {
		t.Fatalf("attached %T of %d bytes, want a *memory.Mapping of 1 MiB", r, size)
	}
	copy(m.Bytes(), "kept in mapped memory")
	first := k.Lease()
	run(t, k)
	p.advanceUntil(time.Second, "renewal", func() bool { return k.Lease().Expires.After(first.Expires) })
	// Past the first expiry, and past the node's reaper tick, the region
	// is still there: the renewed token reached the node.
	p.clk.Advance(first.Expires.Sub(p.clk.Now()) + 2*time.Second)
	p.heartbeat()
	if got := string(m.Bytes()[:21]); got != "kept in mapped memory" {
		t.Fatalf("after the first expiry the mapping shows %q", got)
	}
	if _, err := m.Stat(ctx); err != nil {
		t.Fatalf("Stat of a renewed mapping: %v", err)
	}
	if srv.ReapExpired() != 0 {
		t.Fatal("the node reaped a renewed mapping")
	}
	if err := k.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Stat(ctx); err == nil {
		t.Error("Stat after Release succeeded")
	}
}
