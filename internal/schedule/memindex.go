package schedule

import (
	"math/bits"

	"rackpool/internal/inventory"
	"rackpool/internal/topology"
)

// memLayout numbers the memory nodes (devices of kind memory) in topology
// order, their rank; a range of ranks is how the scheduler names a set of
// memory nodes (all of a tray's nodes on one plane, say).
type memLayout struct {
	devs []*inventory.Device // by rank
	rank []int32             // by device index; -1 for other kinds
	// blocks and bytes before each rank, for counting a range.
	blocks []int32
	bytes  []int64
}

func newMemLayout(top *topology.Topology) *memLayout {
	l := &memLayout{rank: make([]int32, len(top.Devices))}
	for i, d := range top.Devices {
		l.rank[i] = -1
		if d.Kind == inventory.Memory {
			l.rank[i] = int32(len(l.devs))
			l.devs = append(l.devs, d)
		}
	}
	l.blocks = make([]int32, len(l.devs)+1)
	l.bytes = make([]int64, len(l.devs)+1)
	for i, d := range l.devs {
		l.blocks[i+1] = l.blocks[i] + int32(len(d.Blocks))
		l.bytes[i+1] = l.bytes[i] + d.BlockBytes*int64(len(d.Blocks))
	}
	return l
}

// maxBucket is the bucket of memory nodes with that many free blocks or
// more; below it every free count has its own bucket.
const maxBucket = 63

// bucket is the bit of a free-block count: bit 0 for a full node, bit v
// for v free blocks, bit 63 for 63 or more.
func bucket(free int32) uint64 {
	return 1 << uint(min(max(free, 0), maxBucket))
}

// memIndex is a segment tree over the memory nodes in rank order. Every
// tree node keeps the buckets of free-block counts present below it, so
// the scheduler finds, in any range of ranks, the nodes with a given
// number of free blocks in rank order at O(log n) each, and skips full
// nodes and ranges without what it looks for.
//
// Beside the buckets every tree node sums, below it, the free blocks and
// the blocks and bytes of the nodes that are not full, so that an
// explanation counts a range of nodes it cannot use in O(log n) instead of
// visiting each (sums).
type memIndex struct {
	size int // leaves: the smallest power of two >= nodes
	mask []uint64
	sum  []memSum
	// per rank: a node's blocks and their bytes
	blocks []int32
	bytes  []int64
}

// memSum is what a range of memory nodes holds: free blocks, and the
// blocks and bytes of its nodes with at least one free block.
type memSum struct {
	free, avail int64
	availBytes  int64
}

func (a memSum) plus(b memSum) memSum {
	return memSum{a.free + b.free, a.avail + b.avail, a.availBytes + b.availBytes}
}

func (a memSum) minus(b memSum) memSum {
	return memSum{a.free - b.free, a.avail - b.avail, a.availBytes - b.availBytes}
}

// newMemIndex indexes the nodes of layout l with free blocks free (by rank).
func newMemIndex(l *memLayout, free []int32) *memIndex {
	size := 1
	for size < len(free) {
		size *= 2
	}
	m := &memIndex{size: size, mask: make([]uint64, 2*size), sum: make([]memSum, 2*size),
		blocks: make([]int32, len(free)), bytes: make([]int64, len(free))}
	for i, f := range free {
		m.blocks[i] = l.blocks[i+1] - l.blocks[i]
		m.bytes[i] = l.bytes[i+1] - l.bytes[i]
		m.mask[size+i] = bucket(f)
		m.sum[size+i] = m.leaf(i, f)
	}
	for i := size - 1; i >= 1; i-- {
		m.mask[i] = m.mask[2*i] | m.mask[2*i+1]
		m.sum[i] = m.sum[2*i].plus(m.sum[2*i+1])
	}
	return m
}

// leaf is the sum of the node of rank r alone, with free blocks free.
func (m *memIndex) leaf(r int, free int32) memSum {
	if free <= 0 {
		return memSum{}
	}
	return memSum{free: int64(free), avail: int64(m.blocks[r]), availBytes: m.bytes[r]}
}

// set records that the node of rank r has free blocks free.
func (m *memIndex) set(r int, free int32) {
	i := m.size + r
	m.mask[i] = bucket(free)
	m.sum[i] = m.leaf(r, free)
	for i /= 2; i >= 1; i /= 2 {
		m.mask[i] = m.mask[2*i] | m.mask[2*i+1]
		m.sum[i] = m.sum[2*i].plus(m.sum[2*i+1])
	}
}

// sums returns what the nodes of ranks [lo, hi) hold.
func (m *memIndex) sums(lo, hi int) memSum {
	var acc memSum
	for l, r := lo+m.size, hi+m.size; l < r; l, r = l/2, r/2 {
		if l&1 == 1 {
			acc = acc.plus(m.sum[l])
			l++
		}
		if r&1 == 1 {
			r--
			acc = acc.plus(m.sum[r])
		}
	}
	return acc
}

// within returns the buckets present among ranks [lo, hi).
func (m *memIndex) within(lo, hi int) uint64 {
	var acc uint64
	for l, r := lo+m.size, hi+m.size; l < r; l, r = l/2, r/2 {
		if l&1 == 1 {
			acc |= m.mask[l]
			l++
		}
		if r&1 == 1 {
			r--
			acc |= m.mask[r]
		}
	}
	return acc
}

// next returns the lowest rank in [from, to) whose bucket is in want, or
// -1. It climbs from the leaf of from to the first subtree on its right
// holding want and descends to that subtree's leftmost such leaf: the
// cost grows with the log of the distance walked, not of the whole tree.
func (m *memIndex) next(from, to int, want uint64) int {
	if from >= to {
		return -1
	}
	i := m.size + from
	if m.mask[i]&want == 0 {
		for {
			if i <= 1 {
				return -1
			}
			if i&1 == 0 && m.mask[i+1]&want != 0 {
				i++
				break
			}
			i /= 2
		}
		for i < m.size {
			if m.mask[2*i]&want != 0 {
				i = 2 * i
			} else {
				i = 2*i + 1
			}
		}
	}
	if r := i - m.size; r < to {
		return r
	}
	return -1
}

// mostFree returns the largest free-block count of any node (maxBucket
// meaning that many or more), 0 when every node is full.
func (m *memIndex) mostFree() int {
	free := m.mask[1] &^ 1
	if free == 0 {
		return 0
	}
	return 63 - bits.LeadingZeros64(free)
}
