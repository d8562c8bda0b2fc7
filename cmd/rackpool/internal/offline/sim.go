package offline

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"rackpool/cmd/rackpool/internal/cli"
	"rackpool/internal/profiling"
	"rackpool/internal/schedule"
	"rackpool/internal/sim"
	"rackpool/internal/sim/report"
)

const simLong = `Simulates a datacenter in virtual time on rackpool's own placement engine
(docs/simulation.md): a scenario file (its sweep section runs every point, sharded
over machines with --shard), or quick flags for a trace run. The run flags override
the scenario's values. Writes summary.json, CSV, SVG and report.html to --out.`

const simExample = `  rackpool sim --scenario FILE --out DIR [--seed N] [--shard I/N]
  rackpool sim --trace FILE.csv --architecture traditional --hosts N --host-cores C --host-ram-gb R \\
               --policy first-fit|next-fit|best-fit|worst-fit|rackpool --out DIR
  rackpool sim merge --out DIR SHARD_DIR...
  rackpool sim storage --out DIR [--servers N --drives-per-server K --trace LOAD.csv ...]`

// SimCmd is `rackpool sim`: a scenario file, or quick flags for a trace
// run; `rackpool sim merge` joins the outputs of a sharded sweep, `rackpool
// sim storage` simulates elastic storage.
func SimCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:     "sim --scenario FILE --out DIR | --trace CSV ...",
		Short:   "simulate a datacenter on the placement engine (see sim --help)",
		Long:    simLong,
		Example: simExample,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) > 0 {
				return cli.Usagef("unexpected argument %q (see rackpool sim --help)", args[0])
			}
			return nil
		},
	}
	fs := cmd.Flags()
	var o simConfig
	fs.StringVar(&o.scenario, "scenario", "", "scenario file (YAML); the other run flags override its values")
	fs.StringVar(&o.out, "out", "", "output directory (summary.json, CSV, SVG, report.html); required")
	fs.Int64Var(&o.seed, "seed", 0, "random seed (default: the scenario's, else 1)")
	fs.StringVar(&o.trace, "trace", "", "replay this CSV trace (id,arrival,cores,ram_gb,hold[,gpus,storage_gb,max_latency_ns])")
	fs.StringVar(&o.arch, "architecture", "", "traditional | rack | pod (default: traditional with --trace, else the scenario's)")
	fs.StringVar(&o.network, "network", "", "pod network: monet | fat-tree")
	fs.IntVar(&o.hosts, "hosts", 0, "traditional: number of servers")
	fs.IntVar(&o.hostCores, "host-cores", 0, "traditional: cores per server")
	fs.IntVar(&o.hostRAM, "host-ram-gb", 0, "traditional: RAM per server (GB)")
	fs.StringVar(&o.policy, "policy", "", "first-fit | next-fit | best-fit | worst-fit | rackpool")
	fs.IntVar(&o.requests, "requests", 0, "MONet generator: number of requests")
	fs.Float64Var(&o.load, "load", 0, "MONet generator: arrival-rate multiplier")
	fs.StringVar(&o.writeTrace, "write-trace", "", "write the generated workload as a CSV trace to this file and exit")
	fs.StringVar(&o.writeTopology, "write-topology", "", "write the topology file the run simulates and exit")
	fs.StringVar(&o.shard, "shard", "", "sweeps: run only shard I of N (I/N, 0-based), for sweeps split over machines")
	fs.IntVar(&o.workers, "workers", 0, "sweeps: points run at once (default: one per core)")
	fs.BoolVar(&o.quiet, "quiet", false, "no progress bar")
	fs.StringVar(&o.acceptedIDs, "accepted-ids", "", "also write the accepted requests' IDs, one per line, to this file")
	fs.StringVar(&o.cpuProfile, "cpuprofile", "", "write a CPU profile of the run to this file (go tool pprof)")
	fs.StringVar(&o.memProfile, "memprofile", "", "write a heap profile at the end of the run to this file (go tool pprof)")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error { return runSim(o, cmd.Flags().Changed) }
	cmd.AddCommand(simMergeCmd(), simStorageCmd())
	return cmd
}

// simConfig is sim's command line.
type simConfig struct {
	scenario, out, trace, arch, network, policy, writeTrace, writeTopology, shard, acceptedIDs, cpuProfile, memProfile string
	seed                                                                                                               int64
	hosts, hostCores, hostRAM, requests, workers                                                                       int
	load                                                                                                               float64
	quiet                                                                                                              bool
}

// runSim runs a scenario or a trace; set says which flags the command line
// gave (they override the scenario's values).
func runSim(o simConfig, set func(name string) bool) (err error) {
	cfg := sim.Defaults()
	var sweep *sim.Sweep
	if o.scenario != "" {
		sc, err := sim.LoadScenario(o.scenario)
		if err != nil {
			return err
		}
		cfg, sweep = sc.Config, sc.Sweep
	} else if o.trace != "" {
		cfg.Architecture = sim.Traditional
		cfg.Name = "trace"
	} else if o.writeTrace == "" && o.writeTopology == "" {
		return errors.New("give --scenario FILE or --trace FILE (see rackpool sim --help)")
	}
	if o.trace != "" {
		cfg.Workload.Kind, cfg.Workload.Trace = sim.WorkloadTrace, o.trace
	}
	if set("seed") {
		cfg.Seed = o.seed
	}
	if set("architecture") {
		cfg.Architecture = o.arch
	}
	if set("network") {
		cfg.Network = o.network
	}
	if set("hosts") {
		cfg.Hosts = o.hosts
	}
	if set("host-cores") {
		cfg.HostCores = o.hostCores
	}
	if set("host-ram-gb") {
		cfg.HostRAMGB = o.hostRAM
	}
	if set("policy") {
		cfg.Policy = schedule.Policy(o.policy)
	}
	if set("requests") {
		cfg.Workload.Requests = o.requests
	}
	if set("load") {
		cfg.Workload.Load = o.load
	}
	if err := cfg.Validate(); err != nil {
		return flagError(err)
	}
	switch {
	case o.writeTopology != "":
		return writeFileAtomic(o.writeTopology, sim.TopologyFile(&cfg))
	case o.writeTrace != "":
		if cfg.Workload.Kind != sim.WorkloadMONet {
			return errors.New("--write-trace writes the MONet generator's workload; the scenario's workload is " + cfg.Workload.Kind)
		}
		var b strings.Builder
		if err := sim.WriteTrace(&b, sim.GenerateMONet(cfg.Workload, cfg.Seed)); err != nil {
			return err
		}
		return writeFileAtomic(o.writeTrace, []byte(b.String()))
	}
	if o.out == "" {
		return errors.New("--out DIR is required")
	}
	stopProfiles, err := profiling.Start(o.cpuProfile, o.memProfile)
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
	bar := newProgressBar(os.Stderr, o.quiet)
	if sweep != nil {
		shard, shards, err := parseShard(o.shard)
		if err != nil {
			return err
		}
		rows, err := sim.RunSweep(ctx, cfg, sweep, shard, shards, o.workers, bar.update("points"))
		bar.done()
		if err != nil {
			return err
		}
		axes := make([]string, len(sweep.Axes))
		for i, a := range sweep.Axes {
			axes[i] = a.Name
		}
		if err := report.WriteSweepReport(o.out, axes, rows); err != nil {
			return err
		}
		fmt.Printf("sweep: %d points -> %s/report.html\n", len(rows), o.out)
		return nil
	}
	if o.shard != "" {
		return errors.New("--shard needs a scenario with a sweep section")
	}
	res, err := sim.Run(ctx, cfg, bar.update("requests"))
	bar.done()
	if err != nil {
		return err
	}
	if err := report.WriteReport(o.out, res); err != nil {
		return err
	}
	if o.acceptedIDs != "" {
		var b strings.Builder
		for _, id := range res.AcceptedIDs {
			b.WriteString(id)
			b.WriteByte('\n')
		}
		if err := writeFileAtomic(o.acceptedIDs, []byte(b.String())); err != nil {
			return err
		}
	}
	s := res.Summary
	fmt.Printf("%s: %d requests, %d accepted (%.2f%%), %.1fs wall (%.0f decisions/s) -> %s/report.html\n",
		s.Name, s.Requests, s.Accepted, 100*s.AcceptanceRatio, s.WallSeconds, s.DecisionsPerSec, o.out)
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

func simMergeCmd() *cobra.Command {
	var out string
	cmd := &cobra.Command{
		Use:   "merge --out DIR SHARD_DIR...",
		Short: "join the outputs of a sharded sweep",
		Long:  "Joins the output directories of a sweep's shards (sim --shard I/N) into one sweep report in --out.",
		Args:  cli.SomeArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if out == "" {
				return cli.Usagef("usage: %s", cmd.UseLine())
			}
			rows, err := report.MergeSweeps(args)
			if err != nil {
				return err
			}
			var axes []string
			if len(rows) > 0 {
				axes = sim.SweepAxes(rows)
			}
			if err := report.WriteSweepReport(out, axes, rows); err != nil {
				return err
			}
			fmt.Printf("merged %d points from %d shards -> %s/report.html\n", len(rows), len(args), out)
			return nil
		},
	}
	cmd.Flags().StringVar(&out, "out", "", "output directory for the merged sweep; required")
	return cmd
}

func writeFileAtomic(path string, data []byte) error { return cli.WriteFile(path, data, 0o644) }

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
