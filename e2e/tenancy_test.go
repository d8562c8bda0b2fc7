package e2e

import (
	"io"
	"net/http"
	"strings"
	"testing"
)

// tokenRequest sends a request authenticated by a session token.
func tokenRequest(t *testing.T, s *server, method, path, token, body string) (int, string, http.Header) {
	t.Helper()
	req, err := http.NewRequest(method, s.url+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("X-Auth-Token", token)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := s.http.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(data), resp.Header
}

// Sessions, accounts and tenants are store records: a session opened before
// a kill -9 still works after the restart, a logged-out one does not, and
// every acknowledged account and tenant change is there.
func TestTenancySurvivesKill(t *testing.T) {
	skipShort(t)
	data := t.TempDir()
	env := []string{"RACKPOOL_ADMIN_PASSWORD=" + password}
	s := start(t, data, env)
	login := func(user, pw string) (string, string) {
		t.Helper()
		code, body, h := tokenRequest(t, s, "POST", "/redfish/v1/SessionService/Sessions", "",
			`{"UserName": "`+user+`", "Password": "`+pw+`"}`)
		if code != http.StatusCreated || h.Get("X-Auth-Token") == "" {
			t.Fatalf("login %s: %d %s", user, code, body)
		}
		return h.Get("X-Auth-Token"), h.Get("Location")
	}
	admin, _ := login("Administrator", password)
	for _, step := range []struct{ method, path, body string }{
		{"POST", "/redfish/v1/AccountService/Oem/Rackpool/Tenants", `{"Id": "blue", "Quotas": {"gpu": 1}}`},
		{"POST", "/redfish/v1/AccountService/Accounts", `{"UserName": "bea", "Password": "bea-password", "RoleId": "Operator", "Oem": {"Rackpool": {"Tenant": "blue"}}}`},
	} {
		if code, body, _ := tokenRequest(t, s, step.method, step.path, admin, step.body); code != http.StatusCreated {
			t.Fatalf("%s %s: %d %s", step.method, step.path, code, body)
		}
	}
	bea, _ := login("bea", "bea-password")
	gone, where := login("bea", "bea-password")
	if code, body, _ := tokenRequest(t, s, "DELETE", where, gone, ""); code != http.StatusNoContent {
		t.Fatalf("logout: %d %s", code, body)
	}

	s.kill()
	s = startAt(t, s.addr, data, env)

	if code, body, _ := tokenRequest(t, s, "GET", "/redfish/v1/Systems", admin, ""); code != http.StatusOK {
		t.Fatalf("the Administrator's session after the restart: %d %s", code, body)
	}
	code, body, _ := tokenRequest(t, s, "GET", "/redfish/v1/AccountService/Oem/Rackpool/Tenants/blue", bea, "")
	if code != http.StatusOK || !strings.Contains(body, `"gpu": 1`) {
		t.Fatalf("bea's session reading her tenant after the restart: %d %s", code, body)
	}
	if code, body, _ := tokenRequest(t, s, "GET", "/redfish/v1/Systems", gone, ""); code != http.StatusUnauthorized {
		t.Fatalf("a logged-out session after the restart: %d %s", code, body)
	}
	// Deleting the account ends its sessions, across a restart too.
	if code, body, _ := tokenRequest(t, s, "DELETE", "/redfish/v1/AccountService/Accounts/bea", admin, ""); code != http.StatusNoContent {
		t.Fatalf("delete bea: %d %s", code, body)
	}
	s.kill()
	s = startAt(t, s.addr, data, env)
	if code, body, _ := tokenRequest(t, s, "GET", "/redfish/v1/Systems", bea, ""); code != http.StatusUnauthorized {
		t.Fatalf("a deleted account's session after the restart: %d %s", code, body)
	}
}
