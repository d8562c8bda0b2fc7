// Package report turns a simulation's results (internal/sim) into files:
// the machine-readable ones (JSON and CSV) and the ones a person looks at
// (SVG plots and one self-contained report.html), for one run or a sweep.
// An output directory is written all or nothing: everything goes into a
// temporary sibling directory first, which is renamed into place only once
// it is complete.
package report

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"maps"
	"math"
	"os"
	"path/filepath"
	"rackpool/internal/chart"
	"rackpool/internal/sim"
	"slices"
	"sort"
	"strconv"
	"strings"
)

// The files WriteReport and WriteSweepReport write. An existing directory
// holding summary.json or sweep.csv is taken to be earlier rackpool sim
// output, which a new run may replace.
const (
	SummaryFile    = "summary.json"
	TimeSeriesFile = "timeseries.csv"
	LatencyCDFFile = "latency_cdf.csv"
	HopsFile       = "hops.csv"
	ReportFile     = "report.html"
	SweepCSVFile   = "sweep.csv"
	SweepJSONFile  = "sweep.json"
)

// maxCDFRows bounds the rows of latency_cdf.csv (and the points of its
// plot).
const maxCDFRows = 1000

// WriteReport writes res into dir: summary.json, timeseries.csv,
// latency_cdf.csv and hops.csv (when there are remote memory blocks), SVG
// plots of utilisation, latency, hops and switch power (each when it has
// data), and report.html, which holds the headline numbers, every plot and
// every summary field in one file with no external resources.
//
// dir is replaced all or nothing, and only when it does not exist, is empty
// or holds earlier rackpool sim output; any other directory or file is left
// alone and reported as an error.
func WriteReport(dir string, res *sim.Result) error {
	if res == nil {
		return errors.New("sim: write report: no result")
	}
	return writeAtomically(dir, func(tmp string) error { return fillReport(tmp, res) })
}

// fillReport writes every file of a run's report into tmp.
func fillReport(tmp string, res *sim.Result) error {
	sum, err := json.MarshalIndent(res.Summary, "", "  ")
	if err != nil {
		return fmt.Errorf("sim: encode %s: %w", SummaryFile, err)
	}
	if err := writeOutputFile(tmp, SummaryFile, append(sum, '\n')); err != nil {
		return err
	}
	types := sampleResourceTypes(res.Samples)
	ts, err := timeSeriesCSV(res.Samples, types)
	if err != nil {
		return err
	}
	if err := writeOutputFile(tmp, TimeSeriesFile, ts); err != nil {
		return err
	}

	var page runPage
	page.build(res, types)

	cdf := rttCDFPoints(res.RTTNS)
	if len(cdf) > 0 {
		rows := make([][]string, len(cdf))
		for i, p := range cdf {
			rows[i] = []string{formatExact(p.X), formatExact(p.Y)}
		}
		b, err := encodeCSVRows([]string{"rtt_ns", "cdf"}, rows)
		if err != nil {
			return fmt.Errorf("sim: encode %s: %w", LatencyCDFFile, err)
		}
		if err := writeOutputFile(tmp, LatencyCDFFile, b); err != nil {
			return err
		}
	}
	hops := reportHopCounts(res.Hops)
	if len(hops) > 0 {
		rows := make([][]string, len(hops))
		for i, h := range hops {
			rows[i] = []string{strconv.Itoa(h.hops), strconv.Itoa(h.blocks), formatExact(float64(h.blocks) / float64(len(res.Hops)))}
		}
		b, err := encodeCSVRows([]string{"hops", "blocks", "share"}, rows)
		if err != nil {
			return fmt.Errorf("sim: encode %s: %w", HopsFile, err)
		}
		if err := writeOutputFile(tmp, HopsFile, b); err != nil {
			return err
		}
	}

	// Plots: each written as a file and inlined into the page.
	plot := func(file, title, caption string, c svgChart) error {
		svg, err := c.SVG()
		if err != nil {
			return fmt.Errorf("sim: draw %s: %w", file, err)
		}
		if err := writeOutputFile(tmp, file, svg); err != nil {
			return err
		}
		page.Figures = append(page.Figures, reportFigure{Title: title, Caption: caption, File: file, SVG: chart.Inline(svg)})
		return nil
	}
	if len(res.Samples) > 0 {
		if err := plot("utilisation.svg", "Utilisation over time",
			"Share of each resource type in use over virtual time: a line that sits at 100% is the bottleneck that turns requests away, and a line far below the others is capacity paid for but stranded.",
			utilisationChart(res.Samples, types)); err != nil {
			return err
		}
		if err := plot("acceptance.svg", "Acceptance over time",
			"Share of the requests arriving in each sampling interval that were placed, and of all so far: where the first line falls is where the pod saturates and refusals begin.",
			acceptanceChart(res.Samples)); err != nil {
			return err
		}
	}
	if len(cdf) > 0 {
		if err := plot("latency_cdf.svg", "Remote memory round trip",
			"Cumulative share of remote memory blocks by round-trip time: the further left and steeper the curve, the closer the scheduler kept memory to its CPUs; the right-hand tail is what p99 reports.",
			cdfChart(cdf)); err != nil {
			return err
		}
	}
	if len(hops) > 0 {
		if err := plot("hops.svg", "Switch hops to remote memory",
			"Share of remote memory blocks by the number of switch hops to reach them: weight on the left-hand bars means most memory sits close to its CPUs.",
			hopsChart(hops, len(res.Hops))); err != nil {
			return err
		}
	}
	if hasPower(res.Samples) {
		if err := plot("power.svg", "Active optical switch power",
			"Power drawn by the optical switch ports that carry circuits: compare its level with the installed power in the headline to see how much of the fabric sits idle.",
			powerChart(res.Samples)); err != nil {
			return err
		}
	}
	if len(res.Samples) == 0 {
		page.Notes = append(page.Notes, "The run recorded no utilisation samples, so there is no time series to plot.")
	}
	if len(cdf) == 0 {
		page.Notes = append(page.Notes, "No remote memory blocks were allocated, so there is no round-trip or hop plot.")
	}
	for _, f := range page.Figures {
		page.Files = append(page.Files, f.File)
	}
	page.Files = append([]string{SummaryFile, TimeSeriesFile}, page.Files...)
	if len(cdf) > 0 {
		page.Files = append(page.Files, LatencyCDFFile)
	}
	if len(hops) > 0 {
		page.Files = append(page.Files, HopsFile)
	}

	var html bytes.Buffer
	if err := reportTemplates.ExecuteTemplate(&html, "run", &page); err != nil {
		return fmt.Errorf("sim: render %s: %w", ReportFile, err)
	}
	return writeOutputFile(tmp, ReportFile, html.Bytes())
}

// sampleResourceTypes returns every resource type the samples name, sorted.
func sampleResourceTypes(samples []sim.Sample) []string {
	seen := map[string]bool{}
	for _, s := range samples {
		for t := range s.Used {
			seen[t] = true
		}
		for t := range s.Capacity {
			seen[t] = true
		}
	}
	return slices.Sorted(maps.Keys(seen))
}

// usedShare is used/capacity, 0 where there is no capacity.
func usedShare(used, capacity float64) float64 {
	if capacity == 0 {
		return 0
	}
	return used / capacity
}

// timeSeriesCSV renders the samples as timeseries.csv.
func timeSeriesCSV(samples []sim.Sample, types []string) ([]byte, error) {
	head := []string{"t", "running"}
	for _, t := range types {
		head = append(head, t+"_used", t+"_capacity", t+"_utilisation")
	}
	head = append(head, "active_power_w", "requests", "accepted", "window_acceptance")
	rows := make([][]string, len(samples))
	for i, s := range samples {
		row := make([]string, 0, len(head))
		row = append(row, formatExact(s.T), strconv.Itoa(s.Running))
		for _, t := range types {
			u, c := s.Used[t], s.Capacity[t]
			row = append(row, formatExact(u), formatExact(c), formatExact(usedShare(u, c)))
		}
		window := ""
		if a, ok := windowAcceptance(samples, i); ok {
			window = formatExact(a)
		}
		rows[i] = append(row, formatExact(s.ActivePowerW), strconv.Itoa(s.Requests), strconv.Itoa(s.Accepted), window)
	}
	b, err := encodeCSVRows(head, rows)
	if err != nil {
		return nil, fmt.Errorf("sim: encode %s: %w", TimeSeriesFile, err)
	}
	return b, nil
}

// rttCDFPoints returns the empirical CDF of the finite round trips: one
// point per distinct value (the share of blocks at or below it), thinned
// evenly to at most maxCDFRows points, always keeping the largest.
func rttCDFPoints(rtt []float64) []chart.Point {
	vals := make([]float64, 0, len(rtt))
	for _, v := range rtt {
		if isFinite(v) {
			vals = append(vals, v)
		}
	}
	if len(vals) == 0 {
		return nil
	}
	sort.Float64s(vals)
	n := float64(len(vals))
	var pts []chart.Point
	for i, v := range vals {
		if i+1 < len(vals) && vals[i+1] == v {
			continue // a tie: its last occurrence carries the share
		}
		pts = append(pts, chart.Point{X: v, Y: float64(i+1) / n})
	}
	if len(pts) <= maxCDFRows {
		return pts
	}
	out := make([]chart.Point, maxCDFRows)
	for k := range out {
		out[k] = pts[int(math.Round(float64(k)*float64(len(pts)-1)/float64(maxCDFRows-1)))]
	}
	return out
}

// reportHopCount is how many blocks sit a number of hops away.
type reportHopCount struct {
	hops, blocks int
}

// reportHopCounts counts blocks by hop count, in hop order.
func reportHopCounts(hops []int) []reportHopCount {
	counts := map[int]int{}
	for _, h := range hops {
		counts[h]++
	}
	out := make([]reportHopCount, 0, len(counts))
	for h, n := range counts {
		out = append(out, reportHopCount{h, n})
	}
	slices.SortFunc(out, func(a, b reportHopCount) int { return a.hops - b.hops })
	return out
}

func hasPower(samples []sim.Sample) bool {
	for _, s := range samples {
		if s.ActivePowerW > 0 {
			return true
		}
	}
	return false
}

// virtualTimeLabel is the x axis of the time series: the scenario's own
// unit (a trace's, or the MONet generator's abstract one).
const virtualTimeLabel = "virtual time (scenario time units)"

// windowAcceptance is the share of the requests decided between sample
// i-1 and sample i that were placed; false when none was decided.
func windowAcceptance(samples []sim.Sample, i int) (float64, bool) {
	prev := sim.Sample{}
	if i > 0 {
		prev = samples[i-1]
	}
	n := samples[i].Requests - prev.Requests
	if n <= 0 {
		return 0, false
	}
	return float64(samples[i].Accepted-prev.Accepted) / float64(n), true
}

// acceptanceChart plots, over virtual time, the share of the requests
// decided since the previous sample that were placed, and the share of
// all decided so far.
func acceptanceChart(samples []sim.Sample) chart.Line {
	c := chart.Line{Title: "Acceptance over time", XLabel: virtualTimeLabel, YLabel: "requests placed (%)", YFixed: true, YMin: 0, YMax: 100}
	var window, total []chart.Point
	for i, s := range samples {
		if a, ok := windowAcceptance(samples, i); ok {
			window = append(window, chart.Point{X: s.T, Y: 100 * a})
		}
		if s.Requests > 0 {
			total = append(total, chart.Point{X: s.T, Y: 100 * float64(s.Accepted) / float64(s.Requests)})
		}
	}
	c.Series = []chart.Series{{Name: "since the previous sample", Points: window}, {Name: "since the start", Points: total}}
	return c
}

func utilisationChart(samples []sim.Sample, types []string) chart.Line {
	c := chart.Line{Title: "Utilisation by resource type", XLabel: virtualTimeLabel, YLabel: "utilisation (%)", YFixed: true, YMin: 0, YMax: 100}
	for _, t := range types {
		pts := make([]chart.Point, len(samples))
		for i, s := range samples {
			pts[i] = chart.Point{X: s.T, Y: 100 * usedShare(s.Used[t], s.Capacity[t])}
		}
		c.Series = append(c.Series, chart.Series{Name: resourceTypeLabel(t), Points: pts})
	}
	return c
}

// cdfChart draws the CDF as steps, in percent: the share jumps at each
// value.
func cdfChart(cdf []chart.Point) chart.Line {
	pts := make([]chart.Point, 0, 2*len(cdf))
	prev := 0.0
	for _, p := range cdf {
		pts = append(pts, chart.Point{X: p.X, Y: prev}, chart.Point{X: p.X, Y: 100 * p.Y})
		prev = 100 * p.Y
	}
	return chart.Line{Title: "Round-trip time CDF", XLabel: "round trip (ns)", YLabel: "blocks at or below (%)", YFixed: true, YMin: 0, YMax: 100,
		Series: []chart.Series{{Points: pts}}}
}

func hopsChart(hops []reportHopCount, total int) chart.Bar {
	c := chart.Bar{Title: "Remote memory blocks by switch hops", XLabel: "switch hops", YLabel: "share of blocks (%)", ValueSuffix: "%"}
	for _, h := range hops {
		c.Labels = append(c.Labels, strconv.Itoa(h.hops))
		c.Values = append(c.Values, 100*float64(h.blocks)/float64(total))
	}
	return c
}

func powerChart(samples []sim.Sample) chart.Line {
	pts := make([]chart.Point, len(samples))
	for i, s := range samples {
		pts[i] = chart.Point{X: s.T, Y: s.ActivePowerW}
	}
	return chart.Line{Title: "Active optical switch power", XLabel: virtualTimeLabel, YLabel: "power (W)", YFromZero: true,
		Series: []chart.Series{{Points: pts}}}
}

// resourceTypeLabel names a resource type for people.
func resourceTypeLabel(t string) string {
	switch t {
	case "cores":
		return "cores"
	case "memory_gb":
		return "memory"
	case "gpus":
		return "GPUs"
	case "storage_gb":
		return "storage"
	}
	return t
}

// runPage is what the "run" template renders.
type runPage struct {
	Title    string
	Subtitle string
	Headline []reportHeadline
	Notes    []string
	Figures  []reportFigure
	Sections []reportSection
	Files    []string
}

// reportHeadline is one big number at the top of a report.
type reportHeadline struct {
	Value, Label string
}

// reportFigure is one inlined plot.
type reportFigure struct {
	Title, Caption, File string
	SVG                  template.HTML
}

// reportSection is one table of the details: key/value rows, or (with Head) a
// table of its own.
type reportSection struct {
	Title string
	Rows  []reportDetail
	Head  []string
	Table [][]string
}

// reportDetail is one summary field: what it is, its summary.json key and
// its value.
type reportDetail struct {
	Label, Key, Value string
}

// build fills in everything but the figures.
func (p *runPage) build(res *sim.Result, types []string) {
	s := res.Summary
	p.Title = s.Name
	if p.Title == "" {
		p.Title = "rackpool sim run"
	}
	var sub []string
	if s.Architecture != "" {
		sub = append(sub, s.Architecture+" architecture")
	}
	if s.Network != "" {
		sub = append(sub, s.Network+" network")
	}
	if s.Policy != "" {
		sub = append(sub, s.Policy+" policy")
	}
	sub = append(sub, "seed "+strconv.FormatInt(s.Seed, 10))
	p.Subtitle = strings.Join(sub, " · ")

	h := func(value, label string) { p.Headline = append(p.Headline, reportHeadline{value, label}) }
	h(formatCount(s.Requests), "requests")
	h(formatCount(s.Accepted), "accepted")
	h(formatPercent(s.AcceptanceRatio), "acceptance ratio")
	utilTypes := slices.Sorted(maps.Keys(s.MeanUtilisation))
	for _, t := range utilTypes {
		h(formatPercent(s.MeanUtilisation[t]), "mean "+resourceTypeLabel(t)+" utilisation")
	}
	if s.RTTMeanNS > 0 || s.RTTP99NS > 0 {
		h(chart.FormatSig(s.RTTMeanNS, 3)+" / "+chart.FormatSig(s.RTTP99NS, 3)+" ns", "round trip, mean / p99")
	}
	if pw := s.SwitchPowerW; pw != nil {
		h(chart.FormatSig(pw.InstalledW, 4)+" W", "switch power installed")
		h(chart.FormatSig(pw.ActiveMeanW, 4)+" W", "switch power active (mean)")
	}
	if s.Cost != nil {
		h(chart.FormatSig(s.Cost.Total, 4), "Eq. 1 cost total")
		h(chart.FormatSig(s.Cost.PerUsedUnit, 3)+"×", "cost per unit used (Eq. 1 / used)")
	}
	if s.Slowdown != nil {
		h("+"+formatPercent(s.Slowdown.Mean), "slowdown, mean (Eq. 2)")
	}

	num := func(v float64) string { return chart.FormatSig(v, 6) }
	p.Sections = append(p.Sections, reportSection{Title: "Run", Rows: []reportDetail{
		{"name", "name", s.Name},
		{"seed", "seed", strconv.FormatInt(s.Seed, 10)},
		{"architecture", "architecture", s.Architecture},
		{"network", "network", s.Network},
		{"placement policy", "policy", s.Policy},
		{"virtual time simulated", "virtual_time", num(s.VirtualTimeUnits)},
		{"wall-clock seconds", "wall_seconds", num(s.WallSeconds)},
		{"scheduling decisions per second", "decisions_per_second", num(s.DecisionsPerSec)},
	}})
	p.Sections = append(p.Sections, reportSection{Title: "Requests", Rows: []reportDetail{
		{"requests", "requests", formatCount(s.Requests)},
		{"accepted", "accepted", formatCount(s.Accepted)},
		{"rejected", "rejected", formatCount(s.Rejected)},
		{"acceptance ratio", "acceptance_ratio", num(s.AcceptanceRatio) + " (" + formatPercent(s.AcceptanceRatio) + ")"},
		{"blocking ratio", "blocking_ratio", num(s.BlockingRatio) + " (" + formatPercent(s.BlockingRatio) + ")"},
	}})
	rej := reportSection{Title: "Rejections by reason (rejections)", Head: []string{"reason", "requests", "share of rejected", "meaning"}}
	for _, r := range slices.Sorted(maps.Keys(s.Rejections)) {
		n := s.Rejections[r]
		share := ""
		if s.Rejected > 0 {
			share = formatPercent(float64(n) / float64(s.Rejected))
		}
		rej.Table = append(rej.Table, []string{r, formatCount(n), share, sim.ReasonMeanings[r]})
	}
	if len(rej.Table) == 0 {
		rej.Table = [][]string{{"none", "0", "", ""}}
	}
	p.Sections = append(p.Sections, rej)

	util := reportSection{Title: "Utilisation (mean_utilisation, peak_utilisation)", Head: []string{"resource type", "mean", "peak"}}
	allUtil := map[string]bool{}
	for t := range s.MeanUtilisation {
		allUtil[t] = true
	}
	for t := range s.PeakUtilisation {
		allUtil[t] = true
	}
	for _, t := range slices.Sorted(maps.Keys(allUtil)) {
		util.Table = append(util.Table, []string{t, optFormatPercent(s.MeanUtilisation, t), optFormatPercent(s.PeakUtilisation, t)})
	}
	p.Sections = append(p.Sections, util)

	remote := reportSection{Title: "Remote memory", Rows: []reportDetail{
		{"round trip, mean (ns)", "rtt_mean_ns", num(s.RTTMeanNS)},
		{"round trip, median (ns)", "rtt_p50_ns", num(s.RTTP50NS)},
		{"round trip, 99th percentile (ns)", "rtt_p99_ns", num(s.RTTP99NS)},
		{"blocks allocated", "", formatCount(len(res.RTTNS))},
	}}
	p.Sections = append(p.Sections, remote)
	hop := reportSection{Title: "Share of blocks by switch hops (hop_share)", Head: []string{"hops", "share"}}
	hopKeys := slices.Sorted(maps.Keys(s.HopShare))
	slices.SortStableFunc(hopKeys, func(a, b string) int { return compareNumeric(a, b) })
	for _, k := range hopKeys {
		hop.Table = append(hop.Table, []string{k, formatPercent(s.HopShare[k])})
	}
	if len(hop.Table) > 0 {
		p.Sections = append(p.Sections, hop)
	}

	if pw := s.SwitchPowerW; pw != nil {
		p.Sections = append(p.Sections, reportSection{Title: "Optical switch power (switch_power_w)", Rows: []reportDetail{
			{"power per port (W)", "per_port_w", num(pw.PerPortW)},
			{"ports installed", "installed_ports", formatCount(pw.InstalledPorts)},
			{"installed power (W)", "installed_w", num(pw.InstalledW)},
			{"active power, mean (W)", "active_mean_w", num(pw.ActiveMeanW)},
			{"active power, peak (W)", "active_peak_w", num(pw.ActivePeakW)},
		}})
	}
	if c := s.Cost; c != nil {
		cost := reportSection{Title: "Cost, P0 Eq. 1: C_total = Σ N_i·C_i / U_i (cost)", Head: []string{"resource type", "unit_cost C_i", "units N_i", "utilisation U_i", "N_i·C_i / U_i"}}
		all := map[string]bool{}
		for _, m := range []map[string]float64{c.UnitCost, c.Units, c.Utilisation} {
			for t := range m {
				all[t] = true
			}
		}
		for _, t := range slices.Sorted(maps.Keys(all)) {
			term := ""
			if u := c.Utilisation[t]; u != 0 {
				term = num(c.Units[t] * c.UnitCost[t] / u)
			}
			cost.Table = append(cost.Table, []string{t, optFormatSig(c.UnitCost, t), optFormatSig(c.Units, t), optFormatSig(c.Utilisation, t), term})
		}
		cost.Table = append(cost.Table, []string{"total", "", "", "", num(c.Total)})
		cost.Table = append(cost.Table, []string{"per_used_unit (cost per unit used)", "", "", "", num(c.PerUsedUnit)})
		p.Sections = append(p.Sections, cost)
	}
	if sd := s.Slowdown; sd != nil {
		p.Sections = append(p.Sections, reportSection{Title: "Slowdown, P0 Eq. 2 (slowdown)", Rows: []reportDetail{
			{"MFP", "mfp", num(sd.MFP)},
			{"local memory latency (ns)", "local_ns", num(sd.LocalNS)},
			{"mean remote latency (ns)", "mean_remote_ns", num(sd.MeanRemoteNS)},
			{"execution-time increase, mean", "mean", num(sd.Mean) + " (" + formatPercent(sd.Mean) + ")"},
			{"execution-time increase, p99", "p99", num(sd.P99) + " (" + formatPercent(sd.P99) + ")"},
		}})
	}
	if d := s.Demand; d != nil {
		p.Sections = append(p.Sections, reportSection{Title: "Time-varying demand (demand)", Rows: []reportDetail{
			{"nodes", "nodes", formatCount(d.Nodes)},
			{"node peak-to-average", "node_peak_to_average", num(d.NodePeakToAverage)},
			{"aggregate peak-to-average", "aggregate_peak_to_average", num(d.AggPeakToAverage)},
			{"sum of node peaks (GB), what fixed servers hold", "sum_of_node_peaks_gb", num(d.SumOfPeaksGB)},
			{"aggregate peak (GB), what a pool holds", "aggregate_peak_gb", num(d.AggregatePeakGB)},
			{"pool saving ratio", "pool_saving_ratio", num(d.PoolSavingRatio)},
			{"expansions", "expansions", formatCount(d.Expansions)},
			{"expansions failed", "expansions_failed", formatCount(d.ExpansionsFailed)},
			{"provisioning policy", "provisioning", d.Provisioning},
			{"memory held (GB × steps)", "provisioned_gb_steps", num(d.ProvisionedGBSteps)},
			{"demand (GB × steps)", "demand_gb_steps", num(d.DemandGBSteps)},
			{"peak memory held (GB), what the pool needs for this load", "peak_provisioned_gb", num(d.PeakProvisionedGB)},
			{"node-steps short of their demand", "short_node_steps", formatCount(d.ShortNodeSteps)},
			{"share of node-steps short", "short_node_steps_ratio", formatPercent(d.ShortNodeStepsRatio)},
		}})
	}
}

// WriteSweepReport writes a parameter sweep into dir: sweep.csv (one row
// per point: the axes in the order given, then the headline results),
// sweep.json (the rows, which ReadSweepRows reads back), sweep.svg
// (acceptance ratio against the last axis, one line per combination of the
// other axes) and report.html with the plot and the results table. dir is
// replaced by the same rules as WriteReport's.
func WriteSweepReport(dir string, axes []string, rows []sim.SweepRow) error {
	return writeAtomically(dir, func(tmp string) error { return fillSweep(tmp, axes, rows) })
}

// fillSweep writes every file of a sweep's report into tmp.
func fillSweep(tmp string, axes []string, rows []sim.SweepRow) error {
	types := sweepTypes(rows)
	head, table := sweepTable(axes, types, rows)
	b, err := encodeCSVRows(head, table)
	if err != nil {
		return fmt.Errorf("sim: encode %s: %w", SweepCSVFile, err)
	}
	if err := writeOutputFile(tmp, SweepCSVFile, b); err != nil {
		return err
	}
	if rows == nil {
		rows = []sim.SweepRow{} // "[]", not "null"
	}
	js, err := json.MarshalIndent(rows, "", "  ")
	if err != nil {
		return fmt.Errorf("sim: encode %s: %w", SweepJSONFile, err)
	}
	if err := writeOutputFile(tmp, SweepJSONFile, append(js, '\n')); err != nil {
		return err
	}

	page := sweepPage{Points: len(rows), Axes: strings.Join(axes, " × ")}
	if len(axes) > 0 {
		svg, err := sweepChart(axes, rows).SVG()
		if err != nil {
			return fmt.Errorf("sim: draw sweep.svg: %w", err)
		}
		if err := writeOutputFile(tmp, "sweep.svg", svg); err != nil {
			return err
		}
		page.Figure = &reportFigure{Title: "Acceptance ratio by " + axes[len(axes)-1], File: "sweep.svg", SVG: chart.Inline(svg),
			Caption: "Acceptance ratio against " + axes[len(axes)-1] + sweepCaptionTail(axes) + ": where a line falls away is where that configuration runs out of room."}
	}
	// The page's table is in axis order; the files keep the order given.
	order := make([]int, len(rows))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return compareSweepParams(axes, rows[a].Params, rows[b].Params) })
	page.Head = head
	page.Sorted = len(axes)
	for _, i := range order {
		page.Rows = append(page.Rows, displayRow(table[i], len(axes)))
	}
	var html bytes.Buffer
	if err := reportTemplates.ExecuteTemplate(&html, "sweep", &page); err != nil {
		return fmt.Errorf("sim: render %s: %w", ReportFile, err)
	}
	return writeOutputFile(tmp, ReportFile, html.Bytes())
}

func sweepCaptionTail(axes []string) string {
	if len(axes) < 2 {
		return ""
	}
	return ", one line per combination of " + strings.Join(axes[:len(axes)-1], " and ")
}

// displayRow rounds a sweep.csv row's fractional results to four
// significant digits for people; integers and the first keep cells (the
// parameters) stay exact.
func displayRow(row []string, keep int) []string {
	out := slices.Clone(row)
	for i := keep; i < len(out); i++ {
		if _, err := strconv.Atoi(out[i]); err == nil {
			continue // counts stay exact
		}
		if v, err := strconv.ParseFloat(out[i], 64); err == nil {
			out[i] = chart.FormatSig(v, 4)
		}
	}
	return out
}

// sweepPage is what the "sweep" template renders.
type sweepPage struct {
	Points int
	Axes   string
	Figure *reportFigure
	Head   []string
	Sorted int // the leading columns the rows are sorted by
	Rows   [][]string
}

// sweepTypes returns every resource type the rows' mean utilisation names.
func sweepTypes(rows []sim.SweepRow) []string {
	seen := map[string]bool{}
	for _, r := range rows {
		for t := range r.Summary.MeanUtilisation {
			seen[t] = true
		}
	}
	return slices.Sorted(maps.Keys(seen))
}

// sweepTable returns sweep.csv's header and rows. A parameter, type or
// power figure a row lacks is an empty cell.
func sweepTable(axes, types []string, rows []sim.SweepRow) ([]string, [][]string) {
	reasons := sweepReasons(rows)
	head := slices.Clone(axes)
	head = append(head, "shard", "requests", "accepted", "acceptance_ratio")
	for _, t := range types {
		head = append(head, "mean_utilisation_"+t)
	}
	head = append(head, "rtt_mean_ns", "switch_power_installed_w", "switch_power_active_mean_w", "cost_total", "wall_seconds")
	for _, r := range reasons {
		head = append(head, "rejected_"+r)
	}
	table := make([][]string, len(rows))
	for i, r := range rows {
		s := r.Summary
		row := make([]string, 0, len(head))
		for _, a := range axes {
			row = append(row, optFormatExact(r.Params, a))
		}
		row = append(row, strconv.Itoa(r.Shard), strconv.Itoa(s.Requests), strconv.Itoa(s.Accepted), formatExact(s.AcceptanceRatio))
		for _, t := range types {
			row = append(row, optFormatExact(s.MeanUtilisation, t))
		}
		row = append(row, formatExact(s.RTTMeanNS))
		if s.SwitchPowerW != nil {
			row = append(row, formatExact(s.SwitchPowerW.InstalledW), formatExact(s.SwitchPowerW.ActiveMeanW))
		} else {
			row = append(row, "", "")
		}
		if s.Cost != nil {
			row = append(row, formatExact(s.Cost.Total))
		} else {
			row = append(row, "")
		}
		row = append(row, formatExact(s.WallSeconds))
		for _, reason := range reasons {
			row = append(row, strconv.Itoa(s.Rejections[reason]))
		}
		table[i] = row
	}
	return head, table
}

// sweepReasons returns the rejection reasons any row counts, sorted: each
// is a sweep.csv column of counts (0 where a row has none).
func sweepReasons(rows []sim.SweepRow) []string {
	seen := map[string]bool{}
	for _, r := range rows {
		for k := range r.Summary.Rejections {
			seen[k] = true
		}
	}
	return slices.Sorted(maps.Keys(seen))
}

// sweepChart plots acceptance ratio (%) against the last axis, one series
// per combination of the other axes, in axis order.
func sweepChart(axes []string, rows []sim.SweepRow) chart.Line {
	x, others := axes[len(axes)-1], axes[:len(axes)-1]
	sorted := slices.Clone(rows)
	slices.SortStableFunc(sorted, func(a, b sim.SweepRow) int { return compareSweepParams(axes, a.Params, b.Params) })
	c := chart.Line{Title: "Acceptance ratio by " + x, XLabel: x, YLabel: "acceptance ratio (%)", YFixed: true, YMin: 0, YMax: 100}
	index := map[string]int{}
	for _, r := range sorted {
		xv, ok := r.Params[x]
		if !ok {
			continue
		}
		var parts []string
		for _, a := range others {
			parts = append(parts, a+"="+optFormatExact(r.Params, a))
		}
		name := strings.Join(parts, ", ")
		if name == "" {
			name = "acceptance"
		}
		i, ok := index[name]
		if !ok {
			i = len(c.Series)
			index[name] = i
			c.Series = append(c.Series, chart.Series{Name: name})
		}
		c.Series[i].Points = append(c.Series[i].Points, chart.Point{X: xv, Y: 100 * r.Summary.AcceptanceRatio})
	}
	return c
}

// compareSweepParams orders parameter sets by the axes in turn, numerically; a
// missing value sorts first.
func compareSweepParams(axes []string, a, b map[string]float64) int {
	for _, k := range axes {
		av, aok := a[k]
		bv, bok := b[k]
		switch {
		case !aok && !bok:
			continue
		case !aok:
			return -1
		case !bok:
			return 1
		case av < bv:
			return -1
		case av > bv:
			return 1
		}
	}
	return 0
}

// ReadSweepRows reads the rows of a sweep.json that WriteSweepReport wrote.
func ReadSweepRows(path string) ([]sim.SweepRow, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("sim: read sweep rows: %w", err)
	}
	var rows []sim.SweepRow
	if err := json.Unmarshal(b, &rows); err != nil {
		return nil, fmt.Errorf("sim: read sweep rows from %s: %w", path, err)
	}
	if rows == nil {
		return nil, fmt.Errorf("sim: read sweep rows from %s: it holds no list of rows", path)
	}
	return rows, nil
}

// MergeSweeps reads the sweep.json of each directory (the shards of one
// sweep) and returns their rows, in the order of dirs. Every row must sweep
// the same parameters, and no combination of parameter values may appear
// twice; either is an error naming the directories concerned.
func MergeSweeps(dirs []string) ([]sim.SweepRow, error) {
	if len(dirs) == 0 {
		return nil, errors.New("sim: merge sweeps: no directories given")
	}
	var (
		all    []sim.SweepRow
		seen   = map[string]string{} // parameter values → the directory holding them
		names  string                // the parameters every row sweeps
		namesD string                // where names came from
	)
	for _, dir := range dirs {
		rows, err := ReadSweepRows(filepath.Join(dir, SweepJSONFile))
		if err != nil {
			return nil, fmt.Errorf("sim: merge sweeps: %w", err)
		}
		for _, r := range rows {
			keys := strings.Join(slices.Sorted(maps.Keys(r.Params)), ", ")
			if namesD == "" {
				names, namesD = keys, dir
			} else if keys != names {
				return nil, fmt.Errorf("sim: merge sweeps: %s sweeps over [%s] but %s over [%s]", namesD, names, dir, keys)
			}
			key := sweepParamKey(r.Params)
			if first, ok := seen[key]; ok {
				if first == dir {
					return nil, fmt.Errorf("sim: merge sweeps: point %s appears twice in %s", key, dir)
				}
				return nil, fmt.Errorf("sim: merge sweeps: point %s is in both %s and %s", key, first, dir)
			}
			seen[key] = dir
			all = append(all, r)
		}
	}
	return all, nil
}

// sweepParamKey writes parameter values canonically: name=value, in name order.
func sweepParamKey(params map[string]float64) string {
	parts := make([]string, 0, len(params))
	for _, k := range slices.Sorted(maps.Keys(params)) {
		parts = append(parts, k+"="+formatExact(params[k]))
	}
	return "{" + strings.Join(parts, ", ") + "}"
}

// outputState is what an output path holds before it is replaced.
type outputState int

const (
	outputAbsent  outputState = iota // nothing there
	outputEmpty                      // an empty directory
	outputEarlier                    // a directory of earlier rackpool sim output
)

// inspectOutput says what dir (abs, resolved) holds, or why it must not be
// replaced.
func inspectOutput(dir, abs string) (outputState, error) {
	fi, err := os.Lstat(abs)
	if errors.Is(err, fs.ErrNotExist) {
		return outputAbsent, nil
	}
	if err != nil {
		return 0, fmt.Errorf("sim: output directory %s: %w", dir, err)
	}
	if !fi.IsDir() {
		return 0, fmt.Errorf("sim: output directory %s exists and is not a directory; choose another --out", dir)
	}
	entries, err := os.ReadDir(abs)
	if err != nil {
		return 0, fmt.Errorf("sim: output directory %s: %w", dir, err)
	}
	if len(entries) == 0 {
		return outputEmpty, nil
	}
	for _, e := range entries {
		if (e.Name() == SummaryFile || e.Name() == SweepCSVFile) && e.Type().IsRegular() {
			return outputEarlier, nil
		}
	}
	return 0, fmt.Errorf("sim: output directory %s is not empty and holds no earlier rackpool sim output; choose another --out", dir)
}

// writeAtomically has fill write an output directory's files into a fresh
// temporary sibling of dir, then puts it in dir's place with a rename, so
// that dir holds either its old contents or all of the new ones.
//
// dir may be absent, an empty directory or one holding earlier rackpool
// sim output (a summary.json or sweep.csv), which is moved aside, replaced
// and then removed. Anything else is left untouched and is an error. On any
// error the temporary directory is removed.
func writeAtomically(dir string, fill func(tmp string) error) error {
	if dir == "" {
		return errors.New("sim: no output directory given")
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return fmt.Errorf("sim: output directory %s: %w", dir, err)
	}
	// Refuse before doing the work; the check is repeated before the swap.
	if _, err := inspectOutput(dir, abs); err != nil {
		return err
	}
	parent, base := filepath.Dir(abs), filepath.Base(abs)
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return fmt.Errorf("sim: create parent of output directory %s: %w", dir, err)
	}
	tmp, err := os.MkdirTemp(parent, "."+base+".tmp-")
	if err != nil {
		return fmt.Errorf("sim: create temporary directory next to %s: %w", dir, err)
	}
	placed := false
	defer func() {
		if !placed {
			os.RemoveAll(tmp)
		}
	}()
	// MkdirTemp makes it private; the output is an ordinary directory.
	if err := os.Chmod(tmp, 0o755); err != nil {
		return fmt.Errorf("sim: temporary directory for %s: %w", dir, err)
	}
	if err := fill(tmp); err != nil {
		return err
	}

	state, err := inspectOutput(dir, abs)
	if err != nil {
		return err
	}
	switch state {
	case outputEmpty:
		if err := os.Remove(abs); err != nil {
			return fmt.Errorf("sim: replace empty output directory %s: %w", dir, err)
		}
		fallthrough
	case outputAbsent:
		if err := os.Rename(tmp, abs); err != nil {
			return fmt.Errorf("sim: move output into %s: %w", dir, err)
		}
		placed = true
		return nil
	}

	// Earlier output: move it into a fresh directory (renaming onto a new
	// name inside it cannot collide), move the new output in, remove the
	// old.
	aside, err := os.MkdirTemp(parent, "."+base+".old-")
	if err != nil {
		return fmt.Errorf("sim: create temporary directory next to %s: %w", dir, err)
	}
	old := filepath.Join(aside, base)
	if err := os.Rename(abs, old); err != nil {
		os.Remove(aside)
		return fmt.Errorf("sim: move earlier output %s aside: %w", dir, err)
	}
	if err := os.Rename(tmp, abs); err != nil {
		if rerr := os.Rename(old, abs); rerr != nil {
			return fmt.Errorf("sim: move output into %s: %w; the earlier output is at %s (putting it back failed: %v)", dir, err, old, rerr)
		}
		os.Remove(aside)
		return fmt.Errorf("sim: move output into %s: %w", dir, err)
	}
	placed = true
	if err := os.RemoveAll(aside); err != nil {
		return fmt.Errorf("sim: wrote %s but could not remove the earlier output moved to %s: %w", dir, aside, err)
	}
	return nil
}

// writeOutputFile writes one output file into dir.
func writeOutputFile(dir, name string, data []byte) error {
	if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
		return fmt.Errorf("sim: write %s: %w", name, err)
	}
	return nil
}

// encodeCSVRows renders a header and rows as CSV.
func encodeCSVRows(head []string, rows [][]string) ([]byte, error) {
	var b bytes.Buffer
	w := csv.NewWriter(&b)
	if err := w.Write(head); err != nil {
		return nil, err
	}
	if err := w.WriteAll(rows); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// svgChart is a chart that renders itself as SVG: a chart.Line or a
// chart.Bar.
type svgChart interface {
	SVG() ([]byte, error)
}

// formatExact writes v in the shortest form that reads back exactly.
func formatExact(v float64) string {
	return strconv.FormatFloat(v, 'g', -1, 64)
}

// isFinite says whether v is neither NaN nor infinite.
func isFinite(v float64) bool {
	return !math.IsNaN(v) && !math.IsInf(v, 0)
}

// optFormatExact is formatExact of m[k], or "" when m has no k.
func optFormatExact(m map[string]float64, k string) string {
	if v, ok := m[k]; ok {
		return formatExact(v)
	}
	return ""
}

// optFormatSig is chart.FormatSig(m[k], 6), or "" when m has no k.
func optFormatSig(m map[string]float64, k string) string {
	if v, ok := m[k]; ok {
		return chart.FormatSig(v, 6)
	}
	return ""
}

// optFormatPercent is formatPercent(m[k]), or "" when m has no k.
func optFormatPercent(m map[string]float64, k string) string {
	if v, ok := m[k]; ok {
		return formatPercent(v)
	}
	return ""
}

// formatPercent writes a ratio as a percentage with one decimal.
func formatPercent(ratio float64) string {
	if !isFinite(ratio) {
		return formatExact(ratio)
	}
	s := strconv.FormatFloat(100*ratio, 'f', 1, 64)
	if s == "-0.0" {
		s = "0.0"
	}
	return s + "%"
}

// formatCount writes an integer with thousands separators.
func formatCount(n int) string {
	s := strconv.Itoa(n)
	neg := strings.HasPrefix(s, "-")
	if neg {
		s = s[1:]
	}
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}

// compareNumeric orders strings that hold numbers numerically, and any
// others after them by text.
func compareNumeric(a, b string) int {
	av, aerr := strconv.ParseFloat(a, 64)
	bv, berr := strconv.ParseFloat(b, 64)
	switch {
	case aerr == nil && berr == nil:
		if av < bv {
			return -1
		}
		if av > bv {
			return 1
		}
		return strings.Compare(a, b)
	case aerr == nil:
		return -1
	case berr == nil:
		return 1
	}
	return strings.Compare(a, b)
}

// reportTemplates renders report.html for runs ("run") and sweeps
// ("sweep"). Everything is inline: the style sheet, the plots (as SVG
// elements); nothing is fetched and nothing runs.
var reportTemplates = template.Must(template.New("report").Parse(`
{{- define "style" -}}
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<style>
:root { color-scheme: light; }
body { margin: 0 auto; max-width: 1100px; padding: 24px 28px 60px; font: 15px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; color: #222; background: #f6f7f9; }
h1 { font-size: 26px; margin: 0 0 2px; }
h2 { font-size: 18px; margin: 28px 0 10px; }
h3 { font-size: 15px; margin: 20px 0 6px; color: #444; }
.sub { color: #666; margin: 0 0 18px; }
.cards { display: grid; grid-template-columns: repeat(auto-fill, minmax(170px, 1fr)); gap: 12px; }
.card { background: #fff; border: 1px solid #e2e5ea; border-radius: 8px; padding: 12px 14px; }
.card .value { font-size: 24px; font-weight: 650; font-variant-numeric: tabular-nums; }
.card .label { color: #666; font-size: 13px; }
.notice { background: #fff8e1; border: 1px solid #f0e0a8; border-radius: 6px; padding: 8px 12px; }
figure { margin: 18px 0; background: #fff; border: 1px solid #e2e5ea; border-radius: 8px; padding: 12px 14px; }
figure h2 { margin-top: 0; }
figure svg { display: block; max-width: 100%; height: auto; }
figcaption { color: #444; margin-top: 6px; }
figcaption a, .files a { color: #1f5fa8; }
table { border-collapse: collapse; background: #fff; border: 1px solid #e2e5ea; margin: 4px 0 8px; font-variant-numeric: tabular-nums; }
th, td { text-align: left; padding: 5px 12px; border-bottom: 1px solid #eceef1; vertical-align: top; }
th { background: #eef1f5; font-weight: 600; position: sticky; top: 0; }
tbody tr:nth-child(even) { background: #fafbfc; }
td.num { text-align: right; }
code { color: #777; font-size: 12px; }
.files { color: #666; font-size: 13px; }
.wide { overflow-x: auto; }
</style>
{{- end -}}

{{- define "run" -}}
<!DOCTYPE html>
<html lang="en">
<head>
{{template "style"}}
<title>{{.Title}}</title>
</head>
<body>
<h1>{{.Title}}</h1>
<p class="sub">{{.Subtitle}}</p>
<div class="cards">
{{- range .Headline}}
<div class="card"><div class="value">{{.Value}}</div><div class="label">{{.Label}}</div></div>
{{- end}}
</div>
{{- range .Notes}}
<p class="notice">{{.}}</p>
{{- end}}
{{- range .Figures}}
<figure>
<h2>{{.Title}}</h2>
{{.SVG}}<figcaption>{{.Caption}} (<a href="{{.File}}">{{.File}}</a>)</figcaption>
</figure>
{{- end}}
<h2>Details</h2>
{{- range .Sections}}
<h3>{{.Title}}</h3>
{{- if .Head}}
<table>
<thead><tr>{{range .Head}}<th>{{.}}</th>{{end}}</tr></thead>
<tbody>
{{- range .Table}}
<tr>{{range .}}<td>{{.}}</td>{{end}}</tr>
{{- end}}
</tbody>
</table>
{{- else}}
<table>
<tbody>
{{- range .Rows}}
<tr><th scope="row">{{.Label}}</th><td>{{if .Key}}<code>{{.Key}}</code>{{end}}</td><td>{{.Value}}</td></tr>
{{- end}}
</tbody>
</table>
{{- end}}
{{- end}}
<p class="files">Files: {{range $i, $f := .Files}}{{if $i}} · {{end}}<a href="{{$f}}">{{$f}}</a>{{end}}</p>
</body>
</html>
{{end -}}

{{- define "sweep" -}}
<!DOCTYPE html>
<html lang="en">
<head>
{{template "style"}}
<title>rackpool sim sweep</title>
</head>
<body>
<h1>rackpool sim sweep</h1>
<p class="sub">{{.Points}} points{{if .Axes}} over {{.Axes}}{{end}}</p>
{{- with .Figure}}
<figure>
<h2>{{.Title}}</h2>
{{.SVG}}<figcaption>{{.Caption}} (<a href="{{.File}}">{{.File}}</a>)</figcaption>
</figure>
{{- end}}
<h2>Results</h2>
<p class="files">Sorted by the swept parameters (▲), in axis order; results rounded to four digits. The exact numbers are in <a href="sweep.csv">sweep.csv</a> and <a href="sweep.json">sweep.json</a>.</p>
<div class="wide">
<table>
<thead><tr>{{$sorted := .Sorted}}{{range $i, $h := .Head}}<th>{{$h}}{{if lt $i $sorted}} ▲{{end}}</th>{{end}}</tr></thead>
<tbody>
{{- range .Rows}}
<tr>{{range .}}<td class="num">{{.}}</td>{{end}}</tr>
{{- end}}
</tbody>
</table>
</div>
</body>
</html>
{{end -}}
`))
