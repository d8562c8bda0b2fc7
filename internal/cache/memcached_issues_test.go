package cache

import (
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"rackpool/internal/clock"
)

// Regression tests for the behaviours memcached's own t/issue_*.t files
// check (scripts/cache-memcached-tests.sh runs those files against the
// real binary; these run the same steps in-process, on a clock the test
// holds).

// TestRepliesBeforePartialCommand: the replies to complete commands are
// written before the server waits for the rest of a partial command line or
// binary header, as memcached writes its responses when it needs more
// input to parse a command. (While it reads a data block it does not:
// testdata/protocol.txt's too-large case holds that, against memcached.)
// memcached's t/issue_70.t ends with a refused length followed by bytes
// without a newline and waits for the CLIENT_ERROR; rackpool held the
// reply until the partial line was complete, so the client waited forever.
func TestRepliesBeforePartialCommand(t *testing.T) {
	_, addr := startCache(t, Options{})
	// A binary get of key k (opcode 0x00) and memcached's reply to it
	// when k is missing: status 1, body "Not found".
	binGet := func(opaque byte) []byte {
		h := make([]byte, 25)
		h[0], h[3], h[11], h[15], h[24] = binReqMagic, 1, 1, opaque, 'k'
		return h
	}
	binMiss := func(opaque byte) string {
		h := make([]byte, 24)
		h[0], h[7], h[11], h[15] = 0x81, 1, 9, opaque
		return string(h) + "Not found"
	}
	for _, tc := range []struct {
		name       string
		send, want string
		rest, then string // completes the partial command, and its reply
	}{
		{name: "refused length, then a partial line (t/issue_70.t)",
			send: "set issue70 0 0 2147483647\r\nscoobyscoobydoo", want: "CLIENT_ERROR bad command line format\r\n",
			rest: "\r\n", then: "ERROR\r\n"},
		{name: "a hit, then a partial command line",
			send: "set c 0 0 1\r\ny\r\nget c\r\nge", want: "STORED\r\nVALUE c 0 1\r\ny\r\nEND\r\n",
			rest: "t c\r\n", then: "VALUE c 0 1\r\ny\r\nEND\r\n"},
		{name: "binary: a miss, then half a header",
			send: string(binGet(1)) + string(binGet(2)[:10]), want: binMiss(1),
			rest: string(binGet(2)[10:]), then: binMiss(2)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			nc, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			defer nc.Close()
			// A guard against hanging the test run, not a timing
			// assertion: the reply is due without any further input.
			nc.SetReadDeadline(time.Now().Add(time.Minute))
			for _, step := range []struct{ send, want string }{{tc.send, tc.want}, {tc.rest, tc.then}} {
				if _, err := io.WriteString(nc, step.send); err != nil {
					t.Fatal(err)
				}
				got := make([]byte, len(step.want))
				if n, err := io.ReadFull(nc, got); err != nil {
					t.Fatalf("after %q: read %q: %v (the server holds its replies while it waits for the rest of a command)", step.send, got[:n], err)
				}
				if string(got) != step.want {
					t.Fatalf("after %q: got %q, want %q", step.send, got, step.want)
				}
			}
		})
	}
}

// TestExpiredTailReclaimedBeforeStore: a store first removes the dead items
// among the reclaimSearch least recently used ones of the whole cache, as
// memcached's allocator does at the tail of the LRU before it takes a new
// chunk, so keys rewritten after their items expired reuse their memory and
// total_malloced stays where it was (memcached's t/issue_14.t: ten 66,560-
// byte items with a 2-second TTL, four seconds, ten more). Looking only at
// the tail of the storing key's shard found those dead items by chance
// (one key in 64 shares a shard), and the figure doubled.
func TestExpiredTailReclaimedBeforeStore(t *testing.T) {
	for _, tc := range []struct {
		name string
		live int // items without an expiry stored first, at the LRU tail
	}{
		{name: "t/issue_14.t"},
		{name: "a live item at the tail", live: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clk := clock.NewManual(time.Unix(1_700_000_000, 0))
			c, addr := startCache(t, Options{Clock: clk})
			cl := dialT(t, addr)
			value := strings.Repeat("B", 66560)
			set := func(key string, exp int) {
				t.Helper()
				if got, err := cl.do(fmt.Sprintf("set %s 0 %d %d", key, exp, len(value)), []byte(value)); err != nil || got != "STORED" {
					t.Fatalf("set %s: %q %v", key, got, err)
				}
			}
			malloced := func() string {
				t.Helper()
				v := ""
				got, err := cl.do("stats slabs", nil)
				for ; err == nil && got != "END"; got, err = cl.line() {
					if m, ok := strings.CutPrefix(got, "STAT total_malloced "); ok {
						v = m
					}
				}
				if err != nil || v == "" {
					t.Fatalf("stats slabs: no total_malloced (%v)", err)
				}
				return v
			}
			for i := range tc.live {
				set("live"+strconv.Itoa(i), 0)
			}
			for i := range 10 {
				set("key"+strconv.Itoa(i), 2)
			}
			first := malloced()
			clk.Advance(4 * time.Second)
			for i := 10; i < 20; i++ {
				set("key"+strconv.Itoa(i), 2)
			}
			if second := malloced(); second != first {
				t.Errorf("total_malloced %s after ten expiring items, %s after ten more once they expired: the dead items' memory was not reused", first, second)
			}
			if s := c.Stats(); s.Reclaimed != 10 {
				t.Errorf("reclaimed %d items, want the 10 expired ones", s.Reclaimed)
			}
		})
	}
}

// TestStatsResetZeroesEvictions: `stats reset` zeroes the per-class
// evicted counters, and the evictions after it are counted from zero, one
// per item pushed out (memcached's t/issue_22.t). The file itself is not
// run: it expects memcached's capacity for `-m 3` (36 items of 66,560
// bytes, each in an 82,792-byte slab chunk); rackpool charges items their
// own size and holds 47 (docs/cache.md).
func TestStatsResetZeroesEvictions(t *testing.T) {
	c, addr := startCache(t, Options{LocalMemory: 3 << 20})
	cl := dialT(t, addr)
	value := strings.Repeat("B", 66560)
	set := func(from, to int) {
		t.Helper()
		for i := from; i < to; i++ {
			if got, err := cl.do(fmt.Sprintf("set key%02d 0 0 %d", i, len(value)), []byte(value)); err != nil || got != "STORED" {
				t.Fatalf("set key%02d: %q %v", i, got, err)
			}
		}
	}
	stat := func(kind, name string) string {
		t.Helper()
		v := ""
		got, err := cl.do("stats "+kind, nil)
		for ; err == nil && got != "END"; got, err = cl.line() {
			if m, ok := strings.CutPrefix(got, "STAT "+name+" "); ok {
				v = m
			}
		}
		if err != nil || v == "" {
			t.Fatalf("stats %s: no %s (%v)", kind, name, err)
		}
		return v
	}
	cls := slabClass(memcachedSize(len("key00"), 0, len(value)))
	evicted := fmt.Sprintf("items:%d:evicted", cls)
	fit := int(c.limit.Load() / itemSize(len("key00"), len(value)))

	set(0, 80)
	if got, want := stat("items", evicted), strconv.Itoa(80-fit); got != want {
		t.Fatalf("%s after 80 items where %d fit: %s, want %s", evicted, fit, got, want)
	}
	if got, err := cl.do("stats reset", nil); err != nil || got != "RESET" {
		t.Fatalf("stats reset: %q %v", got, err)
	}
	if got := stat("items", evicted); got != "0" {
		t.Errorf("%s after stats reset: %s, want 0", evicted, got)
	}
	if got := stat("", "evictions"); got != "0" {
		t.Errorf("evictions after stats reset: %s, want 0", got)
	}
	set(80, 120)
	if got := stat("items", evicted); got != "40" {
		t.Errorf("%s after 40 more items into a full cache: %s, want 40", evicted, got)
	}
}

// TestStatsResetDifferential runs the same commands, a `stats reset` and
// more commands against real memcached and rackpool cache and compares
// `stats` (except the fields differingStats names, and bytes_read),
// `stats items` (except
// the LRU-segment fields) and `stats slabs`: counters count from the
// reset, gauges (items, bytes, pages) do not move.
func TestStatsResetDifferential(t *testing.T) {
	bin, err := exec.LookPath("memcached")
	if err != nil {
		if os.Getenv("RACKPOOL_E2E") == "1" {
			t.Fatal("memcached is not on PATH (scripts/setup.sh installs it)")
		}
		t.Skip("memcached is not on PATH and RACKPOOL_E2E is not 1")
	}
	var before, after strings.Builder
	for i, size := range []int{10, 500, 3000, 50000} {
		v := strings.Repeat("v", size)
		fmt.Fprintf(&before, "set k%d 0 0 %d\r\n%s\r\nget k%d missing\r\ntouch k%d 100\r\n", i, len(v), v, i, i)
		// No get of an item deleted in the same batch: memcached frees
		// its chunk only once the reply holding it is written, so
		// used_chunks would depend on timing.
		fmt.Fprintf(&after, "set j%d 0 0 %d\r\n%s\r\nget j%d missing\r\ndelete k%d\r\n", i, len(v), v, i, i)
	}
	before.WriteString("set n 0 0 1\r\n1\r\nincr n 2\r\ncas n 0 0 1 1\r\nx\r\n")
	after.WriteString("incr n 1\r\ndecr n 1\r\ndecr missing 1\r\n")
	steps := []*protoStep{{send: []byte(before.String())}, {send: []byte("stats reset\r\n")}, {send: []byte(after.String())},
		{send: []byte("stats items\r\n")}, {send: []byte("stats slabs\r\n")}, {send: []byte("stats\r\n"), nosync: true}}
	mc, err := runSteps(startMemcached(t, bin), steps)
	if err != nil {
		t.Fatal(err)
	}
	_, addr := startCache(t, Options{})
	rp, err := runSteps(addr, steps)
	if err != nil {
		t.Fatal(err)
	}
	if string(mc[1]) != "RESET\r\n" || string(rp[1]) != "RESET\r\n" {
		t.Fatalf("stats reset: memcached %q, rackpool %q", mc[1], rp[1])
	}
	items := func(b []byte) string {
		var kept []string
		for _, line := range strings.SplitAfter(string(b), "\r\n") {
			if !lruSegmentStats.MatchString(line) {
				kept = append(kept, line)
			}
		}
		return strings.Join(kept, "")
	}
	if g, w := items(rp[3]), items(mc[3]); g != w {
		t.Errorf("stats items after a reset differ\nrackpool:\n%s\nmemcached:\n%s", g, w)
	}
	if g, w := string(rp[4]), string(mc[4]); g != w {
		t.Errorf("stats slabs after a reset differ\nrackpool:\n%s\nmemcached:\n%s", g, w)
	}
	want, got := statLines(mc[5]), statLines(rp[5])
	if len(got) < len(want) {
		t.Fatalf("stats: rackpool has %d fields, memcached %d", len(got), len(want))
	}
	// bytes_read counts whole reads, and whether the marker sent behind
	// "stats reset" came in the same read (and was zeroed with it) depends
	// on timing, on both servers.
	differ := append([]string{"bytes_read"}, differingStats...)
	for i, w := range want {
		if g := got[i]; g[0] != w[0] {
			t.Errorf("stats field %d: rackpool %s, memcached %s", i, g[0], w[0])
		} else if g[1] != w[1] && !slices.Contains(differ, w[0]) {
			t.Errorf("stats %s after a reset: rackpool %q, memcached %q", w[0], g[1], w[1])
		}
	}
}

// TestBinaryStatGroups: the binary protocol's stat command answers the
// groups memcached's does (memcached's t/binary.t reads `settings` and
// turns `detail` on and dumps it), one response per statistic and an empty
// one at the end.
func TestBinaryStatGroups(t *testing.T) {
	_, addr := startCache(t, Options{})
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	nc.SetDeadline(time.Now().Add(time.Minute)) // a guard against hanging the run
	stat := func(group string) (map[string]string, uint16) {
		t.Helper()
		req := make([]byte, binHdrLen+len(group))
		req[0], req[1] = binReqMagic, opStat
		binary.BigEndian.PutUint16(req[2:], uint16(len(group)))
		binary.BigEndian.PutUint32(req[8:], uint32(len(group)))
		copy(req[binHdrLen:], group)
		if _, err := nc.Write(req); err != nil {
			t.Fatal(err)
		}
		out := map[string]string{}
		for {
			var h [binHdrLen]byte
			if _, err := io.ReadFull(nc, h[:]); err != nil {
				t.Fatalf("stat %q: %v", group, err)
			}
			body := make([]byte, binary.BigEndian.Uint32(h[8:]))
			if _, err := io.ReadFull(nc, body); err != nil {
				t.Fatalf("stat %q: %v", group, err)
			}
			status, klen := binary.BigEndian.Uint16(h[6:]), binary.BigEndian.Uint16(h[2:])
			if status != 0 || klen == 0 {
				return out, status
			}
			out[string(body[:klen])] = string(body[klen:])
		}
	}
	if s, st := stat("settings"); st != 0 || s["maxconns"] != "1024" || s["detail_enabled"] != "no" {
		t.Errorf("stat settings: status %d, maxconns %q, detail_enabled %q", st, s["maxconns"], s["detail_enabled"])
	}
	if _, st := stat("detail on"); st != 0 {
		t.Fatalf("stat detail on: status %d", st)
	}
	cl := dialT(t, addr)
	if got, err := cl.do("set foo:1 0 0 1", []byte("x")); err != nil || got != "STORED" {
		t.Fatalf("set: %q %v", got, err)
	}
	if s, st := stat("detail dump"); st != 0 || s["detailed"] != "PREFIX foo get 0 hit 0 set 1 del 0\r\nEND\r\n" {
		t.Errorf("stat detail dump: status %d, %q", st, s)
	}
	if s, st := stat("settings"); st != 0 || s["detail_enabled"] != "yes" {
		t.Errorf("stat settings after detail on: detail_enabled %q", s["detail_enabled"])
	}
	if s, st := stat("slabs"); st != 0 || s["total_malloced"] != "1048576" || s["1:used_chunks"] != "1" {
		t.Errorf("stat slabs: status %d, %v", st, s)
	}
	if _, st := stat("no such group"); st != stNotFound {
		t.Errorf("stat of an unknown group: status %d, want %d", st, stNotFound)
	}
}
