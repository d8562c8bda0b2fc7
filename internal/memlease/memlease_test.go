package memlease_test

import (
	"context"
	"net"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"rackpool/api"
	"rackpool/internal/clock"
	"rackpool/internal/compose"
	"rackpool/internal/fabric/emulated"
	"rackpool/internal/lease"
	"rackpool/internal/memlease"
	"rackpool/internal/memory"
	"rackpool/internal/redfish"
	"rackpool/internal/store/sqlite"
	"rackpool/internal/tenancy"
	"rackpool/internal/topology"
)

const password = "keeper-password"

// plane is a real control plane (placement, leases, the Redfish API over
// HTTP) and real memnodes, in process, on one manual clock.
type plane struct {
	t     *testing.T
	clk   *clock.Manual
	srv   *httptest.Server
	api   *api.Client
	nodes map[string]*memory.Server
	regs  map[string]api.NodeRegistration // live nodes, heartbeating
}

func newPlane(t *testing.T) *plane {
	t.Helper()
	ctx := context.Background()
	top := topology.LoadDefault()
	st, err := sqlite.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	p := &plane{t: t, clk: clock.NewManual(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)), nodes: map[string]*memory.Server{},
		regs: map[string]api.NodeRegistration{}}
	drivers, err := emulated.NewAll(top, p.clk)
	if err != nil {
		t.Fatal(err)
	}
	mgr, err := compose.New(ctx, compose.Options{Topology: top, Store: st, Drivers: drivers, Clock: p.clk})
	if err != nil {
		t.Fatal(err)
	}
	auth, _, err := tenancy.Open(ctx, st, tenancy.Options{AdminPassword: password})
	if err != nil {
		t.Fatal(err)
	}
	leases, err := lease.New(ctx, lease.Options{Store: st, Topology: top, Placement: mgr, Clock: p.clk})
	if err != nil {
		t.Fatal(err)
	}
	p.srv = httptest.NewTLSServer(redfish.New(mgr, auth, redfish.Options{Store: st, AsyncThreshold: -1, Leases: leases}))
	t.Cleanup(p.srv.Close)
	p.api = api.New(p.srv.URL, tenancy.AdminUser, password)
	p.api.HTTP = p.srv.Client() // trusts the test server's certificate
	return p
}

// memnode starts a real memnode for topology device node and registers it
// as rackpool memnode does.
func (p *plane) memnode(node string, capacity uint64) {
	p.t.Helper()
	key, _ := memory.NewKey()
	srv, err := memory.NewServer(memory.ServerOptions{Node: node, Capacity: capacity, Key: key, Clock: p.clk})
	if err != nil {
		p.t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		p.t.Fatal(err)
	}
	go func() { _ = srv.Serve(l) }()
	p.t.Cleanup(func() { _ = srv.Close() })
	reg := api.NodeRegistration{Device: node, Endpoint: l.Addr().String(), CapacityBytes: capacity, Epoch: srv.Epoch()}
	n, err := p.api.RegisterMemoryNode(context.Background(), reg)
	if err != nil {
		p.t.Fatal(err)
	}
	k, err := n.Key()
	if err != nil {
		p.t.Fatal(err)
	}
	srv.SetKey(k)
	p.nodes[node] = srv
	p.regs[node] = reg
}

// kill stops memnode node: it serves and heartbeats no more.
func (p *plane) kill(node string) {
	_ = p.nodes[node].Close()
	delete(p.regs, node)
}

// heartbeat registers the live memnodes again, as they do every few
// seconds, so that the clock's advance does not time them out.
func (p *plane) heartbeat() {
	for _, reg := range p.regs {
		_, _ = p.api.RegisterMemoryNode(context.Background(), reg)
	}
}

// attached records what the keeper hands its user.
type attached struct {
	mu     sync.Mutex
	client memlease.Region
	size   uint64
	calls  int
}

func (a *attached) attach(c memlease.Region, n uint64) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.client, a.size = c, n
	a.calls++
}

func (a *attached) get() (memlease.Region, uint64, int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.client, a.size, a.calls
}

// keeper returns a keeper of a 1 MiB lease of duration ttl that has
// acquired its first lease.
func (p *plane) keeper(ttl time.Duration, a *attached) *memlease.Keeper {
	p.t.Helper()
	k, err := memlease.New(memlease.Options{Control: p.api, Request: api.LeaseRequest{Size: 1 << 20, TTL: ttl},
		Attach: a.attach, Clock: p.clk})
	if err != nil {
		p.t.Fatal(err)
	}
	if err := k.Acquire(context.Background()); err != nil {
		p.t.Fatal(err)
	}
	return k
}

// run starts k.Run and stops it at the end of the test.
func run(t *testing.T, k *memlease.Keeper) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); k.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
}

// advanceUntil moves the clock a step at a time until cond holds (the
// keeper works on its own goroutine), failing after 10 s of wall time.
func (p *plane) advanceUntil(step time.Duration, what string, cond func() bool) {
	p.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			p.t.Fatalf("%s: not after %v of clock time", what, p.clk.Now().Sub(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)))
		}
		p.clk.Advance(step)
		p.heartbeat()
		time.Sleep(20 * time.Millisecond)
	}
}

func TestKeeperRenews(t *testing.T) {
	p := newPlane(t)
	p.memnode("memnode1", 16<<20)
	var a attached
	k := p.keeper(30*time.Second, &a)
	ctx := context.Background()
	first := k.Lease()
	mc, size, _ := a.get()
	if mc == nil || size != 1<<20 || first.CapacityBytes != 1<<20 {
		t.Fatalf("attached client %t, %d bytes, lease %+v", mc != nil, size, first)
	}
	if err := mc.Write(ctx, 0, []byte("kept")); err != nil {
		t.Fatal(err)
	}
	run(t, k)
	// Renewed at a third of the duration: same lease, later expiry.
	p.advanceUntil(time.Second, "renewal", func() bool { return k.Lease().Expires.After(first.Expires) })
	if l := k.Lease(); l.ID != first.ID || k.Leases() != 1 {
		t.Fatalf("after renewal: %+v, %d leases", l, k.Leases())
	}
	// Past the first expiry the region is still there, under the new token.
	p.clk.Advance(first.Expires.Sub(p.clk.Now()) + time.Second)
	buf := make([]byte, 4)
	if err := mc.Read(ctx, 0, buf); err != nil || string(buf) != "kept" {
		t.Fatalf("read after the first expiry: %q %v", buf, err)
	}
	if err := k.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if l, err := p.api.Lease(ctx, first.ID); err == nil && l.State == "Active" {
		t.Fatal("the lease is still active after Release")
	}
	if k.Lease() != nil {
		t.Fatal("the keeper still holds a lease after Release")
	}
}

// A memnode that dies is replaced: the keeper leases on another node and
// hands the cache the new region.
func TestKeeperReplacesALostNode(t *testing.T) {
	p := newPlane(t)
	p.memnode("memnode1", 16<<20)
	p.memnode("memnode2", 16<<20)
	var a attached
	k := p.keeper(time.Minute, &a)
	first := k.Lease()
	run(t, k)
	p.kill(first.MemoryNode)
	p.advanceUntil(time.Second, "re-lease", func() bool { return k.Leases() == 2 })
	l := k.Lease()
	if l == nil || l.MemoryNode == first.MemoryNode || l.ID == first.ID {
		t.Fatalf("after losing %s: %+v", first.MemoryNode, l)
	}
	// Until the control plane marks the dead node offline, leasing there
	// again fails at the dial and the keeper tells its user the region
	// is gone (Attach(nil, 0)); the last call hands over the new region.
	mc, size, calls := a.get()
	if mc == nil || size != 1<<20 || calls < 2 {
		t.Fatalf("attached client %t, %d bytes, after %d calls", mc != nil, size, calls)
	}
	if err := mc.Write(context.Background(), 0, []byte("on the new node")); err != nil {
		t.Fatalf("the new region: %v", err)
	}
}

// While the control plane does not answer, the keeper keeps its region
// until the lease is about to expire; then, unable to lease again, it
// tells its user the region is gone.
func TestKeeperOutlastsAControlPlaneOutage(t *testing.T) {
	p := newPlane(t)
	p.memnode("memnode1", 16<<20)
	var a attached
	k := p.keeper(30*time.Second, &a)
	first := k.Lease()
	run(t, k)
	p.srv.CloseClientConnections()
	p.srv.Close()
	// Past the renewal point, more than the margin before expiry: kept.
	for p.clk.Now().Before(first.Expires.Add(-memlease.RenewMargin - 2*time.Second)) {
		p.clk.Advance(time.Second)
		time.Sleep(5 * time.Millisecond)
	}
	if l := k.Lease(); l == nil || l.ID != first.ID {
		t.Fatalf("region given up while its lease had time left: %+v", l)
	}
	if mc, _, calls := a.get(); mc == nil || calls != 1 {
		t.Fatalf("attach calls %d, client %t", calls, mc != nil)
	}
	p.advanceUntil(time.Second, "giving the region up", func() bool { mc, _, _ := a.get(); return mc == nil })
	if k.Lease() != nil {
		t.Fatalf("still holds %+v", k.Lease())
	}
}

func TestKeeperOptions(t *testing.T) {
	for _, o := range []memlease.Options{
		{},
		{Control: &api.Client{}, Attach: func(memlease.Region, uint64) {}, Request: api.LeaseRequest{TTL: time.Second}},
	} {
		if _, err := memlease.New(o); err == nil {
			t.Errorf("New(%+v) accepted", o)
		}
	}
}

// Resize leases a region of the new size, hands it over, and gives the old
// lease back; a failed resize changes nothing.
func TestKeeperResize(t *testing.T) {
	p := newPlane(t)
	p.memnode("memnode1", 16<<20)
	var a attached
	k := p.keeper(30*time.Second, &a)
	ctx := context.Background()
	first := k.Lease()
	if err := k.Resize(ctx, 4<<20); err != nil {
		t.Fatal(err)
	}
	mc, size, n := a.get()
	if l := k.Lease(); l.ID == first.ID || l.CapacityBytes != 4<<20 || size != 4<<20 || mc == nil || n != 2 {
		t.Fatalf("after growing: lease %+v, attached %d bytes (%d attaches)", l, size, n)
	}
	if l, err := p.api.Lease(ctx, first.ID); err == nil && l.State == "Active" {
		t.Fatal("the old lease is still active after the resize")
	}
	if err := k.Resize(ctx, 64<<20); err == nil {
		t.Fatal("a resize beyond the node's capacity succeeded")
	}
	if l := k.Lease(); l.CapacityBytes != 4<<20 {
		t.Fatalf("a failed resize changed the lease: %+v", l)
	}
	if err := k.Resize(ctx, 2<<20); err != nil || k.Lease().CapacityBytes != 2<<20 {
		t.Fatalf("shrinking: %v, %+v", err, k.Lease())
	}
	if err := k.Release(ctx); err != nil {
		t.Fatal(err)
	}
}
