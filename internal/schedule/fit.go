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
// Every node also keeps a bound on the pooled memory blocks any host below
// it could still obtain (State.obtainable): the most free blocks of the
// memory nodes a host's optical ports are circuited to (obt), and the
// optical memory fabrics on which some host below has a free port (open,
// a bit per fabric), each worth the free blocks of the fabric's memory
// nodes that have a free port themselves (State.openFree, read when a
// search asks). A request for pooled memory so skips, a subtree at a
// time, the hosts that could not get it: on a saturated pod, where the
// nodes with free blocks have no free port, a refusal costs O(log n), not
// a walk of every host with free cores.
type fitIndex struct {
	size  int // leaves: the smallest power of two >= hosts
	hosts int
	cores []int32 // 2*size nodes; leaves at [size, size+hosts)
	mem   []int32
	obt   []int32
	open  []uint64
	mask  []uint64
	// openFree is the State's, by fabric bit.
	openFree []int64
}

// fitAsk is what a search asks of the index: free cores, free memory and
// obtainable pooled memory blocks; openMask and openSum keep the last set
// of fabrics obtains summed (most nodes of a search share one).
type fitAsk struct {
	cores, mem, blocks int32
	openMask           uint64
	openSum            int64
}

// obtains reports whether some host below node could obtain a.blocks
// pooled memory blocks.
func (f *fitIndex) obtains(node int, a *fitAsk) bool {
	have := int64(f.obt[node])
	if have >= int64(a.blocks) {
		return true
	}
	if m := f.open[node]; m != a.openMask {
		var sum int64
		for ; m != 0; m &= m - 1 {
			sum += f.openFree[bits.TrailingZeros64(m)]
		}
		a.openMask, a.openSum = f.open[node], sum
	}
	return have+a.openSum >= int64(a.blocks)
}

func newFitIndex(cores, mem, obt []int32, open []uint64, openFree []int64) *fitIndex {
	n := len(cores)
	size := 1
	for size < n {
		size *= 2
	}
	f := &fitIndex{size: size, hosts: n, cores: make([]int32, 2*size), mem: make([]int32, 2*size), obt: make([]int32, 2*size),
		open: make([]uint64, 2*size), mask: make([]uint64, 2*size), openFree: openFree}
	for i := range n {
		f.cores[size+i], f.mem[size+i], f.obt[size+i], f.open[size+i], f.mask[size+i] = cores[i], mem[i], obt[i], open[i], coreBit(cores[i])
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

// pull recomputes inner node i from its children and reports whether it
// changed: when it did not, nothing above it changes either.
func (f *fitIndex) pull(i int) bool {
	l, r := 2*i, 2*i+1
	cores, mem, obt := max(f.cores[l], f.cores[r]), max(f.mem[l], f.mem[r]), max(f.obt[l], f.obt[r])
	open, mask := f.open[l]|f.open[r], f.mask[l]|f.mask[r]
	if cores == f.cores[i] && mem == f.mem[i] && obt == f.obt[i] && open == f.open[i] && mask == f.mask[i] {
		return false
	}
	f.cores[i], f.mem[i], f.obt[i], f.open[i], f.mask[i] = cores, mem, obt, open, mask
	return true
}

// up recomputes the inner nodes above leaf i, stopping where nothing
// changes.
func (f *fitIndex) up(i int) {
	for i /= 2; i >= 1; i /= 2 {
		if !f.pull(i) {
			return
		}
	}
}

// setObtainable records what pooled memory host h could obtain: obt
// blocks from its circuits, and the fabrics with a free port of it.
func (f *fitIndex) setObtainable(h int, obt int32, open uint64) {
	i := f.size + h
	if f.obt[i] == obt && f.open[i] == open {
		return
	}
	f.obt[i], f.open[i] = obt, open
	f.up(i)
}

// addObtainable adds delta to the blocks host h could obtain from its
// circuits.
func (f *fitIndex) addObtainable(h int, delta int32) {
	i := f.size + h
	if f.obt[i] == unbounded {
		return
	}
	f.obt[i] += delta
	f.up(i)
}

// set records host h's free cores and memory.
func (f *fitIndex) set(h int, cores, mem int32) {
	i := f.size + h
	f.cores[i], f.mem[i], f.mask[i] = cores, mem, coreBit(cores)
	f.up(i)
}

// next returns the lowest host index >= from with at least cores free
// cores, mem free memory and blocks obtainable pooled memory blocks, or -1.
func (f *fitIndex) next(from int, a *fitAsk) int {
	if from >= f.hosts {
		return -1
	}
	return f.descend(1, 0, f.size, from, a)
}

func (f *fitIndex) descend(node, lo, hi, from int, a *fitAsk) int {
	if hi <= from || f.cores[node] < a.cores || f.mem[node] < a.mem || a.blocks > 0 && !f.obtains(node, a) {
		return -1
	}
	if node >= f.size {
		if node-f.size >= f.hosts {
			return -1
		}
		return node - f.size
	}
	mid := (lo + hi) / 2
	if r := f.descend(2*node, lo, mid, from, a); r >= 0 {
		return r
	}
	return f.descend(2*node+1, mid, hi, from, a)
}

// nextWith returns the lowest host index >= from whose free-core bit is v
// and that has at least mem free memory, or -1.
func (f *fitIndex) nextWith(from int, v uint, a *fitAsk) int {
	return f.descendBit(1, 0, f.size, from, uint64(1)<<v, a)
}

func (f *fitIndex) descendBit(node, lo, hi, from int, bit uint64, a *fitAsk) int {
	if hi <= from || f.mask[node]&bit == 0 || f.mem[node] < a.mem || a.blocks > 0 && !f.obtains(node, a) {
		return -1
	}
	if node >= f.size {
		return node - f.size
	}
	mid := (lo + hi) / 2
	if r := f.descendBit(2*node, lo, mid, from, bit, a); r >= 0 {
		return r
	}
	return f.descendBit(2*node+1, mid, hi, from, bit, a)
}

// order yields candidate host indices for a share of cores and mem in the
// order policy p tries them, skipping hosts without enough free cores or
// memory, or that cannot obtain blocks pooled memory blocks. start is where
// next-fit begins (wrapping around). yield returns the index to go on from
// (h+1, or past hosts it knows will not do), or -1 to stop.
func (f *fitIndex) order(p Policy, start int, cores, mem, blocks int32, yield func(int) int) {
	cores = max(cores, 1)
	a := &fitAsk{cores: cores, mem: mem, blocks: blocks}
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
				for h := f.nextWith(0, 63, a); h >= 0; h = f.nextWith(h+1, 63, a) {
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
					if yield(h) < 0 {
						return
					}
				}
				continue
			}
			for h := f.nextWith(0, v, a); h >= 0; {
				from := yield(h)
				if from < 0 {
					return
				}
				h = f.nextWith(from, v, a)
			}
		}
	case NextFit:
		start = min(max(start, 0), f.hosts)
		for h := f.next(start, a); h >= 0; {
			from := yield(h)
			if from < 0 {
				return
			}
			h = f.next(from, a)
		}
		for h := f.next(0, a); h >= 0 && h < start; {
			from := yield(h)
			if from < 0 {
				return
			}
			h = f.next(min(from, start), a)
		}
	default:
		for h := f.next(0, a); h >= 0; {
			from := yield(h)
			if from < 0 {
				return
			}
			h = f.next(from, a)
		}
	}
}
