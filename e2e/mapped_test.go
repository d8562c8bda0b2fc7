package e2e

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"rackpool/internal/childproc"
)

// TestCacheMappedTier runs the cache with its remote tier on mapped memory:
// a memnode serving mapped leases on a unix socket for host1, a cache on
// host1 with --remote-tier mapped. Every item spilled to the mapped region
// comes back right; the lease is a mapped one; releasing it at shutdown
// returns the memory.
func TestCacheMappedTier(t *testing.T) {
	skipShort(t)
	s := startDefault(t)
	sock := filepath.Join(t.TempDir(), "memnode.sock")
	startMemnode(t, s, "--capacity", "64MiB", "--map-socket", sock, "--map-hosts", "host1")
	cache := startProc(t, s, "cache", "--local-memory", "1MiB", "--remote-memory", "16MiB", "--remote-tier", "mapped",
		"--host", "host1", "--control", s.url)
	m := dialMC(t, cache.addr)
	const n, size = 200, 16 << 10 // 3.2 MB of values: most must spill
	for i := 0; i < n; i++ {
		k := fmt.Sprintf("key%03d", i)
		m.set(k, value(k, size))
	}
	for i := 0; i < n; i++ {
		k := fmt.Sprintf("key%03d", i)
		v := m.get(k)
		if v == nil {
			t.Fatalf("%s missing with a mapped tier large enough for all", k)
		}
		if !bytes.Equal(v, value(k, size)) {
			t.Fatalf("%s: wrong value", k)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ls, err := s.client().Leases(ctx)
	if err != nil || len(ls) != 1 || !ls[0].Mapped || ls[0].Host != "host1" || ls[0].CapacityBytes != 16<<20 {
		t.Fatalf("leases = %+v, %v; want the cache's one mapped 16 MiB lease for host1", ls, err)
	}
	if !strings.Contains(cache.stderr.String(), "remote_tier=mapped") {
		t.Errorf("the cache does not say it runs a mapped tier:\n%s", cache.stderr)
	}
	// Stopped, the cache gives its lease back.
	_ = cache.cmd.Process.Signal(os.Interrupt)
	_ = cache.cmd.Wait()
	deadline := time.Now().Add(10 * time.Second)
	for {
		ls, err = s.client().Leases(ctx)
		if err == nil && len(ls) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the stopped cache's lease is still there: %+v %v", ls, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestMappedRefusals: the CLI refuses a mapped tier without a host, and a
// mapped lease for a host the node does not map for.
func TestMappedRefusals(t *testing.T) {
	skipShort(t)
	s := startDefault(t)
	sock := filepath.Join(t.TempDir(), "memnode.sock")
	startMemnode(t, s, "--capacity", "16MiB", "--map-socket", sock, "--map-hosts", "host1")
	out, err := childproc.Command(binary, "cache", "--remote-memory", "4MiB", "--remote-tier", "mapped", "--control", s.url).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "--remote-tier mapped needs --host") {
		t.Errorf("cache --remote-tier mapped without --host: %v\n%s", err, out)
	}
	out, err = childproc.Command(binary, "cache", "--remote-memory", "4MiB", "--remote-tier", "cxl", "--control", s.url).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "want tcp or mapped") {
		t.Errorf("cache --remote-tier cxl: %v\n%s", err, out)
	}
	got, err := s.cli("lease", "--size", "1MiB", "--host", "host2", "--mapped")
	if err == nil || !strings.Contains(got, "host host2 cannot map it (mapped from: host1)") {
		t.Errorf("lease --mapped for host2: %v\n%s", err, got)
	}
	got, err = s.cli("lease", "--size", "1MiB", "--host", "host1", "--mapped")
	if err != nil || !strings.Contains(got, "mappable from host1 through "+sock) {
		t.Errorf("lease --mapped for host1: %v\n%s", err, got)
	}
	out, err = childproc.Command(binary, "memnode", "--map-socket", sock, "--control", s.url).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "--map-socket and --map-hosts go together") {
		t.Errorf("memnode --map-socket without hosts: %v\n%s", err, out)
	}
}
