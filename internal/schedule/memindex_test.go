package schedule

import (
	"math/rand/v2"
	"testing"
)

// TestMemIndex checks the free-count index against a plain slice after
// random updates: buckets present in ranges, the next rank with a bucket,
// the largest free count.
func TestMemIndex(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for _, n := range []int{1, 2, 3, 7, 64, 100} {
		free := make([]int32, n)
		for i := range free {
			free[i] = int32(rng.IntN(70))
		}
		// Node r has 70+r blocks of 1 KiB each.
		l := &memLayout{blocks: make([]int32, n+1), bytes: make([]int64, n+1)}
		for r := range n {
			l.blocks[r+1] = l.blocks[r] + int32(70+r)
			l.bytes[r+1] = l.bytes[r] + int64(70+r)*1024
		}
		m := newMemIndex(l, free)
		for step := range 2000 {
			if step%3 == 0 {
				r := rng.IntN(n)
				free[r] = int32(rng.IntN(70))
				m.set(r, free[r])
			}
			lo := rng.IntN(n + 1)
			hi := lo + rng.IntN(n+1-lo)
			want := uint64(1) << uint(rng.IntN(64))
			if rng.IntN(4) == 0 {
				want |= 1 << uint(rng.IntN(64))
			}
			var mask uint64
			var sum memSum
			first := -1
			for r := lo; r < hi; r++ {
				if free[r] > 0 {
					sum = sum.plus(memSum{int64(free[r]), int64(70 + r), int64(70+r) * 1024})
				}
				mask |= bucket(free[r])
				if first < 0 && bucket(free[r])&want != 0 {
					first = r
				}
			}
			if got := m.sums(lo, hi); got != sum {
				t.Fatalf("n=%d sums(%d,%d) = %+v, want %+v", n, lo, hi, got, sum)
			}
			if got := m.within(lo, hi); got != mask {
				t.Fatalf("n=%d within(%d,%d) = %x, want %x", n, lo, hi, got, mask)
			}
			if got := m.next(lo, hi, want); got != first {
				t.Fatalf("n=%d next(%d,%d,%x) = %d, want %d", n, lo, hi, want, got, first)
			}
			most := 0
			for _, f := range free {
				most = max(most, int(min(f, maxBucket)))
			}
			if got := m.mostFree(); got != most {
				t.Fatalf("n=%d mostFree = %d, want %d", n, got, most)
			}
		}
	}
}
