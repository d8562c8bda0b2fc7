package demand

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// TestRecordedTraces reads every trace kept in testdata (recorded with
// Record, see testdata/README.md) and checks it is usable: it parses, lasts
// 20 s to 3 minutes at 100 ms, stays small, and its demand moves.
func TestRecordedTraces(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "*.csv"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 4 {
		t.Fatalf("%d traces in testdata, want the 4 recorded ones", len(files))
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			fi, err := os.Stat(f)
			if err != nil {
				t.Fatal(err)
			}
			if fi.Size() > 300<<10 {
				t.Errorf("%d bytes: keep testdata traces under 300 KiB", fi.Size())
			}
			tr, err := ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			if len(tr.Entities) != 1 || tr.Interval != 0.1 {
				t.Fatalf("%d entities at %v s, want one at 0.1 s", len(tr.Entities), tr.Interval)
			}
			s := &tr.Entities[0]
			lo, hi := slices.Min(s.MemoryGiB), slices.Max(s.MemoryGiB)
			t.Logf("%s: %.1f s, %d samples, min %.1f MiB, peak %.1f MiB", s.Entity, tr.End(s), s.Len(), lo*1024, hi*1024)
			if d := tr.End(s); d < 20 || d > 200 {
				t.Errorf("lasts %.1f s, want 20 s to about 3 minutes", d)
			}
			if !(hi > 1.2*lo) {
				t.Errorf("peak %.4f GiB, min %.4f GiB: trivial", hi, lo)
			}
			// More than a start-up blip: the demand stays above half its
			// peak for at least a second.
			above := 0
			for _, v := range s.MemoryGiB {
				if v > hi/2 {
					above++
				}
			}
			if above < 10 {
				t.Errorf("above half the peak for %d samples only", above)
			}
		})
	}
}
