package cache

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"sync"
	"sync/atomic"
)

// Record layout in the remote log (little endian):
//
//	off size field
//	  0    4 magic      "RPC1"
//	  4    2 key length (1..250)
//	  6    2 reserved   (0)
//	  8    4 value length
//	 12    4 client flags
//	 16    8 exptime    (unix seconds, 0 = never; informational)
//	 24    8 CAS        (at spill time; informational)
//	 32    4 CRC32-C of key then value
//	 36    4 CRC32-C of bytes 0..35
//	 40    - key, then value
const (
	recMagic   = 0x31435052 // "RPC1" read little endian
	recHdrSize = 40
	maxKeyLen  = 250

	// Segment sizing: about segTarget segments, each at most segMax bytes
	// and at least minSegment.
	segTarget  = 16
	segMax     = 4 << 20 // below the memnode's default frame limit
	minSegment = 4 << 10
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

func recordSize(klen, vlen int) int { return recHdrSize + klen + vlen }

func recordCRC(key string, value []byte) uint32 {
	crc := crc32.Update(0, castagnoli, unsafeBytes(key))
	return crc32.Update(crc, castagnoli, value)
}

// putHeader encodes the record header for r into h.
func putHeader(h []byte, r *spillRec, crc uint32) {
	binary.LittleEndian.PutUint32(h[0:], recMagic)
	binary.LittleEndian.PutUint16(h[4:], uint16(len(r.key)))
	binary.LittleEndian.PutUint16(h[6:], 0)
	binary.LittleEndian.PutUint32(h[8:], uint32(len(r.value)))
	binary.LittleEndian.PutUint32(h[12:], r.flags)
	binary.LittleEndian.PutUint64(h[16:], uint64(r.exp))
	binary.LittleEndian.PutUint64(h[24:], r.cas)
	binary.LittleEndian.PutUint32(h[32:], crc)
	binary.LittleEndian.PutUint32(h[36:], crc32.Checksum(h[:36], castagnoli))
}

// verifyRecord checks a whole record read back from the log against the
// index entry's key, value length and CRC, and returns its value.
func verifyRecord(rec []byte, key string, vlen int, crc uint32) ([]byte, bool) {
	if len(rec) != recordSize(len(key), vlen) {
		return nil, false
	}
	h := rec[:recHdrSize]
	if binary.LittleEndian.Uint32(h[0:]) != recMagic ||
		int(binary.LittleEndian.Uint16(h[4:])) != len(key) ||
		int(binary.LittleEndian.Uint32(h[8:])) != vlen ||
		binary.LittleEndian.Uint32(h[32:]) != crc ||
		binary.LittleEndian.Uint32(h[36:]) != crc32.Checksum(h[:36], castagnoli) {
		return nil, false
	}
	k := rec[recHdrSize : recHdrSize+len(key)]
	if string(k) != key {
		return nil, false
	}
	v := rec[recHdrSize+len(key):]
	if crc32.Update(crc32.Update(0, castagnoli, k), castagnoli, v) != crc {
		return nil, false
	}
	return v, true
}

// Tier states.
const (
	tierHealthy int32 = iota
	tierFailed        // a remote operation failed; evictions drop until a retry succeeds
	tierRetired       // replaced by SetRemote
)

// tier is the remote log: a ring of segments over the remote region. The
// head segment takes appends; before the head moves on, it picks the
// segment with the fewest live bytes and cleans it: its live records are
// compacted to its start when it is at most half live, and dropped
// otherwise.
type tier struct {
	c       *Cache
	r       Remote
	size    uint64
	segSize uint64
	segs    []segment

	state    atomic.Int32
	failedAt atomic.Int64 // clock unix nanos of the last failure

	mu      sync.Mutex // appends, cleaning, reset
	head    int
	headOff uint64
	dirty   bool   // segments hold unknown data (after a failure): reset before use
	hdr     []byte // header + key scratch
	buf     []byte // cleaning buffer, segSize bytes once used

	immediate bool // r is memory of this process (see Immediate)
}

// segment is one slice of the ring. Its live list links the index entries of
// its live records in offset order.
type segment struct {
	t    *tier
	base uint64
	// rw is held shared by remote reads of this segment and exclusively
	// while the segment is rewritten; gen changes on every rewrite, so a
	// reader holding a stale offset notices and looks the key up again.
	rw  sync.RWMutex
	gen atomic.Uint64

	mu         sync.Mutex // live list and counters
	head, tail *item
	live       int64 // live record bytes
	n          int64

	used uint64 // bytes written since last clean; guarded by t.mu
}

func newTier(c *Cache, r Remote, size uint64) (*tier, error) {
	maxRec := uint64(recordSize(maxKeyLen, c.maxItem))
	seg := min(size/segTarget, segMax)
	if seg < maxRec {
		// Big items: fewer, larger segments, but at least four; records
		// larger than a segment are dropped instead of spilled.
		seg = min(maxRec, size/4)
	}
	if seg < minSegment || size/seg < 2 {
		return nil, fmt.Errorf("remote region of %d bytes is too small", size)
	}
	t := &tier{c: c, r: r, size: size, segSize: seg, hdr: make([]byte, recHdrSize+maxKeyLen)}
	if im, ok := r.(Immediate); ok && im.Immediate() {
		t.immediate = true
	}
	t.segs = make([]segment, size/seg)
	for i := range t.segs {
		t.segs[i].t = t
		t.segs[i].base = uint64(i) * seg
	}
	return t, nil
}

func (s *segment) link(e *item) {
	s.mu.Lock()
	e.next = nil
	e.prev = s.tail
	if s.tail != nil {
		s.tail.next = e
	} else {
		s.head = e
	}
	s.tail = e
	s.live += int64(recordSize(len(e.key), int(e.vlen)))
	s.n++
	s.mu.Unlock()
}

func (s *segment) unlink(e *item) {
	s.mu.Lock()
	if e.prev != nil {
		e.prev.next = e.next
	} else {
		s.head = e.next
	}
	if e.next != nil {
		e.next.prev = e.prev
	} else {
		s.tail = e.prev
	}
	e.prev, e.next = nil, nil
	s.live -= int64(recordSize(len(e.key), int(e.vlen)))
	s.n--
	s.mu.Unlock()
}

// liveRec is a snapshot of one live record taken by the cleaner.
type liveRec struct {
	e    *item
	key  string
	pos  uint64
	size int
	vlen int
	crc  uint32
}

func (s *segment) snapshot() []liveRec {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]liveRec, 0, s.n)
	for e := s.head; e != nil; e = e.next {
		out = append(out, liveRec{e: e, key: e.key, pos: e.pos, size: recordSize(len(e.key), int(e.vlen)), vlen: int(e.vlen), crc: e.crc})
	}
	return out
}

// ctx bounds one remote access by the remote timeout. A remote in this
// process's memory (Immediate) cannot stall, so it gets no timer: arming
// and stopping one per access cost more than the access itself.
func (t *tier) ctx() (context.Context, context.CancelFunc) {
	if t.immediate {
		return context.Background(), noCancel
	}
	return context.WithTimeout(context.Background(), t.c.remoteTimeout)
}

func noCancel() {}

// accepting reports whether evictions should try to spill to t.
func (t *tier) accepting() bool {
	switch t.state.Load() {
	case tierHealthy:
		return true
	case tierFailed:
		return t.c.clock.Now().UnixNano()-t.failedAt.Load() >= int64(remoteRetry)
	}
	return false
}

func (t *tier) retire() { t.state.Store(tierRetired) }

// fail moves t to the failed state after a remote error: logged once per
// state change, every index entry dropped (its items become misses).
func (t *tier) fail(err error) {
	t.c.st.remoteErrors.Add(1)
	t.failedAt.Store(t.c.clock.Now().UnixNano())
	if t.state.CompareAndSwap(tierHealthy, tierFailed) {
		t.c.logger.Warn("cache: remote tier failed; its items are dropped and evictions drop until it answers again", "err", err)
		t.c.dropTier(t)
	}
}

// spill writes the in-flight victim v (snapshot rec) to the log and installs
// its index entry, or drops it.
func (t *tier) spill(sh *shard, v *item, rec *spillRec) {
	t.mu.Lock()
	defer t.mu.Unlock()
	probing := false
	switch t.state.Load() {
	case tierRetired:
		t.c.installSpill(sh, v, t, nil, 0, 0, false)
		return
	case tierFailed:
		if !t.accepting() {
			t.c.installSpill(sh, v, t, nil, 0, 0, false)
			return
		}
		probing = true
	}
	if t.dirty || probing {
		t.resetLocked()
	}
	seg, off, crc, err := t.appendLocked(rec)
	if probing {
		if err == nil && t.state.CompareAndSwap(tierFailed, tierHealthy) {
			t.c.logger.Info("cache: remote tier answers again; spilling evictions to it")
		} else if err != nil {
			t.c.st.remoteErrors.Add(1)
			t.failedAt.Store(t.c.clock.Now().UnixNano())
			t.dirty = true
		}
	} else if err != nil && err != errRecordTooLarge {
		t.dirty = true
		t.fail(err)
	}
	t.c.installSpill(sh, v, t, seg, off, crc, err == nil)
}

// resetLocked forgets the log's contents: every segment empty, readers of
// old offsets sent back to the index. t.mu is held and no index entry of t
// exists.
func (t *tier) resetLocked() {
	for i := range t.segs {
		s := &t.segs[i]
		s.rw.Lock()
		s.gen.Add(1)
		s.used = 0
		s.rw.Unlock()
	}
	t.head, t.headOff, t.dirty = 0, 0, false
}

// appendLocked writes rec at the head, cleaning the next segment first when
// the head segment is full. t.mu is held.
func (t *tier) appendLocked(rec *spillRec) (*segment, uint64, uint32, error) {
	n := uint64(recordSize(len(rec.key), len(rec.value)))
	if n > t.segSize {
		return nil, 0, 0, errRecordTooLarge
	}
	if t.headOff+n > t.segSize {
		if err := t.advanceLocked(); err != nil {
			return nil, 0, 0, err
		}
	}
	s := &t.segs[t.head]
	crc := recordCRC(rec.key, rec.value)
	h := t.hdr[:recHdrSize+len(rec.key)]
	putHeader(h, rec, crc)
	copy(h[recHdrSize:], rec.key)
	ctx, cancel := t.ctx()
	err := t.r.Write(ctx, s.base+t.headOff, h, rec.value)
	cancel()
	if err != nil {
		return nil, 0, 0, fmt.Errorf("remote write: %w", err)
	}
	off := t.headOff
	t.headOff += n
	s.used = t.headOff
	return s, off, crc, nil
}

// advanceLocked moves the head into the segment with the fewest live bytes
// (the first in ring order from the head among equals, so an empty ring
// fills in order and a log of equally live segments is cleaned oldest
// first) after cleaning it. Choosing the emptiest segment rather than the
// next one means live records are compacted, not dropped, while any segment
// is at most half live.
func (t *tier) advanceLocked() error {
	next, least := -1, int64(0)
	for i := 1; i < len(t.segs); i++ {
		j := (t.head + i) % len(t.segs)
		sg := &t.segs[j]
		sg.mu.Lock()
		live := sg.live
		sg.mu.Unlock()
		if next < 0 || live < least {
			next, least = j, live
		}
		if live == 0 {
			break
		}
	}
	s := &t.segs[next]
	var err error
	if s.used > 0 {
		s.rw.Lock()
		s.gen.Add(1)
		err = t.cleanLocked(s)
		s.rw.Unlock()
	}
	t.head, t.headOff = next, s.used
	return err
}

// cleanLocked empties segment s for reuse. When its live records take at
// most half of it they are compacted to its start (they become the newest
// records of the log); otherwise they are dropped. s.rw is held
// exclusively.
func (t *tier) cleanLocked(s *segment) error {
	live := s.snapshot()
	s.mu.Lock()
	liveBytes := s.live
	s.mu.Unlock()
	if len(live) == 0 {
		s.used = 0
		return nil
	}
	if uint64(liveBytes)*2 > t.segSize {
		for _, lr := range live {
			if t.c.dropRemote(lr.e, s, lr.pos) {
				t.c.st.remoteEvictions.Add(1)
				t.c.st.remoteEvictedBytes.Add(int64(lr.size))
			}
		}
		s.used = 0
		return nil
	}
	if t.buf == nil {
		t.buf = make([]byte, t.segSize)
	}
	lo, hi := live[0].pos, live[len(live)-1].pos+uint64(live[len(live)-1].size)
	ctx, cancel := t.ctx()
	defer cancel()
	if err := t.r.Read(ctx, s.base+lo, t.buf[lo:hi]); err != nil {
		s.used = 0
		return fmt.Errorf("remote read for compaction: %w", err)
	}
	type move struct {
		lr  liveRec
		off uint64
	}
	moves := make([]move, 0, len(live))
	var w uint64
	for _, lr := range live {
		rec := t.buf[lr.pos : lr.pos+uint64(lr.size)]
		if _, ok := verifyRecord(rec, lr.key, lr.vlen, lr.crc); !ok {
			if t.c.dropRemote(lr.e, s, lr.pos) {
				t.c.st.corrupt.Add(1)
			}
			continue
		}
		copy(t.buf[w:], rec) // w <= lr.pos: copy handles the overlap
		moves = append(moves, move{lr, w})
		w += uint64(lr.size)
	}
	if w > 0 {
		if err := t.r.Write(ctx, s.base, t.buf[:w]); err != nil {
			s.used = 0
			return fmt.Errorf("remote write for compaction: %w", err)
		}
	}
	for _, m := range moves {
		t.c.moveRemote(m.lr.e, s, m.lr.pos, m.off)
	}
	s.used = w
	t.c.st.compactions.Add(1)
	t.c.st.compactedRecs.Add(int64(len(moves)))
	return nil
}

// moveRemote points e at its compacted offset if it still refers to the
// record the cleaner moved.
func (c *Cache) moveRemote(e *item, s *segment, from, to uint64) {
	sh := c.shardForString(e.key)
	sh.mu.Lock()
	if sh.m[e.key] == e && e.where == whereRemote && e.seg == s && e.pos == from {
		e.pos = to
	}
	sh.mu.Unlock()
}

// dropOldest drops live records in ring order from the segment after the
// head (the oldest, unless the cleaner has reused segments out of order)
// until the local tier is within its limit: for when index entries alone
// exceed it.
func (t *tier) dropOldest() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	dropped := false
	for i := 1; i <= len(t.segs); i++ {
		s := &t.segs[(t.head+i)%len(t.segs)]
		for _, lr := range s.snapshot() {
			if t.c.used.Load() <= t.c.limit.Load() {
				return true
			}
			if t.c.dropRemote(lr.e, s, lr.pos) {
				t.c.st.remoteEvictions.Add(1)
				t.c.st.remoteEvictedBytes.Add(int64(lr.size))
				dropped = true
			}
		}
	}
	return dropped
}

// remoteRef is what a reader captures from an index entry under the shard
// lock before reading the record without it.
type remoteRef struct {
	e    *item
	seg  *segment
	pos  uint64
	gen  uint64
	vlen int
	crc  uint32
}

func refOf(e *item) remoteRef {
	return remoteRef{e: e, seg: e.seg, pos: e.pos, gen: e.seg.gen.Load(), vlen: int(e.vlen), crc: e.crc}
}

// readRemote reads and verifies the record ref points at. The value lives in
// the returned pooled buffer. Errors: errMoved (look the key up again),
// errCorrupt, or the remote's error.
func (c *Cache) readRemote(ref *remoteRef) (*pbuf, []byte, error) {
	s := ref.seg
	n := recordSize(len(ref.e.key), ref.vlen)
	s.rw.RLock()
	if s.gen.Load() != ref.gen {
		s.rw.RUnlock()
		return nil, nil, errMoved
	}
	pb := getBuf(n)
	ctx, cancel := s.t.ctx()
	err := s.t.r.Read(ctx, s.base+ref.pos, pb.b[:n])
	cancel()
	s.rw.RUnlock()
	if err != nil {
		putBuf(pb)
		return nil, nil, fmt.Errorf("remote read: %w", err)
	}
	s.t.c.st.remoteReadBytes.Add(int64(n))
	v, ok := verifyRecord(pb.b[:n], ref.e.key, ref.vlen, ref.crc)
	if !ok {
		putBuf(pb)
		return nil, nil, errCorrupt
	}
	return pb, v, nil
}

// fetchRemote reads the value of the remote item ref came from, handling
// relocation (re-lookup), corruption (drop) and remote errors (fail the
// tier). On success the caller owns pb. ok false means the item is now a
// miss; again means the caller should look the key up again.
func (c *Cache) fetchRemote(ref *remoteRef) (pb *pbuf, v []byte, again bool) {
	pb, v, err := c.readRemote(ref)
	switch {
	case err == nil:
		c.st.remoteHits.Add(1)
		return pb, v, false
	case err == errMoved:
		return nil, nil, true
	case err == errCorrupt:
		sh := c.shardForString(ref.e.key)
		sh.mu.Lock()
		e := ref.e
		unchanged := sh.m[e.key] == e && e.where == whereRemote && e.seg == ref.seg && e.pos == ref.pos && ref.seg.gen.Load() == ref.gen
		if unchanged {
			c.removeLocked(sh, e)
		}
		sh.mu.Unlock()
		if unchanged {
			c.st.corrupt.Add(1)
			c.st.remoteMisses.Add(1)
			return nil, nil, false
		}
		return nil, nil, true
	default:
		c.st.remoteMisses.Add(1)
		ref.seg.t.fail(err)
		return nil, nil, false
	}
}

// Pooled buffers for remote reads, in power-of-two classes.
type pbuf struct {
	b     []byte
	class int
}

const (
	minBufShift = 10 // 1 KiB
	maxBufShift = 24 // 16 MiB
)

var bufPools [maxBufShift - minBufShift + 1]sync.Pool

func getBuf(n int) *pbuf {
	class := 0
	for (1 << (minBufShift + class)) < n {
		class++
	}
	if class >= len(bufPools) {
		return &pbuf{b: make([]byte, n), class: -1}
	}
	if p, ok := bufPools[class].Get().(*pbuf); ok {
		return p
	}
	return &pbuf{b: make([]byte, 1<<(minBufShift+class)), class: class}
}

func putBuf(p *pbuf) {
	if p == nil || p.class < 0 {
		return
	}
	bufPools[p.class].Put(p)
}

// copyValue returns a private copy of v, for promotion to local memory.
func copyValue(v []byte) []byte { return bytes.Clone(v) }
