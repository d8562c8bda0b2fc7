package replica

import (
	"context"
	"encoding/pem"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// staticPeers is a static view of the other replicas.
type staticPeers struct {
	leader     Peer
	self       bool
	leaderErr  error
	replicas   map[string]Peer
	replicaErr error
}

func (p staticPeers) Leader(context.Context) (Peer, bool, error) {
	return p.leader, p.self, p.leaderErr
}

func (p staticPeers) Replica(_ context.Context, tag string) (Peer, bool, error) {
	r, ok := p.replicas[tag]
	return r, ok, p.replicaErr
}

// testService is a service in miniature: the leader serves /lead and what
// is below it, a task is /tasks/{tag}-{n}, the root is /. Its errors are
// plain text that say which it was.
type testService struct{}

func (testService) LeaderOwned(path string) bool {
	return path == "/lead" || strings.HasPrefix(path, "/lead/")
}

func (testService) TaskTag(path string) string {
	if id, ok := strings.CutPrefix(path, "/tasks/"); ok && !strings.Contains(id, "/") {
		tag, _, _ := strings.Cut(id, "-")
		if tag != id {
			return tag
		}
	}
	return ""
}

func (testService) Root(path string) bool { return path == "/" }

func (testService) StepsHost(path string) string {
	host, _ := strings.CutPrefix(path, "/agents/")
	if host == path {
		return ""
	}
	return host
}

// stepTags says which replica's workflow waits on each host's agent.
type stepTags map[string]string

func (s stepTags) StepTag(_ context.Context, host string) (string, error) {
	if host == "broken" {
		return "", errors.New("database down")
	}
	return s[host], nil
}

func (testService) Unavailable(w http.ResponseWriter, why string) {
	w.Header().Set("Retry-After", "1")
	http.Error(w, "unavailable: "+why, http.StatusServiceUnavailable)
}

func (testService) TaskGone(w http.ResponseWriter, path string) {
	http.Error(w, "gone: "+path, http.StatusNotFound)
}

// echo answers with tag and the request's ForwardedHeader.
func echo(tag string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, tag+" "+r.Header.Get(ForwardedHeader))
	})
}

// TestForward: the leader's resources go to the leader, a task to the
// replica whose tag begins its ID, everything else is answered here; a
// forwarded request is never forwarded again; no leader answers 503 and a
// stopped replica's task 404; the answer names the replica that made it,
// once.
func TestForward(t *testing.T) {
	upstream := func(tag string) *httptest.Server {
		return httptest.NewServer(Forward(echo(tag), tag, staticPeers{self: true}, testService{}))
	}
	leader, other := upstream("lead"), upstream("other")
	defer leader.Close()
	defer other.Close()
	local := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "here") })
	h := Forward(local, "me", staticPeers{leader: Peer{URL: leader.URL}, replicas: map[string]Peer{"other": {URL: other.URL}}}, testService{})
	for _, c := range []struct {
		path, forwarded string
		status          int
		body, by        string
	}{
		{"/lead", "", 200, "lead me", "lead"},
		{"/lead/x", "", 200, "lead me", "lead"},
		{"/leadX", "", 200, "here", "me"},
		{"/systems/s1", "", 200, "here", "me"},
		{"/tasks/other-3", "", 200, "other me", "other"},
		{"/tasks/me-3", "", 200, "here", "me"},
		{"/tasks/gone-3", "", 404, "gone: /tasks/gone-3\n", "me"},
		{"/tasks/other-3", "x", 200, "here", "me"},                       // forwarded once already
		{"/lead", "x", 503, "unavailable: The replica that leads", "me"}, // the lead moved meanwhile
		{"/tasks/7", "", 200, "here", "me"},                              // a replica serving alone's ID
		{"/tasks/other-3/x", "", 200, "here", "me"},                      // not a task
	} {
		req := httptest.NewRequest(http.MethodGet, c.path, nil)
		if c.forwarded != "" {
			req.Header.Set(ForwardedHeader, c.forwarded)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != c.status || !strings.HasPrefix(rec.Body.String(), c.body) || rec.Header().Get(ReplicaHeader) != c.by || len(rec.Header().Values(ReplicaHeader)) != 1 {
			t.Errorf("GET %s (forwarded %q): %d %q by %v; want %d %q by %s", c.path, c.forwarded, rec.Code, rec.Body, rec.Header().Values(ReplicaHeader), c.status, c.body, c.by)
		}
	}
}

// TestForwardSteps: a host agent's requests go to the replica whose
// workflow waits on that host, are answered here when none does, this
// one does, or the one that did has stopped, and answer 503 when the
// owner cannot be read; a forwarded one is never forwarded again.
func TestForwardSteps(t *testing.T) {
	other := httptest.NewServer(Forward(echo("other"), "other", staticPeers{self: true}, testService{}))
	defer other.Close()
	local := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "here") })
	tags := stepTags{"h1": "other", "h2": "me", "h3": "gone"}
	h := Forward(local, "me", staticPeers{replicas: map[string]Peer{"other": {URL: other.URL}}}, testService{}, WithSteps(tags))
	for _, c := range []struct {
		path, forwarded string
		status          int
		body            string
	}{
		{"/agents/h1", "", 200, "other me"},
		{"/agents/h1", "x", 200, "here"},
		{"/agents/h2", "", 200, "here"},
		{"/agents/h3", "", 200, "here"},
		{"/agents/h4", "", 200, "here"},
		{"/agents/broken", "", 503, "unavailable: Which replica runs"},
	} {
		req := httptest.NewRequest(http.MethodGet, c.path, nil)
		if c.forwarded != "" {
			req.Header.Set(ForwardedHeader, c.forwarded)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != c.status || !strings.HasPrefix(rec.Body.String(), c.body) {
			t.Errorf("GET %s (forwarded %q): %d %q; want %d %q", c.path, c.forwarded, rec.Code, rec.Body, c.status, c.body)
		}
	}
	// Without WithSteps, agents are served where they ask.
	rec := httptest.NewRecorder()
	Forward(local, "me", staticPeers{}, testService{}).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/agents/h1", nil))
	if rec.Body.String() != "here" {
		t.Errorf("without steps: %q", rec.Body)
	}
}

// TestForwardUnavailable: whatever keeps a request from the replica that
// serves it (no leader, a failed lookup, an unusable advertisement, a
// replica that cannot be reached) is the service's 503, saying which.
func TestForwardUnavailable(t *testing.T) {
	local := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { t.Errorf("%s answered here", r.URL.Path) })
	for _, c := range []struct {
		name  string
		peers staticPeers
		path  string
		why   string
	}{
		{"no leader", staticPeers{leaderErr: errors.New("no replica leads")}, "/lead", "none does now"},
		{"leader unreachable", staticPeers{leader: Peer{URL: "http://127.0.0.1:1"}}, "/lead", "could not be reached"},
		{"leader's URL", staticPeers{leader: Peer{URL: "127.0.0.1:80"}}, "/lead", "unusable URL"},
		{"leader's CA", staticPeers{leader: Peer{URL: "https://127.0.0.1:1", CA: []byte("not PEM")}}, "/lead", "unusable certificate authority"},
		{"task lookup", staticPeers{replicaErr: errors.New("database down")}, "/tasks/other-3", "could not be looked up"},
	} {
		t.Run(c.name, func(t *testing.T) {
			rec := httptest.NewRecorder()
			Forward(local, "me", c.peers, testService{}).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, c.path, nil))
			if rec.Code != http.StatusServiceUnavailable || rec.Header().Get("Retry-After") != "1" || !strings.Contains(rec.Body.String(), c.why) {
				t.Errorf("%d %q, want 503 saying %q", rec.Code, rec.Body, c.why)
			}
		})
	}
}

// TestForwardTLS: a peer served over HTTPS is reached through the CA it
// advertised, with one transport per CA.
func TestForwardTLS(t *testing.T) {
	leader := httptest.NewTLSServer(echo("lead"))
	defer leader.Close()
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: leader.Certificate().Raw})
	h := Forward(http.NotFoundHandler(), "me", staticPeers{leader: Peer{URL: leader.URL, CA: ca}}, testService{})
	for range 2 {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/lead", nil))
		if rec.Code != 200 || rec.Body.String() != "lead me" {
			t.Fatalf("GET /lead over HTTPS: %d %q", rec.Code, rec.Body)
		}
	}
	if n := len(h.(*forwarder).transports.m); n != 1 {
		t.Errorf("%d transports for one CA", n)
	}

	// Without its CA the leader's certificate is not trusted.
	rec := httptest.NewRecorder()
	Forward(http.NotFoundHandler(), "me", staticPeers{leader: Peer{URL: leader.URL}}, testService{}).
		ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/lead", nil))
	if rec.Code != http.StatusServiceUnavailable {
		t.Errorf("GET /lead without the leader's CA: %d %q", rec.Code, rec.Body)
	}
}

// TestGate: a replica that lost its hold answers the service's 503 to
// everything but the service root.
func TestGate(t *testing.T) {
	serving := false
	h := Gate(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}), testService{}, func() bool { return serving })
	for path, want := range map[string]int{"/": 200, "/lead": 503, "/systems": 503} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
		if rec.Code != want || want == 503 && !strings.Contains(rec.Body.String(), "lost its hold") {
			t.Errorf("GET %s while not serving: %d %q, want %d", path, rec.Code, rec.Body, want)
		}
	}
	serving = true
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/systems", nil))
	if rec.Code != 200 {
		t.Errorf("GET while serving: %d", rec.Code)
	}
}
