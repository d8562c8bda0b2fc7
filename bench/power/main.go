// Command power benchmarks power and boot operations through rackpool's
// Redfish service beside sushy-emulator (sushy-tools, the BMC emulator the
// OpenStack Ironic project tests against) with its fake driver
// (docs/benchmarks.md, "Power and boot"):
//
//   - ComputerSystem.Reset, On and ForceOff alternately,
//   - a PATCH of Boot (BootSourceOverrideEnabled Once, the target Pxe and
//     Hdd alternately),
//   - a GET of the system,
//
// each by 1 and 4 concurrent clients (-clients), every client on its own
// system and its own keep-alive connection, -ops operations in all per
// run, bounded by -limit. rackpool runs as `rackpool serve` (built from
// ./cmd/rackpool into a temporary directory, or -bin) on the example
// rack, SQLite in a temporary data directory, --fabric-time instant,
// --async-threshold -1s (every answer synchronous), HTTPS; one system composed per client. sushy-emulator runs on
// 127.0.0.1 with one fake system per client, HTTP Basic authentication
// (htpasswd, bcrypt at its lowest cost) and plain HTTP (-sushy-tls for
// HTTPS). Its server (Werkzeug's) closes the connection after every
// answer, so its clients cannot keep one alive: the table's last column
// counts the connections each run opened after its warm-up.
//
// What a reset measures differs: rackpool's answers when the new state is
// recorded durably (the transition and its outcome, two commits), while
// the fake driver only records a pending state that applies 1 to 11 s
// later, on the next read, so for sushy-emulator it measures the request.
//
// It also prints what each service does with $filter on the Systems
// collection, and the time of one $filter on the example rack's
// ResourceBlocks.
//
//	go run ./bench/power [-clients 1,4] [-ops 400] [-limit 30s] [-bin FILE]
//	    [-sushy .venv-rf/bin/sushy-emulator] [-sushy-tls]
package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/crypto/bcrypt"

	"rackpool/api"
	"rackpool/bench/internal/harness"
	"rackpool/internal/childproc"
	"rackpool/internal/pki"
)

const (
	rackpoolUser = "Administrator"
	sushyUser    = "bench"
	password     = "bench-power-1"
)

// hostBlocks are the example rack's blocks composed for client i: its
// host and a drive it reaches (PCIe drawer or SAS).
var hostBlocks = [][]string{{"host1", "nvme1"}, {"host2", "nvme2"}, {"host3", "hdd1"}, {"host4", "nvme3"}}

// service is one Redfish service under test.
type service struct {
	name      string
	url       string // scheme://host:port
	user      string
	tls       *tls.Config // nil for plain HTTP
	systems   []string    // one system path per client
	on        []bool      // the power state each system was last told
	stop      func()
	dialCount atomic.Int64
}

// client is one keep-alive connection to s, with Basic authentication.
func (s *service) client() *http.Client {
	d := &net.Dialer{Timeout: 5 * time.Second}
	return &http.Client{Timeout: 60 * time.Second, Transport: &http.Transport{
		TLSClientConfig:     s.tls,
		MaxIdleConnsPerHost: 1,
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			s.dialCount.Add(1)
			return d.DialContext(ctx, network, addr)
		},
	}}
}

// do sends one request and reads the whole answer.
func (s *service) do(hc *http.Client, method, path string, body any) (int, []byte, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return 0, nil, err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, s.url+path, rd)
	if err != nil {
		return 0, nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.SetBasicAuth(s.user, password)
	resp, err := hc.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	return resp.StatusCode, data, err
}

// op is one kind of measured request: what client i sends on its system
// as its k-th operation of the run.
type op struct {
	name string
	send func(s *service, hc *http.Client, i, k int) (int, []byte, error)
}

var ops = []op{
	{"Reset On / ForceOff", func(s *service, hc *http.Client, i, _ int) (int, []byte, error) {
		t := "On"
		if s.on[i] {
			t = "ForceOff"
		}
		s.on[i] = !s.on[i]
		return s.do(hc, http.MethodPost, s.systems[i]+"/Actions/ComputerSystem.Reset", map[string]string{"ResetType": t})
	}},
	{"PATCH Boot (Once, Pxe / Hdd)", func(s *service, hc *http.Client, i, k int) (int, []byte, error) {
		target := []string{"Pxe", "Hdd"}[k%2]
		return s.do(hc, http.MethodPatch, s.systems[i], map[string]any{"Boot": map[string]string{
			"BootSourceOverrideEnabled": "Once", "BootSourceOverrideTarget": target}})
	}},
	{"GET system", func(s *service, hc *http.Client, i, _ int) (int, []byte, error) {
		return s.do(hc, http.MethodGet, s.systems[i], nil)
	}},
}

// result is one run's measurement.
type result struct {
	op, service  string
	clients, ops int
	seconds      float64
	p50, p99     time.Duration
	dials        int64
	reachedLimit bool
}

func main() {
	clientList := flag.String("clients", "1,4", "numbers of concurrent clients, each on its own system and connection (at most 4: the example rack's hosts)")
	nops := flag.Int("ops", 400, "operations per run (operation, service, clients), shared among the clients")
	limit := flag.Duration("limit", 30*time.Second, "time limit of one run; a run that reaches it reports what it did")
	bin := flag.String("bin", "", "rackpool binary (default: built from ./cmd/rackpool into a temporary directory)")
	sushyBin := flag.String("sushy", "", "sushy-emulator (default: $RACKPOOL_SUSHY_EMULATOR, else .venv-rf/bin/sushy-emulator; scripts/pyenv.sh installs it)")
	sushyTLS := flag.Bool("sushy-tls", false, "serve sushy-emulator over HTTPS too (default: plain HTTP)")
	flag.Parse()
	var clients []int
	for _, f := range strings.Split(*clientList, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 || n > len(hostBlocks) {
			childproc.Fatalf("-clients: %q is not a number from 1 to %d", f, len(hostBlocks))
		}
		clients = append(clients, n)
	}
	if *nops < 2 {
		childproc.Fatal("-ops must be at least 2")
	}
	most := slices.Max(clients)

	work := harness.WorkDir("rp-bench-power")
	defer childproc.RunAtExit()
	rp := harness.Binary(*bin, work)
	sb := *sushyBin
	if sb == "" {
		sb = os.Getenv("RACKPOOL_SUSHY_EMULATOR")
	}
	if sb == "" {
		sb = filepath.Join(".venv-rf", "bin", "sushy-emulator")
	}
	if _, err := os.Stat(sb); err != nil {
		childproc.Fatalf("sushy-emulator: %v (run scripts/pyenv.sh, or give -sushy)", err)
	}

	rpSvc, err := startRackpool(rp, filepath.Join(work, "serve"), most)
	if err != nil {
		childproc.Fatal(err)
	}
	childproc.AtExit(rpSvc.stop)
	suSvc, err := startSushy(sb, filepath.Join(work, "sushy"), most, *sushyTLS)
	if err != nil {
		childproc.Fatal(err)
	}
	childproc.AtExit(suSvc.stop)

	fmt.Printf("# rackpool power benchmark\n\n%s, %d CPUs, %s; rackpool serve --fabric-time instant (SQLite, HTTPS) and sushy-emulator (fake driver, %s), Basic authentication, one system and one client connection (kept alive where the server allows) per client, %d operations per run, limit %s\n\n",
		time.Now().UTC().Format("2006-01-02"), runtime.NumCPU(), runtime.Version(), map[bool]string{false: "HTTP", true: "HTTPS"}[*sushyTLS], *nops, *limit)
	fmt.Println("| operation | service | clients | ops | ops/s | p50 | p99 | p50 rackpool/sushy | connections |")
	fmt.Println("|---|---|---|---|---|---|---|---|---|")
	for _, o := range ops {
		for _, c := range clients {
			// The services take turns, so a disturbance of the shared
			// machine falls on both rather than on one.
			r := run(rpSvc, o, c, *nops, *limit)
			s := run(suSvc, o, c, *nops, *limit)
			row(r, fmt.Sprintf("%.2f×", float64(r.p50)/float64(max(s.p50, 1))))
			row(s, "")
		}
	}
	// rackpool's systems must be in the state they were last told.
	hc := rpSvc.client()
	for i, p := range rpSvc.systems[:most] {
		var sys struct{ PowerState string }
		status, body, err := rpSvc.do(hc, http.MethodGet, p, nil)
		if err == nil && status == http.StatusOK {
			err = json.Unmarshal(body, &sys)
		}
		want := map[bool]string{false: "Off", true: "On"}[rpSvc.on[i]]
		if err != nil || sys.PowerState != want {
			childproc.Fatalf("rackpool %s: PowerState %q after the run, want %s (%d, %v)", p, sys.PowerState, want, status, err)
		}
	}
	fmt.Println()
	filters(rpSvc, suSvc)
}

func row(r result, ratio string) {
	note := ""
	if r.reachedLimit {
		note = " (time limit)"
	}
	fmt.Printf("| %s | %s | %d | %d%s | %.0f | %s | %s | %s | %d |\n", r.op, r.service, r.clients, r.ops, note,
		float64(r.ops)/r.seconds, ms(r.p50), ms(r.p99), ratio, r.dials)
}

func ms(d time.Duration) string { return fmt.Sprintf("%.2f ms", float64(d.Microseconds())/1000) }

// run measures o on s with c clients, n operations in all (at most limit
// long). Each client warms its connection with two GETs first; any answer
// other than 2xx ends the benchmark.
func run(s *service, o op, c, n int, limit time.Duration) result {
	hcs := make([]*http.Client, c)
	for i := range c {
		hcs[i] = s.client()
		for range 2 {
			if status, body, err := s.do(hcs[i], http.MethodGet, s.systems[i], nil); err != nil || status != http.StatusOK {
				childproc.Fatalf("%s: warm-up GET %s: %d %v %s", s.name, s.systems[i], status, err, body)
			}
		}
	}
	dials0 := s.dialCount.Load()
	lats := make([][]time.Duration, c)
	var wg sync.WaitGroup
	var reached atomic.Bool
	start := time.Now()
	deadline := start.Add(limit)
	for i := range c {
		share := n / c
		if i < n%c {
			share++
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			lat := make([]time.Duration, 0, share)
			for k := range share {
				if time.Now().After(deadline) {
					reached.Store(true)
					break
				}
				t := time.Now()
				status, body, err := o.send(s, hcs[i], i, k)
				d := time.Since(t)
				// 202 would be a task still running: not what is measured.
				if err != nil || status/100 != 2 || status == http.StatusAccepted {
					childproc.Fatalf("%s: %s on %s: %d %v %s", s.name, o.name, s.systems[i], status, err, body)
				}
				lat = append(lat, d)
			}
			lats[i] = lat
		}()
	}
	wg.Wait()
	took := time.Since(start)
	for _, hc := range hcs {
		hc.CloseIdleConnections()
	}
	all := slices.Concat(lats...)
	slices.Sort(all)
	return result{op: o.name, service: s.name, clients: c, ops: len(all), seconds: took.Seconds(),
		p50: harness.Percentile(all, 50), p99: harness.Percentile(all, 99), dials: s.dialCount.Load() - dials0, reachedLimit: reached.Load()}
}

// filters prints what each service does with $filter on its Systems
// collection, and the time of a $filter on rackpool's ResourceBlocks.
func filters(rpSvc, suSvc *service) {
	hc := func(s *service) *http.Client { return s.client() }
	members := func(s *service, h *http.Client, q string) (int, int, string) {
		status, body, err := s.do(h, http.MethodGet, "/redfish/v1/Systems"+q, nil)
		if err != nil {
			childproc.Fatalf("%s: GET Systems%s: %v", s.name, q, err)
		}
		var coll struct {
			Members []json.RawMessage
		}
		if json.Unmarshal(body, &coll) != nil {
			return status, -1, strings.TrimSpace(string(body[:min(len(body), 200)]))
		}
		return status, len(coll.Members), ""
	}
	for _, s := range []*service{rpSvc, suSvc} {
		h := hc(s)
		// A filter no member matches: a service that applies it answers
		// 0 members, one that ignores it the whole collection.
		_, all, _ := members(s, h, "")
		status, n, text := members(s, h, "?$filter="+escape("Id eq 'no-such-system'"))
		bstatus, bn, btext := members(s, h, "?$filter="+escape("Id eq"))
		fmt.Printf("- %s: GET /redfish/v1/Systems (%d members) with $filter=Id eq 'no-such-system': %d, %d members%s; with the malformed $filter=Id eq: %d, %d members%s\n",
			s.name, all, status, n, quote(text), bstatus, bn, quote(btext))
	}
	h := hc(rpSvc)
	q := "/redfish/v1/CompositionService/ResourceBlocks?$filter=" +
		escape("Status/Health eq 'OK' and CompositionStatus/CompositionState eq 'Unused'")
	var lat []time.Duration
	var n int
	for range 20 {
		t := time.Now()
		status, body, err := rpSvc.do(h, http.MethodGet, q, nil)
		lat = append(lat, time.Since(t))
		if err != nil || status != http.StatusOK {
			childproc.Fatalf("rackpool: GET %s: %d %v %s", q, status, err, body)
		}
		var coll struct{ Members []json.RawMessage }
		if err := json.Unmarshal(body, &coll); err != nil {
			childproc.Fatal(err)
		}
		n = len(coll.Members)
	}
	slices.Sort(lat)
	fmt.Printf("- rackpool: GET ResourceBlocks?$filter=Status/Health eq 'OK' and CompositionStatus/CompositionState eq 'Unused' (example rack): %d members, p50 %s of 20\n", n, ms(harness.Percentile(lat, 50)))
}

// escape encodes a query value with %20 for spaces.
func escape(v string) string { return strings.ReplaceAll(url.QueryEscape(v), "+", "%20") }

func quote(text string) string {
	if text == "" {
		return ""
	}
	return fmt.Sprintf(" (body: %q)", text)
}

// process starts bin with args and env (added to this one's, without the
// names in drop) and returns a function that kills it and its exit.
func process(bin string, args, env, drop []string) (func(), <-chan error, *harness.Output, error) {
	cmd := childproc.Command(bin, args...)
	cmd.Env = slices.DeleteFunc(os.Environ(), func(kv string) bool {
		return slices.ContainsFunc(drop, func(name string) bool { return strings.HasPrefix(kv, name+"=") })
	})
	cmd.Env = append(cmd.Env, env...)
	out := &harness.Output{Max: 64 << 10}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		return nil, nil, nil, err
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	var once sync.Once
	stop := func() {
		once.Do(func() {
			_ = cmd.Process.Kill()
			<-exited
		})
	}
	return stop, exited, out, nil
}

// waitReady GETs path on s until it answers 200 (30 s at most).
func waitReady(s *service, path string, exited <-chan error, out *harness.Output) error {
	hc := s.client()
	defer hc.CloseIdleConnections()
	deadline := time.Now().Add(30 * time.Second)
	for {
		status, _, err := s.do(hc, http.MethodGet, path, nil)
		if err == nil && status == http.StatusOK {
			return nil
		}
		select {
		case err := <-exited:
			return fmt.Errorf("%s exited: %v\n%s", s.name, err, out)
		default:
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s did not answer on %s within 30 s (last: %d %v)\n%s", s.name, s.url, status, err, out)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// startRackpool runs `rackpool serve` on the example rack (SQLite in dir,
// --fabric-time instant, never a task monitor, HTTPS) and composes n systems, one per client.
func startRackpool(bin, dir string, n int) (*service, error) {
	addr, err := harness.FreeAddr()
	if err != nil {
		return nil, err
	}
	data := filepath.Join(dir, "data")
	stop, exited, out, err := process(bin, []string{"serve", "--addr", addr, "--data", data, "--store", "sqlite", "--fabric-time", "instant",
		// The reset's estimate is the host's modelled time (5 s to power
		// on) even with an instant clock; without this, On answers 202 and
		// a task monitor before the reset is done.
		"--async-threshold", "-1s"},
		[]string{"RACKPOOL_ADMIN_PASSWORD=" + password}, []string{"RACKPOOL_ADMIN_PASSWORD", "RACKPOOL_STORE"})
	if err != nil {
		return nil, err
	}
	s := &service{name: "rackpool", url: "https://" + addr, user: rackpoolUser, stop: stop}
	// serve writes its CA before it listens.
	deadline := time.Now().Add(30 * time.Second)
	caFile := filepath.Join(data, "tls", pki.CAFile)
	for {
		if s.tls, err = api.TLSConfig(caFile); err == nil {
			break
		}
		select {
		case xerr := <-exited:
			return nil, fmt.Errorf("rackpool serve exited: %v\n%s", xerr, out)
		default:
		}
		if time.Now().After(deadline) {
			stop()
			return nil, fmt.Errorf("rackpool serve wrote no CA: %v\n%s", err, out)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err := waitReady(s, "/redfish/v1/Systems", exited, out); err != nil {
		stop()
		return nil, err
	}
	c := api.New(s.url, rackpoolUser, password)
	c.HTTP = s.client()
	for i := range n {
		sys, err := c.Compose(context.Background(), api.ComposeRequest{Name: fmt.Sprintf("bench-%d", i+1), Blocks: hostBlocks[i]})
		if err != nil {
			stop()
			return nil, fmt.Errorf("compose %v: %w", hostBlocks[i], err)
		}
		s.systems = append(s.systems, "/redfish/v1/Systems/"+sys.ID)
		s.on = append(s.on, false) // a new system starts Off
	}
	return s, nil
}

// startSushy runs sushy-emulator with its fake driver on 127.0.0.1: n
// systems, Off, HTTP Basic authentication (an htpasswd file with a bcrypt
// hash) and, with useTLS, HTTPS with a certificate of pki's.
func startSushy(bin, dir string, n int, useTLS bool) (*service, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	// The lowest cost, as the emulator checks the hash on every request.
	hash, err := bcrypt.GenerateFromPassword([]byte(password), bcrypt.MinCost)
	if err != nil {
		return nil, err
	}
	htpasswd := filepath.Join(dir, "htpasswd")
	if err := os.WriteFile(htpasswd, []byte(sushyUser+":"+string(hash)+"\n"), 0o600); err != nil {
		return nil, err
	}
	// The config is Python; a JSON string is a Python string literal.
	py := func(v string) string { b, _ := json.Marshal(v); return string(b) }
	var cfg strings.Builder
	fmt.Fprintf(&cfg, "SUSHY_EMULATOR_FAKE_DRIVER = True\n")
	fmt.Fprintf(&cfg, "SUSHY_EMULATOR_STATE_DIR = %s\n", py(filepath.Join(dir, "state")))
	fmt.Fprintf(&cfg, "SUSHY_EMULATOR_AUTH_FILE = %s\n", py(htpasswd))
	fmt.Fprintf(&cfg, "SUSHY_EMULATOR_FAKE_SYSTEMS = [\n")
	s := &service{name: "sushy-emulator", user: sushyUser}
	for i := range n {
		uuid := fmt.Sprintf("6a7c1f2e-0000-4000-8000-%012d", i+1)
		fmt.Fprintf(&cfg, "    {'uuid': %s, 'name': %s, 'power_state': 'Off', 'nics': [{'mac': '00:5c:52:31:3a:%02x', 'ip': '172.22.0.%d'}]},\n",
			py(uuid), py(fmt.Sprintf("bench-%d", i+1)), i, 100+i)
		s.systems = append(s.systems, "/redfish/v1/Systems/"+uuid)
		s.on = append(s.on, false)
	}
	fmt.Fprintf(&cfg, "]\n")
	scheme := "http"
	if useTLS {
		m, err := pki.Ensure(filepath.Join(dir, "tls"), []string{"127.0.0.1"}, time.Now())
		if err != nil {
			return nil, err
		}
		fmt.Fprintf(&cfg, "SUSHY_EMULATOR_SSL_CERT = %s\n", py(filepath.Join(dir, "tls", "server.pem")))
		fmt.Fprintf(&cfg, "SUSHY_EMULATOR_SSL_KEY = %s\n", py(filepath.Join(dir, "tls", "server-key.pem")))
		if s.tls, err = api.TLSConfig(m.CAFile); err != nil {
			return nil, err
		}
		scheme = "https"
	}
	conf := filepath.Join(dir, "emulator.conf")
	if err := os.WriteFile(conf, []byte(cfg.String()), 0o600); err != nil {
		return nil, err
	}
	addr, err := harness.FreeAddr()
	if err != nil {
		return nil, err
	}
	host, port, _ := net.SplitHostPort(addr)
	// SUSHY_EMULATOR_CONFIG would load another config first.
	stop, exited, out, err := process(bin, []string{"--config", conf, "--interface", host, "--port", port}, nil, []string{"SUSHY_EMULATOR_CONFIG"})
	if err != nil {
		return nil, err
	}
	s.url, s.stop = scheme+"://"+addr, stop
	if err := waitReady(s, "/redfish/v1/Systems", exited, out); err != nil {
		stop()
		return nil, err
	}
	return s, nil
}
