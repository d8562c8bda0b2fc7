package host

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"rackpool/internal/telemetry"
)

// tree copies testdata/name into a temporary root a test may change.
func tree(t *testing.T, name string) string {
	t.Helper()
	root := t.TempDir()
	src := filepath.Join("testdata", name)
	err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(root, rel), 0o755)
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(root, rel), data, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
	return root
}

func write(t *testing.T, root, file, content string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(root, file), []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

var t0 = time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)

func TestCgroupV2(t *testing.T) {
	root := tree(t, "v2")
	r, err := New(Options{Root: root, Cgroup: "/app.slice/job.scope", NvidiaSMI: "-"})
	if err != nil {
		t.Fatal(err)
	}
	if r.Mode() != CgroupV2 {
		t.Fatalf("mode %s, want cgroup2", r.Mode())
	}
	got, err := r.Read(context.Background(), t0)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]float64{telemetry.MemoryUsed: 734003200, telemetry.MemoryPeak: 1073741824} // memory.max is "max": no limit
	if len(got) != len(want) || got[telemetry.MemoryUsed] != want[telemetry.MemoryUsed] || got[telemetry.MemoryPeak] != want[telemetry.MemoryPeak] {
		t.Fatalf("first read = %v, want %v (no rates yet)", got, want)
	}
	// Ten seconds later: 10 MiB more read, 20 MiB more written.
	dir := "sys/fs/cgroup/app.slice/job.scope/"
	write(t, root, dir+"io.stat", "8:0 rbytes=11534336 wbytes=23068672 rios=1 wios=1\n253:0 rbytes=4096 wbytes=0\n")
	write(t, root, dir+"memory.max", "2147483648\n")
	got, err = r.Read(context.Background(), t0.Add(10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if got[telemetry.IORead] != 1<<20 || got[telemetry.IOWrite] != 2<<20 || got[telemetry.MemoryLimit] != 2147483648 {
		t.Errorf("second read = %v", got)
	}
	// A counter that went backwards (the cgroup was recreated) gives no
	// rate, and the next read measures from it.
	write(t, root, dir+"io.stat", "8:0 rbytes=0 wbytes=0\n")
	got, _ = r.Read(context.Background(), t0.Add(20*time.Second))
	if _, ok := got[telemetry.IORead]; ok {
		t.Errorf("rate across a reset: %v", got)
	}
	write(t, root, dir+"io.stat", "8:0 rbytes=5000 wbytes=0\n")
	got, _ = r.Read(context.Background(), t0.Add(30*time.Second))
	if got[telemetry.IORead] != 500 {
		t.Errorf("rate after a reset: %v", got)
	}
}

func TestCgroupV1Hybrid(t *testing.T) {
	root := tree(t, "v1")
	// The cgroup2 hierarchy is mounted but has no memory controller: v1.
	r, err := New(Options{Root: root, Cgroup: "job", NvidiaSMI: "-"})
	if err != nil {
		t.Fatal(err)
	}
	if r.Mode() != CgroupV1 || !strings.HasSuffix(r.Dir(), "sys/fs/cgroup/memory/job") {
		t.Fatalf("mode %s dir %s", r.Mode(), r.Dir())
	}
	got, err := r.Read(context.Background(), t0)
	if err != nil {
		t.Fatal(err)
	}
	if got[telemetry.MemoryUsed] != 524288000 || got[telemetry.MemoryPeak] != 629145600 {
		t.Errorf("read = %v", got)
	}
	if _, ok := got[telemetry.MemoryLimit]; ok {
		t.Errorf("v1's unlimited reported as a limit: %v", got)
	}
	write(t, root, "sys/fs/cgroup/blkio/job/blkio.throttle.io_service_bytes", "8:0 Read 16384\n8:0 Write 16384\nTotal 32768\n")
	got, _ = r.Read(context.Background(), t0.Add(2*time.Second))
	if got[telemetry.IORead] != 4096 || got[telemetry.IOWrite] != 0 {
		t.Errorf("blkio rates = %v", got)
	}
}

func TestMachine(t *testing.T) {
	root := tree(t, "machine")
	r, err := New(Options{Root: root, NvidiaSMI: "-"})
	if err != nil {
		t.Fatal(err)
	}
	got, err := r.Read(context.Background(), t0)
	if err != nil {
		t.Fatal(err)
	}
	if got[telemetry.MemoryUsed] != (16384000-12288000)*1024 || got[telemetry.MemoryLimit] != 16384000*1024 {
		t.Errorf("read = %v", got)
	}
	if _, ok := got[telemetry.MemoryPeak]; ok {
		t.Error("a machine has no peak")
	}
	// Whole disks only: vda and sda, not vda1, dm-0 or loop0.
	c := parseDiskstats(mustRead(t, root, "proc/diskstats"), func(n string) bool { return exists(filepath.Join(root, "sys/block", n)) })
	if c.read != 2020*512 || c.written != 4040*512 {
		t.Errorf("diskstats = %+v", c)
	}
}

func mustRead(t *testing.T, root, file string) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(root, file))
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func TestGPU(t *testing.T) {
	dir := t.TempDir()
	smi := filepath.Join(dir, "nvidia-smi")
	write(t, dir, "nvidia-smi", "#!/bin/sh\necho 1024\necho 512\n")
	if err := os.Chmod(smi, 0o755); err != nil {
		t.Fatal(err)
	}
	r, err := New(Options{Root: tree(t, "machine"), NvidiaSMI: smi})
	if err != nil {
		t.Fatal(err)
	}
	got, err := r.Read(context.Background(), t0)
	if err != nil {
		t.Fatal(err)
	}
	if got[telemetry.GPUMemoryUsed] != 1536<<20 {
		t.Errorf("gpu = %v", got)
	}
	// A failing nvidia-smi leaves the metric out, nothing else.
	write(t, dir, "nvidia-smi", "#!/bin/sh\necho 'NVIDIA-SMI has failed' >&2\nexit 9\n")
	got, err = r.Read(context.Background(), t0.Add(time.Second))
	if _, ok := got[telemetry.GPUMemoryUsed]; ok || err != nil {
		t.Errorf("failing nvidia-smi: %v %v", got, err)
	}
}

func TestNotFound(t *testing.T) {
	for _, tc := range []struct{ tree, cgroup, want string }{
		{"v2", "nope.scope", "not found"},
		{"v1", "nope", "not found"},
		{"machine", "job", "no cgroup2 or cgroup v1 memory hierarchy"},
		{"v2", "../../etc", ".. is not allowed"},
	} {
		root := tree(t, tc.tree)
		if tc.tree == "machine" {
			if err := os.MkdirAll(filepath.Join(root, "proc/self"), 0o755); err != nil {
				t.Fatal(err)
			}
			write(t, root, "proc/self/mounts", "proc /proc proc rw 0 0\n")
		}
		if _, err := New(Options{Root: root, Cgroup: tc.cgroup, NvidiaSMI: "-"}); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s %s: %v, want %q", tc.tree, tc.cgroup, err, tc.want)
		}
	}
}

func TestParsers(t *testing.T) {
	if v2, mem, blk := parseMounts([]byte("cgroup2 /sys/fs/cgroup\\040x cgroup2 rw 0 0\ncgroup /m cgroup rw,memory 0 0\n")); v2 != "/sys/fs/cgroup x" || mem != "/m" || blk != "" {
		t.Errorf("parseMounts = %q %q %q", v2, mem, blk)
	}
	for _, bad := range []string{"", "MemTotal: 10 kB\n", "MemTotal: 10 kB\nMemAvailable: 20 kB\n"} {
		if _, _, err := parseMeminfo([]byte(bad)); err == nil {
			t.Errorf("parseMeminfo(%q) accepted", bad)
		}
	}
	for in, want := range map[string]bool{"": false, "12\n": true, "N/A\n": false, "-3\n": false} {
		if _, ok := parseNvidiaSMI([]byte(in)); ok != want {
			t.Errorf("parseNvidiaSMI(%q) ok = %v", in, ok)
		}
	}
	if _, err := parseValue([]byte("max\n")); err != errNoLimit {
		t.Errorf("max: %v", err)
	}
	if _, err := parseValue([]byte("lots")); err == nil {
		t.Error("lots accepted")
	}
}

// TestThisMachine reads the machine the test runs on: the whole machine
// always, and the root cgroup of whichever hierarchy it has (cgroup v1's
// memory hierarchy on hosts without the v2 memory controller).
func TestThisMachine(t *testing.T) {
	r, err := New(Options{NvidiaSMI: "-"})
	if err != nil {
		t.Fatal(err)
	}
	got, err := r.Read(context.Background(), time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if got[telemetry.MemoryUsed] <= 0 || got[telemetry.MemoryLimit] < got[telemetry.MemoryUsed] {
		t.Errorf("machine: %v", got)
	}
	cg, err := New(Options{Cgroup: "/", NvidiaSMI: "-"})
	if err != nil {
		t.Skipf("no cgroup hierarchy with memory here: %v", err)
	}
	got, err = cg.Read(context.Background(), time.Now())
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s at %s: %v", cg.Mode(), cg.Dir(), got)
	if got[telemetry.MemoryUsed] <= 0 {
		t.Errorf("%s: %v", cg.Mode(), got)
	}
}

// FuzzParsers: no input makes a parser panic, and parsed sizes never
// pass what the input can say.
func FuzzParsers(f *testing.F) {
	for _, file := range []string{"v2/proc/self/mounts", "v1/proc/self/mounts", "machine/proc/meminfo", "machine/proc/diskstats",
		"v2/sys/fs/cgroup/app.slice/job.scope/io.stat", "v1/sys/fs/cgroup/blkio/job/blkio.throttle.io_service_bytes"} {
		data, err := os.ReadFile(filepath.Join("testdata", file))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Add([]byte("1024\n2048\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		parseMounts(data)
		if total, avail, err := parseMeminfo(data); err == nil && avail > total {
			t.Fatalf("available %d above total %d", avail, total)
		}
		parseIOStat(data)
		parseBlkio(data)
		parseDiskstats(data, func(string) bool { return true })
		parseNvidiaSMI(data)
		_, _ = parseValue(data)
		unescapeMount(string(data))
	})
}
