package redfish

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"rackpool/internal/replica"
)

var _ replica.Service = Forwarding{}

// peers is a static view of the other replicas.
type peers struct {
	leader    replica.Peer
	self      bool
	leaderErr error
	replicas  map[string]replica.Peer
}

func (p peers) Leader(context.Context) (replica.Peer, bool, error) {
	return p.leader, p.self, p.leaderErr
}

func (p peers) Replica(_ context.Context, tag string) (replica.Peer, bool, error) {
	r, ok := p.replicas[tag]
	return r, ok, nil
}

// TestForward: behind replica.Forward, the leader's resources go to the
// leader, a task to the replica whose tag begins its ID, everything else
// is answered here; a forwarded request is never forwarded again; no
// leader answers 503 and a stopped replica's task 404; the answer names
// the replica that made it.
func TestForward(t *testing.T) {
	upstream := func(tag string) *httptest.Server {
		return httptest.NewServer(replica.Forward(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			io.WriteString(w, tag+" "+r.Header.Get(replica.ForwardedHeader))
		}), tag, peers{self: true}, Forwarding{}))
	}
	leader, other := upstream("lead"), upstream("other")
	defer leader.Close()
	defer other.Close()
	local := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "here") })
	h := replica.Forward(local, "me", peers{leader: replica.Peer{URL: leader.URL}, replicas: map[string]replica.Peer{"other": {URL: other.URL}}}, Forwarding{})
	for _, c := range []struct {
		path, forwarded string
		status          int
		body, by        string
	}{
		{"/redfish/v1/Oem/Rackpool/MemoryLeases/l1", "", 200, "lead me", "lead"},
		{"/redfish/v1/TelemetryService", "", 200, "lead me", "lead"},
		{"/redfish/v1/Systems/s1/Actions/Oem/Rackpool.SubmitUsage", "", 200, "lead me", "lead"},
		{"/redfish/v1/EventService/Subscriptions", "", 200, "lead me", "lead"},
		{"/redfish/v1/Oem/Rackpool/DrivesX", "", 200, "here", "me"},
		{"/redfish/v1/Systems/s1", "", 200, "here", "me"},
		{"/redfish/v1/TaskService/Tasks/other-3", "", 200, "other me", "other"},
		{"/redfish/v1/TaskService/TaskMonitors/other-3", "", 200, "other me", "other"},
		{"/redfish/v1/TaskService/Tasks/me-3", "", 200, "here", "me"},
		{"/redfish/v1/TaskService/Tasks/gone-3", "", 404, "", "me"},
		{"/redfish/v1/TaskService/Tasks/other-3", "x", 200, "here", "me"},  // forwarded once already
		{"/redfish/v1/TelemetryService", "x", 503, "", "me"},               // the lead moved meanwhile
		{"/redfish/v1/TaskService/Tasks/7", "", 200, "here", "me"},         // a replica serving alone's ID
		{"/redfish/v1/TaskService/Tasks/other-3/x", "", 200, "here", "me"}, // not a task
	} {
		req := httptest.NewRequest(http.MethodGet, c.path, nil)
		if c.forwarded != "" {
			req.Header.Set(replica.ForwardedHeader, c.forwarded)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != c.status || c.body != "" && rec.Body.String() != c.body || rec.Header().Get(replica.ReplicaHeader) != c.by || len(rec.Header().Values(replica.ReplicaHeader)) != 1 {
			t.Errorf("GET %s (forwarded %q): %d %q by %v; want %d %q by %s", c.path, c.forwarded, rec.Code, rec.Body, rec.Header().Values(replica.ReplicaHeader), c.status, c.body, c.by)
		}
	}

	// No leader, or one that cannot be reached: 503 with Retry-After.
	for _, p := range []peers{{leaderErr: errors.New("no replica leads")}, {leader: replica.Peer{URL: "http://127.0.0.1:1"}}} {
		rec := httptest.NewRecorder()
		replica.Forward(local, "me", p, Forwarding{}).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/redfish/v1/Oem/Rackpool/Drives", nil))
		if rec.Code != http.StatusServiceUnavailable || rec.Header().Get("Retry-After") != "1" || !strings.Contains(rec.Body.String(), "ServiceTemporarilyUnavailable") {
			t.Errorf("no reachable leader: %d %s", rec.Code, rec.Body)
		}
	}
}

// TestForwardingErrors: the 503 and the stopped replica's task's 404 are
// Redfish error bodies from the Base registry, with the resolution the
// forwarding layer gives.
func TestForwardingErrors(t *testing.T) {
	for _, c := range []struct {
		name       string
		answer     func(http.ResponseWriter)
		status     int
		id, retry  string
		resolution string
		args       []string
	}{
		{"unavailable", func(w http.ResponseWriter) { Forwarding{}.Unavailable(w, "None leads.") },
			503, "ServiceTemporarilyUnavailable", "1", "None leads. Retry shortly.", []string{"1"}},
		{"task gone", func(w http.ResponseWriter) { Forwarding{}.TaskGone(w, "/redfish/v1/TaskService/Tasks/gone-3") },
			404, "ResourceMissingAtURI", "", "The replica that ran this task has stopped, and its tasks with it. Read the resource the task changed to know its outcome.",
			[]string{"/redfish/v1/TaskService/Tasks/gone-3"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			rec := httptest.NewRecorder()
			c.answer(rec)
			var body struct {
				Error struct {
					Code string `json:"code"`
					Info []struct {
						MessageArgs       []string
						Resolution        string
						RelatedProperties []string
					} `json:"@Message.ExtendedInfo"`
				} `json:"error"`
			}
			if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil {
				t.Fatalf("body %s: %v", rec.Body, err)
			}
			info := body.Error.Info
			if rec.Code != c.status || rec.Header().Get("Retry-After") != c.retry || body.Error.Code != baseRegistry+c.id || len(info) != 1 ||
				info[0].Resolution != c.resolution || strings.Join(info[0].MessageArgs, ",") != strings.Join(c.args, ",") || info[0].RelatedProperties == nil {
				t.Errorf("%d (Retry-After %q) %s", rec.Code, rec.Header().Get("Retry-After"), rec.Body)
			}
		})
	}
}

// TestGate: behind replica.Gate, a replica that lost its hold answers 503
// to everything but the service root.
func TestGate(t *testing.T) {
	serving := false
	h := replica.Gate(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}), Forwarding{}, func() bool { return serving })
	for path, want := range map[string]int{"/redfish/v1": 200, "/redfish/v1/": 200, "/redfish": 200, "/redfish/v1/odata": 503, "/redfish/v1/Systems": 503} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
		if rec.Code != want {
			t.Errorf("GET %s while not serving: %d, want %d", path, rec.Code, want)
		}
	}
	serving = true
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/redfish/v1/Systems", nil))
	if rec.Code != 200 {
		t.Errorf("GET while serving: %d", rec.Code)
	}
}

// TestStepsHost: the host agents' poll and answer paths name their host
// (escaped IDs decoded); nothing else does.
func TestStepsHost(t *testing.T) {
	for path, want := range map[string]string{
		"/redfish/v1/Oem/Rackpool/HostAgents/host1/Steps":                                          "host1",
		"/redfish/v1/Oem/Rackpool/HostAgents/host1/Steps/s.1.attach/Actions/Oem/Rackpool.Complete": "host1",
		"/redfish/v1/Oem/Rackpool/HostAgents/t1%2Fcpu/Steps":                                       "t1/cpu",
		"/redfish/v1/Oem/Rackpool/HostAgents/host1":                                                "",
		"/redfish/v1/Oem/Rackpool/HostAgents":                                                      "",
		"/redfish/v1/Oem/Rackpool/HostAgents//Steps":                                               "",
		"/redfish/v1/Oem/Rackpool/HostAgents/host1/StepsX":                                         "",
		"/redfish/v1/Systems/host1":                                                                "",
	} {
		if got := (Forwarding{}).StepsHost(path); got != want {
			t.Errorf("StepsHost(%q) = %q, want %q", path, got, want)
		}
	}
}

// FuzzStepsHost: any path gives a host only when it is a host agent's
// steps path naming that host, and never panics.
func FuzzStepsHost(f *testing.F) {
	for _, p := range []string{hostAgentsPath + "/h1/Steps", hostAgentsPath + "/h%2F1/Steps/x", hostAgentsPath + "//Steps", "/", "%zz", hostAgentsPath + "/%zz/Steps"} {
		f.Add(p)
	}
	f.Fuzz(func(t *testing.T, path string) {
		host := (Forwarding{}).StepsHost(path)
		if host == "" {
			return
		}
		if !strings.HasPrefix(path, hostAgentsPath+"/") || !strings.Contains(path, "/Steps") {
			t.Fatalf("StepsHost(%q) = %q for a path that is no host agent's", path, host)
		}
	})
}
