package redfish_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"rackpool/internal/clock"
	"rackpool/internal/compose"
	"rackpool/internal/drive"
	"rackpool/internal/events"
	"rackpool/internal/fabric"
	"rackpool/internal/fabric/emulated"
	"rackpool/internal/hostagent"
	"rackpool/internal/lease"
	"rackpool/internal/memory"
	"rackpool/internal/metrics"
	"rackpool/internal/observe"
	"rackpool/internal/provision"
	"rackpool/internal/redfish"
	"rackpool/internal/store/sqlite"
	"rackpool/internal/telemetry"
	"rackpool/internal/tenancy"
	"rackpool/internal/topology"
)

// The example rack (examples/rack.yaml), as these tests rely on it:
//
//	host1..host4, each with ports pcie, sas, ocs-a, ocs-b, eth
//	falcon1 (pcie-switch): drawer1 (advanced, H1-H3): gpu1-4 (V100),
//	  nvme1-2, nic1, fpga1; drawer2 (two hosts): slots 1-4 (gpu5-8, A100)
//	  reach only host2, slots 5-8 (nvme3-4, nic2, fpga2) only host4
//	sas1: hdd1-16, ssd1-8          vlan1: essd1-4
//	ocs1: memnode1, memnode2 (64 × 8 GiB blocks each: memnode1-b01, ...)

// password is the Administrator password of every test service. It is
// distinctive so that a test can look for it in response bodies.
const password = "Pw-7f3a9c-never-echo"

// idle is the session idle limit the tests' Auth runs with.
const idle = 10 * time.Minute

// service is one Redfish service over a real SQLite store and emulated
// fabrics. The fabrics run on fabClk, the sessions on authClk, so a test
// can age sessions without touching fabric time.
type service struct {
	t       testing.TB
	handler *redfish.Server
	srv     *httptest.Server
	mgr     *compose.Manager
	authClk *clock.Manual
	auth    *tenancy.Service
	bus     *events.Bus
	obs     *observe.Observer
	drivers map[string]fabric.Driver
	store   *sqlite.Store
	monitor *events.Monitor
	fabClk  *clock.Manual
	leases  *lease.Manager
	drives  *drive.Manager
	tel     *telemetry.Store // on fabClk
	prov    *provision.Loop  // dry-run, stepped by the tests
	memnode *memory.Server   // the last startMemnode started
	logs    *logBuffer       // the service's log
	// schedules counts the scheduler's decisions (compose.Options.OnSchedule).
	schedules *atomic.Int64
}

// logBuffer collects a service's log lines.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func newService(t testing.TB) *service {
	t.Helper()
	return newServiceOn(t, topology.LoadDefault())
}

// newServiceOn is newService on another topology.
func newServiceOn(t testing.TB, top *topology.Topology) *service {
	t.Helper()
	return newServiceAgents(t, top, nil)
}

// newServiceAgents is newServiceOn whose workflows wait for the host
// agents broker manages (nil: none).
func newServiceAgents(t testing.TB, top *topology.Topology, broker *hostagent.Broker, mods ...func(*redfish.Options)) *service {
	t.Helper()
	return newServiceBus(t, top, broker, events.Options{}, mods...)
}

// newServiceBus is newServiceAgents whose event bus has busOpts (an
// active replica's relays its events through the shared event log).
func newServiceBus(t testing.TB, top *topology.Topology, broker *hostagent.Broker, busOpts events.Options, mods ...func(*redfish.Options)) *service {
	t.Helper()
	ctx := context.Background()
	st, err := sqlite.Open(t.TempDir())
	if err != nil {
		t.Fatalf("open store: %v", err)
	}
	t.Cleanup(func() { _ = st.Close() })
	start := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	s := &service{t: t, authClk: clock.NewManual(start), fabClk: clock.NewManual(start), schedules: new(atomic.Int64)}
	drivers, err := emulated.NewAll(top, s.fabClk)
	if err != nil {
		t.Fatalf("emulated drivers: %v", err)
	}
	s.bus = events.New(busOpts)
	t.Cleanup(s.bus.Close)
	s.obs = observe.New(metrics.NewRegistry(), s.bus)
	s.drivers = drivers
	s.store = st
	opts := compose.Options{Topology: top, Store: st, Drivers: drivers, Clock: s.fabClk,
		OnChange: s.obs.OnChange, OnFabricOp: s.obs.OnFabricOp, OnSchedule: func(took time.Duration, err error) {
			s.schedules.Add(1)
			s.obs.OnSchedule(took, err)
		}}
	if broker != nil {
		opts.Host, opts.HostTimeout = broker, 5*time.Second
	}
	s.mgr, err = compose.New(ctx, opts)
	if err != nil {
		t.Fatalf("compose.New: %v", err)
	}
	auth, _, err := tenancy.Open(ctx, st, tenancy.Options{Clock: s.authClk, IdleTimeout: idle, AdminPassword: password})
	if err != nil {
		t.Fatalf("tenancy.Open: %v", err)
	}
	// Tests that send wrong passwords on purpose must not lock the
	// Administrator out of the rest of the test; the lockout tests
	// turn it back on.
	if err := auth.SetLockout(ctx, tenancy.LockoutPolicy{}); err != nil {
		t.Fatalf("SetLockout: %v", err)
	}
	s.auth = auth
	s.leases, err = lease.New(ctx, lease.Options{Store: st, Topology: top, Placement: s.mgr, Clock: s.fabClk})
	if err != nil {
		t.Fatalf("lease.New: %v", err)
	}
	s.drives, err = drive.New(ctx, drive.Options{Store: st, Topology: top, Holders: s.mgr, Clock: s.fabClk})
	if err != nil {
		t.Fatalf("drive.New: %v", err)
	}
	s.tel, err = telemetry.Open(ctx, telemetry.Options{Store: st, Clock: s.fabClk})
	if err != nil {
		t.Fatalf("telemetry.Open: %v", err)
	}
	s.prov, err = provision.NewLoop(ctx, provision.LoopOptions{Mode: provision.ModeDryRun, Store: st, Compose: s.mgr,
		Telemetry: s.tel, Quota: auth.Quota, Clock: s.fabClk})
	if err != nil {
		t.Fatalf("provision.NewLoop: %v", err)
	}
	s.monitor = events.NewMonitor(s.bus, s.drivers, events.MonitorOptions{})
	s.logs = &logBuffer{}
	o := redfish.Options{Store: st, Observer: s.obs, AsyncThreshold: -1, Leases: s.leases, Health: s.monitor,
		Drives: s.drives, Telemetry: s.tel, Provisioning: s.prov, Broker: broker,
		Logger: slog.New(slog.NewTextHandler(s.logs, nil))}
	for _, mod := range mods {
		mod(&o)
	}
	s.handler = redfish.New(s.mgr, auth, o)
	s.srv = httptest.NewTLSServer(s.handler)
	t.Cleanup(s.srv.Close)
	return s
}

// cred says how a request authenticates.
type cred struct {
	basic bool   // Administrator's Basic credentials
	token string // X-Auth-Token
	hdr   map[string]string
}

var admin = cred{basic: true}

// reply is a response, read in full.
type reply struct {
	status int
	header http.Header
	body   []byte
}

// json decodes the body as a JSON object, failing the test if it is not one.
func (r reply) json(t testing.TB) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(r.body, &m); err != nil {
		t.Fatalf("body is not a JSON object (%v): %s", err, r.body)
	}
	return m
}

// errorCode returns the Redfish error body's error.code, failing the test
// when the body is not a Redfish error.
func (r reply) errorCode(t testing.TB) string {
	t.Helper()
	var e struct {
		Error struct {
			Code string           `json:"code"`
			Info []map[string]any `json:"@Message.ExtendedInfo"`
		} `json:"error"`
	}
	if err := json.Unmarshal(r.body, &e); err != nil || e.Error.Code == "" || len(e.Error.Info) == 0 {
		t.Fatalf("status %d: not a Redfish error body (%v): %s", r.status, err, r.body)
	}
	return e.Error.Code
}

// resolution returns the Resolution of a Redfish error body.
func (r reply) resolution(t testing.TB) string {
	t.Helper()
	var e struct {
		Error struct {
			Info []struct{ Resolution string } `json:"@Message.ExtendedInfo"`
		} `json:"error"`
	}
	if err := json.Unmarshal(r.body, &e); err != nil || len(e.Error.Info) == 0 {
		t.Fatalf("not a Redfish error body (%v): %s", err, r.body)
	}
	return e.Error.Info[0].Resolution
}

// do sends one request. body is sent as is when it is a string, else as
// JSON (nil: no body).
func (s *service) do(method, path string, body any, c cred) reply {
	s.t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	default:
		data, err := json.Marshal(b)
		if err != nil {
			s.t.Fatalf("marshal body: %v", err)
		}
		rd = bytes.NewReader(data)
	}
	req, err := http.NewRequest(method, s.srv.URL+path, rd)
	if err != nil {
		s.t.Fatalf("new request: %v", err)
	}
	if rd != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.basic {
		req.SetBasicAuth(tenancy.AdminUser, password)
	}
	if c.token != "" {
		req.Header.Set("X-Auth-Token", c.token)
	}
	for k, v := range c.hdr {
		req.Header.Set(k, v)
	}
	resp, err := s.srv.Client().Do(req)
	if err != nil {
		s.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		s.t.Fatalf("%s %s: read body: %v", method, path, err)
	}
	if bytes.Contains(data, []byte(password)) {
		s.t.Errorf("%s %s: the password appears in the response body: %s", method, path, data)
	}
	return reply{status: resp.StatusCode, header: resp.Header, body: data}
}

// must sends a request and fails the test unless it answers want.
func (s *service) must(want int, method, path string, body any, c cred) reply {
	s.t.Helper()
	r := s.do(method, path, body, c)
	if r.status != want {
		s.t.Fatalf("%s %s: status %d, want %d: %s", method, path, r.status, want, r.body)
	}
	return r
}

// get GETs path as the Administrator and returns the JSON object.
func (s *service) get(path string) map[string]any {
	s.t.Helper()
	return s.must(http.StatusOK, "GET", path, nil, admin).json(s.t)
}

// blockRef is the Redfish link to resource block id.
func blockRef(id string) map[string]string {
	return map[string]string{"@odata.id": "/redfish/v1/CompositionService/ResourceBlocks/" + id}
}

// specificBody is a specific-composition body: host plus device blocks.
func specificBody(host string, blocks ...string) map[string]any {
	links := []map[string]string{blockRef(host)}
	for _, b := range blocks {
		links = append(links, blockRef(b))
	}
	return map[string]any{"Links": map[string]any{"ResourceBlocks": links}}
}

// compose POSTs body to /Systems, expects 201 and returns the system ID.
func (s *service) compose(body any) string {
	s.t.Helper()
	r := s.must(http.StatusCreated, "POST", "/redfish/v1/Systems", body, admin)
	sys := r.json(s.t)
	id, _ := sys["Id"].(string)
	if id == "" || r.header.Get("Location") != "/redfish/v1/Systems/"+id {
		s.t.Fatalf("compose: Id %q, Location %q", id, r.header.Get("Location"))
	}
	return id
}

// systemBlocks returns the block IDs in a system's Links.ResourceBlocks.
func systemBlocks(t testing.TB, sys map[string]any) []string {
	t.Helper()
	var out []string
	for _, l := range list(t, dig(t, sys, "Links", "ResourceBlocks")) {
		id, _ := l.(map[string]any)["@odata.id"].(string)
		out = append(out, strings.TrimPrefix(id, "/redfish/v1/CompositionService/ResourceBlocks/"))
	}
	return out
}

// links returns the last path element of every @odata.id in a list.
func links(t testing.TB, v any) []string {
	t.Helper()
	var out []string
	for _, l := range list(t, v) {
		m, ok := l.(map[string]any)
		if !ok {
			t.Fatalf("link %v is not an object", l)
		}
		id, _ := m["@odata.id"].(string)
		out = append(out, id[strings.LastIndex(id, "/")+1:])
	}
	return out
}

// dig walks nested objects by key.
func dig(t testing.TB, v any, keys ...string) any {
	t.Helper()
	for _, k := range keys {
		m, ok := v.(map[string]any)
		if !ok {
			t.Fatalf("looking up %q in %v: not an object", k, v)
		}
		if v, ok = m[k]; !ok {
			t.Fatalf("no property %q in %v", k, m)
		}
	}
	return v
}

func list(t testing.TB, v any) []any {
	t.Helper()
	if v == nil {
		return nil
	}
	l, ok := v.([]any)
	if !ok {
		t.Fatalf("%v is not a list", v)
	}
	return l
}

// blockState returns a block's CompositionStatus.CompositionState and
// NumberOfCompositions.
func (s *service) blockState(id string) (string, int) {
	s.t.Helper()
	b := s.get("/redfish/v1/CompositionService/ResourceBlocks/" + id)
	st, _ := dig(s.t, b, "CompositionStatus", "CompositionState").(string)
	n, _ := dig(s.t, b, "CompositionStatus", "NumberOfCompositions").(float64)
	return st, int(n)
}

// systemIDs lists the composed systems (members of /Systems that are not
// physical hosts).
func (s *service) systemIDs() []string {
	s.t.Helper()
	var out []string
	for _, id := range links(s.t, s.get("/redfish/v1/Systems")["Members"]) {
		if strings.HasPrefix(id, "sys-") {
			out = append(out, id)
		}
	}
	return out
}

// pollFabrics runs one pass of the fabric monitor over the service's
// drivers, publishing health and threshold events on its bus.
func (s *service) pollFabrics() error {
	return s.monitor.Poll(context.Background())
}

// newHTTPServer serves h on loopback for the test and returns its URL.
func newHTTPServer(t testing.TB, h http.Handler) string {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv.URL
}
