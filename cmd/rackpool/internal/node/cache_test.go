package node

import (
	"testing"
	"time"
)

func TestCacheAutoFlags(t *testing.T) {
	for _, tc := range []struct {
		min, max, granule string
		step              time.Duration
	}{
		{"0", "1GiB", "4MiB", time.Second},
		{"16MiB", "8MiB", "4MiB", time.Second},
		{"16MiB", "1GiB", "lots", time.Second},
		{"16MiB", "1GiB", "4MiB", time.Millisecond},
		{"5MiB", "7MiB", "4MiB", time.Second}, // no whole granule between
	} {
		if _, err := newAutoRemote(tc.min, tc.max, tc.granule, tc.step); err == nil {
			t.Errorf("%+v accepted", tc)
		}
	}
	a, err := newAutoRemote("16MiB", "1GiB", "4MiB", time.Second)
	if err != nil || a.sizer.Size() != 16<<20 {
		t.Fatalf("defaults: %v, size %d", err, a.sizer.Size())
	}
}
