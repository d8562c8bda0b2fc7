package provision

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestWriteReport(t *testing.T) {
	in := rampInput(3, 240)
	rules := Rules{Window: 40, Horizon: 2}
	all, err := Compare(in, rules, true)
	if err != nil {
		t.Fatal(err)
	}
	if all[1].Summary.Policy != Reactive || all[1].Summary.ProvisionedGiBHours < all[2].Summary.ProvisionedGiBHours {
		t.Fatalf("reactive not matched to predictive: %+v vs %+v", all[1].Summary, all[2].Summary)
	}
	sw, err := RunSweep(in, rules, []int{24, 48}, []int{1, 2, 4}, nil)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := WriteReport(dir, Report{Trace: "ramps.csv", Chosen: all[2], All: all, Matched: true, Sweep: sw}); err != nil {
		t.Fatal(err)
	}
	var s map[string]any
	b, err := os.ReadFile(filepath.Join(dir, SummaryFile))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &s); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"policy", "entities", "intervals", "provisioned_gib_hours", "demand_gib_hours",
		"static_peak_gib_hours", "saving_vs_static_peak", "short_interval_fraction", "shortfall_gib_hours", "reconfigurations_per_hour"} {
		if _, ok := s[k]; !ok {
			t.Errorf("summary.json lacks %q: %s", k, b)
		}
	}
	if s["policy"] != "predictive" || s["entities"].(float64) != 3 || s["intervals"].(float64) != 720 {
		t.Errorf("summary %s", b)
	}
	html, err := os.ReadFile(filepath.Join(dir, ReportFile))
	if err != nil {
		t.Fatal(err)
	}
	page := string(html)
	if n := strings.Count(page, "<svg"); n != 3+1+2 {
		t.Errorf("report has %d charts, want 3 entities + CDF + 2 sweep charts", n)
	}
	for _, want := range []string{"static-peak", "oracle", "equal memory", "Shortfall CDF"} {
		if !strings.Contains(page, want) {
			t.Errorf("report lacks %q", want)
		}
	}
	if strings.Contains(page, "http://") || strings.Contains(page, "https://") {
		t.Error("report refers to an external resource")
	}
}
