// Package workload holds the memory-bound workloads that measure paging
// (rackpool page, bench/pager): a sort of a large array and a random-access
// table, each running over a []byte that is either a plain Go slice or a
// pager's region, and each returning a checksum that the two must agree on.
package workload

import (
	"fmt"
	"slices"
	"unsafe"
)

// Names are the workloads Run knows.
var Names = []string{"sort", "table"}

// Run runs the named workload over region (its length a multiple of 8)
// and returns its checksum. ops is the table's number of updates (ignored
// by sort).
func Run(name string, region []byte, ops int, seed uint64) (uint64, error) {
	switch name {
	case "sort":
		return Sort(region, seed)
	case "table":
		return Table(region, ops, seed), nil
	}
	return 0, fmt.Errorf("unknown workload %q (want sort or table)", name)
}

func words(region []byte) []uint64 {
	if len(region) < 8 {
		return nil
	}
	return unsafe.Slice((*uint64)(unsafe.Pointer(&region[0])), len(region)/8)
}

// next is xorshift64*.
func next(x *uint64) uint64 {
	*x ^= *x >> 12
	*x ^= *x << 25
	*x ^= *x >> 27
	return *x * 2685821657736338717
}

// Sort fills the region with pseudo-random 64-bit keys and sorts them
// (pdqsort, slices.Sort): passes that stream over ever smaller partitions.
// The checksum is the keys' sum, which sorting keeps; an unsorted result is
// an error.
func Sort(region []byte, seed uint64) (uint64, error) {
	w := words(region)
	x := seed | 1
	var sum uint64
	for i := range w {
		w[i] = next(&x)
		sum += w[i]
	}
	slices.Sort(w)
	var after uint64
	for i := range w {
		if i > 0 && w[i] < w[i-1] {
			return 0, fmt.Errorf("sort: key %d out of order", i)
		}
		after += w[i]
	}
	if after != sum {
		return 0, fmt.Errorf("sort: keys changed (sum %x, was %x)", after, sum)
	}
	return sum, nil
}

// Table treats the region as a table of 64-bit slots (a power of two of
// them, the largest that fits) and makes ops read-modify-write updates at
// hashed keys, as a hash table's lookups and updates land: uniformly
// random slots. The checksum folds every slot after the updates.
func Table(region []byte, ops int, seed uint64) uint64 {
	w := words(region)
	if len(w) == 0 {
		return 0
	}
	n := 1
	for n*2 <= len(w) {
		n *= 2
	}
	mask := uint64(n - 1)
	x := seed | 1
	for range ops {
		k := next(&x)
		i := (k * 0x9E3779B97F4A7C15) >> 17 & mask
		w[i] = w[i]*31 + k
	}
	var sum uint64
	for i := range n {
		sum = sum*1099511628211 ^ w[i]
	}
	return sum
}
