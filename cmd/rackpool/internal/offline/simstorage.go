package offline

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"rackpool/cmd/rackpool/internal/cli"
	"rackpool/internal/drive"
	"rackpool/internal/sim"
)

// simStorageCmd is `rackpool sim storage`: dynamic elastic disaggregation
// of storage servers (P1 §4) over a day, with the live control plane's
// policy, against every server kept on.
func simStorageCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "storage --out DIR [--servers N] [--drives-per-server K] [--trace LOAD.csv] [--mode on|dry-run|off]",
		Short: "simulate elastic storage disaggregation over a day against every server kept on",
		Long: "Simulates dynamic elastic disaggregation of storage servers (P1 §4) over a day with the live\n" +
			"control plane's policy, against every server kept on; prints both and writes summary.json,\n" +
			"storage.csv and storage.svg to --out (docs/simulation.md).",
		Args: cli.NoArgs,
	}
	fs := cmd.Flags()
	var o simStorageConfig
	fs.StringVar(&o.out, "out", "", "output directory (summary.json, storage.csv, storage.svg); required")
	fs.IntVar(&o.servers, "servers", 12, "storage servers (n)")
	fs.IntVar(&o.k, "drives-per-server", 12, "drive slots per server (k); the rack has n*k/3 drives (P1 §4)")
	fs.StringVar(&o.mode, "mode", "on", "elastic policy: on, dry-run or off")
	fs.Float64Var(&o.nodeOps, "node-ops", 20000, "operations per second one server serves at full load")
	fs.Float64Var(&o.low, "low", 0.3, "park a server when the load fits in one fewer under this fraction of capacity")
	fs.Float64Var(&o.high, "high", 0.7, "bring one back above this fraction of the active servers' capacity")
	fs.DurationVar(&o.hold, "hold", 10*time.Minute, "least time between two decisions")
	fs.DurationVar(&o.window, "window", time.Minute, "load averaging time constant")
	fs.DurationVar(&o.step, "step", 10*time.Second, "policy period")
	fs.DurationVar(&o.online, "drive-online", 10*time.Millisecond, "drive online time per remap (P1 Fig. 2: 1ms, 10ms, 90ms, 200ms)")
	fs.StringVar(&o.trace, "trace", "", "load over the day as CSV seconds,ops (default: a diurnal day from 10% to 80% of the rack's capacity)")
	fs.Uint64Var(&o.seed, "seed", 1, "random seed of the generated day")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		if o.out == "" {
			return cli.Usagef("usage: %s", cmd.UseLine())
		}
		return runSimStorage(o)
	}
	return cmd
}

// simStorageConfig is sim storage's command line.
type simStorageConfig struct {
	out, mode, trace           string
	servers, k                 int
	nodeOps, low, high         float64
	hold, window, step, online time.Duration
	seed                       uint64
}

func runSimStorage(o simStorageConfig) error {
	m, err := drive.ParseElasticMode(o.mode)
	if err != nil {
		return fmt.Errorf("--mode: %w", err)
	}
	if o.low <= 0 || o.high <= o.low || o.high > 1 {
		return errors.New("--low and --high: want 0 < low < high <= 1")
	}
	cfg := sim.StorageConfig{Servers: o.servers, DrivesPerServer: o.k, Step: o.step, DriveOnline: o.online, Seed: o.seed,
		Elastic: drive.Elastic{Mode: m, NodeOps: o.nodeOps, Low: o.low, High: o.high, Hold: o.hold, Window: o.window}}
	if o.trace != "" {
		f, err := os.Open(o.trace)
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
	if err := os.MkdirAll(o.out, 0o755); err != nil {
		return err
	}
	table := sim.StorageTable([]string{"elastic " + string(m), "all servers on"}, []sim.StorageResult{res, base})
	fmt.Print(table)
	js, _ := json.MarshalIndent(map[string]sim.StorageResult{"elastic": res, "static": base}, "", "  ")
	if err := os.WriteFile(filepath.Join(o.out, "summary.json"), js, 0o644); err != nil {
		return err
	}
	var csv strings.Builder
	csv.WriteString("hour,offered_ops,served_ops,powered_servers,remaps\n")
	for _, s := range res.Samples {
		fmt.Fprintf(&csv, "%.4f,%.1f,%.1f,%d,%d\n", s.At.Hours(), s.OfferedOps, s.ServedOps, s.Active, s.Remaps)
	}
	if err := os.WriteFile(filepath.Join(o.out, "storage.csv"), []byte(csv.String()), 0o644); err != nil {
		return err
	}
	svg, err := sim.StorageChart(res, o.nodeOps)
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(o.out, "storage.svg"), svg, 0o644)
}
