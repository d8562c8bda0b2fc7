package odata

import (
	"encoding/json"
	"net/http"
	"reflect"
	"strings"
	"testing"

	"rackpool/internal/rf"
)

// TestParse: each query parses or is refused with its Base message.
func TestParse(t *testing.T) {
	for _, tc := range []struct {
		name, raw string
		status    int
		code      string // "" when it parses
	}{
		{"empty", "", 0, ""},
		{"select", "$select=Name,Status/Health", 0, ""},
		{"select star", "$select=*", 0, ""},
		{"expand levels", "$expand=.($levels=2)", 0, ""},
		{"separate levels", "$expand=.&$levels=2", 0, ""},
		{"escaped key", "%24expand=.", 0, ""},
		{"top skip", "$top=5&$skip=2", 0, ""},
		{"only", "only", 0, ""},
		{"no dollar ignored", "excerpt=foo&x=%zz", 0, ""},
		{"filter", "$filter=SystemType%20eq%20%27Physical%27", 0, ""},
		{"orderby", "$orderby=Name", 501, "QueryNotSupported"},
		{"unsupported wins", "$top=-1&$count=true", 501, "QueryNotSupported"},
		{"top negative", "$top=-1", 400, "QueryParameterOutOfRange"},
		{"top huge", "$top=99999999999999999999", 400, "QueryParameterOutOfRange"},
		{"top not a number", "$top=ten", 400, "QueryParameterValueFormatError"},
		{"skip empty", "$skip=", 400, "QueryParameterValueFormatError"},
		{"top twice", "$top=1&$top=2", 400, "QueryParameterValueFormatError"},
		{"levels too deep", "$expand=.($levels=9)", 400, "QueryParameterOutOfRange"},
		{"levels zero", "$expand=*($levels=0)", 400, "QueryParameterOutOfRange"},
		{"levels without expand", "$levels=2", 400, "QueryCombinationInvalid"},
		{"levels twice", "$expand=.($levels=1)&$levels=2", 400, "QueryCombinationInvalid"},
		{"levels malformed", "$expand=.($levels=two)", 400, "QueryParameterValueFormatError"},
		{"expand by name", "$expand=Systems", 400, "QueryParameterValueFormatError"},
		{"select bad name", "$select=Name,,Id", 400, "QueryParameterValueFormatError"},
		{"bad escape", "$select=%zz", 400, "QueryParameterValueFormatError"},
		{"bad key escape", "$sel%zz=1", 400, "QueryParameterValueFormatError"},
		{"only with a value", "only=foo", 400, "QueryParameterValueFormatError"},
		{"only with others", "only&$top=1", 400, "QueryCombinationInvalid"},
		{"filter malformed", "$filter=SystemType%20eq", 400, "QueryParameterValueFormatError"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			q, p := Parse(tc.raw)
			if tc.code == "" {
				if p != nil || q == nil {
					t.Fatalf("%q: %v", tc.raw, p)
				}
				return
			}
			if p == nil || p.Status != tc.status || p.ID != rf.Registry+tc.code || p.Severity != "Warning" {
				t.Fatalf("%q: %+v, want %d %s", tc.raw, p, tc.status, tc.code)
			}
		})
	}
}

// site is a service of a few resources, read by a Fetch that counts its
// calls; a path in denied answers 401, one missing 404.
type site struct {
	bodies map[string]string
	denied map[string]bool
	calls  map[string]int
}

func (s *site) fetch(path string) Response {
	s.calls[path]++
	if s.denied[path] {
		return Response{Status: http.StatusUnauthorized}
	}
	b, ok := s.bodies[path]
	if !ok {
		return Response{Status: http.StatusNotFound}
	}
	return Response{Status: http.StatusOK, Header: http.Header{"Etag": {`"` + path + `"`}}, Body: []byte(b)}
}

func newSite() *site {
	return &site{calls: map[string]int{}, denied: map[string]bool{}, bodies: map[string]string{
		"/redfish/v1/Systems": `{"@odata.id": "/redfish/v1/Systems", "Members": [{"@odata.id": "/redfish/v1/Systems/a"},
			{"@odata.id": "/redfish/v1/Systems/b"}, {"@odata.id": "/redfish/v1/Systems/c"}], "Members@odata.count": 3}`,
		"/redfish/v1/Systems/a": `{"@odata.id": "/redfish/v1/Systems/a", "Id": "a", "N": 1, "Status": {"Health": "OK"},
			"Links": {"Chassis": [{"@odata.id": "/redfish/v1/Chassis/x"}]}, "Bios": {"@odata.id": "/redfish/v1/Systems/a/Bios"}}`,
		"/redfish/v1/Systems/b":      `{"@odata.id": "/redfish/v1/Systems/b", "Id": "b", "N": 2, "Status": {"Health": "Warning"}}`,
		"/redfish/v1/Systems/c":      `{"@odata.id": "/redfish/v1/Systems/c", "Id": "c", "N": 3, "Status": {"Health": "OK"}}`,
		"/redfish/v1/Systems/a/Bios": `{"@odata.id": "/redfish/v1/Systems/a/Bios", "Id": "Bios"}`,
		"/redfish/v1/Chassis/x":      `{"@odata.id": "/redfish/v1/Chassis/x", "Id": "x"}`,
	}}
}

// shape runs Resolve and Apply as the service does, on the body at path.
func (s *site) shape(t *testing.T, raw, path string) (any, *rf.Problem) {
	t.Helper()
	q, p := Parse(raw)
	if p != nil {
		t.Fatalf("%q: %v", raw, p)
	}
	body, ok := DecodeObject([]byte(s.bodies[path]))
	if !ok {
		t.Fatalf("no body at %s", path)
	}
	m, p := q.Resolve(body, s.fetch)
	if p != nil {
		return nil, p
	}
	if m != nil {
		body, path = m.Body, m.Path
	}
	return q.Apply(body, path, s.fetch)
}

func ids(t *testing.T, v any) []string {
	t.Helper()
	var out []string
	for _, m := range v.(map[string]any)["Members"].([]any) {
		id, _ := m.(map[string]any)["Id"].(string)
		if id == "" {
			id, _ = m.(map[string]any)["@odata.id"].(string)
		}
		out = append(out, id)
	}
	return out
}

func TestApplyPage(t *testing.T) {
	s := newSite()
	out, p := s.shape(t, "$top=1&$skip=1", "/redfish/v1/Systems")
	if p != nil {
		t.Fatal(p)
	}
	body := out.(map[string]any)
	if got := ids(t, out); !reflect.DeepEqual(got, []string{"/redfish/v1/Systems/b"}) {
		t.Fatalf("members %v", got)
	}
	if body["Members@odata.count"] != 3 || body["Members@odata.nextLink"] != "/redfish/v1/Systems?$top=1&$skip=2" {
		t.Fatalf("count %v, nextLink %v", body["Members@odata.count"], body["Members@odata.nextLink"])
	}
	out, _ = s.shape(t, "$top=0", "/redfish/v1/Systems")
	if body := out.(map[string]any); len(body["Members"].([]any)) != 0 || body["Members@odata.nextLink"] != nil {
		t.Fatalf("$top=0: %v", body)
	}
	out, _ = s.shape(t, "$top=2", "/redfish/v1/Systems")
	if body := out.(map[string]any); body["Members@odata.nextLink"] != "/redfish/v1/Systems?$top=2&$skip=2" {
		t.Fatalf("$top=2: %v", body)
	}
	if len(s.calls) != 0 {
		t.Fatalf("paging fetched %v", s.calls)
	}
}

// TestApplyExpand: . inlines what is not under Links, ~ what is, each
// resource is fetched once, and a member that cannot be read stays a
// reference; after a 401 nothing more is fetched.
func TestApplyExpand(t *testing.T) {
	s := newSite()
	out, p := s.shape(t, "$expand=.($levels=2)", "/redfish/v1/Systems")
	if p != nil {
		t.Fatal(p)
	}
	a := out.(map[string]any)["Members"].([]any)[0].(map[string]any)
	if a["Bios"].(map[string]any)["Id"] != "Bios" {
		t.Fatalf("level 2 not inlined: %v", a)
	}
	if _, ok := a["Links"].(map[string]any)["Chassis"].([]any)[0].(map[string]any)["Id"]; ok {
		t.Fatalf(". inlined a Link: %v", a["Links"])
	}
	s = newSite()
	out, _ = s.shape(t, "$expand=~", "/redfish/v1/Systems/a")
	body := out.(map[string]any)
	if body["Links"].(map[string]any)["Chassis"].([]any)[0].(map[string]any)["Id"] != "x" || !isRef(body["Bios"]) {
		t.Fatalf("~: %v", body)
	}

	s = newSite()
	s.denied["/redfish/v1/Systems/a"] = true
	out, _ = s.shape(t, "$expand=*", "/redfish/v1/Systems")
	for _, m := range out.(map[string]any)["Members"].([]any) {
		if !isRef(m) {
			t.Fatalf("fetched after a 401: %v", m)
		}
	}
	if len(s.calls) != 1 {
		t.Fatalf("fetches after a 401: %v", s.calls)
	}

	s = newSite()
	s.bodies["/redfish/v1/Systems"] = `{"Members": [{"@odata.id": "/redfish/v1/Systems/a"}, {"@odata.id": "/redfish/v1/Systems/a"},
		{"@odata.id": "/redfish/v1/Systems/gone"}, {"@odata.id": "/elsewhere"}]}`
	out, _ = s.shape(t, "$expand=.", "/redfish/v1/Systems")
	ms := out.(map[string]any)["Members"].([]any)
	if ms[1].(map[string]any)["Id"] != "a" || !isRef(ms[2]) || !isRef(ms[3]) {
		t.Fatalf("members %v", ms)
	}
	if s.calls["/redfish/v1/Systems/a"] != 1 || s.calls["/elsewhere"] != 0 {
		t.Fatalf("calls %v", s.calls)
	}
}

func TestApplyExpandTooLarge(t *testing.T) {
	s := newSite()
	big := `{"Id": "big", "Pad": "` + strings.Repeat("x", maxExpandBytes/2) + `"}`
	s.bodies["/redfish/v1/Systems/a"], s.bodies["/redfish/v1/Systems/b"], s.bodies["/redfish/v1/Systems/c"] = big, big, big
	_, p := s.shape(t, "$expand=*", "/redfish/v1/Systems")
	if p == nil || p.Status != http.StatusBadRequest || p.ID != rf.Registry+"QueryParameterOutOfRange" || p.Args[0] != "*" || p.Args[1] != "$expand" {
		t.Fatalf("%+v", p)
	}
}

// TestApplyFilterSelect: $filter reads the members (the cache serves
// $expand after it) and $select keeps the annotations.
func TestApplyFilterSelect(t *testing.T) {
	s := newSite()
	out, p := s.shape(t, "$filter=Status/Health+eq+'OK'&$expand=.&$select=Members/Id", "/redfish/v1/Systems")
	if p != nil {
		t.Fatal(p)
	}
	if got := ids(t, out); !reflect.DeepEqual(got, []string{"a", "c"}) {
		t.Fatalf("members %v", got)
	}
	body := out.(map[string]any)
	if body["Members@odata.count"] != 2 || body["@odata.id"] != "/redfish/v1/Systems" {
		t.Fatalf("body %v", body)
	}
	if m := body["Members"].([]any)[0].(map[string]any); len(m) != 2 || m["@odata.id"] == nil {
		t.Fatalf("selected member %v", m)
	}
	for path, n := range s.calls {
		if n != 1 {
			t.Fatalf("%s fetched %d times", path, n)
		}
	}
	if _, p = s.shape(t, "$filter=Nope+eq+1", "/redfish/v1/Systems"); p == nil || p.ID != rf.Registry+"QueryParameterValueError" {
		t.Fatalf("unknown property: %+v", p)
	}
}

func TestResolve(t *testing.T) {
	s := newSite()
	s.bodies["/redfish/v1/Systems"] = `{"Members": [{"@odata.id": "/redfish/v1/Systems/b"}]}`
	q, _ := Parse("only")
	body, _ := DecodeObject([]byte(s.bodies["/redfish/v1/Systems"]))
	m, p := q.Resolve(body, s.fetch)
	if p != nil || m == nil || m.Path != "/redfish/v1/Systems/b" || m.Body["Id"] != "b" || m.Header.Get("ETag") != `"/redfish/v1/Systems/b"` {
		t.Fatalf("%+v %v", m, p)
	}
	// More than one member, or one that cannot be read: the collection.
	body, _ = DecodeObject([]byte(newSite().bodies["/redfish/v1/Systems"]))
	if m, p = q.Resolve(body, s.fetch); m != nil || p != nil {
		t.Fatalf("three members: %+v %v", m, p)
	}
	s.denied["/redfish/v1/Systems/b"] = true
	body, _ = DecodeObject([]byte(s.bodies["/redfish/v1/Systems"]))
	if m, p = q.Resolve(body, s.fetch); m != nil || p != nil {
		t.Fatalf("denied member: %+v %v", m, p)
	}
	for _, raw := range []string{"only", "$filter=Id+eq+'a'"} {
		q, _ := Parse(raw)
		body, _ := DecodeObject([]byte(s.bodies["/redfish/v1/Systems/a"]))
		if _, p := q.Resolve(body, s.fetch); p == nil || p.ID != rf.Registry+"QueryNotSupportedOnResource" {
			t.Fatalf("%s on a resource: %+v", raw, p)
		}
		if q.Cacheable() != (raw == "only") {
			t.Fatalf("%s: Cacheable %v", raw, q.Cacheable())
		}
	}
}

func isRef(v any) bool {
	m, ok := v.(map[string]any)
	_, id := m["@odata.id"]
	return ok && id && len(m) == 1
}

// FuzzParse: no panic; a refusal is a 400 or 501 whose arguments encode.
func FuzzParse(f *testing.F) {
	for _, s := range []string{"", "$select=Name", "$expand=*($levels=3)", "$top=1&$skip=2", "only", "$filter=A+eq+1", "$levels=2&$expand=."} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		q, p := Parse(raw)
		if p != nil {
			if p.Status != http.StatusBadRequest && p.Status != http.StatusNotImplemented {
				t.Fatalf("%q: status %d", raw, p.Status)
			}
			if _, err := json.Marshal(p.Args); err != nil {
				t.Fatal(err)
			}
			return
		}
		if q.levels > MaxExpandLevels || q.top < 0 || q.skip < 0 {
			t.Fatalf("%q: %+v", raw, q)
		}
	})
}
