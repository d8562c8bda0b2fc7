//go:build !linux || race

package memory

import (
	"fmt"
	"math"
)

// pageSize is the granularity of discard, which the heap arena lacks.
const pageSize = 4096

// alloc takes the capacity from the Go heap. A large allocation comes
// straight from fresh, lazily faulted pages, so it takes RSS only as it is
// touched; but ZERO has to clear it by hand.
func (a *arena) alloc(capacity uint64) error {
	if capacity > math.MaxInt {
		return fmt.Errorf("memory: capacity %d too large", capacity)
	}
	a.buf = make([]byte, capacity)
	return nil
}
