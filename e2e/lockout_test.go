package e2e

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"strings"
	"testing"

	"rackpool/api"
)

// clientFrom is an HTTPS client of s whose connections come from the
// loopback address ip (127.0.0.2, 127.0.0.3: other hosts to the server).
func clientFrom(t *testing.T, s *server, ip string) *http.Client {
	t.Helper()
	cfg, err := api.TLSConfig(s.ca)
	if err != nil {
		t.Fatal(err)
	}
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}}
	return &http.Client{Transport: &http.Transport{TLSClientConfig: cfg, DialContext: d.DialContext}}
}

// loginFrom opens a session as Administrator with password from c and
// returns the status.
func loginFrom(t *testing.T, s *server, c *http.Client, pw string) int {
	t.Helper()
	body, _ := json.Marshal(map[string]string{"UserName": "Administrator", "Password": pw})
	res, err := c.Post(s.url+"/redfish/v1/SessionService/Sessions", "application/json", strings.NewReader(string(body)))
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	return res.StatusCode
}

// TestLockoutPerSource: an attacker (127.0.0.2) that sends five wrong
// passwords for the Administrator is locked out, even with the right
// password; the Administrator logging in from another address (127.0.0.3)
// is not, with a session or with Basic.
func TestLockoutPerSource(t *testing.T) {
	skipShort(t)
	s := start(t, t.TempDir(), []string{"RACKPOOL_ADMIN_PASSWORD=" + password}, "--fabric-time", "instant")
	attacker, admin := clientFrom(t, s, "127.0.0.2"), clientFrom(t, s, "127.0.0.3")
	for i := range 5 {
		if got := loginFrom(t, s, attacker, "not-the-password"); got != http.StatusUnauthorized {
			t.Fatalf("wrong password %d: %d", i+1, got)
		}
	}
	if got := loginFrom(t, s, attacker, password); got != http.StatusUnauthorized {
		t.Errorf("the right password from the locked-out address: %d, want 401", got)
	}
	if got := loginFrom(t, s, admin, password); got != http.StatusCreated {
		t.Errorf("the Administrator from another address: %d, want 201", got)
	}
	req, _ := http.NewRequest(http.MethodGet, s.url+"/redfish/v1/Systems", nil)
	req.SetBasicAuth("Administrator", password)
	res, err := admin.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusOK {
		t.Errorf("Basic from another address: %d", res.StatusCode)
	}
	var a struct{ Locked bool }
	if _, err := s.client().Do(context.Background(), "GET", "/redfish/v1/AccountService/Accounts/Administrator", nil, &a); err != nil {
		t.Fatal(err)
	}
	if !a.Locked {
		t.Error("the Administrator's account does not say it is locked (for one address)")
	}
}
