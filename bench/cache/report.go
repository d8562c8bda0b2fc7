package main

import (
	"encoding/csv"
	"encoding/json"
	"fmt"
	"image/color"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/text"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"

	"rackpool/internal/chart"
	"rackpool/internal/units"
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
	// The remote tier on mapped memory (issue 17): the same goal, and
	// below extstore at every fraction and size measured.
	if rp := find(rs, sysMapped, small, 75, tputT); rp != nil && rp.TputPenalty != nil {
		m := "rackpool-mapped " + pct(*rp.TputPenalty)
		good := *rp.TputPenalty <= 0.05
		if ex := find(rs, sysExtstore, small, 75, tputT); ex != nil && ex.TputPenalty != nil {
			m += ", extstore " + pct(*ex.TputPenalty)
			good = good && *rp.TputPenalty < *ex.TputPenalty
		}
		if tcp := find(rs, sysRackpool, small, 75, tputT); tcp != nil && tcp.TputPenalty != nil {
			m += ", rackpool over TCP " + pct(*tcp.TputPenalty)
		}
		m += fmt.Sprintf(" (hits %.2f%%)", 100*rp.HitRatio)
		gs = append(gs, Goal{Goal: fmt.Sprintf("mapped remote tier: throughput penalty at 75%% local, %s, %d threads ≤ 5%% and below extstore's", units.FormatBytes(int64(small)), tputT),
			P0: "~0%", Measured: m, Verdict: verdict(good)})
	}
	{
		var worse []string
		compared := 0
		for _, size := range cfg.Sizes {
			for _, frac := range cfg.Fractions {
				if frac == 100 {
					continue
				}
				mp, ex := find(rs, sysMapped, size, frac, tputT), find(rs, sysExtstore, size, frac, tputT)
				if mp == nil || ex == nil || mp.TputPenalty == nil || ex.TputPenalty == nil {
					continue
				}
				compared++
				if *mp.TputPenalty >= *ex.TputPenalty {
					worse = append(worse, fmt.Sprintf("%s %d%%: %s vs %s", units.FormatBytes(int64(size)), frac, pct(*mp.TputPenalty), pct(*ex.TputPenalty)))
				}
			}
		}
		if compared > 0 {
			m := fmt.Sprintf("below extstore in %d of %d", compared-len(worse), compared)
			if len(worse) > 0 {
				m += "; not below: " + strings.Join(worse, ", ")
			}
			gs = append(gs, Goal{Goal: fmt.Sprintf("mapped remote tier: throughput penalty below extstore's at every size and local fraction (%d threads)", tputT),
				P0: "", Measured: m, Verdict: verdict(len(worse) == 0)})
		}
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
		if isRackpool(r.System) && r.Error == "" && r.Hits+r.Misses > 0 {
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
	return writePenaltyChart(cfg, rep)
}

// writePenaltyChart writes penalty.svg into the output directory.
func writePenaltyChart(cfg *config, rep *Report) error {
	svg, err := penaltyChart(cfg, rep)
	if err != nil {
		return fmt.Errorf("draw penalty.svg: %w", err)
	}
	return os.WriteFile(filepath.Join(cfg.out, "penalty.svg"), svg, 0o644)
}

// replotPenalty redraws penalty.svg into out from a results.json the
// benchmark wrote, without running anything.
func replotPenalty(results, out string) error {
	data, err := os.ReadFile(results)
	if err != nil {
		return err
	}
	var rep Report
	if err := json.Unmarshal(data, &rep); err != nil {
		return fmt.Errorf("%s: %w", results, err)
	}
	if rep.Config == nil || len(rep.Config.Sizes) == 0 || len(rep.Config.Threads) == 0 {
		return fmt.Errorf("%s: no configuration (sizes, threads) to plot by", results)
	}
	cfg := *rep.Config
	cfg.out = out
	return writePenaltyChart(&cfg, &rep)
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

// penaltyChart draws penalty.svg with gonum/plot (through internal/sim's
// chart style): two panels of penalty against value size, the mean GET
// latency penalty at the smallest thread count and the throughput penalty
// at the largest, one line per system (its colour) and local fraction (its
// dash pattern), and a legend column at the right.
func penaltyChart(cfg *config, rep *Report) ([]byte, error) {
	const width, height = vg.Length(960), vg.Length(400)
	var fracs []int
	for _, f := range cfg.Fractions {
		if f != 100 {
			fracs = append(fracs, f)
		}
	}
	latT, tputT := slices.Min(cfg.Threads), slices.Max(cfg.Threads)
	panels := []*plot.Plot{
		penaltyPanel(cfg, rep, fracs, fmt.Sprintf("GET latency penalty (mean), %d thread", latT), latT, func(r *Result) *float64 { return r.LatPenalty }),
		penaltyPanel(cfg, rep, fracs, fmt.Sprintf("throughput penalty, %d threads", tputT), tputT, func(r *Result) *float64 { return r.TputPenalty }),
	}
	legend := chart.NewLegend()
	legend.Add("system")
	for _, sys := range cfg.Systems {
		legend.Add(sys, &plotter.Line{LineStyle: draw.LineStyle{Color: systemColour(sys), Width: vg.Points(2.5)}})
	}
	legend.Add("")
	legend.Add("local memory")
	for i, f := range fracs {
		legend.Add(fmt.Sprintf("%d%% of the data set", f), &plotter.Line{LineStyle: draw.LineStyle{Color: color.Black, Width: vg.Points(1.8), Dashes: fractionDashes(i)}})
	}
	legend.Add("")
	for _, line := range []string{"penalty = lat(x%) / lat(100%) − 1", "or 1 − ops/s(x%) / ops/s(100%),", "each system against itself;", "memcached misses what does", "not fit (see hit ratios)"} {
		legend.Add(line)
	}
	title := chart.Text(14)
	title.Font = chart.Font(14, true)
	title.XAlign, title.YAlign = draw.XCenter, draw.YTop
	const titleText = "rackpool cache vs memcached vs memcached+extstore: penalty against 100% local (P0 Fig. 9/10)"
	return chart.RenderSVG(width, height, func(dc draw.Canvas) {
		dc.FillText(title, vg.Point{X: dc.Center().X, Y: dc.Max.Y - 6}, titleText)
		body := draw.Crop(dc, 6, -6, 6, -(title.Rectangle(titleText).Size().Y + 16))
		// A sixth more than the legend needs in Liberation Sans, for
		// viewers that fall back to a wider face.
		lw := legend.Rectangle(body).Size().X * 7 / 6
		left := draw.Crop(body, 0, -(lw + 24), 0, 0)
		tiles := plot.Align([][]*plot.Plot{panels}, draw.Tiles{Rows: 1, Cols: len(panels), PadX: vg.Points(24)}, left)
		for i, p := range panels {
			p.Draw(tiles[0][i])
		}
		top := panels[0].DataCanvas(tiles[0][0]).Max.Y
		legend.Draw(draw.Canvas{Canvas: dc.Canvas, Rectangle: vg.Rectangle{
			Min: vg.Point{X: left.Max.X + 24, Y: body.Min.Y},
			Max: vg.Point{X: body.Max.X, Y: top},
		}})
	})
}

// penaltyPanel draws one panel: get's penalty at the given thread count
// against value size, in percent. The y axis covers every plotted value,
// clipped to [-100%, +200%]; when rackpool is plotted its top is kept near
// rackpool's values (at least 4× its largest penalty, 20%) so that its
// small penalties stay readable, and a peer's larger one is drawn at the
// edge with its value written next to it.
func penaltyPanel(cfg *config, rep *Report, fracs []int, title string, threads int, get func(*Result) *float64) *plot.Plot {
	p := chart.NewPlot(title, "value size", "penalty against 100% local (%)")
	value := func(sys string, size, frac int) (float64, bool) {
		r := find(rep.Results, sys, size, frac, threads)
		if r == nil || get(r) == nil || math.IsNaN(*get(r)) {
			return 0, false
		}
		return *get(r), true
	}
	lo, hi, rpHi, hasRP := 0.0, 0.05, 0.0, false
	for _, sys := range cfg.Systems {
		for _, f := range fracs {
			for _, size := range cfg.Sizes {
				if v, ok := value(sys, size, f); ok {
					lo, hi = min(lo, max(v, -1)), max(hi, min(v, 2))
					if isRackpool(sys) {
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
	lo, hi = chart.RoundOut(100*lo, 100*hi)

	xmin, xmax := -0.25, float64(len(cfg.Sizes))-0.75
	zero := &plotter.Line{XYs: plotter.XYs{{X: xmin, Y: 0}, {X: xmax, Y: 0}}, LineStyle: draw.LineStyle{Color: color.Gray{0x66}, Width: vg.Points(0.8)}}
	p.Add(zero)
	for _, sys := range cfg.Systems {
		colour := systemColour(sys)
		for fi, f := range fracs {
			var xys plotter.XYs
			for i, size := range cfg.Sizes {
				v, ok := value(sys, size, f)
				if !ok {
					continue
				}
				y := max(lo, min(hi, 100*v))
				xys = append(xys, plotter.XY{X: float64(i), Y: y})
				if y == 100*v {
					continue
				}
				// Drawn at the edge: say where it really is, inside the
				// panel, one row per fraction, and every other size's rows
				// below the previous one's so that neighbours do not
				// overlap.
				sty := chart.Text(8)
				sty.Color = colour
				sty.YAlign = draw.YTop
				row := fi + (i%2)*len(fracs)
				dy := -vg.Points(4 + 10*float64(row))
				if y == lo {
					sty.YAlign = draw.YBottom
					dy = -dy
				}
				// Centred on the point, but kept inside the panel at the
				// first and last sizes.
				sty.XAlign = draw.XCenter
				switch {
				case len(cfg.Sizes) == 1:
				case i == 0:
					sty.XAlign = draw.XLeft
				case i == len(cfg.Sizes)-1:
					sty.XAlign = draw.XRight
				}
				lbl := &plotter.Labels{XYs: plotter.XYs{{X: float64(i), Y: y}}, Labels: []string{fmt.Sprintf("%d%%: %s", f, pct(v))},
					TextStyle: []text.Style{sty}, Offset: vg.Point{Y: dy}}
				p.Add(lbl)
			}
			if len(xys) == 0 {
				continue
			}
			line := &plotter.Line{XYs: xys, LineStyle: draw.LineStyle{Color: colour, Width: vg.Points(1.8), Dashes: fractionDashes(fi)}}
			dots := &plotter.Scatter{XYs: xys, GlyphStyle: draw.GlyphStyle{Color: colour, Radius: vg.Points(2.5), Shape: draw.CircleGlyph{}}}
			p.Add(line, dots)
		}
	}
	if len(cfg.Sizes) > 0 {
		names := make([]string, len(cfg.Sizes))
		for i, size := range cfg.Sizes {
			names[i] = units.FormatBytes(int64(size))
		}
		p.NominalX(names...)
	}
	p.X.Min, p.X.Max = xmin, xmax
	p.Y.Min, p.Y.Max = lo, hi
	return p
}

// systemColour is a system's colour in penalty.svg.
func systemColour(sys string) color.Color {
	switch sys {
	case sysRackpool:
		return chart.Colour(0)
	case sysMapped:
		return chart.Colour(2)
	case sysExtstore:
		return chart.Colour(1)
	}
	return chart.Colour(7) // memcached: grey
}

// fractionDashes is the dash pattern of the i-th local fraction below 100%.
func fractionDashes(i int) []vg.Length {
	patterns := [][]float64{nil, {7, 4}, {2, 3}, {10, 3, 2, 3}}
	var out []vg.Length
	for _, d := range patterns[i%len(patterns)] {
		out = append(out, vg.Points(d))
	}
	return out
}
