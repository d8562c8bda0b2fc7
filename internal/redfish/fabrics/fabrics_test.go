package fabrics

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"rackpool/internal/clock"
	"rackpool/internal/compose"
	"rackpool/internal/fabric"
	"rackpool/internal/fabric/emulated"
	"rackpool/internal/inventory"
	"rackpool/internal/redfish/service"
	"rackpool/internal/rf"
	"rackpool/internal/store"
	"rackpool/internal/store/sqlite"
	"rackpool/internal/tenancy"
	"rackpool/internal/topology"
)

// hider is a hand-written service.Hider: it answers the core's 404 and
// records what it hid.
type hider struct{ hidden []string }

func (h *hider) Hide(_ *http.Request, kind, id string) error {
	h.hidden = append(h.hidden, kind+" "+id)
	return rf.NotFound(kind, id)
}

// quotas is a hand-written Quotas: a fixed quota per tenant.
type quotas map[string]map[inventory.Kind]int

func (q quotas) Quota(tenant string) (map[inventory.Kind]int, []store.ObjectRef) {
	return q[tenant], nil
}

// fixture is a Service over the default topology's emulated fabrics and a
// composition manager on them, whose health reading reports sick as
// Critical (and every other device OK).
type fixture struct {
	*Service
	mgr     *compose.Manager
	drivers map[string]fabric.Driver
	hider   *hider
}

func newService(t *testing.T, sick string, q quotas) *fixture {
	t.Helper()
	top := topology.LoadDefault()
	st, err := sqlite.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	clk := clock.NewManual(time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC))
	drivers, err := emulated.NewAll(top, clk)
	if err != nil {
		t.Fatal(err)
	}
	mgr, err := compose.New(context.Background(), compose.Options{Topology: top, Store: st, Drivers: drivers, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	health := func(_ context.Context, d *inventory.Device) fabric.Health {
		if d.ID == sick {
			return fabric.Critical
		}
		return fabric.OK
	}
	h := &hider{}
	chunks := func(*inventory.Fabric, []string) []map[string]any { return nil }
	s := New(Deps{Topology: top, Mgr: mgr, Health: health, MemoryChunks: chunks, Quotas: q, Hider: h, Logger: slog.New(slog.DiscardHandler)})
	return &fixture{Service: s, mgr: mgr, drivers: drivers, hider: h}
}

// call runs the handler Routes has for pattern on target as principal p.
func call(t *testing.T, s *fixture, pattern, target, body string, p tenancy.Principal) (*httptest.ResponseRecorder, error) {
	t.Helper()
	for _, rt := range Routes {
		if rt.Pattern != pattern {
			continue
		}
		method, _, _ := strings.Cut(pattern, " ")
		r := httptest.NewRequest(method, target, strings.NewReader(body))
		if body != "" {
			r.Header.Set("Content-Type", "application/json")
		}
		r = r.WithContext(service.WithPrincipal(r.Context(), p))
		// The pattern's wildcards, from the target's segments.
		ps, ts := strings.Split(strings.TrimPrefix(pattern, method+" "), "/"), strings.Split(target, "/")
		for i, seg := range ps {
			if strings.HasPrefix(seg, "{") && i < len(ts) {
				r.SetPathValue(strings.Trim(seg, "{}"), ts[i])
			}
		}
		w := httptest.NewRecorder()
		return w, rt.Handler(s.Service, w, r)
	}
	t.Fatalf("no route %s", pattern)
	return nil, nil
}

func get(t *testing.T, s *fixture, pattern, target string, p tenancy.Principal) map[string]any {
	t.Helper()
	w, err := call(t, s, pattern, target, "", p)
	if err != nil {
		t.Fatalf("GET %s: %v", target, err)
	}
	var body map[string]any
	if err := json.Unmarshal(w.Body.Bytes(), &body); err != nil {
		t.Fatalf("GET %s: %v", target, err)
	}
	return body
}

func members(t *testing.T, body map[string]any) []string {
	t.Helper()
	var out []string
	for _, m := range body["Members"].([]any) {
		id := m.(map[string]any)["@odata.id"].(string)
		out = append(out, id[strings.LastIndex(id, "/")+1:])
	}
	return out
}

// hostPort is host1's port on falcon1, and block the block of device dev.
func hostPort(t *testing.T, top *topology.Topology, dev string) (port, block string) {
	t.Helper()
	for _, b := range top.Blocks {
		if b.Device != nil && b.Device.ID == dev {
			block = b.ID
		}
	}
	for _, hp := range top.Host("host1").Ports {
		if hp.Fabric.ID == "falcon1" {
			port = hp.ID
		}
	}
	if block == "" || port == "" {
		t.Fatalf("default topology has no %s on falcon1 for host1", dev)
	}
	return port, block
}

// TestZonesFollowCompositions: a zone per host port, holding the devices
// the live compositions attach through it; another tenant's composition
// does not show.
func TestZonesFollowCompositions(t *testing.T) {
	s := newService(t, "", nil)
	admin := tenancy.Principal{User: "admin"}
	if got := members(t, get(t, s, "GET /redfish/v1/Fabrics/{id}/Zones", "/redfish/v1/Fabrics/falcon1/Zones", admin)); len(got) != 0 {
		t.Fatalf("zones before any composition: %v", got)
	}
	_, block := hostPort(t, s.top, "gpu1")
	if _, err := s.mgr.Compose(context.Background(), compose.Request{Name: "c1", Tenant: "acme", Host: "host1", Blocks: []string{block}}); err != nil {
		t.Fatal(err)
	}
	zones := members(t, get(t, s, "GET /redfish/v1/Fabrics/{id}/Zones", "/redfish/v1/Fabrics/falcon1/Zones", admin))
	if len(zones) != 1 || !strings.HasPrefix(zones[0], "host1-") {
		t.Fatalf("zones %v, want one of host1's ports", zones)
	}
	z := get(t, s, "GET /redfish/v1/Fabrics/{id}/Zones/{zone}", "/redfish/v1/Fabrics/falcon1/Zones/"+zones[0], admin)
	var eps []string
	for _, l := range z["Links"].(map[string]any)["Endpoints"].([]any) {
		id := l.(map[string]any)["@odata.id"].(string)
		eps = append(eps, id[strings.LastIndex(id, "/")+1:])
	}
	if !slices.Equal(eps, []string{zones[0], "gpu1"}) {
		t.Fatalf("zone endpoints %v, want [%s gpu1]", eps, zones[0])
	}
	other := tenancy.Principal{User: "bob", Tenant: "other"}
	if got := members(t, get(t, s, "GET /redfish/v1/Fabrics/{id}/Zones", "/redfish/v1/Fabrics/falcon1/Zones", other)); len(got) != 0 {
		t.Fatalf("another tenant sees zones %v", got)
	}
	_, err := call(t, s, "GET /redfish/v1/Fabrics/{id}/Zones/{zone}", "/redfish/v1/Fabrics/falcon1/Zones/"+zones[0], "", other)
	if p := problem(t, err); p.Status != http.StatusNotFound {
		t.Fatalf("another tenant's zone: %d, want 404", p.Status)
	}
}

// TestEndpointHealth: a device's endpoint reports the health the core
// reads, and links its resource blocks.
func TestEndpointHealth(t *testing.T) {
	s := newService(t, "gpu1", nil)
	admin := tenancy.Principal{User: "admin"}
	ep := get(t, s, "GET /redfish/v1/Fabrics/{id}/Endpoints/{ep}", "/redfish/v1/Fabrics/falcon1/Endpoints/gpu1", admin)
	if h := ep["Status"].(map[string]any)["Health"]; h != string(fabric.Critical) {
		t.Fatalf("gpu1 health %v, want %s", h, fabric.Critical)
	}
	blocks := ep["Oem"].(map[string]any)["Rackpool"].(map[string]any)["ResourceBlocks"].([]any)
	if len(blocks) == 0 || !strings.HasPrefix(blocks[0].(map[string]any)["@odata.id"].(string), service.BlocksPath) {
		t.Fatalf("gpu1 blocks %v", blocks)
	}
	ep = get(t, s, "GET /redfish/v1/Fabrics/{id}/Endpoints/{ep}", "/redfish/v1/Fabrics/falcon1/Endpoints/gpu2", admin)
	if h := ep["Status"].(map[string]any)["Health"]; h != string(fabric.OK) {
		t.Fatalf("gpu2 health %v, want OK", h)
	}
	_, err := call(t, s, "GET /redfish/v1/Fabrics/{id}/Endpoints/{ep}", "/redfish/v1/Fabrics/falcon1/Endpoints/nope", "", admin)
	if p := problem(t, err); p.Status != http.StatusNotFound || !strings.HasSuffix(p.ID, "ResourceNotFound") {
		t.Fatalf("unknown endpoint: %+v", p)
	}
}

// TestInjectFault: a known kind reaches the emulated driver (the next
// discovery shows the device failed); an unknown kind or fabric is
// refused with its Redfish message.
func TestInjectFault(t *testing.T) {
	s := newService(t, "", nil)
	admin := tenancy.Principal{User: "admin"}
	const inject = "POST /redfish/v1/Fabrics/{id}/Actions/Oem/Rackpool.InjectFault"
	w, err := call(t, s, inject, "/redfish/v1/Fabrics/falcon1/Actions/Oem/Rackpool.InjectFault", `{"Kind":"device-fails","Target":"gpu2"}`, admin)
	if err != nil || w.Code != http.StatusNoContent {
		t.Fatalf("inject: %d %v", w.Code, err)
	}
	st, err := s.drivers["falcon1"].Discover(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if h := st.Health["gpu2"]; h == fabric.OK || h == "" {
		t.Fatalf("gpu2 health after device-fails: %q", h)
	}
	_, err = call(t, s, inject, "/redfish/v1/Fabrics/falcon1/Actions/Oem/Rackpool.InjectFault", `{"Kind":"melts"}`, admin)
	if p := problem(t, err); p.Status != http.StatusBadRequest || !strings.HasSuffix(p.ID, "PropertyValueIncorrect") {
		t.Fatalf("unknown kind: %+v", p)
	}
	_, err = call(t, s, inject, "/redfish/v1/Fabrics/nope/Actions/Oem/Rackpool.InjectFault", `{"Kind":"device-fails"}`, admin)
	if p := problem(t, err); p.Status != http.StatusNotFound {
		t.Fatalf("unknown fabric: %+v", p)
	}
	w, err = call(t, s, "POST /redfish/v1/Fabrics/{id}/Actions/Oem/Rackpool.ClearFaults", "/redfish/v1/Fabrics/falcon1/Actions/Oem/Rackpool.ClearFaults", "", admin)
	if err != nil || w.Code != http.StatusNoContent {
		t.Fatalf("clear: %d %v", w.Code, err)
	}
	if st, _ := s.drivers["falcon1"].Discover(context.Background()); st.Health["gpu2"] != fabric.OK && st.Health["gpu2"] != "" {
		t.Fatalf("gpu2 health after ClearFaults: %q", st.Health["gpu2"])
	}
}

func problem(t *testing.T, err error) *rf.Problem {
	t.Helper()
	var p *rf.Problem
	if !errors.As(err, &p) {
		t.Fatalf("error %v, want a Redfish problem", err)
	}
	return p
}

// TestConnections: a Connection composes a system on the initiator's host
// holding the targets' blocks, shows as that system's view from the
// fabric, is hidden from another tenant, and its DELETE decomposes the
// system; a tenant's quota holds.
func TestConnections(t *testing.T) {
	s := newService(t, "", quotas{"small": {inventory.GPU: 0}})
	acme := tenancy.Principal{User: "a", Tenant: "acme"}
	port, block := hostPort(t, s.top, "gpu1")
	const coll = "/redfish/v1/Fabrics/falcon1/Connections"
	body := `{"Links":{"InitiatorEndpoints":[{"@odata.id":"/redfish/v1/Fabrics/falcon1/Endpoints/host1-` + port + `"}],
		"TargetEndpoints":[{"@odata.id":"/redfish/v1/Fabrics/falcon1/Endpoints/gpu1"}]}}`
	w, err := call(t, s, "POST /redfish/v1/Fabrics/{id}/Connections", coll, body, acme)
	if err != nil || w.Code != http.StatusCreated {
		t.Fatalf("POST: %d %v", w.Code, err)
	}
	sys := s.mgr.List()
	if len(sys) != 1 || sys[0].Tenant != "acme" || !slices.Contains(sys[0].Blocks, block) {
		t.Fatalf("compositions after POST: %+v", sys)
	}
	if loc := w.Header().Get("Location"); loc != coll+"/"+sys[0].ID {
		t.Fatalf("Location %q", loc)
	}
	c := get(t, s, "GET /redfish/v1/Fabrics/{id}/Connections/{conn}", coll+"/"+sys[0].ID, acme)
	if id := c["Oem"].(map[string]any)["Rackpool"].(map[string]any)["System"].(map[string]any)["@odata.id"]; id != "/redfish/v1/Systems/"+sys[0].ID {
		t.Fatalf("connection's system %v", id)
	}
	other := tenancy.Principal{User: "b", Tenant: "other"}
	if got := members(t, get(t, s, "GET /redfish/v1/Fabrics/{id}/Connections", coll, other)); len(got) != 0 {
		t.Fatalf("another tenant lists %v", got)
	}
	_, err = call(t, s, "GET /redfish/v1/Fabrics/{id}/Connections/{conn}", coll+"/"+sys[0].ID, "", other)
	if p := problem(t, err); p.Status != http.StatusNotFound || !slices.Equal(s.hider.hidden, []string{"Connection " + sys[0].ID}) {
		t.Fatalf("another tenant's GET: %+v, hidden %v", p, s.hider.hidden)
	}
	w, err = call(t, s, "DELETE /redfish/v1/Fabrics/{id}/Connections/{conn}", coll+"/"+sys[0].ID, "", acme)
	if err != nil || w.Code != http.StatusNoContent {
		t.Fatalf("DELETE: %d %v", w.Code, err)
	}
	if sys := s.mgr.List(); len(sys) != 0 {
		t.Fatalf("compositions after DELETE: %+v", sys)
	}
	_, err = call(t, s, "POST /redfish/v1/Fabrics/{id}/Connections", coll, body, tenancy.Principal{User: "s", Tenant: "small"})
	if !errors.Is(err, compose.ErrQuota) || len(s.mgr.List()) != 0 {
		t.Fatalf("POST over quota: %v, compositions %v", err, s.mgr.List())
	}
	_, err = call(t, s, "POST /redfish/v1/Fabrics/{id}/Connections", coll, `{"Links":{"TargetEndpoints":[]}}`, acme)
	if p := problem(t, err); !strings.HasSuffix(p.ID, "PropertyMissing") {
		t.Fatalf("no initiator: %+v", p)
	}
}
