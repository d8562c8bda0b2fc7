package e2e

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestCLITour runs the README's tour through the CLI binary.
func TestCLITour(t *testing.T) {
	skipShort(t)
	srv := startDefault(t, "--fabric-time", "instant")
	run := func(args ...string) string {
		t.Helper()
		out, err := srv.cli(args...)
		if err != nil {
			t.Fatalf("rackpool %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return out
	}
	if out := run("topology"); !strings.Contains(out, "drawer drawer1: advanced, host ports H1,H2,H3") || !strings.Contains(out, "sas1 (sas-circuit") {
		t.Fatalf("topology output:\n%s", out)
	}
	out := run("compose", "--json", "--need", "2 gpu model=V100", "--need", "64GiB memory", "--need", "1 nvme capacity=3TB")
	var sys struct {
		ID  string `json:"Id"`
		Oem struct{ Rackpool struct{ Host string } }
	}
	if err := json.Unmarshal([]byte(out), &sys); err != nil || sys.ID == "" {
		t.Fatalf("compose --json: %v\n%s", err, out)
	}
	if out := run("show", sys.ID); !strings.Contains(out, "gpu1") || strings.Count(out, "memnode1-b") != 8 {
		t.Fatalf("show: want gpu1 and 8 memory blocks:\n%s", out)
	}
	specific := run("compose", "--host", "host3", "hdd1", "hdd2")
	if !strings.Contains(specific, "Composed on host3") {
		t.Fatalf("specific compose:\n%s", specific)
	}
	// Why host4 cannot have gpu1: the drawer mode, named.
	if out := run("explain", "--host", "host4", "gpu1"); !strings.Contains(out, "never") && !strings.Contains(out, "even when empty") || !strings.Contains(out, "drawer1") {
		t.Fatalf("explain:\n%s", out)
	}
	if out := run("expand", sys.ID, "--need", "1 fpga"); !strings.Contains(out, "fpga1") {
		t.Fatalf("expand:\n%s", out)
	}
	if out := run("shrink", sys.ID, "gpu2"); strings.Contains(out, "gpu2") {
		t.Fatalf("shrink left gpu2:\n%s", out)
	}
	blocks := run("blocks", "--kind", "gpu", "--json")
	var bl []struct {
		ID                string `json:"Id"`
		CompositionStatus struct{ CompositionState string }
	}
	if err := json.Unmarshal([]byte(blocks), &bl); err != nil || len(bl) != 8 {
		t.Fatalf("blocks --json: %v (%d blocks)", err, len(bl))
	}
	for _, b := range bl {
		want := "Unused"
		if b.ID == "gpu1" {
			want = "Composed"
		}
		if b.CompositionStatus.CompositionState != want {
			t.Errorf("%s is %s, want %s", b.ID, b.CompositionStatus.CompositionState, want)
		}
	}
	if out := run("systems"); len(lines(out)) != 3 {
		t.Fatalf("systems: want a header and 2 rows:\n%s", out)
	}
	if out := run("zones"); !strings.Contains(out, "zone-training") {
		t.Fatalf("zones:\n%s", out)
	}
	run("decompose", sys.ID)
	// Errors are clear and exit non-zero.
	out, err := srv.cli("compose", "--need", "9 gpu")
	if err == nil || !strings.Contains(out, "not available") || !strings.Contains(out, "host4") {
		t.Fatalf("impossible compose: err %v\n%s", err, out)
	}
	out, err = srv.cli("compose", "--need", "two gpu")
	if err == nil || !strings.Contains(out, `"two" is not a count`) {
		t.Fatalf("bad need: err %v\n%s", err, out)
	}
	out, err = srv.cli("decompose", "sys-nope")
	if err == nil || !strings.Contains(out, "not found") {
		t.Fatalf("decompose unknown: err %v\n%s", err, out)
	}
}
