package e2e

import (
	"context"
	"encoding/json"
	"regexp"
	"strings"
	"testing"

	"rackpool/api"
)

// TestBadInputChangesNothing sends what a careless or hostile client would
// and checks each gets a clear Redfish error and changes nothing.
func TestBadInputChangesNothing(t *testing.T) {
	skipShort(t)
	srv := startDefault(t, "--fabric-time", "instant")
	c := srv.client()
	sys, err := c.Compose(context.Background(), api.ComposeRequest{Host: "host1", Blocks: []string{"gpu1"}})
	if err != nil {
		t.Fatal(err)
	}
	before := take(t, c)
	big := `{"Name": "` + strings.Repeat("x", 2<<20) + `"}`
	cases := []struct {
		name, method, path, body string
		auth                     bool
		status                   int
		messageID                string
	}{
		{"malformed JSON", "POST", "/redfish/v1/Systems", `{"Links": `, true, 400, "Base.1.22.MalformedJSON"},
		{"not an object", "POST", "/redfish/v1/Systems", `[1,2]`, true, 400, "Base.1.22.MalformedJSON"},
		{"wrong type", "POST", "/redfish/v1/Systems", `{"Name": 7}`, true, 400, "Base.1.22.PropertyValueTypeError"},
		{"unknown property", "POST", "/redfish/v1/Systems", `{"Bogus": true}`, true, 400, "Base.1.22.PropertyUnknown"},
		{"empty request", "POST", "/redfish/v1/Systems", `{}`, true, 400, "Base.1.22.PropertyMissing"},
		{"unknown block", "POST", "/redfish/v1/Systems", `{"Links": {"ResourceBlocks": [{"@odata.id": "/redfish/v1/CompositionService/ResourceBlocks/gpu99"}]}}`, true, 400, "Composition.1.1.ResourceBlockNotFound"},
		{"bad link", "POST", "/redfish/v1/Systems", `{"Links": {"ResourceBlocks": [{"@odata.id": "/redfish/v1/Systems/x"}]}}`, true, 400, "Base.1.22.PropertyValueIncorrect"},
		{"block in use", "POST", "/redfish/v1/Systems", `{"Links": {"ResourceBlocks": [{"@odata.id": "/redfish/v1/CompositionService/ResourceBlocks/gpu1"}]}}`, true, 409, "Composition.1.1.ResourceBlockInUse"},
		{"beyond capacity", "POST", "/redfish/v1/Systems", `{"Oem": {"Rackpool": {"Needs": [{"Kind": "gpu", "Count": 9}]}}}`, true, 400, "Composition.1.1.NoResourceMatch"},
		{"breaks drawer mode", "POST", "/redfish/v1/Systems", `{"Oem": {"Rackpool": {"Host": "host4"}}, "Links": {"ResourceBlocks": [{"@odata.id": "/redfish/v1/CompositionService/ResourceBlocks/gpu2"}]}}`, true, 400, "Composition.1.1.NoResourceMatch"},
		{"unknown host", "POST", "/redfish/v1/Systems", `{"Oem": {"Rackpool": {"Host": "host9"}}}`, true, 400, "Base.1.22.GeneralError"},
		{"unknown kind", "POST", "/redfish/v1/Systems", `{"Oem": {"Rackpool": {"Needs": [{"Kind": "tpu", "Count": 1}]}}}`, true, 400, "Base.1.22.GeneralError"},
		{"negative count", "POST", "/redfish/v1/Systems", `{"Oem": {"Rackpool": {"Needs": [{"Kind": "gpu", "Count": -1}]}}}`, true, 400, "Base.1.22.GeneralError"},
		{"oversized body", "POST", "/redfish/v1/Systems", big, true, 413, "Base.1.22.PayloadTooLarge"},
		{"unauthenticated compose", "POST", "/redfish/v1/Systems", `{"Oem": {"Rackpool": {"Host": "host2"}}}`, false, 401, "Base.1.22.NoValidSession"},
		{"unauthenticated read", "GET", "/redfish/v1/Systems", ``, false, 401, "Base.1.22.NoValidSession"},
		{"unknown system", "DELETE", "/redfish/v1/Systems/sys-nope", ``, true, 404, "Base.1.22.ResourceNotFound"},
		{"delete a host", "DELETE", "/redfish/v1/Systems/host2", ``, true, 405, "Base.1.22.ResourceCannotBeDeleted"},
		{"patch unknown block", "PATCH", "/redfish/v1/Systems/" + sys.ID, `{"Links": {"ResourceBlocks": [{"@odata.id": "/redfish/v1/CompositionService/ResourceBlocks/nope"}]}}`, true, 400, "Composition.1.1.ResourceBlockNotFound"},
		{"patch removes compute", "PATCH", "/redfish/v1/Systems/" + sys.ID, `{"Links": {"ResourceBlocks": [{"@odata.id": "/redfish/v1/CompositionService/ResourceBlocks/gpu1"}]}}`, true, 400, "Base.1.22.GeneralError"},
		{"unknown URI", "GET", "/redfish/v1/Nothing", ``, true, 404, "Base.1.22.ResourceMissingAtURI"},
		{"wrong method", "PUT", "/redfish/v1/Systems", `{}`, true, 405, "Base.1.22.OperationNotAllowed"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			status, body := srv.request(tc.method, tc.path, tc.body, tc.auth)
			if status != tc.status {
				t.Fatalf("status %d, want %d: %s", status, tc.status, body)
			}
			var e struct {
				Error struct {
					Code string `json:"code"`
					Info []struct {
						MessageID string `json:"MessageId"`
						Message   string
					} `json:"@Message.ExtendedInfo"`
				} `json:"error"`
			}
			if err := json.Unmarshal([]byte(body), &e); err != nil {
				t.Fatalf("error body is not JSON: %v: %s", err, body)
			}
			if e.Error.Code != tc.messageID || len(e.Error.Info) == 0 || e.Error.Info[0].Message == "" {
				t.Fatalf("error %q, want %q with a message: %s", e.Error.Code, tc.messageID, body)
			}
		})
	}
	after := take(t, c)
	if len(after.systems) != len(before.systems) {
		t.Fatalf("systems changed: %v -> %v", before.systems, after.systems)
	}
	for b, st := range before.states {
		if after.states[b] != st {
			t.Errorf("block %s changed %s -> %s", b, st, after.states[b])
		}
	}
}

// TestPublicRoutes: the service root, $metadata and odata need no login.
func TestPublicRoutes(t *testing.T) {
	skipShort(t)
	srv := startDefault(t, "--fabric-time", "instant")
	for _, p := range []string{"/redfish", "/redfish/v1", "/redfish/v1/", "/redfish/v1/$metadata", "/redfish/v1/odata"} {
		if status, body := srv.request("GET", p, "", false); status != 200 {
			t.Errorf("GET %s unauthenticated: %d %s", p, status, body)
		}
	}
	// A session token works in place of Basic credentials and dies on logout.
	status, _ := srv.request("POST", "/redfish/v1/SessionService/Sessions", `{"UserName": "Administrator", "Password": "wrong"}`, false)
	if status != 401 {
		t.Fatalf("login with a wrong password: %d", status)
	}
}

// TestGeneratedPassword: without RACKPOOL_ADMIN_PASSWORD the first start
// prints a generated password once; it works, and a restart does not print
// it again.
func TestGeneratedPassword(t *testing.T) {
	skipShort(t)
	data := t.TempDir()
	srv := start(t, data, []string{"RACKPOOL_ADMIN_PASSWORD="}, "--fabric-time", "instant")
	m := regexp.MustCompile(`Generated Administrator password[^:]*: (\S+)`).FindStringSubmatch(srv.stderr.String())
	if m == nil {
		t.Fatalf("no generated password printed:\n%s", srv.stderr)
	}
	c := srv.clientAs("Administrator", m[1])
	if _, err := c.Systems(context.Background()); err != nil {
		t.Fatalf("generated password does not work: %v", err)
	}
	if _, err := srv.clientAs("Administrator", "guess").Systems(context.Background()); err == nil {
		t.Fatal("a wrong password was accepted")
	}
	srv.kill()
	srv = start(t, data, []string{"RACKPOOL_ADMIN_PASSWORD="}, "--fabric-time", "instant")
	if strings.Contains(srv.stderr.String(), "Generated Administrator password") {
		t.Fatalf("password generated again on restart:\n%s", srv.stderr)
	}
	if _, err := srv.clientAs("Administrator", m[1]).Systems(context.Background()); err != nil {
		t.Fatalf("password lost across restart: %v", err)
	}
	if strings.Contains(srv.stderr.String(), m[1]) {
		t.Fatal("the password appears in the second start's log")
	}
}
