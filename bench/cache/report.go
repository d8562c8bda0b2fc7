package main

import (
	"encoding/csv"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"rackpool/internal/units"
	"slices"
	"strconv"
	"strings"
)

// Goal is one target with what was measured against it.
type Goal struct {
	Goal     string `json:"goal"`
	P0       string `json:"p0"`
	Measured string `json:"measured"`
	Verdict  string `json:"verdict"`
}

func find(rs []Result, sys string, size, frac, threads int) *Result {
	for i := range rs {
		r := &rs[i]
		if r.System == sys && r.ValueBytes == size && r.LocalPct == frac && r.Threads == threads && r.Error == "" {
			return r
		}
	}
	return nil
}

func pct(v float64) string { return fmt.Sprintf("%+.1f%%", 100*v) }

func verdict(ok bool) string {
	if ok {
		return "met"
	}
	return "**not met**"
}

// evaluateGoals checks the results against the brief's targets (P0's
// numbers alongside).
func evaluateGoals(cfg *config, rep *Report) []Goal {
	var gs []Goal
	rs := rep.Results
	tputT := slices.Max(cfg.Threads)
	small := cfg.Sizes[0]

	// All-local throughput, rackpool against memcached.
	var parts []string
	ok, any := true, false
	for _, size := range cfg.Sizes {
		rp, mc := find(rs, sysRackpool, size, 100, tputT), find(rs, sysMemcached, size, 100, tputT)
		if rp == nil || mc == nil {
			continue
		}
		any = true
		ratio := rp.OpsPerSec / mc.OpsPerSec
		ok = ok && ratio >= 1
		parts = append(parts, fmt.Sprintf("%s %.2f", units.FormatBytes(int64(size)), ratio))
	}
	if any {
		gs = append(gs, Goal{Goal: fmt.Sprintf("all-local throughput, rackpool / memcached ≥ 1.0 (%d threads)", tputT), P0: "n/a (P0 modified memcached itself)",
			Measured: strings.Join(parts, ", "), Verdict: verdict(ok)})
	}

	// 75% local, smallest size, throughput penalty.
	if rp := find(rs, sysRackpool, small, 75, tputT); rp != nil && rp.TputPenalty != nil {
		m := "rackpool " + pct(*rp.TputPenalty)
		good := *rp.TputPenalty <= 0.05
		if ex := find(rs, sysExtstore, small, 75, tputT); ex != nil && ex.TputPenalty != nil {
			m += ", extstore " + pct(*ex.TputPenalty)
			good = good && *rp.TputPenalty < *ex.TputPenalty
		}
		m += fmt.Sprintf(" (rackpool hits %.2f%%)", 100*rp.HitRatio)
		gs = append(gs, Goal{Goal: fmt.Sprintf("throughput penalty at 75%% local, %s, %d threads ≤ 5%% and below extstore's", units.FormatBytes(int64(small)), tputT),
			P0: "~0%", Measured: m, Verdict: verdict(good)})
	}
	// 25% local, smallest size.
	if rp := find(rs, sysRackpool, small, 25, tputT); rp != nil && rp.TputPenalty != nil {
		gs = append(gs, Goal{Goal: fmt.Sprintf("throughput penalty at 25%% local, %s, %d threads (P0: 2%%)", units.FormatBytes(int64(small)), tputT),
			P0: "2%", Measured: fmt.Sprintf("%s (hits %.2f%%)", pct(*rp.TputPenalty), 100*rp.HitRatio), Verdict: verdict(*rp.TputPenalty <= 0.02)})
	}
	// Larger sizes: the worst penalty at any fraction.
	for _, frac := range cfg.Fractions {
		if frac == 100 {
			continue
		}
		var parts []string
		worst := math.Inf(-1)
		for _, size := range cfg.Sizes[1:] {
			if rp := find(rs, sysRackpool, size, frac, tputT); rp != nil && rp.TputPenalty != nil {
				parts = append(parts, fmt.Sprintf("%s %s", units.FormatBytes(int64(size)), pct(*rp.TputPenalty)))
				worst = max(worst, *rp.TputPenalty)
			}
		}
		if len(parts) > 0 {
			gs = append(gs, Goal{Goal: fmt.Sprintf("throughput penalty at %d%% local, larger values, %d threads (P0: 4–6%%)", frac, tputT),
				P0: "4–6%", Measured: strings.Join(parts, ", "), Verdict: verdict(worst <= 0.06)})
		}
	}
	// Nothing lost: rackpool's hit ratio everywhere.
	minHit, n := 1.0, 0
	for _, r := range rs {
		if r.System == sysRackpool && r.Error == "" && r.Hits+r.Misses > 0 {
			minHit = min(minHit, r.HitRatio)
			n++
		}
	}
	if n > 0 {
		gs = append(gs, Goal{Goal: "rackpool loses no item (hit ratio 100% at every fraction)", P0: "victim cache: an item is in exactly one place",
			Measured: fmt.Sprintf("lowest hit ratio %.3f%% over %d runs", 100*minHit, n), Verdict: verdict(minHit >= 0.9999)})
	}
	corrupt := 0
	for _, r := range rs {
		corrupt += r.Corrupt
	}
	gs = append(gs, Goal{Goal: "every checked value is correct", P0: "", Measured: fmt.Sprintf("%d corrupt", corrupt), Verdict: verdict(corrupt == 0)})
	if len(rep.RemoteReadRatio) > 0 {
		var parts []string
		ok := true
		for _, r := range rep.RemoteReadRatio {
			parts = append(parts, fmt.Sprintf("%s: %.2f× (24 B → 4 KiB raw exchange), %.2f× (4 KiB echo)", r.Placement, r.OverRaw, r.OverEcho))
			ok = ok && r.OverRaw <= 1.5
		}
		gs = append(gs, Goal{Goal: "remote 4 KiB read ≤ 1.5 × raw loopback RTT", P0: "remote access acceptable when small against the resource's own latency",
			Measured: strings.Join(parts, "; "), Verdict: verdict(ok)})
	}
	return gs
}

func writeOutputs(cfg *config, rep *Report) error {
	if err := writeJSON(filepath.Join(cfg.out, "results.json"), rep); err != nil {
		return err
	}
	f, err := os.Create(filepath.Join(cfg.out, "results.csv"))
	if err != nil {
		return err
	}
	w := csv.NewWriter(f)
	_ = w.Write([]string{"system", "value_bytes", "local_pct", "threads", "keys", "data_bytes", "local_bytes", "remote_bytes", "ops", "gets", "sets",
		"hits", "misses", "hit_ratio", "get_errors", "set_errors", "verified", "corrupt", "seconds", "ops_per_sec", "get_mean_us", "get_p50_us",
		"get_p99_us", "set_mean_us", "set_p99_us", "latency_penalty", "latency_p50_penalty", "latency_p99_penalty", "throughput_penalty",
		"timed_out", "preload_seconds", "preload_errors", "preload_missing", "server_cpu_us_per_op", "memnode_cpu_us_per_op", "client_cpu_us_per_op", "error"})
	ff := func(v float64) string { return strconv.FormatFloat(v, 'f', 4, 64) }
	fp := func(v *float64) string {
		if v == nil {
			return ""
		}
		return strconv.FormatFloat(*v, 'f', 5, 64)
	}
	it := strconv.Itoa
	for _, r := range rep.Results {
		_ = w.Write([]string{r.System, it(r.ValueBytes), it(r.LocalPct), it(r.Threads), it(r.Keys), strconv.FormatInt(r.DataBytes, 10),
			strconv.FormatInt(r.LocalBytes, 10), strconv.FormatInt(r.RemoteBytes, 10), it(r.Ops), it(r.Gets), it(r.Sets), it(r.Hits), it(r.Misses),
			strconv.FormatFloat(r.HitRatio, 'f', 6, 64), it(r.GetErrors), it(r.SetErrors), it(r.Verified), it(r.Corrupt), ff(r.Seconds), ff(r.OpsPerSec),
			ff(r.GetMeanUs), ff(r.GetP50Us), ff(r.GetP99Us), ff(r.SetMeanUs), ff(r.SetP99Us), fp(r.LatPenalty), fp(r.LatP50Penalty), fp(r.LatP99Penalty),
			fp(r.TputPenalty), strconv.FormatBool(r.TimedOut), ff(r.PreloadSec), it(r.PreloadErrs), it(r.PreloadMissing),
			ff(r.ServerCPUPerOp), ff(r.MemnodeCPUPerOp), ff(r.ClientCPUPerOp), r.Error})
	}
	w.Flush()
	if err := w.Error(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(cfg.out, "penalty.svg"), []byte(svgPlot(cfg, rep)), 0o644)
}

func printMarkdown(w io.Writer, cfg *config, rep *Report) {
	fmt.Fprintf(w, "# rackpool cache against memcached and memcached+extstore (P0 §9, Fig. 9/10)\n\n")
	versions := rep.GoVersion
	if rep.MemcachedVersion != "" {
		versions += ", " + rep.MemcachedVersion
	}
	fmt.Fprintf(w, "%s, %d CPUs, %s. %d ops per run (%.0f%% get), data set %s per value size, uniform keys, preloaded.\n\n",
		rep.Date[:10], rep.CPUs, versions, cfg.Ops, 100*cfg.GetRatio, units.FormatBytes(cfg.Dataset))
	fmt.Fprintf(w, "Command: `%s`\n\n", rep.Command)

	fmt.Fprintf(w, "## Round trips (4 KiB, loopback)\n\n| measurement | CPUs | median µs | mean µs | p99 µs |\n|---|---|---|---|---|\n")
	for _, r := range rep.RTT {
		fmt.Fprintf(w, "| %s | %s | %.1f | %.1f | %.1f |\n", r.Name, r.Placement, r.MedianUs, r.MeanUs, r.P99Us)
	}
	for _, r := range rep.RemoteReadRatio {
		fmt.Fprintf(w, "\nRemote read / raw RTT, %s: **%.2f×** against the same-shaped raw exchange, %.2f× against a 4 KiB echo (goal ≤ 1.5×).\n",
			r.Placement, r.OverRaw, r.OverEcho)
	}
	latT, tputT := slices.Min(cfg.Threads), slices.Max(cfg.Threads)
	cell := func(r *Result, lat bool) string {
		if r == nil {
			return "—"
		}
		hit := ""
		if r.HitRatio < 0.99995 {
			hit = fmt.Sprintf(", hits %.1f%%", 100*r.HitRatio)
		}
		to := ""
		if r.TimedOut {
			to = ", capped"
		}
		if lat {
			p := ""
			if r.LatPenalty != nil {
				p = fmt.Sprintf(" (%s / %s)", pct(*r.LatPenalty), pct(*r.LatP99Penalty))
			}
			return fmt.Sprintf("%.1f / %.1f / %.1f%s%s%s", r.GetMeanUs, r.GetP50Us, r.GetP99Us, p, hit, to)
		}
		p := ""
		if r.TputPenalty != nil {
			p = fmt.Sprintf(" (%s)", pct(*r.TputPenalty))
		}
		return fmt.Sprintf("%.0f%s%s%s", r.OpsPerSec, p, hit, to)
	}
	header := func() {
		fmt.Fprintf(w, "| value | local |")
		for _, s := range cfg.Systems {
			fmt.Fprintf(w, " %s |", s)
		}
		fmt.Fprintf(w, "\n|---|---|")
		for range cfg.Systems {
			fmt.Fprintf(w, "---|")
		}
		fmt.Fprintln(w)
	}
	// table prints one row per value size and fraction, one cell per
	// system, from the run with the given thread count.
	table := func(title string, threads int, cellOf func(*Result) string) {
		fmt.Fprintf(w, "\n%s\n\n", title)
		header()
		for _, size := range cfg.Sizes {
			for _, frac := range cfg.Fractions {
				fmt.Fprintf(w, "| %s | %d%% |", units.FormatBytes(int64(size)), frac)
				for _, s := range cfg.Systems {
					r := find(rep.Results, s, size, frac, threads)
					if r == nil {
						fmt.Fprintf(w, " — |")
						continue
					}
					fmt.Fprintf(w, " %s |", cellOf(r))
				}
				fmt.Fprintln(w)
			}
		}
	}
	table(fmt.Sprintf("## Fig. 9: GET latency, %d client thread — mean / p50 / p99 µs (penalty of mean / p99 against the same system at 100%% local)", latT),
		latT, func(r *Result) string { return cell(r, true) })
	table(fmt.Sprintf("## Fig. 10: throughput, %d client threads — ops/s (throughput penalty against the same system at 100%% local)", tputT),
		tputT, func(r *Result) string { return cell(r, false) })
	table(fmt.Sprintf("### CPU per operation, %d client threads — µs of CPU per op: server + memnode + load generator = total", tputT),
		tputT, func(r *Result) string {
			return fmt.Sprintf("%.1f + %.1f + %.1f = %.1f", r.ServerCPUPerOp, r.MemnodeCPUPerOp, r.ClientCPUPerOp, r.ServerCPUPerOp+r.MemnodeCPUPerOp+r.ClientCPUPerOp)
		})
	fmt.Fprintf(w, "\nHit ratios are shown where below 100%%: plain memcached drops what does not fit, so its penalty is the price of misses, not of a slower tier. \"capped\": the run hit -run-timeout.\n")
	fmt.Fprintf(w, "\n## Against the goals\n\n| goal | P0 | measured | verdict |\n|---|---|---|---|\n")
	for _, g := range rep.Goals {
		fmt.Fprintf(w, "| %s | %s | %s | %s |\n", g.Goal, g.P0, g.Measured, g.Verdict)
	}
	if len(rep.Skipped) > 0 {
		fmt.Fprintf(w, "\nSkipped (-max-time): %s\n", strings.Join(rep.Skipped, "; "))
	}
	for _, r := range rep.Results {
		if r.Error != "" {
			fmt.Fprintf(w, "\nFAILED %s %s %d%% %d threads: %s\n", r.System, units.FormatBytes(int64(r.ValueBytes)), r.LocalPct, r.Threads, firstLine(r.Error))
		}
	}
	fmt.Fprintf(w, "\nFiles: %s, %s, %s (%.0f s in all).\n", filepath.Join(cfg.out, "results.json"), filepath.Join(cfg.out, "results.csv"),
		filepath.Join(cfg.out, "penalty.svg"), rep.Elapsed)
}

func firstLine(s string) string {
	l, _, _ := strings.Cut(s, "\n")
	return l
}

// svgPlot draws two panels, penalty against value size: the latency
// penalty at the smallest thread count and the throughput penalty at the
// largest, one line per system and local fraction.
func svgPlot(cfg *config, rep *Report) string {
	const (
		pw, ph         = 520, 380
		ml, mr, mt, mb = 64, 16, 48, 56
		legendW        = 210
		width, height  = 2*pw + legendW, ph + 30
		plotW, plotH   = pw - ml - mr, ph - mt - mb
	)
	colors := map[string]string{sysRackpool: "#1f77b4", sysMemcached: "#7f7f7f", sysExtstore: "#ff7f0e"}
	dashes := []string{"", "7,4", "2,3", "10,3,2,3"}
	var fracs []int
	for _, f := range cfg.Fractions {
		if f != 100 {
			fracs = append(fracs, f)
		}
	}
	dash := func(frac int) string {
		i := slices.Index(fracs, frac)
		return dashes[i%len(dashes)]
	}
	latT, tputT := slices.Min(cfg.Threads), slices.Max(cfg.Threads)
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="12">`+"\n", width, height, width, height)
	fmt.Fprintf(&b, `<rect width="%d" height="%d" fill="white"/>`+"\n", width, height)
	fmt.Fprintf(&b, `<text x="%d" y="20" font-size="15" font-weight="bold">rackpool cache vs memcached vs memcached+extstore: penalty against 100%% local (P0 Fig. 9/10)</text>`+"\n", 12)
	panels := []struct {
		title string
		get   func(r *Result) *float64
		thr   int
	}{
		{fmt.Sprintf("GET latency penalty (mean), %d thread", latT), func(r *Result) *float64 { return r.LatPenalty }, latT},
		{fmt.Sprintf("throughput penalty, %d threads", tputT), func(r *Result) *float64 { return r.TputPenalty }, tputT},
	}
	for pi, p := range panels {
		x0, y0 := pi*pw+ml, 30+mt
		// The range covers every plotted value, clipped to [-100%, +200%];
		// when rackpool is plotted the top is kept near its values (at
		// least 4× its largest penalty, 20%) so its small penalties stay
		// readable, and peers' larger ones are drawn at the edge with
		// their value written next to them.
		lo, hi, rpHi, hasRP := 0.0, 0.05, 0.0, false
		for _, sys := range cfg.Systems {
			for _, f := range fracs {
				for _, size := range cfg.Sizes {
					if r := find(rep.Results, sys, size, f, p.thr); r != nil && p.get(r) != nil {
						v := *p.get(r)
						lo, hi = min(lo, max(v, -1)), max(hi, min(v, 2))
						if sys == sysRackpool {
							rpHi, hasRP = max(rpHi, v), true
						}
					}
				}
			}
		}
		if hasRP {
			hi = min(hi, max(4*rpHi, 0.2))
			lo = max(lo, min(-0.2, -hi))
		}
		step := niceStep((hi - lo) / 6)
		lo = math.Floor(lo/step) * step
		hi = math.Ceil(hi/step) * step
		if hi-lo < 1e-9 {
			hi = lo + step
		}
		xAt := func(i int) float64 {
			if len(cfg.Sizes) == 1 {
				return float64(x0) + float64(plotW)/2
			}
			return float64(x0) + float64(i)*float64(plotW)/float64(len(cfg.Sizes)-1)
		}
		yAt := func(v float64) float64 {
			v = max(lo, min(hi, v))
			return float64(y0) + float64(plotH)*(hi-v)/(hi-lo)
		}
		fmt.Fprintf(&b, `<text x="%d" y="%d" font-size="13" font-weight="bold">%s</text>`+"\n", x0, y0-14, p.title)
		fmt.Fprintf(&b, `<rect x="%d" y="%d" width="%d" height="%d" fill="none" stroke="#333"/>`+"\n", x0, y0, plotW, plotH)
		for v := lo; v <= hi+step/2; v += step {
			y := yAt(v)
			stroke := "#ddd"
			if math.Abs(v) < step/100 {
				stroke = "#555"
			}
			fmt.Fprintf(&b, `<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="%s"/>`+"\n", x0, y, x0+plotW, y, stroke)
			fmt.Fprintf(&b, `<text x="%d" y="%.1f" text-anchor="end">%s</text>`+"\n", x0-6, y+4, trimPct(v))
		}
		for i, size := range cfg.Sizes {
			x := xAt(i)
			fmt.Fprintf(&b, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#eee"/>`+"\n", x, y0, x, y0+plotH)
			fmt.Fprintf(&b, `<text x="%.1f" y="%d" text-anchor="middle">%s</text>`+"\n", x, y0+plotH+18, units.FormatBytes(int64(size)))
		}
		fmt.Fprintf(&b, `<text x="%d" y="%d" text-anchor="middle">value size</text>`+"\n", x0+plotW/2, y0+plotH+40)
		fmt.Fprintf(&b, `<text transform="translate(%d,%d) rotate(-90)" text-anchor="middle">penalty</text>`+"\n", x0-48, y0+plotH/2)
		for _, sys := range cfg.Systems {
			for _, f := range fracs {
				var pts []string
				for i, size := range cfg.Sizes {
					r := find(rep.Results, sys, size, f, p.thr)
					if r == nil || p.get(r) == nil {
						continue
					}
					v := *p.get(r)
					x, y := xAt(i), yAt(v)
					pts = append(pts, fmt.Sprintf("%.1f,%.1f", x, y))
					fmt.Fprintf(&b, `<circle cx="%.1f" cy="%.1f" r="3" fill="%s"><title>%s %s %d%% local: %s</title></circle>`+"\n", x, y, colors[sys], sys, units.FormatBytes(int64(size)), f, pct(v))
					if v > hi || v < lo {
						dy := 10 + 11*slices.Index(fracs, f)
						if v < lo {
							dy = -4 - 11*slices.Index(fracs, f)
						}
						anchor := "start"
						if i == len(cfg.Sizes)-1 && len(cfg.Sizes) > 1 {
							anchor = "end"
						}
						fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" font-size="10" fill="%s" text-anchor="%s">%d%%: %s</text>`+"\n", x+4, y+float64(dy), colors[sys], anchor, f, pct(v))
					}
				}
				if len(pts) > 1 {
					da := ""
					if d := dash(f); d != "" {
						da = ` stroke-dasharray="` + d + `"`
					}
					fmt.Fprintf(&b, `<polyline points="%s" fill="none" stroke="%s" stroke-width="2"%s/>`+"\n", strings.Join(pts, " "), colors[sys], da)
				}
			}
		}
	}
	// Legend.
	lx, ly := 2*pw+10, 30+mt
	fmt.Fprintf(&b, `<text x="%d" y="%d" font-weight="bold">system</text>`+"\n", lx, ly)
	for i, sys := range cfg.Systems {
		y := ly + 18 + 18*i
		fmt.Fprintf(&b, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="%s" stroke-width="3"/><text x="%d" y="%d">%s</text>`+"\n", lx, y-4, lx+28, y-4, colors[sys], lx+34, y, sys)
	}
	ly += 18 + 18*len(cfg.Systems) + 16
	fmt.Fprintf(&b, `<text x="%d" y="%d" font-weight="bold">local memory</text>`+"\n", lx, ly)
	for i, f := range fracs {
		y := ly + 18 + 18*i
		da := ""
		if d := dash(f); d != "" {
			da = ` stroke-dasharray="` + d + `"`
		}
		fmt.Fprintf(&b, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="#000" stroke-width="2"%s/><text x="%d" y="%d">%d%% of the data set</text>`+"\n", lx, y-4, lx+28, y-4, da, lx+34, y, f)
	}
	ly += 18 + 18*len(fracs) + 16
	for i, line := range []string{"penalty = lat(x%)/lat(100%) − 1", "or 1 − ops/s(x%) / ops/s(100%),", "each system against itself.", "memcached misses what does", "not fit (see hit ratios)."} {
		fmt.Fprintf(&b, `<text x="%d" y="%d" font-size="11" fill="#444">%s</text>`+"\n", lx, ly+14*i, line)
	}
	b.WriteString("</svg>\n")
	return b.String()
}

func niceStep(raw float64) float64 {
	if raw <= 0 {
		return 0.01
	}
	exp := math.Pow(10, math.Floor(math.Log10(raw)))
	for _, m := range []float64{1, 2, 2.5, 5, 10} {
		if m*exp >= raw {
			return m * exp
		}
	}
	return 10 * exp
}

func trimPct(v float64) string {
	s := strconv.FormatFloat(100*v, 'f', 1, 64)
	s = strings.TrimSuffix(s, ".0")
	if s == "-0" {
		s = "0"
	}
	return s + "%"
}
