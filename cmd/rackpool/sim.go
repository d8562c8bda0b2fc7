package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"rackpool/internal/profiling"
	"rackpool/internal/schedule"
	"rackpool/internal/sim"
	"rackpool/internal/sim/report"
)

// runSim is `rackpool sim`: a scenario file, or quick flags for a trace
// run; `rackpool sim merge` joins the outputs of a sharded sweep.
func runSim(args []string) (err error) {
	if len(args) > 0 && args[0] == "merge" {
		return runSimMerge(args[1:])
	}
	if len(args) > 0 && args[0] == "storage" {
		return runSimStorage(args[1:])
	}
	fs := flag.NewFlagSet("sim", flag.ContinueOnError)
	scenario := fs.String("scenario", "", "scenario file (YAML); the other run flags override its values")
	out := fs.String("out", "", "output directory (summary.json, CSV, SVG, report.html); required")
	seed := fs.Int64("seed", 0, "random seed (default: the scenario's, else 1)")
	trace := fs.String("trace", "", "replay this CSV trace (id,arrival,cores,ram_gb,hold[,gpus,storage_gb,max_latency_ns])")
	arch := fs.String("architecture", "", "traditional | rack | pod (default: traditional with --trace, else the scenario's)")
	network := fs.String("network", "", "pod network: monet | fat-tree")
	hosts := fs.Int("hosts", 0, "traditional: number of servers")
	hostCores := fs.Int("host-cores", 0, "traditional: cores per server")
	hostRAM := fs.Int("host-ram-gb", 0, "traditional: RAM per server (GB)")
	policy := fs.String("policy", "", "first-fit | next-fit | best-fit | worst-fit | rackpool")
	requests := fs.Int("requests", 0, "MONet generator: number of requests")
	load := fs.Float64("load", 0, "MONet generator: arrival-rate multiplier")
	writeTrace := fs.String("write-trace", "", "write the generated workload as a CSV trace to this file and exit")
	writeTopology := fs.String("write-topology", "", "write the topology file the run simulates and exit")
	shardFlag := fs.String("shard", "", "sweeps: run only shard I of N (I/N, 0-based), for sweeps split over machines")
	workers := fs.Int("workers", 0, "sweeps: points run at once (default: one per core)")
	quiet := fs.Bool("quiet", false, "no progress bar")
	acceptedIDs := fs.String("accepted-ids", "", "also write the accepted requests' IDs, one per line, to this file")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile of the run to this file (go tool pprof)")
	memProfile := fs.String("memprofile", "", "write a heap profile at the end of the run to this file (go tool pprof)")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), `Usage:
  rackpool sim --scenario FILE --out DIR [--seed N] [--shard I/N]
  rackpool sim --trace FILE.csv --architecture traditional --hosts N --host-cores C --host-ram-gb R
               --policy first-fit|next-fit|best-fit|worst-fit|rackpool --out DIR
  rackpool sim merge --out DIR SHARD_DIR...
  rackpool sim storage --out DIR [--servers N --drives-per-server K --trace LOAD.csv ...]

Simulates a datacenter in virtual time on rackpool's own placement engine.
Flags:
`)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected argument %q (see rackpool sim --help)", fs.Arg(0))
	}
	cfg := sim.Defaults()
	var sweep *sim.Sweep
	if *scenario != "" {
		sc, err := sim.LoadScenario(*scenario)
		if err != nil {
			return err
		}
		cfg, sweep = sc.Config, sc.Sweep
	} else if *trace != "" {
		cfg.Architecture = sim.Traditional
		cfg.Name = "trace"
	} else if *writeTrace == "" && *writeTopology == "" {
		return errors.New("give --scenario FILE or --trace FILE (see rackpool sim --help)")
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if *trace != "" {
		cfg.Workload.Kind, cfg.Workload.Trace = sim.WorkloadTrace, *trace
	}
	if set["seed"] {
		cfg.Seed = *seed
	}
	if set["architecture"] {
		cfg.Architecture = *arch
	}
	if set["network"] {
		cfg.Network = *network
	}
	if set["hosts"] {
		cfg.Hosts = *hosts
	}
	if set["host-cores"] {
		cfg.HostCores = *hostCores
	}
	if set["host-ram-gb"] {
		cfg.HostRAMGB = *hostRAM
	}
	if set["policy"] {
		cfg.Policy = schedule.Policy(*policy)
	}
	if set["requests"] {
		cfg.Workload.Requests = *requests
	}
	if set["load"] {
		cfg.Workload.Load = *load
	}
	if err := cfg.Validate(); err != nil {
		return flagError(err)
	}
	switch {
	case *writeTopology != "":
		return writeFileAtomic(*writeTopology, sim.TopologyFile(&cfg))
	case *writeTrace != "":
		if cfg.Workload.Kind != sim.WorkloadMONet {
			return errors.New("--write-trace writes the MONet generator's workload; the scenario's workload is " + cfg.Workload.Kind)
		}
		var b strings.Builder
		if err := sim.WriteTrace(&b, sim.GenerateMONet(cfg.Workload, cfg.Seed)); err != nil {
			return err
		}
		return writeFileAtomic(*writeTrace, []byte(b.String()))
	}
	if *out == "" {
		return errors.New("--out DIR is required")
	}
	stopProfiles, err := profiling.Start(*cpuProfile, *memProfile)
	if err != nil {
		return err
	}
	defer func() {
		if perr := stopProfiles(); perr != nil && err == nil {
			err = perr
		}
	}()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	bar := newProgressBar(os.Stderr, *quiet)
	if sweep != nil {
		shard, shards, err := parseShard(*shardFlag)
		if err != nil {
			return err
		}
		rows, err := sim.RunSweep(ctx, cfg, sweep, shard, shards, *workers, bar.update("points"))
		bar.done()
		if err != nil {
			return err
		}
		axes := make([]string, len(sweep.Axes))
		for i, a := range sweep.Axes {
			axes[i] = a.Name
		}
		if err := report.WriteSweepReport(*out, axes, rows); err != nil {
			return err
		}
		fmt.Printf("sweep: %d points -> %s/report.html\n", len(rows), *out)
		return nil
	}
	if *shardFlag != "" {
		return errors.New("--shard needs a scenario with a sweep section")
	}
	res, err := sim.Run(ctx, cfg, bar.update("requests"))
	bar.done()
	if err != nil {
		return err
	}
	if err := report.WriteReport(*out, res); err != nil {
		return err
	}
	if *acceptedIDs != "" {
		var b strings.Builder
		for _, id := range res.AcceptedIDs {
			b.WriteString(id)
			b.WriteByte('\n')
		}
		if err := writeFileAtomic(*acceptedIDs, []byte(b.String())); err != nil {
			return err
		}
	}
	s := res.Summary
	fmt.Printf("%s: %d requests, %d accepted (%.2f%%), %.1fs wall (%.0f decisions/s) -> %s/report.html\n",
		s.Name, s.Requests, s.Accepted, 100*s.AcceptanceRatio, s.WallSeconds, s.DecisionsPerSec, *out)
	return nil
}

// flagError turns a configuration field error into the flag's words.
func flagError(err error) error {
	var fe *sim.FieldError
	if errors.As(err, &fe) {
		return fmt.Errorf("%s (--%s or the scenario's %s)", err, strings.ReplaceAll(fe.Field, "_", "-"), fe.Field)
	}
	return err
}

func parseShard(s string) (int, int, error) {
	if s == "" {
		return 0, 1, nil
	}
	a, b, ok := strings.Cut(s, "/")
	i, err1 := strconv.Atoi(a)
	n, err2 := strconv.Atoi(b)
	if !ok || err1 != nil || err2 != nil || n < 1 || i < 0 || i >= n {
		return 0, 0, fmt.Errorf("--shard %q: want I/N with 0 <= I < N, e.g. 0/4", s)
	}
	return i, n, nil
}

func runSimMerge(args []string) error {
	fs := flag.NewFlagSet("sim merge", flag.ContinueOnError)
	out := fs.String("out", "", "output directory for the merged sweep; required")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *out == "" || fs.NArg() == 0 {
		return errors.New("usage: rackpool sim merge --out DIR SHARD_DIR [SHARD_DIR]")
	}
	rows, err := report.MergeSweeps(fs.Args())
	if err != nil {
		return err
	}
	var axes []string
	if len(rows) > 0 {
		axes = sim.SweepAxes(rows)
	}
	if err := report.WriteSweepReport(*out, axes, rows); err != nil {
		return err
	}
	fmt.Printf("merged %d points from %d shards -> %s/report.html\n", len(rows), fs.NArg(), *out)
	return nil
}

func writeFileAtomic(path string, data []byte) error { return writeFile(path, data, 0o644) }

// writeFile writes the whole file or nothing (a temporary file renamed
// over path), creating its directory first, as --out directories are.
func writeFile(path string, data []byte, perm os.FileMode) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, perm); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// progressBar draws "[=====>    ] 45% 450000/1000000 requests 3.2s" on a
// terminal, at most five times a second, once a run has taken a second.
type progressBar struct {
	w     io.Writer
	on    bool
	start time.Time
	drawn bool
}

func newProgressBar(w *os.File, quiet bool) *progressBar {
	fi, err := w.Stat()
	tty := err == nil && fi.Mode()&os.ModeCharDevice != 0
	return &progressBar{w: w, on: tty && !quiet, start: time.Now()}
}

func (p *progressBar) update(unit string) sim.Progress {
	if !p.on {
		return nil
	}
	return func(done, total int) {
		el := time.Since(p.start)
		if el < time.Second || total == 0 {
			return
		}
		const width = 30
		frac := float64(done) / float64(total)
		n := int(frac * width)
		bar := strings.Repeat("=", n)
		if n < width {
			bar += ">" + strings.Repeat(" ", width-n-1)
		}
		eta := ""
		if frac > 0 && frac < 1 {
			eta = fmt.Sprintf(", ~%.0fs left", el.Seconds()/frac-el.Seconds())
		}
		fmt.Fprintf(p.w, "\r[%s] %3.0f%% %d/%d %s %.1fs%s   ", bar, 100*frac, done, total, unit, el.Seconds(), eta)
		p.drawn = true
	}
}

func (p *progressBar) done() {
	if p.drawn {
		fmt.Fprintln(p.w)
	}
}
