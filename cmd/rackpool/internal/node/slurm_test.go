package node

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestSlurmBadInput: the slurm verbs refuse what cannot work, naming it,
// before they reach the service or write anything.
func TestSlurmBadInput(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "slurm.yaml")
	if err := os.WriteFile(good, []byte("nodes: {n1: {host: host1}}\ntemplates: {gpu1: {needs: [\"1 gpu\"]}}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	bad := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(bad, []byte("nodes: {n1: {host: host1}}\ntemplates: {gpu1: {needs: [\"two gpu\"]}}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "out")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"slurm", "resume", "n1"}, "--config"},
		{[]string{"slurm", "suspend"}, "arg"},
		{[]string{"slurm", "resume", "n1", "--config", filepath.Join(dir, "none.yaml")}, "none.yaml"},
		{[]string{"slurm", "resume", "n1", "--config", bad}, "not a count"},
		{[]string{"slurm", "resume", "n1", "--config", good, "--timeout", "0s"}, "--timeout"},
		{[]string{"slurm", "config", "--config", good}, "--out"},
		{[]string{"slurm", "config", "--config", good, "--out", out, "--topology", filepath.Join(dir, "none.yaml")}, "none.yaml"},
		{[]string{"slurm", "config", "--config", good, "--out", out, "--suspend-time", "-1s"}, "negative"},
		{[]string{"slurm", "features", "--config", good, "gpu2"}, "does not reboot"},
	} {
		err := execute(tc.args...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: %v, want an error naming %q", tc.args, err, tc.want)
		}
	}
	if _, err := os.Stat(out); err == nil {
		t.Errorf("a refused config wrote %s", out)
	}
}
