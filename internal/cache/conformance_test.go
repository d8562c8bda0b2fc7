package cache

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"rackpool/internal/childproc"
)

// TestConformanceScript runs scripts/cache-conformance.sh (memccapable and
// pymemcache's integration tests) against a cache on loopback. It runs when
// RACKPOOL_E2E=1 (make test), where missing tools are a failure, or when
// memccapable and the project's Python environment are both there;
// otherwise it skips. scripts/setup.sh installs them; the test never does.
func TestConformanceScript(t *testing.T) {
	e2e := os.Getenv("RACKPOOL_E2E") == "1"
	if testing.Short() && !e2e {
		t.Skip("short mode")
	}
	_, errMC := exec.LookPath("memccapable")
	_, errPy := os.Stat("../../.venv-rf/bin/pytest")
	if (errMC != nil || errPy != nil) && !e2e {
		t.Skip("memccapable or .venv-rf's pytest is missing and RACKPOOL_E2E is not 1: skipping the conformance suites (scripts/setup.sh installs them)")
	}
	script, err := filepath.Abs("../../scripts/cache-conformance.sh")
	if err != nil {
		t.Fatal(err)
	}
	_, addr := startCache(t, Options{LocalMemory: 256 << 20})
	cmd := childproc.Command(script, addr)
	cmd.Dir = filepath.Dir(script)
	start := time.Now()
	out, err := cmd.CombinedOutput()
	t.Logf("%s\n(%s)", out, time.Since(start).Round(time.Millisecond))
	if err != nil {
		t.Fatalf("conformance script: %v", err)
	}
}
