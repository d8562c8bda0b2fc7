package offline

import (
	"errors"
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"rackpool/cmd/rackpool/internal/cli"
	"rackpool/internal/demand"
	"rackpool/internal/forecast"
	"rackpool/internal/provision"
)

const provisionEvalLong = `Replays a demand trace (docs/provisioning.md: CSV time_s,entity,memory_gib[,gpus][,io_mbps]) under a
provisioning policy and writes DIR/summary.json (that policy), DIR/comparison.json (every policy) and
DIR/report.html (tables and plots). W, H and L are a number of trace intervals or a duration (10m, 1h),
rounded up to whole intervals. Policies only see the past; static-peak and oracle use the whole trace
and bound the others. With --match-reactive (the default) the reactive policy in the comparison gets
the least headroom that provisions as much as the predictive one, so the two compare at equal memory.`

const provisionEvalExample = `  rackpool provision eval --trace FILE.csv --out DIR [--policy static-peak|reactive|predictive|oracle]
                          [--window W] [--horizon H] [--lead L] [--granule G] [--resource memory|gpus|io_mbps]
                          [--method ar|arma|ewma|seasonal-naive] [--quantile Q] [--headroom F]
                          [--hysteresis F] [--min-hold N] [--sweep] [--match-reactive=false]`

// provisionEvalCmd is `rackpool provision eval`.
func provisionEvalCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:     "eval --trace FILE.csv --out DIR [--policy P] [--window W] [--horizon H] ...",
		Short:   "replay a trace under every provisioning policy and report",
		Long:    provisionEvalLong,
		Example: provisionEvalExample,
		Args:    cli.NoArgs,
	}
	fs := cmd.Flags()
	var o evalConfig
	fs.StringVar(&o.tracePath, "trace", "", "demand trace (CSV); required")
	fs.StringVar(&o.out, "out", "", "directory for summary.json, comparison.json and report.html; required")
	fs.StringVar(&o.policy, "policy", string(provision.Predictive), "policy whose summary.json is written: static-peak, reactive, predictive or oracle")
	fs.StringVar(&o.window, "window", "", "observation window: intervals or a duration (default 128 intervals)")
	fs.StringVar(&o.horizon, "horizon", "", "prediction window: intervals or a duration (default 2 intervals)")
	fs.StringVar(&o.lead, "lead", "", "steps a change takes to be in force: intervals or a duration (default 1 interval)")
	fs.Float64Var(&o.granule, "granule", 0, "unit the resource is provisioned in, GiB for memory (default 1, or a power of two near a sixteenth of the largest peak below 16)")
	fs.StringVar(&o.resource, "resource", "memory", "trace column to evaluate: memory, gpus or io_mbps")
	fs.StringVar(&o.method, "method", "", "predictive model: ar, arma, ewma or seasonal-naive (default: AR of log growth, lag ≤ 32)")
	fs.Float64Var(&o.quantile, "quantile", 0, "upper quantile of the forecast peak (default 0.99)")
	fs.Float64Var(&o.headroom, "headroom", 0, "reactive margin over the last use when not matched, as a fraction (default 0.1)")
	fs.Float64Var(&o.hysteresis, "hysteresis", 0, "how far below the level a target must be before it shrinks, as a fraction (default 0.1)")
	fs.IntVar(&o.minHold, "min-hold", 0, "steps a level is held before it may shrink (default: the prediction window)")
	fs.BoolVar(&o.sweep, "sweep", false, "also evaluate the predictive policy over a grid of windows and horizons (slower)")
	fs.BoolVar(&o.match, "match-reactive", true, "compare the reactive policy at the predictive policy's quantity")
	fs.BoolVar(&o.quiet, "quiet", false, "print nothing but errors")
	cmd.RunE = func(*cobra.Command, []string) error { return evaluate(o) }
	return cmd
}

// evalConfig is provision eval's command line.
type evalConfig struct {
	tracePath, out, policy, window, horizon, lead, resource, method string
	granule, quantile, headroom, hysteresis                         float64
	minHold                                                         int
	sweep, match, quiet                                             bool
}

func evaluate(o evalConfig) error {
	switch {
	case o.tracePath == "":
		return errors.New("--trace FILE.csv is required")
	case o.out == "":
		return errors.New("--out DIR is required")
	}
	pol, err := provision.ParsePolicy(o.policy)
	if err != nil {
		return fmt.Errorf("--policy: %w", err)
	}
	tr, err := demand.ReadFile(o.tracePath)
	if err != nil {
		return err
	}
	in, err := provision.InputOf(tr, o.resource)
	if err != nil {
		return fmt.Errorf("--resource: %w", err)
	}
	if o.granule == 0 {
		o.granule = provision.AutoGranule(in)
	}
	rules := provision.Rules{Granule: o.granule, Headroom: o.headroom, Hysteresis: o.hysteresis, MinHold: o.minHold}
	for _, f := range []struct {
		name, v string
		dst     *int
	}{{"--window", o.window, &rules.Window}, {"--horizon", o.horizon, &rules.Horizon}, {"--lead", o.lead, &rules.Lead}} {
		if f.v == "" {
			continue
		}
		if *f.dst, err = intervals(f.v, in.Interval); err != nil {
			return fmt.Errorf("%s: %w", f.name, err)
		}
	}
	if o.method != "" || o.quantile != 0 {
		rules.Forecast = provision.DefaultForecast
		if o.method != "" {
			rules.Forecast = forecast.Config{Method: forecast.Method(o.method), FloorAtLast: true}
		}
		if o.quantile != 0 {
			rules.Forecast.Quantile = o.quantile
		}
	}
	if rules, err = rules.WithDefaults(); err != nil {
		return err
	}
	start := time.Now()
	all, err := provision.Compare(in, rules, o.match)
	if err != nil {
		return err
	}
	rep := provision.Report{Trace: o.tracePath, All: all, Matched: o.match}
	for _, r := range all {
		if r.Summary.Policy == pol {
			rep.Chosen = r
		}
	}
	if pol == provision.Reactive && o.match {
		// The reactive summary asked for is the one at the rules' headroom,
		// not the matched comparison's.
		if rep.Chosen, err = provision.Evaluate(in, provision.Reactive, rules); err != nil {
			return err
		}
	}
	if o.sweep {
		windows := []int{max(8, rules.Window/4), max(16, rules.Window/2), rules.Window, 2 * rules.Window}
		horizons := []int{1, 2, 4, 8, 16}
		progress := func(done, total int) {
			if !o.quiet {
				fmt.Fprintf(os.Stderr, "\rsweep %d/%d", done, total)
				if done == total {
					fmt.Fprintln(os.Stderr)
				}
			}
		}
		if rep.Sweep, err = provision.RunSweep(in, rules, windows, horizons, progress); err != nil {
			return err
		}
	}
	for i := range rep.All {
		rep.All[i].Summary.Resource = o.resource
	}
	rep.Chosen.Summary.Resource = o.resource
	if err := provision.WriteReport(o.out, rep); err != nil {
		return err
	}
	if o.quiet {
		return nil
	}
	cs := rep.Chosen.Summary
	fmt.Printf("%s: %d entities, %d intervals of %gs; window %d, horizon %d, lead %d, granule %g (%.1fs)\n",
		o.tracePath, cs.Entities, cs.Intervals, cs.IntervalSeconds, rules.Window, rules.Horizon, rules.Lead, rules.Granule,
		time.Since(start).Seconds())
	var rows [][]string
	for _, r := range all {
		s := r.Summary
		head := ""
		if s.Policy == provision.Reactive {
			head = fmt.Sprintf("%.1f%%", 100*s.Headroom)
		}
		rows = append(rows, []string{string(s.Policy), strconv.FormatFloat(s.ProvisionedGiBHours, 'g', 4, 64),
			fmt.Sprintf("%.1f%%", 100*s.SavingVsStaticPeak), fmt.Sprintf("%.2f%%", 100*s.ShortIntervalFraction),
			strconv.FormatFloat(s.ShortfallGiBHours, 'g', 3, 64), strconv.FormatFloat(s.ReconfigurationsPerHour, 'f', 1, 64), head})
	}
	cli.Table("POLICY\tPROVISIONED·H\tSAVING\tSHORT\tSHORTFALL·H\tRECONF/H\tHEADROOM", rows)
	fmt.Printf("wrote %s/{%s,%s,%s}\n", strings.TrimSuffix(o.out, "/"), provision.SummaryFile, provision.ComparisonFile, provision.ReportFile)
	return nil
}

// intervals reads a count of intervals ("48") or a duration ("10m"),
// rounded up to whole intervals of the given length in seconds.
func intervals(v string, interval float64) (int, error) {
	if n, err := strconv.Atoi(v); err == nil {
		if n < 1 {
			return 0, fmt.Errorf("%d intervals: want at least 1", n)
		}
		return n, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		return 0, fmt.Errorf("%q is neither a number of intervals nor a duration", v)
	}
	if d <= 0 {
		return 0, fmt.Errorf("%v: want a positive duration", d)
	}
	n := math.Ceil(d.Seconds()/interval - 1e-9)
	if n > 1<<16 {
		return 0, fmt.Errorf("%v is %g intervals of %gs: at most 65536", d, n, interval)
	}
	return int(n), nil
}
