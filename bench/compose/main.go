// Command compose benchmarks rackpool's control plane: compose+decompose
// latency and throughput through the Redfish HTTP API with durable
// commits (SQLite, or PostgreSQL with -store postgres), on the example rack, on generated 10,000- and 100,000-block
// topologies and on the P4-scale MONet pod (4,096 trays x 24 cards, 8
// planes: 245,760 blocks); the control plane's start-up time and memory on
// the large ones; and the pure scheduler's decisions per second. It prints
// a Markdown report for docs/benchmarks.md, with the control plane's times
// next to the fabrics' own (P1: 1 ms fastest drive switch; P4: 25 ms
// optical circuit).
//
//	go run ./bench/compose [-seconds 5] [-clients 8] [-large=false] [-store postgres]
//	    [-cpuprofile FILE] [-memprofile FILE]
package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"

	"rackpool/api"
	"rackpool/bench/internal/harness"
	"rackpool/internal/childproc"
	"rackpool/internal/clock"
	"rackpool/internal/compose"
	"rackpool/internal/events"
	"rackpool/internal/fabric"
	"rackpool/internal/fabric/emulated"
	"rackpool/internal/inventory"
	"rackpool/internal/metrics"
	"rackpool/internal/observe"
	"rackpool/internal/pki"
	"rackpool/internal/profiling"
	"rackpool/internal/redfish"
	"rackpool/internal/replica"
	"rackpool/internal/schedule"
	"rackpool/internal/sim"
	"rackpool/internal/store"
	"rackpool/internal/store/postgres"
	"rackpool/internal/store/postgres/pgtest"
	"rackpool/internal/store/sqlite"
	"rackpool/internal/tenancy"
	"rackpool/internal/topology"
	"rackpool/internal/units"
)

func main() {
	seconds := flag.Float64("seconds", 5, "duration of each API run")
	clients := flag.Int("clients", 8, "concurrent API clients on the generated topology")
	large := flag.Bool("large", true, "also run the 100,000-block and P4-scale topologies")
	cpuprofile := flag.String("cpuprofile", "", "write a CPU profile of the whole run to this file (go tool pprof)")
	memprofile := flag.String("memprofile", "", "write a heap profile at the end of the run to this file (go tool pprof)")
	replicas := flag.String("replicas", "", "with -store postgres: also run the 10,000-block scenario on this many replicas of one database, e.g. 1,2,3")
	flag.StringVar(&storeKind, "store", "sqlite", "the control plane's store: sqlite (a file in a temporary directory) or postgres (a PostgreSQL server this benchmark starts in a temporary directory, one database per run)")
	flag.Parse()
	if storeKind != "sqlite" && storeKind != "postgres" {
		childproc.Fatalf("-store: want sqlite or postgres, got %q", storeKind)
	}
	if storeKind == "postgres" {
		bin, err := pgtest.Bin()
		if err != nil {
			childproc.Fatal(err)
		}
		if pgServer, err = pgtest.New(bin); err != nil {
			childproc.Fatal(err)
		}
		// Stopped and removed on every exit path: an error or an
		// interrupt too.
		childproc.AtExit(func() {
			pgServer.Stop("fast")
			os.RemoveAll(pgServer.Dir)
		})
		defer childproc.RunAtExit()
	}
	dur := time.Duration(*seconds * float64(time.Second))
	stopProfiles, err := profiling.Start(*cpuprofile, *memprofile)
	if err != nil {
		childproc.Fatal(err)
	}
	defer func() {
		if err := stopProfiles(); err != nil {
			childproc.Fatal(err)
		}
	}()

	fmt.Printf("# rackpool compose benchmark\n\n%s, %d CPUs, %s, store %s\n\n", time.Now().UTC().Format("2006-01-02"), runtime.NumCPU(), runtime.Version(), storeKind)
	fmt.Println("| scenario | blocks | clients | pairs/s | compose p50 | compose p99 | decompose p50 | decompose p99 |")
	fmt.Println("|---|---|---|---|---|---|---|---|")
	rack := topology.LoadDefault()
	report("example rack, specific (1 GPU)", rack, 4, dur, func(i int) any {
		h := fmt.Sprintf("host%d", i%4+1)
		gpu := map[string]string{"host1": "gpu1", "host2": "gpu5", "host3": "gpu3", "host4": "nvme3"}[h]
		return map[string]any{"Links": map[string]any{"ResourceBlocks": []any{
			map[string]string{"@odata.id": "/redfish/v1/CompositionService/ResourceBlocks/" + h},
			map[string]string{"@odata.id": "/redfish/v1/CompositionService/ResourceBlocks/" + gpu},
		}}}
	})
	report("example rack, constrained (1 HDD + 16 GiB memory)", rack, 4, dur, func(i int) any {
		return map[string]any{"Oem": map[string]any{"Rackpool": map[string]any{
			"Host":  fmt.Sprintf("host%d", i%4+1),
			"Needs": []any{map[string]any{"Kind": "hdd", "Count": 1}, map[string]any{"Kind": "memory", "Capacity": "16GiB"}}}}}
	})
	gen, err := topology.Parse("generated", topology.GenerateRacks(100))
	if err != nil {
		childproc.Fatal(err)
	}
	for _, n := range []int{1, 2, 4, *clients} {
		report("10,000 blocks, constrained (1 GPU + 1 NVMe + 16 GiB), scheduler picks host", gen, n, dur, constrained)
	}
	if storeKind == "postgres" && *replicas != "" {
		replicaBench(gen, *replicas, *clients, dur)
	}
	var big []*topology.Topology
	if *large {
		racks := loadTimed("GenerateRacks(1000)", func() []byte { return topology.GenerateRacks(1000) })
		for _, n := range []int{1, 4} {
			report("100,000 blocks, same", racks.top, n, dur, constrained)
		}
		pod := loadTimed("P4-scale MONet pod", func() []byte { return sim.TopologyFile(p4Pod()) })
		for _, n := range []int{1, 4} {
			report("P4-scale MONet pod, a CPU card + 8 GiB pooled memory, scheduler picks", pod.top, n, dur, func(int) any {
				return map[string]any{"Oem": map[string]any{"Rackpool": map[string]any{
					"Needs": []any{map[string]any{"Kind": "memory", "Capacity": "8GiB"}}}}}
			})
		}
		fmt.Println()
		fmt.Println("| start-up (as `rackpool serve --topology`) | blocks | parse | control plane ready | total | peak RSS of this process so far |")
		fmt.Println("|---|---|---|---|---|---|")
		for _, l := range []loaded{racks, pod} {
			fmt.Printf("| %s | %d | %.2f s | %.2f s | %.2f s | %.2f GiB |\n", l.name, len(l.top.Blocks),
				l.parse.Seconds(), l.ready.Seconds(), (l.parse + l.ready).Seconds(), float64(peakRSS())/(1<<30))
		}
		big = []*topology.Topology{racks.top, pod.top}
	}
	fmt.Println()
	schedulerBench(big)
}

// replicaBench runs the 10,000-block scenario on 1, 2, 3… replicas of one
// PostgreSQL database (list: "1,2,3"), clients spread over them, and
// reports throughput, latency and how often a compose conflicted with
// another replica's commit.
func replicaBench(top *topology.Topology, list string, clients int, dur time.Duration) {
	fmt.Println()
	fmt.Println("| replicas | blocks | clients | pairs/s | compose p50 | compose p99 | decompose p50 | decompose p99 | composes conflicting | placed again | refused 409 |")
	fmt.Println("|---|---|---|---|---|---|---|---|---|---|---|")
	for _, f := range strings.Split(list, ",") {
		var n int
		if _, err := fmt.Sscan(f, &n); err != nil || n < 1 {
			childproc.Fatalf("-replicas: %q is not a number of replicas", f)
		}
		cps := startReplicas(top, n)
		r := runOn(cps, clients, dur, constrained)
		for _, cp := range cps {
			cp.close()
		}
		composes := int64(len(r.compose)) + r.refused
		fmt.Printf("| %d | %d | %d | %.0f | %s | %s | %s | %s | %.2f%% | %d | %d |\n", n, len(top.Blocks), clients, r.pairsPerSec,
			ms(pct(r.compose, 50)), ms(pct(r.compose, 99)), ms(pct(r.decompose, 50)), ms(pct(r.decompose, 99)),
			100*float64(r.conflicts)/float64(max(composes, 1)), r.replans, r.refused)
	}
}

// constrained is the 10,000- and 100,000-block scenarios' request.
func constrained(int) any {
	return map[string]any{"Oem": map[string]any{"Rackpool": map[string]any{
		"Needs": []any{map[string]any{"Kind": "gpu", "Count": 1}, map[string]any{"Kind": "nvme", "Count": 1},
			map[string]any{"Kind": "memory", "Capacity": "16GiB"}}}}}
}

// p4Pod is P4's full-size pod: 4,096 trays of 24 cards (12 CPU, 12
// memory) over 8 planes, 16 GB memory cards in 4 GB blocks.
func p4Pod() *sim.Config {
	c := sim.Defaults()
	c.Name = "p4"
	c.Trays, c.CardsPerTray, c.Planes, c.MemoryNodeGB, c.MemoryBlockGB = 4096, 24, 8, 16, 4
	return &c
}

// loaded is a large topology and what it cost to bring up.
type loaded struct {
	name         string
	top          *topology.Topology
	parse, ready time.Duration
}

// loadTimed parses a topology file as serve does, then brings up a
// control plane on it (SQLite in a temporary directory, emulated drivers,
// the Redfish handler) and times both.
func loadTimed(name string, file func() []byte) loaded {
	src := file()
	t0 := time.Now()
	top, err := topology.Parse(name, src)
	if err != nil {
		childproc.Fatal(err)
	}
	l := loaded{name: name, top: top, parse: time.Since(t0)}
	t1 := time.Now()
	cp := startControlPlane(top)
	l.ready = time.Since(t1)
	cp.close()
	return l
}

// peakRSS is this process's peak resident set so far.
func peakRSS() int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return ru.Maxrss << 10 // kilobytes on Linux
}

// report runs one API scenario and prints its row.
func report(name string, top *topology.Topology, clients int, dur time.Duration, body func(client int) any) {
	r := runAPI(top, clients, dur, body)
	fmt.Printf("| %s | %d | %d | %.0f | %s | %s | %s | %s |\n", name, len(top.Blocks), clients, r.pairsPerSec,
		ms(pct(r.compose, 50)), ms(pct(r.compose, 99)), ms(pct(r.decompose, 50)), ms(pct(r.decompose, 99)))
}

type result struct {
	compose, decompose []time.Duration
	pairsPerSec        float64
	// Several replicas: composes that conflicted with another replica's
	// commit, those placed again, and those refused after the retries.
	conflicts, replans, refused int64
}

func ms(d time.Duration) string { return fmt.Sprintf("%.3f ms", float64(d.Microseconds())/1000) }

// pct is the p-th percentile of ds, which it leaves unsorted.
func pct(ds []time.Duration, p float64) time.Duration {
	return harness.Percentile(slices.Sorted(slices.Values(ds)), p)
}

// controlPlane is a running server as serve wires it.
type controlPlane struct {
	mgr     *compose.Manager
	url     string
	tls     *tls.Config // trusts the server's CA
	close   func()
	catchUp func(context.Context) error // replicas: the follower's
}

// startControlPlane starts a real server on top: SQLite in a temporary
// directory (or a database on the benchmark's PostgreSQL server),
// emulated fabrics answering at once, audit log, events and metrics, the
// Redfish handler on a loopback port.
func startControlPlane(top *topology.Topology) *controlPlane {
	dir, err := os.MkdirTemp("", "rackpool-bench")
	if err != nil {
		childproc.Fatal(err)
	}
	ctx := context.Background()
	st := openStore(ctx, dir)
	drivers, err := emulated.NewAll(top, clock.Instant{})
	if err != nil {
		childproc.Fatal(err)
	}
	childproc.AtExit(func() { os.RemoveAll(dir) })
	cp := newControlPlane(top, st, drivers, dir, nil, "")
	closeCP := cp.close
	cp.close = func() {
		closeCP()
		os.RemoveAll(dir)
	}
	return cp
}

// startReplicas starts n replicas on one new database of the benchmark's
// PostgreSQL server, sharing one set of emulated fabrics (as replicas
// share the fabric managers) and one TLS certificate, each following the
// others' changes.
func startReplicas(top *topology.Topology, n int) []*controlPlane {
	dir, err := os.MkdirTemp("", "rackpool-bench")
	if err != nil {
		childproc.Fatal(err)
	}
	childproc.AtExit(func() { os.RemoveAll(dir) })
	ctx := context.Background()
	url := newDatabase(ctx)
	drivers, err := emulated.NewAll(top, clock.Instant{})
	if err != nil {
		childproc.Fatal(err)
	}
	var cps []*controlPlane
	for i := range n {
		st, err := postgres.Open(ctx, url)
		if err != nil {
			childproc.Fatal(err)
		}
		// Each holds a membership, as serve --active does: its writes are
		// fenced by it and its records name it.
		member := fmt.Sprintf("%sbench%d", postgres.MemberPrefix, i)
		if _, err := st.Lead(ctx, member, "bench replica", postgres.LeadOptions{Shared: "serve"}); err != nil {
			childproc.Fatal(err)
		}
		head, err := st.Head(ctx)
		if err != nil {
			childproc.Fatal(err)
		}
		cps = append(cps, newControlPlane(top, st, drivers, dir, replica.New(st, head, nil), member))
	}
	cps[0].close = func(close0 func()) func() {
		return func() { close0(); os.RemoveAll(dir) }
	}(cps[0].close)
	return cps
}

// newControlPlane wires a control plane on st and drivers, with its TLS
// material in dir/tls; with follow, as one replica of several.
func newControlPlane(top *topology.Topology, st store.Store, drivers map[string]fabric.Driver, dir string, follow *replica.Follower, member string) *controlPlane {
	ctx := context.Background()
	obs := observe.New(metrics.NewRegistry(), events.New(events.Options{}))
	var catchUp func(context.Context) error
	if follow != nil {
		catchUp = follow.CatchUp
	}
	mgr, err := compose.New(ctx, compose.Options{Topology: top, Store: st, Drivers: drivers,
		OnChange: obs.OnChange, OnFabricOp: obs.OnFabricOp, OnSchedule: obs.OnSchedule, CatchUp: catchUp, Spread: follow != nil, Replica: member})
	if err != nil {
		childproc.Fatal(err)
	}
	auth, _, err := tenancy.Open(ctx, st, tenancy.Options{IdleTimeout: time.Hour, AdminPassword: "bench", CatchUp: catchUp})
	if err != nil {
		childproc.Fatal(err)
	}
	stop := func() {}
	if follow != nil {
		follow.Compositions(mgr)
		for _, kind := range tenancy.Kinds {
			follow.Handle(kind, func(ctx context.Context, _ []string) {
				if err := auth.Reload(ctx); err != nil {
					log.Print(err)
				}
			})
		}
		fctx, cancel := context.WithCancel(ctx)
		go follow.Run(fctx, time.Second)
		stop = cancel
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		childproc.Fatal(err)
	}
	// HTTPS with the service's own CA, as serve does by default.
	m, err := pki.Ensure(filepath.Join(dir, "tls"), []string{"127.0.0.1"}, time.Now())
	if err != nil {
		childproc.Fatal(err)
	}
	clientTLS, err := api.TLSConfig(m.CAFile)
	if err != nil {
		childproc.Fatal(err)
	}
	srv := &http.Server{Handler: redfish.New(mgr, auth, redfish.Options{Store: st, Observer: obs, AsyncThreshold: -1})}
	go srv.Serve(tls.NewListener(ln, pki.ServerConfig(m.Certificate)))
	return &controlPlane{mgr: mgr, url: "https://" + ln.Addr().String(), tls: clientTLS, catchUp: catchUp, close: func() {
		stop()
		srv.Close()
		st.Close()
	}}
}

// storeKind is -store; pgServer, with -store postgres, the server every
// run gets a database on.
var (
	storeKind string
	pgServer  *pgtest.Server
	databases int
)

// openStore opens the run's store: SQLite in dir, or a new database on
// pgServer.
func openStore(ctx context.Context, dir string) store.Store {
	if storeKind == "sqlite" {
		st, err := sqlite.Open(dir)
		if err != nil {
			childproc.Fatal(err)
		}
		return st
	}
	st, err := postgres.Open(ctx, newDatabase(ctx))
	if err != nil {
		childproc.Fatal(err)
	}
	return st
}

// newDatabase creates a database on pgServer and returns its URL.
func newDatabase(ctx context.Context) string {
	databases++
	db := fmt.Sprintf("bench_%d", databases)
	conn, err := pgx.Connect(ctx, pgServer.URL(pgServer.Addr(), "postgres"))
	if err != nil {
		childproc.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+db); err != nil {
		childproc.Fatal(err)
	}
	return pgServer.URL(pgServer.Addr(), db)
}

// runAPI starts a real server (SQLite in a temporary directory, emulated
// fabrics answering instantly so only the control plane is timed) and
// drives it with clients, each composing and decomposing in a loop.
func runAPI(top *topology.Topology, clients int, dur time.Duration, body func(int) any) result {
	cp := startControlPlane(top)
	defer cp.close()
	return runOn([]*controlPlane{cp}, clients, dur, body)
}

// runOn drives the control planes cps (replicas of one database, or one)
// with clients, client c sending to cps[c % len(cps)], and checks that
// nothing is left composed afterwards. A compose refused with 409 (a
// conflict with another replica that placing again did not resolve) is
// counted, not fatal.
func runOn(cps []*controlPlane, clients int, dur time.Duration, body func(int) any) result {
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: clients * 2, TLSClientConfig: cps[0].tls}}

	// One session for all clients, as a real client library would hold;
	// opened at the first replica, valid at every one.
	req, _ := http.NewRequest("POST", cps[0].url+"/redfish/v1/SessionService/Sessions", bytes.NewBufferString(`{"UserName":"Administrator","Password":"bench"}`))
	resp, err := hc.Do(req)
	if err != nil {
		childproc.Fatal(err)
	}
	resp.Body.Close()
	token := resp.Header.Get("X-Auth-Token")

	do := func(url, method, path string, b any) (int, []byte) {
		var rd io.Reader
		if b != nil {
			data, _ := json.Marshal(b)
			rd = bytes.NewReader(data)
		}
		req, _ := http.NewRequest(method, url+path, rd)
		req.Header.Set("X-Auth-Token", token)
		resp, err := hc.Do(req)
		if err != nil {
			childproc.Fatal(err)
		}
		defer resp.Body.Close()
		data, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, data
	}
	var mu sync.Mutex
	var res result
	pairs := 0
	deadline := time.Now().Add(dur)
	start := time.Now()
	var wg sync.WaitGroup
	for c := 0; c < clients; c++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var cs, ds []time.Duration
			n := 0
			for i := 0; time.Now().Before(deadline) && i < 1_000_000; i++ {
				url := cps[c%len(cps)].url
				t0 := time.Now()
				status, data := do(url, "POST", "/redfish/v1/Systems", body(c))
				if status == http.StatusConflict && len(cps) > 1 {
					mu.Lock()
					res.refused++
					mu.Unlock()
					continue
				}
				if status != http.StatusCreated {
					childproc.Fatalf("compose: %d %s", status, data)
				}
				t1 := time.Now()
				var sys struct{ Id string }
				_ = json.Unmarshal(data, &sys)
				if status, data := do(url, "DELETE", "/redfish/v1/Systems/"+sys.Id, nil); status != http.StatusNoContent {
					childproc.Fatalf("decompose: %d %s", status, data)
				}
				t2 := time.Now()
				cs, ds = append(cs, t1.Sub(t0)), append(ds, t2.Sub(t1))
				n++
			}
			mu.Lock()
			res.compose, res.decompose = append(res.compose, cs...), append(res.decompose, ds...)
			pairs += n
			mu.Unlock()
		}()
	}
	wg.Wait()
	res.pairsPerSec = float64(pairs) / time.Since(start).Seconds()
	for _, cp := range cps {
		if cp.catchUp != nil {
			if err := cp.catchUp(context.Background()); err != nil {
				childproc.Fatal(err)
			}
		}
		if left := cp.mgr.List(); len(left) != 0 {
			childproc.Fatalf("%d compositions left after the run", len(left))
		}
		c, r := cp.mgr.Conflicts()
		res.conflicts += c
		res.replans += r
	}
	return res
}

// schedulerBench measures the pure scheduler, with about half the hosts
// composed: on 1,000 generated racks (100,000 blocks) whole hosts with 2
// GPUs, 32 GiB of pooled memory and an NVMe drive; on the large
// topologies given, the same request and, on the MONet pod, shares of a
// CPU card (1-4 cores) with 4-16 GiB of pooled memory within 600 ns, as
// the simulator places them.
func schedulerBench(big []*topology.Topology) {
	racks, err := topology.Parse("generated", topology.GenerateRacks(1000))
	if err != nil {
		childproc.Fatal(err)
	}
	whole := func(int) schedule.Request {
		return schedule.Request{Needs: []schedule.Need{
			{Kind: inventory.GPU, Count: 2},
			{Kind: inventory.Memory, CapacityBytes: 32 * units.GiB},
			{Kind: inventory.NVMe, Count: 1},
		}}
	}
	share := func(i int) schedule.Request {
		return schedule.Request{Share: schedule.Share{Cores: 1 + i%4}, Needs: []schedule.Need{
			{Kind: inventory.Memory, CapacityBytes: int64(4<<(i%3)) * units.GiB, MaxLatencyNS: 600}}}
	}
	fmt.Println("| scheduler | blocks | hosts | decisions/s | mean per decision |")
	fmt.Println("|---|---|---|---|---|")
	measure := func(name string, top *topology.Topology, req func(int) schedule.Request, hold int) {
		s, st := schedule.New(top), schedule.NewState(top)
		var live []*schedule.Plan
		run := func(n int) time.Duration {
			t0 := time.Now()
			for i := 0; i < n; i++ {
				p, err := s.Schedule(st, req(i))
				if err != nil {
					childproc.Fatal(err)
				}
				st.Commit(p)
				live = append(live, p)
				if len(live) > hold {
					st.Uncommit(live[0])
					live = live[1:]
				}
			}
			return time.Since(t0)
		}
		run(hold) // warm: fill, build the per-host indexes
		const n = 50_000
		d := run(n)
		fmt.Printf("| %s | %d | %d | %.0f | %.1f µs |\n", name, len(top.Blocks), len(top.Hosts), n/d.Seconds(), float64(d.Microseconds())/n)
	}
	measure("2 GPU + 32 GiB memory + 1 NVMe, half the hosts composed", racks, whole, len(racks.Hosts)/2)
	for _, top := range big {
		if strings.Contains(top.Name, "monet") {
			// Half the cores of the pod held by shares (2.5 cores each).
			measure("P4 pod: share of a CPU card + 4-16 GiB within 600 ns, half the cores held", top, share, len(top.Hosts)*4/5)
		}
	}
}
