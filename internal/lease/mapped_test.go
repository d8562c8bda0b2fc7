//go:build linux

package lease_test

import (
	"bytes"
	"errors"
	"net"
	"path/filepath"
	"strings"
	"testing"

	"rackpool/internal/lease"
	"rackpool/internal/memory"
)

// startMappedNode starts a memnode that also serves mapped leases on a unix
// socket for hosts, and registers it as device.
func (e *env) startMappedNode(device string, capacity uint64, hosts ...string) string {
	e.t.Helper()
	key, _ := memory.NewKey()
	srv, err := memory.NewServer(memory.ServerOptions{Node: device, Capacity: capacity, Key: key, Clock: e.clk})
	if err != nil {
		e.t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		e.t.Fatal(err)
	}
	sock := filepath.Join(e.t.TempDir(), device+".sock")
	ul, err := net.Listen("unix", sock)
	if err != nil {
		e.t.Fatal(err)
	}
	go func() { _ = srv.Serve(l) }()
	go func() { _ = srv.Serve(ul) }()
	e.t.Cleanup(func() { _ = srv.Close() })
	reg, err := e.m.Register(ctx, lease.Registration{Device: device, Endpoint: l.Addr().String(), Capacity: capacity,
		Epoch: srv.Epoch(), MapSocket: sock, MapHosts: hosts})
	if err != nil {
		e.t.Fatalf("register %s: %v", device, err)
	}
	srv.SetKey(reg.Key)
	e.nodes[device] = &memnode{srv: srv, addr: l.Addr().String()}
	return sock
}

// TestMappedLeases: a mapped lease goes only to a node its host can map,
// its grant names the socket, the mapping works, and releasing the lease
// leaves a holder that kept its mapping with zeros.
func TestMappedLeases(t *testing.T) {
	e := newEnv(t)
	e.startNode("memnode1", 64*mib) // TCP only
	sock := e.startMappedNode("memnode2", 64*mib, "host1")

	g := e.grant(lease.Request{Size: 64 << 10, Host: "host1", Mapped: true, Tenant: "a"})
	if g.Node != "memnode2" || g.MapSocket != sock || !g.Mapped {
		t.Fatalf("mapped lease on %s with socket %q (mapped %v), want memnode2 and %s", g.Node, g.MapSocket, g.Mapped, sock)
	}
	m, err := memory.Map(ctx, g.MapSocket, g.Token)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	copy(m.Bytes(), "tenant a's secret")

	// Host2 is not on memnode2's machine: refused, with the reason.
	_, err = e.m.Grant(ctx, lease.Request{Size: 4096, Host: "host2", Mapped: true})
	if !errors.Is(err, lease.ErrNoMemory) || !strings.Contains(err.Error(), "memnode2: host host2 cannot map it (mapped from: host1)") ||
		!strings.Contains(err.Error(), "memnode1: host host2 cannot map it (mapped from: none)") {
		t.Errorf("mapped lease for a host no node maps: %v", err)
	}
	if _, err := e.m.Grant(ctx, lease.Request{Size: 4096, Mapped: true}); !errors.Is(err, lease.ErrBadInput) {
		t.Errorf("mapped lease without a host: %v, want ErrBadInput", err)
	}
	// An ordinary lease from host2 on the mapping node keeps TCP.
	tcp := e.grant(lease.Request{Size: 4096, Host: "host2", Node: "memnode2"})
	if tcp.MapSocket != "" {
		t.Errorf("a lease for host2 names the socket %q; host2 cannot reach it", tcp.MapSocket)
	}

	// Release: the control plane reclaims (ZERO), the stale mapping reads
	// zeros, and the next lease of the range sees none of it.
	if err := e.m.Release(ctx, g.ID, ""); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(m.Bytes()[:17], make([]byte, 17)) {
		t.Fatalf("a released lease's mapping still shows %q", m.Bytes()[:17])
	}
	g2 := e.grant(lease.Request{Size: 64 << 10, Host: "host1", Mapped: true, Tenant: "b"})
	if g2.Offset != g.Offset || g2.Node != g.Node {
		t.Fatalf("next lease at %s+%d, want the released range %s+%d", g2.Node, g2.Offset, g.Node, g.Offset)
	}
	m2, err := memory.Map(ctx, g2.MapSocket, g2.Token)
	if err != nil {
		t.Fatal(err)
	}
	defer m2.Close()
	if !bytes.Equal(m2.Bytes(), make([]byte, 64<<10)) {
		t.Fatal("tenant b's new lease shows bytes of tenant a's")
	}
	// The released lease's token maps nothing any more.
	if _, err := memory.Map(ctx, g.MapSocket, g.Token); !errors.Is(err, memory.ErrRevoked) {
		t.Errorf("Map with a released lease's token: %v, want ErrRevoked", err)
	}
}

func TestMappedRegistrationRefusals(t *testing.T) {
	e := newEnv(t)
	for _, r := range []lease.Registration{
		{Device: "memnode1", Endpoint: "127.0.0.1:1", Capacity: 1, MapHosts: []string{"host1"}},
		{Device: "memnode1", Endpoint: "127.0.0.1:1", Capacity: 1, MapSocket: "/run/m.sock"},
		{Device: "memnode1", Endpoint: "127.0.0.1:1", Capacity: 1, MapSocket: "m.sock", MapHosts: []string{"host1"}},
		{Device: "memnode1", Endpoint: "127.0.0.1:1", Capacity: 1, MapSocket: "/" + strings.Repeat("s", 200), MapHosts: []string{"host1"}},
		{Device: "memnode1", Endpoint: "127.0.0.1:1", Capacity: 1, MapSocket: "/run/m.sock", MapHosts: []string{"nohost"}},
		{Device: "memnode1", Endpoint: "127.0.0.1:1", Capacity: 1, MapSocket: "/run/m.sock", MapHosts: []string{"host1", "host1"}},
	} {
		if _, err := e.m.Register(ctx, r); !errors.Is(err, lease.ErrBadInput) {
			t.Errorf("registration %+v: %v, want ErrBadInput", r, err)
		}
	}
	if ns := e.m.Nodes(); len(ns) != 0 {
		t.Errorf("refused registrations left nodes: %+v", ns)
	}
}
