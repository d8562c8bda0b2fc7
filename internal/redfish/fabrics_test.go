package redfish_test

import (
	"net/http"
	"slices"
	"strings"
	"testing"
)

// TestFabricZonesMirrorCompositions: one truth, two views. A composition's
// device attachments appear as a zone of endpoints on each fabric it
// touches, and disappear with it.
func TestFabricZonesMirrorCompositions(t *testing.T) {
	s := newService(t)
	for _, f := range []string{"falcon1", "ocs1", "sas1"} {
		if got := links(t, s.get("/redfish/v1/Fabrics/" + f + "/Zones")["Members"]); len(got) != 0 {
			t.Fatalf("%s has zones before any compose: %v", f, got)
		}
	}
	id := s.compose(specificBody("host1", "gpu1", "memnode1-b01"))

	zones := links(t, s.get("/redfish/v1/Fabrics/falcon1/Zones")["Members"])
	if !slices.Equal(zones, []string{"host1-pcie"}) {
		t.Fatalf("falcon1 zones %v, want [host1-pcie]", zones)
	}
	z := s.get("/redfish/v1/Fabrics/falcon1/Zones/host1-pcie")
	if eps := links(t, dig(t, z, "Links", "Endpoints")); !slices.Equal(eps, []string{"host1-pcie", "gpu1"}) {
		t.Fatalf("falcon1 zone endpoints %v, want [host1-pcie gpu1]", eps)
	}

	ocs := links(t, s.get("/redfish/v1/Fabrics/ocs1/Zones")["Members"])
	if len(ocs) != 1 {
		t.Fatalf("ocs1 zones %v, want one", ocs)
	}
	z = s.get("/redfish/v1/Fabrics/ocs1/Zones/" + ocs[0])
	if eps := links(t, dig(t, z, "Links", "Endpoints")); len(eps) != 2 || eps[0] != ocs[0] || eps[1] != "memnode1" {
		t.Fatalf("ocs1 zone %s endpoints %v, want [%s memnode1]", ocs[0], eps, ocs[0])
	}
	// The zone's host port is one of host1's optical ports, and it matches
	// the port the system reports for the block.
	sys := s.get("/redfish/v1/Systems/" + id)
	for _, b := range list(t, dig(t, sys, "Oem", "Rackpool", "Blocks")) {
		blk := b.(map[string]any)
		if blk["Id"] == "memnode1-b01" && "host1-"+blk["HostPort"].(string) != ocs[0] {
			t.Fatalf("system says memnode1-b01 is on port %v, fabric zone is %s", blk["HostPort"], ocs[0])
		}
	}
	if got := links(t, s.get("/redfish/v1/Fabrics/sas1/Zones")["Members"]); len(got) != 0 {
		t.Fatalf("sas1 zones %v, want none", got)
	}

	s.must(http.StatusNoContent, "DELETE", "/redfish/v1/Systems/"+id, nil, admin)
	for _, f := range []string{"falcon1", "ocs1"} {
		if got := links(t, s.get("/redfish/v1/Fabrics/" + f + "/Zones")["Members"]); len(got) != 0 {
			t.Fatalf("%s zones after decompose: %v", f, got)
		}
	}
	s.must(http.StatusNotFound, "GET", "/redfish/v1/Fabrics/falcon1/Zones/host1-pcie", nil, admin)
	s.must(http.StatusNotFound, "GET", "/redfish/v1/Fabrics/ocs1/Zones/"+ocs[0], nil, admin)
}

// TestResourceZonesFollowDrawerModes: a host's resource zone holds exactly
// the blocks its cabling and drawer modes let it reach.
func TestResourceZonesFollowDrawerModes(t *testing.T) {
	s := newService(t)
	zone := func(id string) []string {
		return links(t, dig(t, s.get("/redfish/v1/CompositionService/ResourceZones/"+id), "Links", "ResourceBlocks"))
	}
	host4 := zone("host4")
	for _, b := range []string{"host4", "nvme3", "nvme4", "nic2", "fpga2", "hdd1", "essd1", "memnode2-b64"} {
		if !slices.Contains(host4, b) {
			t.Errorf("host4's zone lacks %s", b)
		}
	}
	// drawer1 is cabled to H1-H3 only; drawer2 slots 1-4 belong to H2.
	for _, b := range []string{"gpu1", "nvme1", "nic1", "fpga1", "gpu5", "gpu7", "host1"} {
		if slices.Contains(host4, b) {
			t.Errorf("host4's zone holds %s", b)
		}
	}
	host2 := zone("host2")
	for _, b := range []string{"gpu1", "gpu5", "gpu8"} {
		if !slices.Contains(host2, b) {
			t.Errorf("host2's zone lacks %s", b)
		}
	}
	if slices.Contains(host2, "nvme3") {
		t.Error("host2's zone holds nvme3 (drawer2 slot 5 belongs to H4)")
	}
	host1 := zone("host1")
	if !slices.Contains(host1, "gpu1") || slices.Contains(host1, "gpu5") {
		t.Errorf("host1's zone: %v", host1)
	}
	// The block side agrees: gpu7's zones are host2's only.
	gpu7 := links(t, dig(t, s.get("/redfish/v1/CompositionService/ResourceBlocks/gpu7"), "Links", "Zones"))
	if !slices.Equal(gpu7, []string{"host2"}) {
		t.Errorf("gpu7's zones %v, want [host2]", gpu7)
	}
	training := zone("zone-training")
	slices.Sort(training)
	if want := []string{"gpu1", "gpu2", "gpu3", "gpu4", "host1", "host2", "nvme1", "nvme2"}; !slices.Equal(training, want) {
		t.Errorf("zone-training %v, want %v", training, want)
	}
	// Composing host4 with gpu7 is refused as never possible.
	r := s.must(http.StatusBadRequest, "POST", "/redfish/v1/Systems", specificBody("host4", "gpu7"), admin)
	if code := r.errorCode(t); code != "Composition.1.1.NoResourceMatch" {
		t.Fatalf("host4+gpu7: %s", code)
	}
}

// injectFault posts a fault to a fabric and expects want.
func (s *service) injectFault(want int, fabric string, fault map[string]any) reply {
	s.t.Helper()
	return s.must(want, "POST", "/redfish/v1/Fabrics/"+fabric+"/Actions/Oem/Rackpool.InjectFault", fault, admin)
}

// TestInjectedAttachFailureRollsBack: a compose whose attach fails leaves
// nothing behind, as seen through the API.
func TestInjectedAttachFailureRollsBack(t *testing.T) {
	s := newService(t)
	s.injectFault(http.StatusNoContent, "falcon1", map[string]any{"Kind": "attach-fails", "Target": "gpu2", "Count": 1})
	r := s.must(http.StatusInternalServerError, "POST", "/redfish/v1/Systems", specificBody("host1", "gpu1", "gpu2", "hdd1"), admin)
	if code := r.errorCode(t); code != "Base.1.22.OperationFailed" {
		t.Fatalf("failed compose: %s", code)
	}
	// The client learns it was rolled back and a request ID to report;
	// which fabric said what stays in the operator's log.
	id := r.header.Get("X-Request-Id")
	res := r.resolution(t)
	if id == "" || !strings.Contains(res, "rolled back") || !strings.Contains(res, "request ID "+id) ||
		strings.Contains(string(r.body), "injected") || strings.Contains(string(r.body), "falcon") || strings.Contains(string(r.body), "attach gpu2") {
		t.Errorf("500 answer (X-Request-Id %q): %s", id, r.body)
	}
	if logs := s.logs.String(); !strings.Contains(logs, "request_id="+id) || !strings.Contains(logs, "injected") {
		t.Errorf("the log lacks the failure's detail under request %s:\n%s", id, logs)
	}
	if ids := s.systemIDs(); len(ids) != 0 {
		t.Fatalf("systems after a failed compose: %v", ids)
	}
	for _, b := range []string{"gpu1", "gpu2", "hdd1"} {
		if st, n := s.blockState(b); st != "Unused" || n != 0 {
			t.Errorf("%s is %s in %d compositions after rollback", b, st, n)
		}
	}
	for _, f := range []string{"falcon1", "sas1"} {
		if got := links(t, s.get("/redfish/v1/Fabrics/" + f + "/Zones")["Members"]); len(got) != 0 {
			t.Errorf("%s zones after rollback: %v", f, got)
		}
	}
	// The fault was for one attach only: the same request now succeeds.
	s.compose(specificBody("host1", "gpu1", "gpu2", "hdd1"))
}

// TestInjectedDeviceFailureShows: a failed device is Critical on its
// block and its endpoint once the fabric monitor has polled (they read its
// cache, not the fabric), and its telemetry says so; ClearFaults heals it.
func TestInjectedDeviceFailureShows(t *testing.T) {
	s := newService(t)
	s.compose(specificBody("host1", "gpu3"))
	s.injectFault(http.StatusNoContent, "falcon1", map[string]any{"Kind": "device-fails", "Target": "gpu3"})
	if h := dig(t, s.get("/redfish/v1/CompositionService/ResourceBlocks/gpu3"), "Status", "Health"); h != "OK" {
		t.Errorf("gpu3 block health %v before the monitor polled, want the cached OK", h)
	}
	if err := s.pollFabrics(); err != nil {
		t.Fatal(err)
	}

	blk := s.get("/redfish/v1/CompositionService/ResourceBlocks/gpu3")
	if h := dig(t, blk, "Status", "Health"); h != "Critical" {
		t.Errorf("gpu3 block health %v, want Critical", h)
	}
	if st := dig(t, blk, "CompositionStatus", "CompositionState"); st != "Failed" {
		t.Errorf("gpu3 CompositionState %v, want Failed", st)
	}
	ep := s.get("/redfish/v1/Fabrics/falcon1/Endpoints/gpu3")
	if h := dig(t, ep, "Status", "Health"); h != "Critical" {
		t.Errorf("gpu3 endpoint health %v, want Critical", h)
	}
	tel := dig(t, ep, "Oem", "Rackpool", "Telemetry")
	if h := dig(t, tel, "Health"); h != "Critical" {
		t.Errorf("gpu3 telemetry health %v, want Critical", h)
	}
	if w := dig(t, tel, "LinkWidth"); w != float64(0) {
		t.Errorf("failed gpu3 link width %v, want 0", w)
	}
	// Neighbours are unaffected.
	if h := dig(t, s.get("/redfish/v1/CompositionService/ResourceBlocks/gpu4"), "Status", "Health"); h != "OK" {
		t.Errorf("gpu4 health %v", h)
	}

	s.must(http.StatusNoContent, "POST", "/redfish/v1/Fabrics/falcon1/Actions/Oem/Rackpool.ClearFaults", map[string]any{}, admin)
	if err := s.pollFabrics(); err != nil {
		t.Fatal(err)
	}
	blk = s.get("/redfish/v1/CompositionService/ResourceBlocks/gpu3")
	if h, st := dig(t, blk, "Status", "Health"), dig(t, blk, "CompositionStatus", "CompositionState"); h != "OK" || st != "Composed" {
		t.Errorf("after ClearFaults: health %v, state %v", h, st)
	}
}

func TestInjectFaultErrors(t *testing.T) {
	s := newService(t)
	cases := []struct {
		name, fabric string
		body         any
		status       int
		code         string
	}{
		{"unknown kind", "falcon1", map[string]any{"Kind": "melts", "Target": "gpu1"}, 400, "Base.1.22.PropertyValueIncorrect"},
		{"no kind", "falcon1", map[string]any{"Target": "gpu1"}, 400, "Base.1.22.PropertyValueIncorrect"},
		{"device on another fabric", "falcon1", map[string]any{"Kind": "device-fails", "Target": "hdd1"}, 400, "Base.1.22.PropertyValueIncorrect"},
		{"unknown port", "sas1", map[string]any{"Kind": "port-fails", "Target": "host9/sas"}, 400, "Base.1.22.PropertyValueIncorrect"},
		{"unknown property", "falcon1", map[string]any{"Kind": "device-fails", "Target": "gpu1", "When": "now"}, 400, "Base.1.22.PropertyUnknown"},
		{"count as text", "falcon1", map[string]any{"Kind": "attach-fails", "Count": "1"}, 400, "Base.1.22.PropertyValueTypeError"},
		{"unknown fabric", "nofabric", map[string]any{"Kind": "device-fails", "Target": "gpu1"}, 404, "Base.1.22.ResourceNotFound"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := s.injectFault(tc.status, tc.fabric, tc.body.(map[string]any))
			if code := r.errorCode(t); code != tc.code {
				t.Fatalf("code %s, want %s", code, tc.code)
			}
		})
	}
	// None of them armed anything: every device is healthy and composes.
	s.compose(specificBody("host1", "gpu1", "hdd1"))
	if h := dig(t, s.get("/redfish/v1/CompositionService/ResourceBlocks/gpu1"), "Status", "Health"); h != "OK" {
		t.Fatalf("gpu1 health %v", h)
	}
}
