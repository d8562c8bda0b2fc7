package redfish_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"rackpool/internal/redfish/composition"
	"rackpool/internal/rf"
	"rackpool/internal/store"
	"rackpool/internal/tenancy"
)

const composeAction = "/redfish/v1/CompositionService/Actions/CompositionService.Compose"

func stanzaBody(id string, req map[string]any) map[string]any {
	return map[string]any{"StanzaType": "ComposeSystem", "StanzaId": id, "Request": req}
}

func manifestBody(typ string, stanzas ...map[string]any) map[string]any {
	return map[string]any{"RequestFormat": "Manifest", "RequestType": typ, "Manifest": map[string]any{"Stanzas": stanzas}}
}

func TestComposeActionPreviewReserveApply(t *testing.T) {
	s := newService(t)
	gpus := map[string]any{"Oem": map[string]any{"Rackpool": map[string]any{"Needs": []any{map[string]any{"Kind": "gpu", "Count": 2}}}}}
	// Preview: two stanzas placed together, nothing changes.
	r := s.must(http.StatusOK, "POST", composeAction, manifestBody("Preview", stanzaBody("a", gpus), stanzaBody("b", gpus)), admin)
	var out struct {
		Manifest struct {
			Stanzas []struct {
				Response struct {
					Links struct{ ResourceBlocks []map[string]string }
				}
			}
		}
		ReservationId string
	}
	if err := json.Unmarshal(r.body, &out); err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, st := range out.Manifest.Stanzas {
		for _, l := range st.Response.Links.ResourceBlocks {
			if seen[l["@odata.id"]] {
				t.Fatalf("preview gives %s to two stanzas", l["@odata.id"])
			}
			seen[l["@odata.id"]] = true
		}
	}
	if len(seen) != 6 { // 2 hosts + 4 GPUs
		t.Fatalf("preview placed %d blocks: %s", len(seen), r.body)
	}
	if len(s.systemIDs()) != 0 || len(links(t, s.get("/redfish/v1/CompositionService/CompositionReservations")["Members"])) != 0 {
		t.Fatal("Preview changed state")
	}
	// PreviewReserve holds them; the blocks show Reserved.
	r = s.must(http.StatusOK, "POST", composeAction, manifestBody("PreviewReserve", stanzaBody("a", gpus), stanzaBody("b", gpus)), admin)
	if err := json.Unmarshal(r.body, &out); err != nil || out.ReservationId == "" {
		t.Fatalf("no reservation: %s", r.body)
	}
	res := s.get("/redfish/v1/CompositionService/CompositionReservations/" + out.ReservationId)
	reserved := links(t, res["ReservedResourceBlocks"])
	if len(reserved) != 6 {
		t.Fatalf("reservation holds %v", reserved)
	}
	blk := s.get("/redfish/v1/CompositionService/ResourceBlocks/" + reserved[1])
	if dig(t, blk, "CompositionStatus", "Reserved") != true {
		t.Errorf("%s not Reserved: %v", reserved[1], blk["CompositionStatus"])
	}
	if free := links(t, s.get("/redfish/v1/CompositionService/FreePool")["Members"]); contains(free, reserved[1]) {
		t.Errorf("reserved block %s in the FreePool", reserved[1])
	}
	// Apply composes exactly the reserved blocks as two systems.
	s.must(http.StatusOK, "POST", composeAction, map[string]any{"RequestFormat": "Manifest", "RequestType": "Apply", "ReservationId": out.ReservationId}, admin)
	ids := s.systemIDs()
	if len(ids) != 2 {
		t.Fatalf("systems after Apply: %v", ids)
	}
	var got []string
	for _, id := range ids {
		got = append(got, systemBlocks(t, s.get("/redfish/v1/Systems/"+id))...)
	}
	for _, b := range reserved {
		if !contains(got, b[strings.LastIndex(b, "/")+1:]) {
			t.Errorf("reserved %s not composed (got %v)", b, got)
		}
	}
	s.must(http.StatusNotFound, "GET", "/redfish/v1/CompositionService/CompositionReservations/"+out.ReservationId, nil, admin)
	// Decompose both with one manifest.
	var stanzas []map[string]any
	for _, id := range ids {
		stanzas = append(stanzas, map[string]any{"StanzaType": "DecomposeSystem", "StanzaId": id, "Request": map[string]any{"@odata.id": "/redfish/v1/Systems/" + id}})
	}
	s.must(http.StatusOK, "POST", composeAction, manifestBody("Apply", stanzas...), admin)
	if len(s.systemIDs()) != 0 {
		t.Fatal("DecomposeSystem stanzas left systems")
	}
}

func contains(list []string, v string) bool {
	for _, x := range list {
		if x == v {
			return true
		}
	}
	return false
}

func TestComposeActionAllOrNothing(t *testing.T) {
	s := newService(t)
	before := s.snapshot()
	// The second stanza cannot fit (gpu1 is asked twice): nothing is applied.
	s.must(http.StatusConflict, "POST", composeAction, manifestBody("Apply",
		stanzaBody("a", specificBody("host1", "gpu1")), stanzaBody("b", specificBody("host3", "gpu1"))), admin)
	// An attach failure in the second stanza undoes the first.
	s.injectFault(http.StatusNoContent, "sas1", map[string]any{"Kind": "attach-fails", "Count": 1})
	s.must(http.StatusInternalServerError, "POST", composeAction, manifestBody("Apply",
		stanzaBody("a", specificBody("host1", "gpu1")), stanzaBody("b", specificBody("host3", "hdd1"))), admin)
	if after := s.snapshot(); strings.Join(after, ";") != strings.Join(before, ";") {
		t.Fatalf("failed Apply changed state\nbefore %v\nafter  %v", before, after)
	}
	for _, bad := range []map[string]any{
		{"RequestFormat": "Manifest", "RequestType": "Deploy", "Manifest": map[string]any{"Stanzas": []any{}}},
		{"RequestType": "Apply"},
		manifestBody("Apply", map[string]any{"StanzaType": "ExplodeSystem", "StanzaId": "x", "Request": map[string]any{}}),
		manifestBody("Apply"),
	} {
		s.must(http.StatusBadRequest, "POST", composeAction, bad, admin)
	}
}

func TestReservationExpiresThroughAPI(t *testing.T) {
	s := newService(t)
	s.must(http.StatusOK, "PATCH", "/redfish/v1/CompositionService", map[string]any{"ReservationDuration": "PT30S"}, admin)
	if d := s.get("/redfish/v1/CompositionService")["ReservationDuration"]; d != "PT30S" {
		t.Fatalf("ReservationDuration = %v", d)
	}
	s.must(http.StatusOK, "POST", composeAction, manifestBody("PreviewReserve", stanzaBody("a", specificBody("host1", "gpu1"))), admin)
	s.must(http.StatusConflict, "POST", "/redfish/v1/Systems", specificBody("host2", "gpu1"), admin)
	s.fabClk.Advance(31 * time.Second) // the manager's clock
	s.must(http.StatusCreated, "POST", "/redfish/v1/Systems", specificBody("host2", "gpu1"), admin)
	if m := links(t, s.get("/redfish/v1/CompositionService/CompositionReservations")["Members"]); len(m) != 0 {
		t.Errorf("expired reservation still listed: %v", m)
	}
	s.must(http.StatusBadRequest, "PATCH", "/redfish/v1/CompositionService", map[string]any{"ReservationDuration": "5 minutes"}, admin)
}

func TestOverprovisioningAndZoneAffinity(t *testing.T) {
	s := newService(t)
	// 12 GiB of 8 GiB blocks cannot be met exactly.
	mem := func(extra map[string]any) map[string]any {
		b := map[string]any{"Memory": map[string]any{"Members": []any{map[string]any{"@Redfish.RequestedCount": 1, "CapacityMiB": 12 * 1024}}}}
		for k, v := range extra {
			b[k] = v
		}
		return b
	}
	s.must(http.StatusBadRequest, "POST", "/redfish/v1/Systems", mem(nil), admin)
	s.must(http.StatusOK, "PATCH", "/redfish/v1/CompositionService", map[string]any{"AllowOverprovisioning": true}, admin)
	s.must(http.StatusCreated, "POST", "/redfish/v1/Systems", mem(map[string]any{"@Redfish.AllowOverprovisioning": true}), admin)
	// Zone affinity pins the host; refused when the service disallows it.
	gpu := map[string]any{"@Redfish.ZoneAffinity": "host2", "Processors": map[string]any{"Members": []any{
		map[string]any{"@Redfish.RequestedCount": 1, "ProcessorType": "GPU"}}}}
	r := s.must(http.StatusCreated, "POST", "/redfish/v1/Systems", gpu, admin)
	if h := dig(t, r.json(t), "Oem", "Rackpool", "Host"); h != "host2" {
		t.Errorf("zone affinity host2 gave %v", h)
	}
	s.must(http.StatusOK, "PATCH", "/redfish/v1/CompositionService", map[string]any{"AllowZoneAffinity": false}, admin)
	gpu["@Redfish.ZoneAffinity"] = "host3"
	s.must(http.StatusBadRequest, "POST", "/redfish/v1/Systems", gpu, admin)
}

func TestTaskMonitor(t *testing.T) {
	s := newService(t)
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
	if !strings.HasPrefix(monitor, "/redfish/v1/TaskService/TaskMonitors/") {
		t.Fatalf("Location %q", monitor)
	}
	var final reply
	for i := 0; i < 500; i++ {
		final = s.do("GET", monitor, nil, admin)
		if final.status != http.StatusAccepted {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if final.status != http.StatusCreated || final.header.Get("Location") == "" {
		t.Fatalf("monitor ended with %d: %s", final.status, final.body)
	}
	task := s.get("/redfish/v1/TaskService/Tasks/" + monitor[strings.LastIndex(monitor, "/")+1:])
	if task["TaskState"] != "Completed" || task["PercentComplete"] != float64(100) {
		t.Errorf("task = %v", task)
	}
	// Another tenant cannot read the task.
	_, red, _ := s.tenants()
	s.must(http.StatusNotFound, "GET", monitor, nil, red)
}

func TestEventsSSEAndPush(t *testing.T) {
	s := newService(t)
	blue, _, _ := s.tenants()
	received := make(chan string, 16)
	sink := newSink(t, received)
	s.must(http.StatusCreated, "POST", "/redfish/v1/EventService/Subscriptions", map[string]any{
		"Destination": sink, "Protocol": "Redfish", "Context": "ctx-1", "RegistryPrefixes": []string{"ResourceEvent"}}, admin)
	s.must(http.StatusBadRequest, "POST", "/redfish/v1/EventService/Subscriptions", map[string]any{"Destination": "ftp://x"}, admin)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stream := func(c cred) <-chan string {
		req, _ := http.NewRequestWithContext(ctx, "GET", s.srv.URL+"/redfish/v1/EventService/SSE", nil)
		for k, v := range c.hdr {
			req.Header.Set(k, v)
		}
		if c.basic {
			req.SetBasicAuth(tenancy.AdminUser, password)
		}
		resp, err := s.srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
			t.Fatalf("SSE: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
		}
		lines := make(chan string, 64)
		go func() {
			defer resp.Body.Close()
			sc := bufio.NewScanner(resp.Body)
			for sc.Scan() {
				if strings.HasPrefix(sc.Text(), "data: ") {
					lines <- sc.Text()
				}
			}
			close(lines)
		}()
		return lines
	}
	adminStream, blueStream := stream(admin), stream(blue)
	time.Sleep(50 * time.Millisecond) // let both subscribe
	sys := s.compose(specificBody("host1", "gpu1"))
	s.injectFault(http.StatusNoContent, "falcon1", map[string]any{"Kind": "device-fails", "Target": "gpu2"})
	if err := s.pollFabrics(); err != nil {
		t.Fatal(err)
	}
	wait := func(ch <-chan string, want string) {
		t.Helper()
		deadline := time.After(5 * time.Second)
		for {
			select {
			case l, ok := <-ch:
				if !ok {
					t.Fatalf("stream ended before %q", want)
				}
				if strings.Contains(l, want) {
					return
				}
			case <-deadline:
				t.Fatalf("no event with %q", want)
			}
		}
	}
	wait(adminStream, "/redfish/v1/Systems/"+sys)
	wait(adminStream, "ResourceStatusChangedCritical")
	wait(received, "ResourceStatusChangedCritical")
	// Blue sees its own composition, not the admin's nor the fabric fault.
	bs := s.must(http.StatusCreated, "POST", "/redfish/v1/Systems", specificBody("host3", "gpu3"), blue).json(t)["Id"].(string)
	select {
	case l := <-blueStream:
		if !strings.Contains(l, bs) {
			t.Fatalf("blue's first event is not its own: %s", l)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("blue got no event")
	}
	// The event log keeps them too.
	if body := string(s.must(http.StatusOK, "GET", "/redfish/v1/Managers/rackpool/LogServices/Events/Entries", nil, admin).body); !strings.Contains(body, "ResourceStatusChangedCritical") {
		t.Error("event log lacks the fault")
	}
}

func TestMetricsAndAuditLog(t *testing.T) {
	s := newService(t)
	sys := s.compose(specificBody("host1", "gpu1"))
	s.must(http.StatusNoContent, "DELETE", "/redfish/v1/Systems/"+sys, nil, admin)
	s.do("GET", "/redfish/v1/Systems", nil, cred{token: "forged"})
	r := s.must(http.StatusOK, "GET", "/metrics", nil, admin)
	for _, want := range []string{
		`rackpool_compositions{state="Composed"} 0`,
		`rackpool_compose_duration_seconds_count`,
		`rackpool_scheduler_decision_seconds_count{outcome="ok"}`,
		`rackpool_fabric_operation_seconds_count{fabric_kind="pcie-switch",op="attach",outcome="ok"} 1`,
		`rackpool_sessions_active`,
		`rackpool_refused_requests_total{reason="401"} 1`,
	} {
		if !strings.Contains(string(r.body), want) {
			t.Errorf("metrics lack %q", want)
		}
	}
	s.must(http.StatusUnauthorized, "GET", "/metrics", nil, cred{})
	s.must(http.StatusMethodNotAllowed, "DELETE", "/redfish/v1/Systems/host2", nil, admin)
	entries := s.get("/redfish/v1/Managers/rackpool/LogServices/Audit/Entries")
	var actions []string
	for _, m := range list(t, entries["Members"]) {
		o := dig(t, m, "Oem", "Rackpool").(map[string]any)
		// Each entry names its outcome by a registry MessageId, and its
		// Message says who did what once.
		actions = append(actions, o["Method"].(string)+" "+o["Target"].(string)+" "+o["Outcome"].(string)+" "+m.(map[string]any)["MessageId"].(string))
		if msg := m.(map[string]any)["Message"].(string); strings.Count(msg, o["Target"].(string)) != 1 {
			t.Errorf("audit message %q does not name %s once", msg, o["Target"])
		}
	}
	for _, want := range []string{
		"POST /redfish/v1/Systems success Base.1.22.Created",
		"DELETE /redfish/v1/Systems/" + sys + " success Base.1.22.Success",
		"GET /redfish/v1/Systems denied Base.1.22.NoValidSession",
		"DELETE /redfish/v1/Systems/host2 failure Base.1.22.ResourceCannotBeDeleted",
	} {
		if !contains(actions, want) {
			t.Errorf("audit log lacks %q: %v", want, actions)
		}
	}
	s.must(http.StatusBadRequest, "GET", "/redfish/v1/Managers/rackpool/LogServices/Audit/Entries?limit=-4", nil, admin)
	// Entries the service writes itself, or written before entries kept a
	// MessageId, name one from the same registry version.
	if got := store.AuditMessage(store.AuditSuccess, http.StatusOK); got != rf.Registry+"Success" {
		t.Errorf("AuditMessage = %s, not in the Base registry %s", got, rf.Registry)
	}
}

func TestExportImport(t *testing.T) {
	src := newService(t)
	src.must(http.StatusCreated, "POST", "/redfish/v1/AccountService/Oem/Rackpool/Tenants", map[string]any{"Id": "blue", "Quotas": map[string]int{"gpu": 4}}, admin)
	a := src.compose(specificBody("host1", "gpu1", "hdd1", "memnode1-b01"))
	src.compose(specificBody("host3", "gpu2"))
	doc := src.must(http.StatusOK, "POST", "/redfish/v1/CompositionService/Actions/Oem/Rackpool.ExportAllocation", map[string]any{}, admin).body
	alloc, err := composition.ParseAllocation(doc)
	if err != nil || len(alloc.Systems) != 2 {
		t.Fatalf("export: %v %s", err, doc)
	}
	dst := newService(t)
	// A preview says what an import would compose and create, and changes
	// nothing.
	withType := func(typ string) map[string]any {
		var m map[string]any
		if err := json.Unmarshal(doc, &m); err != nil {
			t.Fatal(err)
		}
		m["RequestType"] = typ
		return m
	}
	empty := dst.snapshot()
	pv := dst.must(http.StatusOK, "POST", "/redfish/v1/CompositionService/Actions/Oem/Rackpool.ImportAllocation", withType("Preview"), admin).json(t)
	systems := list(t, pv["Systems"])
	if len(systems) != 2 || systems[0].(map[string]any)["Action"] != "Compose" || systems[0].(map[string]any)["Placement"] == nil {
		t.Fatalf("preview systems: %v", pv)
	}
	if nt := list(t, pv["NewTenants"]); len(nt) != 1 || nt[0] != "blue" {
		t.Errorf("preview NewTenants %v, want [blue]", nt)
	}
	if after := dst.snapshot(); strings.Join(after, ";") != strings.Join(empty, ";") || len(dst.systemIDs()) != 0 {
		t.Fatal("a preview changed state")
	}
	dst.must(http.StatusBadRequest, "POST", "/redfish/v1/CompositionService/Actions/Oem/Rackpool.ImportAllocation", withType("Later"), admin)
	r := dst.must(http.StatusOK, "POST", "/redfish/v1/CompositionService/Actions/Oem/Rackpool.ImportAllocation", json.RawMessage(doc), admin)
	if n := len(list(t, r.json(t)["Systems"])); n != 2 {
		t.Fatalf("imported %d systems", n)
	}
	want := systemBlocks(t, src.get("/redfish/v1/Systems/"+a))
	found := false
	for _, id := range dst.systemIDs() {
		if strings.Join(systemBlocks(t, dst.get("/redfish/v1/Systems/"+id)), ",") == strings.Join(want, ",") {
			found = true
		}
	}
	if !found {
		t.Errorf("no imported system holds %v", want)
	}
	if q := dig(t, dst.get("/redfish/v1/AccountService/Oem/Rackpool/Tenants/blue"), "Quotas", "gpu"); q != float64(4) {
		t.Errorf("imported tenant quota %v", q)
	}
	// Importing again cannot fit (all taken): nothing changes.
	before := dst.snapshot()
	dst.must(http.StatusBadRequest, "POST", "/redfish/v1/CompositionService/Actions/Oem/Rackpool.ImportAllocation", json.RawMessage(doc), admin)
	pv = dst.must(http.StatusBadRequest, "POST", "/redfish/v1/CompositionService/Actions/Oem/Rackpool.ImportAllocation", withType("Preview"), admin).json(t)
	if !strings.Contains(fmt.Sprint(pv), "does not fit") {
		t.Errorf("a preview that cannot fit says %v", pv)
	}
	if after := dst.snapshot(); strings.Join(after, ";") != strings.Join(before, ";") {
		t.Fatal("failed import changed state")
	}
	dst.must(http.StatusBadRequest, "POST", "/redfish/v1/CompositionService/Actions/Oem/Rackpool.ImportAllocation", map[string]any{"format": "other"}, admin)
}

func TestConnections(t *testing.T) {
	s := newService(t)
	const f = "/redfish/v1/Fabrics/sas1"
	body := func(targets ...string) map[string]any {
		var ts []map[string]string
		for _, t := range targets {
			ts = append(ts, map[string]string{"@odata.id": f + "/Endpoints/" + t})
		}
		return map[string]any{"Links": map[string]any{"InitiatorEndpoints": []map[string]string{{"@odata.id": f + "/Endpoints/host1-sas"}}, "TargetEndpoints": ts}}
	}
	// A connection to a host with no system composes one.
	r := s.must(http.StatusCreated, "POST", f+"/Connections", body("hdd1", "hdd2"), admin)
	sys := r.json(t)["Id"].(string)
	if got := systemBlocks(t, s.get("/redfish/v1/Systems/"+sys)); strings.Join(got, ",") != "host1,hdd1,hdd2" {
		t.Fatalf("system after connect: %v", got)
	}
	// A second connection adds to the same system; the system view and the
	// fabric zone agree.
	s.compose(specificBody("host3", "gpu1")) // unrelated
	s.must(http.StatusCreated, "POST", f+"/Connections", body("ssd1"), admin)
	if got := systemBlocks(t, s.get("/redfish/v1/Systems/"+sys)); !contains(got, "ssd1") {
		t.Fatalf("ssd1 not added: %v", got)
	}
	if eps := links(t, dig(t, s.get(f+"/Zones/host1-sas"), "Links", "Endpoints")); !contains(eps, "ssd1") {
		t.Errorf("fabric zone lacks ssd1: %v", eps)
	}
	// The system's drives cannot be taken by another connection.
	s.must(http.StatusConflict, "POST", f+"/Connections", map[string]any{"Links": map[string]any{
		"InitiatorEndpoints": []map[string]string{{"@odata.id": f + "/Endpoints/host2-sas"}},
		"TargetEndpoints":    []map[string]string{{"@odata.id": f + "/Endpoints/hdd1"}}}}, admin)
	s.must(http.StatusBadRequest, "POST", f+"/Connections", map[string]any{"Links": map[string]any{
		"InitiatorEndpoints": []map[string]string{{"@odata.id": "/redfish/v1/Fabrics/falcon1/Endpoints/host1-pcie"}},
		"TargetEndpoints":    []map[string]string{{"@odata.id": f + "/Endpoints/hdd3"}}}}, admin)
	// Deleting the connection removes the drives; with nothing left the
	// system is decomposed.
	s.must(http.StatusNoContent, "DELETE", f+"/Connections/"+sys, nil, admin)
	s.must(http.StatusNotFound, "GET", "/redfish/v1/Systems/"+sys, nil, admin)
	if st, _ := s.blockState("hdd1"); st != "Unused" {
		t.Errorf("hdd1 is %s after disconnect", st)
	}
}

// newSink starts an HTTP receiver for pushed events.
func newSink(t *testing.T, got chan<- string) string {
	t.Helper()
	srv := newHTTPServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		select {
		case got <- string(b):
		default:
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	return srv
}

// TestAuditOneEntryPerMutation: a mutation whose workflow commits its audit
// entry with its outcome is recorded exactly once, with the status it was
// answered and the workflow's detail; a failed one and one answered 202
// are recorded by the middleware, also once.
func TestAuditOneEntryPerMutation(t *testing.T) {
	s := newService(t)
	sys := s.compose(specificBody("host1", "gpu1"))
	patch := map[string]any{"Links": map[string]any{"ResourceBlocks": []any{blockRef("host1"), blockRef("gpu1"), blockRef("hdd1")}}}
	s.must(http.StatusOK, "PATCH", "/redfish/v1/Systems/"+sys, patch, admin)
	s.must(http.StatusConflict, "POST", "/redfish/v1/Systems", specificBody("host2", "gpu1"), admin)
	s.must(http.StatusNoContent, "DELETE", "/redfish/v1/Systems/"+sys, nil, admin)
	s.must(http.StatusAccepted, "POST", "/redfish/v1/Systems", specificBody("host3", "gpu3"), cred{basic: true, hdr: map[string]string{"Prefer": "respond-async"}})

	type rec struct {
		method, target, outcome, detail string
		status                          int
	}
	var got []rec
	for _, m := range list(t, s.get("/redfish/v1/Managers/rackpool/LogServices/Audit/Entries")["Members"]) {
		o := dig(t, m, "Oem", "Rackpool").(map[string]any)
		detail, _ := o["Detail"].(string)
		got = append(got, rec{o["Method"].(string), o["Target"].(string), o["Outcome"].(string), detail, int(o["Status"].(float64))})
	}
	want := []rec{
		{"POST", "/redfish/v1/Systems", "success", "composed " + sys, 201},
		{"PATCH", "/redfish/v1/Systems/" + sys, "success", "updated " + sys, 200},
		{"POST", "/redfish/v1/Systems", "failure", "", 409},
		{"DELETE", "/redfish/v1/Systems/" + sys, "success", "decomposed " + sys, 204},
		{"POST", "/redfish/v1/Systems", "success", "accepted as a task", 202},
	}
	if len(got) != len(want) {
		t.Fatalf("audit log has %d entries, want %d:\n%+v", len(got), len(want), got)
	}
	for i := range want {
		g := got[i]
		if g.method != want[i].method || g.target != want[i].target || g.outcome != want[i].outcome || g.status != want[i].status ||
			(want[i].detail != "" && g.detail != want[i].detail) {
			t.Errorf("entry %d = %+v, want %+v", i, g, want[i])
		}
	}
}
