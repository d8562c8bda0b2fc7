package redfish_test

import (
	"net/http"
	"slices"
	"strings"
	"testing"
)

const explainPath = "/redfish/v1/CompositionService/Actions/Oem/Rackpool.Explain"

// TestExplain: Explain says where a request would go, or why it cannot,
// and composes nothing either way.
func TestExplain(t *testing.T) {
	s := newService(t)
	s.compose(specificBody("host1", "gpu1"))
	before := s.snapshot()

	fits := s.must(http.StatusOK, "POST", explainPath,
		map[string]any{"Oem": map[string]any{"Rackpool": map[string]any{"Needs": []any{map[string]any{"Kind": "gpu", "Count": 2, "Model": "A100"}}}}}, admin).json(t)
	if fits["Fits"] != true || fits["Host"] != "host2" {
		t.Fatalf("two A100s: %v", fits)
	}
	var ids []string
	for _, b := range list(t, fits["Blocks"]) {
		blk := b.(map[string]any)
		if blk["Kind"] == "compute" {
			if blk["Id"] != "host2" {
				t.Errorf("compute block %v on host2", blk["Id"])
			}
			continue
		}
		ids = append(ids, blk["Id"].(string))
		if blk["Kind"] != "gpu" || blk["HostPort"] != "pcie" {
			t.Errorf("planned block %v", blk)
		}
	}
	if len(ids) != 2 || ids[0] == ids[1] {
		t.Fatalf("planned %v: want two A100s", ids)
	}
	for _, id := range ids {
		if m := dig(t, s.get("/redfish/v1/CompositionService/ResourceBlocks/"+id), "Oem", "Rackpool", "Model"); m != "A100" {
			t.Errorf("planned %s is a %v", id, m)
		}
	}

	// Specific blocks, compute block named as a link.
	spec := s.must(http.StatusOK, "POST", explainPath, specificBody("host3", "gpu2", "hdd1"), admin).json(t)
	if spec["Fits"] != true || spec["Host"] != "host3" || len(list(t, spec["Blocks"])) != 3 {
		t.Fatalf("host3+gpu2+hdd1: %v", spec)
	}

	// Impossible: more GPUs than exist; and a block already in use.
	for name, body := range map[string]any{
		"nine GPUs":    map[string]any{"Oem": map[string]any{"Rackpool": map[string]any{"Needs": []any{map[string]any{"Kind": "gpu", "Count": 9}}}}},
		"gpu1 in use":  specificBody("host3", "gpu1"),
		"host1 in use": specificBody("host1", "hdd2"),
		"host4 gpu7":   specificBody("host4", "gpu7"),
	} {
		t.Run(name, func(t *testing.T) {
			no := s.must(http.StatusOK, "POST", explainPath, body, admin).json(t)
			if no["Fits"] != false || no["Reason"] == "" {
				t.Fatalf("explain: %v", no)
			}
			if rej := list(t, dig(t, no, "Details", "Rejections")); len(rej) == 0 {
				t.Fatalf("no rejections: %v", no)
			}
		})
	}

	// Request errors are errors, not explanations.
	s.must(http.StatusBadRequest, "POST", explainPath, map[string]any{"Oem": map[string]any{"Rackpool": map[string]any{"Host": "host9"}}}, admin)
	s.must(http.StatusBadRequest, "POST", explainPath, `{"Bogus": 1}`, admin)

	if after := s.snapshot(); !slices.Equal(before, after) {
		t.Fatalf("Explain changed state\nbefore %v\nafter  %v", before, after)
	}
}

// snapshot summarises what is composed: each system with its ETag and
// blocks, and every block that is not Unused.
func (s *service) snapshot() []string {
	s.t.Helper()
	var out []string
	for _, id := range s.systemIDs() {
		r := s.must(http.StatusOK, "GET", "/redfish/v1/Systems/"+id, nil, admin)
		out = append(out, id+" "+r.header.Get("ETag")+" "+strings.Join(systemBlocks(s.t, r.json(s.t)), ","))
	}
	for _, b := range links(s.t, s.get("/redfish/v1/CompositionService/ResourceBlocks")["Members"]) {
		if st, n := s.blockState(b); st != "Unused" || n != 0 {
			out = append(out, b+" "+st)
		}
	}
	return out
}

// TestRelatedProperties: an error about a property names it as a JSON
// pointer in RelatedProperties, so a form can show the message beside the
// field (the console does); an error about no property names none.
func TestRelatedProperties(t *testing.T) {
	s := newService(t)
	need := func(n map[string]any) map[string]any {
		return map[string]any{"Oem": map[string]any{"Rackpool": map[string]any{"Needs": []any{n}}}}
	}
	related := func(body any) []any {
		r := s.must(http.StatusBadRequest, "POST", explainPath, body, admin).json(t)
		info := list(t, dig(t, r, "error", "@Message.ExtendedInfo"))[0].(map[string]any)
		return list(t, info["RelatedProperties"])
	}
	for _, tc := range []struct {
		body any
		want string
	}{
		{need(map[string]any{"Kind": "gpu", "Count": "two"}), "#/Oem/Rackpool/Needs/Count"},
		{need(map[string]any{"Kind": "gpu", "Count": 1, "Capacity": "lots"}), "#/Oem/Rackpool/Needs/0/Capacity"},
		{map[string]any{"Bogus": 1}, "#/Bogus"},
	} {
		got := related(tc.body)
		if len(got) != 1 || got[0] != tc.want {
			t.Errorf("%v: RelatedProperties %v, want [%s]", tc.body, got, tc.want)
		}
	}
	if got := related(specificBody("host1", "nope")); len(got) != 0 {
		t.Errorf("an unknown block: RelatedProperties %v, want none", got)
	}
}
