package redfish_test

import (
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"

	"rackpool/examples"
	"rackpool/internal/topology"
)

func cxlService(t *testing.T) *service {
	t.Helper()
	top, err := topology.Parse("cxl-rack.yaml", examples.CXLRack)
	if err != nil {
		t.Fatal(err)
	}
	return newServiceOn(t, top)
}

// members returns the member paths of a collection.
func (s *service) members(path string, c cred) []string {
	s.t.Helper()
	var out []string
	for _, m := range list(s.t, s.must(http.StatusOK, "GET", path, nil, c).json(s.t)["Members"]) {
		out = append(out, m.(map[string]any)["@odata.id"].(string))
	}
	return out
}

// TestCXLRedfish serves the CXL example and checks the standard view of
// its fabric, after the DMTF public-cxl mockups: the fabric is CXL, each
// device a Chassis with a type-3 PCIeDevice, its logical devices, its
// memory domains and chunks, and a Connection's MemoryChunkInfo links the
// chunks it attached. Every CXL GET route answers its own @odata.id for
// real IDs and a Redfish 404 for unknown ones.
func TestCXLRedfish(t *testing.T) {
	s := cxlService(t)
	if got := s.get("/redfish/v1/Fabrics/cxl1")["FabricType"]; got != "CXL" {
		t.Errorf("FabricType %v, want CXL", got)
	}
	ep := s.get("/redfish/v1/Fabrics/cxl1/Endpoints/cxlmem1")
	if e := list(t, ep["ConnectedEntities"])[0].(map[string]any); e["EntityType"] != "CXLDevice" || ep["EndpointProtocol"] != "CXL" {
		t.Errorf("device endpoint %v", ep)
	}
	chassis := s.members("/redfish/v1/Chassis", admin)
	for _, d := range []string{"cxlmem1", "cxlmem2", "cxlmem3"} {
		if !slices.Contains(chassis, "/redfish/v1/Chassis/"+d) {
			t.Errorf("Chassis lacks %s: %v", d, chassis)
		}
	}
	c := "/redfish/v1/Chassis/"
	if got := s.get(c + "cxlmem1")["ChassisType"]; got != "Module" {
		t.Errorf("ChassisType %v", got)
	}
	if got := dig(t, s.get(c+"cxlmem3/PCIeDevices/1"), "CXLDevice", "DeviceType"); got != "Type3" {
		t.Errorf("DeviceType %v", got)
	}
	if got := s.members(c+"cxlmem1/PCIeDevices/1/CXLLogicalDevices", admin); len(got) != 4 {
		t.Errorf("cxlmem1 logical devices %v, want 4", got)
	}
	if got := s.members(c+"cxlmem3/MemoryDomains", admin); !slices.Equal(got, []string{c + "cxlmem3/MemoryDomains/Static", c + "cxlmem3/MemoryDomains/Dynamic"}) {
		t.Errorf("cxlmem3 domains %v", got)
	}
	if got := s.members(c+"cxlmem2/MemoryDomains", admin); !slices.Equal(got, []string{c + "cxlmem2/MemoryDomains/Dynamic"}) {
		t.Errorf("cxlmem2 domains %v", got)
	}
	dyn := s.get(c + "cxlmem3/MemoryDomains/Dynamic")
	if dyn["MemorySizeMiB"] != float64(128<<10) || dyn["MemoryChunkIncrementMiB"] != float64(16<<10) {
		t.Errorf("cxlmem3 dynamic domain %v", dyn)
	}
	chunk := s.get(c + "cxlmem3/MemoryDomains/Dynamic/MemoryChunks/cxlmem3-x02")
	if chunk["MemoryChunkSizeMiB"] != float64(16<<10) || chunk["AddressRangeOffsetMiB"] != float64(144<<10) {
		t.Errorf("cxlmem3-x02 chunk %v", chunk)
	}

	// A composed system's Connection carries the chunks it attached.
	sys := s.compose(specificBody("host1", "cxlmem1-ld2", "cxlmem2-x03"))
	conn := s.get("/redfish/v1/Fabrics/cxl1/Connections/" + sys)
	var chunks []string
	for _, m := range list(t, conn["MemoryChunkInfo"]) {
		mc := m.(map[string]any)
		chunks = append(chunks, mc["MemoryChunk"].(map[string]any)["@odata.id"].(string))
		s.must(http.StatusOK, "GET", chunks[len(chunks)-1], nil, admin)
	}
	want := []string{c + "cxlmem1/MemoryDomains/Static/MemoryChunks/cxlmem1-ld2", c + "cxlmem2/MemoryDomains/Dynamic/MemoryChunks/cxlmem2-x03"}
	if !slices.Equal(chunks, want) || conn["ConnectionType"] != "Memory" {
		t.Errorf("Connection %v: chunks %v, want %v", conn, chunks, want)
	}

	for _, tc := range []struct{ valid, unknown []string }{
		{[]string{c + "cxlmem1/PCIeDevices"}, []string{c + "rack1/PCIeDevices", c + "nope/PCIeDevices", c + "memcard1/PCIeDevices"}},
		{[]string{c + "cxlmem1/PCIeDevices/1"}, []string{c + "cxlmem1/PCIeDevices/2", c + "rack1/PCIeDevices/1"}},
		{[]string{c + "cxlmem3/PCIeDevices/1/CXLLogicalDevices"}, []string{c + "cxlmem3/PCIeDevices/2/CXLLogicalDevices"}},
		{[]string{c + "cxlmem3/PCIeDevices/1/CXLLogicalDevices/LD2"}, []string{c + "cxlmem3/PCIeDevices/1/CXLLogicalDevices/LD3", c + "cxlmem2/PCIeDevices/1/CXLLogicalDevices/LD1"}},
		{[]string{c + "cxlmem2/MemoryDomains"}, []string{c + "rack1/MemoryDomains"}},
		{[]string{c + "cxlmem1/MemoryDomains/Static"}, []string{c + "cxlmem1/MemoryDomains/Dynamic", c + "cxlmem1/MemoryDomains/1"}},
		{[]string{c + "cxlmem3/MemoryDomains/Static/MemoryChunks"}, []string{c + "cxlmem2/MemoryDomains/Static/MemoryChunks"}},
		{[]string{c + "cxlmem3/MemoryDomains/Static/MemoryChunks/cxlmem3-ld1"}, []string{c + "cxlmem3/MemoryDomains/Dynamic/MemoryChunks/cxlmem3-ld1",
			c + "cxlmem3/MemoryDomains/Static/MemoryChunks/cxlmem1-ld1", c + "cxlmem3/MemoryDomains/Static/MemoryChunks/memcard1-b01"}},
	} {
		for _, p := range tc.valid {
			if got := s.get(p)["@odata.id"]; got != p {
				t.Errorf("GET %s: @odata.id %v", p, got)
			}
		}
		for _, p := range tc.unknown {
			if r := s.must(http.StatusNotFound, "GET", p, nil, admin); !strings.HasPrefix(r.errorCode(t), "Base.1.22.Resource") {
				t.Errorf("GET %s: %s", p, r.body)
			}
		}
	}
}

// TestCXLRedfishWalk walks the CXL example's service from the root, as
// the DMTF validator does: every link answers 200 with an @odata.type whose
// namespace $metadata includes.
func TestCXLRedfishWalk(t *testing.T) {
	s := cxlService(t)
	s.compose(specificBody("host4", "cxlmem3-ld1", "cxlmem3-x01", "cxlmem1-ld1", "memcard1-b01"))
	meta := string(s.must(http.StatusOK, "GET", "/redfish/v1/$metadata", nil, cred{}).body)
	queue, seen := []string{"/redfish/v1"}, map[string]bool{"/redfish/v1": true}
	cxl := 0
	for len(queue) > 0 {
		path := queue[0]
		queue = queue[1:]
		r := s.do("GET", path, nil, admin)
		if r.status != http.StatusOK {
			t.Errorf("GET %s: %d", path, r.status)
			continue
		}
		var body map[string]any
		if json.Unmarshal(r.body, &body) != nil {
			continue // schema files, metrics
		}
		if typ, _ := body["@odata.type"].(string); typ != "" {
			q := strings.TrimPrefix(typ, "#")
			ns := q[:strings.LastIndex(q, ".")]
			if !strings.Contains(meta, `Namespace="`+ns+`"`) {
				t.Errorf("%s: @odata.type %s not in $metadata", path, typ)
			}
			if strings.Contains(ns, "CXL") || strings.Contains(ns, "Memory") || strings.Contains(ns, "PCIe") {
				cxl++
			}
		}
		var visit func(v any)
		visit = func(v any) {
			switch x := v.(type) {
			case map[string]any:
				if id, ok := x["@odata.id"].(string); ok {
					id, _, _ = strings.Cut(id, "#")
					if !seen[id] && strings.HasPrefix(id, "/redfish/v1") && !strings.Contains(id, "/SSE") {
						seen[id] = true
						queue = append(queue, id)
					}
				}
				for _, e := range x {
					visit(e)
				}
			case []any:
				for _, e := range x {
					visit(e)
				}
			}
		}
		visit(body)
	}
	if cxl < 40 {
		t.Errorf("walked %d resources, only %d CXL ones", len(seen), cxl)
	}
	t.Logf("walked %d resources, %d CXL/memory/PCIe", len(seen), cxl)
}

// TestCXLRedfishTenancy: a tenant sees the CXL chunks and logical devices
// it holds or could take, never another tenant's, and not another
// tenant's Connection.
func TestCXLRedfishTenancy(t *testing.T) {
	s := cxlService(t)
	blue, red, _ := s.tenants()
	r := s.must(http.StatusCreated, "POST", "/redfish/v1/Systems", specificBody("host2", "cxlmem1-ld1", "cxlmem2-x01"), red)
	sys := r.json(t)["Id"].(string)
	c := "/redfish/v1/Chassis/"
	for _, p := range []string{c + "cxlmem1/MemoryDomains/Static/MemoryChunks/cxlmem1-ld1", c + "cxlmem1/PCIeDevices/1/CXLLogicalDevices/LD1",
		c + "cxlmem2/MemoryDomains/Dynamic/MemoryChunks/cxlmem2-x01", "/redfish/v1/Fabrics/cxl1/Connections/" + sys} {
		s.must(http.StatusOK, "GET", p, nil, red)
		s.must(http.StatusNotFound, "GET", p, nil, blue)
	}
	if got := s.members(c+"cxlmem1/MemoryDomains/Static/MemoryChunks", blue); len(got) != 3 || slices.Contains(got, c+"cxlmem1/MemoryDomains/Static/MemoryChunks/cxlmem1-ld1") {
		t.Errorf("blue sees chunks %v, want ld2..ld4", got)
	}
	if got := s.members(c+"cxlmem1/PCIeDevices/1/CXLLogicalDevices", blue); len(got) != 3 {
		t.Errorf("blue sees logical devices %v, want 3", got)
	}
	if got := s.members("/redfish/v1/Fabrics/cxl1/Connections", blue); len(got) != 0 {
		t.Errorf("blue sees connections %v", got)
	}
}

// TestCXLReleaseStallsOverRedfish: an uncooperative host (release-stalls)
// does not stop a decompose: the release is forced after the fabric's
// timeout on the fabric clock, and the extent is free again.
func TestCXLReleaseStallsOverRedfish(t *testing.T) {
	s := cxlService(t)
	sys := s.compose(specificBody("host1", "cxlmem2-x05"))
	s.injectFault(http.StatusNoContent, "cxl1", map[string]any{"Kind": "release-stalls", "Target": "host1"})
	s.injectFault(http.StatusBadRequest, "ocs1", map[string]any{"Kind": "release-stalls", "Target": "host1"})
	before := s.fabClk.Now()
	s.must(http.StatusNoContent, "DELETE", "/redfish/v1/Systems/"+sys, nil, admin)
	if took := s.fabClk.Now().Sub(before); took < topology.DefaultCXLReleaseTimeout {
		t.Errorf("decompose took %v on the fabric clock, want the %v forced-release timeout", took, topology.DefaultCXLReleaseTimeout)
	}
	if st, _ := s.blockState("cxlmem2-x05"); st != "Unused" {
		t.Errorf("cxlmem2-x05 is %s after a forced release, want Unused", st)
	}
}
