package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"rackpool/api"
	"rackpool/internal/childproc"
	"rackpool/internal/fabric"
	"rackpool/internal/fabric/discover"
	"rackpool/internal/fabric/rfdriver"
	"rackpool/internal/topology"
)

// The composition API (docs/southbound.md, "A vendor composer"): a
// rackpool serve on the example rack is the composer; gpu1 is composed
// into host1's system and out again, by rackpool's redfish driver in
// composition mode and by the DMTF Python Redfish library doing the same
// protocol steps, both over HTTPS to the same server.

var composed = fabric.Attachment{Block: "gpu1", Device: "gpu1", Host: "host1", HostPort: discover.DefaultComposerFabric}

// composer starts bin serve as a composer and returns its URL, its CA
// file and a stop function.
func composer(bin string) (url, ca string, stop func()) {
	dir, err := os.MkdirTemp("", "bench-composer-")
	if err != nil {
		childproc.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		childproc.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	cmd := childproc.Command(bin, "serve", "--addr", addr, "--data", dir, "--fabric-time", "instant")
	cmd.Env = append(os.Environ(), "RACKPOOL_ADMIN_PASSWORD="+password)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		childproc.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		childproc.Fatal(err)
	}
	stop = func() {
		childproc.Stop(cmd)
		_ = cmd.Wait()
		os.RemoveAll(dir)
	}
	up := make(chan error, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		var seen strings.Builder
		for sc.Scan() {
			seen.WriteString(sc.Text() + "\n")
			if strings.Contains(sc.Text(), "rackpool serving") {
				up <- nil
				_, _ = io.Copy(io.Discard, stderr)
				return
			}
		}
		up <- fmt.Errorf("serve ended before serving:\n%s", seen.String())
	}()
	select {
	case err := <-up:
		if err != nil {
			stop()
			childproc.Fatal(err)
		}
	case <-time.After(60 * time.Second):
		stop()
		childproc.Fatal("the composer did not come up in 60 s")
	}
	return "https://" + addr, filepath.Join(dir, "tls", "ca.pem"), stop
}

// composerResults measures the driver and the peer against a composer
// served by bin.
func composerResults(bin, python string, cycles int) []result {
	url, ca, stop := composer(bin)
	defer stop()
	ctx := context.Background()
	g, err := discover.NewHTTPGetter(discover.HTTPOptions{URL: url, User: user, Password: password, CAFile: ca})
	if err != nil {
		childproc.Fatal(err)
	}
	res, err := discover.Walk(ctx, g.Get, discover.Options{Composition: true})
	g.Close()
	if err != nil {
		childproc.Fatal(err)
	}
	draft, err := res.Topology(discover.TopologyOptions{Source: url, User: user, CAFile: ca})
	if err != nil {
		childproc.Fatal(err)
	}
	y, err := draft.YAML()
	if err != nil {
		childproc.Fatal(err)
	}
	top, err := topology.Parse("composer.yaml", y)
	if err != nil {
		childproc.Fatal(err)
	}
	tlsConf, err := api.TLSConfig(ca)
	if err != nil {
		childproc.Fatal(err)
	}
	d, err := rfdriver.New(ctx, rfdriver.Options{Topology: top, Fabric: discover.DefaultComposerFabric, URL: url, Composition: true,
		User: user, Password: password, TLS: tlsConf, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		childproc.Fatal(err)
	}
	out := []result{measureOf("redfish driver (Go) → composer (rackpool serve)", cycles, d, composed)}
	if st, err := d.Discover(ctx); err != nil || len(st.Attachments) != 0 {
		childproc.Fatalf("the composer is not back to empty after the run: %v %v", st.Attachments, err)
	}
	_ = d.Close(ctx)
	if python != "" {
		r, err := composerPeer(python, url, ca, cycles)
		if err != nil {
			childproc.Fatalf("python-redfish peer (composer): %v", err)
		}
		out = append(out, r)
	}
	return out
}

// composerPeerScript composes gpu1 into host1's system and out again as
// the driver does: read the composed systems (the collection, then each
// member), then POST a system of host1 and gpu1, or DELETE it with
// If-Match its ETag.
const composerPeerScript = `
import json, sys, time
import redfish
url, user, password, ca, cycles = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5])
c = redfish.redfish_client(base_url=url, username=user, password=password, cafile=ca)
c.login(auth="session")
rb = "/redfish/v1/CompositionService/ResourceBlocks/"
host, gpu = rb + "host1", rb + "gpu1"
` + peerFinish + `
def mine():
    for m in c.get("/redfish/v1/Systems").dict["Members"]:
        r = c.get(m["@odata.id"])
        s = r.dict
        if s.get("SystemType") == "Composed" and any(l["@odata.id"] == host for l in s["Links"]["ResourceBlocks"]):
            return m["@odata.id"], r.getheader("ETag")
    return None, None

def attach():
    sysuri, _ = mine()
    if sysuri is None:
        finish(c.post("/redfish/v1/Systems", body={"Name": "peer", "Links": {"ResourceBlocks": [{"@odata.id": host}, {"@odata.id": gpu}]}}))

def detach():
    sysuri, etag = mine()
    if sysuri is not None:
        finish(c.delete(sysuri, headers={"If-Match": etag}))

for _ in range(10):
    attach(); detach()
lat = []
start = time.perf_counter()
for _ in range(cycles):
    for op in (attach, detach):
        t = time.perf_counter()
        op()
        lat.append(time.perf_counter() - t)
total = time.perf_counter() - start
c.logout()
print(json.dumps({"lat": lat, "total": total}))
`

func composerPeer(python, url, ca string, cycles int) (result, error) {
	cmd := childproc.Command(python, "-c", composerPeerScript, url, user, password, ca, fmt.Sprint(cycles))
	return runPeer(cmd, "python-redfish-library (peer) → composer (rackpool serve)")
}

// runPeer runs a peer script and reads its latencies.
func runPeer(cmd *exec.Cmd, name string) (result, error) {
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return result{}, fmt.Errorf("%v: %s", err, stderr.String())
	}
	var got struct {
		Lat   []float64
		Total float64
	}
	if err := json.Unmarshal(out, &got); err != nil {
		return result{}, fmt.Errorf("peer output: %v", err)
	}
	lat := make([]time.Duration, len(got.Lat))
	for i, s := range got.Lat {
		lat[i] = time.Duration(s * float64(time.Second))
	}
	return summarize(name, lat, time.Duration(got.Total*float64(time.Second))), nil
}
