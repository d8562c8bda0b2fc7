// Command cache reproduces P0 §9 (Fig. 9 and Fig. 10) on loopback: the
// memcached victim-cache experiment, with rackpool's cache (local LRU,
// evicted items appended to a log in pooled memory leased from a memnode)
// side by side with plain memcached and memcached with extstore at the
// same local memory.
//
// For every value size and local fraction it starts the server, preloads
// the whole key space, then runs 100,000 operations (95% get, 5% set,
// uniform keys) with 1 client thread (GET latency, Fig. 9) and with 10
// (throughput, Fig. 10), and reports each system's penalty against itself
// at 100% local. It also measures the raw loopback TCP round trip of a
// 4 KB exchange and a 4 KB read of pooled memory through the memnode
// client. The load generator speaks the memcached text protocol itself,
// one connection per client thread, no pipelining.
//
//	go build -o build/rackpool ./cmd/rackpool
//	go run ./bench/cache -bin build/rackpool -out build/bench-cache
//	go run ./bench/cache -quick            # smoke run, < 30 s
//	go run ./bench/cache -replot OUT/results.json   # redraw OUT/penalty.svg only
//
// Outputs in -out: results.json, results.csv, penalty.svg (drawn with
// gonum/plot), logs/; the Markdown report goes to stdout.
package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"math"
	mrand "math/rand/v2"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"rackpool/api"
	"rackpool/internal/childproc"
	"rackpool/internal/memlease"
	"rackpool/internal/units"
)

// Systems under test.
const (
	sysRackpool  = "rackpool"
	sysMapped    = "rackpool-mapped" // the remote tier on a mapped lease
	sysMemcached = "memcached"
	sysExtstore  = "extstore"
)

// mapHost is the topology host the mapped tier's lease is for: the bench's
// memnode maps leases for it (the cache runs on the node's machine).
const mapHost = "host1"

// isRackpool reports whether sys is a rackpool cache (either remote tier).
func isRackpool(sys string) bool { return sys == sysRackpool || sys == sysMapped }

type config struct {
	Bin         string   `json:"bin"`
	Memcached   string   `json:"memcached"`
	Ops         int      `json:"ops"`
	Sizes       []int    `json:"sizes"`
	Fractions   []int    `json:"fractions_pct"`
	Threads     []int    `json:"threads"`
	Dataset     int64    `json:"dataset_bytes"`
	Systems     []string `json:"systems"`
	GetRatio    float64  `json:"get_ratio"`
	Seed        uint64   `json:"seed"`
	VerifyEvery int      `json:"verify_every"`
	RunTimeout  string   `json:"run_timeout"`
	RTTIters    int      `json:"rtt_iters"`
	MCThreads   int      `json:"memcached_threads"`
	Quick       bool     `json:"quick"`
	Profile     bool     `json:"profile,omitempty"`
	PreloadRate float64  `json:"preload_rate_bytes_per_sec"`

	out        string
	runTimeout time.Duration
	maxTime    time.Duration
}

func main() {
	if len(os.Args) == 2 && os.Args[1] == "-echo-server" {
		fmt.Fprintln(os.Stderr, runEchoServer())
		os.Exit(1)
	}
	if len(os.Args) >= 2 && os.Args[1] == "-cache-server" {
		if err := runCacheServer(os.Args[2:]); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		return
	}
	var cfg config
	var sizes, fractions, threads, dataset, systems string
	flag.StringVar(&cfg.Bin, "bin", "build/rackpool", "rackpool binary (serve, memnode and cache are started from it)")
	flag.StringVar(&cfg.Memcached, "memcached", "memcached", "memcached binary (1.6 with extstore)")
	flag.IntVar(&cfg.Ops, "ops", 100000, "operations per measured run (split over the client threads)")
	flag.StringVar(&sizes, "sizes", "4KiB,16KiB,64KiB,128KiB,512KiB", "value sizes")
	flag.StringVar(&fractions, "fractions", "100,75,50,25", "local memory as a percentage of the data set (100 is the baseline)")
	flag.StringVar(&threads, "threads", "1,10", "client thread counts (1: latency, Fig. 9; the largest: throughput, Fig. 10)")
	flag.StringVar(&dataset, "dataset", "256MiB", "total value bytes of the key space (keys = dataset / value size)")
	flag.StringVar(&systems, "systems", "rackpool,memcached,extstore", "systems to run: rackpool, memcached, extstore")
	flag.StringVar(&cfg.out, "out", "build/bench-cache", "output directory")
	flag.BoolVar(&cfg.Quick, "quick", false, "smoke run: 400 ops, 8 MiB, 4 KiB and 64 KiB, 100% and 50% local (< 30 s)")
	flag.Float64Var(&cfg.GetRatio, "get-ratio", 0.95, "fraction of operations that are gets")
	flag.Uint64Var(&cfg.Seed, "seed", 1, "random seed (the same operation sequence for every system)")
	flag.IntVar(&cfg.VerifyEvery, "verify-every", 10, "check the bytes of every Nth GET hit (1: all)")
	flag.DurationVar(&cfg.runTimeout, "run-timeout", 120*time.Second, "wall-time cap of one measured run")
	flag.DurationVar(&cfg.maxTime, "max-time", 0, "wall-time cap of the whole benchmark; configurations not started by then are skipped (0: none)")
	flag.IntVar(&cfg.RTTIters, "rtt-iters", 20000, "iterations of the raw RTT and remote-read measurements")
	flag.IntVar(&cfg.MCThreads, "memcached-threads", 4, "memcached -t")
	var preloadMB float64
	flag.Float64Var(&preloadMB, "preload-rate", 128, "preload pace in MiB/s, the same for every system (0: as fast as the server takes it)")
	replot := flag.String("replot", "", "redraw penalty.svg from this results.json into -out (default: its directory) and exit; runs nothing")
	flag.BoolVar(&cfg.Profile, "profile", false, "serve rackpool's cache from this program (same internal/cache and memory client as `rackpool cache`) under a CPU profile, written to OUT/profiles/")
	flag.Parse()
	if *replot != "" {
		out := filepath.Dir(*replot)
		flag.Visit(func(f *flag.Flag) {
			if f.Name == "out" {
				out = cfg.out
			}
		})
		if err := replotPenalty(*replot, out); err != nil {
			fatal(err)
		}
		return
	}
	if cfg.Quick {
		set := map[string]bool{}
		flag.Visit(func(f *flag.Flag) { set[f.Name] = true })
		def := func(name string, p *string, v string) {
			if !set[name] {
				*p = v
			}
		}
		def("sizes", &sizes, "4KiB,64KiB")
		def("fractions", &fractions, "100,50")
		def("dataset", &dataset, "8MiB")
		if !set["ops"] {
			cfg.Ops = 400
		}
		if !set["rtt-iters"] {
			cfg.RTTIters = 2000
		}
		if !set["run-timeout"] {
			cfg.runTimeout = 5 * time.Second
		}
		if !set["verify-every"] {
			cfg.VerifyEvery = 1
		}
	}
	var err error
	if cfg.Sizes, err = parseSizes(sizes); err != nil {
		fatal(err)
	}
	for _, f := range strings.Split(fractions, ",") {
		n, err := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(f), "%"))
		if err != nil || n <= 0 || n > 100 {
			fatal(fmt.Errorf("-fractions: bad percentage %q", f))
		}
		cfg.Fractions = append(cfg.Fractions, n)
	}
	slices.Sort(cfg.Fractions)
	slices.Reverse(cfg.Fractions)
	cfg.Fractions = slices.Compact(cfg.Fractions)
	if cfg.Fractions[0] != 100 {
		cfg.Fractions = append([]int{100}, cfg.Fractions...) // the baseline of every penalty
	}
	for _, t := range strings.Split(threads, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(t))
		if err != nil || n <= 0 || n > 1000 {
			fatal(fmt.Errorf("-threads: bad count %q", t))
		}
		cfg.Threads = append(cfg.Threads, n)
	}
	ds, err := units.ParsePositive(dataset)
	if err != nil {
		fatal(fmt.Errorf("-dataset: %w", err))
	}
	cfg.Dataset = int64(ds)
	for _, s := range strings.Split(systems, ",") {
		s = strings.TrimSpace(s)
		switch s {
		case sysRackpool, sysMapped, sysMemcached, sysExtstore:
			cfg.Systems = append(cfg.Systems, s)
		default:
			fatal(fmt.Errorf("-systems: unknown system %q", s))
		}
	}
	if cfg.Ops <= 0 || cfg.GetRatio < 0 || cfg.GetRatio > 1 || cfg.VerifyEvery <= 0 {
		fatal(errors.New("-ops and -verify-every must be positive, -get-ratio in [0,1]"))
	}
	cfg.RunTimeout = cfg.runTimeout.String()
	cfg.PreloadRate = preloadMB * (1 << 20)

	defer func() {
		// A panic still stops the servers and removes the temporary files.
		if p := recover(); p != nil {
			stopAll()
			cleanupTemp()
			panic(p)
		}
	}()
	code := 0
	if err := run(&cfg); err != nil {
		fmt.Fprintln(os.Stderr, "bench/cache:", err)
		code = 1
	}
	stopAll()
	cleanupTemp()
	os.Exit(code)
}

func fatal(err error) {
	fmt.Fprintln(os.Stderr, "bench/cache:", err)
	os.Exit(2)
}

var (
	tempMu  sync.Mutex
	tempDir string
)

func cleanupTemp() {
	tempMu.Lock()
	defer tempMu.Unlock()
	if tempDir != "" {
		os.RemoveAll(tempDir)
		tempDir = ""
	}
}

func parseSizes(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := units.ParsePositive(f)
		if err != nil {
			return nil, fmt.Errorf("-sizes: %w", err)
		}
		if n < 16 || n > 1<<20 {
			return nil, fmt.Errorf("-sizes: %s out of range (16 B to 1 MiB)", f)
		}
		out = append(out, int(n))
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}

// Result is one measured run: one system, value size, local fraction and
// client thread count.
type Result struct {
	System      string  `json:"system"`
	ValueBytes  int     `json:"value_bytes"`
	LocalPct    int     `json:"local_pct"`
	Threads     int     `json:"threads"`
	Keys        int     `json:"keys"`
	DataBytes   int64   `json:"data_bytes"`
	LocalBytes  int64   `json:"local_bytes"`
	RemoteBytes int64   `json:"remote_bytes,omitempty"` // rackpool: leased pooled memory; extstore: file size
	Ops         int     `json:"ops"`
	Gets        int     `json:"gets"`
	Sets        int     `json:"sets"`
	Hits        int     `json:"hits"`
	Misses      int     `json:"misses"`
	HitRatio    float64 `json:"hit_ratio"`
	GetErrors   int     `json:"get_errors"`
	SetErrors   int     `json:"set_errors"`
	Verified    int     `json:"verified"`
	Corrupt     int     `json:"corrupt"`
	Seconds     float64 `json:"seconds"`
	OpsPerSec   float64 `json:"ops_per_sec"`
	GetMeanUs   float64 `json:"get_mean_us"`
	GetP50Us    float64 `json:"get_p50_us"`
	GetP99Us    float64 `json:"get_p99_us"`
	SetMeanUs   float64 `json:"set_mean_us"`
	SetP99Us    float64 `json:"set_p99_us"`
	TimedOut    bool    `json:"timed_out,omitempty"`
	// CPU time per operation during the run, µs: the server process (the
	// cache or memcached), the memnode (rackpool with a remote tier) and
	// this load generator. With 2 cores, their sum bounds throughput.
	ServerCPUPerOp  float64 `json:"server_cpu_us_per_op"`
	MemnodeCPUPerOp float64 `json:"memnode_cpu_us_per_op,omitempty"`
	ClientCPUPerOp  float64 `json:"client_cpu_us_per_op"`
	PreloadSec      float64 `json:"preload_seconds"`
	PreloadErrs     int     `json:"preload_errors"`
	// Keys still missing after the preload and its repair passes.
	PreloadMissing int    `json:"preload_missing"`
	PreloadRepairs int    `json:"preload_repair_passes"`
	Error          string `json:"error,omitempty"`

	// Penalties against the same system, size and thread count at 100%
	// local; absent for the baseline itself or when it is missing.
	LatPenalty    *float64 `json:"latency_penalty,omitempty"`     // mean GET latency
	LatP50Penalty *float64 `json:"latency_p50_penalty,omitempty"` // p50
	LatP99Penalty *float64 `json:"latency_p99_penalty,omitempty"` // p99
	TputPenalty   *float64 `json:"throughput_penalty,omitempty"`

	Stats map[string]string `json:"server_stats,omitempty"`
}

// RemoteRatio is the remote 4 KB read's median round trip over the raw
// exchange's (24 B request, 4 KB reply) and over a 4 KB echo's, with every
// process placed on CPUs as Placement says.
type RemoteRatio struct {
	Placement string  `json:"placement"`
	OverRaw   float64 `json:"over_raw"`
	OverEcho  float64 `json:"over_echo"`
}

// RTT is one round-trip measurement.
type RTT struct {
	Name      string  `json:"name"`
	Placement string  `json:"placement"`
	Iters     int     `json:"iters"`
	MedianUs  float64 `json:"median_us"`
	MeanUs    float64 `json:"mean_us"`
	P99Us     float64 `json:"p99_us"`
}

// Report is results.json.
type Report struct {
	Date             string        `json:"date"`
	GoVersion        string        `json:"go_version"`
	CPUs             int           `json:"cpus"`
	MemcachedVersion string        `json:"memcached_version,omitempty"`
	Command          string        `json:"command"`
	Config           *config       `json:"config"`
	RTT              []RTT         `json:"rtt"`
	RemoteReadRatio  []RemoteRatio `json:"remote_read_ratio,omitempty"`
	Results          []Result      `json:"results"`
	Goals            []Goal        `json:"goals"`
	Elapsed          float64       `json:"elapsed_seconds"`
	Skipped          []string      `json:"skipped,omitempty"`
}

// controlPlane is the rackpool control plane and memnode shared by every
// rackpool cache run.
type controlPlane struct {
	url, password string
	ca            string // the service's own CA, which serve creates in its data directory
	mapSocket     string // the memnode's socket for mapped leases
	serve, node   *proc
}

// client is a Go client of the control plane that trusts its CA.
func (cp *controlPlane) client() (*api.Client, error) {
	hc, err := api.HTTPClient(cp.ca)
	if err != nil {
		return nil, err
	}
	ac := api.New(cp.url, "Administrator", cp.password)
	ac.HTTP = hc
	return ac, nil
}

func run(cfg *config) error {
	start := time.Now()
	if err := os.MkdirAll(filepath.Join(cfg.out, "logs"), 0o755); err != nil {
		return err
	}
	logDir := filepath.Join(cfg.out, "logs")
	td, err := os.MkdirTemp("", "bench-cache-")
	if err != nil {
		return err
	}
	tempMu.Lock()
	tempDir = td
	tempMu.Unlock()
	sigc := make(chan os.Signal, 1)
	signal.Notify(sigc, os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	go func() {
		s := <-sigc
		fmt.Fprintf(os.Stderr, "bench/cache: %v: stopping servers\n", s)
		stopAll()
		cleanupTemp()
		os.Exit(130)
	}()

	rep := &Report{Date: time.Now().UTC().Format(time.RFC3339), GoVersion: runtime.Version(), CPUs: runtime.NumCPU(),
		Command: strings.Join(append([]string{"bench/cache"}, os.Args[1:]...), " "), Config: cfg}
	useRP := slices.ContainsFunc(cfg.Systems, isRackpool)
	if slices.Contains(cfg.Systems, sysMemcached) || slices.Contains(cfg.Systems, sysExtstore) {
		out, err := childproc.Command(cfg.Memcached, "-V").Output()
		if err != nil {
			return fmt.Errorf("memcached (-memcached %s): %w", cfg.Memcached, err)
		}
		rep.MemcachedVersion = strings.TrimSpace(string(out))
	}

	var cp *controlPlane
	// -profile at 100% local only needs no control plane (nor the binary).
	if useRP && (!cfg.Profile || slices.Min(cfg.Fractions) < 100) {
		if _, err := os.Stat(cfg.Bin); err != nil {
			return fmt.Errorf("rackpool binary (-bin): %w; build it with go build -o build/rackpool ./cmd/rackpool", err)
		}
		maxSize := int64(slices.Max(cfg.Sizes))
		capacity := 4*cfg.Dataset + 64*maxSize + 128<<20
		if cp, err = startControlPlane(cfg, td, logDir, capacity); err != nil {
			return err
		}
	}

	// Round trips first, on a quiet machine.
	progress("round trips: raw loopback TCP and remote 4 KB read (%d iterations each)", cfg.RTTIters)
	if err := measureRTT(cfg, rep, cp, logDir); err != nil {
		return err
	}

	maxSize := slices.Max(cfg.Sizes)
	vals := newValues(cfg.Seed, maxSize)
	for _, size := range cfg.Sizes {
		for _, sys := range cfg.Systems {
			for _, frac := range cfg.Fractions {
				name := fmt.Sprintf("%s %s %d%%", sys, units.FormatBytes(int64(size)), frac)
				if cfg.maxTime > 0 && time.Since(start) > cfg.maxTime {
					rep.Skipped = append(rep.Skipped, name)
					continue
				}
				rs := runConfig(cfg, cp, td, logDir, vals, sys, size, frac)
				rep.Results = append(rep.Results, rs...)
			}
		}
	}
	computePenalties(rep.Results)
	rep.Goals = evaluateGoals(cfg, rep)
	rep.Elapsed = time.Since(start).Seconds()
	if err := writeOutputs(cfg, rep); err != nil {
		return err
	}
	printMarkdown(os.Stdout, cfg, rep)
	for _, r := range rep.Results {
		if r.Error != "" {
			return fmt.Errorf("%d run(s) failed; see results.json (first: %s %d B %d%% %d threads: %s)", countErrors(rep.Results), r.System, r.ValueBytes, r.LocalPct, r.Threads, r.Error)
		}
	}
	// A wrong value is a failure whatever the speed (the smoke run in
	// make test relies on it).
	for _, r := range rep.Results {
		if r.Corrupt > 0 {
			return fmt.Errorf("%s %d B %d%% %d threads: %d of %d checked values were wrong", r.System, r.ValueBytes, r.LocalPct, r.Threads, r.Corrupt, r.Verified)
		}
	}
	return nil
}

func countErrors(rs []Result) int {
	n := 0
	for _, r := range rs {
		if r.Error != "" {
			n++
		}
	}
	return n
}

func progress(format string, a ...any) {
	fmt.Fprintf(os.Stderr, "%s  "+format+"\n", append([]any{time.Now().Format("15:04:05")}, a...)...)
}

// startControlPlane starts `rackpool serve` and one `rackpool memnode`.
func startControlPlane(cfg *config, td, logDir string, capacity int64) (*controlPlane, error) {
	var pw [12]byte
	if _, err := rand.Read(pw[:]); err != nil {
		return nil, err
	}
	cp := &controlPlane{password: "Bench-" + hex.EncodeToString(pw[:]) + "-9x"}
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	cp.url = fmt.Sprintf("https://127.0.0.1:%d", port)
	data := filepath.Join(td, "control")
	cp.ca = filepath.Join(data, "tls", "ca.pem")
	progress("starting rackpool control plane on %s", cp.url)
	cp.serve, err = startProc("rackpool serve", filepath.Join(logDir, "serve.log"), []string{"RACKPOOL_ADMIN_PASSWORD=" + cp.password},
		cfg.Bin, "serve", "--addr", fmt.Sprintf("127.0.0.1:%d", port), "--data", data, "--fabric-time", "instant", "--log-level", "warn")
	if err != nil {
		return nil, err
	}
	if err := waitHTTP(cp.url+"/redfish/v1", cp.ca, cp.serve, 60*time.Second); err != nil {
		return nil, err
	}
	nport, err := freePort()
	if err != nil {
		return nil, err
	}
	capMiB := (capacity + 1<<20 - 1) >> 20
	progress("starting rackpool memnode on 127.0.0.1:%d (%d MiB)", nport, capMiB)
	cp.mapSocket = filepath.Join(td, "memnode.sock")
	cp.node, err = startProc("rackpool memnode", filepath.Join(logDir, "memnode.log"), cp.env(),
		cfg.Bin, "memnode", "--addr", fmt.Sprintf("127.0.0.1:%d", nport), "--capacity", fmt.Sprintf("%dMiB", capMiB),
		"--map-socket", cp.mapSocket, "--map-hosts", mapHost)
	if err != nil {
		return nil, err
	}
	if err := waitTCP(fmt.Sprintf("127.0.0.1:%d", nport), cp.node, 30*time.Second); err != nil {
		return nil, err
	}
	ac, err := cp.client()
	if err != nil {
		return nil, err
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		ns, err := ac.MemoryNodes(ctx)
		cancel()
		if err == nil {
			for _, n := range ns {
				if n.Online && n.CapacityBytes > 0 {
					return cp, nil
				}
			}
		}
		if !cp.node.running() {
			return nil, cp.node.exitError()
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("memnode did not register within 30 s (last error: %v); log %s:\n%s", err, cp.node.logPath, cp.node.logTail(15))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func (cp *controlPlane) env() []string {
	if cp == nil {
		return nil
	}
	return []string{"RACKPOOL_URL=" + cp.url, "RACKPOOL_USER=Administrator", "RACKPOOL_PASSWORD=" + cp.password, "RACKPOOL_CA_FILE=" + cp.ca}
}

// measureRTT times the raw loopback TCP round trip (to a separate echo
// process) and a 4 KB read of leased pooled memory through the memnode
// client.
func measureRTT(cfg *config, rep *Report, cp *controlPlane, logDir string) error {
	ep, addr, err := startEchoServer(logDir)
	if err != nil {
		return err
	}
	defer ep.stop()
	nc, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return err
	}
	defer nc.Close()
	shapes := []struct {
		name     string
		req, rep int
	}{
		{"raw TCP: 24 B request, 4 KiB reply (the shape of a remote read)", 16, 4096 + 12},
		{"raw TCP: 4 KiB echo (4 KiB each way)", 4096, 4096},
	}
	var names []string
	var fs []func() error
	for _, s := range shapes {
		msg := make([]byte, 8+s.req)
		putBE32(msg[0:4], uint32(s.req))
		putBE32(msg[4:8], uint32(s.rep))
		reply := make([]byte, s.rep)
		names = append(names, s.name)
		fs = append(fs, func() error {
			if _, err := nc.Write(msg); err != nil {
				return err
			}
			_, err := ioReadFull(nc, reply)
			return err
		})
	}
	pids := []int{os.Getpid(), ep.cmd.Process.Pid}
	if cp == nil {
		_, err := measurePlacements(cfg, rep, pids, names, fs)
		return err
	}
	pids = append(pids, cp.node.cmd.Process.Pid)
	ctx := context.Background()
	ac, err := cp.client()
	if err != nil {
		return err
	}
	// One 1 MiB lease read over TCP, one mapped: each leased and reached
	// the way rackpool cache reaches its tier (memlease.Connect).
	buf := make([]byte, 4096)
	for i := range buf {
		buf[i] = byte(i * 7)
	}
	var gots [][]byte
	for _, r := range []struct {
		name string
		req  api.LeaseRequest
	}{
		{"remote 4 KiB read (memory.Client.Read via memnode)", api.LeaseRequest{Size: 1 << 20}},
		{"mapped 4 KiB read (memory.Mapping.Read: a copy)", api.LeaseRequest{Size: 1 << 20, Host: mapHost, Mapped: true}},
	} {
		lctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		l, err := ac.GetMemory(lctx, r.req)
		cancel()
		if err != nil {
			return fmt.Errorf("lease for the %s: %w", r.name, err)
		}
		defer func() {
			rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			defer cancel()
			_ = ac.ReleaseLease(rctx, l.ID)
		}()
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		reg, err := memlease.Connect(cctx, l, r.req.Mapped)
		cancel()
		if err != nil {
			return err
		}
		defer reg.Close()
		if err := reg.Write(ctx, 0, buf); err != nil {
			return fmt.Errorf("write for the %s: %w", r.name, err)
		}
		got := make([]byte, 4096)
		gots = append(gots, got)
		names = append(names, r.name)
		fs = append(fs, func() error { return reg.Read(ctx, 0, got) })
	}
	ratios, err := measurePlacements(cfg, rep, pids, names, fs)
	if err != nil {
		return err
	}
	for _, got := range gots {
		if string(got) != string(buf) {
			return errors.New("remote read returned other bytes than were written")
		}
	}
	rep.RemoteReadRatio = ratios
	return nil
}

// measurePlacements times fs (raw exchange, echo and, if present, the remote
// read) once per CPU placement and returns, per placement, the remote read's
// median over the raw exchange's and the echo's.
//
// On a VM a round trip between processes on different CPUs costs a
// cross-CPU wake-up, one on the same CPU a context switch; which of the two a
// run gets depends on where the scheduler happens to put the processes, and
// moves the medians by several times between runs. So the placement is
// fixed: first every process on the last CPU ("same CPU", the cheapest round
// trip, the floor), then the benchmark on CPU 0 and the servers on the last
// ("across CPUs"). Without taskset or with one CPU it measures once, unpinned.
func measurePlacements(cfg *config, rep *Report, pids []int, names []string, fs []func() error) ([]RemoteRatio, error) {
	placements := []string{"same CPU", "across CPUs"}
	if runtime.NumCPU() < 2 {
		placements = []string{"unpinned"}
	} else if _, err := exec.LookPath("taskset"); err != nil {
		placements = []string{"unpinned"}
	}
	var ratios []RemoteRatio
	for _, pl := range placements {
		if pl != "unpinned" {
			unpin, err := pin(pids, pl == "same CPU")
			if err != nil {
				return nil, err
			}
			defer unpin()
		}
		rtts, err := timeInterleaved(names, cfg.RTTIters, fs)
		if err != nil {
			return nil, err
		}
		for i := range rtts {
			rtts[i].Placement = pl
		}
		rep.RTT = append(rep.RTT, rtts...)
		if len(rtts) >= 3 {
			ratios = append(ratios, RemoteRatio{Placement: pl,
				OverRaw: rtts[2].MedianUs / rtts[0].MedianUs, OverEcho: rtts[2].MedianUs / rtts[1].MedianUs})
		}
	}
	return ratios, nil
}

func putBE32(b []byte, v uint32) {
	b[0], b[1], b[2], b[3] = byte(v>>24), byte(v>>16), byte(v>>8), byte(v)
}

// pin pins pids (with all their threads) to CPUs with taskset: all to the
// last CPU if same, else pids[0] to CPU 0 and the rest to the last. The
// returned function lets them run on every CPU again.
func pin(pids []int, same bool) (func(), error) {
	n := runtime.NumCPU()
	set := func(pid int, cpus string) error {
		out, err := childproc.Command("taskset", "-a", "-cp", cpus, strconv.Itoa(pid)).CombinedOutput()
		if err != nil {
			return fmt.Errorf("taskset -a -cp %s %d: %v: %s", cpus, pid, err, out)
		}
		return nil
	}
	unpin := func() {
		for _, pid := range pids {
			_ = set(pid, fmt.Sprintf("0-%d", n-1))
		}
	}
	last := strconv.Itoa(n - 1)
	for i, pid := range pids {
		cpu := last
		if i == 0 && !same {
			cpu = "0"
		}
		if err := set(pid, cpu); err != nil {
			unpin()
			return nil, err
		}
	}
	return unpin, nil
}

// timeInterleaved times each of fs iters times. The calls alternate in
// rounds of 100 (after a warm-up of iters/10 calls each), so that the
// machine's drift over the measurement (frequency, noisy neighbours) falls on
// every measurement alike and their ratios stay fair.
func timeInterleaved(names []string, iters int, fs []func() error) ([]RTT, error) {
	const round = 100
	for i, f := range fs {
		for range max(iters/10, 10) {
			if err := f(); err != nil {
				return nil, fmt.Errorf("%s: %w", names[i], err)
			}
		}
	}
	lats := make([][]int64, len(fs))
	for done := 0; done < iters; done += round {
		n := min(round, iters-done)
		for i, f := range fs {
			for range n {
				t0 := time.Now()
				if err := f(); err != nil {
					return nil, fmt.Errorf("%s: %w", names[i], err)
				}
				lats[i] = append(lats[i], int64(time.Since(t0)))
			}
		}
	}
	out := make([]RTT, len(fs))
	for i, lat := range lats {
		mean, p50, p99 := summarize(lat)
		out[i] = RTT{Name: names[i], Iters: iters, MedianUs: p50, MeanUs: mean, P99Us: p99}
	}
	return out, nil
}

// summarize returns mean, p50 and p99 in microseconds (sorts lat).
func summarize(lat []int64) (mean, p50, p99 float64) {
	if len(lat) == 0 {
		return 0, 0, 0
	}
	slices.Sort(lat)
	var sum float64
	for _, v := range lat {
		sum += float64(v)
	}
	q := func(p float64) float64 {
		i := int(math.Ceil(p*float64(len(lat)))) - 1
		return float64(lat[max(0, min(i, len(lat)-1))]) / 1e3
	}
	return sum / float64(len(lat)) / 1e3, q(0.50), q(0.99)
}

// server is one running system under test.
type server struct {
	addr        string
	procs       []*proc
	localBytes  int64
	remoteBytes int64
}

func (s *server) stop() {
	for i := len(s.procs) - 1; i >= 0; i-- {
		s.procs[i].stop()
	}
}

// sizing returns the local memory (whole MiB) for a fraction of the data
// set; 100% gets room for everything (per-item overheads included).
func sizing(data int64, frac int) int64 {
	if frac >= 100 {
		return (data*3/2 + 32<<20 + 1<<20 - 1) >> 20 << 20
	}
	return max(1, (data*int64(frac)/100+1<<19)>>20) << 20
}

// startServer starts system sys sized for one configuration.
func startServer(cfg *config, cp *controlPlane, td, logDir, sys string, size, frac, keys int) (*server, error) {
	data := int64(size) * int64(keys)
	s := &server{localBytes: sizing(data, frac)}
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	s.addr = fmt.Sprintf("127.0.0.1:%d", port)
	logPath := filepath.Join(logDir, fmt.Sprintf("%s-%d-%d.log", sys, size, frac))
	var p *proc
	switch sys {
	case sysRackpool, sysMapped:
		args := []string{"cache", "--addr", s.addr, "--local-memory", fmt.Sprintf("%dMiB", s.localBytes>>20), "--max-item-size", "2MiB"}
		if frac < 100 {
			// Twice the data set, as extstore's file, and room for many
			// records of the largest size.
			s.remoteBytes = max(2*data, 64*int64(size), 32<<20)
			s.remoteBytes = (s.remoteBytes + 1<<20 - 1) >> 20 << 20
			args = append(args, "--remote-memory", fmt.Sprintf("%dMiB", s.remoteBytes>>20), "--control", cp.url)
			if sys == sysMapped {
				args = append(args, "--remote-tier", "mapped", "--host", mapHost)
			}
		}
		if cfg.Profile {
			self, xerr := os.Executable()
			if xerr != nil {
				return nil, xerr
			}
			if xerr := os.MkdirAll(filepath.Join(cfg.out, "profiles"), 0o755); xerr != nil {
				return nil, xerr
			}
			pargs := []string{"-cache-server", "-addr", s.addr, "-local", strconv.FormatInt(s.localBytes, 10),
				"-cpuprofile", profilePrefix(cfg, size, frac)}
			if frac < 100 {
				pargs = append(pargs, "-remote", strconv.FormatInt(s.remoteBytes, 10), "-control", cp.url)
				if sys == sysMapped {
					pargs = append(pargs, "-mapped", "-host", mapHost)
				}
			}
			p, err = startProc("rackpool cache (profiled)", logPath, cp.env(), self, pargs...)
		} else {
			p, err = startProc("rackpool cache", logPath, cp.env(), cfg.Bin, args...)
		}
	case sysMemcached, sysExtstore:
		args := []string{"-l", "127.0.0.1", "-p", strconv.Itoa(port), "-U", "0", "-m", strconv.FormatInt(s.localBytes>>20, 10),
			"-I", "2m", "-t", strconv.Itoa(cfg.MCThreads), "-c", "4096"}
		if os.Geteuid() == 0 {
			args = append(args, "-u", "root")
		}
		if sys == sysExtstore {
			// Storage for the whole data set twice over, in 8 MiB pages,
			// tuned for large items as memcached's wiki advises (write
			// buffers, IO threads, short background sleeps, free memory
			// kept for flushing, no recache).
			extMiB := max(64, (2*data+1<<20-1)>>20)
			extMiB = (extMiB + 7) / 8 * 8
			s.remoteBytes = extMiB << 20
			path := filepath.Join(td, fmt.Sprintf("extstore-%d-%d", size, frac))
			args = append(args, "-o", fmt.Sprintf("ext_page_size=8,ext_wbuf_size=8,ext_threads=2,ext_max_sleep=10000,slab_automove_freeratio=0.10,ext_recache_rate=0,ext_path=%s:%dm", path, extMiB))
		}
		p, err = startProc(sys, logPath, nil, cfg.Memcached, args...)
	}
	if err != nil {
		return nil, err
	}
	s.procs = append(s.procs, p)
	if err := waitTCP(s.addr, p, 60*time.Second); err != nil {
		s.stop()
		return nil, err
	}
	return s, nil
}

// runConfig starts one server, preloads it and runs every thread count.
func runConfig(cfg *config, cp *controlPlane, td, logDir string, vals *values, sys string, size, frac int) []Result {
	keys := max(16, int(cfg.Dataset/int64(size)))
	base := Result{System: sys, ValueBytes: size, LocalPct: frac, Keys: keys, DataBytes: int64(keys) * int64(size)}
	fail := func(err error) []Result {
		var rs []Result
		for _, t := range cfg.Threads {
			r := base
			r.Threads = t
			r.Error = err.Error()
			rs = append(rs, r)
		}
		progress("  FAILED: %v", err)
		return rs
	}
	progress("%s, %s values, %d keys, %d%% local: starting", sys, units.FormatBytes(int64(size)), keys, frac)
	srv, err := startServer(cfg, cp, td, logDir, sys, size, frac, keys)
	if err != nil {
		return fail(err)
	}
	defer srv.stop()
	base.LocalBytes, base.RemoteBytes = srv.localBytes, srv.remoteBytes
	names := make([]string, keys)
	for i := range names {
		names[i] = keyName(i)
	}
	t0 := time.Now()
	perrs, missing, passes, err := preload(srv.addr, vals, names, size, cfg.PreloadRate)
	if err != nil {
		return fail(fmt.Errorf("preload: %w", err))
	}
	base.PreloadSec, base.PreloadErrs, base.PreloadMissing, base.PreloadRepairs = time.Since(t0).Seconds(), perrs, missing, passes
	progress("  preloaded in %.1f s: %d keys missing after %d repair pass(es), %d refused sets", base.PreloadSec, missing, passes, perrs)
	time.Sleep(300 * time.Millisecond) // let background flushers (extstore) settle
	var rs []Result
	profiled := cfg.Profile && isRackpool(sys)
	for n, t := range cfg.Threads {
		r := base
		r.Threads = t
		if profiled {
			_ = srv.procs[0].cmd.Process.Signal(syscall.SIGUSR1)
			time.Sleep(50 * time.Millisecond)
		}
		var pids []int
		for _, p := range srv.procs {
			pids = append(pids, p.cmd.Process.Pid)
		}
		if isRackpool(sys) && frac < 100 && cp != nil {
			pids = append(pids, cp.node.cmd.Process.Pid)
		}
		srvCPU0, cli0 := procsCPU(pids), selfCPU()
		measure(cfg, &r, srv.addr, vals, names, size)
		if r.Ops > 0 {
			srvCPU1, cli1 := procsCPU(pids), selfCPU()
			r.ServerCPUPerOp = float64(srvCPU1[0]-srvCPU0[0]) / 1e3 / float64(r.Ops)
			if len(pids) > 1 {
				r.MemnodeCPUPerOp = float64(srvCPU1[1]-srvCPU0[1]) / 1e3 / float64(r.Ops)
			}
			r.ClientCPUPerOp = float64(cli1-cli0) / 1e3 / float64(r.Ops)
		}
		if profiled {
			_ = srv.procs[0].cmd.Process.Signal(syscall.SIGUSR2)
			time.Sleep(100 * time.Millisecond)
			_ = os.Rename(fmt.Sprintf("%s-%d.pprof", profilePrefix(cfg, size, frac), n+1), fmt.Sprintf("%s-t%d.pprof", profilePrefix(cfg, size, frac), t))
		}
		progress("  %d thread(s): %.0f ops/s, GET mean %.1f µs p50 %.1f p99 %.1f, hits %.2f%%, verified %d corrupt %d, CPU µs/op server %.1f memnode %.1f client %.1f%s",
			t, r.OpsPerSec, r.GetMeanUs, r.GetP50Us, r.GetP99Us, 100*r.HitRatio, r.Verified, r.Corrupt, r.ServerCPUPerOp, r.MemnodeCPUPerOp, r.ClientCPUPerOp, errNote(r.Error))
		rs = append(rs, r)
	}
	if c, err := dialMC(srv.addr); err == nil {
		st, _ := c.stats()
		c.close()
		keep := map[string]string{}
		for k, v := range st {
			if strings.Contains(k, "extstore") || strings.Contains(k, "remote") || strings.Contains(k, "evict") ||
				slices.Contains([]string{"curr_items", "get_hits", "get_misses", "bytes", "limit_maxbytes", "cmd_get", "cmd_set", "rusage_user", "rusage_system"}, k) {
				keep[k] = v
			}
		}
		for i := range rs {
			rs[i].Stats = keep
		}
	}
	if !srv.procs[0].running() {
		for i := range rs {
			if rs[i].Error == "" {
				rs[i].Error = srv.procs[0].exitError().Error()
			}
		}
	}
	return rs
}

func errNote(e string) string {
	if e == "" {
		return ""
	}
	return " ERROR " + e
}

// preload stores every key over two connections at no more than rate
// bytes/s (0: unpaced); a refused set is retried a few times (extstore may
// refuse while it flushes). Then it repairs: it reads every key back and
// stores the missing ones again, pass after pass while that still brings
// items back (extstore evicts items its background flusher had not written
// yet when the writes come faster than it flushes; plain memcached cannot
// hold them at all, so one pass finds nothing to gain). It returns the
// refused sets, the keys still missing and the number of repair passes.
func preload(addr string, vals *values, names []string, size int, rate float64) (refusedN, missing, passes int, err error) {
	const conns = 2
	start := time.Now()
	var sent atomic.Int64
	pace := func(n int) {
		if rate <= 0 {
			return
		}
		total := sent.Add(int64(n))
		due := start.Add(time.Duration(float64(total) / rate * float64(time.Second)))
		if d := time.Until(due); d > 0 {
			time.Sleep(d)
		}
	}
	// each runs f(conn, keys c, c+conns, ...) on every connection.
	each := func(keys []int, f func(m *mcConn, buf []byte, i int) error) error {
		var wg sync.WaitGroup
		errs := make([]error, conns)
		for c := range conns {
			wg.Add(1)
			go func() {
				defer wg.Done()
				m, err := dialMC(addr)
				if err != nil {
					errs[c] = err
					return
				}
				defer m.close()
				buf := make([]byte, size)
				for j := c; j < len(keys); j += conns {
					if err := f(m, buf, keys[j]); err != nil {
						errs[c] = err
						return
					}
				}
			}()
		}
		wg.Wait()
		return errors.Join(errs...)
	}
	var refused atomic.Int64
	store := func(m *mcConn, buf []byte, i int) error {
		vals.fill(buf, i)
		pace(size)
		for try := 0; ; try++ {
			err := m.set(names[i], buf)
			if err == nil {
				return nil
			}
			if !errors.Is(err, errServer) {
				return err
			}
			if try == 20 {
				refused.Add(1)
				return nil
			}
			time.Sleep(time.Millisecond)
		}
	}
	todo := make([]int, len(names))
	for i := range todo {
		todo[i] = i
	}
	if err := each(todo, store); err != nil {
		return int(refused.Load()), 0, 0, err
	}
	check := func() ([]int, error) {
		var mu sync.Mutex
		var miss []int
		err := each(todo, func(m *mcConn, _ []byte, i int) error {
			hit, _, err := m.get(names[i])
			if err != nil && !errors.Is(err, errServer) {
				return err
			}
			if !hit {
				mu.Lock()
				miss = append(miss, i)
				mu.Unlock()
			}
			return nil
		})
		slices.Sort(miss)
		return miss, err
	}
	miss, err := check()
	for err == nil && len(miss) > 0 && passes < 5 {
		passes++
		if err = each(miss, store); err != nil {
			break
		}
		var again []int
		if again, err = check(); err != nil {
			break
		}
		gained := len(miss) - len(again)
		miss = again
		if gained <= len(names)/200 {
			break
		}
	}
	return int(refused.Load()), len(miss), passes, err
}

// measure runs cfg.Ops operations over r.Threads connections.
func measure(cfg *config, r *Result, addr string, vals *values, names []string, size int) {
	threads := r.Threads
	per := cfg.Ops / threads
	conns := make([]*mcConn, threads)
	for i := range conns {
		c, err := dialMC(addr)
		if err != nil {
			r.Error = err.Error()
			for _, c := range conns[:i] {
				c.close()
			}
			return
		}
		conns[i] = c
	}
	defer func() {
		for _, c := range conns {
			c.close()
		}
	}()
	type wres struct {
		gets, sets, hits, misses, getErr, setErr, verified, corrupt, ops int
		getLat, setLat                                                   []int64
		err                                                              error
		timedOut                                                         bool
	}
	res := make([]wres, threads)
	startc := make(chan struct{})
	var wg sync.WaitGroup
	var deadline time.Time
	for w := range threads {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out := &res[w]
			out.getLat = make([]int64, 0, per)
			// The same sequence for every system: seeded by size and thread.
			rng := mrand.New(mrand.NewPCG(cfg.Seed, uint64(size)<<16|uint64(threads)<<8|uint64(w)))
			c := conns[w]
			setBuf := make([]byte, size)
			nkeys := len(names)
			<-startc
			for n := 0; n < per; n++ {
				if time.Now().After(deadline) {
					out.timedOut = true
					break
				}
				k := rng.IntN(nkeys)
				if rng.Float64() < cfg.GetRatio {
					t0 := time.Now()
					hit, v, err := c.get(names[k])
					d := time.Since(t0)
					out.gets++
					out.ops++
					if err != nil {
						out.getErr++
						if !errors.Is(err, errServer) {
							out.err = err
							return
						}
						continue
					}
					out.getLat = append(out.getLat, int64(d))
					if !hit {
						out.misses++
						continue
					}
					out.hits++
					if out.hits%cfg.VerifyEvery == 0 {
						out.verified++
						if !vals.check(v, k, size) {
							out.corrupt++
						}
					}
				} else {
					vals.fill(setBuf, k)
					t0 := time.Now()
					err := c.set(names[k], setBuf)
					d := time.Since(t0)
					out.sets++
					out.ops++
					if err != nil {
						out.setErr++
						if !errors.Is(err, errServer) {
							out.err = err
							return
						}
						continue
					}
					out.setLat = append(out.setLat, int64(d))
				}
			}
		}()
	}
	t0 := time.Now()
	deadline = t0.Add(cfg.runTimeout)
	close(startc)
	wg.Wait()
	elapsed := time.Since(t0)
	var getLat, setLat []int64
	var errs []error
	for _, w := range res {
		r.Gets += w.gets
		r.Sets += w.sets
		r.Hits += w.hits
		r.Misses += w.misses
		r.GetErrors += w.getErr
		r.SetErrors += w.setErr
		r.Verified += w.verified
		r.Corrupt += w.corrupt
		r.Ops += w.ops
		r.TimedOut = r.TimedOut || w.timedOut
		getLat = append(getLat, w.getLat...)
		setLat = append(setLat, w.setLat...)
		if w.err != nil {
			errs = append(errs, w.err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		r.Error = err.Error()
	}
	r.Seconds = elapsed.Seconds()
	r.OpsPerSec = float64(r.Ops) / r.Seconds
	if r.Hits+r.Misses > 0 {
		r.HitRatio = float64(r.Hits) / float64(r.Hits+r.Misses)
	}
	r.GetMeanUs, r.GetP50Us, r.GetP99Us = summarize(getLat)
	r.SetMeanUs, _, r.SetP99Us = summarize(setLat)
}

// computePenalties fills the penalties of every run against the same
// system, size and thread count at 100% local.
func computePenalties(rs []Result) {
	type key struct {
		sys           string
		size, threads int
	}
	base := map[key]*Result{}
	for i := range rs {
		if rs[i].LocalPct == 100 && rs[i].Error == "" {
			base[key{rs[i].System, rs[i].ValueBytes, rs[i].Threads}] = &rs[i]
		}
	}
	pen := func(v float64) *float64 { return &v }
	for i := range rs {
		r := &rs[i]
		b := base[key{r.System, r.ValueBytes, r.Threads}]
		if b == nil || r.LocalPct == 100 || r.Error != "" {
			continue
		}
		if b.GetMeanUs > 0 {
			r.LatPenalty = pen(r.GetMeanUs/b.GetMeanUs - 1)
			r.LatP50Penalty = pen(r.GetP50Us/b.GetP50Us - 1)
			r.LatP99Penalty = pen(r.GetP99Us/b.GetP99Us - 1)
		}
		if b.OpsPerSec > 0 {
			r.TputPenalty = pen(1 - r.OpsPerSec/b.OpsPerSec)
		}
	}
}

func writeJSON(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}

func profilePrefix(cfg *config, size, frac int) string {
	return filepath.Join(cfg.out, "profiles", fmt.Sprintf("cache-%d-%d", size, frac))
}

// procsCPU returns the user+system CPU time of each process in ns, from
// /proc/PID/stat (clock ticks of 10 ms; every thread counted).
func procsCPU(pids []int) []int64 {
	out := make([]int64, len(pids))
	for i, pid := range pids {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			continue
		}
		s := string(b)
		j := strings.LastIndexByte(s, ')')
		if j < 0 {
			continue
		}
		f := strings.Fields(s[j+1:])
		// Fields after the command: state is f[0]; utime and stime are
		// fields 14 and 15 of the line, f[11] and f[12] here.
		if len(f) < 13 {
			continue
		}
		ut, _ := strconv.ParseInt(f[11], 10, 64)
		st, _ := strconv.ParseInt(f[12], 10, 64)
		out[i] = (ut + st) * 1e7
	}
	return out
}

// selfCPU returns this process's user+system CPU time in ns.
func selfCPU() int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}
