package e2e

// The web console in a real browser: e2e/console_test.py drives headless
// Chromium (Debian's chromium) with Playwright against the serve these
// tests start. Screenshots go to build/console (CI keeps build/; the ones
// in docs/console.md come from there); axe-core (ui/node_modules, from
// make ui) checks every view's accessibility.

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"rackpool/internal/topology"
)

// consoleRun runs console_test.py in mode against s and returns its output.
func consoleRun(t *testing.T, s *server, args ...string) string {
	t.Helper()
	browser := ""
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			browser = p
			break
		}
	}
	py, _ := filepath.Abs(filepath.Join("..", ".venv-rf", "bin", "python"))
	axe, _ := filepath.Abs(filepath.Join("..", "ui", "node_modules", "axe-core", "axe.min.js"))
	shots, _ := filepath.Abs(filepath.Join("..", "build", "console"))
	for what, path := range map[string]string{"chromium (Debian's, on PATH)": browser, "the Python venv (scripts/pyenv.sh)": py, "axe-core (make ui)": axe} {
		if _, err := os.Stat(path); path == "" || err != nil {
			if os.Getenv("RACKPOOL_E2E") != "" {
				t.Fatalf("%s is missing: .ci/run and make test install it", what)
			}
			t.Skipf("%s is missing", what)
		}
	}
	cmd := exec.Command(py, append([]string{"console_test.py"}, args...)...)
	cmd.Env = append(s.env(), "CHROMIUM="+browser, "AXE="+axe, "SHOTS="+shots)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("console_test.py %v: %v\n%s", args, err, out)
	}
	return string(out)
}

// TestConsole: every view, compose (refused with its explanation, bad
// input beside its field, then applied), live updates, decompose, export
// and re-import, an expired session, tenant isolation and the read-only
// role, in Chromium (console_test.py says how each is checked).
func TestConsole(t *testing.T) {
	skipShort(t)
	s := startDefault(t, "--fabric-time", "instant")
	out := consoleRun(t, s, "console")
	t.Log(out)
}

// TestConsolePaint measures the first meaningful paint of the topology at
// 10^4 blocks and of the blocks list at 10^5 rows (docs/benchmarks.md):
// measured, never asserted on time. The results are written to
// build/console/paint.json.
func TestConsolePaint(t *testing.T) {
	skipShort(t)
	if os.Getenv("RACKPOOL_CONSOLE_PAINT") == "" {
		t.Skip("set RACKPOOL_CONSOLE_PAINT=1 (make bench-console) to measure the console's first paint at scale")
	}
	var results []json.RawMessage
	for _, c := range []struct {
		racks        int
		route, ready string
	}{
		{100, "/topology", "[data-testid=topology-svg][data-ready='1']"},
		{1000, "/blocks", "[data-testid=blocks-table] [data-row]"},
		{1000, "/topology", "[data-testid=topology-svg][data-ready='1']"},
	} {
		dir := t.TempDir()
		file := filepath.Join(dir, "racks.yaml")
		if err := os.WriteFile(file, topology.GenerateRacks(c.racks), 0o644); err != nil {
			t.Fatal(err)
		}
		old := startTimeout
		startTimeout *= 10
		s := startDefault(t, "--topology", file, "--fabric-time", "instant")
		startTimeout = old
		out := consoleRun(t, s, "perf", c.route, c.ready)
		for _, l := range strings.Split(out, "\n") {
			if strings.HasPrefix(l, "{") {
				t.Logf("%d blocks: %s", c.racks*100, l)
				results = append(results, json.RawMessage(strings.Replace(l, "{", `{"blocks": `+strconv.Itoa(c.racks*100)+", ", 1)))
			}
		}
		s.kill()
	}
	b, _ := json.MarshalIndent(results, "", "  ")
	_ = os.MkdirAll(filepath.Join("..", "build", "console"), 0o755)
	if err := os.WriteFile(filepath.Join("..", "build", "console", "paint.json"), b, 0o644); err != nil {
		t.Fatal(err)
	}
}
