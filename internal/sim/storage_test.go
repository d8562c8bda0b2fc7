package sim

import (
	"math"
	"strings"
	"testing"
	"time"

	"rackpool/internal/drive"
)

// TestStorageElasticSavesServerHours: on a diurnal day the live policy
// parks servers in the trough and brings them back for the peak: fewer
// server-hours than keeping all on, no offered load lost while the peak
// stays under the active servers' capacity, remaps bounded by Hold.
func TestStorageElasticSavesServerHours(t *testing.T) {
	cfg := StorageConfig{Servers: 12, DrivesPerServer: 12, DriveOnline: 10 * time.Millisecond, Seed: 1,
		Elastic: drive.Elastic{Mode: drive.ElasticOn, NodeOps: 1000, Hold: 10 * time.Minute, Window: time.Minute}}
	r, err := RunStorage(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if r.Drives != 48 || r.Hours < 23.9 || r.Hours > 24.1 {
		t.Fatalf("run shape: %d drives over %.1f h", r.Drives, r.Hours)
	}
	if r.SavedFraction < 0.2 || r.SavedFraction > 0.9 {
		t.Errorf("saved %.0f%% of server-hours, want a real saving", 100*r.SavedFraction)
	}
	if r.OpsPerServer <= r.StaticPerServer {
		t.Errorf("throughput per powered server %.0f not above static %.0f", r.OpsPerServer, r.StaticPerServer)
	}
	if r.ServedFraction < 0.97 {
		t.Errorf("served only %.3f of the offered load", r.ServedFraction)
	}
	if r.Decisions == 0 || float64(r.Decisions) > 24*6+1 {
		t.Errorf("%d decisions (Hold 10 min allows at most 145)", r.Decisions)
	}
	if r.Remaps == 0 || math.Abs(r.OfflineSecs-float64(r.Remaps)*0.01) > 1e-9 {
		t.Errorf("%d remaps, %.3f drive-seconds offline", r.Remaps, r.OfflineSecs)
	}
	// Off: nothing moves, nothing saved.
	cfg.Elastic.Mode = drive.ElasticOff
	off, err := RunStorage(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if off.Remaps != 0 || math.Abs(off.SavedFraction) > 1e-9 {
		t.Errorf("policy off: %d remaps, %.2f saved", off.Remaps, off.SavedFraction)
	}
	if tab := StorageTable([]string{"on", "off"}, []StorageResult{r, off}); !strings.Contains(tab, "| on | 12 | 48 |") {
		t.Errorf("table:\n%s", tab)
	}
	if svg, err := StorageChart(r, 1000); err != nil || !strings.Contains(string(svg), "powered servers") {
		t.Errorf("chart: %v", err)
	}
}

func TestReadLoadTrace(t *testing.T) {
	tr, err := ReadLoadTrace(strings.NewReader("seconds,ops\n0,100\n600,250.5\n"))
	if err != nil || len(tr) != 2 || tr[1].At != 10*time.Minute || tr[1].Ops != 250.5 {
		t.Fatalf("%+v %v", tr, err)
	}
	for _, bad := range []string{"", "0,1\n0,2\n", "0,-1\n", "x,y\nz,1\n", "0,1,2\n"} {
		if _, err := ReadLoadTrace(strings.NewReader(bad)); err == nil {
			t.Errorf("trace %q accepted", bad)
		}
	}
}
