package redfish_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"rackpool/api"
	"rackpool/internal/hostagent"
	"rackpool/internal/topology"
)

// TestHostAgentSteps: a HostAgent account bound to host1 takes host1's
// saga steps, with what it needs to find each device, and answers them;
// it can do nothing else (no reads, no other host), and nobody else can
// take them. A composition on host1 is Composed only once it answered.
func TestHostAgentSteps(t *testing.T) {
	s := newServiceAgents(t, topology.LoadDefault(), hostagent.NewBroker(hostagent.Options{Hosts: []string{"host1"}}))
	const agentPass = "Agent-host1-Secret-9"
	acct := func(name, role, host string) reply {
		body := map[string]any{"UserName": name, "Password": agentPass, "RoleId": role}
		if host != "" {
			body["Oem"] = map[string]any{"Rackpool": map[string]any{"Host": host}}
		}
		return s.do("POST", "/redfish/v1/AccountService/Accounts", body, admin)
	}
	// Bad accounts change nothing.
	for _, c := range []struct{ name, role, host string }{
		{"agent-x", "HostAgent", ""}, {"agent-y", "HostAgent", "host9"}, {"agent-z", "Operator", "host1"},
	} {
		if r := acct(c.name, c.role, c.host); r.status != http.StatusBadRequest {
			t.Errorf("create %s (%s, host %q) = %d %s, want 400", c.name, c.role, c.host, r.status, r.body)
		}
	}
	if r := acct("agent-host1", "HostAgent", "host1"); r.status != http.StatusCreated {
		t.Fatalf("create the agent account: %d %s", r.status, r.body)
	} else if h := dig(t, r.json(t), "Oem", "Rackpool", "Host"); h != "host1" {
		t.Errorf("account Oem.Rackpool.Host = %v", h)
	}
	login := s.do("POST", "/redfish/v1/SessionService/Sessions", map[string]string{"UserName": "agent-host1", "Password": agentPass}, cred{})
	if login.status != http.StatusCreated {
		t.Fatalf("agent login: %d %s", login.status, login.body)
	}
	agent := cred{token: login.header.Get("X-Auth-Token")}

	// What the agent may not do.
	for _, c := range []struct {
		method, path string
		who          cred
		want         int
	}{
		{"GET", "/redfish/v1/Systems", agent, http.StatusForbidden},
		{"GET", "/redfish/v1/CompositionService/ResourceBlocks/gpu1", agent, http.StatusForbidden},
		{"GET", "/redfish/v1/Oem/Rackpool/HostAgents/host2/Steps", agent, http.StatusNotFound},
		{"GET", "/redfish/v1/Oem/Rackpool/HostAgents/host1/Steps", admin, http.StatusForbidden},
		{"GET", "/redfish/v1/Oem/Rackpool/HostAgents/host1/Steps", cred{}, http.StatusUnauthorized},
		{"GET", "/redfish/v1/Oem/Rackpool/HostAgents/host1/Steps?wait=soon", agent, http.StatusBadRequest},
	} {
		if r := s.do(c.method, c.path, nil, c.who); r.status != c.want {
			t.Errorf("%s %s = %d, want %d: %s", c.method, c.path, r.status, c.want, r.body)
		}
	}

	// A composition on host1 waits for the agent.
	done := make(chan reply, 1)
	go func() { done <- s.do("POST", "/redfish/v1/Systems", specificBody("host1", "gpu1", "hdd2"), admin) }()
	var steps struct{ Members []api.HostStep }
	deadline := time.Now().Add(10 * time.Second)
	for len(steps.Members) == 0 && time.Now().Before(deadline) {
		r := s.must(http.StatusOK, "GET", "/redfish/v1/Oem/Rackpool/HostAgents/host1/Steps?wait=1", nil, agent)
		if err := json.Unmarshal(r.body, &steps); err != nil {
			t.Fatalf("steps: %v", err)
		}
	}
	if len(steps.Members) != 1 {
		t.Fatalf("agent got %d steps, want 1", len(steps.Members))
	}
	st := steps.Members[0]
	if st.Op != "attach" || st.Host != "host1" || len(st.Devices) != 2 || st.Deadline.IsZero() {
		t.Fatalf("step %+v", st)
	}
	gpu := st.Devices[0]
	if gpu.Block != "gpu1" || gpu.Kind != "gpu" || gpu.VendorID != "0x10de" || gpu.DeviceID != "0x1db4" || gpu.Fabric != "pcie-switch" {
		t.Errorf("gpu1 as the agent sees it: %+v", gpu)
	}
	select {
	case r := <-done:
		t.Fatalf("compose answered %d before the agent did: %s", r.status, r.body)
	default:
	}
	path := "/redfish/v1/Oem/Rackpool/HostAgents/host1/Steps/" + st.ID + "/Actions/Oem/Rackpool.Complete"
	for _, bad := range []any{`{"Success": "yes"}`, `{"Message": "x"}`, `{"Success": true, "Extra": 1}`, `{`} {
		if r := s.do("POST", path, bad, agent); r.status != http.StatusBadRequest {
			t.Errorf("complete with %v = %d, want 400", bad, r.status)
		}
	}
	if r := s.do("POST", "/redfish/v1/Oem/Rackpool/HostAgents/host1/Steps/nope/Actions/Oem/Rackpool.Complete", map[string]any{"Success": true}, agent); r.status != http.StatusNotFound {
		t.Errorf("complete an unknown step = %d, want 404", r.status)
	}
	s.must(http.StatusNoContent, "POST", path, map[string]any{"Success": true, "Message": "gpu1 at 0000:03:00.0, hdd2 is sdc"}, agent)
	r := <-done
	if r.status != http.StatusCreated {
		t.Fatalf("compose after the agent confirmed: %d %s", r.status, r.body)
	}
	sys := strings.TrimPrefix(r.header.Get("Location"), "/redfish/v1/Systems/")
	// A refused drain keeps the system, with the agent's reason.
	go func() { done <- s.do("DELETE", "/redfish/v1/Systems/"+sys, nil, admin) }()
	steps.Members = nil
	for len(steps.Members) == 0 && time.Now().Before(deadline) {
		r := s.must(http.StatusOK, "GET", "/redfish/v1/Oem/Rackpool/HostAgents/host1/Steps?wait=1", nil, agent)
		_ = json.Unmarshal(r.body, &steps)
	}
	if len(steps.Members) != 1 || steps.Members[0].Op != "detach" {
		t.Fatalf("drain steps %+v", steps.Members)
	}
	s.must(http.StatusNoContent, "POST", "/redfish/v1/Oem/Rackpool/HostAgents/host1/Steps/"+steps.Members[0].ID+"/Actions/Oem/Rackpool.Complete",
		map[string]any{"Success": false, "Message": "/scratch is mounted on sdc"}, agent)
	// The compensation re-attaches on the host: answer it too.
	steps.Members = nil
	for len(steps.Members) == 0 && time.Now().Before(deadline) {
		r := s.must(http.StatusOK, "GET", "/redfish/v1/Oem/Rackpool/HostAgents/host1/Steps?wait=1", nil, agent)
		_ = json.Unmarshal(r.body, &steps)
	}
	if len(steps.Members) == 1 && steps.Members[0].Op == "attach" {
		s.must(http.StatusNoContent, "POST", "/redfish/v1/Oem/Rackpool/HostAgents/host1/Steps/"+steps.Members[0].ID+"/Actions/Oem/Rackpool.Complete",
			map[string]any{"Success": true}, agent)
	} else {
		t.Errorf("compensation steps %+v, want one attach", steps.Members)
	}
	r = <-done
	if r.status == http.StatusNoContent || !strings.Contains(string(r.body), "host-drain") || !strings.Contains(string(r.body), "/scratch is mounted") {
		t.Errorf("decompose with a refused drain = %d %s; want an error naming host-drain and the agent's reason", r.status, r.body)
	}
	if state := dig(t, s.get("/redfish/v1/Systems/"+sys), "Oem", "Rackpool", "CompositionState"); state != "Composed" {
		t.Errorf("system after a refused drain is %v, want Composed", state)
	}
}
