package main

import (
	"encoding/xml"
	"errors"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// testPenaltyReport is a report with every system at three sizes and two
// fractions below 100%, a memcached throughput penalty far off rackpool's
// scale, a missing run and a NaN.
func testPenaltyReport() (*config, *Report) {
	cfg := &config{Sizes: []int{4096, 65536, 524288}, Fractions: []int{100, 75, 25}, Threads: []int{1, 10},
		Systems: []string{sysRackpool, sysMemcached, sysExtstore}}
	rep := &Report{Config: cfg}
	p := func(v float64) *float64 { return &v }
	for _, sys := range cfg.Systems {
		for i, size := range cfg.Sizes {
			for _, frac := range cfg.Fractions[1:] {
				if sys == sysExtstore && size == 65536 && frac == 25 {
					continue // a run that failed
				}
				lat, tput := 0.05*float64(i+1)*float64(100-frac)/25, 0.1*float64(i+1)
				if sys == sysMemcached {
					tput = -1.5 // far below rackpool's scale
				}
				if sys == sysExtstore && size == 4096 {
					lat = math.NaN()
				}
				rep.Results = append(rep.Results,
					Result{System: sys, ValueBytes: size, LocalPct: frac, Threads: 1, LatPenalty: p(lat)},
					Result{System: sys, ValueBytes: size, LocalPct: frac, Threads: 10, TputPenalty: p(tput)})
			}
		}
	}
	return cfg, rep
}

// svgText parses doc as XML and returns its text, one element a line.
func svgText(t *testing.T, doc []byte) string {
	t.Helper()
	d := xml.NewDecoder(strings.NewReader(string(doc)))
	var b strings.Builder
	for {
		tok, err := d.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("penalty.svg does not parse: %v", err)
		}
		if cd, ok := tok.(xml.CharData); ok {
			b.Write(cd)
			b.WriteByte('\n')
		}
	}
	return b.String()
}

func TestPenaltyChart(t *testing.T) {
	cfg, rep := testPenaltyReport()
	svg, err := penaltyChart(cfg, rep)
	if err != nil {
		t.Fatal(err)
	}
	lines := map[string]bool{}
	for _, l := range strings.Split(svgText(t, svg), "\n") {
		lines[l] = true
	}
	for _, want := range []string{
		"rackpool cache vs memcached vs memcached+extstore: penalty against 100% local (P0 Fig. 9/10)",
		"GET latency penalty (mean), 1 thread", "throughput penalty, 10 threads",
		"value size", "penalty against 100% local (%)", "4KiB", "64KiB", "512KiB",
		"rackpool", "memcached", "extstore", "75% of the data set", "25% of the data set",
		"75%: -150.0%", "25%: -150.0%", // memcached off the scale, written at the edge
	} {
		if !lines[want] {
			t.Errorf("penalty.svg has no text %q", want)
		}
	}
	if strings.Contains(string(svg), "NaN") {
		t.Error("a NaN reached penalty.svg")
	}
	again, err := penaltyChart(cfg, rep)
	if err != nil || string(again) != string(svg) {
		t.Errorf("a second render differs (error %v)", err)
	}

	// -replot redraws the same chart from results.json.
	dir := t.TempDir()
	for i := range rep.Results {
		if v := rep.Results[i].LatPenalty; v != nil && math.IsNaN(*v) {
			rep.Results[i].LatPenalty = nil // JSON has no NaN
		}
	}
	want, err := penaltyChart(cfg, rep)
	if err != nil {
		t.Fatal(err)
	}
	if err := writeJSON(filepath.Join(dir, "results.json"), rep); err != nil {
		t.Fatal(err)
	}
	if err := replotPenalty(filepath.Join(dir, "results.json"), dir); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(filepath.Join(dir, "penalty.svg"))
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != string(want) {
		t.Error("-replot drew a different chart from the same results")
	}
	if err := os.WriteFile(filepath.Join(dir, "bad.json"), []byte(`{"results": []}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := replotPenalty(filepath.Join(dir, "bad.json"), dir); err == nil {
		t.Error("replotted a results.json with no configuration")
	}
}
