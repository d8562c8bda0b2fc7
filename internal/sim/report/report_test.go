package report

import (
	"encoding/csv"
	"encoding/json"
	"errors"
	"math"
	"os"
	"path/filepath"
	"rackpool/internal/chart"
	"rackpool/internal/chart/charttest"
	"rackpool/internal/sim"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// testFullSummary sets every field of a sim.Summary, so that a test can check that
// each one reaches summary.json and report.html.
func testFullSummary() sim.Summary {
	return sim.Summary{
		Name:            "pool vs servers <run 1>",
		Seed:            42,
		Architecture:    "composable",
		Network:         "optical",
		Policy:          "best-fit",
		Requests:        12345,
		Accepted:        12000,
		Rejected:        345,
		AcceptanceRatio: 12000.0 / 12345,
		BlockingRatio:   345.0 / 12345,
		Rejections:      map[string]int{"in-use": 300, "<script>alert(1)</script>": 45},
		MeanUtilisation: map[string]float64{"cores": 0.61, "memory_gb": 0.72, "gpus": 0.4},
		PeakUtilisation: map[string]float64{"cores": 0.99, "memory_gb": 1, "gpus": 0.8},
		HopShare:        map[string]float64{"1": 0.625, "2": 0.25, "10": 0.125},
		RTTMeanNS:       512.5,
		RTTP50NS:        480,
		RTTP99NS:        980,
		SwitchPowerW:    &sim.Power{PerPortW: 0.3, InstalledPorts: 4096, InstalledW: 1228.8, ActiveMeanW: 301.2, ActivePeakW: 612},
		Cost: &sim.Cost{
			UnitCost:    map[string]float64{"cores": 10, "memory_gb": 2},
			Units:       map[string]float64{"cores": 1000, "memory_gb": 8000},
			Utilisation: map[string]float64{"cores": 0.61, "memory_gb": 0.72},
			Total:       38617.85,
		},
		Slowdown:         &sim.Slowdown{MFP: 0.3, LocalNS: 90, MeanRemoteNS: 512.5, Mean: 1.41, P99: 2.9},
		Demand:           &sim.Demand{Nodes: 64, NodePeakToAverage: 3.1, AggPeakToAverage: 1.4, SumOfPeaksGB: 8192, AggregatePeakGB: 3700, PoolSavingRatio: 0.548, Expansions: 120, ExpansionsFailed: 3},
		WallSeconds:      1.25,
		DecisionsPerSec:  9876,
		VirtualTimeUnits: 1000,
	}
}

// testFullResult is a composable run with every kind of data.
func testFullResult(samples int) *sim.Result {
	res := &sim.Result{Summary: testFullSummary()}
	for i := 0; i < samples; i++ {
		res.Samples = append(res.Samples, sim.Sample{
			T:            float64(i) * 0.5,
			Running:      i % 50,
			Used:         map[string]float64{"cores": float64(i % 100), "memory_gb": float64(i%400) * 2},
			Capacity:     map[string]float64{"cores": 100, "memory_gb": 800, "gpus": 16},
			ActivePowerW: float64(i%7) * 10,
			Requests:     4 * i,
			Accepted:     3 * i,
		})
	}
	for i := 0; i < 5000; i++ {
		res.RTTNS = append(res.RTTNS, 300+float64(i%977)*0.5)
		res.Hops = append(res.Hops, 1+i%3)
	}
	return res
}

func readReportFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func readReportCSV(t *testing.T, path string) [][]string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	recs, err := csv.NewReader(f).ReadAll()
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return recs
}

func reportDirNames(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}

// assertNoTempLeft fails if anything of writeAtomically's is left next to dir.
func assertNoTempLeft(t *testing.T, dir string) {
	t.Helper()
	base := filepath.Base(dir)
	for _, n := range reportDirNames(t, filepath.Dir(dir)) {
		if strings.HasPrefix(n, "."+base+".") {
			t.Errorf("temporary %s left behind next to %s", n, dir)
		}
	}
}

func TestWriteReportWritesEveryFile(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "out")
	res := testFullResult(3000)
	if err := WriteReport(dir, res); err != nil {
		t.Fatal(err)
	}
	assertNoTempLeft(t, dir)
	want := []string{"acceptance.svg", "hops.csv", "hops.svg", "latency_cdf.csv", "latency_cdf.svg", "power.svg", "report.html", "summary.json", "timeseries.csv", "utilisation.svg"}
	if got := reportDirNames(t, dir); !slices.Equal(got, want) {
		t.Fatalf("files %v, want %v", got, want)
	}
	// Every plot has its title, axis labels with units, and a legend where
	// there are several series.
	for svg, want := range map[string][]string{
		"utilisation.svg": {"Utilisation by resource type", "virtual time (scenario time units)", "utilisation (%)", "cores", "GPUs", "memory"},
		"acceptance.svg":  {"Acceptance over time", "virtual time (scenario time units)", "requests placed (%)", "since the previous sample", "since the start"},
		"latency_cdf.svg": {"Round-trip time CDF", "round trip (ns)", "blocks at or below (%)"},
		"hops.svg":        {"Remote memory blocks by switch hops", "switch hops", "share of blocks (%)", "1", "2", "3", "33.3%"},
		"power.svg":       {"Active optical switch power", "virtual time (scenario time units)", "power (W)"},
	} {
		texts := charttest.Texts(charttest.Check(t, readReportFile(t, filepath.Join(dir, svg)), false))
		for _, w := range want {
			if !texts[w] {
				t.Errorf("%s has no text %q", svg, w)
			}
		}
	}

	// summary.json reads back to the same summary.
	raw := readReportFile(t, filepath.Join(dir, "summary.json"))
	if !strings.HasSuffix(raw, "}\n") || !strings.Contains(raw, "\n  \"name\"") {
		t.Errorf("summary.json is not indented JSON with a trailing newline:\n%s", raw)
	}
	var back sim.Summary
	if err := json.Unmarshal([]byte(raw), &back); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back, res.Summary) {
		t.Errorf("summary.json round trip:\n got %+v\nwant %+v", back, res.Summary)
	}

	ts := readReportCSV(t, filepath.Join(dir, "timeseries.csv"))
	head := "t,running,cores_used,cores_capacity,cores_utilisation,gpus_used,gpus_capacity,gpus_utilisation,memory_gb_used,memory_gb_capacity,memory_gb_utilisation,active_power_w,requests,accepted,window_acceptance"
	if got := strings.Join(ts[0], ","); got != head {
		t.Errorf("timeseries.csv header\n %s\nwant\n %s", got, head)
	}
	if len(ts) != 1+len(res.Samples) {
		t.Errorf("timeseries.csv has %d rows, want %d", len(ts)-1, len(res.Samples))
	}
	if got := strings.Join(ts[2], ","); got != "0.5,1,1,100,0.01,0,16,0,2,800,0.0025,10,4,3,0.75" {
		t.Errorf("timeseries.csv second sample %s", got)
	}

	cdf := readReportCSV(t, filepath.Join(dir, "latency_cdf.csv"))
	if strings.Join(cdf[0], ",") != "rtt_ns,cdf" || len(cdf) < 2 || len(cdf) > 1+maxCDFRows {
		t.Errorf("latency_cdf.csv: header %v, %d rows", cdf[0], len(cdf)-1)
	}
	if last := cdf[len(cdf)-1]; last[0] != "788" || last[1] != "1" {
		t.Errorf("latency_cdf.csv ends at %v, want the largest round trip, 788, at 1", last)
	}

	hops := readReportCSV(t, filepath.Join(dir, "hops.csv"))
	if got := strings.Join(hops[0], ","); got != "hops,blocks,share" {
		t.Errorf("hops.csv header %s", got)
	}
	total := 0.0
	for _, r := range hops[1:] {
		v, err := strconv.ParseFloat(r[2], 64)
		if err != nil {
			t.Fatal(err)
		}
		total += v
	}
	if len(hops) != 4 || total < 0.999999 || total > 1.000001 {
		t.Errorf("hops.csv: %d rows, shares sum to %v", len(hops)-1, total)
	}
}

func TestReportHTMLIsSelfContained(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "out")
	res := testFullResult(200)
	if err := WriteReport(dir, res); err != nil {
		t.Fatal(err)
	}
	page := readReportFile(t, filepath.Join(dir, "report.html"))
	lower := strings.ToLower(page)
	for _, bad := range []string{"http://", "https://", "<script", "src=", "<link", "@import", "url("} {
		if strings.Contains(lower, bad) {
			t.Errorf("report.html contains %q", bad)
		}
	}
	for _, want := range []string{
		"<!DOCTYPE html>",
		"pool vs servers &lt;run 1&gt;",         // the title, escaped
		"&lt;script&gt;alert(1)&lt;/script&gt;", // a rejection reason, escaped
		sim.ReasonMeanings["in-use"],            // and what a known one means
		"composable architecture", "best-fit policy",
		"97.2%",          // acceptance ratio
		"12,345",         // requests
		"61.0%",          // mean cores utilisation
		"513 / 980 ns",   // round trip
		"1229 W",         // installed switch power
		"38617.9",        // Eq. 1 total
		"<svg", "</svg>", // inlined plots
		"<figcaption>",
	} {
		if !strings.Contains(page, want) {
			t.Errorf("report.html lacks %q", want)
		}
	}
	if got := strings.Count(page, "<svg"); got != 5 {
		t.Errorf("report.html inlines %d plots, want 5", got)
	}
	// Each inlined plot is well-formed on its own, with nothing (ids,
	// style sheets, references) to clash with the others or to fetch.
	for i, svg := range inlinedSVGs(page) {
		charttest.Check(t, svg, true)
		if !strings.Contains(svg, "font-family:Liberation Sans,Arial,Helvetica,sans-serif;") {
			t.Errorf("inlined plot %d lacks the charts' font stack", i)
		}
	}
	if strings.Contains(page, "<?xml") || strings.Contains(page, "xmlns") {
		t.Error("report.html holds an XML declaration or namespace declaration")
	}

	// Every summary field is in the details, by its summary.json key.
	var keys func(prefix string, v any)
	keys = func(prefix string, v any) {
		m, ok := v.(map[string]any)
		if !ok {
			return
		}
		for k, sub := range m {
			if prefix == "" || !slices.Contains([]string{"rejections", "mean_utilisation", "peak_utilisation", "hop_share", "unit_cost", "units", "utilisation"}, prefix) {
				if !strings.Contains(page, k) {
					t.Errorf("report.html lacks summary field %s%s", prefix+".", k)
				}
			}
			keys(k, sub)
		}
	}
	var generic map[string]any
	if err := json.Unmarshal([]byte(readReportFile(t, filepath.Join(dir, "summary.json"))), &generic); err != nil {
		t.Fatal(err)
	}
	keys("", generic)
}

// inlinedSVGs returns every <svg>…</svg> of an HTML page.
func inlinedSVGs(page string) []string {
	var out []string
	for {
		start := strings.Index(page, "<svg")
		if start < 0 {
			return out
		}
		end := strings.Index(page[start:], "</svg>")
		if end < 0 {
			return append(out, page[start:])
		}
		out = append(out, page[start:start+end+len("</svg>")])
		page = page[start+end:]
	}
}

func TestWriteReportWithoutRemoteMemory(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "out")
	res := &sim.Result{Summary: sim.Summary{Name: "servers", Architecture: "traditional", Requests: 10, Accepted: 10, AcceptanceRatio: 1}}
	for i := 0; i < 10; i++ {
		res.Samples = append(res.Samples, sim.Sample{T: float64(i), Used: map[string]float64{"cores": 1}, Capacity: map[string]float64{"cores": 4}})
	}
	if err := WriteReport(dir, res); err != nil {
		t.Fatal(err)
	}
	want := []string{"acceptance.svg", "report.html", "summary.json", "timeseries.csv", "utilisation.svg"}
	if got := reportDirNames(t, dir); !slices.Equal(got, want) {
		t.Errorf("files %v, want %v", got, want)
	}
	var back sim.Summary
	if err := json.Unmarshal([]byte(readReportFile(t, filepath.Join(dir, "summary.json"))), &back); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back, res.Summary) {
		t.Errorf("summary.json round trip:\n got %+v\nwant %+v", back, res.Summary)
	}
	if err := WriteReport(filepath.Join(t.TempDir(), "x"), nil); err == nil {
		t.Error("WriteReport accepted a nil result")
	}
}

func TestWriteReportIsDeterministic(t *testing.T) {
	root := t.TempDir()
	a, b := filepath.Join(root, "a"), filepath.Join(root, "b")
	if err := WriteReport(a, testFullResult(500)); err != nil {
		t.Fatal(err)
	}
	if err := WriteReport(b, testFullResult(500)); err != nil {
		t.Fatal(err)
	}
	for _, n := range reportDirNames(t, a) {
		if readReportFile(t, filepath.Join(a, n)) != readReportFile(t, filepath.Join(b, n)) {
			t.Errorf("%s differs between two writes of the same result", n)
		}
	}
}

// snapshotTree is every file under dir and its contents.
func snapshotTree(t *testing.T, dir string) map[string]string {
	t.Helper()
	files := map[string]string{}
	err := filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, path)
		if d.IsDir() {
			files[rel+"/"] = ""
			return nil
		}
		b, err := os.ReadFile(path)
		files[rel] = string(b)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

func TestWriteReportExistingDirectory(t *testing.T) {
	res := testFullResult(20)

	t.Run("empty directory", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "out")
		if err := os.Mkdir(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := WriteReport(dir, res); err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(filepath.Join(dir, "report.html")); err != nil {
			t.Error(err)
		}
		assertNoTempLeft(t, dir)
	})

	t.Run("earlier output is replaced", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "out")
		if err := os.Mkdir(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		for _, f := range []string{"summary.json", "stale.svg"} {
			if err := os.WriteFile(filepath.Join(dir, f), []byte("old"), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		if err := WriteReport(dir, res); err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(filepath.Join(dir, "stale.svg")); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("stale file of the earlier output survived: %v", err)
		}
		if readReportFile(t, filepath.Join(dir, "summary.json")) == "old" {
			t.Error("summary.json was not replaced")
		}
		assertNoTempLeft(t, dir)
		// A sweep may replace a run, and a run a sweep.
		if err := WriteSweepReport(dir, []string{"load"}, testSweepRows(0)); err != nil {
			t.Fatal(err)
		}
		if err := WriteReport(dir, res); err != nil {
			t.Fatal(err)
		}
		assertNoTempLeft(t, dir)
	})

	t.Run("foreign directory is refused", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "home")
		if err := os.MkdirAll(filepath.Join(dir, "notes"), 0o755); err != nil {
			t.Fatal(err)
		}
		for name, body := range map[string]string{"thesis.tex": "\\chapter{One}", "notes/todo.txt": "write", "summary.json.bak": "{}"} {
			if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		before := snapshotTree(t, dir)
		err := WriteReport(dir, res)
		if err == nil || !strings.Contains(err.Error(), "is not empty and holds no earlier rackpool sim output; choose another --out") || !strings.Contains(err.Error(), dir) {
			t.Fatalf("error %v", err)
		}
		if after := snapshotTree(t, dir); !reflect.DeepEqual(before, after) {
			t.Errorf("foreign directory changed:\nbefore %v\nafter  %v", before, after)
		}
		assertNoTempLeft(t, dir)
		if err := WriteSweepReport(dir, []string{"load"}, testSweepRows(0)); err == nil {
			t.Error("WriteSweepReport wrote into a foreign directory")
		}
		assertNoTempLeft(t, dir)
	})

	t.Run("regular file is refused", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "out")
		if err := os.WriteFile(path, []byte("mine"), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := WriteReport(path, res); err == nil {
			t.Fatal("WriteReport replaced a regular file")
		}
		if readReportFile(t, path) != "mine" {
			t.Error("regular file changed")
		}
		assertNoTempLeft(t, path)
	})

	t.Run("missing parent is created", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "a", "b", "out")
		if err := WriteReport(dir, res); err != nil {
			t.Fatal(err)
		}
		assertNoTempLeft(t, dir)
	})
}

func TestWriteAtomicallyFailureLeavesNothing(t *testing.T) {
	boom := errors.New("boom")
	fill := func(tmp string) error {
		if err := os.WriteFile(filepath.Join(tmp, "summary.json"), []byte("half"), 0o644); err != nil {
			return err
		}
		return boom
	}

	dir := filepath.Join(t.TempDir(), "out")
	if err := writeAtomically(dir, fill); !errors.Is(err, boom) {
		t.Fatalf("error %v, want boom", err)
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("output directory exists after a failed write: %v", err)
	}
	assertNoTempLeft(t, dir)

	// Earlier output survives a failed replacement untouched.
	if err := WriteReport(dir, testFullResult(10)); err != nil {
		t.Fatal(err)
	}
	before := snapshotTree(t, dir)
	if err := writeAtomically(dir, fill); !errors.Is(err, boom) {
		t.Fatalf("error %v, want boom", err)
	}
	if after := snapshotTree(t, dir); !reflect.DeepEqual(before, after) {
		t.Error("earlier output changed by a failed write")
	}
	assertNoTempLeft(t, dir)
}

// testSweepRows is a two-axis sweep: links × load, shard s.
func testSweepRows(shard int) []sim.SweepRow {
	var rows []sim.SweepRow
	for _, links := range []float64{2, 4} {
		for _, load := range []float64{0.5, 0.75, 1, 1.25} {
			pw := &sim.Power{InstalledW: 100 * links, ActiveMeanW: 40 * load}
			rows = append(rows, sim.SweepRow{
				Params: map[string]float64{"links": links, "load": load},
				Shard:  shard,
				Summary: sim.Summary{
					Requests: 1000, Accepted: int(1000 / (load * 1.1)), AcceptanceRatio: 1 / (load * 1.1),
					MeanUtilisation: map[string]float64{"cores": load / 2, "memory_gb": load / 3},
					RTTMeanNS:       400 + 10*links, SwitchPowerW: pw, WallSeconds: 0.5,
				},
			})
		}
	}
	return rows
}

func TestWriteSweepReport(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "sweep")
	rows := testSweepRows(3)
	rows[0].Summary.Cost = &sim.Cost{Total: 123.5}
	rows[0].Summary.Rejections = map[string]int{"in-use": 5, "fragmentation": 2}
	rows[1].Summary.Rejections = map[string]int{"in-use": 1}
	axes := []string{"links", "load"}
	if err := WriteSweepReport(dir, axes, rows); err != nil {
		t.Fatal(err)
	}
	assertNoTempLeft(t, dir)
	if got, want := reportDirNames(t, dir), []string{"report.html", "sweep.csv", "sweep.json", "sweep.svg"}; !slices.Equal(got, want) {
		t.Fatalf("files %v, want %v", got, want)
	}

	recs := readReportCSV(t, filepath.Join(dir, "sweep.csv"))
	head := "links,load,shard,requests,accepted,acceptance_ratio,mean_utilisation_cores,mean_utilisation_memory_gb,rtt_mean_ns,switch_power_installed_w,switch_power_active_mean_w,cost_total,wall_seconds,rejected_fragmentation,rejected_in-use"
	if got := strings.Join(recs[0], ","); got != head {
		t.Errorf("sweep.csv header\n %s\nwant\n %s", got, head)
	}
	if len(recs) != 1+len(rows) {
		t.Fatalf("sweep.csv has %d rows, want %d", len(recs)-1, len(rows))
	}
	if got := strings.Join(recs[1][:4], ","); got != "2,0.5,3,1000" {
		t.Errorf("sweep.csv first row starts %s", got)
	}
	if recs[1][11] != "123.5" || recs[2][11] != "" {
		t.Errorf("cost_total cells %q, %q", recs[1][11], recs[2][11])
	}
	// Rejections by reason: a count in every row, 0 where a row has none.
	if got := [][]string{recs[1][13:], recs[2][13:], recs[3][13:]}; !reflect.DeepEqual(got, [][]string{{"2", "5"}, {"0", "1"}, {"0", "0"}}) {
		t.Errorf("rejected_* cells %q", got)
	}

	back, err := ReadSweepRows(filepath.Join(dir, "sweep.json"))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back, rows) {
		t.Errorf("sweep.json round trip:\n got %+v\nwant %+v", back, rows)
	}

	texts := charttest.Texts(charttest.Check(t, readReportFile(t, filepath.Join(dir, "sweep.svg")), false))
	for _, want := range []string{"Acceptance ratio by load", "links=2", "links=4", "load", "acceptance ratio (%)"} {
		if !texts[want] {
			t.Errorf("sweep.svg has no text %q", want)
		}
	}
	page := readReportFile(t, filepath.Join(dir, "report.html"))
	for _, bad := range []string{"http://", "https://", "<script"} {
		if strings.Contains(page, bad) {
			t.Errorf("report.html contains %q", bad)
		}
	}
	if svgs := inlinedSVGs(page); len(svgs) != 1 || strings.Count(page, "<tr>") != 1+len(rows) {
		t.Errorf("report.html: %d plots inlined, %d table rows", len(svgs), strings.Count(page, "<tr>"))
	} else {
		charttest.Check(t, svgs[0], true)
	}

	// One axis, and no rows at all, still make a report.
	if err := WriteSweepReport(filepath.Join(t.TempDir(), "one"), []string{"load"}, rows[:4]); err != nil {
		t.Error(err)
	}
	empty := filepath.Join(t.TempDir(), "empty")
	if err := WriteSweepReport(empty, []string{"load"}, nil); err != nil {
		t.Fatal(err)
	}
	if got, err := ReadSweepRows(filepath.Join(empty, "sweep.json")); err != nil || len(got) != 0 {
		t.Errorf("empty sweep reads back as %v, %v", got, err)
	}
}

func TestMergeSweeps(t *testing.T) {
	root := t.TempDir()
	a, b, c := filepath.Join(root, "a"), filepath.Join(root, "b"), filepath.Join(root, "c")
	rows := testSweepRows(0)
	if err := WriteSweepReport(a, []string{"links", "load"}, rows[:5]); err != nil {
		t.Fatal(err)
	}
	shard1 := testSweepRows(1)[5:]
	if err := WriteSweepReport(b, []string{"links", "load"}, shard1); err != nil {
		t.Fatal(err)
	}
	merged, err := MergeSweeps([]string{a, b})
	if err != nil {
		t.Fatal(err)
	}
	if want := append(slices.Clone(rows[:5]), shard1...); !reflect.DeepEqual(merged, want) {
		t.Errorf("merged rows:\n got %+v\nwant %+v", merged, want)
	}

	// c overlaps a at one point.
	if err := WriteSweepReport(c, []string{"links", "load"}, testSweepRows(2)[4:6]); err != nil {
		t.Fatal(err)
	}
	_, err = MergeSweeps([]string{a, b, c})
	if err == nil {
		t.Fatal("MergeSweeps accepted a point swept twice")
	}
	for _, want := range []string{a, c, "links=4", "load=0.5"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name %q", err, want)
		}
	}

	// Different parameters cannot be merged.
	d := filepath.Join(root, "d")
	if err := WriteSweepReport(d, []string{"load"}, []sim.SweepRow{{Params: map[string]float64{"load": 9}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := MergeSweeps([]string{a, d}); err == nil || !strings.Contains(err.Error(), d) {
		t.Errorf("merging different parameters: %v", err)
	}
	if _, err := MergeSweeps([]string{a, filepath.Join(root, "missing")}); err == nil {
		t.Error("MergeSweeps accepted a directory with no sweep.json")
	}
	if _, err := MergeSweeps(nil); err == nil {
		t.Error("MergeSweeps accepted no directories")
	}
}

func TestLatencyCDFIsBoundedAndMonotonic(t *testing.T) {
	var rtt []float64
	for i := 100_000; i > 0; i-- { // unsorted input, every value distinct
		rtt = append(rtt, float64(i)*1.5)
	}
	rtt = append(rtt, rtt[0], rtt[0], math.NaN()) // ties at the top, and junk
	orig := slices.Clone(rtt)
	cdf := rttCDFPoints(rtt)
	if len(cdf) > maxCDFRows || len(cdf) < maxCDFRows/2 {
		t.Fatalf("%d rows", len(cdf))
	}
	if last := cdf[len(cdf)-1]; last != (chart.Point{X: 150_000, Y: 1}) {
		t.Errorf("last row %v, want the maximum at 1", last)
	}
	if first := cdf[0]; first != (chart.Point{X: 1.5, Y: 1.0 / 100_002}) {
		t.Errorf("first row %v, want the minimum", first)
	}
	for i := 1; i < len(cdf); i++ {
		if cdf[i].X <= cdf[i-1].X || cdf[i].Y <= cdf[i-1].Y {
			t.Fatalf("not increasing at %d: %v after %v", i, cdf[i], cdf[i-1])
		}
	}
	if !slices.EqualFunc(rtt, orig, func(a, b float64) bool { return a == b || (math.IsNaN(a) && math.IsNaN(b)) }) {
		t.Error("rttCDFPoints reordered its input")
	}
	// Ties: each distinct value once, at the share of blocks at or below it.
	if got := rttCDFPoints([]float64{5, 5, 7, 5}); !slices.Equal(got, []chart.Point{{X: 5, Y: 0.75}, {X: 7, Y: 1}}) {
		t.Errorf("ties: %v", got)
	}
}
