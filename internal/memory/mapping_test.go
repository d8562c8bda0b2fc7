//go:build linux

package memory

import (
	"bytes"
	"context"
	"errors"
	"net"
	"path/filepath"
	"testing"
	"time"
)

// serveUnix makes n also serve its local socket and returns its path.
func (n *testNode) serveUnix(t testing.TB) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "memnode.sock")
	l, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	go n.s.Serve(l)
	return path
}

func mustMap(t testing.TB, path, tok string) *Mapping {
	t.Helper()
	m, err := Map(context.Background(), path, tok)
	if err != nil {
		t.Fatalf("Map: %v", err)
	}
	t.Cleanup(func() { m.Close() })
	// The test node runs on a manual clock in 2030; the mapping checks
	// expiry on the same clock.
	return m
}

func fill(n int, b byte) []byte { return bytes.Repeat([]byte{b}, n) }

func allZero(b []byte) bool {
	for _, x := range b {
		if x != 0 {
			return false
		}
	}
	return true
}

// TestMapTwoTenants is the isolation argument as a test: two tenants'
// leases on one node, both mapped; one tenant's lease is reclaimed while it
// keeps its mapping, and the range goes to a third lease. The stale holder
// reads zeros, its later stores reach nobody, and no mapping ever shows
// another lease's bytes.
func TestMapTwoTenants(t *testing.T) {
	n := startNode(t, nil)
	sock := n.serveUnix(t)
	const size = 256 << 10
	tokA := n.token(t, func(c *Claims) { c.Lease, c.Offset, c.Length = "tenantA-lease", 0, size })
	tokB := n.token(t, func(c *Claims) { c.Lease, c.Offset, c.Length = "tenantB-lease", size, size })

	a := mustMap(t, sock, tokA)
	b := mustMap(t, sock, tokB)
	if a.Len() != size || b.Len() != size {
		t.Fatalf("mapped %d and %d bytes, want %d", a.Len(), b.Len(), size)
	}
	if !allZero(a.Bytes()) || !allZero(b.Bytes()) {
		t.Fatal("a fresh mapping is not zero")
	}
	copy(a.Bytes(), fill(size, 0xAA)) // stores, no round trip
	copy(b.Bytes(), fill(size, 0xBB))

	// The TCP path sees the stores, and stays inside each lease.
	ca := n.dial(t, tokA)
	got := make([]byte, size)
	if err := ca.Read(context.Background(), 0, got); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, fill(size, 0xAA)) {
		t.Fatal("TCP READ of a mapped lease does not see the holder's stores")
	}
	if err := ca.Write(context.Background(), 4096, []byte("over tcp")); err != nil {
		t.Fatal(err)
	}
	if string(a.Bytes()[4096:4104]) != "over tcp" {
		t.Fatal("the mapping does not see a TCP WRITE")
	}
	if !bytes.Equal(b.Bytes(), fill(size, 0xBB)) {
		t.Fatal("tenant B's mapping changed when tenant A wrote")
	}

	// Reclaim tenant A's lease the way the control plane does (ZERO with
	// an admin token), while A keeps its mapping.
	admin := n.dial(t, n.token(t, func(c *Claims) {
		c.Lease, c.Offset, c.Length, c.Rights = "tenantA-lease", 0, size, RightAdmin
	}))
	if err := admin.Zero(context.Background(), t0.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if !allZero(a.Bytes()) {
		t.Fatal("a reclaimed lease's stale mapping still shows its data")
	}
	copy(a.Bytes(), fill(size, 0xCC)) // the stale holder keeps storing

	// The range goes to tenant C, which maps it: a fresh object.
	tokC := n.token(t, func(c *Claims) { c.Lease, c.Offset, c.Length = "tenantC-lease", 0, size })
	cc := mustMap(t, sock, tokC)
	if !allZero(cc.Bytes()) {
		t.Fatal("a new lease of a reclaimed range shows bytes (a stale holder's or the old lease's)")
	}
	copy(cc.Bytes(), fill(size, 0xDD))
	if !bytes.Equal(a.Bytes(), fill(size, 0xCC)) {
		t.Fatal("the stale holder sees the new lease's data")
	}
	// Over TCP, tenant C's lease reads C's bytes, not the stale holder's.
	cl := n.dial(t, tokC)
	if err := cl.Read(context.Background(), 0, got); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, fill(size, 0xDD)) {
		t.Fatal("TCP READ of the new lease does not show its own data")
	}
	if !bytes.Equal(b.Bytes(), fill(size, 0xBB)) {
		t.Fatal("tenant B's data changed")
	}
	// The stale token is refused now.
	if _, err := Map(context.Background(), sock, tokA); !errors.Is(err, ErrRevoked) {
		t.Fatalf("Map with a reclaimed lease's token: %v, want ErrRevoked", err)
	}
}

// TestMapCarriesData: a lease written over TCP and mapped later shows what
// was written; usage counts the mapped pages.
func TestMapCarriesData(t *testing.T) {
	n := startNode(t, nil)
	sock := n.serveUnix(t)
	tok := n.token(t, nil)
	c := n.dial(t, tok)
	if err := c.Write(context.Background(), 8192, []byte("before the map")); err != nil {
		t.Fatal(err)
	}
	m := mustMap(t, sock, tok)
	if got := string(m.Bytes()[8192 : 8192+14]); got != "before the map" {
		t.Fatalf("mapping shows %q", got)
	}
	copy(m.Bytes()[3*4096:], fill(2*4096, 1))
	use := n.s.LeaseUsage()["lease-1"]
	if use != 3*4096 {
		t.Errorf("usage of a mapped lease = %d, want %d (the pages written)", use, 3*4096)
	}
	// A second mapping of the same lease shares the object.
	m2 := mustMap(t, sock, tok)
	if !bytes.Equal(m2.Bytes(), m.Bytes()) {
		t.Fatal("two mappings of one lease differ")
	}
	if n.s.Stats().Map != 2 {
		t.Errorf("Map count = %d, want 2", n.s.Stats().Map)
	}
}

// TestMapExpiry: a holder that never renews loses the mapping at the
// lease's expiry; one that renews keeps it.
func TestMapExpiry(t *testing.T) {
	n := startNode(t, nil)
	sock := n.serveUnix(t)
	short := n.token(t, func(c *Claims) { c.Lease, c.Offset, c.Expiry = "short", 0, t0.Add(time.Minute) })
	long := n.token(t, func(c *Claims) { c.Lease, c.Offset, c.Expiry = "renewed", 1<<20, t0.Add(time.Minute) })
	ms := mustMap(t, sock, short)
	ml := mustMap(t, sock, long)
	ms.now, ml.now = n.clk.Now, n.clk.Now
	copy(ms.Bytes(), "short-lived")
	copy(ml.Bytes(), "renewed")
	renewed := n.token(t, func(c *Claims) { c.Lease, c.Offset, c.Expiry = "renewed", 1<<20, t0.Add(time.Hour) })
	if err := ml.Renew(context.Background(), renewed); err != nil {
		t.Fatal(err)
	}
	n.clk.Advance(2 * time.Minute)
	if got := n.s.ReapExpired(); got != 1 {
		t.Fatalf("reaped %d mappings, want 1", got)
	}
	if !allZero(ms.Bytes()[:16]) {
		t.Fatal("an expired mapping still shows data")
	}
	if err := ms.Read(context.Background(), 0, make([]byte, 8)); !errors.Is(err, ErrExpired) {
		t.Fatalf("Read after expiry: %v, want ErrExpired", err)
	}
	if string(ml.Bytes()[:7]) != "renewed" {
		t.Fatal("a renewed mapping lost its data")
	}
	p := make([]byte, 7)
	if err := ml.Read(context.Background(), 0, p); err != nil || string(p) != "renewed" {
		t.Fatalf("Read of a renewed mapping: %q, %v", p, err)
	}
	// A token for another lease cannot renew this mapping's region size.
	other := n.token(t, func(c *Claims) { c.Lease, c.Offset, c.Length = "other", 0, 4096 })
	if err := ml.Renew(context.Background(), other); !errors.Is(err, ErrRange) {
		t.Fatalf("Renew with a token of another size: %v, want ErrRange", err)
	}
}

// TestMapRefusals: every bad request to map is refused with its reason
// and maps nothing.
func TestMapRefusals(t *testing.T) {
	n := startNode(t, nil)
	sock := n.serveUnix(t)
	ctx := context.Background()
	good := n.token(t, nil)

	forged := []byte(good)
	forged[len(forged)-3] ^= 1
	if _, err := Map(ctx, sock, string(forged)); !errors.Is(err, ErrBadToken) {
		t.Errorf("forged token: %v, want ErrBadToken", err)
	}
	otherKey := Key(bytes.Repeat([]byte{7}, KeySize))
	if _, err := Map(ctx, sock, mustSign(t, otherKey, testClaims())); !errors.Is(err, ErrBadToken) {
		t.Errorf("token signed with another key: %v, want ErrBadToken", err)
	}
	if _, err := Map(ctx, sock, n.token(t, func(c *Claims) { c.Expiry = t0.Add(-time.Second) })); !errors.Is(err, ErrExpired) {
		t.Errorf("expired token: %v, want ErrExpired", err)
	}
	if _, err := Map(ctx, sock, n.token(t, func(c *Claims) { c.Node = "mem9" })); !errors.Is(err, ErrWrongNode) {
		t.Errorf("token for another node: %v, want ErrWrongNode", err)
	}
	if _, err := Map(ctx, sock, n.token(t, func(c *Claims) { c.Offset, c.Length = 4<<20-4096, 8192 })); !errors.Is(err, ErrWrongNode) {
		t.Errorf("token for a region past the capacity: %v, want ErrWrongNode", err)
	}
	if _, err := Map(ctx, sock, n.token(t, func(c *Claims) { c.Rights = RightAdmin })); !errors.Is(err, ErrRights) {
		t.Errorf("token without read rights: %v, want ErrRights", err)
	}
	if _, err := Map(ctx, sock, string(bytes.Repeat([]byte{'x'}, maxTokenLen+1))); !errors.Is(err, ErrBadToken) {
		t.Errorf("oversized token: %v, want ErrBadToken", err)
	}

	// MAP over TCP, and MAP before AUTH, are protocol errors.
	r := n.raw(t)
	r.send(reqFrame(reqHeader{op: opMap, tag: 5}, nil))
	if _, st, _ := r.recv(); st != statusNoAuth {
		t.Errorf("MAP before AUTH: status %d, want %d", st, statusNoAuth)
	}
	r.send(reqFrame(reqHeader{op: opAuth, tag: 6}, []byte(good)))
	r.recv()
	r.send(reqFrame(reqHeader{op: opMap, tag: 7}, nil))
	if _, st, msg := r.recv(); st != statusProtocol {
		t.Errorf("MAP over TCP: status %d (%s), want %d", st, msg, statusProtocol)
	}
	if got := n.s.LeaseUsage()["lease-1"]; got != 0 {
		t.Errorf("refusals left %d bytes in use", got)
	}

	// A read-only token maps read-only: Write is refused.
	ro := mustMap(t, sock, n.token(t, func(c *Claims) { c.Lease, c.Rights = "ro", RightRead }))
	if err := ro.Write(ctx, 0, []byte("x")); !errors.Is(err, ErrRights) {
		t.Errorf("Write through a read-only mapping: %v, want ErrRights", err)
	}
	// Accesses outside the region are refused, not wrapped.
	m := mustMap(t, sock, good)
	if err := m.Read(ctx, m.Len()-4, make([]byte, 8)); !errors.Is(err, ErrRange) {
		t.Errorf("Read past the region: %v, want ErrRange", err)
	}
	if err := m.Write(ctx, m.Len(), []byte{1}); !errors.Is(err, ErrRange) {
		t.Errorf("Write past the region: %v, want ErrRange", err)
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	if err := m.Read(ctx, 0, make([]byte, 1)); err == nil {
		t.Error("Read after Close succeeded")
	}
}
