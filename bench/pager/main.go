// Command pager measures paging to pooled memory (internal/pager,
// docs/paging.md) the way the far-memory papers do: the slowdown of a
// memory-bound workload, a sort and a random-access table, at 100, 75, 50
// and 25% local memory, against the same workload on a plain Go slice
// (all local) and against the kernel paging the same slice to a swap file
// on disk under a memory cgroup limit of the same local fraction. The
// pager runs two ways: over TCP to the memnode, and from the lease mapped
// through the memnode's local socket (Options.MapSocket).
//
//	go run ./bench/pager [-size 64MiB] [-ops 100000] [-runs 3] [-out docs] [-swap=false]
//	    [-systems tcp,mapped,swap] [-fractions 100,75,50,25] [-workloads sort,table]
//	    [-grid-prefetch sort=8,table=1] [-prefetch 1,8,32|none]
//
// The memnode runs in its own process (this program started again), on
// loopback TCP and on a unix socket for mapped leases. Each point runs the
// three systems interleaved -runs times (their order rotating), and the
// tables give the best time and how much slower the worst was. The swap
// runs need root, a writable cgroup v1 memory controller and swapon;
// without them the swap column is left out and the reason printed. The
// program prints Markdown tables and writes paging-sort.svg and
// paging-table.svg into -out.
package main

import (
	"bufio"
	"context"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"rackpool/internal/chart"
	"rackpool/internal/childproc"
	"rackpool/internal/memory"
	"rackpool/internal/pager"
	"rackpool/internal/pager/workload"
	"rackpool/internal/units"
)

// gridPrefetch is the prefetch of the main runs, per workload: the best
// of the prefetch table (a sort streams, a table's accesses are random).
var gridPrefetch = map[string]int{"sort": 8, "table": 1}

const (
	memnodeEnv = "BENCH_PAGER_MEMNODE" // capacity,hex key,map socket
	workerEnv  = "BENCH_PAGER_WORKER"  // workload,size,ops
	// cgroupSlack is added to the swap runs' memory limit for what the
	// worker allocates besides the data (runtime, stacks, page tables).
	cgroupSlack = 4 << 20
)

// The systems compared at each point.
const (
	sysTCP    = "pager (TCP)"
	sysMapped = "pager (mapped)"
	sysSwap   = "swap file"
)

// times are one system's runs at one point.
type times struct {
	best, worst time.Duration
	stats       pager.Stats // of the best run
	fails       int         // runs that failed (a swap worker the memory cgroup killed)
	err         error       // the last failure
}

func (t *times) add(d time.Duration, s pager.Stats) {
	if t.best == 0 || d < t.best {
		t.best, t.stats = d, s
	}
	t.worst = max(t.worst, d)
}

// cell is the best time and the spread: how much slower the worst run was.
func (t *times) cell() string {
	switch {
	case t.best == 0 && t.err != nil:
		return "failed: " + t.err.Error()
	case t.best == 0:
		return "–"
	}
	c := fmt.Sprintf("%s (+%.0f%%)", ms(t.best), 100*(t.worst.Seconds()/t.best.Seconds()-1))
	if t.fails > 0 {
		c += fmt.Sprintf(" [%d failed]", t.fails)
	}
	return c
}

func (t *times) slowdown(local time.Duration) string {
	if t.best == 0 {
		return "–"
	}
	return fmt.Sprintf("%.2f×", t.best.Seconds()/local.Seconds())
}

func main() {
	switch {
	case pager.IsHelper():
		os.Exit(pager.RunHelper())
	case os.Getenv(memnodeEnv) != "":
		os.Exit(serveMemnode())
	case os.Getenv(workerEnv) != "":
		os.Exit(swapWorker())
	}
	sizeFlag := flag.String("size", "64MiB", "data size of each workload")
	ops := flag.Int("ops", 100000, "random updates of the table workload")
	out := flag.String("out", "docs", "directory for the SVG charts")
	swap := flag.Bool("swap", true, "measure the swap-file baseline (needs root, cgroup v1 memory, swapon)")
	fracFlag := flag.String("fractions", "100,75,50,25", "local memory percentages")
	prefetches := flag.String("prefetch", "1,8,32", "prefetch sizes (pages) compared at the smallest fraction (\"none\": no prefetch table)")
	runs := flag.Int("runs", 3, "runs of each system at each point, interleaved")
	workloads := flag.String("workloads", strings.Join(workload.Names, ","), "workloads to run")
	gridFlag := flag.String("grid-prefetch", "sort=8,table=1", "prefetch of the main runs, per workload")
	only := flag.String("systems", "tcp,mapped,swap", "systems to run: tcp, mapped, swap (the pager over TCP, from the mapped lease, the swap file)")
	flag.Parse()
	log.SetFlags(0)
	sz, err := units.ParsePositive(*sizeFlag)
	if err != nil {
		log.Fatalf("-size: %v", err)
	}
	size := int64(sz)
	fracs, err := ints(*fracFlag)
	if err != nil {
		log.Fatalf("-fractions: %v", err)
	}
	var pfs []int
	if *prefetches != "none" {
		if pfs, err = ints(*prefetches); err != nil {
			log.Fatalf("-prefetch: %v", err)
		}
	}
	for _, kv := range strings.Split(*gridFlag, ",") {
		k, v, ok := strings.Cut(kv, "=")
		n, err := strconv.Atoi(v)
		if !ok || err != nil {
			log.Fatalf("-grid-prefetch: %q is not workload=pages", kv)
		}
		gridPrefetch[k] = n
	}
	if *runs < 1 {
		log.Fatal("-runs must be at least 1")
	}
	names := strings.Split(*workloads, ",")
	node, err := startMemnode(uint64(size))
	if err != nil {
		log.Fatal(err)
	}
	defer node.stop()

	var sw *swapSetup
	swapWhy := "not asked for (-swap=false)"
	if *swap && strings.Contains(*only, "swap") {
		if sw, err = setupSwap(2 * size); err != nil {
			swapWhy = err.Error()
			sw = nil
		} else {
			defer sw.teardown()
		}
	}
	var systems []string
	for _, name := range strings.Split(*only, ",") {
		switch name {
		case "tcp":
			systems = append(systems, sysTCP)
		case "mapped":
			systems = append(systems, sysMapped)
		case "swap":
			if sw != nil {
				systems = append(systems, sysSwap)
			}
		default:
			log.Fatalf("-systems: %q is none of tcp, mapped, swap", name)
		}
	}

	type row struct {
		frac int
		sys  map[string]*times
	}
	results := map[string][]row{}
	local := map[string]time.Duration{}
	for _, w := range names {
		var want uint64
		best := time.Duration(1 << 62)
		for range 3 {
			buf := make([]byte, size)
			t0 := time.Now()
			sum, err := workload.Run(w, buf, *ops, 1)
			if d := time.Since(t0); d < best {
				best = d
			}
			if err != nil {
				log.Fatal(err)
			}
			want = sum
		}
		local[w] = best
		log.Printf("%s all local: %v", w, best)
		for _, f := range fracs {
			r := row{frac: f, sys: map[string]*times{}}
			for _, name := range systems {
				r.sys[name] = &times{}
			}
			// Each system runs -runs times, the order rotating; a system
			// that has had no good run yet (a swap worker the memory
			// cgroup killed) gets up to -runs more tries.
			for i := 0; i < 2**runs; i++ {
				for k := range systems {
					name := systems[(i+k)%len(systems)]
					t := r.sys[name]
					if i >= *runs && t.best > 0 {
						continue
					}
					var d time.Duration
					var s pager.Stats
					var err error
					switch name {
					case sysTCP, sysMapped:
						d, s, err = paged(node, w, size, f, gridPrefetch[w], *ops, want, name == sysMapped)
						if err != nil {
							log.Fatalf("%s %s at %d%%: %v", w, name, f, err)
						}
						log.Printf("%s %s at %d%%: %v (%d faults, %d write faults, %d fetches, %d writebacks, p50 %v)", w, name, f, d,
							s.Faults, s.WriteFaults, s.Fetches, s.Writebacks, s.LatencyQuantile(0.5))
					case sysSwap:
						d, err = sw.run(w, size, f, *ops, want)
						log.Printf("%s %s at %d%%: %v %v", w, name, f, d, err)
					}
					if err != nil {
						t.fails++
						t.err = err
						continue
					}
					t.add(d, s)
				}
			}
			results[w] = append(results[w], r)
		}
	}

	fmt.Printf("### Slowdown against all local (%s of data; table: %d random updates; prefetch: sort %d pages, table %d; best of %d interleaved runs, (+x%%) the worst)\n\n",
		*sizeFlag, *ops, gridPrefetch["sort"], gridPrefetch["table"], *runs)
	fmt.Print("| workload | local memory | all local |")
	for _, name := range systems {
		fmt.Printf(" %s | slowdown |", name)
	}
	fmt.Print("\n|---|---|---|")
	for range systems {
		fmt.Print("---|---|")
	}
	fmt.Println()
	for _, w := range names {
		for _, r := range results[w] {
			fmt.Printf("| %s | %d%% | %s |", w, r.frac, ms(local[w]))
			for _, name := range systems {
				t := r.sys[name]
				fmt.Printf(" %s | %s |", t.cell(), t.slowdown(local[w]))
			}
			fmt.Println()
		}
	}
	if sw == nil {
		fmt.Printf("\nNo swap baseline: %s.\n", swapWhy)
	} else {
		fmt.Printf("\nSwap: a %s swap file on the build disk (%s), the workload on a plain slice in a child process under a cgroup v1 memory limit of the local fraction + %d MiB.\n",
			mib(uint64(2*size)), sw.fs, cgroupSlack>>20)
		fmt.Println("The cgroup's OOM killer sometimes kills a swap run (reclaim gives up while swap-ins are slow): [n failed] counts those runs, and a point with no good run gets up to as many again.")
	}

	fmt.Printf("\n### The pagers' counters (best run)\n\n")
	fmt.Println("| workload | local memory | pager | faults | write-protect faults | fetches | fetched | zero-filled | written back | fault p50 / p99 |")
	fmt.Println("|---|---|---|---|---|---|---|---|---|---|")
	for _, w := range names {
		for _, r := range results[w] {
			for _, name := range []string{sysTCP, sysMapped} {
				if r.sys[name] == nil {
					continue
				}
				s := r.sys[name].stats
				fmt.Printf("| %s | %d%% | %s | %d | %d | %d | %s | %d | %s | %v / %v |\n", w, r.frac, strings.TrimSuffix(strings.TrimPrefix(name, "pager ("), ")"),
					s.Faults, s.WriteFaults, s.Fetches, mib(s.Fetched), s.ZeroFills, mib(s.Written), s.LatencyQuantile(0.5), s.LatencyQuantile(0.99))
			}
		}
	}

	if len(pfs) > 0 {
		minFrac := fracs[len(fracs)-1]
		fmt.Printf("\n### Prefetch (pages per fault) at %d%% local (one run each)\n\n", minFrac)
		fmt.Println("| workload | prefetch | pager (TCP) | slowdown | faults | fetched | pager (mapped) | slowdown | faults | fetched |")
		fmt.Println("|---|---|---|---|---|---|---|---|---|---|")
		for _, w := range names {
			for _, pf := range pfs {
				fmt.Printf("| %s | %d |", w, pf)
				for _, mapped := range []bool{false, true} {
					d, s, err := paged(node, w, size, minFrac, pf, *ops, 0, mapped)
					if err != nil {
						log.Fatalf("%s prefetch %d: %v", w, pf, err)
					}
					fmt.Printf(" %s | %.2f× | %d | %s |", ms(d), d.Seconds()/local[w].Seconds(), s.Faults, mib(s.Fetched))
				}
				fmt.Println()
			}
		}
	}

	for _, w := range names {
		c := chart.Line{Title: fmt.Sprintf("%s of %s: slowdown against all local", w, *sizeFlag), XLabel: "local memory (% of the data)",
			YLabel: "slowdown (×, all local = 1, best run)", YFromZero: true}
		legend := map[string]string{sysTCP: "paged to the pool over TCP (rackpool pager)",
			sysMapped: "paged to the pool, lease mapped (rackpool pager)", sysSwap: "swap file on disk (kernel)"}
		for _, name := range systems {
			se := chart.Series{Name: legend[name]}
			for _, r := range results[w] {
				if t := r.sys[name]; t.best > 0 {
					se.Points = append(se.Points, chart.Point{X: float64(r.frac), Y: t.best.Seconds() / local[w].Seconds()})
				}
			}
			if len(se.Points) > 0 {
				c.Series = append(c.Series, se)
			}
		}
		svg, err := c.SVG()
		if err != nil {
			log.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(*out, "paging-"+w+".svg"), svg, 0o644); err != nil {
			log.Fatal(err)
		}
	}
}

func ints(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n <= 0 {
			return nil, fmt.Errorf("%q: want positive integers", s)
		}
		out = append(out, n)
	}
	return out, nil
}

func ms(d time.Duration) string { return fmt.Sprintf("%.0f ms", d.Seconds()*1000) }
func mib(n uint64) string       { return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20)) }

// paged runs workload w on a pager region of size bytes with frac% of it
// local, over TCP or from the lease mapped, and checks its checksum
// against want (unless want is 0).
func paged(n *memnode, w string, size int64, frac, prefetch, ops int, want uint64, mapped bool) (time.Duration, pager.Stats, error) {
	ps := int64(os.Getpagesize())
	localBytes := size * int64(frac) / 100 / ps * ps
	tok, err := n.token(uint64(size))
	if err != nil {
		return 0, pager.Stats{}, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	o := pager.Options{Size: size, Local: localBytes, Endpoint: n.addr, Token: tok, Prefetch: prefetch}
	if mapped {
		o.Endpoint, o.MapSocket = "", n.sock
	}
	p, err := pager.Open(ctx, o)
	if err != nil {
		return 0, pager.Stats{}, err
	}
	defer p.Close()
	var sum uint64
	var werr error
	t0 := time.Now()
	err = p.Access(func(r []byte) { sum, werr = workload.Run(w, r, ops, 1) })
	d := time.Since(t0)
	if err == nil {
		err = werr
	}
	if err == nil && want != 0 && sum != want {
		err = fmt.Errorf("checksum %x, want %x: the pager lost data", sum, want)
	}
	return d, p.Stats(), err
}

// memnode is a memory.Server in a child process, on loopback TCP and on a
// unix socket for mapped leases (what memnode --map-socket serves).
type memnode struct {
	addr string
	sock string
	dir  string
	key  memory.Key
	in   io.WriteCloser
	cmd  *exec.Cmd
}

func startMemnode(capacity uint64) (*memnode, error) {
	key, err := memory.NewKey()
	if err != nil {
		return nil, err
	}
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "bench-pager-memnode")
	if err != nil {
		return nil, err
	}
	sock := filepath.Join(dir, "mem0.sock")
	cmd := childproc.Command(exe)
	cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%d,%x,%s", memnodeEnv, capacity, []byte(key), sock))
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		cmd.Process.Kill()
		cmd.Wait()
		os.RemoveAll(dir)
		return nil, fmt.Errorf("memnode did not start: %w", err)
	}
	return &memnode{addr: strings.TrimSpace(line), sock: sock, dir: dir, key: key, in: in, cmd: cmd}, nil
}

func (n *memnode) stop() {
	n.in.Close()
	n.cmd.Wait()
	os.RemoveAll(n.dir)
}

var leaseSeq int

func (n *memnode) token(size uint64) (string, error) {
	leaseSeq++
	return n.key.Sign(memory.Claims{Lease: fmt.Sprintf("bench%d", leaseSeq), Node: "mem0", Length: size,
		Rights: memory.RightRead | memory.RightWrite, Expiry: time.Now().Add(time.Hour)})
}

func serveMemnode() int {
	parts := strings.SplitN(os.Getenv(memnodeEnv), ",", 3)
	if len(parts) != 3 {
		log.Print("memnode: bad ", memnodeEnv)
		return 2
	}
	capacity, err := strconv.ParseUint(parts[0], 10, 64)
	if err != nil {
		log.Print("memnode: ", err)
		return 2
	}
	key, err := hex.DecodeString(parts[1])
	if err != nil {
		log.Print("memnode: ", err)
		return 2
	}
	s, err := memory.NewServer(memory.ServerOptions{Node: "mem0", Capacity: capacity, Key: key})
	if err != nil {
		log.Print("memnode: ", err)
		return 2
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		log.Print("memnode: ", err)
		return 2
	}
	ul, err := net.Listen("unix", parts[2])
	if err != nil {
		log.Print("memnode: ", err)
		return 2
	}
	go s.Serve(l)
	go s.Serve(ul)
	fmt.Println(l.Addr())
	io.Copy(io.Discard, os.Stdin)
	s.Close()
	return 0
}

// swapSetup is a swap file enabled for the run and a memory cgroup.
type swapSetup struct {
	dir, file, cgroup, fs string
}

// setupSwap enables a swap file of n bytes in a temporary directory and
// makes a cgroup v1 memory group, or says why it cannot.
func setupSwap(n int64) (*swapSetup, error) {
	if os.Geteuid() != 0 {
		return nil, errors.New("not root (swapon and the memory cgroup need it)")
	}
	const cgRoot = "/sys/fs/cgroup/memory"
	if _, err := os.Stat(filepath.Join(cgRoot, "memory.limit_in_bytes")); err != nil {
		return nil, fmt.Errorf("no cgroup v1 memory controller: %v", err)
	}
	dir, err := os.MkdirTemp("", "bench-pager-swap")
	if err != nil {
		return nil, err
	}
	s := &swapSetup{dir: dir, file: filepath.Join(dir, "swap")}
	fail := func(err error) (*swapSetup, error) {
		s.teardown()
		return nil, err
	}
	if out, err := childproc.Command("fallocate", "-l", strconv.FormatInt(n, 10), s.file).CombinedOutput(); err != nil {
		return fail(fmt.Errorf("fallocate a swap file: %v: %s", err, out))
	}
	os.Chmod(s.file, 0o600)
	if out, err := childproc.Command("mkswap", s.file).CombinedOutput(); err != nil {
		return fail(fmt.Errorf("mkswap: %v: %s", err, out))
	}
	if out, err := childproc.Command("swapon", s.file).CombinedOutput(); err != nil {
		return fail(fmt.Errorf("swapon: %v: %s", err, strings.TrimSpace(string(out))))
	}
	if out, err := childproc.Command("findmnt", "-no", "FSTYPE", "-T", dir).Output(); err == nil {
		s.fs = strings.TrimSpace(string(out))
	}
	s.cgroup = filepath.Join(cgRoot, fmt.Sprintf("bench-pager-%d", os.Getpid()))
	if err := os.Mkdir(s.cgroup, 0o755); err != nil {
		s.cgroup = ""
		return fail(fmt.Errorf("make a memory cgroup: %v", err))
	}
	return s, nil
}

func (s *swapSetup) teardown() {
	if s.cgroup != "" {
		os.Remove(s.cgroup)
	}
	childproc.Command("swapoff", s.file).Run()
	os.RemoveAll(s.dir)
}

// run runs the workload on a plain slice in a child process limited to
// frac% of the data (plus cgroupSlack) and returns the workload's time.
func (s *swapSetup) run(w string, size int64, frac, ops int, want uint64) (time.Duration, error) {
	limit := size*int64(frac)/100 + cgroupSlack
	if err := os.WriteFile(filepath.Join(s.cgroup, "memory.limit_in_bytes"), []byte(strconv.FormatInt(limit, 10)), 0o644); err != nil {
		return 0, fmt.Errorf("set the memory limit: %v", err)
	}
	exe, err := os.Executable()
	if err != nil {
		return 0, err
	}
	cmd := childproc.Command(exe)
	cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%s,%d,%d", workerEnv, w, size, ops))
	cmd.Stderr = os.Stderr
	in, _ := cmd.StdinPipe()
	outp, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		return 0, err
	}
	defer cmd.Wait()
	defer in.Close()
	out := bufio.NewReader(outp)
	if line, err := out.ReadString('\n'); err != nil || line != "ready\n" {
		cmd.Process.Kill()
		return 0, fmt.Errorf("worker did not start: %q %v", line, err)
	}
	if err := os.WriteFile(filepath.Join(s.cgroup, "cgroup.procs"), []byte(strconv.Itoa(cmd.Process.Pid)), 0o644); err != nil {
		cmd.Process.Kill()
		return 0, fmt.Errorf("join the memory cgroup: %v", err)
	}
	io.WriteString(in, "go\n")
	line, err := out.ReadString('\n')
	if err != nil {
		return 0, fmt.Errorf("worker: %v", err)
	}
	var ns int64
	var sum uint64
	if _, err := fmt.Sscanf(line, "%d %x", &ns, &sum); err != nil {
		return 0, fmt.Errorf("worker said %q", line)
	}
	if sum != want {
		return 0, fmt.Errorf("worker checksum %x, want %x", sum, want)
	}
	return time.Duration(ns), nil
}

// swapWorker runs one workload on a plain slice when told to go.
func swapWorker() int {
	parts := strings.Split(os.Getenv(workerEnv), ",")
	if len(parts) != 3 {
		return 2
	}
	size, _ := strconv.ParseInt(parts[1], 10, 64)
	ops, _ := strconv.Atoi(parts[2])
	fmt.Println("ready")
	if line, err := bufio.NewReader(os.Stdin).ReadString('\n'); err != nil || line != "go\n" {
		return 2
	}
	buf := make([]byte, size)
	t0 := time.Now()
	sum, err := workload.Run(parts[0], buf, ops, 1)
	d := time.Since(t0)
	if err != nil {
		log.Print(err)
		return 1
	}
	fmt.Printf("%d %x\n", d.Nanoseconds(), sum)
	return 0
}
