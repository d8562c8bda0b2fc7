package provision

import (
	"math"
	"testing"
)

// TestSizerFollowsAWorkingSet: a working set that grows and shrinks is
// followed ahead, within the bounds, never below the last sample.
func TestSizerFollowsAWorkingSet(t *testing.T) {
	const mib = 1 << 20
	s, err := NewSizer(Predictive, Rules{Window: 40, Horizon: 2}, 4*mib, 8*mib, 256*mib, 8*mib)
	if err != nil {
		t.Fatal(err)
	}
	short, peak := 0, int64(0)
	for i := range 300 {
		var ws float64
		switch {
		case i < 120:
			ws = 2 + 1.5*float64(i) // MiB, ramping to about 180
		case i < 200:
			ws = 180
		default:
			ws = 20
		}
		ws += 2 * math.Sin(float64(i))
		demand := int64(ws * mib)
		if s.Size() < demand {
			short++
		}
		_, next := s.Step(demand)
		if next < demand && next < 256*mib {
			t.Fatalf("step %d: next size %d below the sample %d", i, next, demand)
		}
		if next < 8*mib || next > 256*mib {
			t.Fatalf("step %d: size %d outside the bounds", i, next)
		}
		s.Applied(next)
		peak = max(peak, next)
	}
	t.Logf("%d of 300 samples above the size; peak %d MiB; end %d MiB", short, peak/mib, s.Size()/mib)
	if short > 15 {
		t.Errorf("%d samples above the size", short)
	}
	if s.Size() > 40*mib {
		t.Errorf("did not shrink: %d MiB", s.Size()/mib)
	}
	if _, err := NewSizer(Predictive, Rules{}, 0, 1, 2, 1); err == nil {
		t.Error("a zero granule accepted")
	}
	if _, err := NewSizer(Oracle, Rules{}, 1, 1, 2, 1); err == nil {
		t.Error("an oracle sizer accepted")
	}
}
