package slurm

import (
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestKeepWarmForecast: regular resumes of a feature set forecast another
// in the next interval, a lone old one does not; the history drops what is
// older than the window and survives concurrent writers.
func TestKeepWarmForecast(t *testing.T) {
	k := &KeepWarm{State: filepath.Join(t.TempDir(), "h.json")}
	k.defaults()
	t0 := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	var h *history
	read := func(now time.Time) {
		if err := k.update(now, func(x *history) error { h = x; return nil }); err != nil {
			t.Fatal(err)
		}
	}
	add := func(at time.Time, feats ...string) {
		if err := k.update(at, func(x *history) error {
			x.Resumes[featureKey(feats)] = append(x.Resumes[featureKey(feats)], at)
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	add(t0, "gpu2")
	now := t0.Add(3 * time.Hour)
	read(now)
	if f := k.forecast(h, []string{"gpu2"}, now); f >= k.Threshold {
		t.Errorf("one resume three hours ago forecasts %.2f, want under %.2f", f, k.Threshold)
	}
	for i := range 12 { // one an interval for the last two hours
		add(now.Add(-time.Duration(12-i)*k.Interval), "nvme", "gpu2")
	}
	read(now)
	if f := k.forecast(h, []string{"gpu2", "nvme"}, now); f < k.Threshold {
		t.Errorf("a resume every interval forecasts %.2f, want at least %.2f", f, k.Threshold)
	}
	read(t0.Add(k.Window + 4*time.Hour))
	if len(h.Resumes) != 0 {
		t.Errorf("after the window the history holds %v", h.Resumes)
	}
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() { add(now.Add(time.Duration(i)*time.Second), "gpu1") })
	}
	wg.Wait()
	read(now)
	if n := len(h.Resumes["gpu1"]); n != 8 {
		t.Errorf("8 concurrent writers left %d resumes", n)
	}
}

func TestKeepWarmConfig(t *testing.T) {
	for bad, want := range map[string]string{
		"nodes: {n1: {host: host1}}\nkeep_warm: {interval: 10m}":                        "state",
		"nodes: {n1: {host: host1}}\nkeep_warm: {state: /x, interval: 10m, window: 5m}": "two intervals",
	} {
		if _, err := ParseConfig("c.yaml", []byte(bad)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want an error with %q", bad, err, want)
		}
	}
	c, err := ParseConfig("c.yaml", []byte("nodes: {n1: {host: host1}}\nkeep_warm: {state: /x}"))
	if err != nil || c.KeepWarm.Interval != 10*time.Minute || c.KeepWarm.Threshold != 0.5 {
		t.Errorf("defaults: %+v, %v", c.KeepWarm, err)
	}
}
