package cache

import (
	"context"
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

// TestMemcachedSuite runs memcached 1.6.18's own test files
// (testdata/memcached-1.6.18: the ones that apply to rackpool cache, listed
// with the others in docs/cache.md) against a freshly built rackpool
// binary, through scripts/cache-memcached-tests.sh. It runs when
// RACKPOOL_E2E=1 (make test), where a missing perl or prove is a failure;
// otherwise it skips. scripts/setup.sh installs perl; the test never does.
func TestMemcachedSuite(t *testing.T) {
	if os.Getenv("RACKPOOL_E2E") != "1" {
		t.Skip("RACKPOOL_E2E is not 1: skipping memcached's own test suite (make test runs it; scripts/cache-memcached-tests.sh BIN runs it by hand)")
	}
	if _, err := exec.LookPath("prove"); err != nil {
		t.Fatal("prove (Debian's perl) is missing: run scripts/setup.sh")
	}
	script, err := filepath.Abs("../../scripts/cache-memcached-tests.sh")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "rackpool")
	if out, err := childproc.Command("go", "build", "-o", bin, "../../cmd/rackpool").CombinedOutput(); err != nil {
		t.Fatalf("build rackpool: %v\n%s", err, out)
	}
	// A guard against a hung run, not a timing assertion: the suite takes
	// about two minutes. The cancel kills the script's process group, its
	// servers included.
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	cmd := childproc.CommandContext(ctx, script, bin)
	cmd.Dir = filepath.Dir(script)
	cmd.Env = append(os.Environ(), "TMPDIR="+dir) // the script's work folder goes with the test's
	start := time.Now()
	out, err := cmd.CombinedOutput()
	t.Logf("%s\n(%s)", out, time.Since(start).Round(time.Millisecond))
	if err != nil {
		t.Fatalf("memcached's tests: %v", err)
	}
}
