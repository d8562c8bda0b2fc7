//go:build linux && !race

package memory

import (
	"bytes"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
)

// rss returns the process's resident set size in bytes.
func rss(t *testing.T) uint64 {
	t.Helper()
	b, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		t.Skip("no /proc/self/statm")
	}
	f := strings.Fields(string(b))
	pages, err := strconv.ParseUint(f[1], 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return pages * uint64(os.Getpagesize())
}

// TestCapacityIsLazy maps a capacity far larger than the test may touch,
// uses both ends of it and zeroes it all, and checks RSS stays small: pages
// are faulted in only when written, and ZERO hands them back rather than
// touching them.
func TestCapacityIsLazy(t *testing.T) {
	const capacity = 64 << 30
	before := rss(t)
	n := startNode(t, func(o *ServerOptions) { o.Capacity = capacity })
	c := n.dial(t, n.token(t, func(c *Claims) {
		c.Offset, c.Length, c.Rights = 0, capacity, RightRead|RightWrite|RightAdmin
	}))
	data := pattern(8, 1<<20)
	for _, off := range []uint64{0, capacity/2 + 12345, capacity - 1<<20} {
		if err := c.Write(bg, off, data); err != nil {
			t.Fatal(err)
		}
		got := make([]byte, len(data))
		if err := c.Read(bg, off, got); err != nil || !bytes.Equal(got, data) {
			t.Fatalf("read back at %d: %v", off, err)
		}
	}
	if grew := int64(rss(t)) - int64(before); grew > 256<<20 {
		t.Fatalf("RSS grew by %d MiB for 3 MiB of writes to a %d GiB capacity", grew>>20, capacity>>30)
	}
	start := time.Now()
	if err := c.Zero(bg, t0.Add(time.Second)); err != nil {
		t.Fatal(err)
	}
	t.Logf("ZERO of %d GiB took %v", capacity>>30, time.Since(start))
	if grew := int64(rss(t)) - int64(before); grew > 256<<20 {
		t.Fatalf("RSS grew by %d MiB after zeroing the capacity", grew>>20)
	}
	n.clk.Advance(time.Second)
	got := make([]byte, len(data))
	if err := c.Read(bg, capacity/2+12345, got); err != nil || !bytes.Equal(got, make([]byte, len(data))) {
		t.Fatalf("zeroed capacity reads back non-zero (%v)", err)
	}
}
