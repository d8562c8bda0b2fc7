// Command scaling measures how the placement engine's cost grows with the
// datacenter: `rackpool sim` on MONet pods (24 cards per tray, 8 planes,
// 16 GB memory cards in 4 GB blocks) from about 10^3 to 10^5 cards, at a
// fixed load per card (the P4-scale scenario's offered load, scaled with
// the tray count) and a fixed number of requests per card, for the
// rackpool (locality) policy and first-fit. Each point is a separate
// process, so its peak RSS is its own. It prints a Markdown table and
// writes two SVG charts (decision time and peak RSS against cards).
//
//	go run ./bench/scaling [-bin build/rackpool] [-out docs] [-trays 42,128,512,1024,2048,4096]
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"rackpool/internal/sim"
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
	trays, cards int
	policy       string
	requests     int
	accepted     int
	wall         float64 // the simulation's own seconds (no topology build)
	total        float64 // the whole command
	rssBytes     int64
}

func main() {
	bin := flag.String("bin", "", "rackpool binary (default: build one)")
	out := flag.String("out", "docs", "directory for scaling-decision.svg and scaling-rss.svg")
	traysFlag := flag.String("trays", "42,128,512,1024,2048,4096", "pod sizes in trays")
	policies := flag.String("policies", "rackpool,first-fit", "policies to measure")
	flag.Parse()
	work, err := os.MkdirTemp("", "rackpool-scaling")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(work)
	rp := *bin
	if rp == "" {
		rp = filepath.Join(work, "rackpool")
		if out, err := exec.Command("go", "build", "-o", rp, "./cmd/rackpool").CombinedOutput(); err != nil {
			log.Fatalf("go build: %v\n%s", err, out)
		}
	}
	var points []point
	fmt.Printf("# placement cost against pod size\n\n%s, %d CPUs\n\n", time.Now().UTC().Format("2006-01-02"), runtime.NumCPU())
	fmt.Println("| policy | trays | cards | requests | accepted | µs per decision | simulation s | whole command s | peak RSS |")
	fmt.Println("|---|---|---|---|---|---|---|---|---|")
	for _, pol := range strings.Split(*policies, ",") {
		for _, ts := range strings.Split(*traysFlag, ",") {
			trays, err := strconv.Atoi(strings.TrimSpace(ts))
			if err != nil || trays < 1 {
				log.Fatalf("bad tray count %q", ts)
			}
			p := run(rp, work, pol, trays)
			points = append(points, p)
			fmt.Printf("| %s | %d | %d | %d | %.2f%% | %.1f | %.2f | %.2f | %.2f GiB |\n", p.policy, p.trays, p.cards, p.requests,
				100*float64(p.accepted)/float64(p.requests), 1e6*p.wall/float64(p.requests), p.wall, p.total, float64(p.rssBytes)/(1<<30))
		}
	}
	decision := sim.LineChart{Title: "Placement cost against pod size (MONet, fixed load per card)",
		XLabel: "cards (log10)", YLabel: "µs per decision", YFromZero: true}
	rss := sim.LineChart{Title: "Peak memory of the whole run against pod size",
		XLabel: "cards (log10)", YLabel: "peak RSS (GiB)", YFromZero: true}
	for _, pol := range strings.Split(*policies, ",") {
		d, r := sim.ChartSeries{Name: pol}, sim.ChartSeries{Name: pol}
		for _, p := range points {
			if p.policy == pol {
				x := math.Log10(float64(p.cards))
				d.Points = append(d.Points, sim.ChartPoint{X: x, Y: 1e6 * p.wall / float64(p.requests)})
				r.Points = append(r.Points, sim.ChartPoint{X: x, Y: float64(p.rssBytes) / (1 << 30)})
			}
		}
		decision.Series = append(decision.Series, d)
		rss.Series = append(rss.Series, r)
	}
	for name, c := range map[string]sim.LineChart{"scaling-decision.svg": decision, "scaling-rss.svg": rss} {
		if err := os.WriteFile(filepath.Join(*out, name), []byte(c.SVG()), 0o644); err != nil {
			log.Fatal(err)
		}
	}
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
		log.Fatal(err)
	}
	dir := filepath.Join(work, name)
	cmd := exec.Command(rp, "sim", "--quiet", "--scenario", scenario, "--out", dir)
	cmd.Stderr = os.Stderr
	t0 := time.Now()
	if err := cmd.Run(); err != nil {
		log.Fatalf("%s: %v", name, err)
	}
	p.total = time.Since(t0).Seconds()
	if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
		p.rssBytes = ru.Maxrss << 10 // kilobytes on Linux
	}
	data, err := os.ReadFile(filepath.Join(dir, "summary.json"))
	if err != nil {
		log.Fatal(err)
	}
	var s struct {
		Accepted    int     `json:"accepted"`
		WallSeconds float64 `json:"wall_seconds"`
	}
	if err := json.Unmarshal(data, &s); err != nil {
		log.Fatal(err)
	}
	p.accepted, p.wall = s.Accepted, s.WallSeconds
	if p.accepted == 0 || p.accepted > p.requests || p.wall <= 0 {
		log.Fatalf("%s: implausible result: %d of %d accepted in %v s", name, p.accepted, p.requests, p.wall)
	}
	return p
}
