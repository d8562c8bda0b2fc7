package sim

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// withMemory runs f with AvailableMemory reporting have bytes.
func withMemory(t *testing.T, have int64, f func()) {
	t.Helper()
	saved := AvailableMemory
	AvailableMemory = func() int64 { return have }
	defer func() { AvailableMemory = saved }()
	f()
}

// TestCountsMatchBuild checks that the counts behind the estimate, taken
// from the configuration alone, are those of the topology Build makes.
func TestCountsMatchBuild(t *testing.T) {
	for name, c := range buildConfigs() {
		t.Run(name, func(t *testing.T) {
			top, err := Build(&c)
			if err != nil {
				t.Fatal(err)
			}
			var got MemoryCounts
			got.Hosts, got.Devices, got.Blocks = int64(len(top.Hosts)), int64(len(top.Devices)), int64(len(top.Blocks))
			for _, h := range top.Hosts {
				got.HostPorts += int64(len(h.Ports))
			}
			for _, f := range top.Fabrics {
				got.Switches += int64(len(f.Switches))
				got.Links += int64(len(f.Links))
			}
			m := c.MemoryCounts()
			if got.Hosts != m.Hosts || got.HostPorts != m.HostPorts || got.Switches != m.Switches ||
				got.Links != m.Links || got.Devices != m.Devices || got.Blocks != m.Blocks {
				t.Errorf("MemoryCounts() = %+v, Build has %+v", m, got)
			}
			if m.Requests != int64(c.Workload.Requests) || m.Running < 1 || m.Running > m.Requests {
				t.Errorf("MemoryCounts() = %d requests, %d running; want %d requests, 1..%d running",
					m.Requests, m.Running, c.Workload.Requests, c.Workload.Requests)
			}
		})
	}
}

// TestEstimateScale checks the estimate against measured peaks: P4's pod
// with 10^6 requests (examples/sim/monet-p4-scale.yaml) peaked at 0.82 GB
// of RSS; the full 200,000-card pod with 10^8 requests is tens of GB.
func TestEstimateScale(t *testing.T) {
	sc, err := LoadScenario(filepath.Join("..", "..", "examples", "sim", "monet-p4-scale.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	c := sc.Config
	m := c.MemoryCounts()
	if m.Hosts != 49_152 || m.Blocks != 245_760 || m.Requests != 1_000_000 {
		t.Fatalf("P4 counts = %+v", m)
	}
	if est := c.EstimateBytes(); est < 600e6 || est > 1_000e6 {
		t.Errorf("P4 estimate = %.2f GB, measured peak 0.82 GB", float64(est)/1e9)
	}
	c.Trays, c.Workload.Requests = 200_000/c.CardsPerTray, 100_000_000
	if est := c.EstimateBytes(); est < 20e9 || est > 40e9 {
		t.Errorf("200,000 cards, 10^8 requests: estimate %.1f GB, want 20..40 GB", float64(est)/1e9)
	}
}

// TestRunRefusesWhatDoesNotFit checks that a run too large for the
// machine fails before building anything, naming the estimate, and that a
// normal scenario runs.
func TestRunRefusesWhatDoesNotFit(t *testing.T) {
	c := Defaults()
	c.Workload.Requests = 100
	withMemory(t, 1<<20, func() { // 1 MiB
		_, err := Run(context.Background(), c, nil)
		var me *MemoryError
		if !errors.As(err, &me) {
			t.Fatalf("Run on a 1 MiB machine: %v, want a MemoryError", err)
		}
		msg := err.Error()
		for _, want := range []string{"this scenario needs ~", gibString(c.EstimateBytes()) + " GiB", "288 hosts", "9,504 blocks",
			"100 requests", "this machine has 0.00 GiB"} {
			if !strings.Contains(msg, want) {
				t.Errorf("message %q does not say %q", msg, want)
			}
		}
		if me.Need != c.EstimateBytes() || me.Have != 1<<20 {
			t.Errorf("MemoryError = %+v", me)
		}
	})
	withMemory(t, 64<<30, func() {
		res, err := Run(context.Background(), c, nil)
		if err != nil {
			t.Fatalf("Run on a 64 GiB machine: %v", err)
		}
		if res.Summary.Requests != 100 {
			t.Errorf("requests = %d, want 100", res.Summary.Requests)
		}
	})
	withMemory(t, 0, func() { // unknown: no check
		if err := c.CheckMemory(); err != nil {
			t.Errorf("CheckMemory with unknown memory: %v", err)
		}
	})
	// The message of a big scenario, with thousands separators.
	big := Defaults()
	big.Trays, big.CardsPerTray, big.Planes, big.MemoryNodeGB, big.MemoryBlockGB = 4096, 24, 8, 16, 4
	big.Workload.Requests = 1_000_000
	withMemory(t, 256<<20, func() {
		err := big.CheckMemory()
		if err == nil || !strings.Contains(err.Error(), "(49,152 hosts, 245,760 blocks, 1,000,000 requests); this machine has 0.25 GiB") {
			t.Errorf("CheckMemory = %v", err)
		}
	})
}

// TestEstimateTrace checks that a trace's rows are counted.
func TestEstimateTrace(t *testing.T) {
	path := filepath.Join(t.TempDir(), "t.csv")
	var b strings.Builder
	b.WriteString("id,arrival,cores,ram_gb,hold\n")
	for i := range 500 {
		b.WriteString("r" + thousands(int64(i)) + ",1,1,2,10\n")
	}
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	c := Defaults()
	c.Workload.Kind, c.Workload.Trace = WorkloadTrace, path
	m := c.MemoryCounts()
	if m.Requests < 500 || m.Requests > 501 || m.Running > m.Requests {
		t.Errorf("trace counts = %+v, want 500 requests", m)
	}
	c.Workload.Trace = filepath.Join(t.TempDir(), "missing.csv")
	if m := c.MemoryCounts(); m.Requests != 0 {
		t.Errorf("missing trace: %d requests, want 0", m.Requests)
	}
}

func TestThousands(t *testing.T) {
	for n, want := range map[int64]string{0: "0", 999: "999", 1000: "1,000", 245760: "245,760", 100000000: "100,000,000", -1234: "-1,234"} {
		if got := thousands(n); got != want {
			t.Errorf("thousands(%d) = %q, want %q", n, got, want)
		}
	}
}

func TestMachineMemory(t *testing.T) {
	if _, err := os.Stat("/proc/meminfo"); err != nil {
		t.Skip("no /proc/meminfo")
	}
	if m := machineMemory(); m < 64<<20 {
		t.Errorf("machineMemory() = %d bytes", m)
	}
}
