package redfish_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"rackpool/internal/compose"
	"rackpool/internal/tenancy"
)

// serve runs one request through the handler in process.
func (s *service) serve(method, path string, body []byte, hdr map[string]string) *httptest.ResponseRecorder {
	req := httptest.NewRequest(method, path, bytes.NewReader(body))
	req.TLS = &tls.ConnectionState{} // as on the HTTPS listener: Basic is refused without TLS
	req.SetBasicAuth(tenancy.AdminUser, password)
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	rec := httptest.NewRecorder()
	s.handler.ServeHTTP(rec, req)
	return rec
}

// checkReply fails t unless rec is a 2xx or 4xx with a JSON body, and a
// 4xx carries a Redfish error code.
func checkReply(t *testing.T, rec *httptest.ResponseRecorder, body []byte) {
	t.Helper()
	if rec.Code >= 500 || rec.Code < 200 || (rec.Code >= 300 && rec.Code < 400) {
		t.Fatalf("status %d for body %q: %s", rec.Code, body, rec.Body.Bytes())
	}
	var v map[string]any
	if err := json.Unmarshal(rec.Body.Bytes(), &v); err != nil {
		t.Fatalf("status %d for body %q: reply is not a JSON object (%v): %s", rec.Code, body, err, rec.Body.Bytes())
	}
	if rec.Code >= 400 {
		e, _ := v["error"].(map[string]any)
		if code, _ := e["code"].(string); code == "" {
			t.Fatalf("status %d for body %q: no error.code: %s", rec.Code, body, rec.Body.Bytes())
		}
	}
}

// composeSeeds are request bodies from the tests, good and bad.
var composeSeeds = []string{
	`{"Links": {"ResourceBlocks": [{"@odata.id": "/redfish/v1/CompositionService/ResourceBlocks/host1"}, {"@odata.id": "/redfish/v1/CompositionService/ResourceBlocks/gpu1"}]}}`,
	`{"Processors": {"Members": [{"@Redfish.RequestedCount": 2, "ProcessorType": "GPU", "Model": "A100"}]}, "Memory": {"Members": [{"@Redfish.RequestedCount": 2, "CapacityMiB": 8192}]}, "Storage": {"Members": [{"@Redfish.RequestedCount": 1, "MediaType": "HDD"}]}}`,
	`{"Processors": {"Members": [{"ProcessorType": "CPU", "TotalCores": 32}]}, "NetworkInterfaces": {"Members": [{"@Redfish.RequestedCount": 1, "Model": "ConnectX-6"}]}}`,
	`{"Storage": {"Members": [{"@Redfish.RequestedCount": 1, "Protocol": "NVMe", "CapacityBytes": 1000000000}]}}`,
	`{"Oem": {"Rackpool": {"Needs": [{"Kind": "gpu", "Count": 2, "Model": "A100"}]}}}`,
	`{"Oem": {"Rackpool": {"Zone": "training", "Affinity": "same-drawer", "MinCores": 8, "MinMemoryGiB": 64, "Needs": [{"Kind": "memory", "Capacity": "64GiB"}, {"Kind": "nvme", "Count": 1, "Attributes": {"generation": "ampere"}, "MaxLatencyNS": -1}]}}}`,
	`{"Oem": {"Rackpool": {"Needs": [{"Kind": "gpu", "Count": 9}]}}}`,
	`{"Oem": {"Rackpool": {"Needs": [{"Kind": "gpu", "Count": -1}]}}}`,
	`{"Oem": {"Rackpool": {"Needs": [{"Kind": "memory", "Capacity": "lots"}]}}}`,
	`{"Oem": {"Rackpool": {"Needs": [{"Kind": "tpu", "Count": 1}]}}}`,
	`{"Oem": {"Rackpool": {"Host": "host9"}}}`,
	`{"Oem": {"Rackpool": {"Host": "host4"}}, "Links": {"ResourceBlocks": [{"@odata.id": "/redfish/v1/CompositionService/ResourceBlocks/gpu2"}]}}`,
	`{"Links": {"ResourceBlocks": [{"@odata.id": "/redfish/v1/CompositionService/ResourceBlocks/host1"}, {"@odata.id": "/redfish/v1/CompositionService/ResourceBlocks/host2"}]}}`,
	`{"Links": {"ResourceBlocks": [{"@odata.id": "/redfish/v1/CompositionService/ResourceBlocks/gpu99"}]}}`,
	`{"Links": {"ResourceBlocks": [{"@odata.id": "/redfish/v1/Systems/x"}]}}`,
	`{"Memory": {"Members": [{"@Redfish.RequestedCount": 1}]}}`,
	`{"Memory": {"Members": [{"@Redfish.RequestedCount": 4096, "CapacityMiB": 9223372036854775807}]}}`,
	`{"Processors": {"Members": [{"@Redfish.RequestedCount": 1, "ProcessorType": "TPU"}]}}`,
	`{"@odata.type": "#ComputerSystem.v1_22_0.ComputerSystem", "Name": "x", "Description": "y"}`,
	`{"Name": 7}`, `{"Bogus": true}`, `{"Links": `, `[1,2]`, `null`, `{}`, `""`, ``, `{"Links": null}`, `{"Name": "a", "Name": "b"}`,
	`{"NAME": "x", "links": {"resourceblocks": [{"@ODATA.ID": "/redfish/v1/CompositionService/ResourceBlocks/gpu1"}]}}`,
	"{\"Name\": \"\xff\"}", `{"Oem": {"Rackpool": null}}`, `{"Processors": {"Members": null}}`, `{} {}`,
}

// FuzzDecodeComposeRequest feeds arbitrary bodies to Explain, which
// decodes exactly what POST /Systems does: never a 5xx, always JSON, a
// Redfish error on 4xx, and nothing is ever composed.
func FuzzDecodeComposeRequest(f *testing.F) {
	s := newService(f)
	for _, seed := range composeSeeds {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		rec := s.serve("POST", explainPath, body, nil)
		checkReply(t, rec, body)
		if rec.Code != http.StatusOK && rec.Code/100 != 4 {
			t.Fatalf("status %d", rec.Code)
		}
		if l := s.mgr.List(); len(l) != 0 {
			t.Fatalf("Explain composed %s for body %q", l[0].ID, body)
		}
	})
}

// FuzzPatchSystem feeds arbitrary PATCH bodies and If-Match headers to a
// composed system: never a 5xx; a refusal leaves the system as it was; a
// success leaves it holding exactly the blocks asked for (after which the
// test puts it back, so inputs stay independent).
func FuzzPatchSystem(f *testing.F) {
	s := newService(f)
	id := s.compose(specificBody("host1", "gpu1", "hdd1"))
	orig, err := s.mgr.Get(id)
	if err != nil {
		f.Fatal(err)
	}
	patch := func(blocks ...string) string {
		var refs []map[string]string
		for _, b := range blocks {
			refs = append(refs, blockRef(b))
		}
		data, _ := json.Marshal(map[string]any{"Links": map[string]any{"ResourceBlocks": refs}})
		return string(data)
	}
	for _, seed := range []struct{ body, ifMatch string }{
		{patch("host1", "gpu1", "hdd1", "gpu2"), ""},
		{patch("host1", "gpu1", "hdd1", "gpu2"), `W/"2"`},
		{patch("host1", "gpu1", "hdd1", "gpu2"), `W/"1"`},
		{patch("host1", "hdd1"), "*"},
		{patch("host1"), `"2"`},
		{patch("gpu1", "hdd1"), ""},
		{patch("host2", "gpu1", "hdd1"), ""},
		{patch("host1", "gpu1", "hdd1", "gpu7"), ""},
		{patch("host1", "gpu1", "hdd1", "hdd2", "hdd2"), ""},
		{patch("host1", "gpu1", "hdd1", "nope"), ""},
		{`{"Links": {"ResourceBlocks": [{"@odata.id": "/redfish/v1/Systems/host1"}]}}`, ""},
		{`{"Links": {"ResourceBlocks": null}}`, ""},
		{`{"Links": {"ResourceBlocks": []}}`, ""},
		{`{"Links": {}}`, ""}, {`{"Links": null}`, ""}, {`{"Name": "x"}`, ""}, {`{}`, ""}, {`null`, ""}, {`[]`, ""},
		{`{"Links": `, ""}, {``, ""}, {`{"Links": {"ResourceBlocks": [1]}}`, ""}, {patch("host1", "gpu1", "hdd1"), `W/"junk"`},
	} {
		f.Add([]byte(seed.body), seed.ifMatch)
	}
	path := "/redfish/v1/Systems/" + id
	f.Fuzz(func(t *testing.T, body []byte, ifMatch string) {
		before, err := s.mgr.Get(id)
		if err != nil {
			t.Fatal(err)
		}
		var hdr map[string]string
		if ifMatch != "" {
			hdr = map[string]string{"If-Match": ifMatch}
		}
		rec := s.serve("PATCH", path, body, hdr)
		checkReply(t, rec, body)
		after, err := s.mgr.Get(id)
		if err != nil {
			t.Fatalf("the system is gone after PATCH %q: %v", body, err)
		}
		if rec.Code != http.StatusOK {
			if after.Version != before.Version || !slices.Equal(after.Blocks, before.Blocks) {
				t.Fatalf("PATCH %q (If-Match %q) answered %d but changed v%d %v to v%d %v",
					body, ifMatch, rec.Code, before.Version, before.Blocks, after.Version, after.Blocks)
			}
			return
		}
		// The system holds exactly the set the body asked for, and the reply
		// says so.
		held := slices.Compact(slices.Sorted(slices.Values(after.Blocks)))
		if asked := patchedBlocks(body); !slices.Equal(held, asked) {
			t.Fatalf("PATCH %q: system holds %v, the body asked for %v", body, after.Blocks, asked)
		}
		if told := patchedBlocks(rec.Body.Bytes()); !slices.Equal(held, told) {
			t.Fatalf("PATCH %q: system holds %v, the reply says %v", body, after.Blocks, told)
		}
		if _, err := s.mgr.Update(context.Background(), id, compose.UpdateRequest{Set: orig.Blocks}); err != nil {
			t.Fatalf("put the system back: %v", err)
		}
	})
}

// patchedBlocks returns the sorted, distinct block IDs of a body's
// Links.ResourceBlocks.
func patchedBlocks(body []byte) []string {
	var v struct {
		Links struct {
			ResourceBlocks []struct {
				ID string `json:"@odata.id"`
			}
		}
	}
	_ = json.Unmarshal(body, &v)
	var out []string
	for _, l := range v.Links.ResourceBlocks {
		out = append(out, strings.TrimPrefix(l.ID, blocksPath))
	}
	return slices.Compact(slices.Sorted(slices.Values(out)))
}

// FuzzComposeAction feeds arbitrary bodies to the Compose action with
// RequestType Preview, which decodes and places every stanza exactly as
// Apply does and changes nothing: never a 5xx, always JSON with a Redfish
// error on 4xx, and nothing changes.
func FuzzComposeAction(f *testing.F) {
	s := newService(f)
	for _, seed := range composeSeeds {
		f.Add([]byte(`{"RequestFormat":"Manifest","RequestType":"Preview","Manifest":{"Stanzas":[{"StanzaType":"ComposeSystem","StanzaId":"a","Request":` + seed + `}]}}`))
	}
	for _, seed := range []string{
		`{"RequestFormat":"Manifest","RequestType":"Preview","Manifest":{"Stanzas":[{"StanzaType":"DecomposeSystem","StanzaId":"a","Request":{"@odata.id":"/redfish/v1/Systems/x"}}]}}`,
		`{"RequestFormat":"Manifest","RequestType":"Preview","ReservationId":"r1"}`,
		`{"RequestFormat":"Manifest","RequestType":"Preview","Manifest":{"Stanzas":[{"StanzaType":"ComposeSystem","StanzaId":"a","Request":null}]}}`,
		`{"RequestFormat":"Manifest","RequestType":"Preview","Manifest":{"Stanzas":[{"StanzaType":"ComposeSystem","StanzaId":"a","Request":"x"}]}}`,
		`{"RequestFormat":"Manifest","RequestType":"Preview","Manifest":null}`,
		`{"RequestFormat":7}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		// Only Preview runs: inputs asking for another type are skipped, so
		// the fuzzer explores decoding, not state.
		var probe map[string]any
		if json.Unmarshal(body, &probe) == nil && probe != nil {
			if rt, ok := probe["RequestType"].(string); ok && rt != "Preview" {
				return
			}
		}
		rec := s.serve("POST", composeAction, body, nil)
		checkReply(t, rec, body)
		if l := s.mgr.List(); len(l) != 0 || len(s.mgr.Reservations()) != 0 {
			t.Fatalf("Preview changed state for body %q", body)
		}
	})
}
