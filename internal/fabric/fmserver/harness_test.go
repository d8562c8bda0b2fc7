package fmserver

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"time"

	"rackpool/examples"
	"rackpool/internal/clock"
	"rackpool/internal/fabric"
	"rackpool/internal/topology"
)

const (
	testUser = "Administrator"
	testPass = "fm-test-password"
)

func rackTopology(t testing.TB) *topology.Topology {
	t.Helper()
	return topology.LoadDefault()
}

func cxlTopology(t testing.TB) *topology.Topology {
	t.Helper()
	top, err := topology.Parse("cxl-rack.yaml", examples.CXLRack)
	if err != nil {
		t.Fatal(err)
	}
	return top
}

// fm is a server under test with a logged-in client.
type fm struct {
	t     testing.TB
	srv   *Server
	http  *httptest.Server
	token string
}

// newFM serves fabricID of top with an instant clock unless o sets one.
func newFM(t testing.TB, top *topology.Topology, fabricID string, o Options) *fm {
	t.Helper()
	o.Topology, o.Fabric, o.User, o.Password = top, fabricID, testUser, testPass
	if o.Clock == nil {
		o.Clock = clock.Instant{}
	}
	s, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	h := httptest.NewServer(s.Handler())
	t.Cleanup(h.Close)
	f := &fm{t: t, srv: s, http: h}
	f.login()
	return f
}

func (f *fm) login() {
	f.t.Helper()
	res := f.raw("POST", "/redfish/v1/SessionService/Sessions", `{"UserName":"`+testUser+`","Password":"`+testPass+`"}`, nil)
	if res.status != http.StatusCreated || res.header.Get("X-Auth-Token") == "" || res.header.Get("Location") == "" {
		f.t.Fatalf("login: %d %v %s", res.status, res.header, res.body)
	}
	f.token = res.header.Get("X-Auth-Token")
}

type result struct {
	status int
	header http.Header
	body   []byte
	json   map[string]any
}

// raw sends a request; hdr adds headers (X-Auth-Token is added when the
// client has one and hdr does not override Authorization).
func (f *fm) raw(method, path, body string, hdr map[string]string) result {
	f.t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, f.http.URL+path, rd)
	if err != nil {
		f.t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if f.token != "" {
		req.Header.Set("X-Auth-Token", f.token)
	}
	for k, v := range hdr {
		if v == "" {
			req.Header.Del(k)
		} else {
			req.Header.Set(k, v)
		}
	}
	resp, err := f.http.Client().Do(req)
	if err != nil {
		return result{status: -1, body: []byte(err.Error())}
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	r := result{status: resp.StatusCode, header: resp.Header, body: data}
	if len(bytes.TrimSpace(data)) > 0 {
		_ = json.Unmarshal(data, &r.json)
	}
	return r
}

func (f *fm) get(path string) result { return f.raw("GET", path, "", nil) }

// must fails the test unless res has status want.
func (f *fm) must(res result, want int, what string) result {
	f.t.Helper()
	if res.status != want {
		f.t.Fatalf("%s: status %d, want %d: %s", what, res.status, want, res.body)
	}
	return res
}

// settle follows a 202 to its task monitor's final answer.
func (f *fm) settle(res result) result {
	f.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for res.status == http.StatusAccepted && time.Now().Before(deadline) {
		loc := res.header.Get("Location")
		if !strings.HasPrefix(loc, "/redfish/v1/TaskService/TaskMonitors/") {
			f.t.Fatalf("202 without a task monitor: %v", res.header)
		}
		time.Sleep(time.Millisecond)
		res = f.get(loc)
	}
	return res
}

// messageIDs lists the MessageIds of an error body.
func messageIDs(res result) []string {
	var out []string
	e, _ := res.json["error"].(map[string]any)
	info, _ := e["@Message.ExtendedInfo"].([]any)
	for _, m := range info {
		if mm, ok := m.(map[string]any); ok {
			out = append(out, mm["MessageId"].(string))
		}
	}
	return out
}

func (f *fm) discover() fabric.State {
	f.t.Helper()
	st, err := f.srv.Driver().Discover(context.Background())
	if err != nil {
		f.t.Fatal(err)
	}
	return st
}

// unchanged fails the test when the fabric's attachments differ from
// before.
func (f *fm) unchanged(before fabric.State, what string) {
	f.t.Helper()
	if after := f.discover(); !reflect.DeepEqual(before.Attachments, after.Attachments) {
		f.t.Fatalf("%s changed the fabric: %v -> %v", what, before.Attachments, after.Attachments)
	}
}

func ep(fabricID, id string) string {
	return `{"@odata.id":"/redfish/v1/Fabrics/` + fabricID + `/Endpoints/` + id + `"}`
}

func endpoints(fabricID string, ids ...string) string {
	var parts []string
	for _, id := range ids {
		parts = append(parts, ep(fabricID, id))
	}
	return `{"Links":{"Endpoints":[` + strings.Join(parts, ",") + `]}}`
}

func b64(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }
