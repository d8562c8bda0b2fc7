package redfish_test

import (
	"fmt"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	"rackpool/internal/telemetry"
)

const (
	usageSeries  = "/redfish/v1/TelemetryService/Oem/Rackpool/Series"
	metricReport = "/redfish/v1/TelemetryService/MetricReports/"
)

func submitPath(sys string) string {
	return "/redfish/v1/Systems/" + sys + "/Actions/Oem/Rackpool.SubmitUsage"
}

func leaseSubmitPath(lease string) string {
	return memoryLeasesPath(lease) + "/Actions/Oem/Rackpool.SubmitUsage"
}

// push is a SubmitUsage body of one sample per metric at t.
func push(t time.Time, values map[string]float64) map[string]any {
	var samples []map[string]any
	for m, v := range values {
		samples = append(samples, map[string]any{"MetricId": m, "Timestamp": t.UTC().Format(time.RFC3339Nano), "Value": v})
	}
	return map[string]any{"Samples": samples}
}

// reportValues returns a MetricReport's values as source → metric → value.
func (s *service) reportValues(id string, c cred) map[string]map[string]string {
	s.t.Helper()
	body := s.must(http.StatusOK, "GET", metricReport+id, nil, c).json(s.t)
	if body["MetricReportDefinition"].(map[string]any)["@odata.id"] != "/redfish/v1/TelemetryService/MetricReportDefinitions/"+id {
		s.t.Errorf("report %s: definition %v", id, body["MetricReportDefinition"])
	}
	out := map[string]map[string]string{}
	for _, v := range list(s.t, body["MetricValues"]) {
		mv := v.(map[string]any)
		src := mv["MetricProperty"].(string)
		if out[src] == nil {
			out[src] = map[string]string{}
		}
		out[src][mv["MetricId"].(string)] = mv["MetricValue"].(string)
		if _, err := time.Parse(time.RFC3339Nano, mv["Timestamp"].(string)); err != nil {
			s.t.Errorf("report %s: Timestamp %v", id, mv["Timestamp"])
		}
	}
	return out
}

// stored is everything the telemetry store holds, for "changed nothing".
func (s *service) stored() []telemetry.Reading {
	return s.tel.LatestAll(telemetry.Filter{})
}

func TestSubmitSystemUsage(t *testing.T) {
	s := newService(t)
	blue, red, blueRO := s.tenants()
	sys := s.must(http.StatusCreated, "POST", "/redfish/v1/Systems", specificBody("host1", "gpu1"), blue).json(t)["Id"].(string)
	redSys := s.must(http.StatusCreated, "POST", "/redfish/v1/Systems", specificBody("host2", "gpu5"), red).json(t)["Id"].(string)
	now := s.fabClk.Now()

	s.must(http.StatusNoContent, "POST", submitPath(sys), push(now, map[string]float64{
		telemetry.MemoryUsed: 3 << 30, telemetry.MemoryPeak: 4 << 30, telemetry.IORead: 1.5e6}), blue)
	s.must(http.StatusNoContent, "POST", submitPath(redSys), push(now, map[string]float64{telemetry.MemoryUsed: 1 << 30}), red)
	// The same push again (a retry after a lost answer) is accepted and
	// stores nothing twice.
	s.must(http.StatusNoContent, "POST", submitPath(redSys), push(now, map[string]float64{telemetry.MemoryUsed: 1 << 30}), red)
	if w := s.tel.Window(telemetry.Key{Kind: telemetry.System, Source: redSys, Metric: telemetry.MemoryUsed}, time.Time{}); len(w) != 1 {
		t.Errorf("a repeated push stored %d samples", len(w))
	}

	// Each tenant's report shows its own systems only; an administrator
	// sees both.
	blueSys, redPath := "/redfish/v1/Systems/"+sys, "/redfish/v1/Systems/"+redSys
	if got := s.reportValues("SystemUsage", blue); !reflect.DeepEqual(got, map[string]map[string]string{blueSys: {
		telemetry.MemoryUsed: "3221225472", telemetry.MemoryPeak: "4294967296", telemetry.IORead: "1500000"}}) {
		t.Errorf("blue's report = %v", got)
	}
	if got := s.reportValues("SystemUsage", red); len(got) != 1 || got[redPath][telemetry.MemoryUsed] != "1073741824" {
		t.Errorf("red's report = %v", got)
	}
	if got := s.reportValues("SystemUsage", admin); len(got) != 2 {
		t.Errorf("admin's report = %v", got)
	}
	if got := s.reportValues("SystemUsage", blueRO); len(got) != 1 {
		t.Errorf("blue's ReadOnly account reads %v", got)
	}

	before := s.stored()
	later := now.Add(time.Second)
	// Another tenant's system, an unknown system, a physical host: 404 as
	// for a GET, nothing stored, the attempt audited.
	for _, tc := range []struct {
		path string
		c    cred
	}{{submitPath(sys), red}, {submitPath("sys-000000000000"), blue}, {submitPath("host1"), blue}, {submitPath(sys), red}} {
		r := s.must(http.StatusNotFound, "POST", tc.path, push(later, map[string]float64{telemetry.MemoryUsed: 1}), tc.c)
		if code := r.errorCode(t); !strings.HasPrefix(code, "Base.1.22.Resource") {
			t.Errorf("POST %s: %s", tc.path, code)
		}
	}
	if !s.auditHas("mallory", "failure", submitPath(sys)) && !s.auditHas("mallory", "denied", submitPath(sys)) {
		t.Error("red's push to blue's system not audited")
	}
	// ReadOnly: 403.
	s.must(http.StatusForbidden, "POST", submitPath(sys), push(later, map[string]float64{telemetry.MemoryUsed: 1}), blueRO)
	// A forged identity: wrong password, forged or expired session token,
	// no credentials: 401.
	token, _ := s.login()
	s.authClk.Advance(idle + time.Minute)
	for _, c := range []cred{basicAs("alice", "wrong-password"), basicAs("nobody", tenantPass), {token: "forged-token"}, {token: token},
		{hdr: map[string]string{"Authorization": "Bearer " + token}}} {
		s.must(http.StatusUnauthorized, "POST", submitPath(sys), push(later, map[string]float64{telemetry.MemoryUsed: 1}), c)
	}
	if after := s.stored(); !reflect.DeepEqual(before, after) {
		t.Fatalf("refused pushes changed the store:\nbefore %v\nafter  %v", before, after)
	}

	// Bad input: 400 with a Redfish message, nothing stored.
	ts := later.UTC().Format(time.RFC3339Nano)
	sample := func(kv ...any) map[string]any {
		m := map[string]any{"MetricId": telemetry.MemoryUsed, "Timestamp": ts, "Value": 1}
		for i := 0; i < len(kv); i += 2 {
			if kv[i+1] == nil {
				delete(m, kv[i].(string))
			} else {
				m[kv[i].(string)] = kv[i+1]
			}
		}
		return m
	}
	many := make([]map[string]any, 4097)
	for i := range many {
		many[i] = sample("Timestamp", later.Add(-time.Duration(4097-i)*time.Millisecond).UTC().Format(time.RFC3339Nano))
	}
	for _, tc := range []struct {
		name string
		body any
		code string
	}{
		{"malformed", `{"Samples": [`, "MalformedJSON"},
		{"not an object", `[1]`, "MalformedJSON"},
		{"unknown property", map[string]any{"Samples": []any{sample()}, "Tenant": "red"}, "PropertyUnknown"},
		{"unknown sample property", map[string]any{"Samples": []any{sample("Units", "By")}}, "PropertyUnknown"},
		{"value of the wrong type", map[string]any{"Samples": []any{sample("Value", "lots")}}, "PropertyValueTypeError"},
		{"no samples property", map[string]any{}, "PropertyMissing"},
		{"no samples", map[string]any{"Samples": []any{}}, "PropertyValueIncorrect"},
		{"too many samples", map[string]any{"Samples": many}, "PropertyValueIncorrect"},
		{"no metric", map[string]any{"Samples": []any{sample("MetricId", nil)}}, "PropertyMissing"},
		{"no value", map[string]any{"Samples": []any{sample("Value", nil)}}, "PropertyMissing"},
		{"bad time", map[string]any{"Samples": []any{sample("Timestamp", "yesterday")}}, "PropertyValueIncorrect"},
		{"negative", map[string]any{"Samples": []any{sample("Value", -1)}}, "GeneralError"},
		{"unknown metric", map[string]any{"Samples": []any{sample("MetricId", "cpu_magic")}}, "GeneralError"},
		{"a lease metric", map[string]any{"Samples": []any{sample("MetricId", telemetry.LeaseBytesInUse)}}, "GeneralError"},
		{"future", map[string]any{"Samples": []any{sample("Timestamp", now.Add(time.Hour).UTC().Format(time.RFC3339))}}, "GeneralError"},
		{"duplicate", map[string]any{"Samples": []any{sample(), sample()}}, "GeneralError"},
		{"out of order", map[string]any{"Samples": []any{sample(), sample("Timestamp", now.Add(-time.Second).UTC().Format(time.RFC3339))}}, "GeneralError"},
		{"before the stored one", map[string]any{"Samples": []any{sample("Timestamp", now.Add(-time.Minute).UTC().Format(time.RFC3339))}}, "GeneralError"},
		{"good then bad", map[string]any{"Samples": []any{sample("MetricId", telemetry.IOWrite), sample("Value", -3)}}, "GeneralError"},
	} {
		r := s.do("POST", submitPath(sys), tc.body, blue)
		if r.status != http.StatusBadRequest || r.errorCode(t) != "Base.1.22."+tc.code {
			t.Errorf("%s: %d %s, want 400 %s", tc.name, r.status, r.body, tc.code)
		}
	}
	if after := s.stored(); !reflect.DeepEqual(before, after) {
		t.Fatalf("bad pushes changed the store:\nbefore %v\nafter  %v", before, after)
	}
	// An administrator pushes for a physical host.
	s.must(http.StatusNoContent, "POST", submitPath("host3"), push(later, map[string]float64{telemetry.MemoryUsed: 5}), admin)
	if got := s.reportValues("SystemUsage", blue); len(got) != 1 {
		t.Errorf("a tenant sees a host's usage: %v", got)
	}
}

func TestUsageSeriesWindow(t *testing.T) {
	s := newService(t)
	blue, red, _ := s.tenants()
	sys := s.must(http.StatusCreated, "POST", "/redfish/v1/Systems", specificBody("host1", "gpu1"), blue).json(t)["Id"].(string)
	start := s.fabClk.Now().Add(-time.Minute)
	var samples []map[string]any
	for i := range 6 {
		samples = append(samples, map[string]any{"MetricId": telemetry.MemoryUsed, "Timestamp": start.Add(time.Duration(i) * 10 * time.Second).Format(time.RFC3339Nano), "Value": 100 * i})
	}
	s.must(http.StatusNoContent, "POST", submitPath(sys), map[string]any{"Samples": samples}, blue)
	path := usageSeries + "/System/" + sys + "/" + telemetry.MemoryUsed
	body := s.must(http.StatusOK, "GET", path, nil, blue).json(t)
	got := list(t, body["Samples"])
	if len(got) != 6 || body["Units"] != "By" || body["Source"].(map[string]any)["@odata.id"] != "/redfish/v1/Systems/"+sys {
		t.Fatalf("series = %v", body)
	}
	q := fmt.Sprintf("?since=%s&limit=2", start.Add(15*time.Second).Format(time.RFC3339))
	got = list(t, s.must(http.StatusOK, "GET", path+q, nil, blue).json(t)["Samples"])
	if len(got) != 2 || got[1].(map[string]any)["Value"].(float64) != 500 || got[0].(map[string]any)["Value"].(float64) != 400 {
		t.Errorf("since+limit = %v", got)
	}
	s.must(http.StatusNotFound, "GET", path, nil, red)
	for _, q := range []string{"?since=yesterday", "?limit=0", "?limit=x"} {
		if r := s.do("GET", path+q, nil, blue); r.status != http.StatusBadRequest {
			t.Errorf("%s: %d", q, r.status)
		}
	}
	// Decomposed: the series stays readable for an administrator until it
	// expires, and is gone for the tenant.
	s.must(http.StatusNoContent, "DELETE", "/redfish/v1/Systems/"+sys, nil, blue)
	s.must(http.StatusOK, "GET", path, nil, admin)
	s.must(http.StatusNotFound, "GET", path, nil, blue)
	if got := s.reportValues("SystemUsage", blue); len(got) != 0 {
		t.Errorf("blue sees a decomposed system's usage: %v", got)
	}
}

func TestLeaseAndCacheUsage(t *testing.T) {
	s := newService(t)
	blue, red, _ := s.tenants()
	addr := s.startMemnode(16 << 20)
	lease := s.must(http.StatusCreated, "POST", memoryLeases, map[string]any{"CapacityBytes": 1 << 20}, blue).json(t)["Id"].(string)
	heartbeat := func(usage []map[string]any) reply {
		return s.do("POST", memoryNodes, map[string]any{"Device": "memnode1", "Endpoint": addr, "CapacityBytes": 16 << 20,
			"Epoch": s.memnode.Epoch(), "LeaseUsage": usage}, admin)
	}
	if r := heartbeat([]map[string]any{{"Lease": lease, "BytesInUse": 12288}, {"Lease": "lease-gone", "BytesInUse": 4096}}); r.status != http.StatusOK {
		t.Fatalf("heartbeat: %d %s", r.status, r.body)
	}
	leasePath := memoryLeasesPath(lease)
	if got := s.reportValues("MemoryLeaseUsage", blue); len(got) != 1 || got[leasePath][telemetry.LeaseBytesInUse] != "12288" {
		t.Errorf("blue's lease report = %v", got)
	}
	if got := s.reportValues("MemoryLeaseUsage", red); len(got) != 0 {
		t.Errorf("red's lease report = %v", got)
	}
	for _, bad := range [][]map[string]any{{{"Lease": lease, "BytesInUse": -1}}, {{"Lease": lease}, {"Lease": lease}}, {{"Lease": lease, "Bytes": 1}}} {
		if r := heartbeat(bad); r.status != http.StatusBadRequest {
			t.Errorf("heartbeat with %v: %d", bad, r.status)
		}
	}
	// A cache on the lease pushes its remote tier's working set.
	now := s.fabClk.Now()
	s.must(http.StatusNoContent, "POST", leaseSubmitPath(lease), push(now, map[string]float64{telemetry.CacheRemoteLive: 65536, telemetry.CacheRemoteItems: 12}), blue)
	s.must(http.StatusNotFound, "POST", leaseSubmitPath(lease), push(now.Add(time.Second), map[string]float64{telemetry.CacheRemoteLive: 1}), red)
	if r := s.do("POST", leaseSubmitPath(lease), push(now.Add(time.Second), map[string]float64{telemetry.MemoryUsed: 1}), blue); r.status != http.StatusBadRequest {
		t.Errorf("a system metric on a lease: %d", r.status)
	}
	if got := s.reportValues("CacheUsage", blue); got[leasePath][telemetry.CacheRemoteLive] != "65536" || got[leasePath][telemetry.CacheRemoteItems] != "12" {
		t.Errorf("cache report = %v", got)
	}
	if got := s.reportValues("CacheUsage", red); len(got) != 0 {
		t.Errorf("red's cache report = %v", got)
	}
}

// TestUsageMetrics: rackpool_usage shows every series to unscoped
// accounts and is left out for a tenant's (its labels name every
// tenant's systems).
func TestUsageMetrics(t *testing.T) {
	s := newService(t)
	blue, _, _ := s.tenants()
	sys := s.must(http.StatusCreated, "POST", "/redfish/v1/Systems", specificBody("host1", "gpu1"), blue).json(t)["Id"].(string)
	s.must(http.StatusNoContent, "POST", submitPath(sys), push(s.fabClk.Now(), map[string]float64{telemetry.MemoryUsed: 42}), blue)
	want := fmt.Sprintf(`rackpool_usage{kind="System",metric="memory_used_bytes",source=%q} 42`, sys)
	if body := string(s.must(http.StatusOK, "GET", "/metrics", nil, admin).body); !strings.Contains(body, want) ||
		!strings.Contains(body, "rackpool_usage_series 1") {
		t.Errorf("admin's /metrics lacks %s:\n%s", want, body)
	}
	if body := string(s.must(http.StatusOK, "GET", "/metrics", nil, blue).body); strings.Contains(body, "rackpool_usage") ||
		!strings.Contains(body, "rackpool_compositions") {
		t.Errorf("a tenant's /metrics:\n%s", body)
	}
}

// TestTelemetryServiceLinks: the service root links the TelemetryService,
// which links its three collections, each listing one member per kind
// (metric definitions: per metric).
func TestTelemetryServiceLinks(t *testing.T) {
	s := newService(t)
	root := s.get("/redfish/v1")
	if root["TelemetryService"].(map[string]any)["@odata.id"] != "/redfish/v1/TelemetryService" {
		t.Fatalf("root: %v", root["TelemetryService"])
	}
	ts := s.get("/redfish/v1/TelemetryService")
	for prop, n := range map[string]int{"MetricReportDefinitions": 3, "MetricReports": 3, "MetricDefinitions": 10} {
		coll := s.get(ts[prop].(map[string]any)["@odata.id"].(string))
		if got := len(list(t, coll["Members"])); got != n {
			t.Errorf("%s: %d members, want %d", prop, got, n)
		}
	}
	def := s.get("/redfish/v1/TelemetryService/MetricReportDefinitions/SystemUsage")
	if def["MetricReportDefinitionType"] != "OnRequest" || len(list(t, def["Metrics"])) != 6 {
		t.Errorf("SystemUsage definition = %v", def)
	}
}
