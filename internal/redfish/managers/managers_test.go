package managers

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"rackpool/internal/events"
	"rackpool/internal/redfish/service"
	"rackpool/internal/rf"
	"rackpool/internal/store"
	"rackpool/internal/tenancy"
)

// auditLog is a hand-written AuditLog: it records the queries it is asked.
type auditLog struct {
	queries []store.AuditQuery
	entries []store.AuditEntry
}

func (a *auditLog) Audit(_ context.Context, q store.AuditQuery) ([]store.AuditEntry, error) {
	a.queries = append(a.queries, q)
	return a.entries[min(q.Offset, len(a.entries)):], nil
}

func (a *auditLog) AuditMatching(_ context.Context, q store.AuditQuery) (int64, error) {
	return int64(len(a.entries)), nil
}

// call runs the handler Routes has for pattern as principal p.
func call(t *testing.T, s *Service, pattern, target string, p tenancy.Principal, vals map[string]string) (map[string]any, error) {
	t.Helper()
	for _, rt := range Routes {
		if rt.Pattern != pattern {
			continue
		}
		r := httptest.NewRequest(http.MethodGet, target, nil)
		r = r.WithContext(service.WithPrincipal(r.Context(), p))
		for k, v := range vals {
			r.SetPathValue(k, v)
		}
		w := httptest.NewRecorder()
		if err := rt.Handler(s, w, r); err != nil {
			return nil, err
		}
		var body map[string]any
		if err := json.Unmarshal(w.Body.Bytes(), &body); err != nil {
			t.Fatalf("%s: %v", pattern, err)
		}
		return body, nil
	}
	t.Fatalf("no route %q", pattern)
	return nil, nil
}

func problemID(err error) string {
	var p *rf.Problem
	if errors.As(err, &p) {
		return p.ID
	}
	return ""
}

func TestRoutesInOrder(t *testing.T) {
	// The core lists these in this order (routes_test.go holds the whole
	// table); the Manager first, then its logs, then its network.
	var got []string
	for _, rt := range Routes {
		got = append(got, rt.Pattern)
	}
	if len(got) != 12 || got[0] != "GET /redfish/v1/Managers" || !strings.Contains(got[2], "/LogServices") ||
		!strings.Contains(got[len(got)-1], "/NetworkProtocol") {
		t.Fatalf("routes = %q", got)
	}
	for _, rt := range Routes {
		if rt.Priv != service.Login {
			t.Fatalf("%s requires %q, want Login", rt.Pattern, rt.Priv)
		}
	}
}

func TestManager(t *testing.T) {
	version := "v1"
	s := New(Deps{UUID: "uuid-1", Version: func() string { return version }, Events: events.New(events.Options{})})
	version = "v2" // read when asked, not when made
	body, err := call(t, s, "GET /redfish/v1/Managers/rackpool", "/redfish/v1/Managers/rackpool", tenancy.Principal{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if body["FirmwareVersion"] != "v2" || body["UUID"] != "uuid-1" || body["ServiceEntryPointUUID"] != "uuid-1" {
		t.Fatalf("manager = %v", body)
	}
}

func TestAuditEntries(t *testing.T) {
	log := &auditLog{entries: []store.AuditEntry{{ID: 7, User: "alice", Tenant: "a", Method: "POST", Target: "/x", Outcome: store.AuditSuccess, Status: 201}}}
	s := New(Deps{UUID: "u", Version: func() string { return "" }, Audit: log, Events: events.New(events.Options{})})
	const pattern = "GET /redfish/v1/Managers/rackpool/LogServices/Audit/Entries"
	// A tenant's account is confined to its tenant, whatever it asks.
	if _, err := call(t, s, pattern, "/x?tenant=b", tenancy.Principal{User: "alice", Tenant: "a"}, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := call(t, s, pattern, "/x?tenant=b&limit=5", tenancy.Principal{User: "root"}, nil); err != nil {
		t.Fatal(err)
	}
	if len(log.queries) != 2 || log.queries[0].Tenant != "a" || log.queries[1].Tenant != "b" || log.queries[1].Limit != 5 {
		t.Fatalf("queries = %+v", log.queries)
	}
	// The page's entries are read from the skip on, at most the page.
	log.queries = nil
	if _, err := call(t, s, pattern, "/x?$skip=3&$top=2", tenancy.Principal{}, nil); err != nil {
		t.Fatal(err)
	}
	if len(log.queries) == 0 || log.queries[0].Offset != 3 || log.queries[0].Limit != 2 {
		t.Fatalf("queries = %+v", log.queries)
	}
	for _, q := range []string{"limit=0", "after=-1", "since=yesterday"} {
		if _, err := call(t, s, pattern, "/x?"+q, tenancy.Principal{}, nil); problemID(err) != rf.Registry+"QueryParameterValueFormatError" {
			t.Errorf("?%s: err %v", q, err)
		}
	}
	// Without an audit log, there are no entries to read.
	s = New(Deps{Version: func() string { return "" }, Events: events.New(events.Options{})})
	if _, err := call(t, s, pattern, "/x", tenancy.Principal{}, nil); problemID(err) != rf.Registry+"ResourceNotFound" {
		t.Fatalf("no audit log: err %v", err)
	}
}

func TestEventEntriesByTenant(t *testing.T) {
	bus := events.New(events.Options{})
	bus.Publish(events.Event{Type: events.TypeAlert, Message: "a's", Tenant: "a"})
	bus.Publish(events.Event{Type: events.TypeAlert, Message: "b's", Tenant: "b"})
	s := New(Deps{Version: func() string { return "" }, Events: bus})
	const pattern = "GET /redfish/v1/Managers/rackpool/LogServices/Events/Entries"
	count := func(p tenancy.Principal) float64 {
		body, err := call(t, s, pattern, "/x", p, nil)
		if err != nil {
			t.Fatal(err)
		}
		return body["Members@odata.count"].(float64)
	}
	if got := count(tenancy.Principal{Tenant: "a"}); got != 1 {
		t.Fatalf("tenant a sees %v events, want 1", got)
	}
	if got := count(tenancy.Principal{}); got != 2 {
		t.Fatalf("unscoped sees %v events, want 2", got)
	}
}
