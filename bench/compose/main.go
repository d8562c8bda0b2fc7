// Command compose benchmarks rackpool's control plane: compose+decompose
// latency and throughput through the Redfish HTTP API with durable SQLite
// commits, on the example rack and on a generated 10,000-block topology,
// and the pure scheduler's decisions per second at 100,000 blocks. It
// prints a Markdown report for docs/benchmarks.md, with the control
// plane's times next to the fabrics' own (P1: 1 ms fastest drive switch;
// P4: 25 ms optical circuit).
//
//	go run ./bench/compose [-seconds 5] [-clients 8]
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"runtime"
	"runtime/pprof"
	"sort"
	"sync"
	"time"

	"rackpool/internal/clock"
	"rackpool/internal/compose"
	"rackpool/internal/events"
	"rackpool/internal/fabric/emulated"
	"rackpool/internal/inventory"
	"rackpool/internal/metrics"
	"rackpool/internal/redfish"
	"rackpool/internal/schedule"
	"rackpool/internal/store/sqlite"
	"rackpool/internal/topology"
)

func main() {
	seconds := flag.Float64("seconds", 5, "duration of each API run")
	clients := flag.Int("clients", 8, "concurrent API clients on the generated topology")
	cpuprofile := flag.String("cpuprofile", "", "write a CPU profile of the API runs to this file")
	flag.Parse()
	dur := time.Duration(*seconds * float64(time.Second))
	if *cpuprofile != "" {
		f, err := os.Create(*cpuprofile)
		if err != nil {
			log.Fatal(err)
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			log.Fatal(err)
		}
		defer pprof.StopCPUProfile()
	}

	fmt.Printf("# rackpool compose benchmark\n\n%s, %d CPUs, %s\n\n", time.Now().UTC().Format("2006-01-02"), runtime.NumCPU(), runtime.Version())
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
		log.Fatal(err)
	}
	for _, n := range []int{1, 2, 4, *clients} {
		report("10,000 blocks, constrained (1 GPU + 1 NVMe + 16 GiB), scheduler picks host", gen, n, dur, func(i int) any {
			return map[string]any{"Oem": map[string]any{"Rackpool": map[string]any{
				"Needs": []any{map[string]any{"Kind": "gpu", "Count": 1}, map[string]any{"Kind": "nvme", "Count": 1},
					map[string]any{"Kind": "memory", "Capacity": "16GiB"}}}}}
		})
	}
	fmt.Println()
	schedulerBench()
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
}

func ms(d time.Duration) string { return fmt.Sprintf("%.3f ms", float64(d.Microseconds())/1000) }

func pct(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	i := int(float64(len(s)-1) * p / 100)
	return s[i]
}

// runAPI starts a real server (SQLite in a temporary directory, emulated
// fabrics answering instantly so only the control plane is timed) and
// drives it with clients, each composing and decomposing in a loop.
func runAPI(top *topology.Topology, clients int, dur time.Duration, body func(int) any) result {
	dir, err := os.MkdirTemp("", "rackpool-bench")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	ctx := context.Background()
	st, err := sqlite.Open(dir)
	if err != nil {
		log.Fatal(err)
	}
	defer st.Close()
	if _, err := redfish.SetupAdmin(ctx, st, "bench"); err != nil {
		log.Fatal(err)
	}
	drivers, err := emulated.NewAll(top, clock.Instant{})
	if err != nil {
		log.Fatal(err)
	}
	// Wired as serve wires it: audit log, events and metrics included.
	obs := redfish.NewObserver(metrics.NewRegistry(), events.New(events.Options{}))
	mgr, err := compose.New(ctx, compose.Options{Topology: top, Store: st, Drivers: drivers,
		OnChange: obs.OnChange, OnFabricOp: obs.OnFabricOp, OnSchedule: obs.OnSchedule})
	if err != nil {
		log.Fatal(err)
	}
	auth, err := redfish.NewAuth(ctx, st, clock.Real{}, time.Hour)
	if err != nil {
		log.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	srv := &http.Server{Handler: redfish.New(mgr, auth, redfish.Options{Store: st, Observer: obs, AsyncThreshold: -1})}
	go srv.Serve(ln)
	defer srv.Close()
	url := "http://" + ln.Addr().String()
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: clients * 2}}

	// One session for all clients, as a real client library would hold.
	req, _ := http.NewRequest("POST", url+"/redfish/v1/SessionService/Sessions", bytes.NewBufferString(`{"UserName":"Administrator","Password":"bench"}`))
	resp, err := hc.Do(req)
	if err != nil {
		log.Fatal(err)
	}
	resp.Body.Close()
	token := resp.Header.Get("X-Auth-Token")

	do := func(method, path string, b any) (int, []byte) {
		var rd io.Reader
		if b != nil {
			data, _ := json.Marshal(b)
			rd = bytes.NewReader(data)
		}
		req, _ := http.NewRequest(method, url+path, rd)
		req.Header.Set("X-Auth-Token", token)
		resp, err := hc.Do(req)
		if err != nil {
			log.Fatal(err)
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
				t0 := time.Now()
				status, data := do("POST", "/redfish/v1/Systems", body(c))
				if status != http.StatusCreated {
					log.Fatalf("compose: %d %s", status, data)
				}
				t1 := time.Now()
				var sys struct{ Id string }
				_ = json.Unmarshal(data, &sys)
				if status, data := do("DELETE", "/redfish/v1/Systems/"+sys.Id, nil); status != http.StatusNoContent {
					log.Fatalf("decompose: %d %s", status, data)
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
	if left := mgr.List(); len(left) != 0 {
		log.Fatalf("%d compositions left after the run", len(left))
	}
	return res
}

// schedulerBench measures the pure scheduler at 100,000 blocks with about
// half the hosts composed.
func schedulerBench() {
	top, err := topology.Parse("generated", topology.GenerateRacks(1000))
	if err != nil {
		log.Fatal(err)
	}
	s, st := schedule.New(top), schedule.NewState(top)
	req := schedule.Request{Needs: []schedule.Need{
		{Kind: inventory.GPU, Count: 2},
		{Kind: inventory.Memory, CapacityBytes: 32 * inventory.GiB},
		{Kind: inventory.NVMe, Count: 1},
	}}
	var live []*schedule.Plan
	hold := len(top.Hosts) / 2
	run := func(n int) time.Duration {
		t0 := time.Now()
		for i := 0; i < n; i++ {
			p, err := s.Schedule(st, req)
			if err != nil {
				log.Fatal(err)
			}
			st.Acquire(p.Host, p.Assignments)
			live = append(live, p)
			if len(live) > hold {
				st.Release(live[0].Host, live[0].Assignments)
				live = live[1:]
			}
		}
		return time.Since(t0)
	}
	run(hold) // warm: fill half the hosts, build the per-host indexes
	const n = 50_000
	d := run(n)
	fmt.Println("| scheduler | blocks | hosts | decisions/s | mean per decision |")
	fmt.Println("|---|---|---|---|---|")
	fmt.Printf("| 2 GPU + 32 GiB memory + 1 NVMe, half the hosts composed | %d | %d | %.0f | %.1f µs |\n",
		len(top.Blocks), len(top.Hosts), n/d.Seconds(), float64(d.Microseconds())/n)
}
