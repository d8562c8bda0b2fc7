package provision

import (
	"bytes"
	"encoding/json"
	"fmt"
	"html/template"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"

	"rackpool/internal/chart"
)

// The files WriteReport writes into its directory.
const (
	SummaryFile    = "summary.json"
	ComparisonFile = "comparison.json"
	ReportFile     = "report.html"
)

// Sweep is the predictive policy evaluated over a grid of observation and
// prediction windows (in intervals).
type Sweep struct {
	Windows  []int
	Horizons []int
	// Saving and Short are indexed [window][horizon].
	Saving [][]float64
	Short  [][]float64
}

// RunSweep evaluates the predictive policy for every window and horizon,
// calling progress after each.
func RunSweep(in Input, rules Rules, windows, horizons []int, progress func(done, total int)) (*Sweep, error) {
	sw := &Sweep{Windows: windows, Horizons: horizons}
	total := len(windows) * len(horizons)
	for i, w := range windows {
		sw.Saving = append(sw.Saving, make([]float64, len(horizons)))
		sw.Short = append(sw.Short, make([]float64, len(horizons)))
		for j, h := range horizons {
			r := rules
			r.Window, r.Horizon, r.MinHold = w, h, 0
			res, err := Evaluate(in, Predictive, r)
			if err != nil {
				return nil, err
			}
			sw.Saving[i][j] = res.Summary.SavingVsStaticPeak
			sw.Short[i][j] = res.Summary.ShortIntervalFraction
			if progress != nil {
				progress(i*len(horizons)+j+1, total)
			}
		}
	}
	return sw, nil
}

// Report is what WriteReport draws: the chosen policy's result, every
// policy's for comparison (reactive matched to the predictive policy's
// quantity when Matched is set), and an optional sweep.
type Report struct {
	Trace   string
	Chosen  *Result
	All     []*Result
	Matched bool
	Sweep   *Sweep
	// Entities is how many entities get a demand-against-provisioned plot
	// (default 6: those with the highest peak to average).
	Entities int
}

// WriteReport writes summary.json (the chosen policy), comparison.json
// (every policy's summary) and report.html (tables and plots, one file with
// no external resources) into dir, creating it if needed.
func WriteReport(dir string, rep Report) error {
	if rep.Chosen == nil {
		return fmt.Errorf("provision: no result to report")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	js, err := json.MarshalIndent(rep.Chosen.Summary, "", "  ")
	if err != nil {
		return err
	}
	if err := writeFile(dir, SummaryFile, append(js, '\n')); err != nil {
		return err
	}
	var sums []Summary
	for _, r := range rep.All {
		sums = append(sums, r.Summary)
	}
	if js, err = json.MarshalIndent(sums, "", "  "); err != nil {
		return err
	}
	if err := writeFile(dir, ComparisonFile, append(js, '\n')); err != nil {
		return err
	}
	page, err := buildPage(rep)
	if err != nil {
		return err
	}
	var buf bytes.Buffer
	if err := reportTemplate.Execute(&buf, page); err != nil {
		return err
	}
	return writeFile(dir, ReportFile, buf.Bytes())
}

// writeFile writes through a temporary file and a rename, so a reader never
// sees half a file.
func writeFile(dir, name string, data []byte) error {
	tmp, err := os.CreateTemp(dir, "."+name+".tmp-")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Chmod(0o644); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), filepath.Join(dir, name))
}

type pageRow struct {
	Policy                              Policy
	Chosen                              bool
	Provisioned, Saving, Short, Deficit string
	Reconf, Headroom                    string
}

type pageFigure struct {
	Title, Caption string
	SVG            template.HTML
}

type page struct {
	Trace   string
	Chosen  Summary
	Rows    []pageRow
	Matched bool
	Figures []pageFigure
}

func buildPage(rep Report) (*page, error) {
	p := &page{Trace: rep.Trace, Chosen: rep.Chosen.Summary, Matched: rep.Matched}
	for _, r := range rep.All {
		s := r.Summary
		row := pageRow{Policy: s.Policy, Chosen: s.Policy == rep.Chosen.Summary.Policy,
			Provisioned: chart.FormatSig(s.ProvisionedGiBHours, 5),
			Saving:      fmt.Sprintf("%.1f%%", 100*s.SavingVsStaticPeak),
			Short:       fmt.Sprintf("%.2f%%", 100*s.ShortIntervalFraction),
			Deficit:     chart.FormatSig(s.ShortfallGiBHours, 4),
			Reconf:      chart.FormatSig(s.ReconfigurationsPerHour, 4)}
		if s.Policy == Reactive {
			row.Headroom = fmt.Sprintf("%.1f%%", 100*s.Headroom)
		}
		p.Rows = append(p.Rows, row)
	}
	add := func(title, caption string, c interface{ SVG() ([]byte, error) }) error {
		svg, err := c.SVG()
		if err != nil {
			return fmt.Errorf("provision: draw %q: %w", title, err)
		}
		p.Figures = append(p.Figures, pageFigure{Title: title, Caption: caption, SVG: chart.Inline(svg)})
		return nil
	}
	n := rep.Entities
	if n == 0 {
		n = 6
	}
	for _, e := range pickEntities(rep.Chosen.Entities, n) {
		c := chart.Line{Title: "Entity " + e.Entity, XLabel: "time (h)", YLabel: "GiB", YFromZero: true, Height: 240,
			Series: []chart.Series{{Name: "demand"}, {Name: string(rep.Chosen.Summary.Policy) + " provisioned"}}}
		dt := rep.Chosen.Summary.IntervalSeconds / 3600
		for t := range e.Demand {
			x := e.Start/3600 + float64(t)*dt
			c.Series[0].Points = append(c.Series[0].Points, chart.Point{X: x, Y: e.Demand[t]})
			c.Series[1].Points = append(c.Series[1].Points, chart.Point{X: x, Y: e.Provisioned[t]})
		}
		if err := add(c.Title, "Demand against the level the policy provisioned, interval by interval.", c); err != nil {
			return nil, err
		}
	}
	cdf := chart.Line{Title: "Shortfall CDF", XLabel: "shortfall per interval (GiB)", YLabel: "entity-intervals at or below (%)"}
	for _, r := range rep.All {
		cdf.Series = append(cdf.Series, chart.Series{Name: string(r.Summary.Policy), Points: shortfallCDF(r)})
	}
	if err := add(cdf.Title, "Share of entity-intervals whose shortfall (demand above provisioned) is at most x; every policy starts at its share of intervals with none.", cdf); err != nil {
		return nil, err
	}
	if sw := rep.Sweep; sw != nil {
		for _, k := range []struct {
			title, ylabel string
			v             [][]float64
		}{
			{"Saving against the prediction window", "saving vs static peak (%)", sw.Saving},
			{"Short intervals against the prediction window", "short intervals (%)", sw.Short},
		} {
			c := chart.Line{Title: k.title, XLabel: "prediction window (intervals)", YLabel: k.ylabel, YFromZero: true}
			for i, w := range sw.Windows {
				s := chart.Series{Name: fmt.Sprintf("observation window %d", w)}
				for j, h := range sw.Horizons {
					s.Points = append(s.Points, chart.Point{X: float64(h), Y: 100 * k.v[i][j]})
				}
				c.Series = append(c.Series, s)
			}
			if err := add(c.Title, "The predictive policy over a grid of observation and prediction windows: a longer prediction window tends toward peak provisioning.", c); err != nil {
				return nil, err
			}
		}
	}
	return p, nil
}

// pickEntities returns up to n entities, those with the highest peak to
// average first (ties by name).
func pickEntities(es []EntityResult, n int) []EntityResult {
	type scored struct {
		e EntityResult
		r float64
	}
	ss := make([]scored, len(es))
	for i, e := range es {
		sum, peak := 0.0, 0.0
		for _, v := range e.Demand {
			sum += v
			peak = max(peak, v)
		}
		r := 0.0
		if sum > 0 {
			r = peak * float64(len(e.Demand)) / sum
		}
		ss[i] = scored{e, r}
	}
	sort.SliceStable(ss, func(i, j int) bool {
		if ss[i].r != ss[j].r {
			return ss[i].r > ss[j].r
		}
		return ss[i].e.Entity < ss[j].e.Entity
	})
	out := make([]EntityResult, 0, n)
	for _, s := range ss[:min(n, len(ss))] {
		out = append(out, s.e)
	}
	return out
}

// shortfallCDF is the empirical CDF of per-interval shortfall, in at most
// 200 points.
func shortfallCDF(r *Result) []chart.Point {
	var v []float64
	for _, e := range r.Entities {
		for t := range e.Demand {
			v = append(v, max(0, e.Demand[t]-e.Provisioned[t]))
		}
	}
	if len(v) == 0 {
		return nil
	}
	slices.Sort(v)
	var pts []chart.Point
	step := max(1, len(v)/200)
	for i := 0; i < len(v); i += step {
		// The share at or below v[i]: the last index holding the same value.
		j, _ := slices.BinarySearch(v, math.Nextafter(v[i], math.Inf(1)))
		pts = append(pts, chart.Point{X: v[i], Y: 100 * float64(j) / float64(len(v))})
	}
	return append(pts, chart.Point{X: v[len(v)-1], Y: 100})
}

var reportTemplate = template.Must(template.New("report").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<title>rackpool provision eval: {{.Trace}}</title>
<style>
body{font-family:sans-serif;max-width:1000px;margin:2em auto;color:#222}
table{border-collapse:collapse;margin:1em 0}td,th{border:1px solid #ccc;padding:4px 8px;text-align:right}
th{background:#f3f3f3}td:first-child,th:first-child{text-align:left}tr.chosen{font-weight:bold}
figure{margin:2em 0}figcaption{color:#555;font-size:90%}
</style></head><body>
<h1>Provisioning policies on {{.Trace}}</h1>
<p>{{.Chosen.Entities}} entities, {{.Chosen.Intervals}} entity-intervals of {{.Chosen.IntervalSeconds}} s;
observation window {{.Chosen.Window}} intervals, prediction window {{.Chosen.Horizon}}, granule {{.Chosen.Granule}} GiB.
Static peak holds each entity at its own peak for its lifetime; the oracle provisions each interval's true demand (the ceiling).
{{if .Matched}}The reactive policy's headroom was chosen so it provisions at least as much as the predictive one: the two are compared at equal memory.{{end}}</p>
<table><tr><th>policy</th><th>provisioned GiB·h</th><th>saving vs static peak</th><th>short intervals</th><th>shortfall GiB·h</th><th>reconfigurations / h</th><th>reactive headroom</th></tr>
{{range .Rows}}<tr{{if .Chosen}} class="chosen"{{end}}><td>{{.Policy}}</td><td>{{.Provisioned}}</td><td>{{.Saving}}</td><td>{{.Short}}</td><td>{{.Deficit}}</td><td>{{.Reconf}}</td><td>{{.Headroom}}</td></tr>
{{end}}</table>
{{range .Figures}}<figure><h2>{{.Title}}</h2>{{.SVG}}<figcaption>{{.Caption}}</figcaption></figure>
{{end}}</body></html>
`))
