package redfish_test

import (
	"context"
	"crypto/tls"
	"encoding/base64"
	"encoding/json"
	"maps"
	"net/http"
	"net/http/httptest"
	"rackpool/internal/tenancy"
	"slices"
	"strings"
	"testing"
	"time"
)

const (
	rootPath    = "/redfish/v1"
	systemsPath = "/redfish/v1/Systems"
	blocksColl  = "/redfish/v1/CompositionService/ResourceBlocks"
	sessionsCol = "/redfish/v1/SessionService/Sessions"
)

// queryCases are queries with the answer they must get; the fuzzer starts
// from them too.
var queryCases = []struct {
	name, path, query string
	status            int
	code              string // Base message, "" for 200
}{
	{"select", systemsPath + "/host1", "$select=Name,Status/Health", 200, ""},
	{"select star", systemsPath + "/host1", "$select=*", 200, ""},
	{"select members", systemsPath, "$select=Members/Name&$expand=.", 200, ""},
	{"expand subordinate", rootPath, "$expand=.", 200, ""},
	{"expand links", rootPath, "$expand=~", 200, ""},
	{"expand all", rootPath, "$expand=*", 200, ""},
	{"expand levels", rootPath, "$expand=.($levels=2)", 200, ""},
	{"expand max levels", rootPath, "$expand=*($levels=3)", 200, ""},
	{"expand separate levels", rootPath, "$expand=.&$levels=2", 200, ""},
	{"escaped key", rootPath, "%24expand=.", 200, ""},
	{"top skip", blocksColl, "$top=5&$skip=2", 200, ""},
	{"top zero", blocksColl, "$top=0", 200, ""},
	{"skip past the end", blocksColl, "$skip=100000", 200, ""},
	{"top on a resource", systemsPath + "/host1", "$top=1", 200, ""},
	{"only", systemsPath, "only", 200, ""},
	{"unknown non-dollar", rootPath, "rpvunknown", 200, ""},
	{"unknown non-dollar value", rootPath, "excerpt=foo&x=%zz", 200, ""},
	{"filter", systemsPath, "$filter=SystemType%20eq%20%27Physical%27", 200, ""},
	{"filter paged", blocksColl, "$filter=Status/Health+eq+'OK'+and+not+(Id+eq+'gpu1')&$top=3&$expand=.&$select=Members/Id", 200, ""},
	{"filter malformed", systemsPath, "$filter=SystemType%20eq", 400, "QueryParameterValueFormatError"},
	{"filter unknown property", systemsPath, "$filter=SystemTyp%20eq%20%27Physical%27", 400, "QueryParameterValueError"},
	{"filter on a resource", systemsPath + "/host1", "$filter=Id%20eq%20%27host1%27", 400, "QueryNotSupportedOnResource"},
	{"filter too deep", systemsPath, "$filter=" + strings.Repeat("(", 40) + "Id+eq+'host1'" + strings.Repeat(")", 40), 400, "QueryParameterOutOfRange"},
	{"filter with only", sessionsCol, "only&$filter=Id%20eq%20%271%27", 400, "QueryCombinationInvalid"},
	{"orderby", systemsPath, "$orderby=Name", 501, "QueryNotSupported"},
	{"unknown dollar", rootPath, "$rpvunknown", 501, "QueryNotSupported"},
	{"unsupported wins", systemsPath, "$top=-1&$count=true", 501, "QueryNotSupported"},
	{"top negative", blocksColl, "$top=-1", 400, "QueryParameterOutOfRange"},
	{"top huge", blocksColl, "$top=99999999999999999999", 400, "QueryParameterOutOfRange"},
	{"top not a number", blocksColl, "$top=ten", 400, "QueryParameterValueFormatError"},
	{"skip empty", blocksColl, "$skip=", 400, "QueryParameterValueFormatError"},
	{"top twice", blocksColl, "$top=1&$top=2", 400, "QueryParameterValueFormatError"},
	{"levels too deep", rootPath, "$expand=.($levels=9)", 400, "QueryParameterOutOfRange"},
	{"levels zero", rootPath, "$expand=*($levels=0)", 400, "QueryParameterOutOfRange"},
	{"separate levels too deep", rootPath, "$expand=.&$levels=9", 400, "QueryParameterOutOfRange"},
	{"levels without expand", rootPath, "$levels=2", 400, "QueryCombinationInvalid"},
	{"levels twice", rootPath, "$expand=.($levels=1)&$levels=2", 400, "QueryCombinationInvalid"},
	{"levels malformed", rootPath, "$expand=.($levels=two)", 400, "QueryParameterValueFormatError"},
	{"expand by name", rootPath, "$expand=Systems", 400, "QueryParameterValueFormatError"},
	{"expand unclosed", rootPath, "$expand=.($levels=2", 400, "QueryParameterValueFormatError"},
	{"select empty", rootPath, "$select=", 400, "QueryParameterValueFormatError"},
	{"select bad name", rootPath, "$select=Name,,Id", 400, "QueryParameterValueFormatError"},
	{"bad escape", rootPath, "$select=%zz", 400, "QueryParameterValueFormatError"},
	{"only with a value", sessionsCol, "only=foo", 400, "QueryParameterValueFormatError"},
	{"only with others", systemsPath, "only&$top=1", 400, "QueryCombinationInvalid"},
	{"only on a resource", systemsPath + "/host1", "only", 400, "QueryNotSupportedOnResource"},
}

// TestQueryErrors: each query answers its status, and a refusal names the
// Base message.
func TestQueryErrors(t *testing.T) {
	s := newService(t)
	for _, tc := range queryCases {
		t.Run(tc.name, func(t *testing.T) {
			r := s.do("GET", tc.path+"?"+tc.query, nil, admin)
			if r.status != tc.status {
				t.Fatalf("GET %s?%s: %d, want %d: %s", tc.path, tc.query, r.status, tc.status, r.body)
			}
			if tc.code != "" {
				if code := r.errorCode(t); code != "Base.1.22."+tc.code {
					t.Fatalf("code %s, want Base.1.22.%s", code, tc.code)
				}
				return
			}
			r.json(t)
			if r.header.Get("ETag") == "" {
				t.Fatalf("no ETag")
			}
		})
	}
}

func keys(m map[string]any) []string { return slices.Sorted(maps.Keys(m)) }

// isRef reports whether v is a plain reference {"@odata.id": ...}.
func isRef(v any) bool {
	m, ok := v.(map[string]any)
	_, id := m["@odata.id"]
	return ok && id && len(m) == 1
}

func TestQuerySelect(t *testing.T) {
	s := newService(t)
	plain := s.must(200, "GET", systemsPath+"/host1", nil, admin)
	r := s.must(200, "GET", systemsPath+"/host1?$select=Name,Status/Health", nil, admin)
	got := r.json(t)
	if k := keys(got); !slices.Equal(k, []string{"@odata.id", "@odata.type", "Name", "Status"}) {
		t.Fatalf("keys %v: %s", k, r.body)
	}
	if st := got["Status"].(map[string]any); len(st) != 1 || st["Health"] != "OK" {
		t.Fatalf("Status %v", st)
	}
	// The ETag is the resource's, whatever the selection.
	if r.header.Get("ETag") != plain.header.Get("ETag") {
		t.Fatalf("ETag %q with $select, %q without", r.header.Get("ETag"), plain.header.Get("ETag"))
	}

	// A composed system keeps its @odata.etag.
	id := s.compose(specificBody("host1", "gpu1"))
	sys := s.get(systemsPath + "/" + id + "?$select=Name")
	if k := keys(sys); !slices.Equal(k, []string{"@odata.etag", "@odata.id", "@odata.type", "Name"}) {
		t.Fatalf("composed system keys %v", k)
	}

	// Annotations travel with their property.
	coll := s.get(systemsPath + "?$select=Members")
	if k := keys(coll); !slices.Equal(k, []string{"@odata.id", "@odata.type", "Members", "Members@odata.count"}) {
		t.Fatalf("collection keys %v", k)
	}
	coll = s.get(systemsPath + "?$select=Members@odata.count")
	if k := keys(coll); !slices.Equal(k, []string{"@odata.id", "@odata.type", "Members@odata.count"}) {
		t.Fatalf("collection keys %v", k)
	}

	// $select applies after $expand: Members/Name reaches into the members.
	coll = s.get(systemsPath + "?$expand=.&$select=Members/Name")
	members := list(t, coll["Members"])
	if len(members) != 5 {
		t.Fatalf("%d members", len(members))
	}
	for _, m := range members {
		mk := keys(m.(map[string]any))
		mk = slices.DeleteFunc(mk, func(k string) bool { return k == "@odata.etag" })
		if !slices.Equal(mk, []string{"@odata.id", "@odata.type", "Name"}) {
			t.Fatalf("member keys %v", mk)
		}
	}
}

func TestQueryExpand(t *testing.T) {
	s := newService(t)
	s.login() // one session, so Links.Sessions has a member
	for _, tc := range []struct {
		query                  string
		systems, sessions      bool // inlined
		systemMembers, session bool // inlined one level further
	}{
		{"", false, false, false, false},
		{"$expand=.", true, false, false, false},
		{"$expand=~", false, true, false, false},
		{"$expand=*", true, true, false, false},
		{"$expand=.($levels=2)", true, false, true, false},
		{"$expand=.&$levels=2", true, false, true, false},
		{"$expand=*($levels=2)", true, true, true, true},
		{"$expand=~($levels=2)", false, true, false, false}, // a member of a collection is not under Links
	} {
		t.Run(tc.query, func(t *testing.T) {
			root := s.get(rootPath + "?" + tc.query)
			if got := !isRef(root["Systems"]); got != tc.systems {
				t.Fatalf("Systems inlined %v, want %v: %v", got, tc.systems, root["Systems"])
			}
			sessions := dig(t, root, "Links", "Sessions")
			if got := !isRef(sessions); got != tc.sessions {
				t.Fatalf("Links.Sessions inlined %v, want %v: %v", got, tc.sessions, sessions)
			}
			if tc.systems {
				m := list(t, dig(t, root, "Systems", "Members"))
				if got := !isRef(m[0]); got != tc.systemMembers {
					t.Fatalf("Systems.Members[0] inlined %v, want %v: %v", got, tc.systemMembers, m[0])
				}
				if tc.systemMembers && dig(t, m[0], "Id") != "host1" {
					t.Fatalf("Systems.Members[0] %v", m[0])
				}
			}
			if tc.sessions {
				m := list(t, dig(t, sessions, "Members"))
				if got := !isRef(m[0]); got != tc.session {
					t.Fatalf("Sessions.Members[0] inlined %v, want %v", got, tc.session)
				}
			}
		})
	}

	// Three levels of everything stays bounded and quick.
	start := time.Now()
	r := s.must(200, "GET", rootPath+"?$expand=*($levels=3)", nil, admin)
	t.Logf("$expand=*($levels=3) of the service root: %d bytes in %v", len(r.body), time.Since(start))
	blocks := list(t, dig(t, r.json(t), "CompositionService", "ResourceBlocks", "Members"))
	if len(blocks) < 100 || isRef(blocks[0]) {
		t.Fatalf("level 3 not inlined: %d blocks, first %v", len(blocks), blocks[0])
	}

	// Paging comes before expansion: only the page is inlined.
	coll := s.get(blocksColl + "?$top=3&$expand=.")
	for _, m := range list(t, coll["Members"]) {
		if isRef(m) {
			t.Fatalf("member not inlined: %v", m)
		}
	}
	if n := len(list(t, coll["Members"])); n != 3 {
		t.Fatalf("%d members, want 3", n)
	}
}

// basic is a cred with HTTP Basic credentials.
func basic(user, pass string) cred {
	return cred{hdr: map[string]string{"Authorization": "Basic " + base64.StdEncoding.EncodeToString([]byte(user+":"+pass))}}
}

// TestQueryExpandAuthorization: expansion reads as the client, so a
// client sees inline only what it could GET.
func TestQueryExpandAuthorization(t *testing.T) {
	s := newService(t)
	ctx := context.Background()
	secret := s.compose(specificBody("host1", "gpu1"))

	// Without credentials the root answers, but nothing it links to.
	root := s.must(200, "GET", rootPath+"?$expand=*($levels=2)", nil, cred{}).json(t)
	for _, k := range []string{"Systems", "Chassis", "Fabrics", "CompositionService", "SessionService"} {
		if !isRef(root[k]) {
			t.Fatalf("%s inlined for an anonymous client: %v", k, root[k])
		}
	}
	if !isRef(dig(t, root, "Links", "Sessions")) {
		t.Fatalf("Links.Sessions inlined for an anonymous client")
	}

	// Wrong credentials on a public route: the expansion stops at the
	// first refusal, so one request costs the account one failed login,
	// not one per reference.
	if err := s.auth.SetLockout(ctx, tenancy.LockoutPolicy{Threshold: 3, Duration: time.Hour, ResetAfter: time.Hour}); err != nil {
		t.Fatal(err)
	}
	wrong := basic(tenancy.AdminUser, "not-the-password")
	for range 2 {
		r := s.must(200, "GET", rootPath+"?$expand=*", nil, wrong).json(t)
		if !isRef(r["Systems"]) {
			t.Fatalf("Systems inlined with a wrong password")
		}
	}
	s.must(200, "GET", systemsPath, nil, admin) // not locked out
	if err := s.auth.SetLockout(ctx, tenancy.LockoutPolicy{}); err != nil {
		t.Fatal(err)
	}

	// A tenant's reader sees its expansion without another's system.
	if _, err := s.auth.PutTenant(ctx, tenancy.Tenant{ID: "blue"}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.auth.CreateAccount(ctx, tenancy.NewAccount{UserName: "blue-reader", Password: "Pw-blue-reader-1", Role: tenancy.RoleReadOnly, Tenant: "blue", Enabled: true}); err != nil {
		t.Fatal(err)
	}
	reader := basic("blue-reader", "Pw-blue-reader-1")
	r := s.must(200, "GET", rootPath+"?$expand=*($levels=3)", nil, reader)
	body := r.json(t)
	if isRef(body["Systems"]) || isRef(dig(t, body, "CompositionService", "ResourceBlocks")) {
		t.Fatalf("nothing inlined for the reader")
	}
	if strings.Contains(string(r.body), secret) {
		t.Fatalf("the reader's expansion shows system %s of another tenant", secret)
	}
	if !strings.Contains(string(s.must(200, "GET", rootPath+"?$expand=*($levels=3)", nil, admin).body), secret) {
		t.Fatalf("the administrator's expansion lacks system %s", secret)
	}
}

func TestQueryTopSkip(t *testing.T) {
	s := newService(t)
	all := links(t, s.get(blocksColl)["Members"])
	total := len(all)

	r := s.get(blocksColl + "?$top=5&$skip=2")
	if got := links(t, r["Members"]); !slices.Equal(got, all[2:7]) {
		t.Fatalf("page %v, want %v", got, all[2:7])
	}
	if n, _ := r["Members@odata.count"].(float64); int(n) != total {
		t.Fatalf("Members@odata.count %v, want the total %d", r["Members@odata.count"], total)
	}
	if next := r["Members@odata.nextLink"]; next != blocksColl+"?$top=5&$skip=7" {
		t.Fatalf("nextLink %v", next)
	}

	// Following nextLink visits every member once.
	var got []string
	for next := blocksColl + "?$top=7"; next != ""; {
		page := s.get(next)
		got = append(got, links(t, page["Members"])...)
		next, _ = page["Members@odata.nextLink"].(string)
	}
	if !slices.Equal(got, all) {
		t.Fatalf("paged through %d members, want %d", len(got), total)
	}

	for _, tc := range []struct {
		query string
		want  []string
		next  bool
	}{
		{"$skip=" + itoa(total), nil, false},
		{"$skip=" + itoa(total-2), all[total-2:], false},
		{"$top=" + itoa(total), all, false},
		{"$top=0", nil, false},
		{"$top=1", all[:1], true},
	} {
		r := s.get(blocksColl + "?" + tc.query)
		if got := links(t, r["Members"]); !slices.Equal(got, tc.want) {
			t.Fatalf("%s: members %v, want %v", tc.query, got, tc.want)
		}
		if _, next := r["Members@odata.nextLink"]; next != tc.next {
			t.Fatalf("%s: nextLink %v", tc.query, r["Members@odata.nextLink"])
		}
	}
}

func itoa(n int) string { b, _ := json.Marshal(n); return string(b) }

// TestQueryServerPaging: a page whose expanded members would pass the
// expansion limit (8 MiB) ends early with a nextLink, and following the
// links reads every member inlined, once, in order.
func TestQueryServerPaging(t *testing.T) {
	s := newService(t)
	all := links(t, s.get(blocksColl)["Members"])
	var got []string
	pages := 0
	for next := blocksColl + "?$expand=*($levels=2)"; next != ""; pages++ {
		page := s.get(next)
		for _, m := range list(t, page["Members"]) {
			if isRef(m) {
				t.Fatalf("member %v not inlined", m)
			}
			id, _ := m.(map[string]any)["@odata.id"].(string)
			got = append(got, id[strings.LastIndex(id, "/")+1:])
		}
		if n, _ := page["Members@odata.count"].(float64); int(n) != len(all) {
			t.Fatalf("Members@odata.count %v, want %d", page["Members@odata.count"], len(all))
		}
		next, _ = page["Members@odata.nextLink"].(string)
	}
	if pages < 2 {
		t.Fatalf("%d page: the expansion fits in one page, the test needs a larger one", pages)
	}
	if !slices.Equal(got, all) {
		t.Fatalf("paged through %v, want %v", got, all)
	}
}

func TestQueryOnly(t *testing.T) {
	s := newService(t)
	_, id := s.login()
	r := s.must(200, "GET", sessionsCol+"?only", nil, admin)
	sess := r.json(t)
	if sess["Id"] != id || sess["@odata.id"] != sessionsCol+"/"+id {
		t.Fatalf("only: %s", r.body)
	}
	member := s.must(200, "GET", sessionsCol+"/"+id, nil, admin)
	if r.header.Get("ETag") != member.header.Get("ETag") || !strings.Contains(r.header.Get("Link"), "/Session.v1_") {
		t.Fatalf("only: ETag %q (member %q), Link %q", r.header.Get("ETag"), member.header.Get("ETag"), r.header.Get("Link"))
	}
	// More than one member: the collection as usual.
	if coll := s.get(systemsPath + "?only"); len(list(t, coll["Members"])) != 4 {
		t.Fatalf("only on four members: %v", coll)
	}
}

func TestETags(t *testing.T) {
	s := newService(t)
	r := s.must(200, "GET", rootPath, nil, cred{})
	tag := r.header.Get("ETag")
	if !strings.HasPrefix(tag, `W/"`) || !strings.HasSuffix(tag, `"`) || len(tag) < 6 {
		t.Fatalf("ETag %q", tag)
	}
	if again := s.must(200, "GET", rootPath, nil, cred{}).header.Get("ETag"); again != tag {
		t.Fatalf("ETag changed from %q to %q with nothing changed", tag, again)
	}
	if got := r.header.Get("Link"); got != "<http://redfish.dmtf.org/schemas/v1/ServiceRoot.v1_17_0.json>; rel=describedby" {
		t.Fatalf("Link %q", got)
	}
	if got := r.header.Get("Allow"); got != "GET, HEAD" {
		t.Fatalf("Allow %q", got)
	}
	if r.header.Get("Cache-Control") != "no-cache" {
		t.Fatalf("Cache-Control %q", r.header.Get("Cache-Control"))
	}

	for _, tc := range []struct {
		query, inm string
		status     int
	}{
		{"", tag, http.StatusNotModified},
		{"", strings.TrimPrefix(tag, "W/"), http.StatusNotModified},
		{"", `W/"other", ` + tag, http.StatusNotModified},
		{"", "*", http.StatusNotModified},
		{"", `W/"other"`, http.StatusOK},
		{"?$select=Name", tag, http.StatusNotModified},
		{"?$expand=.", tag, http.StatusOK}, // depends on more than the root
	} {
		r := s.do("GET", rootPath+tc.query, nil, cred{hdr: map[string]string{"If-None-Match": tc.inm}})
		if r.status != tc.status {
			t.Fatalf("GET %s If-None-Match %s: %d, want %d", tc.query, tc.inm, r.status, tc.status)
		}
		if r.status == http.StatusNotModified && (len(r.body) != 0 || r.header.Get("ETag") != tag) {
			t.Fatalf("304 with body %q, ETag %q", r.body, r.header.Get("ETag"))
		}
	}

	// HEAD: the same headers, no body.
	h := s.must(200, "HEAD", rootPath, nil, cred{})
	if len(h.body) != 0 || h.header.Get("ETag") != tag || h.header.Get("Allow") == "" || h.header.Get("Link") == "" {
		t.Fatalf("HEAD: body %q, headers %v", h.body, h.header)
	}
	if h := s.do("HEAD", rootPath, nil, cred{hdr: map[string]string{"If-None-Match": tag}}); h.status != http.StatusNotModified {
		t.Fatalf("HEAD If-None-Match: %d", h.status)
	}

	// A composed system keeps its own ETag; its path allows changes.
	id := s.compose(specificBody("host1", "gpu1"))
	r = s.must(200, "GET", systemsPath+"/"+id, nil, admin)
	if r.header.Get("ETag") != `W/"2"` || r.header.Get("Allow") != "GET, HEAD, PATCH, DELETE" ||
		r.header.Get("Link") != "<http://redfish.dmtf.org/schemas/v1/ComputerSystem.v1_22_0.json>; rel=describedby" {
		t.Fatalf("composed system headers %v", r.header)
	}
	if l := s.must(200, "GET", systemsPath, nil, admin).header.Get("Link"); !strings.Contains(l, "/ComputerSystemCollection.json>") {
		t.Fatalf("collection Link %q", l)
	}
	// Errors carry no ETag.
	if e := s.do("GET", systemsPath+"/nope", nil, admin); e.header.Get("ETag") != "" {
		t.Fatalf("404 with ETag %q", e.header.Get("ETag"))
	}
}

// TestIfMatch: a stale If-Match is 412 before the handler runs, for
// composed systems (which also check versions themselves) and for
// resources that do not.
func TestIfMatch(t *testing.T) {
	s := newService(t)
	id := s.compose(specificBody("host1", "gpu1"))
	path := systemsPath + "/" + id
	ifMatch := func(tag string) cred { return cred{basic: true, hdr: map[string]string{"If-Match": tag}} }
	patch := map[string]any{"Links": map[string]any{"ResourceBlocks": []any{blockRef("host1"), blockRef("gpu1"), blockRef("gpu2")}}}

	r := s.must(http.StatusPreconditionFailed, "PATCH", path, patch, ifMatch(`W/"1"`))
	if code := r.errorCode(t); code != "Base.1.22.PreconditionFailed" {
		t.Fatalf("code %s", code)
	}
	if got := systemBlocks(t, s.get(path)); !slices.Equal(got, []string{"host1", "gpu1"}) {
		t.Fatalf("a stale PATCH changed the blocks to %v", got)
	}
	r = s.must(http.StatusOK, "PATCH", path, patch, ifMatch(`W/"2"`))
	cur := r.header.Get("ETag")
	if cur == "" || cur == `W/"2"` {
		t.Fatalf("ETag after PATCH %q", cur)
	}
	// A list with the current tag in it matches, and the handler's own
	// check agrees.
	patch = map[string]any{"Links": map[string]any{"ResourceBlocks": []any{blockRef("host1"), blockRef("gpu1")}}}
	s.must(http.StatusOK, "PATCH", path, patch, ifMatch(`W/"junk", `+cur))
	cur = s.must(200, "GET", path, nil, admin).header.Get("ETag")

	// Actions are checked against the system they act on.
	add := path + "/Actions/ComputerSystem.AddResourceBlock"
	s.must(http.StatusPreconditionFailed, "POST", add, map[string]any{"ResourceBlock": blockRef("hdd1")}, ifMatch(`W/"2"`))
	s.must(http.StatusOK, "POST", add, map[string]any{"ResourceBlock": blockRef("hdd1")}, ifMatch(cur))
	s.must(http.StatusOK, "POST", path+"/Actions/ComputerSystem.RemoveResourceBlock", map[string]any{"ResourceBlock": blockRef("hdd1")}, ifMatch("*"))

	// A session has no versions of its own: the generic check guards it.
	_, sid := s.login()
	spath := sessionsCol + "/" + sid
	stag := s.must(200, "GET", spath, nil, admin).header.Get("ETag")
	s.must(http.StatusPreconditionFailed, "DELETE", spath, nil, ifMatch(`W/"stale"`))
	s.must(200, "GET", spath, nil, admin)
	s.must(http.StatusNoContent, "DELETE", spath, nil, ifMatch(stag))
	s.must(http.StatusNotFound, "GET", spath, nil, admin)

	// Without credentials it is 401, not 412: authentication comes first.
	r = s.do("DELETE", path, nil, cred{hdr: map[string]string{"If-Match": `W/"1"`}})
	if r.status != http.StatusUnauthorized {
		t.Fatalf("unauthenticated DELETE with If-Match: %d", r.status)
	}
}

// FuzzQuery feeds arbitrary query strings to a few resources: never a
// 5xx but 501, always a JSON object, a Redfish error on refusals, and a
// nextLink that stays on the resource.
func FuzzQuery(f *testing.F) {
	s := newService(f)
	s.compose(specificBody("host2", "gpu5"))
	paths := []string{rootPath, systemsPath, blocksColl, sessionsCol, systemsPath + "/host1", "/redfish/v1/Fabrics/falcon1"}
	for _, tc := range queryCases {
		f.Add(tc.query, uint8(slices.Index(paths, tc.path)))
	}
	f.Add("$expand=*($levels=3)&$select=CompositionService/ResourceBlocks/Members/Id", uint8(0))
	f.Add("$top=2&$skip=1&$select=Members&$expand=~", uint8(2))
	f.Fuzz(func(t *testing.T, raw string, which uint8) {
		path := paths[int(which)%len(paths)]
		req := httptest.NewRequest("GET", path, nil)
		req.TLS = &tls.ConnectionState{} // as on the HTTPS listener: Basic is refused without TLS
		req.URL.RawQuery = raw
		req.SetBasicAuth(tenancy.AdminUser, password)
		rec := httptest.NewRecorder()
		s.handler.ServeHTTP(rec, req)
		if rec.Code >= 500 && rec.Code != http.StatusNotImplemented {
			t.Fatalf("GET %s?%s: %d: %s", path, raw, rec.Code, rec.Body.Bytes())
		}
		var body map[string]any
		if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil {
			t.Fatalf("GET %s?%s: %d, not a JSON object (%v): %s", path, raw, rec.Code, err, rec.Body.Bytes())
		}
		if rec.Code != http.StatusOK {
			e, _ := body["error"].(map[string]any)
			if code, _ := e["code"].(string); !strings.HasPrefix(code, "Base.1.22.") {
				t.Fatalf("GET %s?%s: %d without a Redfish error: %s", path, raw, rec.Code, rec.Body.Bytes())
			}
			return
		}
		if rec.Header().Get("ETag") == "" {
			t.Fatalf("GET %s?%s: no ETag", path, raw)
		}
		if next, ok := body["Members@odata.nextLink"].(string); ok && !strings.HasPrefix(next, path+"?") {
			t.Fatalf("GET %s?%s: nextLink %q", path, raw, next)
		}
	})
}

// TestAuditPaging: the audit log pages with $top and $skip like every
// collection (its entries inline), counts the entries its filters select,
// and its nextLink keeps those filters.
func TestAuditPaging(t *testing.T) {
	s := newService(t)
	for range 12 {
		s.must(http.StatusUnauthorized, "GET", systemsPath, nil, basic("nobody", "wrong-password-1"))
	}
	const entries = "/redfish/v1/Managers/rackpool/LogServices/Audit/Entries"
	ids := func(v any) []string {
		var out []string
		for _, m := range list(t, v) {
			out = append(out, m.(map[string]any)["Id"].(string))
		}
		return out
	}
	all := s.get(entries + "?outcome=denied")
	denied := ids(all["Members"])
	if n, _ := all["Members@odata.count"].(float64); int(n) != len(denied) || len(denied) < 12 {
		t.Fatalf("count %v, %d entries", all["Members@odata.count"], len(denied))
	}
	page := s.get(entries + "?outcome=denied&$top=5&$skip=3")
	if got := ids(page["Members"]); !slices.Equal(got, denied[3:8]) {
		t.Fatalf("page %v, want %v", got, denied[3:8])
	}
	if n, _ := page["Members@odata.count"].(float64); int(n) != len(denied) {
		t.Fatalf("page count %v, want %d", page["Members@odata.count"], len(denied))
	}
	if next := page["Members@odata.nextLink"]; next != entries+"?outcome=denied&$top=5&$skip=8" {
		t.Fatalf("nextLink %v", next)
	}
	// limit is the page a request without $top gets; the links go on.
	var got []string
	for next := entries + "?outcome=denied&limit=4"; next != ""; {
		p := s.get(next)
		if n := len(list(t, p["Members"])); n > 4 {
			t.Fatalf("page of %d with limit=4", n)
		}
		got = append(got, ids(p["Members"])...)
		next, _ = p["Members@odata.nextLink"].(string)
	}
	if !slices.Equal(got, denied) {
		t.Fatalf("paged through %v, want %v", got, denied)
	}
	// $filter reads the entries themselves.
	f := s.get(entries + "?" + filterQuery("Oem/Rackpool/Outcome eq 'denied'"))
	if n, _ := f["Members@odata.count"].(float64); int(n) < len(denied) {
		t.Fatalf("filtered count %v, want at least %d", f["Members@odata.count"], len(denied))
	}
}

// TestFilterIndexes: a comparison a collection answers from its records
// selects exactly the members evaluating it on their bodies selects (the
// same comparison written so that no index answers it: P eq v or P eq v).
func TestFilterIndexes(t *testing.T) {
	s := newService(t)
	s.compose(specificBody("host1", "gpu1", "nvme1"))
	for _, tc := range []struct{ coll, path string }{
		{blocksColl, "CompositionStatus/CompositionState"},
		{blocksColl, "Oem/Rackpool/Kind"},
		{blocksColl, "Oem/Rackpool/Model"},
		{blocksColl, "Status/Health"},
		{blocksColl, "Oem/Rackpool/Fabric"},
		{blocksColl, "Oem/Rackpool/Drawer"},
		{systemsPath, "SystemType"},
		{systemsPath, "Oem/Rackpool/Host"},
		{systemsPath, "Oem/Rackpool/CompositionState"},
	} {
		values := map[string]bool{"no-such-value": true}
		for _, m := range list(t, s.get(tc.coll + "?$expand=.")["Members"]) {
			v, _ := lookupPath(m, strings.Split(tc.path, "/")).(string)
			values[v] = v != ""
		}
		for v, ok := range values {
			if !ok {
				continue
			}
			lit := "'" + strings.ReplaceAll(v, "'", "''") + "'"
			indexed := links(t, s.get(tc.coll + "?" + filterQuery(tc.path+" eq "+lit))["Members"])
			read := links(t, s.get(tc.coll + "?" + filterQuery(tc.path+" eq "+lit+" or "+tc.path+" eq "+lit))["Members"])
			if !slices.Equal(indexed, read) {
				t.Errorf("%s %s eq %s: index %v, bodies %v", tc.coll, tc.path, lit, indexed, read)
			}
			// With a second comparison the index narrows, the bodies decide.
			both := links(t, s.get(tc.coll + "?" + filterQuery(tc.path+" eq "+lit+" and Id ne 'gpu2'"))["Members"])
			if want := slices.DeleteFunc(slices.Clone(read), func(id string) bool { return id == "gpu2" }); !slices.Equal(both, want) {
				t.Errorf("%s %s eq %s and Id ne 'gpu2': %v, want %v", tc.coll, tc.path, lit, both, want)
			}
		}
	}
}

func lookupPath(v any, path []string) any {
	for _, seg := range path {
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = m[seg]
	}
	return v
}
