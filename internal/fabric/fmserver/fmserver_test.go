package fmserver

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"rackpool/internal/clock"
	"rackpool/internal/fabric"
)

// TestResourcesReachable crawls every link from the service root on each
// fabric kind: every resource answers 200 with its own @odata.id, an
// @odata.type, and Id and Name (collections: Members).
func TestResourcesReachable(t *testing.T) {
	for _, tc := range []struct{ name, fabric string }{
		{"pcie", "falcon1"}, {"sas", "sas1"}, {"vlan", "vlan1"}, {"optical", "ocs1"}, {"cxl", "cxl1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			top := rackTopology(t)
			if tc.fabric == "cxl1" {
				top = cxlTopology(t)
			}
			f := newFM(t, top, tc.fabric, Options{})
			attachSomething(t, f, tc.fabric)
			seen := map[string]bool{}
			queue := []string{"/redfish/v1"}
			for len(queue) > 0 {
				path := queue[0]
				queue = queue[1:]
				if seen[path] {
					continue
				}
				seen[path] = true
				res := f.must(f.get(path), http.StatusOK, "GET "+path)
				if res.json["@odata.id"] != path || res.json["@odata.type"] == nil {
					t.Fatalf("%s: @odata.id %v, @odata.type %v", path, res.json["@odata.id"], res.json["@odata.type"])
				}
				if _, ok := res.json["Members"]; !ok && (res.json["Id"] == nil || res.json["Name"] == nil) {
					t.Fatalf("%s: no Id or Name: %s", path, res.body)
				}
				if strings.Contains(path, "/Zones/") || strings.Contains(path, "/Connections/") {
					if res.header.Get("ETag") == "" {
						t.Fatalf("%s: no ETag", path)
					}
				}
				queue = append(queue, links(res.json)...)
			}
			if len(seen) < 10 {
				t.Fatalf("only %d resources reachable", len(seen))
			}
			for _, p := range []string{"/redfish/v1/$metadata", "/redfish/v1/odata", "/redfish", oemSchemaURI} {
				f.must(f.raw("GET", p, "", map[string]string{"X-Auth-Token": ""}), http.StatusOK, p)
			}
		})
	}
}

// links collects every @odata.id under v except v's own.
func links(v any) []string {
	var out []string
	var walk func(v any, top bool)
	walk = func(v any, top bool) {
		switch x := v.(type) {
		case map[string]any:
			for k, e := range x {
				if k == "@odata.id" && !top {
					if s, ok := e.(string); ok && !strings.Contains(s, "#") {
						out = append(out, s)
					}
				}
				walk(e, false)
			}
		case []any:
			for _, e := range x {
				walk(e, false)
			}
		}
	}
	walk(v, true)
	return out
}

// attachSomething makes a zone or connection exist on fabricID.
func attachSomething(t *testing.T, f *fm, fabricID string) {
	t.Helper()
	switch fabricID {
	case "falcon1":
		f.settle(f.must(f.raw("POST", "/redfish/v1/Fabrics/falcon1/Zones", endpoints("falcon1", "host1-pcie", "gpu1"), nil), http.StatusAccepted, "zone"))
	case "sas1":
		f.settle(f.raw("POST", "/redfish/v1/Fabrics/sas1/Zones", endpoints("sas1", "host1-sas", "hdd1", "ssd2"), nil))
	case "vlan1":
		f.settle(f.raw("POST", "/redfish/v1/Fabrics/vlan1/Zones", endpoints("vlan1", "host2-eth", "essd1"), nil))
	case "ocs1":
		f.settle(f.raw("POST", "/redfish/v1/Fabrics/ocs1/Connections", connection("ocs1", "host1-ocs-a", "memnode1", "Memory", "memnode1-b01"), nil))
	case "cxl1":
		f.settle(f.raw("POST", "/redfish/v1/Fabrics/cxl1/Connections", connection("cxl1", "host1-cxl", "cxlmem1", "Static", "cxlmem1-ld1"), nil))
		f.settle(f.raw("POST", "/redfish/v1/Fabrics/cxl1/Connections", connection("cxl1", "host2-cxl", "cxlmem2", "Dynamic", "cxlmem2-x01"), nil))
	}
	if len(f.discover().Attachments) == 0 {
		t.Fatal("nothing attached")
	}
}

func connection(fabricID, initiator, device, domain, block string) string {
	return fmt.Sprintf(`{"ConnectionType":"Memory","MemoryChunkInfo":[{"MemoryChunk":{"@odata.id":"/redfish/v1/Chassis/%s/MemoryDomains/%s/MemoryChunks/%s"},"AccessCapabilities":["Read","Write"]}],"Links":{"InitiatorEndpoints":[%s],"TargetEndpoints":[%s]}}`,
		device, domain, block, ep(fabricID, initiator), ep(fabricID, device))
}

func TestSessions(t *testing.T) {
	clk := clock.NewManual(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	f := newFM(t, rackTopology(t), "falcon1", Options{Clock: clk, SessionTimeout: time.Minute})
	noAuth := map[string]string{"X-Auth-Token": ""}
	f.must(f.raw("GET", "/redfish/v1", "", noAuth), http.StatusOK, "service root without credentials")
	for _, p := range []string{"/redfish/v1/Fabrics", "/redfish/v1/Fabrics/falcon1/Zones", "/redfish/v1/SessionService/Sessions", "/redfish/v1/TaskService"} {
		res := f.must(f.raw("GET", p, "", noAuth), http.StatusUnauthorized, p+" without credentials")
		if !slices.Contains(messageIDs(res), baseRegistry+"NoValidSession") {
			t.Fatalf("401 body: %s", res.body)
		}
	}
	f.must(f.raw("GET", "/redfish/v1/Fabrics", "", map[string]string{"X-Auth-Token": "forged"}), http.StatusUnauthorized, "forged token")
	f.must(f.raw("POST", "/redfish/v1/SessionService/Sessions", `{"UserName":"Administrator","Password":"wrong"}`, noAuth), http.StatusUnauthorized, "wrong password")
	f.must(f.raw("POST", "/redfish/v1/SessionService/Sessions", `{"UserName":"Administrator"}`, noAuth), http.StatusBadRequest, "no password")
	// Basic authentication.
	basic := map[string]string{"X-Auth-Token": "", "Authorization": "Basic " + b64(testUser+":"+testPass)}
	f.must(f.raw("GET", "/redfish/v1/Fabrics", "", basic), http.StatusOK, "basic")
	basic["Authorization"] = "Basic " + b64(testUser+":nope")
	f.must(f.raw("GET", "/redfish/v1/Fabrics", "", basic), http.StatusUnauthorized, "basic, wrong password")

	// The session is listed, survives activity, and expires after a
	// minute of inactivity.
	res := f.must(f.get("/redfish/v1/SessionService/Sessions"), http.StatusOK, "sessions")
	if res.json["Members@odata.count"].(float64) != 1 {
		t.Fatalf("sessions: %s", res.body)
	}
	clk.Advance(50 * time.Second)
	f.must(f.get("/redfish/v1/Fabrics"), http.StatusOK, "within the timeout")
	clk.Advance(50 * time.Second)
	f.must(f.get("/redfish/v1/Fabrics"), http.StatusOK, "activity renews the session")
	clk.Advance(61 * time.Second)
	f.must(f.get("/redfish/v1/Fabrics"), http.StatusUnauthorized, "after the timeout")

	// Logout.
	f.login()
	sessions := f.must(f.get("/redfish/v1/SessionService/Sessions"), http.StatusOK, "sessions")
	mine := sessions.json["Members"].([]any)[0].(map[string]any)["@odata.id"].(string)
	f.must(f.get(mine), http.StatusOK, "own session")
	f.must(f.raw("DELETE", mine, "", nil), http.StatusNoContent, "logout")
	f.must(f.get("/redfish/v1/Fabrics"), http.StatusUnauthorized, "after logout")
}

func TestZoneLifecycle(t *testing.T) {
	f := newFM(t, rackTopology(t), "falcon1", Options{})
	zones := "/redfish/v1/Fabrics/falcon1/Zones"
	// Threshold 0: a change answers 202 and a task monitor.
	res := f.must(f.raw("POST", zones, endpoints("falcon1", "host1-pcie", "gpu1", "gpu2"), nil), http.StatusAccepted, "create")
	if res.header.Get("Retry-After") == "" || res.json["TaskState"] == nil {
		t.Fatalf("202: %v %s", res.header, res.body)
	}
	monitor := res.header.Get("Location")
	task := "/redfish/v1/TaskService/Tasks/" + strings.TrimPrefix(monitor, "/redfish/v1/TaskService/TaskMonitors/")
	res = f.must(f.settle(res), http.StatusCreated, "create's final answer")
	zone := res.header.Get("Location")
	if zone != zones+"/host1-pcie" || res.header.Get("ETag") == "" {
		t.Fatalf("created: %v %s", res.header, res.body)
	}
	// The monitor keeps its answer; the task says Completed.
	f.must(f.get(monitor), http.StatusCreated, "monitor read again")
	tk := f.must(f.get(task), http.StatusOK, "task")
	if tk.json["TaskState"] != "Completed" || tk.json["PercentComplete"].(float64) != 100 {
		t.Fatalf("task: %s", tk.body)
	}
	want := []fabric.Attachment{
		{Block: "gpu1", Device: "gpu1", Host: "host1", HostPort: "pcie"},
		{Block: "gpu2", Device: "gpu2", Host: "host1", HostPort: "pcie"},
	}
	if got := f.discover().Attachments; !slices.Equal(got, want) {
		t.Fatalf("attachments %v, want %v", got, want)
	}
	f.must(f.raw("POST", zones, endpoints("falcon1", "host1-pcie", "gpu3"), nil), http.StatusConflict, "second zone of one port")

	// ETags: PATCH and DELETE need If-Match.
	get := f.must(f.get(zone), http.StatusOK, "zone")
	etag := get.header.Get("ETag")
	f.must(f.raw("PATCH", zone, endpoints("falcon1", "host1-pcie", "gpu2", "gpu3"), nil), http.StatusPreconditionRequired, "PATCH without If-Match")
	f.must(f.raw("PATCH", zone, endpoints("falcon1", "host1-pcie", "gpu2", "gpu3"), map[string]string{"If-Match": `"stale"`}), http.StatusPreconditionFailed, "PATCH stale")
	res = f.must(f.settle(f.raw("PATCH", zone, endpoints("falcon1", "host1-pcie", "gpu2", "gpu3"), map[string]string{"If-Match": etag})), http.StatusOK, "PATCH")
	if res.header.Get("ETag") == etag {
		t.Fatal("ETag unchanged by a membership change")
	}
	want = []fabric.Attachment{
		{Block: "gpu2", Device: "gpu2", Host: "host1", HostPort: "pcie"},
		{Block: "gpu3", Device: "gpu3", Host: "host1", HostPort: "pcie"},
	}
	if got := f.discover().Attachments; !slices.Equal(got, want) {
		t.Fatalf("after PATCH %v, want %v", got, want)
	}
	f.must(f.raw("PATCH", zone, endpoints("falcon1", "host1-pcie"), map[string]string{"If-Match": etag}), http.StatusPreconditionFailed, "PATCH with the old ETag")
	// A PATCH that changes nothing answers at once.
	etag = res.header.Get("ETag")
	f.must(f.raw("PATCH", zone, endpoints("falcon1", "host1-pcie", "gpu3", "gpu2"), map[string]string{"If-Match": etag}), http.StatusOK, "no-op PATCH")
	// Emptied, the zone stays.
	res = f.must(f.settle(f.raw("PATCH", zone, endpoints("falcon1", "host1-pcie"), map[string]string{"If-Match": etag})), http.StatusOK, "empty")
	if len(f.discover().Attachments) != 0 {
		t.Fatal("attachments left")
	}
	f.must(f.get(zone), http.StatusOK, "empty zone stays")
	// DELETE.
	f.must(f.raw("DELETE", zone, "", nil), http.StatusPreconditionRequired, "DELETE without If-Match")
	f.must(f.settle(f.raw("DELETE", zone, "", map[string]string{"If-Match": res.header.Get("ETag")})), http.StatusNoContent, "DELETE")
	f.must(f.get(zone), http.StatusNotFound, "deleted zone")
	// DELETE detaches what the zone holds.
	f.settle(f.raw("POST", zones, endpoints("falcon1", "host2-pcie", "gpu5"), nil))
	res = f.get(zones + "/host2-pcie")
	f.must(f.settle(f.raw("DELETE", zones+"/host2-pcie", "", map[string]string{"If-Match": "*"})), http.StatusNoContent, "DELETE with *")
	if len(f.discover().Attachments) != 0 {
		t.Fatal("DELETE left attachments")
	}
}

func TestTaskThreshold(t *testing.T) {
	// falcon1's hot-plug is 100 ms: under a 1 s threshold changes answer
	// at once; over 50 ms they answer 202.
	f := newFM(t, rackTopology(t), "falcon1", Options{TaskThreshold: time.Second})
	f.must(f.raw("POST", "/redfish/v1/Fabrics/falcon1/Zones", endpoints("falcon1", "host1-pcie", "gpu1", "gpu2"), nil), http.StatusCreated, "under the threshold")
	g := newFM(t, rackTopology(t), "falcon1", Options{TaskThreshold: 150 * time.Millisecond})
	g.must(g.raw("POST", "/redfish/v1/Fabrics/falcon1/Zones", endpoints("falcon1", "host1-pcie", "gpu1"), nil), http.StatusCreated, "one hot-plug")
	res := g.must(g.raw("PATCH", "/redfish/v1/Fabrics/falcon1/Zones/host1-pcie", endpoints("falcon1", "host1-pcie", "gpu1", "gpu2", "gpu3"), map[string]string{"If-Match": "*"}), http.StatusAccepted, "two hot-plugs")
	g.must(g.settle(res), http.StatusOK, "final")
	// On the wall clock, a change still running after the threshold is a
	// task that is Running until it ends.
	h := newFM(t, rackTopology(t), "falcon1", Options{Clock: clock.Real{}, TaskThreshold: 10 * time.Millisecond})
	res = h.must(h.raw("POST", "/redfish/v1/Fabrics/falcon1/Zones", endpoints("falcon1", "host3-pcie", "gpu4"), nil), http.StatusAccepted, "wall clock")
	tk := h.get("/redfish/v1/TaskService/Tasks/" + strings.TrimPrefix(res.header.Get("Location"), "/redfish/v1/TaskService/TaskMonitors/"))
	if tk.json["TaskState"] != "Running" {
		t.Fatalf("task while the hot-plug runs: %s", tk.body)
	}
	if r := h.get(res.header.Get("Location")); r.status != http.StatusAccepted {
		t.Fatalf("monitor while running: %d", r.status)
	}
	h.must(h.settle(res), http.StatusCreated, "final")
}
