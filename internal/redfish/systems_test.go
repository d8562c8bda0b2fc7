package redfish_test

import (
	"bytes"
	"encoding/json"
	"io"
	"maps"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"

	"rackpool/internal/redfish"
	"rackpool/internal/tenancy"
)

// TestShrinkIsItsOwnAction: Rackpool.Shrink removes blocks in one update,
// the system advertises it, and the audit log names it Shrink (the CLI's
// shrink was once sent as Expand with Remove and audited as Expand). Like
// every update it writes two records, its intent and its outcome, so it
// moves the version exactly as an Expand does.
func TestShrinkIsItsOwnAction(t *testing.T) {
	s := newService(t)
	id := s.compose(specificBody("host1", "gpu1", "gpu2", "hdd1"))
	path := "/redfish/v1/Systems/" + id
	sys := s.get(path)
	if got := dig(t, sys, "Actions", "Oem", "#Rackpool.Shrink", "target"); got != path+"/Actions/Oem/Rackpool.Shrink" {
		t.Fatalf("Shrink target %v", got)
	}
	before := dig(t, sys, "Oem", "Rackpool", "Version").(float64)

	r := s.must(http.StatusOK, "POST", path+"/Actions/Oem/Rackpool.Shrink", map[string]any{"Blocks": []string{"gpu2", "hdd1"}}, admin)
	shrunk := r.json(t)
	if got := systemBlocks(t, shrunk); !slices.Equal(got, []string{"host1", "gpu1"}) {
		t.Fatalf("blocks after Shrink %v, want host1, gpu1", got)
	}
	afterShrink := dig(t, shrunk, "Oem", "Rackpool", "Version").(float64)
	r = s.must(http.StatusOK, "POST", path+"/Actions/Oem/Rackpool.Expand", map[string]any{"Blocks": []string{"gpu2"}}, admin)
	afterExpand := dig(t, r.json(t), "Oem", "Rackpool", "Version").(float64)
	if afterShrink-before != 2 || afterExpand-afterShrink != 2 {
		t.Errorf("versions %v → Shrink %v → Expand %v, want each update to write its intent and its outcome (+2)", before, afterShrink, afterExpand)
	}

	// Refusals: nothing to remove, the compute block, a block it does not hold.
	s.must(http.StatusBadRequest, "POST", path+"/Actions/Oem/Rackpool.Shrink", map[string]any{}, admin)
	s.must(http.StatusBadRequest, "POST", path+"/Actions/Oem/Rackpool.Shrink", map[string]any{"Blocks": []string{"host1"}}, admin)
	s.must(http.StatusBadRequest, "POST", path+"/Actions/Oem/Rackpool.Shrink", map[string]any{"Blocks": []string{"gpu7"}}, admin)
	s.must(http.StatusNotFound, "POST", "/redfish/v1/Systems/sys-nope/Actions/Oem/Rackpool.Shrink", map[string]any{"Blocks": []string{"gpu1"}}, admin)

	var actions []string
	for _, m := range list(t, s.get("/redfish/v1/Managers/rackpool/LogServices/Audit/Entries")["Members"]) {
		o := dig(t, m, "Oem", "Rackpool").(map[string]any)
		if o["Outcome"] == "success" && strings.HasPrefix(o["Target"].(string), path+"/") {
			actions = append(actions, o["Action"].(string)+" "+o["Target"].(string))
		}
	}
	want := []string{
		"POST /redfish/v1/Systems/{id}/Actions/Oem/Rackpool.Shrink " + path + "/Actions/Oem/Rackpool.Shrink",
		"POST /redfish/v1/Systems/{id}/Actions/Oem/Rackpool.Expand " + path + "/Actions/Oem/Rackpool.Expand",
	}
	if !slices.Equal(actions, want) {
		t.Errorf("audited updates:\n%s\nwant:\n%s", strings.Join(actions, "\n"), strings.Join(want, "\n"))
	}
}

// TestSystemLifecycle composes through the API and walks a system through
// every way of changing it: PATCH with If-Match, the Add/Remove actions,
// Oem Rackpool.Expand, and DELETE.
func TestSystemLifecycle(t *testing.T) {
	s := newService(t)
	id := s.compose(specificBody("host1", "gpu1"))
	path := "/redfish/v1/Systems/" + id

	r := s.must(http.StatusOK, "GET", path, nil, admin)
	sys := r.json(t)
	if r.header.Get("ETag") != `W/"2"` || sys["@odata.etag"] != `W/"2"` {
		t.Fatalf("ETag %q, @odata.etag %v, want W/\"2\"", r.header.Get("ETag"), sys["@odata.etag"])
	}
	if got := systemBlocks(t, sys); !slices.Equal(got, []string{"host1", "gpu1"}) {
		t.Fatalf("blocks %v", got)
	}
	if st, n := s.blockState("gpu1"); st != "Composed" || n != 1 {
		t.Fatalf("gpu1 is %s in %d compositions", st, n)
	}

	// PATCH with the current ETag adds gpu2.
	patch := map[string]any{"Links": map[string]any{"ResourceBlocks": []any{blockRef("host1"), blockRef("gpu1"), blockRef("gpu2")}}}
	r = s.must(http.StatusOK, "PATCH", path, patch, cred{basic: true, hdr: map[string]string{"If-Match": `W/"2"`}})
	etag := r.header.Get("ETag")
	if etag == "" || etag == `W/"2"` || r.json(t)["@odata.etag"] != etag {
		t.Fatalf("PATCH: ETag %q, body %s", etag, r.body)
	}
	if got := systemBlocks(t, s.get(path)); !slices.Equal(got, []string{"host1", "gpu1", "gpu2"}) {
		t.Fatalf("after PATCH: blocks %v", got)
	}
	if st, _ := s.blockState("gpu2"); st != "Composed" {
		t.Fatalf("gpu2 is %s after PATCH", st)
	}

	// A stale ETag changes nothing.
	stale := map[string]any{"Links": map[string]any{"ResourceBlocks": []any{blockRef("host1"), blockRef("gpu1")}}}
	for _, tag := range []string{`W/"2"`, `"2"`, `W/"junk"`, `W/"999"`} {
		r = s.must(http.StatusPreconditionFailed, "PATCH", path, stale, cred{basic: true, hdr: map[string]string{"If-Match": tag}})
		if code := r.errorCode(t); code != "Base.1.22.PreconditionFailed" {
			t.Fatalf("stale If-Match %s: %s", tag, code)
		}
	}
	after := s.must(http.StatusOK, "GET", path, nil, admin)
	if after.header.Get("ETag") != etag || !slices.Equal(systemBlocks(t, after.json(t)), []string{"host1", "gpu1", "gpu2"}) {
		t.Fatalf("a stale PATCH changed the system: ETag %q, %s", after.header.Get("ETag"), after.body)
	}
	if st, _ := s.blockState("gpu2"); st != "Composed" {
		t.Fatalf("gpu2 is %s after a stale PATCH", st)
	}
	// DELETE with a stale ETag is refused too.
	s.must(http.StatusPreconditionFailed, "DELETE", path, nil, cred{basic: true, hdr: map[string]string{"If-Match": `W/"2"`}})

	// The actions.
	add := path + "/Actions/ComputerSystem.AddResourceBlock"
	remove := path + "/Actions/ComputerSystem.RemoveResourceBlock"
	s.must(http.StatusOK, "POST", add, map[string]any{"ResourceBlock": blockRef("hdd1")}, admin)
	if got := systemBlocks(t, s.get(path)); !slices.Contains(got, "hdd1") {
		t.Fatalf("after AddResourceBlock: %v", got)
	}
	if code := s.must(http.StatusBadRequest, "POST", add, map[string]any{"ResourceBlock": blockRef("hdd1")}, admin).errorCode(t); code != "Base.1.22.GeneralError" {
		t.Fatalf("adding a held block: %s", code)
	}
	s.must(http.StatusPreconditionFailed, "POST", remove, map[string]any{"ResourceBlock": blockRef("hdd1"), "ComputerSystemETag": `W/"2"`}, admin)
	s.must(http.StatusOK, "POST", remove, map[string]any{"ResourceBlock": blockRef("hdd1")}, admin)
	if got := systemBlocks(t, s.get(path)); slices.Contains(got, "hdd1") {
		t.Fatalf("after RemoveResourceBlock: %v", got)
	}
	if st, n := s.blockState("hdd1"); st != "Unused" || n != 0 {
		t.Fatalf("hdd1 is %s in %d after removal", st, n)
	}
	s.must(http.StatusBadRequest, "POST", remove, map[string]any{"ResourceBlock": blockRef("host1")}, admin)
	s.must(http.StatusBadRequest, "POST", remove, map[string]any{}, admin)
	s.must(http.StatusBadRequest, "POST", add, map[string]any{"ResourceBlock": blockRef("nope")}, admin)
	s.must(http.StatusNotFound, "POST", "/redfish/v1/Systems/sys-nope/Actions/ComputerSystem.AddResourceBlock", map[string]any{"ResourceBlock": blockRef("hdd2")}, admin)

	// Expand by need: 16 GiB of pooled memory (two 8 GiB blocks) and an SSD.
	r = s.must(http.StatusOK, "POST", path+"/Actions/Oem/Rackpool.Expand",
		map[string]any{"Needs": []any{map[string]any{"Kind": "memory", "Capacity": "16GiB"}, map[string]any{"Kind": "ssd", "Count": 1}}}, admin)
	kinds := map[string]int{}
	for _, b := range list(t, dig(t, r.json(t), "Oem", "Rackpool", "Blocks")) {
		kinds[b.(map[string]any)["Kind"].(string)]++
	}
	if kinds["memory"] != 2 || kinds["ssd"] != 1 || kinds["gpu"] != 2 || kinds["compute"] != 1 {
		t.Fatalf("after Expand: kinds %v", kinds)
	}
	s.must(http.StatusBadRequest, "POST", path+"/Actions/Oem/Rackpool.Expand", map[string]any{}, admin)
	s.must(http.StatusBadRequest, "POST", path+"/Actions/Oem/Rackpool.Expand", map[string]any{"Needs": []any{map[string]any{"Kind": "memory", "Capacity": "lots"}}}, admin)
	held := systemBlocks(t, s.get(path))

	// DELETE frees every block.
	s.must(http.StatusNoContent, "DELETE", path, nil, admin)
	for _, b := range held {
		if b == "host1" {
			continue
		}
		if st, n := s.blockState(b); st != "Unused" || n != 0 {
			t.Errorf("%s is %s in %d compositions after DELETE", b, st, n)
		}
		if sys := dig(t, s.get("/redfish/v1/CompositionService/ResourceBlocks/"+b), "Links", "ComputerSystems"); len(list(t, sys)) != 0 {
			t.Errorf("%s still links systems %v", b, sys)
		}
	}
	if code := s.must(http.StatusNotFound, "DELETE", path, nil, admin).errorCode(t); code != "Base.1.22.ResourceNotFound" {
		t.Fatalf("second DELETE: %s", code)
	}
	s.must(http.StatusNotFound, "GET", path, nil, admin)
	if ids := s.systemIDs(); len(ids) != 0 {
		t.Fatalf("systems left: %v", ids)
	}
}

// TestSharedBlockStatus: nic1 may serve four compositions; its status says
// so as they come and go.
func TestSharedBlockStatus(t *testing.T) {
	s := newService(t)
	a := s.compose(specificBody("host1", "nic1"))
	if st, n := s.blockState("nic1"); st != "ComposedAndAvailable" || n != 1 {
		t.Fatalf("nic1 in one of four: %s %d", st, n)
	}
	b := s.compose(specificBody("host2", "nic1"))
	if st, n := s.blockState("nic1"); st != "ComposedAndAvailable" || n != 2 {
		t.Fatalf("nic1 in two of four: %s %d", st, n)
	}
	got := links(t, dig(t, s.get("/redfish/v1/CompositionService/ResourceBlocks/nic1"), "Links", "ComputerSystems"))
	slices.Sort(got)
	want := []string{a, b}
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("nic1 links %v, want %v", got, want)
	}
	s.must(http.StatusNoContent, "DELETE", "/redfish/v1/Systems/"+a, nil, admin)
	s.must(http.StatusNoContent, "DELETE", "/redfish/v1/Systems/"+b, nil, admin)
	if st, n := s.blockState("nic1"); st != "Unused" || n != 0 {
		t.Fatalf("nic1 after both left: %s %d", st, n)
	}
}

// TestConstrainedComposeDMTF asks in the DMTF shape: counts per member
// with @Redfish.RequestedCount.
func TestConstrainedComposeDMTF(t *testing.T) {
	s := newService(t)
	body := map[string]any{
		"Name": "trainer",
		"Processors": map[string]any{"Members": []any{
			map[string]any{"@Redfish.RequestedCount": 2, "ProcessorType": "GPU", "Model": "A100"},
		}},
		"Memory":  map[string]any{"Members": []any{map[string]any{"@Redfish.RequestedCount": 2, "CapacityMiB": 8192}}},
		"Storage": map[string]any{"Members": []any{map[string]any{"@Redfish.RequestedCount": 1, "MediaType": "HDD"}}},
	}
	r := s.must(http.StatusCreated, "POST", "/redfish/v1/Systems", body, admin)
	sys := r.json(t)
	if sys["Name"] != "trainer" || r.header.Get("ETag") == "" {
		t.Fatalf("Name %v, ETag %q", sys["Name"], r.header.Get("ETag"))
	}
	kinds := map[string]int{}
	for _, id := range systemBlocks(t, sys) {
		blk := s.get("/redfish/v1/CompositionService/ResourceBlocks/" + id)
		kind, _ := dig(t, blk, "Oem", "Rackpool", "Kind").(string)
		kinds[kind]++
		if kind == "gpu" {
			if m := dig(t, blk, "Oem", "Rackpool", "Model"); m != "A100" {
				t.Errorf("GPU %s is a %v, want A100", id, m)
			}
		}
	}
	if want := map[string]int{"compute": 1, "gpu": 2, "memory": 2, "hdd": 1}; !maps.Equal(kinds, want) {
		t.Fatalf("kinds %v, want %v", kinds, want)
	}
	// Only host2 reaches the A100s (drawer2 slots 1-4).
	if host := dig(t, sys, "Oem", "Rackpool", "Host"); host != "host2" {
		t.Fatalf("placed on %v, want host2", host)
	}

	// Bad DMTF shapes are 400s naming the property, and compose nothing.
	bad := []struct {
		name string
		body map[string]any
		prop string
	}{
		{"zero count", map[string]any{"Processors": map[string]any{"Members": []any{map[string]any{"@Redfish.RequestedCount": 0, "ProcessorType": "GPU"}}}}, "Processors.Members[0].@Redfish.RequestedCount"},
		{"bad processor type", map[string]any{"Processors": map[string]any{"Members": []any{map[string]any{"@Redfish.RequestedCount": 1, "ProcessorType": "TPU"}}}}, "Processors.Members[0].ProcessorType"},
		{"bad media", map[string]any{"Storage": map[string]any{"Members": []any{map[string]any{"@Redfish.RequestedCount": 1, "MediaType": "Tape"}}}}, "Storage.Members[0].MediaType"},
		{"no memory size", map[string]any{"Memory": map[string]any{"Members": []any{map[string]any{"@Redfish.RequestedCount": 1}}}}, "Memory.Members[0]"},
	}
	for _, tc := range bad {
		t.Run(tc.name, func(t *testing.T) {
			r := s.must(http.StatusBadRequest, "POST", "/redfish/v1/Systems", tc.body, admin)
			if code := r.errorCode(t); code != "Base.1.22.PropertyValueIncorrect" || !strings.Contains(string(r.body), tc.prop) {
				t.Fatalf("code %s, want PropertyValueIncorrect naming %s: %s", code, tc.prop, r.body)
			}
		})
	}
	if ids := s.systemIDs(); len(ids) != 1 {
		t.Fatalf("systems %v, want just the first", ids)
	}
}

// TestConcurrentComposeOneWinner: clients racing for one GPU through the
// API get exactly one 201; the rest are told the block is in use, and the
// GPU ends up in exactly one system.
func TestConcurrentComposeOneWinner(t *testing.T) {
	s := newService(t)
	hosts := []string{"host1", "host2", "host3"}
	codes := make([]int, len(hosts))
	bodies := make([][]byte, len(hosts))
	var wg sync.WaitGroup
	for i, h := range hosts {
		wg.Go(func() {
			// s.do may not call t.Fatal off the test goroutine; use the
			// client directly.
			data, _ := json.Marshal(specificBody(h, "gpu1"))
			req, _ := http.NewRequest("POST", s.srv.URL+"/redfish/v1/Systems", bytes.NewReader(data))
			req.SetBasicAuth(tenancy.AdminUser, password)
			resp, err := s.srv.Client().Do(req)
			if err != nil {
				return
			}
			defer resp.Body.Close()
			bodies[i], _ = io.ReadAll(resp.Body)
			codes[i] = resp.StatusCode
		})
	}
	wg.Wait()
	won := 0
	for i, c := range codes {
		switch c {
		case http.StatusCreated:
			won++
		case http.StatusConflict:
			if !bytes.Contains(bodies[i], []byte("Composition.1.1.ResourceBlockInUse")) {
				t.Errorf("loser %s: %s", hosts[i], bodies[i])
			}
		default:
			t.Errorf("%s: status %d: %s", hosts[i], c, bodies[i])
		}
	}
	if won != 1 {
		t.Fatalf("%d winners, want 1 (codes %v)", won, codes)
	}
	if st, n := s.blockState("gpu1"); st != "Composed" || n != 1 {
		t.Fatalf("gpu1 is %s in %d systems", st, n)
	}
	if ids := s.systemIDs(); len(ids) != 1 {
		t.Fatalf("systems %v", ids)
	}
}

// TestOversizedChunkedBody: a body over the limit without a Content-Length
// is refused while it is read, as one with a Content-Length is up front.
func TestOversizedChunkedBody(t *testing.T) {
	s := newService(t)
	big := io.MultiReader(strings.NewReader(`{"Name": "`), strings.NewReader(strings.Repeat("x", redfish.MaxBody)), strings.NewReader(`"}`))
	req, err := http.NewRequest("POST", s.srv.URL+"/redfish/v1/Systems", io.NopCloser(big))
	if err != nil {
		t.Fatal(err)
	}
	req.SetBasicAuth(tenancy.AdminUser, password)
	resp, err := s.srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusRequestEntityTooLarge || !bytes.Contains(data, []byte("Base.1.22.PayloadTooLarge")) {
		t.Fatalf("status %d: %s", resp.StatusCode, data)
	}
	if ids := s.systemIDs(); len(ids) != 0 {
		t.Fatalf("systems %v", ids)
	}
}
