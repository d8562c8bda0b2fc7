package oem

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"rackpool/internal/inventory"
	"rackpool/internal/provision"
	"rackpool/internal/redfish/service"
	"rackpool/internal/rf"
	"rackpool/internal/tenancy"
)

// loop is a hand-written Provisioner over a map of subscriptions.
type loop struct{ subs map[string]provision.Status }

func (l *loop) Mode() provision.Mode    { return provision.ModeDryRun }
func (l *loop) Rules() provision.Rules  { return provision.Rules{} }
func (l *loop) Interval() time.Duration { return time.Second }
func (l *loop) Subscribe(_ context.Context, s provision.Subscription) (provision.Status, error) {
	if s.MinBytes < 0 {
		return provision.Status{}, fmt.Errorf("%w: MinBytes is negative", provision.ErrInvalid)
	}
	st := provision.Status{Subscription: s}
	l.subs[s.System] = st
	return st, nil
}
func (l *loop) Unsubscribe(_ context.Context, system string) error {
	delete(l.subs, system)
	return nil
}
func (l *loop) Get(system string) (provision.Status, bool) {
	st, ok := l.subs[system]
	return st, ok
}
func (l *loop) List() []provision.Status { return nil }

// compositions is a hand-written service.Systems.
type compositions map[string]*inventory.Composition

func (c compositions) Get(id string) (*inventory.Composition, error) {
	if x, ok := c[id]; ok {
		return x, nil
	}
	return nil, errors.New("no such system")
}

// hider records what the core was asked to hide.
type hider struct{ hidden []string }

func (h *hider) Hide(r *http.Request, kind, id string) error {
	h.hidden = append(h.hidden, kind+" "+id)
	return rf.NotFound(kind, id)
}

func callProvisioning(t *testing.T, s *Provisioning, pattern, body string, p tenancy.Principal, vals map[string]string) (*httptest.ResponseRecorder, error) {
	t.Helper()
	for _, rt := range ProvisioningRoutes {
		if rt.Pattern != pattern {
			continue
		}
		method, _, _ := strings.Cut(pattern, " ")
		r := httptest.NewRequest(method, "/x", strings.NewReader(body))
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

const (
	postProvisioning = "POST /redfish/v1/Oem/Rackpool/Provisioning"
	getSubscription  = "GET /redfish/v1/Oem/Rackpool/Provisioning/{id}"
)

func TestProvisioningTenancy(t *testing.T) {
	l := &loop{subs: map[string]provision.Status{}}
	h := &hider{}
	s := NewProvisioning(l, compositions{"sys-a": {ID: "sys-a", Tenant: "a"}}, h)
	a, b := tenancy.Principal{User: "alice", Tenant: "a"}, tenancy.Principal{User: "bob", Tenant: "b"}
	// Another tenant cannot subscribe a's system: the core hides it.
	if _, err := callProvisioning(t, s, postProvisioning, `{"System":"/redfish/v1/Systems/sys-a","Mode":"DryRun"}`, b, nil); problemID(err) != rf.Registry+"ResourceNotFound" {
		t.Fatalf("tenant b: err %v", err)
	}
	w, err := callProvisioning(t, s, postProvisioning, `{"System":"/redfish/v1/Systems/sys-a","Mode":"DryRun"}`, a, nil)
	if err != nil || w.Code != http.StatusCreated || w.Header().Get("Location") != "/redfish/v1/Oem/Rackpool/Provisioning/sys-a" {
		t.Fatalf("tenant a: %d, %v", w.Code, err)
	}
	// The loop keeps the tenant; a's subscription is hidden from b.
	l.subs["sys-a"] = provision.Status{Subscription: provision.Subscription{System: "sys-a", Tenant: "a"}}
	if _, err := callProvisioning(t, s, getSubscription, "", a, map[string]string{"id": "sys-a"}); err != nil {
		t.Fatal(err)
	}
	if _, err := callProvisioning(t, s, getSubscription, "", b, map[string]string{"id": "sys-a"}); problemID(err) != rf.Registry+"ResourceNotFound" {
		t.Fatalf("tenant b reads: err %v", err)
	}
	if want := "ComputerSystem sys-a|RackpoolProvisioningSubscription sys-a"; strings.Join(h.hidden, "|") != want {
		t.Fatalf("hidden %q, want %q", h.hidden, want)
	}
	if _, err := callProvisioning(t, s, postProvisioning, `{"System":"sys-a","Mode":"DryRun"}`, a, nil); problemID(err) != rf.Registry+"ResourceAlreadyExists" {
		t.Fatalf("again: err %v", err)
	}
}

func TestProvisioningRefusals(t *testing.T) {
	s := NewProvisioning(&loop{subs: map[string]provision.Status{}}, compositions{"sys-1": {ID: "sys-1"}}, &hider{})
	for _, tc := range []struct{ body, want string }{
		{`{"Mode":"On"}`, "PropertyMissing"},
		{`{"System":"sys-1"}`, "PropertyMissing"},
		{`{"System":"sys-1","Mode":"Off"}`, "PropertyValueIncorrect"},
		{`{"System":"sys-1","Mode":"On","MinBytes":-1}`, "PropertyValueIncorrect"}, // the loop's ErrInvalid
	} {
		if _, err := callProvisioning(t, s, postProvisioning, tc.body, tenancy.Principal{}, nil); problemID(err) != rf.Registry+tc.want {
			t.Errorf("%s: err %v, want %s", tc.body, err, tc.want)
		}
	}
	off := NewProvisioning(nil, compositions{}, &hider{})
	for _, rt := range ProvisioningRoutes {
		if _, err := callProvisioning(t, off, rt.Pattern, `{}`, tenancy.Principal{}, map[string]string{"id": "x"}); problemID(err) != rf.Registry+"ResourceMissingAtURI" {
			t.Errorf("%s without a loop: err %v", rt.Pattern, err)
		}
	}
}
