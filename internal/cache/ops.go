package cache

import (
	"strconv"
	"unsafe"
)

// Protocol-independent operations on the tiers. Each takes the request's
// "now" (unix seconds) so one command sees one time.

// hit is a found item as a reply needs it: metadata copied under the shard
// lock and the value, which is immutable (local) or lives in a pooled
// buffer (remote) that the reply releases once written.
type hit struct {
	value []byte
	pb    *pbuf
	flags uint32
	cas   uint64
	exp   int64
	atime uint32 // last access before this one
	bits  uint8  // before this access
}

// maxAttempts bounds the re-lookups of a key whose remote record keeps
// moving under a reader.
const maxAttempts = 8

// fetched is a remote value read for a read-modify-write of entry e.
type fetched struct {
	e  *item
	v  []byte
	pb *pbuf
}

func (f *fetched) release() {
	putBuf(f.pb)
	*f = fetched{}
}

// fetch reads the value of the remote entry ref came from into f.
func (f *fetched) fetch(c *Cache, ref *remoteRef) {
	f.release()
	pb, v, _ := c.fetchRemote(ref)
	if pb != nil {
		*f = fetched{e: ref.e, v: v, pb: pb}
	}
}

// valueOf returns e's value: local, in flight, or fetched into f.
func valueOf(e *item, f *fetched) ([]byte, bool) {
	if e.where != whereRemote {
		return e.value, true
	}
	if f.e == e {
		return f.v, true
	}
	return nil, false
}

// countGet counts a get or gat; e is the item found (nil for a miss).
func (c *Cache) countGet(sh *shard, touch bool, e *item) {
	found := e != nil
	if found {
		cs := c.class(e)
		if touch {
			cs.touchHits.Add(1)
		} else {
			cs.getHits.Add(1)
		}
	}
	switch {
	case touch && found:
		sh.st.cmdTouch++
		sh.st.touchHits++
	case touch:
		sh.st.cmdTouch++
		sh.st.touchMisses++
	case found:
		sh.st.cmdGet++
		sh.st.getHits++
	default:
		sh.st.cmdGet++
		sh.st.getMisses++
	}
}

// get looks key up for get/gets, or for gat/gats when touch is set (exp is
// then the new expiry).
func (c *Cache) get(key []byte, now int64, touch bool, exp int64) (hit, bool) {
	sh := c.shardFor(key)
	for attempt := 0; attempt < maxAttempts; attempt++ {
		sh.mu.Lock()
		e := c.lookupLocked(sh, key, now)
		if e == nil {
			c.countGet(sh, touch, nil)
			sh.mu.Unlock()
			return hit{}, false
		}
		if touch {
			sh.setExp(e, exp)
		}
		h := hit{flags: e.flags, cas: e.cas, exp: e.exp, atime: e.atime, bits: e.bits}
		e.bits |= bitFetched
		e.atime = uint32(now)
		if e.where != whereRemote {
			h.value = e.value
			if e.where == whereLocal {
				c.bump(sh, e)
			}
			c.countGet(sh, touch, e)
			sh.mu.Unlock()
			return h, true
		}
		ref := refOf(e)
		sh.mu.Unlock()
		pb, v, again := c.fetchRemote(&ref)
		if again {
			continue
		}
		sh.mu.Lock()
		var found *item
		if pb != nil {
			found = ref.e
		}
		c.countGet(sh, touch, found)
		sh.mu.Unlock()
		if pb == nil {
			return hit{}, false
		}
		h.value, h.pb = v, pb
		if c.promote {
			c.promoteRemote(&ref, v)
		}
		return h, true
	}
	sh.mu.Lock()
	c.countGet(sh, touch, nil)
	sh.mu.Unlock()
	return hit{}, false
}

// promoteRemote moves the remote item ref came from back to local memory.
func (c *Cache) promoteRemote(ref *remoteRef, v []byte) {
	e := ref.e
	if !c.fits(itemOverhead + int64(len(e.key)+len(v))) {
		return
	}
	val := copyValue(v)
	c.reclaim(c.now())
	sh := c.shardForString(e.key)
	sh.mu.Lock()
	if sh.m[e.key] == e && e.where == whereRemote && e.seg == ref.seg && e.pos == ref.pos {
		ne := &item{key: e.key, value: val, flags: e.flags, cas: e.cas, exp: e.exp, mtime: e.mtime, atime: e.atime, bits: e.bits}
		c.linkLocked(sh, ne)
		sh.st.totalItems--
		c.st.promotions.Add(1)
	}
	sh.mu.Unlock()
	c.evictIfNeeded()
}

// Storage modes.
type storeMode uint8

const (
	modeSet storeMode = iota
	modeAdd
	modeReplace
	modeAppend
	modePrepend
	modeCAS
)

// Storage results.
type storeResult uint8

const (
	resStored storeResult = iota
	resNotStored
	resExists
	resNotFound
	resNoMemory
)

type storeReq struct {
	key       []byte
	value     []byte // owned by the cache from the call on
	flags     uint32
	exp       int64
	mode      storeMode
	cas       uint64 // compare (0: none)
	setStale  bool   // ms I: a CAS older than the item's stores it as stale
	newCAS    uint64 // ms E: explicit new CAS (0: generate)
	keyBinary bool
}

// itemSize is the local cost of an item with this key and value length.
func itemSize(klen, vlen int) int64 { return itemOverhead + int64(klen) + int64(vlen) }

// store runs a storage command and returns its result and the new CAS.
func (c *Cache) store(r *storeReq, now int64) (storeResult, uint64) {
	c.reclaim(now) // as memcached allocates the item, even for an add that finds the key
	sh := c.shardFor(r.key)
	var f fetched
	defer f.release()
	counted := false
	for attempt := 0; ; attempt++ {
		sh.mu.Lock()
		if !counted {
			sh.st.cmdSet++
			c.classes[slabClass(memcachedSize(len(r.key), r.flags, len(r.value)))].cmdSet.Add(1)
			counted = true
		}
		old := c.lookupLocked(sh, r.key, now)
		if old != nil && old.where == whereRemote && f.e != old && attempt < maxAttempts &&
			(r.mode == modeAppend || r.mode == modePrepend) {
			ref := refOf(old)
			sh.mu.Unlock()
			f.fetch(c, &ref)
			continue
		}
		res, cas := c.storeLocked(sh, old, r, now, &f)
		sh.mu.Unlock()
		if res == resStored {
			c.evictIfNeeded()
		}
		return res, cas
	}
}

func (c *Cache) storeLocked(sh *shard, old *item, r *storeReq, now int64, f *fetched) (storeResult, uint64) {
	val, flags, exp := r.value, r.flags, r.exp
	var bits uint8
	if r.keyBinary {
		bits |= bitKeyBinary
	}
	if old == nil {
		switch r.mode {
		case modeAdd, modeSet:
		case modeCAS:
			sh.st.casMisses++
			return resNotFound, 0
		default:
			return resNotStored, 0
		}
	} else {
		const (
			casNone = iota
			casMatch
			casBad
			casStale
		)
		cr := casNone
		switch {
		case r.cas == 0:
		case r.cas == old.cas:
			cr = casMatch
		case r.setStale && r.cas < old.cas:
			cr = casStale
		default:
			cr = casBad
		}
		switch r.mode {
		case modeAdd:
			if old.where == whereLocal {
				c.bump(sh, old)
			}
			return resNotStored, 0
		case modeCAS:
			switch cr {
			case casMatch:
				sh.st.casHits++
				c.class(old).casHits.Add(1)
			case casStale:
				sh.st.casHits++
				c.class(old).casHits.Add(1)
				exp = old.exp
				bits |= bitStale | old.bits&bitTokenSent
			default:
				sh.st.casBad++
				c.class(old).casBadval.Add(1)
				return resExists, 0
			}
		case modeAppend, modePrepend:
			if cr != casNone && cr != casMatch {
				return resExists, 0
			}
			ov, ok := valueOf(old, f)
			if !ok {
				return resNotStored, 0
			}
			nv := make([]byte, 0, len(ov)+len(val))
			if r.mode == modeAppend {
				nv = append(append(nv, ov...), val...)
			} else {
				nv = append(append(nv, val...), ov...)
			}
			val, flags, exp = nv, old.flags, old.exp
			bits = old.bits & bitKeyBinary
		}
	}
	key := string(r.key)
	if old != nil {
		key = old.key
	}
	if !c.fits(itemSize(len(key), len(val))) {
		sh.st.storeNoMemory++
		if old != nil && r.mode == modeSet {
			c.removeLocked(sh, old)
		}
		return resNoMemory, 0
	}
	cas := r.newCAS
	if cas == 0 {
		cas = c.nextCAS()
	}
	e := &item{key: key, value: val, flags: flags, exp: exp, cas: cas, mtime: uint32(now), atime: uint32(now), bits: bits}
	c.linkLocked(sh, e)
	return resStored, cas
}

// delete removes key; it reports whether it was there.
func (c *Cache) delete(key []byte, now int64) bool {
	sh := c.shardFor(key)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	e := c.lookupLocked(sh, key, now)
	if e == nil {
		sh.st.deleteMisses++
		return false
	}
	sh.st.deleteHits++
	c.class(e).deleteHits.Add(1)
	c.removeLocked(sh, e)
	return true
}

// deleteCAS removes key if its CAS is cas (0: any): resStored when
// deleted, resExists on a CAS mismatch, resNotFound when missing.
func (c *Cache) deleteCAS(key []byte, now int64, cas uint64) storeResult {
	sh := c.shardFor(key)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	e := c.lookupLocked(sh, key, now)
	switch {
	case e == nil:
		sh.st.deleteMisses++
		return resNotFound
	case cas != 0 && e.cas != cas:
		sh.st.deleteMisses++
		return resExists
	}
	sh.st.deleteHits++
	c.class(e).deleteHits.Add(1)
	c.removeLocked(sh, e)
	return resStored
}

// touch sets key's expiry; it reports whether the key was there.
func (c *Cache) touch(key []byte, now, exp int64) bool {
	sh := c.shardFor(key)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	sh.st.cmdTouch++
	e := c.lookupLocked(sh, key, now)
	if e == nil {
		sh.st.touchMisses++
		return false
	}
	sh.st.touchHits++
	c.class(e).touchHits.Add(1)
	sh.setExp(e, exp)
	e.bits |= bitFetched
	e.atime = uint32(now)
	if e.where == whereLocal {
		c.bump(sh, e)
	}
	return true
}

// Arithmetic results.
type deltaResult uint8

const (
	deltaOK deltaResult = iota
	deltaNonNumeric
	deltaNotFound
	deltaCASMismatch
	deltaNoMemory
)

type deltaReq struct {
	key     []byte
	incr    bool
	delta   uint64
	cas     uint64 // compare (0: none)
	vivify  bool   // ma N: create on miss with initial
	vivExp  int64
	initial uint64
	newCAS  uint64 // ma E
}

// deltaOut describes the item after a successful incr/decr.
type deltaOut struct {
	value   uint64
	cas     uint64
	exp     int64
	created bool
}

// arith runs incr/decr (and ma). Values are decimal unsigned 64-bit
// numbers; incr wraps, decr stops at 0. Like memcached, a result no longer
// than the stored value replaces it space-padded to the same length.
func (c *Cache) arith(r *deltaReq, now int64, apply func(e *item, created bool)) (deltaResult, deltaOut) {
	c.reclaim(now) // the result may be a new item
	sh := c.shardFor(r.key)
	var f fetched
	defer f.release()
	for attempt := 0; ; attempt++ {
		sh.mu.Lock()
		e := c.lookupLocked(sh, r.key, now)
		if e != nil && e.where == whereRemote && f.e != e && attempt < maxAttempts {
			ref := refOf(e)
			sh.mu.Unlock()
			f.fetch(c, &ref)
			continue
		}
		res, out := c.arithLocked(sh, e, r, now, &f, apply)
		sh.mu.Unlock()
		if res == deltaOK {
			c.evictIfNeeded()
		}
		return res, out
	}
}

func (c *Cache) arithLocked(sh *shard, e *item, r *deltaReq, now int64, f *fetched, apply func(e *item, created bool)) (deltaResult, deltaOut) {
	if e == nil {
		if !r.vivify {
			if r.incr {
				sh.st.incrMisses++
			} else {
				sh.st.decrMisses++
			}
			return deltaNotFound, deltaOut{}
		}
		val := strconv.AppendUint(nil, r.initial, 10)
		if !c.fits(itemSize(len(r.key), len(val))) {
			return deltaNoMemory, deltaOut{}
		}
		cas := r.newCAS
		if cas == 0 {
			cas = c.nextCAS()
		}
		ne := &item{key: string(r.key), value: val, cas: cas, mtime: uint32(now), atime: uint32(now)}
		c.linkLocked(sh, ne)
		if apply != nil {
			apply(ne, true)
		}
		return deltaOK, deltaOut{value: r.initial, cas: ne.cas, exp: ne.exp, created: true}
	}
	ov, ok := valueOf(e, f)
	if !ok {
		return deltaNotFound, deltaOut{}
	}
	if len(ov) == 0 {
		return deltaNonNumeric, deltaOut{}
	}
	if r.cas != 0 && e.cas != r.cas {
		return deltaCASMismatch, deltaOut{}
	}
	n, ok := parseStoredUint(ov)
	if !ok {
		return deltaNonNumeric, deltaOut{}
	}
	if r.incr {
		n += r.delta
		sh.st.incrHits++
		c.class(e).incrHits.Add(1)
	} else {
		if r.delta > n {
			n = 0
		} else {
			n -= r.delta
		}
		sh.st.decrHits++
		c.class(e).decrHits.Add(1)
	}
	var digits [20]byte
	res := strconv.AppendUint(digits[:0], n, 10)
	cas := r.newCAS
	if cas == 0 {
		cas = c.nextCAS()
	}
	if len(res) <= len(ov) && e.where == whereLocal {
		nv := make([]byte, len(ov))
		copy(nv, res)
		for i := len(res); i < len(nv); i++ {
			nv[i] = ' '
		}
		e.value = nv // same length: the accounting is unchanged
		e.cas = cas
		c.bump(sh, e)
		if apply != nil {
			apply(e, false)
		}
		return deltaOK, deltaOut{value: n, cas: cas, exp: e.exp}
	}
	var nv []byte
	if len(res) <= len(ov) {
		nv = make([]byte, len(ov))
		copy(nv, res)
		for i := len(res); i < len(nv); i++ {
			nv[i] = ' '
		}
	} else {
		nv = append([]byte(nil), res...)
	}
	if !c.fits(itemSize(len(e.key), len(nv))) {
		return deltaNoMemory, deltaOut{}
	}
	ne := &item{key: e.key, value: nv, flags: e.flags, exp: e.exp, cas: cas, mtime: e.mtime, atime: uint32(now), bits: e.bits}
	c.linkLocked(sh, ne)
	sh.st.totalItems--
	if apply != nil {
		apply(ne, false)
	}
	return deltaOK, deltaOut{value: n, cas: cas, exp: ne.exp}
}

// flush invalidates every item now (delay <= 0) or at the unix second at.
func (c *Cache) flush(at int64) {
	c.st.cmdFlush.Add(1)
	if at <= 0 {
		c.flushAt.Store(0)
		c.flushNow()
		return
	}
	c.flushAt.Store(at)
}

// realtime converts a protocol exptime to an absolute unix second: 0 never,
// negative already expired, up to 30 days relative, beyond that absolute.
func realtime(exptime, now int64) int64 {
	const maxDelta = 60 * 60 * 24 * 30
	switch {
	case exptime == 0:
		return 0
	case exptime < 0:
		return 1
	case exptime > maxDelta:
		return exptime
	}
	return now + exptime
}

// parseStoredUint parses a stored value as incr/decr does: C strtoull over
// the value followed by "\r\n": optional leading whitespace and sign, digits,
// then whitespace, NUL or the end.
func parseStoredUint(v []byte) (uint64, bool) {
	return cStrtoull(v, true)
}

func unsafeBytes(s string) []byte { return unsafe.Slice(unsafe.StringData(s), len(s)) }
