package telemetryservice

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"rackpool/internal/clock"
	"rackpool/internal/inventory"
	"rackpool/internal/lease"
	"rackpool/internal/redfish/service"
	"rackpool/internal/rf"
	"rackpool/internal/telemetry"
	"rackpool/internal/tenancy"
)

// Hand-written fakes of the interfaces a Service declares.

type hosts map[string]bool

func (h hosts) Host(id string) *inventory.Host {
	if h[id] {
		return &inventory.Host{ID: id}
	}
	return nil
}

type systems map[string]*inventory.Composition

func (s systems) Get(id string) (*inventory.Composition, error) {
	if c, ok := s[id]; ok {
		return c, nil
	}
	return nil, errors.New("no such system")
}

type leases map[string]lease.Lease

func (l leases) Get(id, _ string) (lease.Lease, error) {
	if x, ok := l[id]; ok {
		return x, nil
	}
	return lease.Lease{}, errors.New("no such lease")
}

// hider records what the core was asked to hide and answers its 404.
type hider struct{ hidden []string }

func (h *hider) Hide(r *http.Request, kind, id string) error {
	h.hidden = append(h.hidden, kind+" "+id)
	return rf.NotFound(kind, id)
}

// notes records what a handler noted for the audit.
type notes struct{ routine bool }

func (n *notes) Detail(string) {}
func (n *notes) Routine()      { n.routine = true }

var start = time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)

func newTestService(t *testing.T) (*Service, *hider, *clock.Manual) {
	t.Helper()
	clk := clock.NewManual(start)
	st, err := telemetry.Open(context.Background(), telemetry.Options{Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	h := &hider{}
	s := New(Deps{Core: h, Hosts: hosts{"host-1": true},
		Systems: systems{"sys-a": {ID: "sys-a", State: inventory.Composed, Tenant: "a"}, "sys-r": {ID: "sys-r", State: inventory.Reserved, Tenant: "a"}},
		Leases:  leases{"lease-b": {ID: "lease-b", Tenant: "b"}}, Usage: st})
	return s, h, clk
}

// call runs the handler Routes has for pattern, as principal p, with the
// given path values.
func call(t *testing.T, s *Service, pattern string, p tenancy.Principal, target, body string, vals map[string]string) (*httptest.ResponseRecorder, *notes, error) {
	t.Helper()
	for _, rt := range Routes {
		if rt.Pattern != pattern {
			continue
		}
		method, _, _ := strings.Cut(pattern, " ")
		r := httptest.NewRequest(method, target, strings.NewReader(body))
		n := &notes{}
		r = r.WithContext(service.WithNotes(service.WithPrincipal(r.Context(), p), n))
		for k, v := range vals {
			r.SetPathValue(k, v)
		}
		w := httptest.NewRecorder()
		return w, n, rt.Handler(s, w, r)
	}
	t.Fatalf("no route %q", pattern)
	return nil, nil, nil
}

const (
	submitSystem = "POST /redfish/v1/Systems/{id}/Actions/Oem/Rackpool.SubmitUsage"
	submitLease  = "POST /redfish/v1/Oem/Rackpool/MemoryLeases/{id}/Actions/Oem/Rackpool.SubmitUsage"
	getSeries    = "GET /redfish/v1/TelemetryService/Oem/Rackpool/Series/{kind}/{source}/{metric}"
	getReport    = "GET /redfish/v1/TelemetryService/MetricReports/{id}"
)

func sample(metric string, at time.Time, v float64) string {
	b, _ := json.Marshal(map[string]any{"Samples": []map[string]any{{"MetricId": metric, "Timestamp": at.Format(time.RFC3339Nano), "Value": v}}})
	return string(b)
}

func problemID(err error) string {
	var p *rf.Problem
	if errors.As(err, &p) {
		return p.ID
	}
	return ""
}

func TestSubmitThenRead(t *testing.T) {
	s, h, _ := newTestService(t)
	tenantA := tenancy.Principal{User: "alice", Tenant: "a"}
	w, n, err := call(t, s, submitSystem, tenantA, "/x", sample(telemetry.MemoryUsed, start, 42), map[string]string{"id": "sys-a"})
	if err != nil || w.Code != http.StatusNoContent || !n.routine {
		t.Fatalf("submit: status %d, routine %v, err %v", w.Code, n.routine, err)
	}
	vals := map[string]string{"kind": "System", "source": "sys-a", "metric": telemetry.MemoryUsed}
	w, _, err = call(t, s, getSeries, tenantA, "/x", "", vals)
	if err != nil {
		t.Fatal(err)
	}
	var body struct {
		Samples []struct{ Value float64 }
		Source  rf.ODataID
	}
	if err := json.Unmarshal(w.Body.Bytes(), &body); err != nil {
		t.Fatal(err)
	}
	if len(body.Samples) != 1 || body.Samples[0].Value != 42 || body.Source.ID != "/redfish/v1/Systems/sys-a" {
		t.Fatalf("series = %s", w.Body)
	}
	// Another tenant is refused through the core's hiding, as a 404.
	_, _, err = call(t, s, getSeries, tenancy.Principal{User: "bob", Tenant: "b"}, "/x", "", vals)
	if problemID(err) != rf.Registry+"ResourceNotFound" || len(h.hidden) != 1 || h.hidden[0] != "ComputerSystem sys-a" {
		t.Fatalf("other tenant: err %v, hidden %v", err, h.hidden)
	}
	// And sees none of it in the report.
	w, _, err = call(t, s, getReport, tenancy.Principal{User: "bob", Tenant: "b"}, "/x", "", map[string]string{"id": "SystemUsage"})
	if err != nil || strings.Contains(w.Body.String(), "sys-a") {
		t.Fatalf("report for tenant b: err %v, body %s", err, w.Body)
	}
	w, _, err = call(t, s, getReport, tenancy.Principal{User: "root"}, "/x", "", map[string]string{"id": "SystemUsage"})
	if err != nil || !strings.Contains(w.Body.String(), `"MetricValue": "42"`) {
		t.Fatalf("report for unscoped: err %v, body %s", err, w.Body)
	}
}

func TestSubmitRefusals(t *testing.T) {
	s, h, _ := newTestService(t)
	ok := sample(telemetry.MemoryUsed, start, 1)
	for _, tc := range []struct {
		name, pattern, id, body, want string
		p                             tenancy.Principal
	}{
		{"unknown system", submitSystem, "nope", ok, rf.Registry + "ResourceNotFound", tenancy.Principal{}},
		{"reserved is no system", submitSystem, "sys-r", ok, rf.Registry + "ResourceNotFound", tenancy.Principal{}},
		{"no samples", submitSystem, "sys-a", `{}`, rf.Registry + "PropertyMissing", tenancy.Principal{}},
		{"empty samples", submitSystem, "sys-a", `{"Samples":[]}`, rf.Registry + "PropertyValueIncorrect", tenancy.Principal{}},
		{"no metric", submitSystem, "sys-a", `{"Samples":[{"Timestamp":"2026-01-01T12:00:00Z","Value":1}]}`, rf.Registry + "PropertyMissing", tenancy.Principal{}},
		{"bad time", submitSystem, "sys-a", `{"Samples":[{"MetricId":"memory_used_bytes","Timestamp":"noon","Value":1}]}`, rf.Registry + "PropertyValueIncorrect", tenancy.Principal{}},
		{"unknown metric", submitSystem, "sys-a", sample("nope", start, 1), rf.Registry + "GeneralError", tenancy.Principal{}},
		{"host for a tenant", submitSystem, "host-1", ok, rf.Registry + "ResourceNotFound", tenancy.Principal{Tenant: "a"}},
		{"lease of another tenant", submitLease, "lease-b", sample(telemetry.CacheRemoteLive, start, 1), rf.Registry + "ResourceNotFound", tenancy.Principal{Tenant: "a"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, n, err := call(t, s, tc.pattern, tc.p, "/x", tc.body, map[string]string{"id": tc.id})
			if got := problemID(err); got != tc.want {
				t.Fatalf("err %v (%s), want %s", err, got, tc.want)
			}
			if n.routine {
				t.Fatal("a refused push was noted routine (and would not be audited)")
			}
		})
	}
	if len(h.hidden) != 2 {
		t.Fatalf("hidden %v, want the host and the lease", h.hidden)
	}
	if got := s.tel.Len(); got != 0 {
		t.Fatalf("%d series stored by refused pushes", got)
	}
}

func TestNoTelemetry(t *testing.T) {
	s := New(Deps{Core: &hider{}, Hosts: hosts{}, Systems: systems{}})
	_, _, err := call(t, s, "GET /redfish/v1/TelemetryService", tenancy.Principal{}, "/x", "", nil)
	if problemID(err) != rf.Registry+"ResourceMissingAtURI" {
		t.Fatalf("err %v, want the service missing", err)
	}
	s.RecordLeaseUsage("node-1", map[string]uint64{"lease-b": 1}) // no store: a no-op
}

func TestRecordLeaseUsage(t *testing.T) {
	s, _, clk := newTestService(t)
	clk.Advance(time.Minute)
	s.RecordLeaseUsage("node-1", map[string]uint64{"lease-b": 4096})
	got, ok := s.tel.Latest(telemetry.Key{Kind: telemetry.MemoryLease, Source: "lease-b", Metric: telemetry.LeaseBytesInUse})
	if !ok || got.Value != 4096 || !got.Time.Equal(start.Add(time.Minute)) {
		t.Fatalf("latest = %+v, %v", got, ok)
	}
}

func TestHistoryQuery(t *testing.T) {
	for _, tc := range []struct {
		query string
		limit int
		since time.Time
		ok    bool
		bad   bool
	}{
		{"", 0, time.Time{}, false, false},
		{"history", 0, time.Time{}, true, false},
		{"history=3", 3, time.Time{}, true, false},
		{"history=0", 0, time.Time{}, false, true},
		{"since=2026-01-01T12:00:00Z", 0, start, true, false},
		{"since=noon", 0, time.Time{}, false, true},
	} {
		t.Run(tc.query, func(t *testing.T) {
			r := httptest.NewRequest(http.MethodGet, "/x?"+tc.query, nil)
			limit, since, ok, err := historyQuery(r)
			if (err != nil) != tc.bad || limit != tc.limit || !since.Equal(tc.since) || ok != tc.ok {
				t.Fatalf("historyQuery(%q) = %d, %v, %v, %v", tc.query, limit, since, ok, err)
			}
		})
	}
}
