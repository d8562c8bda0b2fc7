package redfish_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"rackpool/internal/tenancy"
)

// TestZoneAffinityConflictsWithComputeBlock: a request whose zone is one
// host's and whose links name another host's compute block is refused for
// the zone (the policy is applied to the request the links make), not for
// naming two compute blocks.
func TestZoneAffinityConflictsWithComputeBlock(t *testing.T) {
	s := newService(t)
	body := map[string]any{"@Redfish.ZoneAffinity": "host2", "Links": map[string]any{"ResourceBlocks": []any{
		map[string]any{"@odata.id": "/redfish/v1/CompositionService/ResourceBlocks/host1"}}}}
	for _, path := range []string{"/redfish/v1/Systems", "/redfish/v1/CompositionService/Actions/Oem/Rackpool.Explain"} {
		r := s.must(http.StatusBadRequest, "POST", path, body, admin)
		if res := r.resolution(t); !strings.Contains(res, "The zone of host host2 conflicts with the requested host host1.") {
			t.Errorf("POST %s: resolution %q, want the zone conflict", path, res)
		}
	}
	if cs := s.mgr.List(); len(cs) != 0 {
		t.Errorf("%d systems after a refused request", len(cs))
	}
}

// TestPostSystemSchedulesOnce: POST /redfish/v1/Systems walks API →
// compose → schedule → fabric once: the placement that decides between
// answering at once and answering 202 is the one composed, whether the
// answer is synchronous or a task monitor's.
func TestPostSystemSchedulesOnce(t *testing.T) {
	s := newService(t)
	before := s.schedules.Load()
	req, _ := http.NewRequest("POST", s.srv.URL+"/redfish/v1/Systems", strings.NewReader(`{"Links":{"ResourceBlocks":[`+
		`{"@odata.id":"/redfish/v1/CompositionService/ResourceBlocks/host1"},{"@odata.id":"/redfish/v1/CompositionService/ResourceBlocks/gpu1"}]}}`))
	req.SetBasicAuth(tenancy.AdminUser, password)
	req.Header.Set("Prefer", "respond-async")
	resp, err := s.srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("status %d, want 202", resp.StatusCode)
	}
	monitor := resp.Header.Get("Location")
	for i := 0; i < 500; i++ {
		if r := s.do("GET", monitor, nil, admin); r.status != http.StatusAccepted {
			if r.status != http.StatusCreated {
				t.Fatalf("task ended %d: %s", r.status, r.body)
			}
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if n := s.schedules.Load() - before; n != 1 {
		t.Errorf("POST /redfish/v1/Systems answered 202: %d scheduler decisions, want 1", n)
	}

	gpu := map[string]any{"Processors": map[string]any{"Members": []any{
		map[string]any{"@Redfish.RequestedCount": 1, "ProcessorType": "GPU"}}}}
	before = s.schedules.Load()
	s.must(http.StatusCreated, "POST", "/redfish/v1/Systems", gpu, admin)
	if n := s.schedules.Load() - before; n != 1 {
		t.Errorf("POST /redfish/v1/Systems: %d scheduler decisions, want 1", n)
	}
}

// TestComposeActionApplySchedulesOnce: the Compose action's Apply places
// each stanza once, as POST /redfish/v1/Systems does.
func TestComposeActionApplySchedulesOnce(t *testing.T) {
	s := newService(t)
	gpus := map[string]any{"Oem": map[string]any{"Rackpool": map[string]any{"Needs": []any{map[string]any{"Kind": "gpu", "Count": 2}}}}}
	before := s.schedules.Load()
	s.must(http.StatusOK, "POST", composeAction, manifestBody("Apply", stanzaBody("a", gpus), stanzaBody("b", gpus)), admin)
	if n := s.schedules.Load() - before; n != 2 {
		t.Errorf("Apply of two stanzas: %d scheduler decisions, want 2", n)
	}
	if cs := s.mgr.List(); len(cs) != 2 {
		t.Errorf("%d systems composed, want 2", len(cs))
	}
}

// TestImportAllocationSchedulesOnce: an import places each of its systems
// once; the systems hold their blocks while the tenants are created.
func TestImportAllocationSchedulesOnce(t *testing.T) {
	src := newService(t)
	src.compose(specificBody("host1", "gpu1", "hdd1"))
	src.compose(specificBody("host3", "gpu2"))
	doc := src.must(http.StatusOK, "POST", "/redfish/v1/CompositionService/Actions/Oem/Rackpool.ExportAllocation", map[string]any{}, admin).body
	dst := newService(t)
	before := dst.schedules.Load()
	dst.must(http.StatusOK, "POST", "/redfish/v1/CompositionService/Actions/Oem/Rackpool.ImportAllocation", json.RawMessage(doc), admin)
	if n := dst.schedules.Load() - before; n != 2 {
		t.Errorf("import of two systems: %d scheduler decisions, want 2", n)
	}
	if cs := dst.mgr.List(); len(cs) != 2 {
		t.Errorf("%d systems imported, want 2", len(cs))
	}
}
