package cache

import "sync/atomic"

// Slab classes: how memcached 1.6 with its default settings (-n 48, -f
// 1.25, 1 MiB pages, 512 KiB largest chunk) would file each item, so that
// `stats items` and `stats slabs` report per-class figures an operator of
// memcached reads the same way. rackpool does not allocate from slabs (its
// local tier charges each item its own bytes); the classes are an
// accounting of the memcached equivalent:
//
//   - an item's class is the first whose chunk holds memcached's item size
//     (header, key, flags suffix, CAS, value with "\r\n"; memcachedSize);
//     items over the largest chunk are filed in the largest class, one
//     chunk each (memcached chains them across several);
//   - used_chunks counts the local items of a class; total_pages is the
//     high-water mark of the pages those chunks needed (memcached never
//     gives a page back), and total_malloced the bytes of all pages — so,
//     as in memcached, rewriting expiring keys whose memory is reclaimed
//     keeps it flat;
//   - items spilled to the remote tier are not in a local slab (memcached's
//     extstore keeps a header in memory: rackpool keeps an index entry,
//     reported in its own remote_* stats).
const (
	slabPageSize    = 1 << 20
	slabChunkMax    = slabPageSize / 2
	slabItemHeader  = 48
	slabChunkMin    = 48
	slabGrowth      = 1.25
	slabChunkAlign  = 8
	maxSlabClasses  = 64
	itemCASBytes    = 8
	itemFlagsSuffix = 4
)

// slabSizes are the chunk sizes of classes 1..n (index 0 unused), as
// memcached's slabs_init computes them.
var slabSizes = func() []int {
	sizes := []int{0}
	size := float64(slabItemHeader + slabChunkMin)
	for len(sizes) < maxSlabClasses-1 && size < slabChunkMax/slabGrowth {
		s := int(size)
		if s%slabChunkAlign != 0 {
			s += slabChunkAlign - s%slabChunkAlign
		}
		sizes = append(sizes, s)
		size = float64(s) * slabGrowth
	}
	return append(sizes, slabChunkMax)
}()

// memcachedSize is the size memcached gives an item with this key, flags
// and value length (item_make_header plus CAS), the figure its slab class
// and mem_requested are taken from.
func memcachedSize(klen int, flags uint32, vlen int) int {
	n := slabItemHeader + klen + 1 + vlen + 2 + itemCASBytes
	if flags != 0 {
		n += itemFlagsSuffix
	}
	return n
}

// slabClass returns the class memcached would file an item of size n in.
func slabClass(n int) int {
	lo, hi := 1, len(slabSizes)-1
	for lo < hi {
		mid := (lo + hi) / 2
		if slabSizes[mid] >= n {
			hi = mid
		} else {
			lo = mid + 1
		}
	}
	return lo
}

// classOf returns e's slab class.
func classOf(e *item) int {
	vlen := len(e.value)
	if e.where == whereRemote {
		vlen = int(e.vlen)
	}
	return slabClass(memcachedSize(len(e.key), e.flags, vlen))
}

// perSlab is how many chunks of class cls one page holds.
func perSlab(cls int) int64 { return int64(slabPageSize / slabSizes[cls]) }

// classStats are one class's figures. Gauges move under the shard lock of
// the item they count, counters with it; both are atomics so stats can
// read them without taking every lock.
type classStats struct {
	number    atomic.Int64 // local items (used chunks)
	requested atomic.Int64 // their memcached sizes (mem_requested)
	pages     atomic.Int64 // high-water mark of pages needed (total_pages)

	evicted, evictedNonzero, evictedUnfetched       atomic.Int64
	reclaimed, expiredUnfetched                     atomic.Int64
	getHits, cmdSet, deleteHits, incrHits, decrHits atomic.Int64
	casHits, casBadval, touchHits                   atomic.Int64
}

// classCounters are a class's counters at one moment.
type classCounters struct {
	evicted, evictedNonzero, evictedUnfetched                int64
	reclaimed, expiredUnfetched                              int64
	getHits, cmdSet, deleteHits, incrHits, decrHits, casHits int64
	casBadval, touchHits                                     int64
}

func (cs *classStats) counters() classCounters {
	return classCounters{
		evicted: cs.evicted.Load(), evictedNonzero: cs.evictedNonzero.Load(), evictedUnfetched: cs.evictedUnfetched.Load(),
		reclaimed: cs.reclaimed.Load(), expiredUnfetched: cs.expiredUnfetched.Load(),
		getHits: cs.getHits.Load(), cmdSet: cs.cmdSet.Load(), deleteHits: cs.deleteHits.Load(), incrHits: cs.incrHits.Load(),
		decrHits: cs.decrHits.Load(), casHits: cs.casHits.Load(), casBadval: cs.casBadval.Load(), touchHits: cs.touchHits.Load(),
	}
}

// classReport returns class cls's counters since the last stats reset.
func (c *Cache) classReport(cls int) classCounters {
	cc := c.classes[cls].counters()
	if b := c.statsBase.Load(); b != nil {
		o := &b.cls[cls]
		cc = classCounters{
			evicted: cc.evicted - o.evicted, evictedNonzero: cc.evictedNonzero - o.evictedNonzero,
			evictedUnfetched: cc.evictedUnfetched - o.evictedUnfetched, reclaimed: cc.reclaimed - o.reclaimed,
			expiredUnfetched: cc.expiredUnfetched - o.expiredUnfetched, getHits: cc.getHits - o.getHits,
			cmdSet: cc.cmdSet - o.cmdSet, deleteHits: cc.deleteHits - o.deleteHits, incrHits: cc.incrHits - o.incrHits,
			decrHits: cc.decrHits - o.decrHits, casHits: cc.casHits - o.casHits, casBadval: cc.casBadval - o.casBadval,
			touchHits: cc.touchHits - o.touchHits,
		}
	}
	return cc
}

// slabLink counts local item e into its class.
func (c *Cache) slabLink(e *item) {
	cls := classOf(e)
	cs := &c.classes[cls]
	n := cs.number.Add(1)
	cs.requested.Add(int64(memcachedSize(len(e.key), e.flags, len(e.value))))
	c.sizesLink(e)
	need := (n + perSlab(cls) - 1) / perSlab(cls)
	for cur := cs.pages.Load(); need > cur && !cs.pages.CompareAndSwap(cur, need); cur = cs.pages.Load() {
	}
}

// slabUnlink counts local item e out of its class.
func (c *Cache) slabUnlink(e *item) {
	cs := &c.classes[classOf(e)]
	cs.number.Add(-1)
	cs.requested.Add(-int64(memcachedSize(len(e.key), e.flags, len(e.value))))
	c.sizesUnlink(e)
}

// class returns the counters of e's class.
func (c *Cache) class(e *item) *classStats { return &c.classes[classOf(e)] }

// countReclaim counts dead item e reclaimed for memory.
func (c *Cache) countReclaim(e *item, expired bool) {
	c.st.reclaimed.Add(1)
	cs := c.class(e)
	cs.reclaimed.Add(1)
	if expired && e.bits&bitFetched == 0 {
		cs.expiredUnfetched.Add(1)
	}
}

// sizeHistogram is memcached's `stats sizes`: items by their size rounded
// up to 32 bytes, counted from when `stats sizes_enable` turned it on
// (items stored before are not counted, in or out).
type sizeHistogram struct {
	casMin  uint64
	buckets []atomic.Int64
}

func sizeBucket(n int) int { return (n + 31) / 32 }

// enableSizes starts a fresh histogram.
func (c *Cache) enableSizes() {
	c.sizes.Store(&sizeHistogram{casMin: c.cas.Load() + 1, buckets: make([]atomic.Int64, sizeBucket(memcachedSize(maxKeyLen, 1, c.maxItem))+1)})
}

// sizesLink and sizesUnlink keep the histogram, when it is on.
func (c *Cache) sizesLink(e *item) {
	if h := c.sizes.Load(); h != nil {
		if b := sizeBucket(memcachedSize(len(e.key), e.flags, len(e.value))); b < len(h.buckets) {
			h.buckets[b].Add(1)
		}
	}
}

func (c *Cache) sizesUnlink(e *item) {
	if h := c.sizes.Load(); h != nil && e.cas >= h.casMin {
		if b := sizeBucket(memcachedSize(len(e.key), e.flags, len(e.value))); b < len(h.buckets) {
			h.buckets[b].Add(-1)
		}
	}
}
