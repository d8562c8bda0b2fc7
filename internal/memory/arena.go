package memory

import (
	"math/bits"
	"sync"
	"sync/atomic"
)

// Striped locking over the capacity.
const (
	stripeShift  = 16 // 64 KiB stripes
	nStripeLocks = 256
	// zeroChunk is how much of a region ZERO clears under one set of
	// stripe locks.
	zeroChunk = 4 << 20
)

// stripeLock is a reader/writer lock padded to its own cache line.
type stripeLock struct {
	sync.RWMutex
	_ [64 - 24]byte
}

// arena is the node's capacity with its stripe locks. Stripe i of the
// capacity (bytes [i<<stripeShift, (i+1)<<stripeShift)) is guarded by
// locks[i%nStripeLocks]. Every access takes the locks of the stripes it
// covers in ascending lock index, so accesses never deadlock.
type arena struct {
	buf   []byte
	locks [nStripeLocks]stripeLock
	// release gives the memory back; nil if the garbage collector does.
	release func() error
	// discard zeroes whole pages of buf[off:off+n] without touching them,
	// if the backing memory allows it; it reports how many bytes from off
	// it cleared (a multiple of the page size, possibly 0).
	discard func(off, n uint64) uint64
	// touched has one bit per usagePage of buf, set by writes and cleared
	// by zero: the pages a lease holder has written (Server.LeaseUsage).
	// It costs one byte per 32 KiB of capacity.
	touched []atomic.Uint64
}

// usagePage is the unit in which the arena counts the bytes in use: 4 KiB,
// the lease alignment, whatever the system's page size.
const usagePage = 4096

func newArena(capacity uint64) (*arena, error) {
	a := new(arena)
	if err := a.alloc(capacity); err != nil {
		return nil, err
	}
	a.touched = make([]atomic.Uint64, (capacity/usagePage+63)/64)
	return a, nil
}

// pageBits calls fn for each word of the bitmap that pages [off, off+n)
// cover, with the mask of their bits in it. n > 0.
func pageBits(off, n uint64, fn func(word int, mask uint64)) {
	first, last := off/usagePage, (off+n-1)/usagePage
	for w := first / 64; w <= last/64; w++ {
		lo, hi := max(first, w*64)-w*64, min(last, w*64+63)-w*64
		mask := ^uint64(0) >> (63 - (hi - lo)) << lo
		fn(int(w), mask)
	}
}

// touch marks the pages of [off, off+n) written. A page already marked
// costs a load, no store, so rewriting hot pages does not bounce the
// bitmap's cache lines between writers.
func (a *arena) touch(off, n uint64) {
	if n == 0 {
		return
	}
	pageBits(off, n, func(w int, mask uint64) {
		if a.touched[w].Load()&mask != mask {
			a.touched[w].Or(mask)
		}
	})
}

// untouch clears the marks of the pages of [off, off+n).
func (a *arena) untouch(off, n uint64) {
	if n == 0 {
		return
	}
	pageBits(off, n, func(w int, mask uint64) { a.touched[w].And(^mask) })
}

// touchedBytes is the bytes of the pages of [off, off+n) marked written.
func (a *arena) touchedBytes(off, n uint64) uint64 {
	if n == 0 {
		return 0
	}
	var pages int
	pageBits(off, n, func(w int, mask uint64) { pages += bits.OnesCount64(a.touched[w].Load() & mask) })
	return uint64(pages) * usagePage
}

// eachTouched calls fn with the offset of every page of [off, off+n)
// marked written, in ascending order. off is page aligned.
func (a *arena) eachTouched(off, n uint64, fn func(page uint64)) {
	if n == 0 {
		return
	}
	pageBits(off, n, func(w int, mask uint64) {
		for m := a.touched[w].Load() & mask; m != 0; m &= m - 1 {
			fn(uint64(w*64+bits.TrailingZeros64(m)) * usagePage)
		}
	})
}

// lockSpan returns the lock indices [lo1, hi1] and [lo2, hi2] (ascending,
// either may be empty with lo > hi) guarding [off, off+n), n > 0.
func lockSpan(off, n uint64) (lo1, hi1, lo2, hi2 int) {
	first := off >> stripeShift
	last := (off + n - 1) >> stripeShift
	if last-first+1 >= nStripeLocks {
		return 0, nStripeLocks - 1, 1, 0
	}
	i0 := int(first % nStripeLocks)
	i1 := int(last % nStripeLocks)
	if i0 <= i1 {
		return i0, i1, 1, 0
	}
	// The span wraps around the lock table: 0..i1 then i0..end.
	return 0, i1, i0, nStripeLocks - 1
}

func (a *arena) lock(off, n uint64, write bool) {
	if n == 0 {
		return
	}
	lo1, hi1, lo2, hi2 := lockSpan(off, n)
	for _, r := range [2][2]int{{lo1, hi1}, {lo2, hi2}} {
		for i := r[0]; i <= r[1]; i++ {
			if write {
				a.locks[i].Lock()
			} else {
				a.locks[i].RLock()
			}
		}
	}
}

func (a *arena) unlock(off, n uint64, write bool) {
	if n == 0 {
		return
	}
	lo1, hi1, lo2, hi2 := lockSpan(off, n)
	for _, r := range [2][2]int{{lo1, hi1}, {lo2, hi2}} {
		for i := r[0]; i <= r[1]; i++ {
			if write {
				a.locks[i].Unlock()
			} else {
				a.locks[i].RUnlock()
			}
		}
	}
}

// readAt copies len(dst) bytes at off into dst. The caller has checked the
// range.
func (a *arena) readAt(dst []byte, off uint64) {
	n := uint64(len(dst))
	a.lock(off, n, false)
	copy(dst, a.buf[off:off+n])
	a.unlock(off, n, false)
}

// writeAt copies src to off. The caller has checked the range.
func (a *arena) writeAt(off uint64, src []byte) {
	n := uint64(len(src))
	a.lock(off, n, true)
	copy(a.buf[off:off+n], src)
	a.unlock(off, n, true)
	a.touch(off, n)
}

// zero clears [off, off+n) a chunk at a time. Whole pages are handed back to
// the kernel where the backing memory allows it, so zeroing an untouched
// region does not fault it in.
func (a *arena) zero(off, n uint64) {
	for n > 0 {
		c := min(n, zeroChunk-off%zeroChunk)
		a.lock(off, c, true)
		done := uint64(0)
		if a.discard != nil {
			// Clear up to the first page boundary by hand, then let the
			// kernel drop the whole pages, then clear the tail.
			head := min(c, (pageSize-off%pageSize)%pageSize)
			clear(a.buf[off : off+head])
			done = head + a.discard(off+head, c-head)
		}
		clear(a.buf[off+done : off+c])
		a.untouch(off, c)
		a.unlock(off, c, true)
		off += c
		n -= c
	}
}

func (a *arena) close() error {
	if a.release == nil {
		return nil
	}
	err := a.release()
	a.buf = nil
	return err
}
