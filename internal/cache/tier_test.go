package cache

import (
	"bytes"
	"fmt"
	"io"
	"log/slog"
	"testing"
	"time"

	"rackpool/internal/clock"
)

func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func TestLRUEvictionOrder(t *testing.T) {
	val := make([]byte, 100)
	size := itemSize(1, len(val))
	c := mustNew(t, Options{LocalMemory: 3 * size, shards: 1, Logger: quietLogger()})
	for _, k := range []string{"a", "b", "c"} {
		cset(c, k, val)
	}
	if _, ok := cget(c, "a"); !ok { // a is now the most recent
		t.Fatal("a missing")
	}
	cset(c, "d", val) // evicts b, the least recently used
	// Checked in a fixed order, since every hit moves the key to the front.
	for _, k := range []struct {
		key  string
		want bool
	}{{"b", false}, {"a", true}, {"c", true}, {"d", true}} {
		if _, ok := cget(c, k.key); ok != k.want {
			t.Errorf("%s present = %v, want %v", k.key, ok, k.want)
		}
	}
	// Order is now a (oldest), c, d; fetching c leaves a the oldest.
	cget(c, "c")
	cset(c, "e", val)
	if _, ok := cget(c, "a"); ok {
		t.Error("a survived; want it evicted as least recently used")
	}
	if s := c.Stats(); s.Evictions != 2 || s.LocalItems != 3 || s.UsedBytes != 3*size {
		t.Errorf("stats = evictions %d items %d used %d", s.Evictions, s.LocalItems, s.UsedBytes)
	}
}

func TestLRUAcrossShards(t *testing.T) {
	// The global tick makes eviction order exact across shards too.
	val := make([]byte, 100)
	size := itemSize(2, len(val))
	c := mustNew(t, Options{LocalMemory: 10 * size, Logger: quietLogger()})
	for i := range 10 {
		cset(c, fmt.Sprintf("k%d", i), val)
	}
	for i := 0; i < 10; i += 2 {
		cget(c, fmt.Sprintf("k%d", i))
	}
	for i := range 5 {
		cset(c, fmt.Sprintf("n%d", i), val)
	}
	for i := range 10 {
		_, ok := cget(c, fmt.Sprintf("k%d", i))
		if ok != (i%2 == 0) {
			t.Errorf("k%d present = %v", i, ok)
		}
	}
}

// tierOpts is a small configuration: 256 KiB local (1 KiB values: about
// 200 local items, or 1500 index entries), 16 KiB items at most, so
// segments are about 16 KiB for small regions.
func tierOpts(r Remote, size uint64) Options {
	return Options{LocalMemory: 256 << 10, Remote: r, RemoteSize: size, MaxItemSize: 16 << 10, Logger: quietLogger()}
}

func TestRemoteSpillAndHit(t *testing.T) {
	r := newMemRemote(1 << 20)
	c := mustNew(t, tierOpts(r, 1<<20))
	const n = 700
	for i := range n {
		cset(c, fmt.Sprintf("key%d", i), value("k", i, 1000))
	}
	s := c.Stats()
	if s.Spills == 0 || s.RemoteItems == 0 || s.LocalItems == 0 {
		t.Fatalf("nothing spilled: %+v", s)
	}
	if s.UsedBytes > 256<<10 {
		t.Errorf("used %d > limit", s.UsedBytes)
	}
	for i := range n {
		v, ok := cget(c, fmt.Sprintf("key%d", i))
		if !ok {
			t.Fatalf("key%d missing (remote holds everything)", i)
		}
		if !bytes.Equal(v, value("k", i, 1000)) {
			t.Fatalf("key%d: wrong value", i)
		}
	}
	s = c.Stats()
	if s.RemoteHits < n/2 {
		t.Errorf("remote hits = %d", s.RemoteHits)
	}
	// Each remote hit read one whole record: header, key (4 to 6 bytes),
	// 1000 bytes of value.
	if lo, hi := int64(recordSize(4, 1000)), int64(recordSize(6, 1000)); s.RemoteReadBytes < s.RemoteHits*lo || s.RemoteReadBytes > s.RemoteHits*hi {
		t.Errorf("remote read bytes %d for %d hits of %d to %d bytes", s.RemoteReadBytes, s.RemoteHits, lo, hi)
	}
	if s.LocalItems+s.RemoteItems != n {
		t.Errorf("local %d + remote %d != %d", s.LocalItems, s.RemoteItems, n)
	}
}

func TestRemoteMutationsUpdateIndex(t *testing.T) {
	r := newMemRemote(1 << 20)
	c := mustNew(t, tierOpts(r, 1<<20))
	for i := range 500 {
		cset(c, fmt.Sprintf("key%d", i), value("k", i, 1000))
	}
	isRemote := func(k string) bool {
		sh := c.shardFor([]byte(k))
		sh.mu.Lock()
		defer sh.mu.Unlock()
		e := sh.m[k]
		return e != nil && e.where == whereRemote
	}
	for _, k := range []string{"key0", "key1", "key2", "key3", "key4"} {
		if !isRemote(k) {
			t.Fatalf("%s is not remote", k)
		}
	}
	now := c.now()
	// delete: gone from the index.
	if !c.delete([]byte("key0"), now) {
		t.Error("delete key0 missed")
	}
	if _, ok := cget(c, "key0"); ok {
		t.Error("key0 served after delete")
	}
	// set: the new local value wins, the remote record is dead.
	cset(c, "key1", []byte("fresh"))
	if v, _ := cget(c, "key1"); string(v) != "fresh" {
		t.Errorf("key1 = %q", v)
	}
	// touch: expiry changes in the index.
	if !c.touch([]byte("key2"), now, now-1) {
		t.Error("touch key2 missed")
	}
	if _, ok := cget(c, "key2"); ok {
		t.Error("key2 served after touch to the past")
	}
	// append on a remote item reads it back first.
	r2 := storeReq{key: []byte("key3"), value: []byte("+tail"), mode: modeAppend}
	if res, _ := c.store(&r2, now); res != resStored {
		t.Fatalf("append = %v", res)
	}
	want := append(value("k", 3, 1000), "+tail"...)
	if v, _ := cget(c, "key3"); !bytes.Equal(v, want) {
		t.Error("key3 append: wrong value")
	}
	// incr on a remote numeric item.
	cset(c, "num", append([]byte("41"), bytes.Repeat([]byte(" "), 300)...))
	for i := range 400 {
		cset(c, fmt.Sprintf("fill%d", i), value("f", i, 1000))
	}
	if !isRemote("num") {
		t.Fatal("num not remote")
	}
	res, out := c.arith(&deltaReq{key: []byte("num"), incr: true, delta: 1}, now, nil)
	if res != deltaOK || out.value != 42 {
		t.Errorf("incr = %v %d", res, out.value)
	}
	// flush_all empties both tiers.
	c.flush(0)
	if s := c.Stats(); s.LocalItems != 0 || s.RemoteItems != 0 || s.UsedBytes != 0 || s.IndexBytes != 0 {
		t.Errorf("after flush: %+v", s)
	}
}

func TestRemoteCompaction(t *testing.T) {
	r := newMemRemote(256 << 10)
	opts := tierOpts(r, 256<<10)
	opts.LocalMemory = 64 << 10
	c := mustNew(t, opts)
	// Cold keys are written once, interleaved with hot keys that are then
	// rewritten over and over, so when the head wraps the oldest segments
	// are mostly dead but hold a few live (cold) records.
	for i := range 100 {
		cset(c, fmt.Sprintf("hot%d", i), value("h", i, 1000))
		if i%4 == 0 {
			cset(c, fmt.Sprintf("cold%d", i/4), value("c", i/4, 1000))
		}
	}
	// Every few rounds a cold key is rewritten, so no segment stays
	// completely dead for long and the cleaner, which prefers the segment
	// with the fewest live bytes, has to compact mostly dead ones.
	const rounds = 30
	for round := 1; round < rounds; round++ {
		for i := range 100 {
			cset(c, fmt.Sprintf("hot%d", i), value("h", round*1000+i, 1000))
			if i%10 == 0 {
				k := (round*10 + i/10) % 25
				cset(c, fmt.Sprintf("cold%d", k), value("c", k, 1000))
			}
		}
	}
	s := c.Stats()
	if s.Compactions == 0 || s.CompactedItems == 0 {
		t.Fatalf("no compaction: %+v", s)
	}
	for i := range 100 {
		v, ok := cget(c, fmt.Sprintf("hot%d", i))
		if ok && !bytes.Equal(v, value("h", (rounds-1)*1000+i, 1000)) {
			t.Fatalf("hot%d: stale or wrong value", i)
		}
	}
	coldHits := 0
	for i := range 25 {
		v, ok := cget(c, fmt.Sprintf("cold%d", i))
		if ok {
			coldHits++
			if !bytes.Equal(v, value("c", i, 1000)) {
				t.Fatalf("cold%d: wrong value", i)
			}
		}
	}
	if coldHits == 0 {
		t.Error("compaction kept no cold key")
	}
	t.Logf("compactions %d, copied %d, remote evictions %d, cold hits %d/25", s.Compactions, s.CompactedItems, s.RemoteEvictions, coldHits)
}

func TestRemoteTrueEviction(t *testing.T) {
	// Distinct keys only: every segment is fully live when the head wraps,
	// so the oldest records are dropped.
	r := newMemRemote(256 << 10)
	c := mustNew(t, tierOpts(r, 256<<10))
	const n = 1200
	for i := range n {
		cset(c, fmt.Sprintf("key%d", i), value("k", i, 1000))
	}
	s := c.Stats()
	if s.RemoteEvictions == 0 {
		t.Fatalf("no remote evictions: %+v", s)
	}
	hits := 0
	for i := range n {
		v, ok := cget(c, fmt.Sprintf("key%d", i))
		if !ok {
			continue
		}
		hits++
		if !bytes.Equal(v, value("k", i, 1000)) {
			t.Fatalf("key%d: wrong value", i)
		}
	}
	if _, ok := cget(c, "key0"); ok {
		t.Error("oldest key survived")
	}
	if _, ok := cget(c, fmt.Sprintf("key%d", n-1)); !ok {
		t.Error("newest key missing")
	}
	t.Logf("hits %d/%d, remote evictions %d", hits, n, s.RemoteEvictions)
}

func TestRemoteCorruptionIsAMiss(t *testing.T) {
	r := newMemRemote(1 << 20)
	c := mustNew(t, tierOpts(r, 1<<20))
	marker := append([]byte("VICTIM-MARKER-0123456789"), bytes.Repeat([]byte("Z"), 976)...)
	cset(c, "victim", marker)
	for i := range 500 {
		cset(c, fmt.Sprintf("fill%d", i), value("f", i, 1000))
	}
	// Flip one byte of the victim's value in the remote region.
	if n := r.replace(marker[:24], []byte("VICTIM-MARKER-0123456788")); n != 1 {
		t.Fatalf("marker found %d times", n)
	}
	if v, ok := cget(c, "victim"); ok {
		t.Fatalf("corrupt record served: %q...", v[:20])
	}
	if s := c.Stats(); s.RemoteCorrupt != 1 {
		t.Errorf("corrupt = %d", s.RemoteCorrupt)
	}
	// Other remote items are unaffected.
	if v, ok := cget(c, "fill0"); !ok || !bytes.Equal(v, value("f", 0, 1000)) {
		t.Error("fill0 lost")
	}
}

func TestRemoteFailureAndRecovery(t *testing.T) {
	r := newMemRemote(1 << 20)
	clk := clock.NewManual(time.Unix(1_700_000_000, 0))
	opts := tierOpts(r, 1<<20)
	opts.Clock = clk
	c := mustNew(t, opts)
	for i := range 500 {
		cset(c, fmt.Sprintf("key%d", i), value("k", i, 1000))
	}
	r.down.Store(true)
	// The first remote read fails: the tier is failed, every remote item is
	// a miss, local items are still served.
	if _, ok := cget(c, "key0"); ok {
		t.Fatal("remote item served while the remote is down")
	}
	s := c.Stats()
	if s.RemoteHealthy || s.RemoteErrors == 0 || s.RemoteItems != 0 {
		t.Fatalf("after failure: %+v", s)
	}
	if v, ok := cget(c, "key499"); !ok || !bytes.Equal(v, value("k", 499, 1000)) {
		t.Fatal("local item lost")
	}
	// Evictions drop while failed.
	for i := 500; i < 800; i++ {
		cset(c, fmt.Sprintf("key%d", i), value("k", i, 1000))
	}
	if s := c.Stats(); s.RemoteItems != 0 || s.SpillDrops == 0 {
		t.Fatalf("spilled while failed: %+v", s)
	}
	// Back up, and the retry interval passes: the next eviction spills.
	r.down.Store(false)
	clk.Advance(2 * remoteRetry)
	for i := 800; i < 1100; i++ {
		cset(c, fmt.Sprintf("key%d", i), value("k", i, 1000))
	}
	s = c.Stats()
	if !s.RemoteHealthy || s.RemoteItems == 0 {
		t.Fatalf("not recovered: %+v", s)
	}
	for i := 800; i < 1100; i++ {
		if v, ok := cget(c, fmt.Sprintf("key%d", i)); !ok || !bytes.Equal(v, value("k", i, 1000)) {
			t.Fatalf("key%d after recovery: ok=%v", i, ok)
		}
	}
}

func TestPromoteOnHit(t *testing.T) {
	r := newMemRemote(1 << 20)
	opts := tierOpts(r, 1<<20)
	opts.PromoteOnHit = true
	c := mustNew(t, opts)
	for i := range 500 {
		cset(c, fmt.Sprintf("key%d", i), value("k", i, 1000))
	}
	if v, ok := cget(c, "key0"); !ok || !bytes.Equal(v, value("k", 0, 1000)) {
		t.Fatal("key0 miss")
	}
	sh := c.shardFor([]byte("key0"))
	sh.mu.Lock()
	w := sh.m["key0"].where
	sh.mu.Unlock()
	if w != whereLocal {
		t.Errorf("key0 not promoted (where=%d)", w)
	}
	if s := c.Stats(); s.Promotions != 1 || s.UsedBytes > 256<<10 {
		t.Errorf("stats: %+v", s)
	}
	// Still one copy: a second read is a local hit.
	hits := c.Stats().RemoteHits
	cget(c, "key0")
	if c.Stats().RemoteHits != hits {
		t.Error("second read went remote")
	}
}

func TestSetRemoteDropsOldIndex(t *testing.T) {
	r := newMemRemote(1 << 20)
	c := mustNew(t, tierOpts(r, 1<<20))
	for i := range 500 {
		cset(c, fmt.Sprintf("key%d", i), value("k", i, 1000))
	}
	if c.Stats().RemoteItems == 0 {
		t.Fatal("nothing remote")
	}
	r2 := newMemRemote(1 << 20)
	c.SetRemote(r2, 1<<20)
	if s := c.Stats(); s.RemoteItems != 0 || s.IndexBytes != 0 {
		t.Fatalf("old index kept: %+v", s)
	}
	if _, ok := cget(c, "key0"); ok {
		t.Error("old remote item served")
	}
	for i := 500; i < 1000; i++ {
		cset(c, fmt.Sprintf("key%d", i), value("k", i, 1000))
	}
	if v, ok := cget(c, "key500"); !ok || !bytes.Equal(v, value("k", 500, 1000)) {
		t.Error("new remote not used")
	}
	if r2.writes.Load() == 0 {
		t.Error("no write to the new remote")
	}
	c.SetRemote(nil, 0)
	if s := c.Stats(); s.RemoteAttached || s.RemoteItems != 0 {
		t.Errorf("detach: %+v", s)
	}
}

func TestIndexEntriesCountAgainstLocalMemory(t *testing.T) {
	// Small values, big remote: index entries fill local memory, and the
	// oldest remote records are dropped to stay within it.
	r := newMemRemote(4 << 20)
	opts := tierOpts(r, 4<<20)
	opts.LocalMemory = 32 << 10
	c := mustNew(t, opts)
	for i := range 2000 {
		cset(c, fmt.Sprintf("key%d", i), value("k", i, 300))
	}
	if _, ok := cget(c, "key1999"); !ok {
		t.Error("newest key missing")
	}
	if v, ok := cget(c, "key1900"); ok && !bytes.Equal(v, value("k", 1900, 300)) {
		t.Error("key1900: wrong value")
	}
	s := c.Stats()
	if s.UsedBytes > opts.LocalMemory {
		t.Errorf("used %d > %d", s.UsedBytes, opts.LocalMemory)
	}
	if s.IndexBytes == 0 || s.RemoteEvictions == 0 || s.RemoteItems == 0 {
		t.Errorf("stats: %+v", s)
	}
	// Tiny values are dropped, not spilled: their index entry would cost
	// as much as the item.
	before := c.Stats().Spills
	for i := range 500 {
		cset(c, fmt.Sprintf("tiny%d", i), []byte("v"))
	}
	if c.Stats().Spills != before {
		t.Error("tiny values spilled")
	}
}

// TestMoveRemoteKeepsItems: a remote tier moved to a larger region keeps
// every item; moved to one too small for them, it keeps what fits and the
// rest are misses, never wrong values; reads and writes go on meanwhile.
func TestMoveRemoteKeepsItems(t *testing.T) {
	r := newMemRemote(1 << 20)
	c := mustNew(t, tierOpts(r, 1<<20))
	for i := range 600 {
		cset(c, fmt.Sprintf("key%d", i), value("k", i, 1000))
	}
	remote := c.Stats().RemoteItems
	if remote < 400 {
		t.Fatalf("only %d items remote", remote)
	}
	stop := make(chan struct{})
	done := make(chan int)
	go func() { // readers during the move see right values or misses
		bad := 0
		for {
			select {
			case <-stop:
				done <- bad
				return
			default:
			}
			for i := 0; i < 600; i += 7 {
				if v, ok := cget(c, fmt.Sprintf("key%d", i)); ok && !bytes.Equal(v, value("k", i, 1000)) {
					bad++
				}
			}
		}
	}()
	big := newMemRemote(2 << 20)
	moved, lost, err := c.MoveRemote(big, 2<<20)
	close(stop)
	if bad := <-done; bad != 0 {
		t.Fatalf("%d wrong values read during the move", bad)
	}
	if err != nil || lost != 0 || int64(moved) < remote-5 {
		t.Fatalf("moved %d of %d, lost %d, err %v", moved, remote, lost, err)
	}
	for i := range 600 {
		if v, ok := cget(c, fmt.Sprintf("key%d", i)); !ok || !bytes.Equal(v, value("k", i, 1000)) {
			t.Fatalf("key%d after the move: ok %v", i, ok)
		}
	}
	// The old region is no longer read: wipe it and read everything again.
	clear(r.b)
	for i := range 600 {
		if _, ok := cget(c, fmt.Sprintf("key%d", i)); !ok {
			t.Fatalf("key%d lost after the old region was wiped", i)
		}
	}
	// Down to a region too small: what does not fit is a miss.
	small := newMemRemote(128 << 10)
	moved, lost, err = c.MoveRemote(small, 128<<10)
	if err != nil || moved == 0 {
		t.Fatalf("to a small region: moved %d lost %d err %v", moved, lost, err)
	}
	hits := 0
	for i := range 600 {
		if v, ok := cget(c, fmt.Sprintf("key%d", i)); ok {
			hits++
			if !bytes.Equal(v, value("k", i, 1000)) {
				t.Fatalf("key%d: wrong value after shrinking", i)
			}
		}
	}
	if s := c.Stats(); s.RemoteMoves != 2 || s.RemoteEvictedBytes == 0 || hits == 600 {
		t.Errorf("stats %+v, %d hits: want two moves and evictions when shrinking", s, hits)
	}
}
