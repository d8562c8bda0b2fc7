package redfish_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"rackpool/internal/store"
	"rackpool/internal/tenancy"
)

// Tenancy and authentication as an attacker would try them: every attempt
// is refused, changes nothing, and is in the audit log.

func basicAs(user, pass string) cred {
	return cred{hdr: map[string]string{"Authorization": "Basic " + base64.StdEncoding.EncodeToString([]byte(user+":"+pass))}}
}

const tenantPass = "tenant-pass-123"

// tenants sets up tenants blue and red with one Operator each and a
// ReadOnly account in blue.
func (s *service) tenants() (blue, red, blueRO cred) {
	s.t.Helper()
	for _, t := range []string{"blue", "red"} {
		s.must(http.StatusCreated, "POST", "/redfish/v1/AccountService/Oem/Rackpool/Tenants", map[string]any{"Id": t}, admin)
	}
	for _, a := range [][3]string{{"alice", "Operator", "blue"}, {"mallory", "Operator", "red"}, {"bob", "ReadOnly", "blue"}} {
		s.must(http.StatusCreated, "POST", "/redfish/v1/AccountService/Accounts", map[string]any{
			"UserName": a[0], "Password": tenantPass, "RoleId": a[1], "Oem": map[string]any{"Rackpool": map[string]any{"Tenant": a[2]}}}, admin)
	}
	return basicAs("alice", tenantPass), basicAs("mallory", tenantPass), basicAs("bob", tenantPass)
}

// auditHas reports whether the audit log has an entry of user with outcome
// on target.
func (s *service) auditHas(user, outcome, target string) bool {
	s.t.Helper()
	entries, err := s.store.Audit(context.Background(), store.AuditQuery{User: user, Outcome: outcome})
	if err != nil {
		s.t.Fatal(err)
	}
	for _, e := range entries {
		if strings.HasPrefix(e.Target, target) {
			return true
		}
	}
	return false
}

func TestTenantIsolation(t *testing.T) {
	s := newService(t)
	blue, red, blueRO := s.tenants()
	r := s.must(http.StatusCreated, "POST", "/redfish/v1/Systems", specificBody("host1", "gpu1", "hdd1"), blue)
	sys := r.json(t)["Id"].(string)
	before := s.snapshot()

	// Cross-tenant read: the system, its blocks and its host are invisible.
	for _, path := range []string{"/redfish/v1/Systems/" + sys, "/redfish/v1/CompositionService/ResourceBlocks/gpu1",
		"/redfish/v1/Systems/host1", "/redfish/v1/Fabrics/falcon1/Connections/" + sys} {
		if got := s.do("GET", path, nil, red); got.status != http.StatusNotFound {
			t.Errorf("red GET %s: %d, want 404", path, got.status)
		}
	}
	for _, coll := range []string{"/redfish/v1/Systems", "/redfish/v1/CompositionService/ResourceBlocks", "/redfish/v1/CompositionService/ActivePool"} {
		body := string(s.must(http.StatusOK, "GET", coll, nil, red).body)
		for _, leak := range []string{sys, "/gpu1\"", "/hdd1\""} {
			if strings.Contains(body, leak) {
				t.Errorf("red's %s shows %s", coll, leak)
			}
		}
	}
	// $expand must not reach through either.
	if body := string(s.must(http.StatusOK, "GET", "/redfish/v1/Systems?$expand=.", nil, red).body); strings.Contains(body, sys) {
		t.Errorf("red's expanded Systems shows %s", sys)
	}
	// Blue sees its system; its ReadOnly account too, but cannot change it.
	s.must(http.StatusOK, "GET", "/redfish/v1/Systems/"+sys, nil, blue)
	s.must(http.StatusOK, "GET", "/redfish/v1/Systems/"+sys, nil, blueRO)
	s.must(http.StatusForbidden, "DELETE", "/redfish/v1/Systems/"+sys, nil, blueRO)

	// Compose with another tenant's block, decompose or change another
	// tenant's system: refused.
	s.must(http.StatusConflict, "POST", "/redfish/v1/Systems", specificBody("host3", "gpu1"), red)
	s.must(http.StatusNotFound, "DELETE", "/redfish/v1/Systems/"+sys, nil, red)
	s.must(http.StatusNotFound, "PATCH", "/redfish/v1/Systems/"+sys, map[string]any{"Links": map[string]any{"ResourceBlocks": []any{blockRef("host1")}}}, red)
	s.must(http.StatusNotFound, "POST", "/redfish/v1/Systems/"+sys+"/Actions/ComputerSystem.RemoveResourceBlock",
		map[string]any{"ResourceBlock": blockRef("gpu1")}, red)
	s.must(http.StatusNotFound, "DELETE", "/redfish/v1/Fabrics/falcon1/Connections/"+sys, nil, red)
	s.must(http.StatusNotFound, "POST", "/redfish/v1/CompositionService/Actions/CompositionService.Compose", map[string]any{
		"RequestFormat": "Manifest", "RequestType": "Apply",
		"Manifest": map[string]any{"Stanzas": []any{map[string]any{"StanzaType": "DecomposeSystem", "StanzaId": "x",
			"Request": map[string]any{"@odata.id": "/redfish/v1/Systems/" + sys}}}}}, red)
	// A tenant cannot create accounts, change its own role, or see others.
	s.must(http.StatusForbidden, "POST", "/redfish/v1/AccountService/Accounts", map[string]any{"UserName": "x", "Password": "xxxxxxxx1", "RoleId": "Administrator"}, red)
	s.must(http.StatusForbidden, "PATCH", "/redfish/v1/AccountService/Accounts/mallory", map[string]any{"RoleId": "Administrator"}, red)
	s.must(http.StatusNotFound, "GET", "/redfish/v1/AccountService/Accounts/alice", nil, red)
	s.must(http.StatusNotFound, "GET", "/redfish/v1/AccountService/Oem/Rackpool/Tenants/blue", nil, red)
	if after := s.snapshot(); !slices.Equal(before, after) {
		t.Fatalf("refused requests changed state\nbefore %v\nafter  %v", before, after)
	}
	for _, target := range []string{"/redfish/v1/Systems/" + sys, "/redfish/v1/AccountService/Accounts"} {
		if !s.auditHas("mallory", "", target) {
			t.Errorf("no audit entry of mallory on %s", target)
		}
	}
	// Even the reads are audited: each was a cross-tenant attempt.
	for _, target := range []string{"/redfish/v1/Systems/" + sys, "/redfish/v1/CompositionService/ResourceBlocks/gpu1",
		"/redfish/v1/Systems/host1", "/redfish/v1/AccountService/Accounts/alice"} {
		if !s.auditHas("mallory", store.AuditDenied, target) {
			t.Errorf("cross-tenant read of %s not audited as denied", target)
		}
	}
	if !s.auditHas("mallory", store.AuditDenied, "/redfish/v1/AccountService/Accounts") {
		t.Error("denied account creation not audited as denied")
	}
	if !s.auditHas("alice", store.AuditSuccess, "/redfish/v1/Systems") {
		t.Error("blue's compose not audited")
	}
	// Red can still use the free pool.
	s.must(http.StatusCreated, "POST", "/redfish/v1/Systems", specificBody("host3", "gpu2"), red)
}

func TestStealReservation(t *testing.T) {
	s := newService(t)
	blue, red, _ := s.tenants()
	r := s.must(http.StatusOK, "POST", "/redfish/v1/CompositionService/Actions/CompositionService.Compose", manifestBody("PreviewReserve",
		stanzaBody("a", specificBody("host1", "gpu1"))), blue)
	res := r.json(t)["ReservationId"].(string)
	if res == "" {
		t.Fatal("no ReservationId")
	}
	// Red neither sees it nor applies nor deletes it, and cannot take its block.
	s.must(http.StatusNotFound, "GET", "/redfish/v1/CompositionService/CompositionReservations/"+res, nil, red)
	s.must(http.StatusNotFound, "POST", "/redfish/v1/CompositionService/Actions/CompositionService.Compose",
		map[string]any{"RequestFormat": "Manifest", "RequestType": "Apply", "ReservationId": res}, red)
	s.must(http.StatusNotFound, "DELETE", "/redfish/v1/CompositionService/CompositionReservations/"+res, nil, red)
	s.must(http.StatusConflict, "POST", "/redfish/v1/Systems", specificBody("host3", "gpu1"), red)
	if !s.auditHas("mallory", store.AuditDenied, "/redfish/v1/CompositionService/CompositionReservations/"+res) {
		t.Error("the attempt to read blue's reservation is not audited")
	}
	if !s.auditHas("mallory", store.AuditFailure, "/redfish/v1/CompositionService/Actions/CompositionService.Compose") {
		t.Error("the attempt to apply blue's reservation is not audited")
	}
	// Blue applies it.
	r = s.must(http.StatusOK, "POST", "/redfish/v1/CompositionService/Actions/CompositionService.Compose",
		map[string]any{"RequestFormat": "Manifest", "RequestType": "Apply", "ReservationId": res}, blue)
	if !strings.Contains(string(r.body), "/redfish/v1/CompositionService/ResourceBlocks/gpu1") {
		t.Errorf("applied reservation does not hold gpu1: %s", r.body)
	}
}

func TestExpiredSessionReplay(t *testing.T) {
	s := newService(t)
	_, red, _ := s.tenants()
	_ = red
	r := s.must(http.StatusCreated, "POST", "/redfish/v1/SessionService/Sessions", map[string]any{"UserName": "mallory", "Password": tenantPass}, cred{})
	tok := r.header.Get("X-Auth-Token")
	s.must(http.StatusOK, "GET", "/redfish/v1/Systems", nil, cred{token: tok})
	s.authClk.Advance(idle + time.Second)
	s.must(http.StatusUnauthorized, "GET", "/redfish/v1/Systems", nil, cred{token: tok})
	s.must(http.StatusUnauthorized, "POST", "/redfish/v1/Systems", specificBody("host1", "gpu1"), cred{token: tok})
	if len(s.systemIDs()) != 0 {
		t.Fatal("expired session composed")
	}
	if !s.auditHas("", store.AuditDenied, "/redfish/v1/Systems") {
		t.Error("replay of an expired session not audited")
	}
	// Logging out ends a session at once; deleting the account ends all.
	r = s.must(http.StatusCreated, "POST", "/redfish/v1/SessionService/Sessions", map[string]any{"UserName": "mallory", "Password": tenantPass}, cred{})
	tok = r.header.Get("X-Auth-Token")
	s.must(http.StatusNoContent, "DELETE", "/redfish/v1/AccountService/Accounts/mallory", nil, admin)
	s.must(http.StatusUnauthorized, "GET", "/redfish/v1/Systems", nil, cred{token: tok})
}

func TestBruteForceLockout(t *testing.T) {
	s := newService(t)
	s.tenants()
	s.must(http.StatusOK, "PATCH", "/redfish/v1/AccountService", map[string]any{
		"AccountLockoutThreshold": 3, "AccountLockoutDuration": 60, "AccountLockoutCounterResetAfter": 60}, admin)
	for i := 0; i < 3; i++ {
		s.must(http.StatusUnauthorized, "POST", "/redfish/v1/SessionService/Sessions", map[string]any{"UserName": "alice", "Password": "guess" + string(rune('a'+i))}, cred{})
	}
	// Locked: even the right password is refused, by Basic auth too.
	s.must(http.StatusUnauthorized, "POST", "/redfish/v1/SessionService/Sessions", map[string]any{"UserName": "alice", "Password": tenantPass}, cred{})
	s.must(http.StatusUnauthorized, "GET", "/redfish/v1/Systems", nil, basicAs("alice", tenantPass))
	if !s.get("/redfish/v1/AccountService/Accounts/alice")["Locked"].(bool) {
		t.Error("account not shown Locked")
	}
	// Other accounts are unaffected; after the duration alice is back.
	s.must(http.StatusOK, "GET", "/redfish/v1/Systems", nil, basicAs("bob", tenantPass))
	s.authClk.Advance(61 * time.Second)
	s.must(http.StatusOK, "GET", "/redfish/v1/Systems", nil, basicAs("alice", tenantPass))

	// Locked again; an administrator's PATCH Locked false ends it at once.
	// Nobody locks an account by PATCH, and alice cannot unlock herself.
	for i := 0; i < 3; i++ {
		s.must(http.StatusUnauthorized, "POST", "/redfish/v1/SessionService/Sessions", map[string]any{"UserName": "alice", "Password": "guess" + string(rune('a'+i))}, cred{})
	}
	s.must(http.StatusUnauthorized, "GET", "/redfish/v1/Systems", nil, basicAs("alice", tenantPass))
	s.must(http.StatusBadRequest, "PATCH", "/redfish/v1/AccountService/Accounts/bob", map[string]any{"Locked": true}, admin)
	s.must(http.StatusForbidden, "PATCH", "/redfish/v1/AccountService/Accounts/bob", map[string]any{"Locked": false}, basicAs("bob", tenantPass))
	s.must(http.StatusNotFound, "PATCH", "/redfish/v1/AccountService/Accounts/nobody", map[string]any{"Locked": false}, admin)
	if got := s.must(http.StatusOK, "PATCH", "/redfish/v1/AccountService/Accounts/alice", map[string]any{"Locked": false}, admin).json(t); got["Locked"] != false {
		t.Errorf("after unlock: Locked %v", got["Locked"])
	}
	s.must(http.StatusOK, "GET", "/redfish/v1/Systems", nil, basicAs("alice", tenantPass))
	if !s.auditHas(tenancy.AdminUser, "success", "/redfish/v1/AccountService/Accounts/alice") {
		t.Error("the unlock is not audited")
	}
	// A rename is answered as the read-only property it is here.
	if r := s.do("PATCH", "/redfish/v1/AccountService/Accounts/alice", map[string]any{"UserName": "alicia"}, admin); r.status != http.StatusBadRequest ||
		!strings.HasSuffix(r.errorCode(t), "PropertyNotWritable") {
		t.Errorf("rename: %d %s", r.status, r.body)
	}
	entries, err := s.store.Audit(context.Background(), store.AuditQuery{User: "alice", Outcome: store.AuditDenied})
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) < 4 {
		t.Errorf("%d denied entries for alice, want at least 4", len(entries))
	}
	// The passwords tried are nowhere in the audit log.
	all, _ := s.store.Audit(context.Background(), store.AuditQuery{})
	for _, e := range all {
		if strings.Contains(e.Detail, "guess") || strings.Contains(e.Detail, tenantPass) || strings.Contains(e.Detail, password) {
			t.Fatalf("audit entry %d holds a password: %+v", e.ID, e)
		}
	}
}

func TestQuotas(t *testing.T) {
	s := newService(t)
	blue, _, _ := s.tenants()
	s.must(http.StatusOK, "PATCH", "/redfish/v1/AccountService/Oem/Rackpool/Tenants/blue", map[string]any{"Quotas": map[string]int{"gpu": 1}}, admin)
	s.must(http.StatusCreated, "POST", "/redfish/v1/Systems", specificBody("host1", "gpu1"), blue)
	r := s.must(http.StatusConflict, "POST", "/redfish/v1/Systems", specificBody("host3", "gpu2"), blue)
	if code := r.errorCode(t); code != "Base.1.22.ResourceExhaustion" {
		t.Errorf("over quota: %s", code)
	}
	body := s.get("/redfish/v1/AccountService/Oem/Rackpool/Tenants/blue")
	if u := dig(t, body, "Usage", "gpu"); u != float64(1) {
		t.Errorf("usage gpu = %v", u)
	}
	s.must(http.StatusBadRequest, "PATCH", "/redfish/v1/AccountService/Oem/Rackpool/Tenants/blue", map[string]any{"Quotas": map[string]int{"unicorn": 1}}, admin)
}

func TestAccountsValidation(t *testing.T) {
	s := newService(t)
	for _, tc := range []struct {
		body map[string]any
		want int
	}{
		{map[string]any{"UserName": "x", "Password": "short", "RoleId": "Operator"}, http.StatusBadRequest},
		{map[string]any{"UserName": "x", "Password": "long-enough", "RoleId": "God"}, http.StatusBadRequest},
		{map[string]any{"UserName": "bad name", "Password": "long-enough", "RoleId": "Operator"}, http.StatusBadRequest},
		{map[string]any{"UserName": "x", "Password": "long-enough", "RoleId": "Operator", "Oem": map[string]any{"Rackpool": map[string]any{"Tenant": "nope"}}}, http.StatusBadRequest},
		{map[string]any{"UserName": tenancy.AdminUser, "Password": "long-enough", "RoleId": "Operator"}, http.StatusConflict},
		{map[string]any{"Password": "long-enough", "RoleId": "Operator"}, http.StatusBadRequest},
	} {
		s.must(tc.want, "POST", "/redfish/v1/AccountService/Accounts", tc.body, admin)
	}
	s.must(http.StatusMethodNotAllowed, "DELETE", "/redfish/v1/AccountService/Accounts/"+tenancy.AdminUser, nil, admin)
	s.must(http.StatusBadRequest, "PATCH", "/redfish/v1/AccountService/Accounts/"+tenancy.AdminUser, map[string]any{"RoleId": "ReadOnly"}, admin)
	// A user may change its own password, and the old one stops working.
	s.must(http.StatusCreated, "POST", "/redfish/v1/AccountService/Accounts", map[string]any{"UserName": "carol", "Password": "first-pass-1", "RoleId": "ReadOnly"}, admin)
	s.must(http.StatusOK, "PATCH", "/redfish/v1/AccountService/Accounts/carol", map[string]any{"Password": "second-pass-2"}, basicAs("carol", "first-pass-1"))
	s.must(http.StatusUnauthorized, "GET", "/redfish/v1/Systems", nil, basicAs("carol", "first-pass-1"))
	s.must(http.StatusOK, "GET", "/redfish/v1/Systems", nil, basicAs("carol", "second-pass-2"))
	// Account bodies never carry the hash.
	if body := string(s.must(http.StatusOK, "GET", "/redfish/v1/AccountService/Accounts/carol", nil, admin).body); strings.Contains(body, "argon2") {
		t.Fatalf("account body shows the hash: %s", body)
	}
}

// TestCredentialsOnlyOverTLS serves the same handler over plain HTTP (as
// serve --insecure-http does): Basic credentials, session creation and
// session tokens are refused with 403 and a resolution pointing at HTTPS,
// without checking the password (no failed login counts towards a
// lockout), so no password can be set over plain HTTP either; the public
// service root answers.
func TestCredentialsOnlyOverTLS(t *testing.T) {
	s := newService(t)
	s.must(http.StatusOK, "PATCH", "/redfish/v1/AccountService", map[string]any{"AccountLockoutThreshold": 2, "AccountLockoutDuration": 60}, admin)
	plain := httptest.NewServer(s.handler)
	defer plain.Close()
	send := func(method, path, body string, hdr map[string]string) (int, map[string]any) {
		t.Helper()
		req, err := http.NewRequest(method, plain.URL+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var out map[string]any
		_ = json.NewDecoder(resp.Body).Decode(&out)
		return resp.StatusCode, out
	}
	basic := map[string]string{"Authorization": "Basic " + base64.StdEncoding.EncodeToString([]byte(tenancy.AdminUser+":"+password))}
	wrong := map[string]string{"Authorization": "Basic " + base64.StdEncoding.EncodeToString([]byte(tenancy.AdminUser+":nope"))}
	for range 3 {
		if code, _ := send("GET", "/redfish/v1/Systems", "", wrong); code != http.StatusForbidden {
			t.Fatalf("wrong Basic password over plain HTTP: %d, want 403", code)
		}
	}
	code, body := send("GET", "/redfish/v1/Systems", "", basic)
	if code != http.StatusForbidden || !strings.Contains(fmt.Sprint(body), "HTTPS") || !strings.Contains(fmt.Sprint(body), "AccessDenied") {
		t.Errorf("Basic over plain HTTP: %d %v, want 403 AccessDenied naming HTTPS", code, body)
	}
	if code, body := send("POST", "/redfish/v1/SessionService/Sessions", `{"UserName":"Administrator","Password":"`+password+`"}`, nil); code != http.StatusForbidden {
		t.Errorf("session creation over plain HTTP: %d %v, want 403", code, body)
	}
	if code, _ := send("GET", "/redfish/v1", "", nil); code != http.StatusOK {
		t.Errorf("service root over plain HTTP: %d", code)
	}
	// The wrong passwords over HTTP were never tried: no lockout.
	s.must(http.StatusOK, "GET", "/redfish/v1/Systems", nil, admin)
	if s.get("/redfish/v1/AccountService/Accounts/" + tenancy.AdminUser)["Locked"].(bool) {
		t.Error("Administrator locked by passwords sent over plain HTTP")
	}
	// A session made over HTTPS (sessions survive restarts, so one may
	// outlive a switch to --insecure-http) does not work in clear text,
	// and in particular cannot set a password there.
	r := s.must(http.StatusCreated, "POST", "/redfish/v1/SessionService/Sessions", map[string]any{"UserName": tenancy.AdminUser, "Password": password}, cred{})
	tok := map[string]string{"X-Auth-Token": r.header.Get("X-Auth-Token"), "Content-Type": "application/json"}
	if code, _ := send("GET", "/redfish/v1/Systems", "", tok); code != http.StatusForbidden {
		t.Errorf("session token over plain HTTP: %d, want 403", code)
	}
	if code, _ := send("PATCH", "/redfish/v1/AccountService/Accounts/"+tenancy.AdminUser, `{"Password":"new-clear-text-pw-1"}`, tok); code != http.StatusForbidden {
		t.Errorf("password change over plain HTTP with a token: %d, want 403", code)
	}
	if code, _ := send("POST", "/redfish/v1/AccountService/Accounts", `{"UserName":"eve","Password":"clear-text-pw-123","RoleId":"Administrator"}`, tok); code != http.StatusForbidden {
		t.Errorf("account creation over plain HTTP with a token: %d, want 403", code)
	}
	s.must(http.StatusOK, "GET", "/redfish/v1/Systems", nil, admin) // the old password still works
	s.must(http.StatusNotFound, "GET", "/redfish/v1/AccountService/Accounts/eve", nil, admin)
}

// TestPropertyDuplicate: a body that repeats a member name is refused with
// PropertyDuplicate naming it, and changes nothing: an account whose
// RoleId says ReadOnly and then Administrator is not created.
func TestPropertyDuplicate(t *testing.T) {
	s := newService(t)
	for _, c := range []struct{ path, body, prop string }{
		{"/redfish/v1/AccountService/Accounts", `{"UserName": "u", "Password": "a-Password-1", "RoleId": "ReadOnly", "RoleId": "Administrator"}`, "/RoleId"},
		{"/redfish/v1/Systems", `{"Name": "x", "Links": {"ResourceBlocks": [{"@odata.id": "/redfish/v1/CompositionService/ResourceBlocks/host1", "@odata.id": "/redfish/v1/CompositionService/ResourceBlocks/host2"}]}}`, "/Links/ResourceBlocks/0/@odata.id"},
	} {
		r := s.do("POST", c.path, c.body, admin)
		if r.status != http.StatusBadRequest || r.errorCode(t) != "Base.1.22.PropertyDuplicate" || !strings.Contains(string(r.body), c.prop) {
			t.Errorf("POST %s with a duplicate: %d %s", c.path, r.status, r.body)
		}
	}
	if r := s.do("GET", "/redfish/v1/AccountService/Accounts/u", nil, admin); r.status != http.StatusNotFound {
		t.Errorf("the account of the refused request: %d", r.status)
	}
	if ids := s.systemIDs(); len(ids) != 0 {
		t.Errorf("systems after the refused compose: %v", ids)
	}
}

// TestSessionLimitExceeded: beyond tenancy.DefaultMaxSessions live
// sessions of one account, a login answers 503 SessionLimitExceeded and
// opens nothing.
func TestSessionLimitExceeded(t *testing.T) {
	s := newService(t)
	login := map[string]any{"UserName": tenancy.AdminUser, "Password": password}
	for range tenancy.DefaultMaxSessions {
		s.must(http.StatusCreated, "POST", "/redfish/v1/SessionService/Sessions", login, cred{})
	}
	r := s.do("POST", "/redfish/v1/SessionService/Sessions", login, cred{})
	if r.status != http.StatusServiceUnavailable || r.errorCode(t) != "Base.1.22.SessionLimitExceeded" || r.header.Get("X-Auth-Token") != "" {
		t.Errorf("a login beyond the limit: %d %s", r.status, r.body)
	}
	if n := len(list(t, s.get("/redfish/v1/SessionService/Sessions")["Members"])); n != tenancy.DefaultMaxSessions {
		t.Errorf("%d sessions listed, want %d", n, tenancy.DefaultMaxSessions)
	}
}

// TestDeepBodies: bodies nesting far deeper than jsonlimit.MaxDepth, one
// sent anonymously to the login and one to compose, are malformed, each
// answered while costing the service little memory, and change nothing.
// (They cost seconds and gigabytes when every level built its own path.)
func TestDeepBodies(t *testing.T) {
	s := newService(t)
	nest := func(open, close string, n int) string {
		return strings.Repeat(open, n) + "1" + strings.Repeat(close, n)
	}
	for _, c := range []struct {
		path, body string
		who        cred
	}{
		{"/redfish/v1/SessionService/Sessions", nest(`{"a":`, "}", 50000), cred{}},
		{"/redfish/v1/Systems", `{"Name":` + nest("[", "]", 200000) + "}", admin},
	} {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		r := s.do("POST", c.path, c.body, c.who)
		runtime.ReadMemStats(&after)
		if r.status != http.StatusBadRequest || r.errorCode(t) != "Base.1.22.MalformedJSON" || !strings.Contains(string(r.body), "deeper than 64 levels") {
			t.Errorf("POST %s with %d bytes nested: %d %.300s", c.path, len(c.body), r.status, r.body)
		}
		if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 64<<20 {
			t.Errorf("POST %s with %d bytes nested: %d MiB allocated", c.path, len(c.body), alloc>>20)
		}
	}
	if ids := s.systemIDs(); len(ids) != 0 {
		t.Errorf("systems after the refused compose: %v", ids)
	}
}
