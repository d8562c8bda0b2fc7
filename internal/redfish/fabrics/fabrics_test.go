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
	"rackpool/internal/fabric"
	"rackpool/internal/fabric/emulated"
	"rackpool/internal/inventory"
	"rackpool/internal/redfish/service"
	"rackpool/internal/rf"
	"rackpool/internal/tenancy"
	"rackpool/internal/topology"
)

// compositions is a hand-written Compositions: the emulated fabrics'
// drivers and a fixed list of compositions.
type compositions struct {
	drivers map[string]fabric.Driver
	list    []*inventory.Composition
}

func (c *compositions) Drivers() map[string]fabric.Driver { return c.drivers }
func (c *compositions) List() []*inventory.Composition    { return c.list }

// newService is a Service over the default topology's emulated fabrics,
// whose health reading reports sick (and OK for every other device).
func newService(t *testing.T, list []*inventory.Composition, sick string) (*Service, *compositions) {
	t.Helper()
	top := topology.LoadDefault()
	drivers, err := emulated.NewAll(top, clock.NewManual(time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)))
	if err != nil {
		t.Fatal(err)
	}
	mgr := &compositions{drivers: drivers, list: list}
	health := func(_ context.Context, d *inventory.Device) fabric.Health {
		if d.ID == sick {
			return fabric.Critical
		}
		return fabric.OK
	}
	return New(Deps{Topology: top, Mgr: mgr, Health: health, Logger: slog.New(slog.DiscardHandler)}), mgr
}

// call runs the handler Routes has for pattern on target as principal p.
func call(t *testing.T, s *Service, pattern, target, body string, p tenancy.Principal) (*httptest.ResponseRecorder, error) {
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
		return w, rt.Handler(s, w, r)
	}
	t.Fatalf("no route %s", pattern)
	return nil, nil
}

func get(t *testing.T, s *Service, pattern, target string, p tenancy.Principal) map[string]any {
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

// attached is a composition of host1 holding the block of device dev on
// falcon1, attached through host1's falcon1 port, owned by tenant.
func attached(t *testing.T, top *topology.Topology, id, dev, tenant string) *inventory.Composition {
	t.Helper()
	var block, port string
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
	return &inventory.Composition{ID: id, Host: "host1", Blocks: []string{block}, Ports: map[string]string{block: port}, Tenant: tenant}
}

// TestZonesFollowCompositions: a zone per host port, holding the devices
// the live compositions attach through it; another tenant's composition
// does not show.
func TestZonesFollowCompositions(t *testing.T) {
	s, mgr := newService(t, nil, "")
	admin := tenancy.Principal{User: "admin"}
	if got := members(t, get(t, s, "GET /redfish/v1/Fabrics/{id}/Zones", "/redfish/v1/Fabrics/falcon1/Zones", admin)); len(got) != 0 {
		t.Fatalf("zones before any composition: %v", got)
	}
	mgr.list = []*inventory.Composition{attached(t, s.top, "c1", "gpu1", "acme")}
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
	s, _ := newService(t, nil, "gpu1")
	admin := tenancy.Principal{User: "admin"}
	ep := get(t, s, "GET /redfish/v1/Fabrics/{id}/Endpoints/{ep}", "/redfish/v1/Fabrics/falcon1/Endpoints/gpu1", admin)
	if h := ep["Status"].(map[string]any)["Health"]; h != string(fabric.Critical) {
		t.Fatalf("gpu1 health %v, want %s", h, fabric.Critical)
	}
	blocks := ep["Oem"].(map[string]any)["Rackpool"].(map[string]any)["ResourceBlocks"].([]any)
	if len(blocks) == 0 || !strings.HasPrefix(blocks[0].(map[string]any)["@odata.id"].(string), blocksPath) {
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
	s, mgr := newService(t, nil, "")
	admin := tenancy.Principal{User: "admin"}
	const inject = "POST /redfish/v1/Fabrics/{id}/Actions/Oem/Rackpool.InjectFault"
	w, err := call(t, s, inject, "/redfish/v1/Fabrics/falcon1/Actions/Oem/Rackpool.InjectFault", `{"Kind":"device-fails","Target":"gpu2"}`, admin)
	if err != nil || w.Code != http.StatusNoContent {
		t.Fatalf("inject: %d %v", w.Code, err)
	}
	st, err := mgr.drivers["falcon1"].Discover(context.Background())
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
	if st, _ := mgr.drivers["falcon1"].Discover(context.Background()); st.Health["gpu2"] != fabric.OK && st.Health["gpu2"] != "" {
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
