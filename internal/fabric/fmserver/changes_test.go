package fmserver

import (
	"net/http"
	"slices"
	"strings"
	"testing"

	"rackpool/internal/fabric"
	"rackpool/internal/rf"
)

// TestZonePatchAllOrNothing: a PATCH whose last attach fails undoes the
// detach and attaches it made before, and answers the fabric's refusal.
func TestZonePatchAllOrNothing(t *testing.T) {
	f := newFM(t, rackTopology(t), "falcon1", Options{})
	zone := "/redfish/v1/Fabrics/falcon1/Zones/host1-pcie"
	f.must(f.settle(f.raw("POST", "/redfish/v1/Fabrics/falcon1/Zones", endpoints("falcon1", "host1-pcie", "gpu1"), nil)), http.StatusCreated, "create")
	before := f.discover()
	etag := f.get(zone).header.Get("ETag")
	// gpu5 sits in drawer2's first half, which only H2 reaches.
	res := f.settle(f.raw("PATCH", zone, endpoints("falcon1", "host1-pcie", "gpu2", "gpu3", "gpu5"), map[string]string{"If-Match": etag}))
	f.must(res, http.StatusConflict, "PATCH with an unreachable device")
	if !slices.Contains(messageIDs(res), rf.MsgUnreachable) {
		t.Fatalf("message IDs %v", messageIDs(res))
	}
	f.unchanged(before, "a refused PATCH")
	if got := f.get(zone).header.Get("ETag"); got != etag {
		t.Fatalf("ETag %s after a refused PATCH, was %s", got, etag)
	}
	// An injected attach failure on the second attach: same.
	f.must(f.raw("POST", "/redfish/v1/Fabrics/falcon1/Actions/Oem/Rackpool.InjectFault", `{"Kind":"attach-fails","Target":"gpu3","Count":1}`, nil), http.StatusNoContent, "inject")
	res = f.settle(f.raw("PATCH", zone, endpoints("falcon1", "host1-pcie", "gpu2", "gpu3"), map[string]string{"If-Match": etag}))
	f.must(res, http.StatusConflict, "PATCH with an injected failure")
	if !slices.Contains(messageIDs(res), rf.MsgInjected) {
		t.Fatalf("message IDs %v", messageIDs(res))
	}
	f.unchanged(before, "a PATCH whose attach failed")
	// The task of a failed change says Exception, with the fabric's message.
	res = f.raw("PATCH", zone, endpoints("falcon1", "host1-pcie", "gpu2", "gpu5"), map[string]string{"If-Match": etag})
	if res.status == http.StatusAccepted {
		task := "/redfish/v1/TaskService/Tasks/" + strings.TrimPrefix(res.header.Get("Location"), "/redfish/v1/TaskService/TaskMonitors/")
		f.settle(res)
		tk := f.get(task)
		if tk.json["TaskState"] != "Exception" || !strings.Contains(string(tk.body), rf.MsgUnreachable) {
			t.Fatalf("task of a failed change: %s", tk.body)
		}
	}
	f.unchanged(before, "a refused PATCH")
	// POST is all or nothing too: no zone, nothing attached.
	f.must(f.settle(f.raw("POST", "/redfish/v1/Fabrics/falcon1/Zones", endpoints("falcon1", "host3-pcie", "gpu1", "gpu5"), nil)), http.StatusConflict, "POST with an unreachable device")
	f.must(f.get("/redfish/v1/Fabrics/falcon1/Zones/host3-pcie"), http.StatusNotFound, "zone of a refused POST")
	f.unchanged(before, "a refused POST")
}

func TestConnectionsCXL(t *testing.T) {
	f := newFM(t, cxlTopology(t), "cxl1", Options{})
	conns := "/redfish/v1/Fabrics/cxl1/Connections"
	res := f.must(f.settle(f.raw("POST", conns, connection("cxl1", "host1-cxl", "cxlmem1", "Static", "cxlmem1-ld1"), nil)), http.StatusCreated, "attach an LD")
	loc := res.header.Get("Location")
	if loc != conns+"/host1-cxl.cxlmem1-ld1" || res.header.Get("ETag") == "" {
		t.Fatalf("created: %v %s", res.header, res.body)
	}
	want := fabric.Attachment{Block: "cxlmem1-ld1", Device: "cxlmem1", Host: "host1", HostPort: "cxl"}
	if got := f.discover().Attachments; !slices.Equal(got, []fabric.Attachment{want}) {
		t.Fatalf("attachments %v", got)
	}
	get := f.must(f.get(loc), http.StatusOK, "connection")
	chunk := get.json["MemoryChunkInfo"].([]any)[0].(map[string]any)["MemoryChunk"].(map[string]any)["@odata.id"]
	if chunk != "/redfish/v1/Chassis/cxlmem1/MemoryDomains/Static/MemoryChunks/cxlmem1-ld1" {
		t.Fatalf("chunk %v", chunk)
	}
	f.must(f.get(chunk.(string)), http.StatusOK, "chunk")
	// Idempotent repeat: the existing connection, nothing new.
	f.must(f.raw("POST", conns, connection("cxl1", "host1-cxl", "cxlmem1", "Static", "cxlmem1-ld1"), nil), http.StatusOK, "repeat")
	// The LD is bound: another host is refused, BlockInUse.
	before := f.discover()
	res = f.must(f.settle(f.raw("POST", conns, connection("cxl1", "host2-cxl", "cxlmem1", "Static", "cxlmem1-ld1"), nil)), http.StatusConflict, "LD in use")
	if !slices.Contains(messageIDs(res), rf.MsgInUse) {
		t.Fatalf("message IDs %v", messageIDs(res))
	}
	f.unchanged(before, "a refused connection")
	// An extent of the dynamic-capacity region.
	f.must(f.settle(f.raw("POST", conns, connection("cxl1", "host2-cxl", "cxlmem2", "Dynamic", "cxlmem2-x03"), nil)), http.StatusCreated, "attach an extent")
	list := f.must(f.get(conns), http.StatusOK, "connections")
	if list.json["Members@odata.count"].(float64) != 2 {
		t.Fatalf("connections: %s", list.body)
	}
	// DELETE needs If-Match.
	etag := get.header.Get("ETag")
	f.must(f.raw("DELETE", loc, "", nil), http.StatusPreconditionRequired, "DELETE without If-Match")
	f.must(f.raw("DELETE", loc, "", map[string]string{"If-Match": `"x"`}), http.StatusPreconditionFailed, "DELETE stale")
	f.must(f.settle(f.raw("DELETE", loc, "", map[string]string{"If-Match": etag})), http.StatusNoContent, "detach")
	f.must(f.get(loc), http.StatusNotFound, "detached")
	if got := f.discover().Attachments; len(got) != 1 || got[0].Block != "cxlmem2-x03" {
		t.Fatalf("attachments after detach %v", got)
	}
	// A device that uses Connections cannot be put in a zone.
	before = f.discover()
	f.must(f.raw("POST", "/redfish/v1/Fabrics/cxl1/Zones", endpoints("cxl1", "host3-cxl", "cxlmem3"), nil), http.StatusBadRequest, "CXL device in a zone")
	f.unchanged(before, "a refused zone")
}

func TestConnectionsOptical(t *testing.T) {
	f := newFM(t, rackTopology(t), "ocs1", Options{})
	conns := "/redfish/v1/Fabrics/ocs1/Connections"
	// Two blocks of memnode1 over host1's port a share one circuit; host2
	// takes memnode1's second port; host3 finds both ports busy.
	for _, c := range []struct{ ini, blk string }{{"host1-ocs-a", "memnode1-b01"}, {"host1-ocs-a", "memnode1-b02"}, {"host2-ocs-a", "memnode1-b03"}} {
		f.must(f.settle(f.raw("POST", conns, connection("ocs1", c.ini, "memnode1", "Memory", c.blk), nil)), http.StatusCreated, c.blk)
	}
	before := f.discover()
	res := f.must(f.settle(f.raw("POST", conns, connection("ocs1", "host3-ocs-a", "memnode1", "Memory", "memnode1-b04"), nil)), http.StatusConflict, "third host")
	if !slices.Contains(messageIDs(res), rf.MsgPortBusy) {
		t.Fatalf("message IDs %v", messageIDs(res))
	}
	f.unchanged(before, "a refused connection")
	if len(before.Attachments) != 3 {
		t.Fatalf("attachments %v", before.Attachments)
	}
	res = f.must(f.get(conns+"/host1-ocs-a.memnode1-b02"), http.StatusOK, "connection")
	f.must(f.settle(f.raw("DELETE", conns+"/host1-ocs-a.memnode1-b02", "", map[string]string{"If-Match": res.header.Get("ETag")})), http.StatusNoContent, "detach")
	if n := len(f.discover().Attachments); n != 2 {
		t.Fatalf("%d attachments after detach", n)
	}
	// Memory nodes have several blocks: not zone members.
	f.must(f.raw("POST", "/redfish/v1/Fabrics/ocs1/Zones", endpoints("ocs1", "host4-ocs-a", "memnode2"), nil), http.StatusBadRequest, "memory node in a zone")
}

// TestBadInput: every malformed or wrong request answers 400 (413 for an
// oversized body) with a Redfish error, and changes nothing.
func TestBadInput(t *testing.T) {
	f := newFM(t, rackTopology(t), "falcon1", Options{})
	g := newFM(t, cxlTopology(t), "cxl1", Options{})
	f.must(f.settle(f.raw("POST", "/redfish/v1/Fabrics/falcon1/Zones", endpoints("falcon1", "host1-pcie", "gpu1"), nil)), http.StatusCreated, "zone")
	g.must(g.settle(g.raw("POST", "/redfish/v1/Fabrics/cxl1/Connections", connection("cxl1", "host1-cxl", "cxlmem1", "Static", "cxlmem1-ld1"), nil)), http.StatusCreated, "connection")
	zones, zone := "/redfish/v1/Fabrics/falcon1/Zones", "/redfish/v1/Fabrics/falcon1/Zones/host1-pcie"
	conns := "/redfish/v1/Fabrics/cxl1/Connections"
	any := map[string]string{"If-Match": "*"}
	chunk := func(path string) string {
		return `{"MemoryChunkInfo":[{"MemoryChunk":{"@odata.id":"` + path + `"}}],"Links":{"InitiatorEndpoints":[` + ep("cxl1", "host2-cxl") + `]}}`
	}
	big := `{"Links":{"Endpoints":[` + ep("falcon1", "host1-pcie") + `]},"Name":"` + strings.Repeat("x", rf.MaxBody) + `"}`
	for _, tc := range []struct {
		name, method, path, body string
		hdr                      map[string]string
		status                   int
		id                       string // a MessageId the answer must carry
	}{
		{"malformed", "PATCH", zone, `{"Links":`, any, 400, baseRegistry + "MalformedJSON"},
		{"not an object", "POST", zones, `[1,2]`, nil, 400, baseRegistry + "MalformedJSON"},
		{"empty", "POST", zones, ``, nil, 400, baseRegistry + "MalformedJSON"},
		{"trailing data", "POST", zones, endpoints("falcon1", "host2-pcie") + `{}`, nil, 400, baseRegistry + "MalformedJSON"},
		{"wrong type", "PATCH", zone, `{"Links":{"Endpoints":"gpu2"}}`, any, 400, baseRegistry + "PropertyValueTypeError"},
		{"wrong link type", "PATCH", zone, `{"Links":{"Endpoints":[{"@odata.id":7}]}}`, any, 400, baseRegistry + "PropertyValueTypeError"},
		{"unknown property", "POST", zones, `{"Color":"red","Links":{"Endpoints":[` + ep("falcon1", "host2-pcie") + `]}}`, nil, 400, baseRegistry + "PropertyUnknown"},
		{"unknown link property", "PATCH", zone, `{"Links":{"Endpoints":[{"@odata.id":"/redfish/v1/Fabrics/falcon1/Endpoints/host1-pcie","Extra":1}]}}`, any, 400, baseRegistry + "PropertyUnknown"},
		{"no links", "PATCH", zone, `{"Name":"x"}`, any, 400, baseRegistry + "PropertyMissing"},
		{"unknown endpoint", "PATCH", zone, endpoints("falcon1", "host1-pcie", "gpu99"), any, 400, rf.MsgUnknown},
		{"other fabric's endpoint", "PATCH", zone, `{"Links":{"Endpoints":[` + ep("falcon1", "host1-pcie") + `,` + ep("sas1", "hdd1") + `]}}`, any, 400, rf.MsgUnknown},
		{"device of another fabric", "PATCH", zone, endpoints("falcon1", "host1-pcie", "hdd1"), any, 400, rf.MsgUnknown},
		{"two initiators", "POST", zones, endpoints("falcon1", "host2-pcie", "host3-pcie", "gpu1"), nil, 400, baseRegistry + "PropertyValueIncorrect"},
		{"no initiator", "POST", zones, endpoints("falcon1", "gpu2"), nil, 400, baseRegistry + "PropertyValueIncorrect"},
		{"other initiator", "PATCH", zone, endpoints("falcon1", "host2-pcie", "gpu2"), any, 400, baseRegistry + "PropertyValueIncorrect"},
		{"zone type", "POST", zones, `{"ZoneType":"ZoneOfZones","Links":{"Endpoints":[` + ep("falcon1", "host2-pcie") + `]}}`, nil, 400, baseRegistry + "PropertyValueIncorrect"},
		{"oversized", "PATCH", zone, big, any, 413, baseRegistry + "PayloadTooLarge"},
		{"fault kind", "POST", "/redfish/v1/Fabrics/falcon1/Actions/Oem/Rackpool.InjectFault", `{"Kind":"meteor"}`, nil, 400, baseRegistry + "PropertyValueIncorrect"},
		{"fault target", "POST", "/redfish/v1/Fabrics/falcon1/Actions/Oem/Rackpool.InjectFault", `{"Kind":"device-fails","Target":"gpu99"}`, nil, 400, baseRegistry + "PropertyValueIncorrect"},
		{"transport fault kind", "POST", "/redfish/v1/Fabrics/falcon1/Actions/Oem/Rackpool.InjectTransportFault", `{"Kind":"meteor","Count":1}`, nil, 400, baseRegistry + "PropertyValueIncorrect"},
		{"clear faults with a body", "POST", "/redfish/v1/Fabrics/falcon1/Actions/Oem/Rackpool.ClearFaults", `{"All":true}`, nil, 400, baseRegistry + "PropertyUnknown"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := f.discover()
			etag := f.get(zone).header.Get("ETag")
			res := f.raw(tc.method, tc.path, tc.body, tc.hdr)
			if res.status != tc.status || !slices.Contains(messageIDs(res), tc.id) {
				t.Fatalf("%d %v, want %d %s: %s", res.status, messageIDs(res), tc.status, tc.id, res.body)
			}
			f.unchanged(before, tc.name)
			if got := f.get(zone).header.Get("ETag"); got != etag {
				t.Fatal("zone ETag changed")
			}
			f.must(f.get("/redfish/v1/Fabrics/falcon1/Zones/host2-pcie"), http.StatusNotFound, "no zone created")
		})
	}
	for _, tc := range []struct{ name, body, id string }{
		{"no chunk", `{"Links":{"InitiatorEndpoints":[` + ep("cxl1", "host2-cxl") + `]}}`, baseRegistry + "PropertyMissing"},
		{"two chunks", `{"MemoryChunkInfo":[{"MemoryChunk":{"@odata.id":"/redfish/v1/Chassis/cxlmem1/MemoryDomains/Static/MemoryChunks/cxlmem1-ld2"}},{"MemoryChunk":{"@odata.id":"/redfish/v1/Chassis/cxlmem1/MemoryDomains/Static/MemoryChunks/cxlmem1-ld3"}}],"Links":{"InitiatorEndpoints":[` + ep("cxl1", "host2-cxl") + `]}}`, baseRegistry + "PropertyValueIncorrect"},
		{"unknown chunk", chunk("/redfish/v1/Chassis/cxlmem1/MemoryDomains/Static/MemoryChunks/cxlmem1-ld9"), rf.MsgUnknown},
		{"chunk in the wrong domain", chunk("/redfish/v1/Chassis/cxlmem1/MemoryDomains/Dynamic/MemoryChunks/cxlmem1-ld2"), rf.MsgUnknown},
		{"not a chunk", chunk("/redfish/v1/Systems/host1"), rf.MsgUnknown},
		{"no initiator", `{"MemoryChunkInfo":[{"MemoryChunk":{"@odata.id":"/redfish/v1/Chassis/cxlmem1/MemoryDomains/Static/MemoryChunks/cxlmem1-ld2"}}]}`, baseRegistry + "PropertyMissing"},
		{"device as initiator", `{"MemoryChunkInfo":[{"MemoryChunk":{"@odata.id":"/redfish/v1/Chassis/cxlmem1/MemoryDomains/Static/MemoryChunks/cxlmem1-ld2"}}],"Links":{"InitiatorEndpoints":[` + ep("cxl1", "cxlmem2") + `]}}`, baseRegistry + "PropertyValueIncorrect"},
		{"wrong target", `{"MemoryChunkInfo":[{"MemoryChunk":{"@odata.id":"/redfish/v1/Chassis/cxlmem1/MemoryDomains/Static/MemoryChunks/cxlmem1-ld2"}}],"Links":{"InitiatorEndpoints":[` + ep("cxl1", "host2-cxl") + `],"TargetEndpoints":[` + ep("cxl1", "cxlmem2") + `]}}`, baseRegistry + "PropertyValueIncorrect"},
		{"connection type", `{"ConnectionType":"Storage","MemoryChunkInfo":[{"MemoryChunk":{"@odata.id":"/redfish/v1/Chassis/cxlmem1/MemoryDomains/Static/MemoryChunks/cxlmem1-ld2"}}],"Links":{"InitiatorEndpoints":[` + ep("cxl1", "host2-cxl") + `]}}`, baseRegistry + "PropertyValueIncorrect"},
		{"access capability", `{"MemoryChunkInfo":[{"MemoryChunk":{"@odata.id":"/redfish/v1/Chassis/cxlmem1/MemoryDomains/Static/MemoryChunks/cxlmem1-ld2"},"AccessCapabilities":["Execute"]}],"Links":{"InitiatorEndpoints":[` + ep("cxl1", "host2-cxl") + `]}}`, baseRegistry + "PropertyValueIncorrect"},
		{"wrong type", `{"MemoryChunkInfo":{"MemoryChunk":"x"}}`, baseRegistry + "PropertyValueTypeError"},
	} {
		t.Run("connection/"+tc.name, func(t *testing.T) {
			before := g.discover()
			res := g.raw("POST", conns, tc.body, nil)
			if res.status != http.StatusBadRequest || !slices.Contains(messageIDs(res), tc.id) {
				t.Fatalf("%d %v, want 400 %s: %s", res.status, messageIDs(res), tc.id, res.body)
			}
			g.unchanged(before, tc.name)
		})
	}
	// Unknown resources and methods.
	f.must(f.get("/redfish/v1/Fabrics/nope"), http.StatusNotFound, "unknown fabric")
	f.must(f.get("/redfish/v1/Fabrics/falcon1/Zones/host9-pcie"), http.StatusNotFound, "unknown zone")
	f.must(f.raw("PUT", zone, "{}", any), http.StatusMethodNotAllowed, "PUT")
	g.must(g.raw("DELETE", conns+"/host9-cxl.cxlmem1-ld1", "", any), http.StatusNotFound, "unknown connection")
}
