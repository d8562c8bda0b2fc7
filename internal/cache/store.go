package cache

import (
	"math"
	"sync"
	"sync/atomic"
	"unsafe"
)

// where an item's value lives.
type where uint8

const (
	whereLocal    where = iota // value in local memory, item in its shard's LRU
	whereInflight              // evicted, being written to the remote log; value still held
	whereRemote                // value in the remote log; the item is an index entry
	whereGone                  // removed from the map
)

// item bits.
const (
	bitFetched   uint8 = 1 << iota // read since stored (mg h)
	bitStale                       // marked stale by md I or ms I (mg X)
	bitTokenSent                   // a recache win token was handed out (mg W/Z)
	bitKeyBinary                   // key was given base64-encoded (mg k returns it so)
)

// item is one cached key: a local item with its value, or (where ==
// whereRemote) an index entry pointing at a record in the remote log. The
// map of a shard owns it; every field is guarded by that shard's lock, except
// value's bytes, which never change once stored (a reply may still be
// writing them after the lock is released).
type item struct {
	key        string
	value      []byte // local and in-flight items; nil in index entries
	prev, next *item  // LRU links (local) or segment live-list links (remote)
	seg        *segment
	cas        uint64
	pos        uint64 // local: LRU tick of last use; remote: record offset in seg
	exp        int64  // unix seconds; 0 never expires
	flags      uint32
	mtime      uint32 // unix seconds of the store (delayed flush_all)
	atime      uint32 // unix seconds of the last access (mg l)
	vlen       uint32 // remote: value length
	crc        uint32 // remote: CRC32-C of key+value in the record
	where      where
	bits       uint8
}

// itemOverhead is what one item costs besides its key and value: the struct
// and the map slot (key header, pointer, hash bits, load factor).
const itemOverhead = int64(unsafe.Sizeof(item{})) + 48

func (e *item) localSize() int64 { return itemOverhead + int64(len(e.key)) + int64(len(e.value)) }
func (e *item) indexSize() int64 { return itemOverhead + int64(len(e.key)) }

// shard is one lock domain of the local tier: a map and an LRU list.
type shard struct {
	mu         sync.Mutex
	m          map[string]*item
	head, tail *item // LRU, head most recent
	st         shardStats
	// tailTick mirrors tail.pos (MaxUint64 when empty) so the evictor can
	// find the globally least recently used item without taking every lock.
	tailTick atomic.Uint64
	// mortal counts the items in the LRU with an expiry time, so reclaim
	// passes over a shard none of whose items can expire without its lock.
	mortal atomic.Int64
	_      [32]byte
}

// setExp changes e's expiry time, keeping the shard's count of items that
// can expire. The shard lock is held.
func (sh *shard) setExp(e *item, exp int64) {
	if e.where == whereLocal && (e.exp != 0) != (exp != 0) {
		if exp != 0 {
			sh.mortal.Add(1)
		} else {
			sh.mortal.Add(-1)
		}
	}
	e.exp = exp
}

// pushFront adds e to the LRU as its most recent item.
func (sh *shard) pushFront(e *item) {
	if e.exp != 0 {
		sh.mortal.Add(1)
	}
	sh.listPush(e)
}

// unlinkLRU takes e out of the LRU.
func (sh *shard) unlinkLRU(e *item) {
	if e.exp != 0 {
		sh.mortal.Add(-1)
	}
	sh.listUnlink(e)
}

func (sh *shard) listPush(e *item) {
	e.prev = nil
	e.next = sh.head
	if sh.head != nil {
		sh.head.prev = e
	}
	sh.head = e
	if sh.tail == nil {
		sh.tail = e
		sh.tailTick.Store(e.pos)
	}
}

func (sh *shard) listUnlink(e *item) {
	if e.prev != nil {
		e.prev.next = e.next
	} else {
		sh.head = e.next
	}
	if e.next != nil {
		e.next.prev = e.prev
	} else {
		sh.tail = e.prev
		if sh.tail != nil {
			sh.tailTick.Store(sh.tail.pos)
		} else {
			sh.tailTick.Store(math.MaxUint64)
		}
	}
	e.prev, e.next = nil, nil
}

// bump makes a local item the most recently used.
func (c *Cache) bump(sh *shard, e *item) {
	e.pos = c.tick.Add(1)
	if sh.head == e {
		if sh.tail == e {
			sh.tailTick.Store(e.pos)
		}
		return
	}
	sh.listUnlink(e)
	sh.listPush(e)
}

// dead reports whether e is expired or flushed at now.
func (c *Cache) dead(e *item, now int64) (expired, flushed bool) {
	if fa := c.flushAt.Load(); fa != 0 && now >= fa && int64(e.mtime) < fa {
		return false, true
	}
	return e.exp != 0 && e.exp <= now, false
}

// lookupLocked returns the live item for key, removing it if it expired or
// was flushed. The shard lock is held.
func (c *Cache) lookupLocked(sh *shard, key []byte, now int64) *item {
	e := sh.m[string(key)]
	if e == nil {
		return nil
	}
	if expired, flushed := c.dead(e, now); expired || flushed {
		if expired {
			sh.st.getExpired++
		} else {
			sh.st.getFlushed++
		}
		c.removeLocked(sh, e)
		return nil
	}
	return e
}

// removeLocked unlinks e from the map, its LRU or segment, and the memory
// accounting. The shard lock is held.
func (c *Cache) removeLocked(sh *shard, e *item) {
	if sh.m[e.key] == e {
		delete(sh.m, e.key)
	}
	switch e.where {
	case whereLocal:
		sh.unlinkLRU(e)
		c.slabUnlink(e)
		sz := e.localSize()
		c.used.Add(-sz)
		sh.st.localItems--
		sh.st.localBytes -= sz
	case whereInflight, whereRemote:
		if e.where == whereRemote {
			e.seg.unlink(e)
		}
		sz := e.indexSize()
		c.used.Add(-sz)
		sh.st.remoteItems--
		sh.st.indexBytes -= sz
		sh.st.remoteBytes -= int64(recordSize(len(e.key), e.remoteLen()))
	}
	e.where = whereGone
}

// remoteLen is the value length of an in-flight or remote item.
func (e *item) remoteLen() int {
	if e.where == whereInflight {
		return len(e.value)
	}
	return int(e.vlen)
}

// reclaimSearch is how many of the least recently used items a store looks
// at for dead ones to reclaim (memcached's lru_pull_tail search depth).
const reclaimSearch = 5

// reclaim removes the dead (expired or flushed) items among the
// reclaimSearch least recently used local items of the whole cache, as
// memcached's allocator does at the tail of its LRU before it takes memory
// for a new item: keys rewritten with expiry times reuse the memory of the
// items that expired instead of growing the cache toward its limit, and the
// slab accounting (total_pages, total_malloced) stays where memcached's
// does. The LRU is global (every access takes a tick, and each shard's list
// is in tick order), so this is a merge of the shards' tails in tick order,
// at most reclaimSearch steps; looking at the storing key's shard alone
// found an expired item only when it happened to share that shard. Like
// memcached, which passes over an item whose lock is taken, it passes over
// a shard whose lock is busy (that counts as one look). Unlike memcached,
// whose look at an item that cannot expire still counts, it passes over a
// shard none of whose items has an expiry time (unless a delayed flush_all
// is in effect) without a look and without its lock, so a cache of items
// without expiry times pays nothing for this. Every command that may link a
// new local item calls it first, holding no lock.
func (c *Cache) reclaim(now int64) {
	fa := c.flushAt.Load()
	flushed := fa != 0 && now >= fa // then any item may be dead
	var buf [defaultShards]uint64
	next := buf[:0] // per shard: the tick of its oldest item not looked at
	for i := range c.shards {
		t := uint64(math.MaxUint64)
		if flushed || c.shards[i].mortal.Load() > 0 {
			t = c.shards[i].tailTick.Load()
		}
		next = append(next, t)
	}
	for tries := reclaimSearch; tries > 0; {
		// The shard holding the oldest item not looked at, and the tick
		// of the oldest such item in any other shard.
		best, oldest, after := -1, uint64(math.MaxUint64), uint64(math.MaxUint64)
		for i, t := range next {
			if t < oldest {
				best, oldest, after = i, t, oldest
			} else if t < after {
				after = t
			}
		}
		if best < 0 {
			return
		}
		sh := &c.shards[best]
		if !sh.mu.TryLock() {
			next[best] = math.MaxUint64
			tries--
			continue
		}
		v := sh.tail
		for v != nil && v.pos < oldest { // looked at already
			v = v.prev
		}
		for ; tries > 0 && v != nil && v.pos < after; tries-- {
			prev := v.prev
			if expired, flushed := c.dead(v, now); expired || flushed {
				c.countReclaim(v, expired)
				c.removeLocked(sh, v)
			}
			v = prev
		}
		next[best] = math.MaxUint64
		if v != nil {
			next[best] = v.pos
		}
		sh.mu.Unlock()
	}
}

// linkLocked installs the new local item e, replacing any item with its key.
// The shard lock is held; the caller ran reclaim before locking it and runs
// evictIfNeeded after unlocking.
func (c *Cache) linkLocked(sh *shard, e *item) {
	if old := sh.m[e.key]; old != nil {
		c.removeLocked(sh, old)
	}
	sh.m[e.key] = e
	e.where = whereLocal
	e.pos = c.tick.Add(1)
	sh.pushFront(e)
	c.slabLink(e)
	sz := e.localSize()
	c.used.Add(sz)
	sh.st.localItems++
	sh.st.localBytes += sz
	sh.st.totalItems++
}

// fits reports whether a local item of the given size can be held at all.
func (c *Cache) fits(size int64) bool { return size <= c.limit.Load() }

// minSpillValue is the smallest value worth spilling: below it the index
// entry left behind would cost about as much local memory as the item, so
// such victims are dropped like in plain memcached.
const minSpillValue = int(itemOverhead)

// maxEvictLoop bounds one evictIfNeeded call, so a pathological race cannot
// spin a client forever.
const maxEvictLoop = 1 << 16

// evictIfNeeded evicts least recently used items until the local tier is
// within its limit. Victims go to the remote tier when one is attached and
// healthy, and are dropped otherwise. No lock is held by the caller.
func (c *Cache) evictIfNeeded() {
	for i := 0; i < maxEvictLoop && c.used.Load() > c.limit.Load(); i++ {
		if !c.evictOne() {
			return
		}
	}
}

// evictOne evicts the least recently used local item, or, when no local item
// is left and index entries alone exceed the limit, drops the oldest remote
// records. It reports whether it made progress or should be retried.
func (c *Cache) evictOne() bool {
	best := -1
	var bt uint64 = math.MaxUint64
	for i := range c.shards {
		if t := c.shards[i].tailTick.Load(); t < bt {
			bt, best = t, i
		}
	}
	if best < 0 {
		if t := c.tier.Load(); t != nil {
			return t.dropOldest()
		}
		return false
	}
	sh := &c.shards[best]
	now := c.now()
	sh.mu.Lock()
	v := sh.tail
	if v == nil {
		sh.mu.Unlock()
		return true
	}
	if expired, flushed := c.dead(v, now); expired || flushed {
		c.countReclaim(v, expired)
		c.removeLocked(sh, v)
		sh.mu.Unlock()
		return true
	}
	t := c.tier.Load()
	if t == nil || len(v.value) < minSpillValue || !t.accepting() || recordSize(len(v.key), len(v.value)) > int(t.segSize) {
		cs := c.class(v)
		cs.evicted.Add(1)
		if v.exp != 0 {
			cs.evictedNonzero.Add(1)
		}
		if v.bits&bitFetched == 0 {
			cs.evictedUnfetched.Add(1)
		}
		c.removeLocked(sh, v)
		sh.mu.Unlock()
		c.st.evictions.Add(1)
		if t != nil {
			c.st.spillDrops.Add(1)
		}
		return true
	}
	// Spill: the victim leaves the LRU but stays in the map, in flight, its
	// value still served from memory until the remote write lands.
	sh.unlinkLRU(v)
	c.slabUnlink(v)
	ls, is := v.localSize(), v.indexSize()
	c.used.Add(is - ls)
	sh.st.localItems--
	sh.st.localBytes -= ls
	sh.st.remoteItems++
	sh.st.indexBytes += is
	sh.st.remoteBytes += int64(recordSize(len(v.key), len(v.value)))
	v.where = whereInflight
	rec := spillRec{key: v.key, value: v.value, flags: v.flags, exp: v.exp, cas: v.cas}
	sh.mu.Unlock()
	t.spill(sh, v, &rec)
	return true
}

// installSpill turns the in-flight item v into an index entry for the record
// written at seg/off, or drops it when the write failed. v may have been
// replaced, deleted or flushed meanwhile; then the record is simply dead.
// The tier lock is held.
func (c *Cache) installSpill(sh *shard, v *item, t *tier, seg *segment, off uint64, crc uint32, ok bool) {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if sh.m[v.key] != v || v.where != whereInflight {
		return
	}
	if !ok || t.state.Load() != tierHealthy {
		c.removeLocked(sh, v)
		c.st.evictions.Add(1)
		c.st.spillDrops.Add(1)
		return
	}
	v.vlen = uint32(len(v.value))
	v.value = nil
	v.where = whereRemote
	v.seg = seg
	v.pos = off
	v.crc = crc
	seg.link(v)
	c.st.spills.Add(1)
}

// dropRemote removes the index entry e if it still points at seg/off.
func (c *Cache) dropRemote(e *item, seg *segment, off uint64) bool {
	sh := c.shardForString(e.key)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if sh.m[e.key] != e || e.where != whereRemote || e.seg != seg || e.pos != off {
		return false
	}
	c.removeLocked(sh, e)
	return true
}

// dropTier removes every index entry of t, after t failed or was replaced,
// and returns how many it removed.
// t's state has already left tierHealthy, so no in-flight write to t is
// installed once this runs (installSpill re-checks the state under the shard
// lock), and none installed before survives the walk.
func (c *Cache) dropTier(t *tier) int {
	n := 0
	for i := range c.shards {
		sh := &c.shards[i]
		sh.mu.Lock()
		for _, e := range sh.m {
			if e.where == whereRemote && e.seg.t == t {
				c.removeLocked(sh, e)
				n++
			}
		}
		sh.mu.Unlock()
	}
	return n
}

// flushNow removes every item (local, in flight and remote).
func (c *Cache) flushNow() {
	for i := range c.shards {
		sh := &c.shards[i]
		sh.mu.Lock()
		for _, e := range sh.m {
			c.removeLocked(sh, e)
		}
		sh.mu.Unlock()
	}
}

// spillRec is what an evictor writes to the remote log.
type spillRec struct {
	key   string
	value []byte
	flags uint32
	exp   int64
	cas   uint64
}
