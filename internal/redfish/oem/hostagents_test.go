package oem

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"rackpool/api"
	"rackpool/internal/compose"
	"rackpool/internal/hostagent"
	"rackpool/internal/inventory"
	"rackpool/internal/redfish/service"
	"rackpool/internal/rf"
	"rackpool/internal/tenancy"
)

// broker is a hand-written HostSteps with function fields.
type broker struct {
	poll     func(host string, wait time.Duration) []compose.HostStep
	complete func(host, id string, failure error) error
}

func (b broker) Poll(_ context.Context, host string, wait time.Duration) []compose.HostStep {
	return b.poll(host, wait)
}
func (b broker) Complete(host, id string, failure error) error { return b.complete(host, id, failure) }

// hosts is a hand-written Hosts.
type hosts struct {
	hosts  map[string]*inventory.Host
	blocks map[string]*inventory.Block
}

func (h hosts) Host(id string) *inventory.Host   { return h.hosts[id] }
func (h hosts) Block(id string) *inventory.Block { return h.blocks[id] }

func testHosts() hosts {
	f := &inventory.Fabric{ID: "pcie0", Kind: inventory.PCIeSwitch}
	return hosts{
		hosts: map[string]*inventory.Host{"h1": {ID: "h1"}, "h2": {ID: "h2"}},
		blocks: map[string]*inventory.Block{"gpu-1": {ID: "gpu-1", Kind: "GPU", CapacityBytes: 80 << 30,
			Device: &inventory.Device{ID: "dev-1", VendorID: "10de", DeviceID: "2330", Fabric: f, Attrs: map[string]string{"serial": "S1"}}}},
	}
}

func agent(host string) tenancy.Principal {
	return tenancy.Principal{User: "agent-" + host, Role: tenancy.RoleHostAgent, Host: host}
}

// call runs the handler HostAgentRoutes has for pattern as principal p.
func call(t *testing.T, s *HostAgents, pattern, target, body string, p tenancy.Principal, vals map[string]string) (*httptest.ResponseRecorder, error) {
	t.Helper()
	for _, rt := range HostAgentRoutes {
		if rt.Pattern != pattern {
			continue
		}
		if rt.Priv != service.HostAgent {
			t.Fatalf("%s requires %q", pattern, rt.Priv)
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
	getSteps = "GET /redfish/v1/Oem/Rackpool/HostAgents/{host}/Steps"
	complete = "POST /redfish/v1/Oem/Rackpool/HostAgents/{host}/Steps/{step}/Actions/Oem/Rackpool.Complete"
)

func TestHostSteps(t *testing.T) {
	var waited time.Duration
	b := broker{poll: func(host string, wait time.Duration) []compose.HostStep {
		waited = wait
		return []compose.HostStep{{ID: "st-1", Composition: "sys-1", Host: host, Op: "attach", Blocks: []string{"gpu-1", "gone"}}}
	}}
	s := NewHostAgents(b, testHosts(), nil)
	w, err := call(t, s, getSteps, "/x?wait=600", "", agent("h1"), map[string]string{"host": "h1"})
	if err != nil {
		t.Fatal(err)
	}
	if waited != maxHostPoll {
		t.Fatalf("waited %v, want the bound %v", waited, maxHostPoll)
	}
	var body struct{ Members []api.HostStep }
	if err := json.Unmarshal(w.Body.Bytes(), &body); err != nil {
		t.Fatal(err)
	}
	if len(body.Members) != 1 || len(body.Members[0].Devices) != 1 {
		t.Fatalf("steps = %s", w.Body)
	}
	d := body.Members[0].Devices[0]
	if d.Block != "gpu-1" || d.Device != "dev-1" || d.Serial != "S1" || d.Fabric != "pcie-switch" || d.VendorID != "10de" {
		t.Fatalf("device = %+v", d)
	}
	// Only the host's own agent finds it; to anyone else it does not exist.
	for name, p := range map[string]tenancy.Principal{
		"another host's agent": agent("h2"),
		"an administrator":     {User: "root", Role: tenancy.RoleAdministrator},
	} {
		if _, err := call(t, s, getSteps, "/x", "", p, map[string]string{"host": "h1"}); problemID(err) != rf.Registry+"ResourceNotFound" {
			t.Errorf("%s: err %v", name, err)
		}
	}
	if _, err := call(t, s, getSteps, "/x?wait=-1", "", agent("h1"), map[string]string{"host": "h1"}); problemID(err) != rf.Registry+"QueryParameterValueFormatError" {
		t.Errorf("wait=-1: err %v", err)
	}
	// Without a broker there are no host agents.
	if _, err := call(t, NewHostAgents(nil, testHosts(), nil), getSteps, "/x", "", agent("h1"), map[string]string{"host": "h1"}); problemID(err) != rf.Registry+"ResourceNotFound" {
		t.Errorf("no broker: err %v", err)
	}
}

func TestCompleteHostStep(t *testing.T) {
	var got []string
	b := broker{complete: func(host, id string, failure error) error {
		if id == "old" {
			return hostagent.ErrUnknownStep
		}
		msg := "ok"
		if failure != nil {
			msg = failure.Error()
		}
		got = append(got, host+" "+id+" "+msg)
		return nil
	}}
	s := NewHostAgents(b, testHosts(), slogDiscard())
	vals := map[string]string{"host": "h1", "step": "st-1"}
	for _, body := range []string{`{"Success":true}`, `{"Success":false,"Message":"no such device"}`, `{"Success":false}`} {
		w, err := call(t, s, complete, "/x", body, agent("h1"), vals)
		if err != nil || w.Code != http.StatusNoContent {
			t.Fatalf("%s: %d, %v", body, w.Code, err)
		}
	}
	want := []string{"h1 st-1 ok", "h1 st-1 no such device", "h1 st-1 no reason given"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("completed %q, want %q", got, want)
	}
	if _, err := call(t, s, complete, "/x", `{}`, agent("h1"), vals); problemID(err) != rf.Registry+"PropertyMissing" {
		t.Errorf("no Success: err %v", err)
	}
	_, err := call(t, s, complete, "/x", `{"Success":true}`, agent("h1"), map[string]string{"host": "h1", "step": "old"})
	var p *rf.Problem
	if !errors.As(err, &p) || p.ID != rf.Registry+"ResourceNotFound" || !strings.Contains(p.Resolution, "no longer pending") {
		t.Errorf("unknown step: err %v", err)
	}
}

func slogDiscard() *slog.Logger { return slog.New(slog.DiscardHandler) }
