// Command southbound benchmarks driving a fabric through a Redfish fabric
// manager (docs/benchmarks.md, "Southbound"): attach and detach of one
// device, one after another, by
//
//   - the in-process emulated driver (no protocol: the floor),
//   - rackpool's redfish driver (internal/fabric/rfdriver) against
//     fabric-emulator's server (internal/fabric/fmserver),
//   - the DMTF's Python Redfish library (python-redfish-library, the peer)
//     doing the same protocol steps against the same server: GET the zone,
//     PATCH its endpoints with If-Match, follow the task monitor;
//
// and, with -bin, composing one GPU into a host's system and out again
// through a vendor composer (composer.go), by the redfish driver in
// composition mode and by the Python library.
//
// All three run on this machine in one run, over loopback HTTP (no TLS for
// either client), with the fabric's modelled time instant, so what is
// measured is the control path.
//
//	go run ./bench/southbound -python .venv-rf/bin/python -bin bin/rackpool -out build/bench-southbound
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"rackpool/internal/childproc"
	"rackpool/internal/clock"
	"rackpool/internal/fabric"
	"rackpool/internal/fabric/emulated"
	"rackpool/internal/fabric/fmserver"
	"rackpool/internal/fabric/rfdriver"
	"rackpool/internal/topology"
)

const (
	user     = "Administrator"
	password = "bench-southbound-1"
	fabricID = "falcon1"
)

// the attachment every cycle makes and undoes
var gpu1 = fabric.Attachment{Block: "gpu1", Device: "gpu1", Host: "host1", HostPort: "pcie"}

// result is one client's measurement.
type result struct {
	Name     string
	Ops      int
	Seconds  float64
	P50, P99 time.Duration
}

func (r result) opsPerSec() float64 { return float64(r.Ops) / r.Seconds }

func main() {
	cycles := flag.Int("cycles", 300, "attach+detach cycles per client")
	python := flag.String("python", ".venv-rf/bin/python", "Python with the redfish library (scripts/pyenv.sh); '' skips the peer")
	out := flag.String("out", "build/bench-southbound", "report directory")
	bin := flag.String("bin", "", "rackpool binary to serve as a vendor composer; '' skips the composition API")
	flag.Parse()
	if *cycles < 10 {
		childproc.Fatal("-cycles must be at least 10")
	}
	top := topology.LoadDefault()
	ctx := context.Background()
	var results []result

	emu, err := emulated.New(top, top.Fabric(fabricID), clock.Instant{})
	if err != nil {
		childproc.Fatal(err)
	}
	results = append(results, measure("emulated driver, in process", *cycles, emu))

	srv, err := fmserver.New(fmserver.Options{Topology: top, Fabric: fabricID, Clock: clock.Instant{}, User: user, Password: password,
		Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		childproc.Fatal(err)
	}
	ts := httptest.NewServer(srv.Handler())
	defer ts.Close()
	d, err := rfdriver.New(ctx, rfdriver.Options{Topology: top, Fabric: fabricID, URL: ts.URL, User: user, Password: password,
		Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		childproc.Fatal(err)
	}
	results = append(results, measure("redfish driver (Go) → fabric-emulator", *cycles, d))
	_ = d.Close(ctx)

	if *python != "" {
		r, err := peer(*python, ts.URL, *cycles)
		if err != nil {
			childproc.Fatalf("python-redfish peer: %v", err)
		}
		results = append(results, r)
	}
	if st, err := srv.Driver().Discover(ctx); err != nil || len(st.Attachments) != 0 {
		childproc.Fatalf("the fabric is not back to empty after the run: %v %v", st.Attachments, err)
	}
	if *bin != "" {
		results = append(results, composerResults(*bin, *python, *cycles)...)
	}
	report(results, *out)
}

// measure runs cycles attach+detach pairs of gpu1 through d.
func measure(name string, cycles int, d fabric.Driver) result {
	return measureOf(name, cycles, d, gpu1)
}

// measureOf runs cycles attach+detach pairs of a through d, after a
// warm-up.
func measureOf(name string, cycles int, d fabric.Driver, a fabric.Attachment) result {
	ctx := context.Background()
	for range 10 {
		must(d.Attach(ctx, a))
		must(d.Detach(ctx, a))
	}
	lat := make([]time.Duration, 0, 2*cycles)
	start := time.Now()
	for range cycles {
		for _, op := range []func(context.Context, fabric.Attachment) (fabric.Result, error){d.Attach, d.Detach} {
			t := time.Now()
			r, err := op(ctx, a)
			must(r, err)
			if !r.Changed {
				childproc.Fatalf("%s: an operation changed nothing", name)
			}
			lat = append(lat, time.Since(t))
		}
	}
	return summarize(name, lat, time.Since(start))
}

func must(_ fabric.Result, err error) {
	if err != nil {
		childproc.Fatal(err)
	}
}

func summarize(name string, lat []time.Duration, took time.Duration) result {
	slices.Sort(lat)
	return result{Name: name, Ops: len(lat), Seconds: took.Seconds(), P50: lat[len(lat)/2], P99: lat[len(lat)*99/100]}
}

// peerScript attaches and detaches gpu1 the way a Redfish client does:
// GET the zone, PATCH its Links.Endpoints with If-Match, follow a 202
// task monitor until the change's own answer.
const peerScript = `
import json, sys, time
import redfish
url, user, password, cycles = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
c = redfish.redfish_client(base_url=url, username=user, password=password)
c.login(auth="session")
eps = "/redfish/v1/Fabrics/falcon1/Endpoints/"
zone = "/redfish/v1/Fabrics/falcon1/Zones/host1-pcie"
init, dev = eps + "host1-pcie", eps + "gpu1"
` + peerFinish + `
if c.get(zone).status == 404:
    finish(c.post("/redfish/v1/Fabrics/falcon1/Zones",
                  body={"ZoneType": "ZoneOfEndpoints", "Links": {"Endpoints": [{"@odata.id": init}]}}))

def change(members):
    r = c.get(zone)
    if r.status != 200:
        raise SystemExit("GET zone: %d" % r.status)
    r = c.patch(zone, body={"Links": {"Endpoints": [{"@odata.id": m} for m in members]}},
                headers={"If-Match": r.getheader("ETag")})
    finish(r)

for _ in range(10):
    change([init, dev]); change([init])
lat = []
start = time.perf_counter()
for _ in range(cycles):
    for members in ([init, dev], [init]):
        t = time.perf_counter()
        change(members)
        lat.append(time.perf_counter() - t)
total = time.perf_counter() - start
c.logout()
print(json.dumps({"lat": lat, "total": total}))
`

// peerFinish is the peers' wait for a change: a 202's task monitor
// followed to the change's own answer, which must be a success.
const peerFinish = `
def finish(r):
    while r.status == 202:
        time.sleep(0)
        r = c.get(r.getheader("Location"))
    if r.status not in (200, 201, 204):
        raise SystemExit("change failed: %d %s" % (r.status, r.text))
`

// peer runs the Python Redfish library against url.
func peer(python, url string, cycles int) (result, error) {
	cmd := childproc.Command(python, "-c", peerScript, url, user, password, fmt.Sprint(cycles))
	return runPeer(cmd, "python-redfish-library (peer) → fabric-emulator")
}

func report(results []result, out string) {
	var b strings.Builder
	fmt.Fprintf(&b, "| client | ops | ops/s | p50 | p99 |\n|---|---|---|---|---|\n")
	for _, r := range results {
		fmt.Fprintf(&b, "| %s | %d | %.0f | %v | %v |\n", r.Name, r.Ops, r.opsPerSec(), r.P50.Round(time.Microsecond), r.P99.Round(time.Microsecond))
	}
	for i := 1; i+1 < len(results); i += 2 {
		g, p := results[i], results[i+1]
		if !strings.HasPrefix(p.Name, "python") {
			continue
		}
		what := "fabric API"
		if strings.Contains(g.Name, "composer") {
			what = "composition API"
		}
		fmt.Fprintf(&b, "\n%s: redfish driver / python-redfish-library: %.2fx the throughput, p50 %.2fx, p99 %.2fx\n",
			what, g.opsPerSec()/p.opsPerSec(), float64(g.P50)/float64(p.P50), float64(g.P99)/float64(p.P99))
	}
	fmt.Print(b.String())
	if err := os.MkdirAll(out, 0o755); err != nil {
		childproc.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(out, "southbound.md"), []byte(b.String()), 0o644); err != nil {
		childproc.Fatal(err)
	}
	data, _ := json.MarshalIndent(results, "", "  ")
	if err := os.WriteFile(filepath.Join(out, "southbound.json"), data, 0o644); err != nil {
		childproc.Fatal(err)
	}
}
