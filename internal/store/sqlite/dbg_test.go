package sqlite

import (
	"fmt"
	"slices"
	"testing"
)

func TestMain(m *testing.M) {
	m.Run()
	if len(DebugCommits) == 0 {
		return
	}
	var cd, pre []int64
	var n int64
	for _, c := range DebugCommits {
		cd = append(cd, c[0]/1000)
		pre = append(pre, c[2]/1000)
		n += c[1]
	}
	slices.Sort(cd)
	slices.Sort(pre)
	q := func(a []int64, p float64) int64 { return a[min(len(a)-1, int(p*float64(len(a))))] }
	fmt.Printf("commits %d avg batch %.2f commit µs p50 %d p90 %d p99 %d p999 %d max %d; stmts µs p50 %d p99 %d max %d\n",
		len(cd), float64(n)/float64(len(cd)), q(cd, .5), q(cd, .9), q(cd, .99), q(cd, .999), cd[len(cd)-1], q(pre, .5), q(pre, .99), pre[len(pre)-1])
}
