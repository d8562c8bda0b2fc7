package eventservice

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"rackpool/internal/events"
	"rackpool/internal/redfish/service"
	"rackpool/internal/rf"
	"rackpool/internal/tenancy"
)

// settings is a hand-written Settings over a map; fail makes PutSetting
// fail.
type settings struct {
	m    map[string]string
	fail bool
}

func (s *settings) Setting(_ context.Context, key string) (string, bool, error) {
	v, ok := s.m[key]
	return v, ok, nil
}

func (s *settings) PutSetting(_ context.Context, key, value string) error {
	if s.fail {
		return errors.New("store down")
	}
	s.m[key] = value
	return nil
}

func newTestService(t *testing.T, st *settings) (*Service, *events.Bus) {
	t.Helper()
	bus := events.New(events.Options{})
	t.Cleanup(bus.Close)
	return New(Deps{Events: bus, Settings: st}), bus
}

// call runs the handler Routes has for pattern as principal p.
func call(t *testing.T, s *Service, pattern, target, body string, p tenancy.Principal, vals map[string]string) (*httptest.ResponseRecorder, error) {
	t.Helper()
	for _, rt := range Routes {
		if rt.Pattern != pattern {
			continue
		}
		method, _, _ := strings.Cut(pattern, " ")
		r := httptest.NewRequest(method, target, strings.NewReader(body))
		r = r.WithContext(service.WithPrincipal(r.Context(), p))
		for k, v := range vals {
			r.SetPathValue(k, v)
		}
		w := httptest.NewRecorder()
		return w, rt.Handler(s, w, r)
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

const (
	postSub = "POST /redfish/v1/EventService/Subscriptions"
	getSub  = "GET /redfish/v1/EventService/Subscriptions/{id}"
)

func TestSubscriptionsKeptAndRestored(t *testing.T) {
	st := &settings{m: map[string]string{}}
	s, _ := newTestService(t, st)
	tenantA := tenancy.Principal{User: "alice", Tenant: "a"}
	w, err := call(t, s, postSub, "/x", `{"Destination":"https://listener.example/events","EventTypes":["Alert"]}`, tenantA, nil)
	if err != nil || w.Code != http.StatusCreated {
		t.Fatalf("post: %d, %v", w.Code, err)
	}
	loc := w.Header().Get("Location")
	id := strings.TrimPrefix(loc, subscriptionsPath)
	if id == "" || id == loc || !strings.Contains(st.m[subscriptionsKey], id) {
		t.Fatalf("Location %q, stored %q", loc, st.m[subscriptionsKey])
	}
	// Its tenant sees it; another tenant gets the 404 of no subscription.
	if _, err := call(t, s, getSub, "/x", "", tenantA, map[string]string{"id": id}); err != nil {
		t.Fatal(err)
	}
	if _, err := call(t, s, getSub, "/x", "", tenancy.Principal{Tenant: "b"}, map[string]string{"id": id}); problemID(err) != rf.Registry+"ResourceNotFound" {
		t.Fatalf("tenant b: err %v", err)
	}
	// A new service over the same store delivers to it again.
	s2, bus2 := newTestService(t, st)
	if err := s2.RestoreSubscriptions(context.Background()); err != nil {
		t.Fatal(err)
	}
	if ds := bus2.Destinations(); len(ds) != 1 || ds[0].ID != id || ds[0].Tenant != "a" {
		t.Fatalf("restored %+v", ds)
	}
	s2.DropSubscriptions()
	if ds := bus2.Destinations(); len(ds) != 0 {
		t.Fatalf("after drop %+v", ds)
	}
}

func TestSubscriptionRefusals(t *testing.T) {
	for _, tc := range []struct{ name, body, want string }{
		{"no destination", `{}`, rf.Registry + "PropertyMissing"},
		{"relative destination", `{"Destination":"/events"}`, rf.Registry + "PropertyValueIncorrect"},
		{"other protocol", `{"Destination":"https://l.example/","Protocol":"SNMPv2c"}`, rf.Registry + "PropertyValueIncorrect"},
		{"unknown event type", `{"Destination":"https://l.example/","EventTypes":["Nope"]}`, rf.Registry + "PropertyValueIncorrect"},
		{"unknown property", `{"Destination":"https://l.example/","Nope":1}`, rf.Registry + "PropertyUnknown"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := &settings{m: map[string]string{}}
			s, bus := newTestService(t, st)
			if _, err := call(t, s, postSub, "/x", tc.body, tenancy.Principal{}, nil); problemID(err) != tc.want {
				t.Fatalf("err %v (%s), want %s", err, problemID(err), tc.want)
			}
			if len(bus.Destinations()) != 0 || len(st.m) != 0 {
				t.Fatal("a refused subscription was added")
			}
		})
	}
	// One the store cannot keep is not delivered to either.
	s, bus := newTestService(t, &settings{m: map[string]string{}, fail: true})
	if _, err := call(t, s, postSub, "/x", `{"Destination":"https://l.example/"}`, tenancy.Principal{}, nil); err == nil {
		t.Fatal("a subscription the store refused was accepted")
	}
	if len(bus.Destinations()) != 0 {
		t.Fatal("a subscription the store refused is delivered to")
	}
}

func TestSSEFormat(t *testing.T) {
	s, _ := newTestService(t, nil)
	for _, tc := range []struct {
		query   string
		reports bool
		fails   bool
	}{
		{"", false, false},
		{"EventFormatType=Event", false, false},
		{"$filter=EventType%20eq%20'Alert'", false, true},
		{"EventFormatType=MetricReport", false, true}, // no fabric telemetry served
		{"MetricReportDefinition=FabricTelemetry", false, true},
	} {
		r := httptest.NewRequest(http.MethodGet, "/redfish/v1/EventService/SSE?"+tc.query, nil)
		reports, err := s.sseFormat(r)
		if reports != tc.reports || (err != nil) != tc.fails {
			t.Errorf("sseFormat(%q) = %v, %v", tc.query, reports, err)
		}
	}
}
