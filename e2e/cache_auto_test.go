package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"
)

// TestCacheRemoteAuto is `rackpool cache --remote-memory auto` end to end:
// a load whose working set grows to about 32 MB and shrinks to a tenth of
// it; the cache's lease follows (new lease, live records moved, old one
// given back), and reads of what was written find it, but for the bound
// docs/provisioning.md states.
func TestCacheRemoteAuto(t *testing.T) {
	skipShort(t)
	s := startDefault(t, "--fabric-time", "instant")
	startMemnode(t, s, "--capacity", "256MiB", "--heartbeat", "1s")
	cache := startProc(t, s, "cache", "--local-memory", "1MiB", "--remote-memory", "auto", "--remote-min", "4MiB",
		"--remote-max", "128MiB", "--remote-granule", "2MiB", "--remote-step", "250ms", "--control", s.url, "--usage-interval", "0")
	m := dialMC(t, cache.addr)
	admin := s.client()
	ctx := context.Background()
	leaseSize := func() uint64 {
		ls, err := admin.Leases(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var n uint64
		for _, l := range ls {
			if l.State == "Active" {
				n = max(n, l.CapacityBytes)
			}
		}
		return n
	}
	key := func(i int) string { return fmt.Sprintf("k%05d", i) }
	const batch, batches, size = 100, 20, 16 << 10
	peak := uint64(0)
	reads, misses := 0, 0
	for b := range batches {
		for i := b * batch; i < (b+1)*batch; i++ {
			m.set(key(i), value(key(i), size))
		}
		// Read back the previous batch: its items are remote by now.
		if b > 0 {
			for i := (b - 1) * batch; i < b*batch; i += 5 {
				reads++
				if v := m.get(key(i)); v == nil {
					misses++
				} else if string(v) != string(value(key(i), size)) {
					t.Fatalf("%s: wrong value", key(i))
				}
			}
		}
		peak = max(peak, leaseSize())
		time.Sleep(250 * time.Millisecond)
	}
	time.Sleep(2 * time.Second)
	peak = max(peak, leaseSize())
	all := 0
	for i := range batch * batches {
		if m.get(key(i)) != nil {
			all++
		}
	}
	// Shrink: delete nine in ten.
	for i := range batch * batches {
		if i%10 != 0 {
			fmt.Fprintf(m.c, "delete %s\r\n", key(i))
			if l := m.line(); l != "DELETED" && l != "NOT_FOUND" {
				t.Fatalf("delete: %q", l)
			}
		}
	}
	var final uint64
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if final = leaseSize(); final > 0 && final <= peak/2 {
			break
		}
		time.Sleep(250 * time.Millisecond)
	}
	kept, want := 0, 0
	for i := 0; i < batch*batches; i += 10 {
		want++
		if v := m.get(key(i)); v != nil {
			kept++
		}
	}
	log := cache.stderr.String()
	t.Logf("lease peaked at %d MiB, ended at %d MiB; %d of %d read-backs missed during growth; %d of %d items present after it; %d of %d kept items present after the shrink; %d resizes",
		peak>>20, final>>20, misses, reads, all, batch*batches, kept, want, strings.Count(log, "remote tier resized"))
	if peak < 24<<20 {
		t.Errorf("the lease never grew to the working set: peak %d bytes\n%s", peak, log)
	}
	if final > peak/2 {
		t.Errorf("the lease did not shrink: %d bytes after the deletes (peak %d)\n%s", final, peak, log)
	}
	// The stated bounds: at most a quarter of read-backs missed while the
	// working set grew (items evicted before a resize caught up), and the
	// move after shrinking loses at most one kept item in ten.
	if misses*4 > reads {
		t.Errorf("%d of %d read-backs missed", misses, reads)
	}
	if kept*10 < want*9 {
		t.Errorf("%d of %d kept items survived the shrink\n%s", kept, want, log)
	}
}
