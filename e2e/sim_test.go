package e2e

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

func sim(args ...string) (string, error) {
	if args[0] != "merge" {
		args = append([]string{"--quiet"}, args...)
	}
	out, err := exec.Command(binary, append([]string{"sim"}, args...)...).CombinedOutput()
	return string(out), err
}

type simSummary struct {
	Requests        int     `json:"requests"`
	Accepted        int     `json:"accepted"`
	AcceptanceRatio float64 `json:"acceptance_ratio"`
	Policy          string  `json:"policy"`
}

func readSummary(t *testing.T, dir string) simSummary {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, "summary.json"))
	if err != nil {
		t.Fatal(err)
	}
	var s simSummary
	if err := json.Unmarshal(data, &s); err != nil {
		t.Fatal(err)
	}
	return s
}

// TestSimTraceAndScenario runs the two ways in: a generated workload
// exported as a trace and replayed with quick flags, and scenario files of
// every architecture; each writes a full report.
func TestSimTraceAndScenario(t *testing.T) {
	skipShort(t)
	dir := t.TempDir()
	trace := filepath.Join(dir, "trace.csv")
	scn := "../internal/sim/testdata/scenarios/"
	if out, err := sim("--scenario", scn+"monet.yaml", "--requests", "400", "--write-trace", trace); err != nil {
		t.Fatalf("write trace: %v\n%s", err, out)
	}
	out := filepath.Join(dir, "ff")
	if o, err := sim("--trace", trace, "--architecture", "traditional", "--hosts", "40", "--host-cores", "4",
		"--host-ram-gb", "16", "--policy", "first-fit", "--out", out); err != nil {
		t.Fatalf("trace run: %v\n%s", err, o)
	}
	s := readSummary(t, out)
	if s.Requests != 400 || s.Accepted == 0 || s.Policy != "first-fit" {
		t.Errorf("trace run summary %+v", s)
	}
	for _, f := range []string{"report.html", "timeseries.csv", "utilisation.svg"} {
		if _, err := os.Stat(filepath.Join(out, f)); err != nil {
			t.Errorf("report file: %v", err)
		}
	}
	html, _ := os.ReadFile(filepath.Join(out, "report.html"))
	if !strings.Contains(string(html), "<svg") || strings.Contains(string(html), "<script src") {
		t.Errorf("report.html is not a self-contained page with plots")
	}
	// The same run again replaces the earlier output.
	if o, err := sim("--trace", trace, "--hosts", "40", "--host-cores", "4", "--host-ram-gb", "16", "--policy", "first-fit", "--out", out); err != nil {
		t.Fatalf("rerun: %v\n%s", err, o)
	}
	if again := readSummary(t, out); again != s {
		t.Errorf("same trace, same policy, different result: %+v vs %+v", again, s)
	}
	for _, f := range []string{"traditional", "rack", "monet", "fattree"} {
		o, err := sim("--scenario", scn+f+".yaml", "--requests", "300", "--out", filepath.Join(dir, f))
		if err != nil {
			t.Fatalf("%s: %v\n%s", f, err, o)
		}
		if s := readSummary(t, filepath.Join(dir, f)); s.Requests != 300 && f != "traditional" {
			t.Errorf("%s: %d requests", f, s.Requests)
		}
	}
}

// TestSimRejectionReasons runs the shipped P4 §5.A scenario as a user
// would: every rejected request is counted under one reason in
// summary.json (none "unexplained", the counts adding up to the
// rejections), and report.html names each with what it means.
func TestSimRejectionReasons(t *testing.T) {
	skipShort(t)
	out := filepath.Join(t.TempDir(), "monet")
	if o, err := sim("--scenario", "../examples/sim/monet-5a.yaml", "--out", out); err != nil {
		t.Fatalf("%v\n%s", err, o)
	}
	data, err := os.ReadFile(filepath.Join(out, "summary.json"))
	if err != nil {
		t.Fatal(err)
	}
	var s struct {
		Rejected   int            `json:"rejected"`
		Rejections map[string]int `json:"rejections"`
	}
	if err := json.Unmarshal(data, &s); err != nil {
		t.Fatal(err)
	}
	sum := 0
	for _, n := range s.Rejections {
		sum += n
	}
	if s.Rejected == 0 || sum != s.Rejected || s.Rejections["unexplained"] > 0 {
		t.Errorf("%d rejected, by reason %v (sum %d)", s.Rejected, s.Rejections, sum)
	}
	html, _ := os.ReadFile(filepath.Join(out, "report.html"))
	for _, want := range []string{"<th>meaning</th>", "fragmentation", "but no one host has them"} {
		if !strings.Contains(string(html), want) {
			t.Errorf("report.html lacks %q", want)
		}
	}
}

// TestSimShardedSweep splits a sweep into two shards and merges them: the
// merged table has every point once.
func TestSimShardedSweep(t *testing.T) {
	skipShort(t)
	dir := t.TempDir()
	scn := filepath.Join(dir, "sweep.yaml")
	os.WriteFile(scn, []byte(`name: small-sweep
architecture: pod
network: monet
trays: 4
cards_per_tray: 8
workload:
  kind: monet
  requests: 200
sweep:
  planes: [1, 2]
  load: [0.5, 1, 2]
`), 0o644)
	for _, sh := range []string{"0/2", "1/2"} {
		if o, err := sim("--scenario", scn, "--shard", sh, "--out", filepath.Join(dir, "shard"+sh[:1])); err != nil {
			t.Fatalf("shard %s: %v\n%s", sh, err, o)
		}
	}
	merged := filepath.Join(dir, "merged")
	if o, err := sim("merge", "--out", merged, filepath.Join(dir, "shard0"), filepath.Join(dir, "shard1")); err != nil {
		t.Fatalf("merge: %v\n%s", err, o)
	}
	data, err := os.ReadFile(filepath.Join(merged, "sweep.csv"))
	if err != nil {
		t.Fatal(err)
	}
	if rows := strings.Count(strings.TrimSpace(string(data)), "\n"); rows != 6 {
		t.Errorf("merged sweep has %d rows, want 6:\n%s", rows, data)
	}
	// Load 2 rejects requests: their reasons are columns of counts.
	if head, _, _ := strings.Cut(string(data), "\n"); !strings.Contains(head, ",rejected_") {
		t.Errorf("sweep.csv has no rejection reasons: %s", head)
	}
	// Merging a shard with itself is refused.
	if o, err := sim("merge", "--out", filepath.Join(dir, "dup"), filepath.Join(dir, "shard0"), filepath.Join(dir, "shard0")); err == nil {
		t.Errorf("merging a shard twice succeeded:\n%s", o)
	}
}

// TestSimBadInput: bad scenarios, traces and flags fail with the file,
// line and field, and leave no output directory behind.
func TestSimBadInput(t *testing.T) {
	skipShort(t)
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		os.WriteFile(p, []byte(body), 0o644)
		return p
	}
	missing := write("missing.csv", "id,arrival,cores,hold\nr1,0,1,10\n")
	negative := write("negative.csv", "id,arrival,cores,ram_gb,hold\nr1,0,1,2,10\nr2,-1,1,2,10\n")
	badPolicy := write("policy.yaml", "name: x\narchitecture: traditional\npolicy: firstfit\n")
	badField := write("field.yaml", "name: x\narchitecture: pod\ntrays: 4\ncards_per_tray: 7\n")
	cases := []struct {
		name string
		args []string
		want string
	}{
		{"missing column", []string{"--trace", missing}, "missing.csv:1: header: "},
		{"negative time", []string{"--trace", negative}, "negative.csv:3: arrival: "},
		{"unknown policy", []string{"--scenario", badPolicy}, "policy.yaml:3: policy: "},
		{"unknown policy flag", []string{"--trace", negative, "--policy", "firstfit"}, "unknown policy \"firstfit\""},
		{"odd tray", []string{"--scenario", badField}, "field.yaml:4: cards_per_tray: "},
		{"bad shard", []string{"--scenario", badField, "--shard", "3/2"}, "field.yaml:4"},
	}
	for _, tc := range cases {
		out := filepath.Join(dir, "out-"+strings.ReplaceAll(tc.name, " ", "-"))
		o, err := sim(append(tc.args, "--out", out)...)
		if err == nil {
			t.Errorf("%s: succeeded:\n%s", tc.name, o)
			continue
		}
		if !strings.Contains(o, tc.want) {
			t.Errorf("%s: error %q does not name %q", tc.name, strings.TrimSpace(o), tc.want)
		}
		if _, err := os.Stat(out); !os.IsNotExist(err) {
			t.Errorf("%s: output directory exists after a failed run", tc.name)
		}
	}
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if strings.Contains(e.Name(), ".tmp") {
			t.Errorf("temporary output left behind: %s", e.Name())
		}
	}
}
