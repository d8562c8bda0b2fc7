package redfish_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"rackpool/internal/tenancy"
	"rackpool/internal/topology"
)

// filterQuery is the query string of a $filter, escaped as a client
// would.
func filterQuery(f string) string { return "$filter=" + url.QueryEscape(f) }

// memberBodies GETs every member of a collection as the Administrator,
// by ID.
func (s *service) memberBodies(coll string) map[string]map[string]any {
	s.t.Helper()
	out := map[string]map[string]any{}
	for _, id := range links(s.t, s.get(coll)["Members"]) {
		out[id] = s.get(coll + "/" + id)
	}
	return out
}

// want lists, in collection order, the members pred holds for.
func want(t *testing.T, s *service, coll string, bodies map[string]map[string]any, pred func(m map[string]any) bool) []string {
	t.Helper()
	var out []string
	for _, id := range links(t, s.get(coll)["Members"]) {
		if pred(bodies[id]) {
			out = append(out, id)
		}
	}
	return out
}

// str and num read a member property for the expected sets.
func str(m map[string]any, path ...string) string {
	var v any = m
	for _, k := range path {
		o, _ := v.(map[string]any)
		v = o[k]
	}
	s, _ := v.(string)
	return s
}

func num(m map[string]any, path ...string) float64 {
	var v any = m
	for _, k := range path {
		o, _ := v.(map[string]any)
		v = o[k]
	}
	n, _ := v.(float64)
	return n
}

// checkFilter GETs coll with filter and compares the members and their
// count with the expected IDs.
func checkFilter(t *testing.T, s *service, coll, filter string, exp []string) {
	t.Helper()
	r := s.get(coll + "?" + filterQuery(filter))
	got := links(t, r["Members"])
	if !slices.Equal(got, exp) {
		t.Errorf("%s: %v, want %v", filter, got, exp)
	}
	if n, _ := r["Members@odata.count"].(float64); int(n) != len(exp) {
		t.Errorf("%s: Members@odata.count %v, want %d", filter, r["Members@odata.count"], len(exp))
	}
}

func TestFilterSystems(t *testing.T) {
	s := newService(t)
	id := s.compose(specificBody("host1", "gpu1"))
	bodies := s.memberBodies(systemsPath)
	if len(bodies) != 5 {
		t.Fatalf("%d systems", len(bodies))
	}
	cores := num(bodies["host2"], "ProcessorSummary", "CoreCount")
	if cores == 0 {
		t.Fatalf("host2 has no ProcessorSummary/CoreCount")
	}
	for _, tc := range []struct {
		filter string
		pred   func(m map[string]any) bool
	}{
		{"SystemType eq 'Physical'", func(m map[string]any) bool { return str(m, "SystemType") == "Physical" }},
		{"SystemType eq 'Composed'", func(m map[string]any) bool { return str(m, "Id") == id }},
		{"SystemType ne 'Composed'", func(m map[string]any) bool { return str(m, "SystemType") == "Physical" }},
		{"Status/Health eq 'OK'", func(m map[string]any) bool { return str(m, "Status", "Health") == "OK" }},
		{"Status/Health eq 'OK' and SystemType eq 'Composed'", func(m map[string]any) bool {
			return str(m, "Status", "Health") == "OK" && str(m, "Id") == id
		}},
		{"Status/Health ne 'OK'", func(map[string]any) bool { return false }},
		{fmt.Sprintf("ProcessorSummary/CoreCount ge %v", cores), func(m map[string]any) bool {
			return num(m, "ProcessorSummary", "CoreCount") >= cores
		}},
		{fmt.Sprintf("ProcessorSummary/CoreCount lt %v", cores), func(m map[string]any) bool {
			return num(m, "ProcessorSummary", "CoreCount") < cores
		}},
		{"Id eq 'host1' or Id eq 'host3'", func(m map[string]any) bool { return str(m, "Id") == "host1" || str(m, "Id") == "host3" }},
		{"(Id eq 'host1' or Id eq 'host2') and not Id eq 'host2'", func(m map[string]any) bool { return str(m, "Id") == "host1" }},
		{"not (SystemType eq 'Physical')", func(m map[string]any) bool { return str(m, "Id") == id }},
		{"Id gt 'host2'", func(m map[string]any) bool { return str(m, "Id") > "host2" }},
		{"Oem/Rackpool/CompositionState eq 'Composed'", func(m map[string]any) bool { return str(m, "Id") == id }},
		{"Oem/Rackpool/CompositionState eq null", func(m map[string]any) bool { return str(m, "SystemType") == "Physical" }},
		{"Id eq 'nobody'", func(map[string]any) bool { return false }},
	} {
		checkFilter(t, s, systemsPath, tc.filter, want(t, s, systemsPath, bodies, tc.pred))
	}
	// A form's + for a space works too.
	if got := links(t, s.get(systemsPath + "?$filter=SystemType+eq+%27Composed%27")["Members"]); !slices.Equal(got, []string{id}) {
		t.Fatalf("+ for spaces: %v", got)
	}
}

func TestFilterResourceBlocks(t *testing.T) {
	s := newService(t)
	s.compose(specificBody("host2", "gpu5", "nvme1"))
	bodies := s.memberBodies(blocksColl)
	for _, tc := range []struct {
		filter string
		pred   func(m map[string]any) bool
	}{
		{"CompositionStatus/CompositionState eq 'Composed'", func(m map[string]any) bool {
			return str(m, "CompositionStatus", "CompositionState") == "Composed"
		}},
		{"Oem/Rackpool/Drawer eq 'drawer2' and Oem/Rackpool/Slot le 2", func(m map[string]any) bool {
			return str(m, "Oem", "Rackpool", "Drawer") == "drawer2" && num(m, "Oem", "Rackpool", "Slot") <= 2
		}},
		{"Oem/Rackpool/Kind eq 'gpu' and not (Oem/Rackpool/Model eq 'V100')", func(m map[string]any) bool {
			return str(m, "Oem", "Rackpool", "Kind") == "gpu" && str(m, "Oem", "Rackpool", "Model") != "V100"
		}},
		{"CompositionStatus/SharingCapable eq true", func(m map[string]any) bool {
			b, _ := m["CompositionStatus"].(map[string]any)["SharingCapable"].(bool)
			return b
		}},
		{"Oem/Rackpool/CapacityBytes gt 1000000000000 or (Oem/Rackpool/Kind eq 'compute' and Status/Health eq 'OK')", func(m map[string]any) bool {
			return num(m, "Oem", "Rackpool", "CapacityBytes") > 1e12 ||
				(str(m, "Oem", "Rackpool", "Kind") == "compute" && str(m, "Status", "Health") == "OK")
		}},
		{"Oem/Rackpool/Drawer ne null", func(m map[string]any) bool { return str(m, "Oem", "Rackpool", "Drawer") != "" }},
	} {
		exp := want(t, s, blocksColl, bodies, tc.pred)
		if len(exp) == 0 || len(exp) == len(bodies) {
			t.Errorf("%s: %d of %d blocks: not a useful filter", tc.filter, len(exp), len(bodies))
		}
		checkFilter(t, s, blocksColl, tc.filter, exp)
	}
}

// TestFilterPaging: $filter comes before $skip and $top, so the count is
// the filtered one and nextLink keeps the filter; $expand and $select see
// the filtered page.
func TestFilterPaging(t *testing.T) {
	s := newService(t)
	filter := "Status/Health eq 'OK' and not (Oem/Rackpool/Kind eq 'memory')"
	all := links(t, s.get(blocksColl + "?" + filterQuery(filter))["Members"])
	total := len(all)
	if total < 20 || total == len(links(t, s.get(blocksColl)["Members"])) {
		t.Fatalf("%d blocks match", total)
	}
	r := s.get(blocksColl + "?" + filterQuery(filter) + "&$top=5&$skip=2")
	if got := links(t, r["Members"]); !slices.Equal(got, all[2:7]) {
		t.Fatalf("page %v, want %v", got, all[2:7])
	}
	if n, _ := r["Members@odata.count"].(float64); int(n) != total {
		t.Fatalf("Members@odata.count %v, want %d", r["Members@odata.count"], total)
	}
	if next := r["Members@odata.nextLink"]; next != blocksColl+"?"+filterQuery(filter)+"&$top=5&$skip=7" {
		t.Fatalf("nextLink %v", next)
	}
	var got []string
	for next := blocksColl + "?$top=7&" + filterQuery(filter); next != ""; {
		page := s.get(next)
		got = append(got, links(t, page["Members"])...)
		next, _ = page["Members@odata.nextLink"].(string)
	}
	if !slices.Equal(got, all) {
		t.Fatalf("paged through %v, want %v", got, all)
	}

	// With $expand and $select: the page's members, inlined, selected.
	r = s.get(blocksColl + "?" + filterQuery("Oem/Rackpool/Kind eq 'gpu'") + "&$top=3&$expand=.&$select=Members/Id,Members/Oem/Rackpool/Kind")
	members := list(t, r["Members"])
	if len(members) != 3 {
		t.Fatalf("%d members", len(members))
	}
	for _, m := range members {
		if kind := dig(t, m, "Oem", "Rackpool", "Kind"); kind != "gpu" {
			t.Fatalf("member %v", m)
		}
		if _, ok := m.(map[string]any)["Status"]; ok {
			t.Fatalf("member not selected: %v", m)
		}
	}
	if n, _ := r["Members@odata.count"].(float64); n < 3 {
		t.Fatalf("Members@odata.count %v", r["Members@odata.count"])
	}

	// A filter matching nothing: an empty page, no link.
	r = s.get(blocksColl + "?" + filterQuery("Id eq 'none'") + "&$top=1")
	if len(list(t, r["Members"])) != 0 || r["Members@odata.count"] != 0.0 || r["Members@odata.nextLink"] != nil {
		t.Fatalf("no match: %v", r)
	}
}

// TestFilterRefusals: malformed filters name the position, a property no
// member has is a 400 naming it, $filter on a resource or with only is
// refused, and 10,000 parentheses are refused at once.
func TestFilterRefusals(t *testing.T) {
	s := newService(t)
	for _, tc := range []struct {
		path, query, code, resolution string
	}{
		{systemsPath, filterQuery("Status/Health eq"), "QueryParameterValueFormatError",
			"At position 17: expected a value after 'eq', found the end of the filter."},
		{systemsPath, filterQuery("SystemType eq 'Physical"), "QueryParameterValueFormatError",
			"At position 15: the string that starts here has no closing quote."},
		{systemsPath, filterQuery("(SystemType eq 'Physical'"), "QueryParameterValueFormatError",
			"At position 26: expected ')' to close the '(' at position 1."},
		{systemsPath, filterQuery("SystemType Eq 'Physical'"), "QueryParameterValueFormatError",
			"At position 12: expected a comparison operator (eq, ne, gt, ge, lt or le) after 'SystemType', found 'Eq' (keywords are lowercase: eq)."},
		{systemsPath, filterQuery("Id eq 'host1' and"), "QueryParameterValueFormatError",
			"At position 18: expected a comparison, 'not' or '(', found the end of the filter."},
		{systemsPath, filterQuery("SystemTyp eq 'Physical'"), "QueryParameterValueError",
			"No member of this collection has the property SystemTyp; check its spelling and case, and the levels of the path (Status/Health)."},
		{blocksColl, filterQuery("Status eq 'OK' and Status/Healthy eq 'OK'"), "QueryParameterValueError",
			"No member of this collection has the property Status/Healthy; check its spelling and case, and the levels of the path (Status/Health)."},
		{systemsPath + "/host1", filterQuery("Id eq 'host1'"), "QueryNotSupportedOnResource",
			"$filter applies to resource collections (resources with Members); remove it."},
		{rootPath, filterQuery("Id eq 'RootService'"), "QueryNotSupportedOnResource",
			"$filter applies to resource collections (resources with Members); remove it."},
		{systemsPath, "only&" + filterQuery("Id eq 'host1'"), "QueryCombinationInvalid",
			"only cannot be combined with other query parameters."},
		{systemsPath, "$filter=" + strings.Repeat("(", 10000), "QueryParameterOutOfRange",
			"The filter has 10000 characters; shorten it to at most 4096."},
		{systemsPath, "$filter=" + strings.Repeat("(", 4000), "QueryParameterOutOfRange",
			"At position 33: the filter nests deeper than 32 levels; simplify it."},
		{systemsPath, "$filter=" + strings.Repeat("not+", 33) + "Id+eq+'x'", "QueryParameterOutOfRange",
			"At position 129: the filter nests deeper than 32 levels; simplify it."},
		{systemsPath, filterQuery(strings.TrimSuffix(strings.Repeat("Id eq 'x' or ", 257), " or ")), "QueryParameterOutOfRange",
			"At position 3329: the filter has more than 256 comparisons; simplify it."},
		{systemsPath, filterQuery("Id eq 'a'") + "&" + filterQuery("Id eq 'b'"), "QueryParameterValueFormatError",
			"Give the query parameter $filter once."},
	} {
		start := time.Now()
		r := s.do("GET", tc.path+"?"+tc.query, nil, admin)
		took := time.Since(start)
		if r.status != 400 {
			t.Errorf("GET %s?%.80s: %d, want 400: %s", tc.path, tc.query, r.status, r.body)
			continue
		}
		if code := r.errorCode(t); code != "Base.1.22."+tc.code {
			t.Errorf("GET %s?%.80s: %s, want %s", tc.path, tc.query, code, tc.code)
		}
		if res := r.resolution(t); res != tc.resolution {
			t.Errorf("GET %s?%.80s:\n got %s\nwant %s", tc.path, tc.query, res, tc.resolution)
		}
		if r.header.Get("ETag") != "" {
			t.Errorf("GET %s?%.80s: a refusal with an ETag", tc.path, tc.query)
		}
		if strings.HasPrefix(tc.query, "$filter=((((") {
			t.Logf("%d bytes of '(': answered in %v", len(tc.query)-len("$filter="), took)
		}
	}

	// The unknown property is the message's argument's subject: the
	// message names the parameter, as the Base registry's
	// QueryParameterValueError does.
	r := s.do("GET", systemsPath+"?"+filterQuery("SystemTyp eq 'Physical'"), nil, admin)
	var e struct {
		Error struct {
			Info []struct {
				Message     string
				MessageArgs []string
			} `json:"@Message.ExtendedInfo"`
		} `json:"error"`
	}
	if err := json.Unmarshal(r.body, &e); err != nil || len(e.Error.Info) != 1 ||
		e.Error.Info[0].Message != "The value for the parameter $filter is invalid." || !slices.Equal(e.Error.Info[0].MessageArgs, []string{"$filter"}) {
		t.Fatalf("unknown property: %s", r.body)
	}

	// An empty collection has no property to miss: it answers empty.
	sub := s.get("/redfish/v1/EventService/Subscriptions?" + filterQuery("Destination eq 'https://example.com'"))
	if len(list(t, sub["Members"])) != 0 || sub["Members@odata.count"] != 0.0 {
		t.Fatalf("empty collection: %v", sub)
	}
}

// TestFilterTenant: the filter reads members as the client, so a tenant's
// reader never matches, or learns of, another tenant's system.
func TestFilterTenant(t *testing.T) {
	s := newService(t)
	ctx := context.Background()
	secret := s.compose(specificBody("host1", "gpu1"))
	if _, err := s.auth.PutTenant(ctx, tenancy.Tenant{ID: "blue"}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.auth.CreateAccount(ctx, tenancy.NewAccount{UserName: "blue-reader", Password: "Pw-blue-reader-1", Role: tenancy.RoleReadOnly, Tenant: "blue", Enabled: true}); err != nil {
		t.Fatal(err)
	}
	reader := basic("blue-reader", "Pw-blue-reader-1")
	for _, f := range []string{"SystemType eq 'Composed'", "Id eq '" + secret + "'", "Oem/Rackpool/Host eq 'host1'", "not (SystemType eq 'Physical')"} {
		r := s.do("GET", systemsPath+"?"+filterQuery(f), nil, reader)
		if strings.Contains(string(r.body), secret) {
			t.Fatalf("%s: the reader sees system %s of another tenant: %s", f, secret, r.body)
		}
		if r.status == 200 {
			if n := r.json(t)["Members@odata.count"]; n != 0.0 {
				t.Fatalf("%s: the reader matches %v systems", f, n)
			}
		} else if code := r.errorCode(t); code != "Base.1.22.QueryParameterValueError" {
			t.Fatalf("%s: %d %s", f, r.status, code) // a property only the hidden system has is unknown to the reader
		}
	}
	if got := links(t, s.get(systemsPath + "?" + filterQuery("Id eq '"+secret+"'"))["Members"]); !slices.Equal(got, []string{secret}) {
		t.Fatalf("the administrator's filter: %v", got)
	}
}

// BenchmarkFilterResourceBlocks times a $filter over every resource
// block: each member is read in process, as the client.
func BenchmarkFilterResourceBlocks(b *testing.B) {
	gen, err := topology.Parse("generated", topology.GenerateRacks(10))
	if err != nil {
		b.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		top  *topology.Topology
	}{{"example", topology.LoadDefault()}, {"generated-10-racks", gen}} {
		b.Run(tc.name, func(b *testing.B) {
			s := newServiceOn(b, tc.top)
			n := len(list(b, s.get(blocksColl)["Members"]))
			q := blocksColl + "?" + filterQuery("Status/Health eq 'OK' and CompositionStatus/CompositionState eq 'Unused'")
			s.get(q)
			b.ResetTimer()
			for b.Loop() {
				s.must(200, "GET", q, nil, admin)
			}
			b.ReportMetric(b.Elapsed().Seconds()*1000/float64(b.N)/float64(n), "ms/member")
			b.ReportMetric(float64(n), "members")
		})
	}
}
