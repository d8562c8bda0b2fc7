package cache

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// TestConformanceScript runs scripts/cache-conformance.sh (memccapable and
// pymemcache's integration tests) against a cache on loopback. It runs when
// RACKPOOL_E2E=1 (CI), where missing tools are a failure, or when
// memccapable and python3 are both installed; otherwise it skips.
func TestConformanceScript(t *testing.T) {
	e2e := os.Getenv("RACKPOOL_E2E") == "1"
	if testing.Short() && !e2e {
		t.Skip("short mode")
	}
	for _, tool := range []string{"memccapable", "python3"} {
		if _, err := exec.LookPath(tool); err != nil && !e2e {
			t.Skipf("%s not installed and RACKPOOL_E2E is not 1: skipping the conformance suites (scripts/cache-conformance.sh installs them)", tool)
		}
	}
	script, err := filepath.Abs("../../scripts/cache-conformance.sh")
	if err != nil {
		t.Fatal(err)
	}
	_, addr := startCache(t, Options{LocalMemory: 256 << 20})
	cmd := exec.Command(script, addr)
	cmd.Dir = filepath.Dir(script)
	start := time.Now()
	out, err := cmd.CombinedOutput()
	t.Logf("%s\n(%s)", out, time.Since(start).Round(time.Millisecond))
	if err != nil {
		t.Fatalf("conformance script: %v", err)
	}
}
