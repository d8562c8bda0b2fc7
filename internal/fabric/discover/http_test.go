package discover

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"rackpool/internal/rf"
)

// fakeService serves small() over HTTP and records every request's method
// and path; with user set it wants a session token and serves the session
// service.
type fakeService struct {
	mu       sync.Mutex
	requests []string
	user     string
	token    string
}

func (s *fakeService) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	s.requests = append(s.requests, r.Method+" "+r.URL.Path)
	s.mu.Unlock()
	if s.user != "" {
		switch {
		case r.Method == http.MethodPost && r.URL.Path == "/redfish/v1/SessionService/Sessions":
			var login struct{ UserName, Password string }
			if json.NewDecoder(r.Body).Decode(&login) != nil || login.UserName+":"+login.Password != s.user {
				w.WriteHeader(http.StatusUnauthorized)
				return
			}
			s.token = "tok-1"
			w.Header().Set("X-Auth-Token", s.token)
			w.Header().Set("Location", "/redfish/v1/SessionService/Sessions/1")
			w.WriteHeader(http.StatusCreated)
			return
		case r.Method == http.MethodDelete && r.URL.Path == "/redfish/v1/SessionService/Sessions/1":
			s.token = ""
			w.WriteHeader(http.StatusNoContent)
			return
		case r.Header.Get("X-Auth-Token") == "" || r.Header.Get("X-Auth-Token") != s.token:
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
	}
	b, ok := small()[r.URL.Path]
	if !ok || r.Method != http.MethodGet {
		http.Error(w, `{"error":{"message":"no such resource"}}`, http.StatusNotFound)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Write([]byte(b))
}

func TestHTTPGetterOnlyGets(t *testing.T) {
	s := &fakeService{}
	srv := httptest.NewServer(s)
	defer srv.Close()
	g, err := NewHTTPGetter(HTTPOptions{URL: srv.URL + "/redfish/v1/"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Walk(context.Background(), g.Get, Options{}); err != nil {
		t.Fatal(err)
	}
	if err := g.Close(); err != nil {
		t.Fatal(err)
	}
	for _, r := range s.requests {
		if !strings.HasPrefix(r, "GET /redfish/v1") {
			t.Errorf("request %s", r)
		}
	}
	if _, err := g.Get(context.Background(), "/redfish/v1/nope"); !errors.Is(err, ErrNotFound) {
		t.Errorf("404: %v", err)
	}
}

func TestHTTPGetterSession(t *testing.T) {
	s := &fakeService{user: "admin:secret"}
	srv := httptest.NewServer(s)
	defer srv.Close()
	g, err := NewHTTPGetter(HTTPOptions{URL: srv.URL, User: "admin", Password: "secret"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Walk(context.Background(), g.Get, Options{}); err != nil {
		t.Fatal(err)
	}
	// The manager restarts: the token is gone, the getter logs in again.
	s.token = "tok-other"
	if _, err := g.Get(context.Background(), "/redfish/v1"); err != nil {
		t.Fatalf("after a lost session: %v", err)
	}
	if err := g.Close(); err != nil {
		t.Fatal(err)
	}
	var posts, deletes int
	for _, r := range s.requests {
		switch {
		case strings.HasPrefix(r, "POST "):
			posts++
		case strings.HasPrefix(r, "DELETE "):
			deletes++
		case !strings.HasPrefix(r, "GET "):
			t.Errorf("request %s", r)
		}
	}
	if posts != 2 || deletes != 1 {
		t.Errorf("%d logins, %d logouts; want 2, 1: %v", posts, deletes, s.requests)
	}
	bad, _ := NewHTTPGetter(HTTPOptions{URL: srv.URL, User: "admin", Password: "wrong"})
	if _, err := bad.Get(context.Background(), "/redfish/v1"); err == nil || strings.Contains(err.Error(), "wrong") {
		t.Errorf("bad password: %v (and it must not be echoed)", err)
	}
}

func TestHTTPGetterLimits(t *testing.T) {
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte(`{}`)) }))
	defer other.Close()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/redfish/v1/away":
			http.Redirect(w, r, other.URL+"/redfish/v1", http.StatusFound)
		case "/redfish/v1/here":
			http.Redirect(w, r, "/redfish/v1/big", http.StatusFound)
		case "/redfish/v1/busier":
			http.Error(w, `{"error":{"@Message.ExtendedInfo":[{"Message":"The service is busy."}]}}`, http.StatusServiceUnavailable)
		case "/redfish/v1/big":
			w.Write([]byte(`{"x":"` + strings.Repeat("y", 5000) + `"}`))
		default:
			http.Error(w, `{"error":{"@Message.ExtendedInfo":[{"MessageId":"Base.1.22.ServiceTemporarilyUnavailable","Message":"The service is busy."}]}}`, http.StatusServiceUnavailable)
		}
	}))
	defer srv.Close()
	g, err := NewHTTPGetter(HTTPOptions{URL: srv.URL, MaxBodyBytes: 1000})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	var re *rf.RedirectError
	if _, err := g.Get(ctx, "/redfish/v1/away"); !errors.As(err, &re) {
		t.Errorf("redirect to another host: %v", err)
	}
	if _, err := g.Get(ctx, "/redfish/v1/here"); !errors.Is(err, ErrTooLarge) {
		t.Errorf("same-host redirect to a large body: %v", err)
	}
	if _, err := g.Get(ctx, "/redfish/v1/busy"); err == nil || !strings.Contains(err.Error(), "503 Service Unavailable (Base.1.22.ServiceTemporarilyUnavailable): The service is busy.") {
		t.Errorf("503: %v", err)
	}
	if _, err := g.Get(ctx, "/redfish/v1/busier"); err == nil || err.Error() != "503 Service Unavailable: The service is busy." {
		t.Errorf("503 without a MessageId: %v", err)
	}
	for _, u := range []string{"ftp://x", "http://", "https://user:pw@host"} {
		if _, err := NewHTTPGetter(HTTPOptions{URL: u}); err == nil {
			t.Errorf("NewHTTPGetter(%q) accepted", u)
		}
	}
}
