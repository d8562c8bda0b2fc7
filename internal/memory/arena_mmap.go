//go:build linux && !race

package memory

import (
	"fmt"
	"math"
	"syscall"
)

// pageSize is the granularity of discard.
var pageSize = uint64(syscall.Getpagesize())

// alloc maps capacity bytes of private anonymous memory with MAP_NORESERVE:
// pages take RSS (and commit) only when first touched, and ZERO drops them
// again with MADV_DONTNEED. Race-detector builds use the Go heap instead
// (arena_heap.go) so that the detector sees accesses to the capacity.
func (a *arena) alloc(capacity uint64) error {
	if capacity > math.MaxInt {
		return fmt.Errorf("memory: capacity %d too large", capacity)
	}
	buf, err := syscall.Mmap(-1, 0, int(capacity), syscall.PROT_READ|syscall.PROT_WRITE,
		syscall.MAP_PRIVATE|syscall.MAP_ANON|syscall.MAP_NORESERVE)
	if err != nil {
		return fmt.Errorf("memory: map %d bytes: %w", capacity, err)
	}
	a.buf = buf
	a.release = func() error { return syscall.Munmap(buf) }
	a.discard = func(off, n uint64) uint64 {
		n -= n % pageSize
		if n == 0 {
			return 0
		}
		if err := syscall.Madvise(buf[off:off+n], syscall.MADV_DONTNEED); err != nil {
			return 0 // the caller clears by hand
		}
		return n
	}
	return nil
}
