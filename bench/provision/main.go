// Command provision measures predictive provisioning (P0 §8) offline, for
// docs/provisioning.md: every policy on the synthetic traces (Giraph-like,
// diurnal, bursty) and on the traces recorded on a real machine
// (internal/demand/testdata), the trade-off between provisioned memory and
// shortfall of the predictive policy (over its quantile) against the
// reactive one (over its headroom), the saving against the prediction
// window, and the forecast's cost per entity and step against statsmodels
// fitting the same model on the same windows.
//
//	go run ./bench/provision [-out docs] [-quick]
//
// It prints Markdown tables and writes provisioning-*.svg into -out.
package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"log"

	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"rackpool/internal/chart"
	"rackpool/internal/childproc"
	"rackpool/internal/demand"
	"rackpool/internal/forecast"
	"rackpool/internal/provision"
)

type trace struct {
	name    string
	in      provision.Input
	granule float64 // provision.AutoGranule: 1 GiB, smaller for the recorded processes
}

func main() {
	out := flag.String("out", "docs", "directory for the SVG charts")
	quick := flag.Bool("quick", false, "fewer points (a smoke run)")
	python := flag.String("python", ".venv-rf/bin/python", "Python with statsmodels, for the cost peer ('' to skip)")
	flag.Parse()
	log.SetFlags(0)
	traces := loadTraces()
	rules := provision.Rules{}

	fmt.Println("### Every policy, default rules (window 128, horizon 2, lead 1; reactive matched to the predictive quantity)")
	fmt.Println()
	fmt.Println("| trace | entities × intervals | policy | provisioned | saving vs static peak | short intervals | shortfall | reconfigurations / h |")
	fmt.Println("|---|---|---|---|---|---|---|---|")
	for _, tr := range traces {
		rules := rules
		rules.Granule = tr.granule
		all, err := provision.Compare(tr.in, rules, true)
		if err != nil {
			log.Fatalf("%s: %v", tr.name, err)
		}
		for _, r := range all {
			s := r.Summary
			pol := string(s.Policy)
			if s.Policy == provision.Reactive {
				pol += fmt.Sprintf(" (+%.1f%%)", 100*s.Headroom)
			}
			fmt.Printf("| %s | %d × %d | %s | %.4g GiB·h | %.1f%% | %.2f%% | %.3g GiB·h | %.0f |\n", tr.name, s.Entities,
				s.Intervals/max(s.Entities, 1), pol, s.ProvisionedGiBHours, 100*s.SavingVsStaticPeak, 100*s.ShortIntervalFraction,
				s.ShortfallGiBHours, s.ReconfigurationsPerHour)
		}
	}
	fmt.Println()

	// The frontier: provisioned against short intervals.
	quantiles := []float64{0.5, 0.8, 0.9, 0.95, 0.99, 0.999}
	headrooms := []float64{0.0001, 0.05, 0.1, 0.2, 0.4, 0.8}
	if *quick {
		quantiles, headrooms = []float64{0.9, 0.99}, []float64{0.1, 0.4}
	}
	fmt.Println("### Memory against shortfall: predictive over its quantile, reactive over its headroom")
	fmt.Println()
	fmt.Println("| trace | policy | knob | provisioned / static peak | short intervals | shortfall GiB·h |")
	fmt.Println("|---|---|---|---|---|---|")
	for _, tr := range traces {
		rules := rules
		rules.Granule = tr.granule
		c := chart.Line{Title: "Memory against shortfall: " + tr.name, XLabel: "provisioned (% of static peak)", YLabel: "short intervals (%)",
			Series: []chart.Series{{Name: "predictive (quantile)"}, {Name: "reactive (headroom)"}}}
		for _, q := range quantiles {
			r := rules
			r.Forecast = provision.DefaultForecast
			r.Forecast.Quantile = q
			res, err := provision.Evaluate(tr.in, provision.Predictive, r)
			if err != nil {
				log.Fatal(err)
			}
			s := res.Summary
			c.Series[0].Points = append(c.Series[0].Points, chart.Point{X: 100 * (1 - s.SavingVsStaticPeak), Y: 100 * s.ShortIntervalFraction})
			fmt.Printf("| %s | predictive | q = %g | %.1f%% | %.2f%% | %.3g |\n", tr.name, q, 100*(1-s.SavingVsStaticPeak), 100*s.ShortIntervalFraction, s.ShortfallGiBHours)
		}
		for _, h := range headrooms {
			r := rules
			r.Headroom = h
			res, err := provision.Evaluate(tr.in, provision.Reactive, r)
			if err != nil {
				log.Fatal(err)
			}
			s := res.Summary
			c.Series[1].Points = append(c.Series[1].Points, chart.Point{X: 100 * (1 - s.SavingVsStaticPeak), Y: 100 * s.ShortIntervalFraction})
			fmt.Printf("| %s | reactive | +%.0f%% | %.1f%% | %.2f%% | %.3g |\n", tr.name, 100*h, 100*(1-s.SavingVsStaticPeak), 100*s.ShortIntervalFraction, s.ShortfallGiBHours)
		}
		for i := range c.Series {
			slices.SortFunc(c.Series[i].Points, func(a, b chart.Point) int { return cmpF(a.X, b.X) })
		}
		if strings.HasPrefix(tr.name, "giraph") || strings.HasPrefix(tr.name, "bursty") || strings.HasPrefix(tr.name, "rec:") {
			writeChart(*out, "provisioning-frontier-"+slug(tr.name)+".svg", c)
		}
	}
	fmt.Println()

	// Saving against the prediction window on the Giraph-like trace.
	g := traces[0]
	horizons := []int{1, 2, 4, 8, 16, 32}
	if *quick {
		horizons = []int{1, 4}
	}
	sw, err := provision.RunSweep(g.in, rules, []int{64, 128}, horizons, nil)
	if err != nil {
		log.Fatal(err)
	}
	c := chart.Line{Title: "Giraph-like: saving against the prediction window", XLabel: "prediction window (intervals of 5 s)",
		YLabel: "saving vs static peak (%)", YFromZero: true}
	fmt.Println("### Giraph-like trace: the prediction window")
	fmt.Println()
	fmt.Println("| window | horizon | saving | short intervals |")
	fmt.Println("|---|---|---|---|")
	for i, w := range sw.Windows {
		s := chart.Series{Name: fmt.Sprintf("observation window %d", w)}
		for j, h := range sw.Horizons {
			s.Points = append(s.Points, chart.Point{X: float64(h), Y: 100 * sw.Saving[i][j]})
			fmt.Printf("| %d | %d | %.1f%% | %.2f%% |\n", w, h, 100*sw.Saving[i][j], 100*sw.Short[i][j])
		}
		c.Series = append(c.Series, s)
	}
	writeChart(*out, "provisioning-horizon.svg", c)
	fmt.Println()

	cost(g, *python, *quick)
}

// cost times the default forecast per entity and step, and statsmodels on
// the same windows.
func cost(g trace, python string, quick bool) {
	const w = 128
	cfg := provision.DefaultForecast
	cfg.Horizon = 2
	p, err := forecast.NewPredictor(cfg)
	if err != nil {
		log.Fatal(err)
	}
	var windows [][]float64
	for _, s := range g.in.Series {
		for t := w; t < len(s.Values); t += 7 {
			windows = append(windows, s.Values[t-w:t])
		}
	}
	if quick {
		windows = windows[:min(len(windows), 500)]
	}
	start := time.Now()
	for _, y := range windows {
		if _, err := p.Predict(y); err != nil {
			log.Fatal(err)
		}
	}
	us := float64(time.Since(start).Microseconds()) / float64(len(windows))
	fmt.Println("### Forecast cost per entity and step (window 128, AR of log growth up to lag 32, peak of 2 steps)")
	fmt.Println()
	fmt.Printf("rackpool: %.1f µs over %d windows of the Giraph-like trace (goal ≤ 50 µs: 10^5 entities in a one-second step on a core)\n", us, len(windows))
	if python == "" {
		return
	}
	n := min(len(windows), 300)
	js, _ := json.Marshal(windows[:n])
	cmd := childproc.Command(python, "-c", peerScript)
	cmd.Stdin = bytes.NewReader(js)
	outb, err := cmd.Output()
	if err != nil {
		fmt.Printf("statsmodels peer not run: %v\n", err)
		return
	}
	var peerUS float64
	if err := json.Unmarshal(outb, &peerUS); err != nil {
		log.Fatal(err)
	}
	fmt.Printf("statsmodels 0.14.5 (ar_select_order up to lag 32 on the log growth, fit, 2-step forecast) on %d of the same windows: %.0f µs; rackpool/statsmodels = %.3f\n",
		n, peerUS, us/peerUS)
}

const peerScript = `
import json, sys, time, warnings
import numpy as np
from statsmodels.tsa.ar_model import ar_select_order
warnings.simplefilter("ignore")
ws = json.load(sys.stdin)
t = time.perf_counter()
for y in ws:
    z = np.diff(np.log(np.asarray(y)))
    sel = ar_select_order(z, min(32, len(y) // 4), ic="aic", trend="c")
    res = sel.model.fit()
    res.predict(start=len(z), end=len(z) + 1)
json.dump((time.perf_counter() - t) / len(ws) * 1e6, sys.stdout)
`

func cmpF(a, b float64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func slug(s string) string {
	s = strings.TrimPrefix(s, "rec:")
	s, _, _ = strings.Cut(s, " ")
	return strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' {
			return r
		}
		return '-'
	}, strings.ToLower(s))
}

func writeChart(dir, name string, c chart.Line) {
	svg, err := c.SVG()
	if err != nil {
		log.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, name), svg, 0o644); err != nil {
		log.Fatal(err)
	}
}

// loadTraces returns the synthetic traces (Giraph-like first) and every
// recorded one.
func loadTraces() []trace {
	var out []trace
	add := func(name string, tr *demand.Trace, err error) {
		if err != nil {
			log.Fatalf("%s: %v", name, err)
		}
		in, err := provision.InputOf(tr, "memory")
		if err != nil {
			log.Fatalf("%s: %v", name, err)
		}
		out = append(out, trace{name, in, provision.AutoGranule(in)})
	}
	g, err := demand.Giraph(demand.GiraphOptions{Seed: 1})
	add("giraph (P0 §9)", g, err)
	d, err := demand.Diurnal(demand.DiurnalOptions{Seed: 1})
	add("diurnal", d, err)
	b, err := demand.Bursty(demand.BurstyOptions{Seed: 1})
	add("bursty", b, err)
	files, _ := filepath.Glob(filepath.Join("internal", "demand", "testdata", "*.csv"))
	slices.Sort(files)
	for _, f := range files {
		tr, err := demand.ReadFile(f)
		add("rec:"+strings.TrimSuffix(filepath.Base(f), ".csv"), tr, err)
	}
	return out
}
