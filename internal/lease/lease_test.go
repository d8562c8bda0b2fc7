package lease_test

import (
	"bytes"
	"context"
	"errors"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	"rackpool/internal/clock"
	"rackpool/internal/compose"
	"rackpool/internal/fabric"
	"rackpool/internal/fabric/emulated"
	"rackpool/internal/inventory"
	"rackpool/internal/lease"
	"rackpool/internal/memory"
	"rackpool/internal/schedule"
	"rackpool/internal/store"
	"rackpool/internal/store/sqlite"
	"rackpool/internal/topology"
)

var ctx = context.Background()

// env is a control plane's lease manager over a real store and composition
// manager, with real memnodes on loopback sharing its manual clock.
type env struct {
	t     *testing.T
	dir   string
	top   *topology.Topology
	clk   *clock.Manual
	store store.Store
	comp  *compose.Manager
	m     *lease.Manager
	nodes map[string]*memnode
}

type memnode struct {
	srv  *memory.Server
	addr string
}

func newEnv(t *testing.T) *env {
	t.Helper()
	e := &env{t: t, dir: t.TempDir(), top: topology.LoadDefault(), clk: clock.NewManual(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)),
		nodes: map[string]*memnode{}}
	e.open()
	return e
}

// open (re)starts the control plane's side on e.dir.
func (e *env) open() {
	e.t.Helper()
	st, err := sqlite.Open(e.dir)
	if err != nil {
		e.t.Fatal(err)
	}
	e.store = st
	e.t.Cleanup(func() { _ = st.Close() })
	drivers, err := emulated.NewAll(e.top, e.clk)
	if err != nil {
		e.t.Fatal(err)
	}
	ds := map[string]fabric.Driver{}
	for id, d := range drivers {
		ds[id] = d
	}
	if e.comp, err = compose.New(ctx, compose.Options{Topology: e.top, Store: st, Drivers: ds, Clock: e.clk}); err != nil {
		e.t.Fatal(err)
	}
	if e.m, err = lease.New(ctx, lease.Options{Store: st, Topology: e.top, Placement: e.comp, Clock: e.clk}); err != nil {
		e.t.Fatal(err)
	}
}

// restart closes the store and opens everything again, as a control-plane
// restart does.
func (e *env) restart() {
	e.t.Helper()
	if err := e.store.Close(); err != nil {
		e.t.Fatal(err)
	}
	e.open()
}

// startNode starts a memnode and registers it as device.
func (e *env) startNode(device string, capacity uint64) *memnode {
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
	go func() { _ = srv.Serve(l) }()
	e.t.Cleanup(func() { _ = srv.Close() })
	n := &memnode{srv: srv, addr: l.Addr().String()}
	e.register(device, n, capacity)
	e.nodes[device] = n
	return n
}

func (e *env) register(device string, n *memnode, capacity uint64) {
	e.t.Helper()
	reg, err := e.m.Register(ctx, lease.Registration{Device: device, Endpoint: n.addr, Capacity: capacity, Epoch: n.srv.Epoch()})
	if err != nil {
		e.t.Fatalf("register %s: %v", device, err)
	}
	if reg.Node.ID != device {
		e.t.Fatalf("registered as %s, want %s", reg.Node.ID, device)
	}
	n.srv.SetKey(reg.Key)
	for id, until := range reg.Revoked {
		n.srv.Revoke(id, until)
	}
}

func (e *env) grant(req lease.Request) lease.Grant {
	e.t.Helper()
	g, err := e.m.Grant(ctx, req)
	if err != nil {
		e.t.Fatalf("grant %+v: %v", req, err)
	}
	return g
}

func (e *env) dial(g lease.Grant) *memory.Client {
	e.t.Helper()
	c, err := memory.Dial(ctx, g.Endpoint, g.Token)
	if err != nil {
		e.t.Fatalf("dial %s with lease %s: %v", g.Endpoint, g.ID, err)
	}
	e.t.Cleanup(func() { _ = c.Close() })
	return c
}

const mib = 1 << 20

func TestGrantTokenWorksOnTheNode(t *testing.T) {
	e := newEnv(t)
	e.startNode("memnode1", 64*mib)
	g := e.grant(lease.Request{Size: 1000, Host: "host1", Tenant: "blue", Owner: "alice"})
	if g.Size != lease.Alignment || g.Node != "memnode1" || g.State != lease.Active || g.RTTNS <= 0 || g.Hops < 1 {
		t.Fatalf("grant = %+v", g)
	}
	if want := e.clk.Now().Add(lease.DefaultTTL); !g.Expiry.Equal(want) {
		t.Errorf("expiry %v, want %v", g.Expiry, want)
	}
	c := e.dial(g)
	if err := c.Write(ctx, 0, []byte("hello "), []byte("pool")); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 10)
	if err := c.Read(ctx, 0, buf); err != nil || string(buf) != "hello pool" {
		t.Fatalf("read %q, %v", buf, err)
	}
	if err := c.Read(ctx, lease.Alignment-4, buf); !errors.Is(err, memory.ErrRange) {
		t.Errorf("read past the lease = %v, want ErrRange", err)
	}
	// A second lease lands beside the first, not on it.
	g2 := e.grant(lease.Request{Size: 3 * lease.Alignment})
	if g2.Offset != lease.Alignment {
		t.Errorf("second lease at %d, want %d", g2.Offset, lease.Alignment)
	}
	// Tenants see only their own.
	if _, err := e.m.Get(g.ID, "red"); !errors.Is(err, lease.ErrNotFound) {
		t.Errorf("another tenant's Get = %v, want ErrNotFound", err)
	}
	if ls := e.m.List("blue"); len(ls) != 1 || ls[0].ID != g.ID {
		t.Errorf("blue's leases = %+v", ls)
	}
	if ls := e.m.List(""); len(ls) != 2 {
		t.Errorf("all leases = %d, want 2", len(ls))
	}
	if err := e.m.Release(ctx, g.ID, "red"); !errors.Is(err, lease.ErrNotFound) {
		t.Errorf("another tenant's Release = %v, want ErrNotFound", err)
	}
	// A token for lease 1 with read rights only cannot write.
	gr := e.grant(lease.Request{Size: 4096, Rights: memory.RightRead})
	if err := e.dial(gr).Write(ctx, 0, []byte("x")); !errors.Is(err, memory.ErrRights) {
		t.Errorf("write with a read-only lease = %v, want ErrRights", err)
	}
}

func TestBadRequests(t *testing.T) {
	e := newEnv(t)
	if _, err := e.m.Grant(ctx, lease.Request{Size: 4096}); !errors.Is(err, lease.ErrNoMemory) || !strings.Contains(err.Error(), "no memory node") {
		t.Errorf("grant with no node = %v", err)
	}
	e.startNode("memnode1", 64*mib)
	for _, tc := range []struct {
		name string
		req  lease.Request
		want error
	}{
		{"zero size", lease.Request{}, lease.ErrBadInput},
		{"huge size", lease.Request{Size: 1 << 63}, lease.ErrNoMemory},
		{"max size", lease.Request{Size: ^uint64(0)}, lease.ErrBadInput},
		{"ttl too short", lease.Request{Size: 1, TTL: time.Millisecond}, lease.ErrBadInput},
		{"ttl too long", lease.Request{Size: 1, TTL: 1000 * time.Hour}, lease.ErrBadInput},
		{"admin rights", lease.Request{Size: 1, Rights: memory.RightAdmin}, lease.ErrBadInput},
		{"unknown host", lease.Request{Size: 1, Host: "nohost"}, lease.ErrBadInput},
		{"unknown node", lease.Request{Size: 1, Node: "memnode9"}, lease.ErrNotFound},
		{"latency bound", lease.Request{Size: 1, Host: "host1", MaxLatencyNS: 1}, lease.ErrNoMemory},
	} {
		if _, err := e.m.Grant(ctx, tc.req); !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
		}
	}
	if ls := e.m.List(""); len(ls) != 0 {
		t.Errorf("refused requests left leases: %+v", ls)
	}
	for _, r := range []lease.Registration{
		{Device: "memnode1", Endpoint: "", Capacity: 1},
		{Device: "memnode1", Endpoint: "127.0.0.1:1", Capacity: 0},
		{Device: "gpu1", Endpoint: "127.0.0.1:1", Capacity: 1},
		{Device: "memnode2", Endpoint: "127.0.0.1:1", Capacity: 1 << 50},
		{Device: "memnode1", Endpoint: "127.0.0.1:1", Capacity: 1}, // served by a live node elsewhere
	} {
		if _, err := e.m.Register(ctx, r); err == nil {
			t.Errorf("registration %+v accepted", r)
		}
	}
}

func TestReleaseZeroesAndRevokes(t *testing.T) {
	e := newEnv(t)
	e.startNode("memnode1", 64*mib)
	g := e.grant(lease.Request{Size: 8192})
	c := e.dial(g)
	secret := bytes.Repeat([]byte("s"), 8192)
	if err := c.Write(ctx, 0, secret); err != nil {
		t.Fatal(err)
	}
	if err := e.m.Release(ctx, g.ID, ""); err != nil {
		t.Fatal(err)
	}
	if ls := e.m.List(""); len(ls) != 0 {
		t.Fatalf("released lease still listed: %+v", ls)
	}
	if err := c.Read(ctx, 0, make([]byte, 1)); err == nil {
		t.Error("the released lease's connection still reads")
	}
	if _, err := memory.Dial(ctx, g.Endpoint, g.Token); err == nil {
		t.Error("the released lease's token still authenticates")
	}
	g2 := e.grant(lease.Request{Size: 8192})
	if g2.Offset != g.Offset {
		t.Fatalf("reused range at %d, want %d", g2.Offset, g.Offset)
	}
	buf := make([]byte, 8192)
	if err := e.dial(g2).Read(ctx, 0, buf); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(buf, make([]byte, 8192)) {
		t.Fatal("a new lease sees the previous holder's data")
	}
}

func TestExpiryReclaims(t *testing.T) {
	e := newEnv(t)
	e.startNode("memnode1", 64*mib)
	g := e.grant(lease.Request{Size: 4096, TTL: time.Minute})
	if err := e.dial(g).Write(ctx, 0, []byte("old data")); err != nil {
		t.Fatal(err)
	}
	e.clk.Advance(30 * time.Second)
	r, err := e.m.Renew(ctx, g.ID, "", 2*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if !r.Expiry.Equal(e.clk.Now().Add(2*time.Minute)) || r.Token == g.Token {
		t.Fatalf("renewed = %+v", r)
	}
	e.clk.Advance(90 * time.Second) // past the first token's expiry, not the renewed one's
	if _, err := memory.Dial(ctx, g.Endpoint, g.Token); !errors.Is(err, memory.ErrExpired) {
		t.Errorf("the old token = %v, want ErrExpired", err)
	}
	c := e.dial(r)
	if n := e.m.Reclaim(ctx); n != 0 {
		t.Fatalf("reclaimed %d live leases", n)
	}
	e.clk.Advance(time.Minute)
	if _, err := e.m.Renew(ctx, g.ID, "", 0); !errors.Is(err, lease.ErrExpired) {
		t.Errorf("renewing an expired lease = %v, want ErrExpired", err)
	}
	if err := c.Read(ctx, 0, make([]byte, 1)); !errors.Is(err, memory.ErrExpired) {
		t.Errorf("reading with an expired token = %v, want ErrExpired", err)
	}
	if n := e.m.Reclaim(ctx); n != 1 {
		t.Fatalf("reclaimed %d, want 1", n)
	}
	// Minutes passed without a heartbeat: the node is offline until it
	// registers again.
	if _, err := e.m.Grant(ctx, lease.Request{Size: 4096}); !errors.Is(err, lease.ErrNoMemory) || !strings.Contains(err.Error(), "offline") {
		t.Fatalf("grant on a silent node = %v", err)
	}
	e.register("memnode1", e.nodes["memnode1"], 64*mib)
	g2 := e.grant(lease.Request{Size: 4096})
	buf := make([]byte, 8)
	if err := e.dial(g2).Read(ctx, 0, buf); err != nil || !bytes.Equal(buf, make([]byte, 8)) {
		t.Fatalf("after reclaim the range reads %q, %v; want zeroes", buf, err)
	}
}

func TestUnreachableNodeKeepsRangeUntilZeroed(t *testing.T) {
	e := newEnv(t)
	n := e.startNode("memnode1", 64*mib)
	g := e.grant(lease.Request{Size: 4096})
	_ = n.srv.Close()
	if err := e.m.Release(ctx, g.ID, ""); err != nil {
		t.Fatal(err)
	}
	l, err := e.m.Get(g.ID, "")
	if err != nil || l.State != lease.Reclaiming {
		t.Fatalf("lease after a failed reclaim = %+v, %v", l, err)
	}
	if _, err := e.m.Renew(ctx, g.ID, "", 0); !errors.Is(err, lease.ErrReclaimed) {
		t.Errorf("renewing a reclaiming lease = %v", err)
	}
	// The node comes back (a new process: new epoch, empty memory) at a
	// new address: its reclaiming leases are done, the revocation is
	// handed to it, and the range is free again.
	key, _ := memory.NewKey()
	srv, err := memory.NewServer(memory.ServerOptions{Node: "memnode1", Capacity: 64 * mib, Key: key, Clock: e.clk})
	if err != nil {
		t.Fatal(err)
	}
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	e.clk.Advance(lease.DefaultNodeTimeout) // the old registration has lapsed
	e.register("memnode1", &memnode{srv: srv, addr: ln.Addr().String()}, 64*mib)
	if _, err := e.m.Get(g.ID, ""); !errors.Is(err, lease.ErrNotFound) {
		t.Fatalf("lease after the node restarted: %v", err)
	}
	if _, err := memory.Dial(ctx, ln.Addr().String(), g.Token); err == nil {
		t.Error("the restarted node accepts a released lease's token")
	}
	if g2 := e.grant(lease.Request{Size: 4096}); g2.Offset != g.Offset {
		t.Errorf("range not reused: %d", g2.Offset)
	}
}

func TestLeasesSurviveRestart(t *testing.T) {
	e := newEnv(t)
	n := e.startNode("memnode1", 64*mib)
	g := e.grant(lease.Request{Size: 4096, Tenant: "blue"})
	if err := e.dial(g).Write(ctx, 0, []byte("kept")); err != nil {
		t.Fatal(err)
	}
	e.restart()
	l, err := e.m.Get(g.ID, "blue")
	if err != nil || l.Offset != g.Offset || !l.Expiry.Equal(g.Expiry) {
		t.Fatalf("after restart: %+v, %v", l, err)
	}
	// The token issued before the restart still works: the key is stored.
	buf := make([]byte, 4)
	if err := e.dial(g).Read(ctx, 0, buf); err != nil || string(buf) != "kept" {
		t.Fatalf("read %q, %v", buf, err)
	}
	// The memnode's heartbeat brings it back online; renew works.
	e.register("memnode1", n, 64*mib)
	if _, err := e.m.Renew(ctx, g.ID, "blue", 0); err != nil {
		t.Fatal(err)
	}
	// The block the lease lives in is still held against compositions.
	if st := e.comp.BlockStatus("memnode1-b01"); st.State != "Unavailable" {
		t.Errorf("memnode1-b01 after restart: %+v", st)
	}
}

func TestLeasesAndCompositionsShareBlocks(t *testing.T) {
	e := newEnv(t)
	dev := e.top.Device("memnode1")
	bs := uint64(dev.BlockBytes)
	// A memnode serving 2 blocks' worth of memory (the example's 8 GiB
	// blocks; the arena takes no memory until touched).
	e.startNode("memnode1", 2*bs)
	if _, err := e.comp.Compose(ctx, compose.Request{Host: "host1", Blocks: []string{"memnode1-b01"}}); err != nil {
		t.Fatal(err)
	}
	g := e.grant(lease.Request{Size: 4096})
	if g.Offset != bs {
		t.Fatalf("lease at %d, want %d (block 1 is composed)", g.Offset, bs)
	}
	if st := e.comp.BlockStatus("memnode1-b02"); st.State != "Unavailable" || st.HeldBy == "" {
		t.Fatalf("leased block status %+v", st)
	}
	if _, err := e.comp.Compose(ctx, compose.Request{Host: "host2", Blocks: []string{"memnode1-b02"}}); err == nil {
		t.Fatal("composed a block a lease lives in")
	}
	if _, err := e.m.Grant(ctx, lease.Request{Size: bs}); !errors.Is(err, lease.ErrNoMemory) {
		t.Fatalf("a block-sized lease beside the composed block = %v, want ErrNoMemory", err)
	}
	if err := e.m.Release(ctx, g.ID, ""); err != nil {
		t.Fatal(err)
	}
	if st := e.comp.BlockStatus("memnode1-b02"); st.State != "Unused" {
		t.Fatalf("block after its last lease: %+v", st)
	}
}

// TestLeaseHoldsItsBlocksInTheStore: a lease is committed with its node's
// holder record, so the store's block checks see it (a composition plan
// written straight to the store cannot take its block), a refused lease
// names the engine's reasons, and a store whose leases lack a holder record
// (written before holders existed) gets one at start-up.
func TestLeaseHoldsItsBlocksInTheStore(t *testing.T) {
	e := newEnv(t)
	e.startNode("memnode1", 64*mib)
	g := e.grant(lease.Request{Size: 4096, Host: "host1"})
	holder := func() *inventory.Composition {
		t.Helper()
		cs, err := e.store.Compositions(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range cs {
			if c.ID == "leases-memnode1" {
				return c
			}
		}
		return nil
	}
	h := holder()
	if h == nil || h.State != inventory.Held || !slices.Equal(h.Blocks, []string{"memnode1-b01"}) {
		t.Fatalf("holder record after a grant: %+v", h)
	}
	intruder := &inventory.Composition{ID: "sys-x", Host: "host2", State: inventory.Composed, Version: 1,
		Blocks: []string{"host2", "memnode1-b01"}, CreatedAt: time.Now(), UpdatedAt: time.Now()}
	if err := e.store.Apply(ctx, store.Plan{Put: []*inventory.Composition{intruder}}); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("a composition of the leased block went into the store: %v", err)
	}

	_, err := e.m.Grant(ctx, lease.Request{Size: 4096, Host: "host1", MaxLatencyNS: 1})
	if !errors.Is(err, lease.ErrNoMemory) || !strings.Contains(err.Error(), string(schedule.TooFar)) {
		t.Errorf("a lease over its latency bound = %v, want ErrNoMemory naming %q", err, schedule.TooFar)
	}

	// Drop the holder record behind the manager's back, as a store from
	// before holders would be: a restart holds the lease's block again.
	if err := e.store.Apply(ctx, store.Plan{Delete: []store.Deletion{{ID: h.ID, Version: h.Version}}}); err != nil {
		t.Fatal(err)
	}
	e.restart()
	if h := holder(); h == nil || !slices.Equal(h.Blocks, []string{"memnode1-b01"}) {
		t.Fatalf("holder record after a restart without one: %+v", h)
	}
	if st := e.comp.BlockStatus("memnode1-b01"); st.State != "Unavailable" {
		t.Errorf("the leased block after the restart: %+v", st)
	}
	if err := e.m.Release(ctx, g.ID, ""); err != nil {
		t.Fatal(err)
	}
	if h := holder(); h != nil {
		t.Errorf("holder record after the last lease went: %+v", h)
	}
}

// TestRegistrationUsage: a memnode's report of bytes in use is kept for
// its own active leases within their size, and dropped for any other.
func TestRegistrationUsage(t *testing.T) {
	e := newEnv(t)
	n1 := e.startNode("memnode1", 64*mib)
	n2 := e.startNode("memnode2", 64*mib)
	a := e.grant(lease.Request{Size: 8192, Node: "memnode1"})
	b := e.grant(lease.Request{Size: 8192, Node: "memnode2"})
	gone := e.grant(lease.Request{Size: 4096, Node: "memnode1"})
	if err := e.m.Release(ctx, gone.ID, ""); err != nil {
		t.Fatal(err)
	}
	reg, err := e.m.Register(ctx, lease.Registration{Device: "memnode1", Endpoint: n1.addr, Capacity: 64 * mib, Epoch: n1.srv.Epoch(),
		Usage: map[string]uint64{a.ID: 4096, b.ID: 4096, gone.ID: 4096, "lease-nope": 1}})
	if err != nil {
		t.Fatal(err)
	}
	if len(reg.Usage) != 1 || reg.Usage[a.ID] != 4096 {
		t.Errorf("kept %v, want only %s", reg.Usage, a.ID)
	}
	reg, err = e.m.Register(ctx, lease.Registration{Device: "memnode2", Endpoint: n2.addr, Capacity: 64 * mib, Epoch: n2.srv.Epoch(),
		Usage: map[string]uint64{b.ID: 8193}})
	if err != nil || len(reg.Usage) != 0 {
		t.Errorf("more in use than the lease holds: %v %v", reg.Usage, err)
	}
}
