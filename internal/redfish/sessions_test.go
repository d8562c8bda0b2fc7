package redfish_test

import (
	"bytes"
	"net/http"
	"rackpool/internal/tenancy"
	"slices"
	"testing"
)

// login creates a session and returns its token and ID.
func (s *service) login() (token, id string) {
	s.t.Helper()
	r := s.must(http.StatusCreated, "POST", "/redfish/v1/SessionService/Sessions",
		map[string]string{"UserName": tenancy.AdminUser, "Password": password}, cred{})
	token = r.header.Get("X-Auth-Token")
	if token == "" {
		s.t.Fatalf("login: no X-Auth-Token header")
	}
	body := r.json(s.t)
	id, _ = body["Id"].(string)
	loc := "/redfish/v1/SessionService/Sessions/" + id
	if id == "" || r.header.Get("Location") != loc || body["@odata.id"] != loc {
		s.t.Fatalf("login: Id %q, Location %q, @odata.id %v", id, r.header.Get("Location"), body["@odata.id"])
	}
	if body["UserName"] != tenancy.AdminUser {
		s.t.Fatalf("login: UserName %v", body["UserName"])
	}
	return token, id
}

func TestSessionLifecycle(t *testing.T) {
	s := newService(t)
	token, id := s.login()
	if token == id {
		t.Fatal("the session token is its public ID")
	}
	tok := cred{token: token}
	s.must(http.StatusOK, "GET", "/redfish/v1/Systems", nil, tok)
	if sess := s.must(http.StatusOK, "GET", "/redfish/v1/SessionService/Sessions/"+id, nil, tok).json(t); sess["Id"] != id {
		t.Fatalf("session body: %v", sess)
	}
	if got := links(t, s.get("/redfish/v1/SessionService/Sessions")["Members"]); !slices.Contains(got, id) {
		t.Fatalf("session %s not listed: %v", id, got)
	}
	// A token never appears in a body: it is a bearer credential.
	for _, p := range []string{"/redfish/v1/SessionService/Sessions", "/redfish/v1/SessionService/Sessions/" + id} {
		if r := s.do("GET", p, nil, tok); bytes.Contains(r.body, []byte(token)) {
			t.Errorf("GET %s shows the session token", p)
		}
	}

	s.must(http.StatusNoContent, "DELETE", "/redfish/v1/SessionService/Sessions/"+id, nil, tok)
	r := s.must(http.StatusUnauthorized, "GET", "/redfish/v1/Systems", nil, tok)
	if code := r.errorCode(t); code != "Base.1.22.NoValidSession" {
		t.Fatalf("deleted token: %s", code)
	}
	// A session client (a token, or a page's script) is not challenged for
	// Basic credentials: a browser would answer with its own password
	// prompt instead of letting the page log in again. Without
	// credentials, or with Basic ones, the challenge is there.
	if h := r.header.Get("WWW-Authenticate"); h != "" {
		t.Errorf("401 to a session token challenges %q", h)
	}
	page := cred{hdr: map[string]string{"X-Requested-With": "XMLHttpRequest"}}
	if h := s.must(http.StatusUnauthorized, "GET", "/redfish/v1/Systems", nil, page).header.Get("WWW-Authenticate"); h != "" {
		t.Errorf("401 to a page's script challenges %q", h)
	}
	if h := s.must(http.StatusUnauthorized, "POST", "/redfish/v1/SessionService/Sessions",
		map[string]any{"UserName": "Administrator", "Password": "wrong"}, page).header.Get("WWW-Authenticate"); h != "" {
		t.Errorf("a page's failed login challenges %q", h)
	}
	if h := s.must(http.StatusUnauthorized, "GET", "/redfish/v1/Systems", nil, cred{}).header.Get("WWW-Authenticate"); h == "" {
		t.Error("401 without credentials lacks WWW-Authenticate")
	}
	s.must(http.StatusNotFound, "GET", "/redfish/v1/SessionService/Sessions/"+id, nil, admin)
	s.must(http.StatusNotFound, "DELETE", "/redfish/v1/SessionService/Sessions/"+id, nil, admin)
	if got := links(t, s.get("/redfish/v1/SessionService/Sessions")["Members"]); len(got) != 0 {
		t.Fatalf("sessions after logout: %v", got)
	}
}

func TestSessionLoginErrors(t *testing.T) {
	s := newService(t)
	cases := []struct {
		name   string
		body   any
		status int
		code   string
	}{
		{"wrong password", map[string]string{"UserName": tenancy.AdminUser, "Password": "guess"}, 401, "Base.1.22.NoValidSession"},
		{"unknown user", map[string]string{"UserName": "root", "Password": password}, 401, "Base.1.22.NoValidSession"},
		{"missing UserName", map[string]string{"Password": password}, 400, "Base.1.22.PropertyMissing"},
		{"missing Password", map[string]string{"UserName": tenancy.AdminUser}, 400, "Base.1.22.PropertyMissing"},
		{"wrong type", map[string]any{"UserName": 1, "Password": password}, 400, "Base.1.22.PropertyValueTypeError"},
		{"unknown property", map[string]any{"UserName": tenancy.AdminUser, "Password": password, "Role": "x"}, 400, "Base.1.22.PropertyUnknown"},
		{"not JSON", `UserName=Administrator`, 400, "Base.1.22.MalformedJSON"},
		{"empty", ``, 400, "Base.1.22.MalformedJSON"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := s.do("POST", "/redfish/v1/SessionService/Sessions", tc.body, cred{})
			if r.status != tc.status {
				t.Fatalf("status %d, want %d: %s", r.status, tc.status, r.body)
			}
			if code := r.errorCode(t); code != tc.code {
				t.Fatalf("code %s, want %s", code, tc.code)
			}
			if r.header.Get("X-Auth-Token") != "" {
				t.Fatal("a failed login returned a token")
			}
		})
	}
	if got := links(t, s.get("/redfish/v1/SessionService/Sessions")["Members"]); len(got) != 0 {
		t.Fatalf("failed logins created sessions: %v", got)
	}
	// A wrong Basic password is refused too (and is not cached as good).
	s.must(http.StatusOK, "GET", "/redfish/v1/Systems", nil, admin)
	bad := s.do("GET", "/redfish/v1/Systems", nil, cred{hdr: map[string]string{"Authorization": "Basic QWRtaW5pc3RyYXRvcjp4"}})
	if bad.status != http.StatusUnauthorized {
		t.Fatalf("wrong Basic password: %d", bad.status)
	}
	if s.do("GET", "/redfish/v1/Systems", nil, cred{token: "not-a-token"}).status != http.StatusUnauthorized {
		t.Fatal("a made-up token was accepted")
	}
}

func TestSessionIdleExpiry(t *testing.T) {
	s := newService(t)
	token, _ := s.login()
	tok := cred{token: token}
	// Use keeps a session alive: three uses, each just inside the limit.
	for range 3 {
		s.authClk.Advance(idle - 1)
		s.must(http.StatusOK, "GET", "/redfish/v1/Systems", nil, tok)
	}
	s.authClk.Advance(idle + 1)
	r := s.must(http.StatusUnauthorized, "GET", "/redfish/v1/Systems", nil, tok)
	if code := r.errorCode(t); code != "Base.1.22.NoValidSession" {
		t.Fatalf("expired token: %s", code)
	}
	// Expired stays expired, even if used again at once.
	s.must(http.StatusUnauthorized, "GET", "/redfish/v1/Systems", nil, tok)
	// A fresh login still works.
	token2, _ := s.login()
	s.must(http.StatusOK, "GET", "/redfish/v1/Systems", nil, cred{token: token2})
}

// TestSessionIdleExpiryUnused: a session that idles out without being used
// is gone from the session collection too, not only refused.
func TestSessionIdleExpiryUnused(t *testing.T) {
	s := newService(t)
	_, id := s.login()
	s.authClk.Advance(idle + 1)
	if got := links(t, s.get("/redfish/v1/SessionService/Sessions")["Members"]); slices.Contains(got, id) {
		t.Errorf("expired session %s is still listed: %v", id, got)
	}
	if r := s.do("GET", "/redfish/v1/SessionService/Sessions/"+id, nil, admin); r.status != http.StatusNotFound {
		t.Errorf("GET expired session: %d, want 404", r.status)
	}
}
