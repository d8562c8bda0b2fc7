package offline

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"rackpool/cmd/rackpool/internal/cli"
	"rackpool/internal/demand"
)

const provisionLong = `Demand traces and predictive provisioning (docs/provisioning.md):
  record  run CMD and sample the resident memory of its whole process tree
  gen     write a synthetic trace (giraph: P0's TopKPageRank, 2.78:1 per node, 1.68:1 in aggregate)
  eval    replay a trace under static-peak, reactive, predictive and oracle provisioning; write
          summary.json, comparison.json and report.html (see rackpool provision eval --help)
  subscribe, status, unsubscribe
          opt a composed system into serve --provisioning, show its last decision explained,
          opt it out`

const provisionExample = `  rackpool provision record --out FILE.csv [--interval 100ms] [--entity NAME] -- CMD [ARG...]
  rackpool provision gen --kind giraph|diurnal|bursty --out FILE.csv [--seed N] [--entities N]
                         [--hours H] [--interval SECONDS]
  rackpool provision eval --trace FILE.csv --out DIR [--policy P] [--window W] [--horizon H] ...
  rackpool provision subscribe SYSTEM [--mode on|dry-run] [--min SIZE] [--max SIZE]
  rackpool provision status [SYSTEM]
  rackpool provision unsubscribe SYSTEM...`

// ProvisionCmd is `rackpool provision`: traces and offline evaluation, and
// the live loop's subscriptions, the sub-verbs given (they talk to the
// control plane: package client).
func ProvisionCmd(live ...*cobra.Command) *cobra.Command {
	cmd := &cobra.Command{
		Use:     "provision record|gen|eval|subscribe|status ...",
		Short:   "demand traces and offline evaluation of provisioning policies (docs/provisioning.md)",
		Long:    provisionLong,
		Example: provisionExample,
		Args:    cobra.ArbitraryArgs,
		RunE:    cli.GroupRun,
		// The usage line names the sub-verbs, whose flags are their own.
		DisableFlagsInUseLine: true,
	}
	cmd.AddCommand(provisionRecordCmd(), provisionGenCmd(), provisionEvalCmd())
	cmd.AddCommand(live...)
	return cmd
}

// provisionRecordCmd runs a command under demand.Record and writes its
// trace.
func provisionRecordCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "record --out FILE.csv [--interval 100ms] [--entity NAME] -- CMD [ARG...]",
		Short: "run a command and record the resident memory of its process tree",
		Long: `Runs CMD (its input and output are rackpool's) and samples the resident memory
of its process tree (CMD and every descendant) until CMD exits, then writes the
trace. An interrupt (Ctrl-C) reaches CMD too and the recording waits for it to
exit; a second interrupt, or SIGTERM, kills the tree. The trace is written in
every case.`,
		Example: "  rackpool provision record --out build.csv -- go build ./...",
	}
	fs := cmd.Flags()
	fs.SetInterspersed(false) // CMD's own flags are not record's
	out := fs.String("out", "", "trace file to write (CSV); required")
	interval := fs.Duration("interval", demand.DefaultRecordInterval, "sampling interval")
	entity := fs.String("entity", "", "entity name in the trace (default: the command's base name)")
	cmd.RunE = func(_ *cobra.Command, argv []string) error {
		switch {
		case *out == "":
			return cli.Usagef("--out FILE.csv is required")
		case len(argv) == 0:
			return cli.Usagef("no command to record: rackpool provision record --out FILE.csv -- CMD [ARG...]")
		case *interval <= 0:
			return fmt.Errorf("--interval %v: want a positive duration", *interval)
		}
		return record(*out, *interval, *entity, argv)
	}
	return cmd
}

func record(out string, interval time.Duration, entity string, argv []string) error {
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sigs)
	go func() {
		interrupted := false
		for {
			select {
			case <-ctx.Done():
				return
			case sig := <-sigs:
				if sig == os.Interrupt && !interrupted {
					interrupted = true
					fmt.Fprintln(os.Stderr, "rackpool provision record: waiting for the command to exit (interrupt again to kill it)")
					continue
				}
				cancel()
				return
			}
		}
	}()

	r, recErr := demand.Record(ctx, cmd, demand.RecordOptions{Interval: interval, Entity: entity})
	if r == nil {
		return recErr
	}
	if err := demand.WriteFile(out, r.Trace); err != nil {
		return fmt.Errorf("write %s: %w", out, err)
	}
	s := &r.Trace.Entities[0]
	fmt.Fprintf(os.Stderr, "%s: %d samples over %.1f s, RSS %s to %s (peak %.2f× the minimum), up to %d processes",
		out, s.Len(), r.Trace.End(s), gibBytes(slices.Min(s.MemoryGiB)), gibBytes(slices.Max(s.MemoryGiB)),
		ratio(slices.Max(s.MemoryGiB), slices.Min(s.MemoryGiB)), r.PeakProcesses)
	if r.Interpolated > 0 {
		fmt.Fprintf(os.Stderr, ", %d samples interpolated (sampling fell behind)", r.Interpolated)
	}
	fmt.Fprintln(os.Stderr)
	switch {
	case recErr != nil:
		return fmt.Errorf("%w (the trace so far is in %s)", recErr, out)
	case r.State != nil && !r.State.Success():
		return fmt.Errorf("%s: %s (the trace is in %s)", argv[0], r.State, out)
	}
	return nil
}

// provisionGenCmd writes a synthetic trace.
func provisionGenCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "gen --kind giraph|diurnal|bursty --out FILE.csv [--seed N] [--entities N] [--hours H] [--interval SECONDS]",
		Short: "write a synthetic demand trace",
		Long: `Writes a synthetic demand trace, the same for the same flags. The kinds are
described in docs/provisioning.md.`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) > 0 {
				return cli.Usagef("unexpected argument %q (see rackpool provision gen --help)", args[0])
			}
			return nil
		},
	}
	fs := cmd.Flags()
	var o genConfig
	fs.StringVar(&o.kind, "kind", "", "generator: "+strings.Join(demand.Kinds, ", ")+"; required")
	fs.StringVar(&o.out, "out", "", "trace file to write (CSV), - for standard output; required")
	fs.Int64Var(&o.seed, "seed", 1, "random seed (the same seed gives the same trace)")
	fs.IntVar(&o.entities, "entities", 0, "entities (giraph: nodes) (default: the kind's, giraph 50, others 20)")
	fs.Float64Var(&o.hours, "hours", 0, "length of the trace in hours (default: the kind's, giraph 1, diurnal 168, bursty 6)")
	fs.Float64Var(&o.interval, "interval", 0, "seconds between samples (default: the kind's, giraph 5, diurnal 300, bursty 10)")
	cmd.RunE = func(*cobra.Command, []string) error { return generate(o) }
	return cmd
}

// genConfig is provision gen's command line.
type genConfig struct {
	kind, out       string
	seed            int64
	entities        int
	hours, interval float64
}

func generate(o genConfig) error {
	switch {
	case o.kind == "":
		return fmt.Errorf("--kind is required: %s", strings.Join(demand.Kinds, ", "))
	case o.out == "":
		return errors.New("--out FILE.csv is required (- for standard output)")
	case o.entities < 0:
		return fmt.Errorf("--entities %d: want a positive number", o.entities)
	case o.hours < 0:
		return fmt.Errorf("--hours %g: want a positive number", o.hours)
	case o.interval < 0:
		return fmt.Errorf("--interval %g: want a positive number of seconds", o.interval)
	}
	tr, err := demand.Generate(o.kind, demand.GenerateOptions{Seed: o.seed, Entities: o.entities, Interval: o.interval, Duration: o.hours * 3600})
	if err != nil {
		return err
	}
	if o.out == "-" {
		if err := demand.Write(os.Stdout, tr); err != nil {
			return err
		}
	} else if err := demand.WriteFile(o.out, tr); err != nil {
		return fmt.Errorf("write %s: %w", o.out, err)
	}
	lo, hi := 0.0, 0.0
	for i := range tr.Entities {
		r := demand.PeakToAverage(tr.Entities[i].MemoryGiB)
		if i == 0 || r < lo {
			lo = r
		}
		hi = max(hi, r)
	}
	_, agg := tr.Aggregate()
	s := &tr.Entities[0]
	fmt.Fprintf(os.Stderr, "%s: %s, %d entities × %d samples at %g s (%s); peak:average per entity %.2f to %.2f, aggregate %.2f\n",
		o.out, o.kind, len(tr.Entities), s.Len(), tr.Interval, time.Duration(tr.End(s)*float64(time.Second)),
		lo, hi, demand.PeakToAverage(agg))
	return nil
}

// gibBytes formats a size given in GiB, in MiB below 1 GiB.
func gibBytes(gib float64) string {
	if gib < 1 {
		return fmt.Sprintf("%.1f MiB", gib*1024)
	}
	return fmt.Sprintf("%.2f GiB", gib)
}

func ratio(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return a / b
}
