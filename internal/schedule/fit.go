package schedule

import (
	"math/bits"
	"slices"
)

// fitIndex is a segment tree over hosts (in topology order) of what each
// can still give to a share request: free cores and free local memory.
// Every inner node keeps the maximum of both over its subtree and the set
// of free-core values present (bit v for v free cores, bit 63 for 63 or
// more), so the placement policies find their next candidate host in
// about O(log n) instead of walking every host: first-fit and next-fit
// descend to the leftmost host with enough of both, best-fit and
// worst-fit walk the free-core values in order and descend for each.
//
// A host held whole by a composition shows 0 free cores and memory.
//
// Every node also keeps the most pooled memory blocks any host below it
// could still obtain (State.obtainable: the free blocks of the memory
// nodes its optical ports are circuited to when every port is taken, else
// unbounded), so a request for pooled memory skips, a subtree at a time,
// the hosts that could not get it: on a saturated pod a refusal costs
// O(log n), not a walk of every host with free cores.
type fitIndex struct {
	size  int // leaves: the smallest power of two >= hosts
	hosts int
	cores []int32 // 2*size nodes; leaves at [size, size+hosts)
	mem   []int32
	obt   []int32
	mask  []uint64
}

func newFitIndex(cores, mem, obt []int32) *fitIndex {
	n := len(cores)
	size := 1
	for size < n {
		size *= 2
	}
	f := &fitIndex{size: size, hosts: n, cores: make([]int32, 2*size), mem: make([]int32, 2*size), obt: make([]int32, 2*size),
		mask: make([]uint64, 2*size)}
	for i := range n {
		f.cores[size+i], f.mem[size+i], f.obt[size+i], f.mask[size+i] = cores[i], mem[i], obt[i], coreBit(cores[i])
	}
	for i := size - 1; i >= 1; i-- {
		f.pull(i)
	}
	return f
}

func coreBit(c int32) uint64 {
	if c > 63 {
		c = 63
	}
	if c < 0 {
		c = 0
	}
	return 1 << uint(c)
}

func (f *fitIndex) pull(i int) {
	l, r := 2*i, 2*i+1
	f.cores[i] = max(f.cores[l], f.cores[r])
	f.mem[i] = max(f.mem[l], f.mem[r])
	f.obt[i] = max(f.obt[l], f.obt[r])
	f.mask[i] = f.mask[l] | f.mask[r]
}

// setObtainable records the pooled memory blocks host h could obtain.
func (f *fitIndex) setObtainable(h int, obt int32) {
	i := f.size + h
	if f.obt[i] == obt {
		return
	}
	f.obt[i] = obt
	for i /= 2; i >= 1; i /= 2 {
		f.pull(i)
	}
}

// set records host h's free cores and memory.
func (f *fitIndex) set(h int, cores, mem int32) {
	i := f.size + h
	f.cores[i], f.mem[i], f.mask[i] = cores, mem, coreBit(cores)
	for i /= 2; i >= 1; i /= 2 {
		f.pull(i)
	}
}

// next returns the lowest host index >= from with at least cores free
// cores, mem free memory and blocks obtainable pooled memory blocks, or -1.
func (f *fitIndex) next(from int, cores, mem, blocks int32) int {
	if from >= f.hosts {
		return -1
	}
	return f.descend(1, 0, f.size, from, cores, mem, blocks)
}

func (f *fitIndex) descend(node, lo, hi, from int, cores, mem, blocks int32) int {
	if hi <= from || f.cores[node] < cores || f.mem[node] < mem || f.obt[node] < blocks {
		return -1
	}
	if node >= f.size {
		if node-f.size >= f.hosts {
			return -1
		}
		return node - f.size
	}
	mid := (lo + hi) / 2
	if r := f.descend(2*node, lo, mid, from, cores, mem, blocks); r >= 0 {
		return r
	}
	return f.descend(2*node+1, mid, hi, from, cores, mem, blocks)
}

// nextWith returns the lowest host index >= from whose free-core bit is v
// and that has at least mem free memory, or -1.
func (f *fitIndex) nextWith(from int, v uint, mem, blocks int32) int {
	return f.descendBit(1, 0, f.size, from, uint64(1)<<v, mem, blocks)
}

func (f *fitIndex) descendBit(node, lo, hi, from int, bit uint64, mem, blocks int32) int {
	if hi <= from || f.mask[node]&bit == 0 || f.mem[node] < mem || f.obt[node] < blocks {
		return -1
	}
	if node >= f.size {
		return node - f.size
	}
	mid := (lo + hi) / 2
	if r := f.descendBit(2*node, lo, mid, from, bit, mem, blocks); r >= 0 {
		return r
	}
	return f.descendBit(2*node+1, mid, hi, from, bit, mem, blocks)
}

// order yields candidate host indices for a share of cores and mem in the
// order policy p tries them, skipping hosts without enough free cores or
// memory, or that cannot obtain blocks pooled memory blocks. start is where
// next-fit begins (wrapping around). yield returns false to stop.
func (f *fitIndex) order(p Policy, start int, cores, mem, blocks int32, yield func(int) bool) {
	cores = max(cores, 1)
	switch p {
	case BestFit, WorstFit:
		// Free-core values present, ascending for best fit, descending for
		// worst fit; the values below what is asked are masked out.
		present := f.mask[1] &^ (uint64(1)<<uint(min(cores, 63)) - 1)
		for present != 0 {
			var v uint
			if p == BestFit {
				v = uint(bits.TrailingZeros64(present))
			} else {
				v = uint(63 - bits.LeadingZeros64(present))
			}
			present &^= 1 << v
			if v == 63 {
				// 63 or more free cores share one bit: order them exactly.
				var big []int
				for h := f.nextWith(0, 63, mem, blocks); h >= 0; h = f.nextWith(h+1, 63, mem, blocks) {
					if f.cores[f.size+h] >= cores {
						big = append(big, h)
					}
				}
				slices.SortStableFunc(big, func(a, b int) int {
					ca, cb := f.cores[f.size+a], f.cores[f.size+b]
					if p == WorstFit {
						ca, cb = cb, ca
					}
					return int(ca - cb)
				})
				for _, h := range big {
					if !yield(h) {
						return
					}
				}
				continue
			}
			for h := f.nextWith(0, v, mem, blocks); h >= 0; h = f.nextWith(h+1, v, mem, blocks) {
				if !yield(h) {
					return
				}
			}
		}
	case NextFit:
		start = min(max(start, 0), f.hosts)
		for h := f.next(start, cores, mem, blocks); h >= 0; h = f.next(h+1, cores, mem, blocks) {
			if !yield(h) {
				return
			}
		}
		for h := f.next(0, cores, mem, blocks); h >= 0 && h < start; h = f.next(h+1, cores, mem, blocks) {
			if !yield(h) {
				return
			}
		}
	default:
		for h := f.next(0, cores, mem, blocks); h >= 0; h = f.next(h+1, cores, mem, blocks) {
			if !yield(h) {
				return
			}
		}
	}
}
