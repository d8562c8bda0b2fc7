// Command slurm measures Slurm's power saving through rackpool
// (docs/slurm.md) on a real Slurm (slurmtest: Debian's slurmctld and
// slurmd on loopback) and a real rackpool serve of the example rack with
// --fabric-time instant. Cold: sbatch to the job running on a node that is
// powered down and not composed (rackpool composes a GPU onto its host and
// powers it on; Slurm waits for its slurmd), with rackpool's share of it,
// the resume program's own time. Warm: sbatch to the job running on the
// same node while it is still up and composed, the peer a statically
// configured node is: Slurm's scheduling alone.
//
// Then the GPU-hours that suspending compositions saves on a job trace
// replayed through the simulator (internal/sim, the placement engine at
// rack scale): jobs compose their GPUs when they start and release them
// when they end plus the suspend's idle time, against a static cluster
// whose nodes hold the GPUs of the trace's peak for the whole run (P0's
// utilisation argument; P1's elastic disaggregation).
//
//	go run ./bench/slurm [-cycles 3] [-jobs 2000] [-suspend-time 10m] [-bin FILE] [-out build/bench-slurm]
package main

import (
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	"rackpool/bench/internal/harness"
	"rackpool/internal/childproc"
	"rackpool/internal/schedule"
	"rackpool/internal/sim"
	"rackpool/internal/slurm/slurmtest"
)

const password = "bench-slurm-Passw0rd"

// tb is slurmtest's TB for a program: cleanups at exit, failures fatal.
type tb struct{}

func (tb) Helper()                           {}
func (tb) Cleanup(f func())                  { childproc.AtExit(f) }
func (tb) Fatalf(format string, args ...any) { childproc.Fatalf(format, args...) }
func (tb) Logf(format string, args ...any)   { fmt.Fprintf(os.Stderr, format+"\n", args...) }
func (tb) Failed() bool                      { return false }

func main() {
	defer childproc.RunAtExit()
	cycles := flag.Int("cycles", 3, "cold and warm starts measured (0: none, and no Slurm needed)")
	jobs := flag.Int("jobs", 2000, "jobs of the trace replayed through the simulator (0: none)")
	suspend := flag.Duration("suspend-time", 10*time.Minute, "idle time before a node is taken apart, in the trace replay")
	bin := flag.String("bin", "", "rackpool binary (default: built from ./cmd/rackpool)")
	out := flag.String("out", "build/bench-slurm", "report directory")
	flag.Parse()
	dir := harness.WorkDir("bench-slurm-")
	md := ""
	if *cycles > 0 {
		md = slurmStarts(dir, *bin, *cycles)
	}
	if *jobs > 0 {
		md += "\n" + replay(dir, *jobs, *suspend)
	}
	fmt.Print(md)
	if err := os.MkdirAll(*out, 0o755); err != nil {
		childproc.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(*out, "slurm.md"), []byte(md), 0o644); err != nil {
		childproc.Fatal(err)
	}
}

func report(rows ...[]time.Duration) string {
	names := []string{"cold: sbatch → running, node powered down and not composed",
		"  of which rackpool: the resume program (compose, power on)",
		"warm: sbatch → running, node up and composed (a static node)"}
	var b strings.Builder
	fmt.Fprintf(&b, "| what | n | p50 | max |\n|---|---|---|---|\n")
	for i, r := range rows {
		if len(r) == 0 {
			childproc.Fatalf("no samples for %q", names[i])
		}
		slices.Sort(r)
		fmt.Fprintf(&b, "| %s | %d | %v | %v |\n", names[i], len(r), harness.Percentile(r, 50).Round(time.Microsecond), r[len(r)-1].Round(time.Microsecond))
	}
	return b.String()
}

// replay writes a synthetic Slurm-like trace of n GPU jobs (seeded:
// Poisson arrivals every 10 min on average, 10 min to 4 h each, 1, 2 or 4
// GPUs), replays it through the simulator on two racks of 32 GPUs, and
// compares the GPU-hours compositions hold (in use, plus each job's idle
// tail before the suspend) with a static cluster holding the trace's peak
// of GPUs throughout.
func replay(dir string, n int, suspend time.Duration) string {
	rng := rand.New(rand.NewPCG(39, 1))
	path := filepath.Join(dir, "jobs.csv")
	var csv strings.Builder
	csv.WriteString("id,arrival,cores,ram_gb,hold,gpus\n")
	gpus := map[string]float64{}
	t := 0.0
	for i := range n {
		t += rng.ExpFloat64() * 600
		g := []int{1, 1, 1, 2, 2, 4}[rng.IntN(6)]
		id := fmt.Sprintf("job%d", i)
		gpus[id] = float64(g)
		fmt.Fprintf(&csv, "%s,%.1f,4,16,%.1f,%d\n", id, t, 600+rng.Float64()*(4*3600-600), g)
	}
	if err := os.WriteFile(path, []byte(csv.String()), 0o644); err != nil {
		childproc.Fatal(err)
	}
	c := sim.Defaults()
	c.Name, c.Architecture, c.Policy = "bench-slurm", sim.RackPools, schedule.FirstFit
	c.Racks, c.GPUsPerRack, c.NVMePerRack, c.CPUCardsPerRack = 2, 32, 0, 32
	c.MemoryNodesPerRack, c.SampleEvery = 8, 30
	c.Workload = sim.Workload{Kind: sim.WorkloadTrace, Trace: path}
	res, err := sim.Run(context.Background(), c, nil)
	if err != nil {
		childproc.Fatal(err)
	}
	var used, peak float64
	for i := 1; i < len(res.Samples); i++ {
		prev := res.Samples[i-1]
		used += prev.Used["gpus"] * (res.Samples[i].T - prev.T)
		peak = max(peak, prev.Used["gpus"])
	}
	span := res.Samples[len(res.Samples)-1].T - res.Samples[0].T
	tail := 0.0
	for _, id := range res.AcceptedIDs {
		tail += gpus[id] * suspend.Seconds()
	}
	held := used + tail
	static := peak * span
	var b strings.Builder
	fmt.Fprintf(&b, "Trace replay: %d jobs (%d accepted) over %.1f h through the simulator, suspend after %v idle:\n\n", n, res.Summary.Accepted, span/3600, suspend)
	fmt.Fprintf(&b, "| GPU-hours | value |\n|---|---|\n")
	fmt.Fprintf(&b, "| in use by jobs | %.0f |\n", used/3600)
	fmt.Fprintf(&b, "| held by compositions (in use + idle tails) | %.0f |\n", held/3600)
	fmt.Fprintf(&b, "| held by a static cluster of the peak (%.0f GPUs) | %.0f |\n", peak, static/3600)
	fmt.Fprintf(&b, "| saved by suspending compositions | %.1f%% |\n", 100*(1-held/static))
	fmt.Fprintf(&b, "| peak:average GPUs in use | %.2f:1 |\n", peak/(used/span))
	return b.String()
}

// slurmStarts measures cold and warm starts on a real Slurm (see the
// command's comment) and returns their table.
func slurmStarts(dir, bin string, cycles int) string {
	binary := harness.Binary(bin, dir)
	c, ca := harness.Serve(binary, dir, password, "--fabric-time", "instant")
	sc := slurmtest.Start(tb{}, slurmtest.Options{Binary: binary, URL: c.URL, User: c.User, Password: password, CAFile: ca,
		Nodes: [][2]string{{"n1", "host1"}}, SuspendTime: "15s", Templates: "  gpu1: {needs: [\"1 gpu\"]}\n"})

	running := func(id string) time.Duration {
		start := time.Now()
		sc.WaitFor("job "+id+" running", 120*time.Second, func() bool {
			st := sc.Job(id, "JobState")
			return st == "RUNNING" || st == "COMPLETED"
		})
		return time.Since(start)
	}
	composed := func() int {
		systems, err := c.Systems(context.Background())
		if err != nil {
			return -1
		}
		n := 0
		for _, s := range systems {
			if s.SystemType == "Composed" {
				n++
			}
		}
		return n
	}
	var cold, warm, share []time.Duration
	for i := range cycles {
		start := time.Now()
		id := sc.Sbatch("--constraint=gpu1", "--wrap", "true")
		running(id)
		cold = append(cold, time.Since(start))
		sc.WaitFor("job "+id+" done", 60*time.Second, func() bool { return sc.Job(id, "JobState") == "COMPLETED" })
		start = time.Now()
		id = sc.Sbatch("--constraint=gpu1", "--wrap", "true")
		running(id)
		warm = append(warm, time.Since(start))
		sc.WaitFor("the node taken apart", 120*time.Second, func() bool { return composed() == 0 })
		// and powered down for Slurm too (SuspendTimeout), so the next
		// cold start is one.
		sc.WaitFor("the node powered down", 120*time.Second, func() bool {
			st, _ := sc.Run("sinfo", "-h", "-n", "n1", "-o", "%t")
			return strings.TrimSpace(st) == "idle~"
		})
		fmt.Fprintf(os.Stderr, "cycle %d: cold %v, warm %v\n", i+1, cold[i].Round(time.Millisecond), warm[i].Round(time.Millisecond))
	}
	// rackpool's share: the resume program's own time, from its log.
	b, err := os.ReadFile(filepath.Join(sc.Dir(), "log", "power.log"))
	if err != nil {
		childproc.Fatal(err)
	}
	for _, m := range regexp.MustCompile(`msg="slurm: node resumed".* total=(\S+)`).FindAllStringSubmatch(string(b), -1) {
		if d, err := time.ParseDuration(m[1]); err == nil {
			share = append(share, d)
		}
	}
	return report(cold, share, warm)
}
