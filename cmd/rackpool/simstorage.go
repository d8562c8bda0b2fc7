package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"rackpool/internal/drive"
	"rackpool/internal/sim"
)

// runSimStorage is `rackpool sim storage`: dynamic elastic disaggregation
// of storage servers (P1 §4) over a day, with the live control plane's
// policy, against every server kept on.
func runSimStorage(args []string) error {
	fs := flag.NewFlagSet("sim storage", flag.ContinueOnError)
	out := fs.String("out", "", "output directory (summary.json, storage.csv, storage.svg); required")
	servers := fs.Int("servers", 12, "storage servers (n)")
	k := fs.Int("drives-per-server", 12, "drive slots per server (k); the rack has n*k/3 drives (P1 §4)")
	mode := fs.String("mode", "on", "elastic policy: on, dry-run or off")
	nodeOps := fs.Float64("node-ops", 20000, "operations per second one server serves at full load")
	low := fs.Float64("low", 0.3, "park a server when the load fits in one fewer under this fraction of capacity")
	high := fs.Float64("high", 0.7, "bring one back above this fraction of the active servers' capacity")
	hold := fs.Duration("hold", 10*time.Minute, "least time between two decisions")
	window := fs.Duration("window", time.Minute, "load averaging time constant")
	step := fs.Duration("step", 10*time.Second, "policy period")
	online := fs.Duration("drive-online", 10*time.Millisecond, "drive online time per remap (P1 Fig. 2: 1ms, 10ms, 90ms, 200ms)")
	trace := fs.String("trace", "", "load over the day as CSV seconds,ops (default: a diurnal day from 10% to 80% of the rack's capacity)")
	seed := fs.Uint64("seed", 1, "random seed of the generated day")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *out == "" || fs.NArg() > 0 {
		return errors.New("usage: rackpool sim storage --out DIR [--servers N] [--drives-per-server K] [--trace LOAD.csv] [--mode on|dry-run|off]")
	}
	m, err := drive.ParseElasticMode(*mode)
	if err != nil {
		return fmt.Errorf("--mode: %w", err)
	}
	if *low <= 0 || *high <= *low || *high > 1 {
		return errors.New("--low and --high: want 0 < low < high <= 1")
	}
	cfg := sim.StorageConfig{Servers: *servers, DrivesPerServer: *k, Step: *step, DriveOnline: *online, Seed: *seed,
		Elastic: drive.Elastic{Mode: m, NodeOps: *nodeOps, Low: *low, High: *high, Hold: *hold, Window: *window}}
	if *trace != "" {
		f, err := os.Open(*trace)
		if err != nil {
			return err
		}
		cfg.Trace, err = sim.ReadLoadTrace(f)
		f.Close()
		if err != nil {
			return err
		}
	}
	res, err := sim.RunStorage(cfg)
	if err != nil {
		return err
	}
	static := cfg
	static.Elastic.Mode = drive.ElasticOff
	base, err := sim.RunStorage(static)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(*out, 0o755); err != nil {
		return err
	}
	table := sim.StorageTable([]string{"elastic " + string(m), "all servers on"}, []sim.StorageResult{res, base})
	fmt.Print(table)
	js, _ := json.MarshalIndent(map[string]sim.StorageResult{"elastic": res, "static": base}, "", "  ")
	if err := os.WriteFile(filepath.Join(*out, "summary.json"), js, 0o644); err != nil {
		return err
	}
	var csv strings.Builder
	csv.WriteString("hour,offered_ops,served_ops,powered_servers,remaps\n")
	for _, s := range res.Samples {
		fmt.Fprintf(&csv, "%.4f,%.1f,%.1f,%d,%d\n", s.At.Hours(), s.OfferedOps, s.ServedOps, s.Active, s.Remaps)
	}
	if err := os.WriteFile(filepath.Join(*out, "storage.csv"), []byte(csv.String()), 0o644); err != nil {
		return err
	}
	svg, err := sim.StorageChart(res, *nodeOps)
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(*out, "storage.svg"), svg, 0o644)
}
