package offline

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestProvisionEvalBadInput: every bad argument or trace is a clear error
// and writes nothing.
func TestProvisionEvalBadInput(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.csv")
	if err := os.WriteFile(good, []byte("time_s,entity,memory_gib\n0,a,1\n10,a,2\n20,a,3\n30,a,2\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	gap := write("gap.csv", "time_s,entity,memory_gib\n0,a,1\n10,a,2\n30,a,3\n")
	neg := write("neg.csv", "time_s,entity,memory_gib\n0,a,1\n10,a,-2\n")
	nan := write("nan.csv", "time_s,entity,memory_gib\n0,a,1\n10,a,lots\n")
	out := filepath.Join(dir, "out")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--out", out}, "--trace"},
		{[]string{"--trace", good}, "--out"},
		{[]string{"--trace", filepath.Join(dir, "none.csv"), "--out", out}, "no such file"},
		{[]string{"--trace", gap, "--out", out}, "gap.csv:4"},
		{[]string{"--trace", neg, "--out", out}, "neg.csv:3: column memory_gib"},
		{[]string{"--trace", nan, "--out", out}, "nan.csv:3: column memory_gib"},
		{[]string{"--trace", good, "--out", out, "--policy", "greedy"}, "unknown policy"},
		{[]string{"--trace", good, "--out", out, "--window", "0"}, "--window"},
		{[]string{"--trace", good, "--out", out, "--horizon", "soon"}, "--horizon"},
		{[]string{"--trace", good, "--out", out, "--resource", "gpus"}, "no such column"},
		{[]string{"--trace", good, "--out", out, "--quantile", "1.5"}, "quantile"},
		{[]string{"--trace", good, "--out", out, "--hysteresis", "1"}, "hysteresis"},
		{[]string{"--trace", good, "--out", out, "extra"}, "unexpected argument"},
	} {
		err := execute(append(append([]string{"provision", "eval"}, tc.args...), "--quiet")...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("provision eval %v: %v, want an error naming %q", tc.args, err, tc.want)
		}
		if _, serr := os.Stat(out); serr == nil {
			t.Fatalf("provision eval %v wrote %s", tc.args, out)
		}
	}
	if err := execute("provision", "eval", "--trace", good, "--out", out, "--quiet", "--window", "1m"); err != nil {
		t.Fatalf("a good trace: %v", err)
	}
	for _, f := range []string{"summary.json", "comparison.json", "report.html"} {
		if _, err := os.Stat(filepath.Join(out, f)); err != nil {
			t.Errorf("%s: %v", f, err)
		}
	}
}
