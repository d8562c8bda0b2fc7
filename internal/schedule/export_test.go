package schedule

import (
	"fmt"
	"slices"
)

// BulkExplain turns countClosed on and off, for a test that compares both.
var BulkExplain = &bulkExplain

// PruneByMemory turns the fit index's memory bound on and off.
var PruneByMemory = &pruneByMemory

// PruneByReach turns the reach's memory bound on and off.
var PruneByReach = &pruneByReach

// CheckBounds verifies that the fit index's memory bounds, kept up to
// date change by change, equal what the state gives when recomputed:
// every host's blocks from circuits and fabrics with a free port, and
// each fabric's free blocks on nodes with a free port.
func CheckBounds(st *State) error {
	for _, h := range st.top.Hosts {
		obt, open := st.obtainable(h)
		i := st.fit.size + h.Index
		if st.fit.obt[i] != obt || st.fit.open[i] != open {
			return fmt.Errorf("host %s: index holds %d blocks, fabrics %b; the state gives %d, %b", h.ID, st.fit.obt[i], st.fit.open[i], obt, open)
		}
	}
	want := make([]int64, len(st.openFree))
	for _, d := range st.top.Devices {
		if b := st.devBit[d.Index]; b >= 0 && st.nodeOpen(d) {
			want[b] += int64(st.devFree[d.Index])
		}
	}
	if !slices.Equal(want, st.openFree) {
		return fmt.Errorf("open free blocks by fabric %v, recomputed %v", st.openFree, want)
	}
	for n := st.fit.size - 1; n >= 1; n-- {
		l, r := 2*n, 2*n+1
		if st.fit.obt[n] != max(st.fit.obt[l], st.fit.obt[r]) || st.fit.open[n] != st.fit.open[l]|st.fit.open[r] {
			return fmt.Errorf("fit index node %d does not sum its children", n)
		}
	}
	return nil
}
