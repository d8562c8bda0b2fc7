package memory

import (
	"context"
	"testing"
	"time"
)

// TestLeaseUsage: a lease's bytes in use are the 4 KiB pages its holder
// has written, whatever the writes' sizes and alignment; reads do not
// count; ZERO, expiry and revocation end them; one lease's writes never
// count for another.
func TestLeaseUsage(t *testing.T) {
	n := startNode(t, nil)
	ctx := context.Background()
	c := n.dial(t, n.token(t, nil)) // lease-1: 64 KiB at 1 MiB
	other := n.dial(t, n.token(t, func(c *Claims) { c.Lease, c.Offset = "lease-2", 2<<20 }))
	if u := n.s.LeaseUsage(); u["lease-1"] != 0 || len(u) != 2 {
		t.Fatalf("before any write: %v", u)
	}
	steps := []struct {
		off  uint64
		n    int
		want uint64
	}{
		{0, 1, 4096},                   // one byte: its page
		{100, 200, 4096},               // the same page again
		{4095, 2, 2 * 4096},            // across a page boundary
		{16 << 10, 20 << 10, 7 * 4096}, // 5 more pages
		{64<<10 - 1, 1, 8 * 4096},      // the last page
	}
	for _, st := range steps {
		if err := c.Write(ctx, st.off, make([]byte, st.n)); err != nil {
			t.Fatal(err)
		}
		if got := n.s.LeaseUsage()["lease-1"]; got != st.want {
			t.Fatalf("after %d bytes at %d: %d in use, want %d", st.n, st.off, got, st.want)
		}
	}
	buf := make([]byte, 64<<10)
	if err := other.Read(ctx, 0, buf); err != nil {
		t.Fatal(err)
	}
	if _, err := other.Append(ctx, make([]byte, 5000)); err != nil {
		t.Fatal(err)
	}
	u := n.s.LeaseUsage()
	if u["lease-1"] != 8*4096 || u["lease-2"] != 2*4096 {
		t.Fatalf("after lease-2 read and appended: %v", u)
	}
	// ZERO: nothing in use, and the lease is revoked until its expiry.
	admin := n.dial(t, n.token(t, func(c *Claims) { c.Rights = RightAdmin }))
	if err := admin.Zero(ctx, n.clk.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	u = n.s.LeaseUsage()
	if _, ok := u["lease-1"]; ok || u["lease-2"] != 2*4096 {
		t.Errorf("after ZERO of lease-1: %v", u)
	}
	// Expired: not reported.
	n.clk.Advance(2 * time.Hour)
	if u := n.s.LeaseUsage(); len(u) != 0 {
		t.Errorf("after expiry: %v", u)
	}
}

func TestPageBits(t *testing.T) {
	for _, tc := range []struct {
		off, n uint64
		pages  int
	}{{0, 1, 1}, {4096 * 63, 4097, 2}, {4096*64 - 1, 2, 2}, {0, 4096 * 200, 200}, {4096 * 10, 4096 * 128, 128}} {
		pages := 0
		pageBits(tc.off, tc.n, func(_ int, mask uint64) {
			for ; mask != 0; mask &= mask - 1 {
				pages++
			}
		})
		if pages != tc.pages {
			t.Errorf("pageBits(%d, %d) covers %d pages, want %d", tc.off, tc.n, pages, tc.pages)
		}
	}
}
