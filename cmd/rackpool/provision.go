package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"time"

	"rackpool/internal/demand"
)

const provisionUsage = `Usage:
  rackpool provision record --out FILE.csv [--interval 100ms] [--entity NAME] -- CMD [ARG...]
  rackpool provision gen --kind giraph|diurnal|bursty --out FILE.csv [--seed N] [--entities N]
                         [--hours H] [--interval SECONDS]
  rackpool provision eval --trace FILE.csv --out DIR [--policy P] [--window W] [--horizon H] ...
  rackpool provision subscribe SYSTEM [--mode on|dry-run] [--min SIZE] [--max SIZE]
  rackpool provision status [SYSTEM]
  rackpool provision unsubscribe SYSTEM...

Demand traces and predictive provisioning (docs/provisioning.md):
  record  run CMD and sample the resident memory of its whole process tree
  gen     write a synthetic trace (giraph: P0's TopKPageRank, 2.78:1 per node, 1.68:1 in aggregate)
  eval    replay a trace under static-peak, reactive, predictive and oracle provisioning; write
          summary.json, comparison.json and report.html (see rackpool provision eval --help)
  subscribe, status, unsubscribe
          opt a composed system into serve --provisioning, show its last decision explained,
          opt it out
`

// runProvision is `rackpool provision`: it dispatches on the subcommand.
func runProvision(args []string) error {
	if len(args) == 0 {
		fmt.Fprint(os.Stderr, provisionUsage)
		return errors.New("missing subcommand: record, gen, eval, subscribe, unsubscribe or status")
	}
	switch args[0] {
	case "record":
		return runProvisionRecord(args[1:])
	case "gen":
		return runProvisionGen(args[1:])
	case "eval":
		return runProvisionEval(args[1:])
	case "subscribe":
		return runProvisionSubscribe(args[1:])
	case "unsubscribe":
		return runProvisionUnsubscribe(args[1:])
	case "status":
		return runProvisionStatus(args[1:])
	case "help", "-h", "-help", "--help":
		fmt.Fprint(os.Stderr, provisionUsage)
		return flag.ErrHelp
	}
	return fmt.Errorf("unknown subcommand %q: record, gen, eval, subscribe, unsubscribe or status (see rackpool provision help)", args[0])
}

// runProvisionRecord runs a command under demand.Record and writes its
// trace.
func runProvisionRecord(args []string) error {
	fs := flag.NewFlagSet("provision record", flag.ContinueOnError)
	out := fs.String("out", "", "trace file to write (CSV); required")
	interval := fs.Duration("interval", demand.DefaultRecordInterval, "sampling interval")
	entity := fs.String("entity", "", "entity name in the trace (default: the command's base name)")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), `Usage:
  rackpool provision record --out FILE.csv [--interval 100ms] [--entity NAME] -- CMD [ARG...]

Runs CMD (its input and output are rackpool's) and samples the resident memory
of its process tree (CMD and every descendant) until CMD exits, then writes the
trace. An interrupt (Ctrl-C) reaches CMD too and the recording waits for it to
exit; a second interrupt, or SIGTERM, kills the tree. The trace is written in
every case.
Flags:
`)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	argv := fs.Args()
	switch {
	case *out == "":
		return errors.New("--out FILE.csv is required")
	case len(argv) == 0:
		return errors.New("no command to record: rackpool provision record --out FILE.csv -- CMD [ARG...]")
	case *interval <= 0:
		return fmt.Errorf("--interval %v: want a positive duration", *interval)
	}
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

	r, recErr := demand.Record(ctx, cmd, demand.RecordOptions{Interval: *interval, Entity: *entity})
	if r == nil {
		return recErr
	}
	if err := demand.WriteFile(*out, r.Trace); err != nil {
		return fmt.Errorf("write %s: %w", *out, err)
	}
	s := &r.Trace.Entities[0]
	fmt.Fprintf(os.Stderr, "%s: %d samples over %.1f s, RSS %s to %s (peak %.2f× the minimum), up to %d processes",
		*out, s.Len(), r.Trace.End(s), gibBytes(slices.Min(s.MemoryGiB)), gibBytes(slices.Max(s.MemoryGiB)),
		ratio(slices.Max(s.MemoryGiB), slices.Min(s.MemoryGiB)), r.PeakProcesses)
	if r.Interpolated > 0 {
		fmt.Fprintf(os.Stderr, ", %d samples interpolated (sampling fell behind)", r.Interpolated)
	}
	fmt.Fprintln(os.Stderr)
	switch {
	case recErr != nil:
		return fmt.Errorf("%w (the trace so far is in %s)", recErr, *out)
	case r.State != nil && !r.State.Success():
		return fmt.Errorf("%s: %s (the trace is in %s)", argv[0], r.State, *out)
	}
	return nil
}

// runProvisionGen writes a synthetic trace.
func runProvisionGen(args []string) error {
	fs := flag.NewFlagSet("provision gen", flag.ContinueOnError)
	kind := fs.String("kind", "", "generator: "+strings.Join(demand.Kinds, ", ")+"; required")
	out := fs.String("out", "", "trace file to write (CSV), - for standard output; required")
	seed := fs.Int64("seed", 1, "random seed (the same seed gives the same trace)")
	entities := fs.Int("entities", 0, "entities (giraph: nodes) (default: the kind's, giraph 50, others 20)")
	hours := fs.Float64("hours", 0, "length of the trace in hours (default: the kind's, giraph 1, diurnal 168, bursty 6)")
	interval := fs.Float64("interval", 0, "seconds between samples (default: the kind's, giraph 5, diurnal 300, bursty 10)")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), `Usage:
  rackpool provision gen --kind giraph|diurnal|bursty --out FILE.csv [--seed N] [--entities N]
                         [--hours H] [--interval SECONDS]

Writes a synthetic demand trace, the same for the same flags. The kinds are
described in docs/provisioning.md.
Flags:
`)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	switch {
	case fs.NArg() > 0:
		return fmt.Errorf("unexpected argument %q (see rackpool provision gen --help)", fs.Arg(0))
	case *kind == "":
		return fmt.Errorf("--kind is required: %s", strings.Join(demand.Kinds, ", "))
	case *out == "":
		return errors.New("--out FILE.csv is required (- for standard output)")
	case *entities < 0:
		return fmt.Errorf("--entities %d: want a positive number", *entities)
	case *hours < 0:
		return fmt.Errorf("--hours %g: want a positive number", *hours)
	case *interval < 0:
		return fmt.Errorf("--interval %g: want a positive number of seconds", *interval)
	}
	tr, err := demand.Generate(*kind, demand.GenerateOptions{Seed: *seed, Entities: *entities, Interval: *interval, Duration: *hours * 3600})
	if err != nil {
		return err
	}
	if *out == "-" {
		if err := demand.Write(os.Stdout, tr); err != nil {
			return err
		}
	} else if err := demand.WriteFile(*out, tr); err != nil {
		return fmt.Errorf("write %s: %w", *out, err)
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
		*out, *kind, len(tr.Entities), s.Len(), tr.Interval, time.Duration(tr.End(s)*float64(time.Second)),
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
