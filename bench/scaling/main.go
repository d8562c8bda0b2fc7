// Command scaling measures how the placement engine's cost grows with the
// datacenter: `rackpool sim` on MONet pods (24 cards per tray, 8 planes,
// 16 GB memory cards in 4 GB blocks) from about 10^3 to 10^5 cards, at a
// fixed load per card (the P4-scale scenario's offered load, scaled with
// the tray count) and a fixed number of requests per card, for the
// rackpool (locality) policy and first-fit. Each point is a separate
// process, so its peak RSS is its own. It prints a Markdown table and
// writes two SVG charts (decision time and peak RSS against cards, drawn
// by internal/sim's gonum/plot charts).
//
//	go run ./bench/scaling [-bin build/rackpool] [-out docs] [-trays 42,128,512,1024,2048,4096]
//
// -replot FILE redraws the charts from a table this command printed (or a
// Markdown file holding one, such as docs/benchmarks.md) without running
// anything.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"rackpool/bench/internal/harness"
	"rackpool/internal/chart"
	"rackpool/internal/childproc"
)

const (
	cardsPerTray = 24
	// fullLoad is the offered load of examples/sim/monet-p4-scale.yaml
	// on 4,096 trays; a pod of t trays gets fullLoad*t/4096, so every
	// point holds about the same share of its cores.
	fullLoad = 125.0
	// requestsPerTray keeps about ten holding times of arrivals at every
	// size (6,300 time units of holding at 10/load between arrivals).
	requestsPerTray = 200
)

type point struct {
	trays, cards  int
	policy        string
	requests      int
	accepted      int
	wall          float64 // the simulation's own seconds (no topology build)
	total         float64 // the whole command
	usPerDecision float64 // wall over requests
	rssGiB        float64 // peak resident set of the whole command
}

func main() {
	bin := flag.String("bin", "", "rackpool binary (default: build one)")
	out := flag.String("out", "docs", "directory for scaling-decision.svg and scaling-rss.svg")
	traysFlag := flag.String("trays", "42,128,512,1024,2048,4096", "pod sizes in trays")
	policies := flag.String("policies", "rackpool,first-fit", "policies to measure")
	replot := flag.String("replot", "", "redraw the charts from the table in this file instead of measuring")
	flag.Parse()
	if *replot != "" {
		points, err := readTable(*replot)
		if err != nil {
			childproc.Fatal(err)
		}
		if err := writeCharts(*out, points); err != nil {
			childproc.Fatal(err)
		}
		return
	}
	work := harness.WorkDir("rackpool-scaling")
	defer childproc.RunAtExit()
	rp := harness.Binary(*bin, work)
	var points []point
	fmt.Printf("# placement cost against pod size\n\n%s, %d CPUs\n\n", time.Now().UTC().Format("2006-01-02"), runtime.NumCPU())
	fmt.Println(tableHeader)
	fmt.Println("|---|---|---|---|---|---|---|---|---|")
	for _, pol := range strings.Split(*policies, ",") {
		for _, ts := range strings.Split(*traysFlag, ",") {
			trays, err := strconv.Atoi(strings.TrimSpace(ts))
			if err != nil || trays < 1 {
				childproc.Fatalf("bad tray count %q", ts)
			}
			p := run(rp, work, pol, trays)
			points = append(points, p)
			fmt.Printf("| %s | %d | %d | %d | %.2f%% | %.1f | %.2f | %.2f | %.2f GiB |\n", p.policy, p.trays, p.cards, p.requests,
				100*float64(p.accepted)/float64(p.requests), p.usPerDecision, p.wall, p.total, p.rssGiB)
		}
	}
	if err := writeCharts(*out, points); err != nil {
		childproc.Fatal(err)
	}
}

// writeCharts draws scaling-decision.svg and scaling-rss.svg into dir: one
// line per policy, in the order the points name them, against cards on a
// log scale.
func writeCharts(dir string, points []point) error {
	decision := chart.Line{Title: "Placement cost against pod size (MONet, fixed load per card)",
		XLabel: "cards (log scale)", YLabel: "time per decision (µs)", XLog: true, YFromZero: true}
	rss := chart.Line{Title: "Peak memory of the whole run against pod size",
		XLabel: "cards (log scale)", YLabel: "peak RSS (GiB)", XLog: true, YFromZero: true}
	index := map[string]int{}
	for _, p := range points {
		i, ok := index[p.policy]
		if !ok {
			i = len(decision.Series)
			index[p.policy] = i
			decision.Series = append(decision.Series, chart.Series{Name: p.policy})
			rss.Series = append(rss.Series, chart.Series{Name: p.policy})
		}
		x := float64(p.cards)
		decision.Series[i].Points = append(decision.Series[i].Points, chart.Point{X: x, Y: p.usPerDecision})
		rss.Series[i].Points = append(rss.Series[i].Points, chart.Point{X: x, Y: p.rssGiB})
	}
	for _, c := range []struct {
		file  string
		chart chart.Line
	}{{"scaling-decision.svg", decision}, {"scaling-rss.svg", rss}} {
		svg, err := c.chart.SVG()
		if err != nil {
			return fmt.Errorf("draw %s: %w", c.file, err)
		}
		if err := os.WriteFile(filepath.Join(dir, c.file), svg, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// tableHeader is the header of the table main prints, which readTable
// looks for.
const tableHeader = "| policy | trays | cards | requests | accepted | µs per decision | simulation s | whole command s | peak RSS |"

// readTable reads the points of the first table in path whose header is
// tableHeader: the rows after it, up to the first line that is not a row.
func readTable(path string) ([]point, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	lines := strings.Split(string(data), "\n")
	start := slices.IndexFunc(lines, func(l string) bool { return strings.TrimSpace(l) == tableHeader })
	if start < 0 {
		return nil, fmt.Errorf("%s: no table headed %q", path, tableHeader)
	}
	var points []point
	for n, l := range lines[start+2:] {
		l = strings.TrimSpace(l)
		if !strings.HasPrefix(l, "|") {
			break
		}
		p, err := parseRow(l)
		if err != nil {
			return nil, fmt.Errorf("%s:%d: %w", path, start+3+n, err)
		}
		points = append(points, p)
	}
	if len(points) == 0 {
		return nil, fmt.Errorf("%s: the table has no rows", path)
	}
	return points, nil
}

// parseRow reads one row of the table, as main prints it or with
// thousands separators.
func parseRow(row string) (point, error) {
	cells := strings.Split(strings.Trim(row, "|"), "|")
	if len(cells) != 9 {
		return point{}, fmt.Errorf("%d cells, want 9: %s", len(cells), row)
	}
	for i := range cells {
		cells[i] = strings.ReplaceAll(strings.TrimSpace(cells[i]), ",", "")
	}
	var p point
	var err error
	num := func(s string) float64 {
		v, e := strconv.ParseFloat(s, 64)
		if e != nil && err == nil {
			err = fmt.Errorf("bad number %q in %s", s, row)
		}
		return v
	}
	p.policy = cells[0]
	p.trays = int(num(cells[1]))
	p.cards = int(num(cells[2]))
	p.requests = int(num(cells[3]))
	p.accepted = int(math.Round(num(strings.TrimSuffix(cells[4], "%")) / 100 * float64(p.requests)))
	p.usPerDecision = num(cells[5])
	p.wall = num(cells[6])
	p.total = num(cells[7])
	p.rssGiB = num(strings.TrimSuffix(cells[8], " GiB"))
	if err == nil && (p.policy == "" || p.cards <= 0) {
		err = fmt.Errorf("no policy or no cards in %s", row)
	}
	return p, err
}

// run simulates one point in its own process.
func run(rp, work, policy string, trays int) point {
	p := point{trays: trays, cards: trays * cardsPerTray, policy: policy, requests: requestsPerTray * trays}
	name := fmt.Sprintf("%s-%d", policy, trays)
	scenario := filepath.Join(work, name+".yaml")
	src := fmt.Sprintf(`name: %s
seed: 1
architecture: pod
network: monet
policy: %s
trays: %d
cards_per_tray: %d
planes: 8
card_cores: 4
memory_node_gb: 16
memory_block_gb: 4
workload:
  kind: monet
  requests: %d
  load: %g
  hold_step: 0
`, name, policy, trays, cardsPerTray, p.requests, fullLoad*float64(trays)/4096)
	if err := os.WriteFile(scenario, []byte(src), 0o644); err != nil {
		childproc.Fatal(err)
	}
	dir := filepath.Join(work, name)
	cmd := childproc.Command(rp, "sim", "--quiet", "--scenario", scenario, "--out", dir)
	cmd.Stderr = os.Stderr
	t0 := time.Now()
	if err := cmd.Run(); err != nil {
		childproc.Fatalf("%s: %v", name, err)
	}
	p.total = time.Since(t0).Seconds()
	if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
		p.rssGiB = float64(ru.Maxrss<<10) / (1 << 30) // kilobytes on Linux
	}
	data, err := os.ReadFile(filepath.Join(dir, "summary.json"))
	if err != nil {
		childproc.Fatal(err)
	}
	var s struct {
		Accepted    int     `json:"accepted"`
		WallSeconds float64 `json:"wall_seconds"`
	}
	if err := json.Unmarshal(data, &s); err != nil {
		childproc.Fatal(err)
	}
	p.accepted, p.wall = s.Accepted, s.WallSeconds
	p.usPerDecision = 1e6 * p.wall / float64(p.requests)
	if p.accepted == 0 || p.accepted > p.requests || p.wall <= 0 {
		childproc.Fatalf("%s: implausible result: %d of %d accepted in %v s", name, p.accepted, p.requests, p.wall)
	}
	return p
}
