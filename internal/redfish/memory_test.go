package redfish_test

import (
	"context"
	"encoding/base64"
	"net"
	"net/http"
	"strings"
	"testing"

	"rackpool/internal/memory"
)

const (
	memoryNodes  = "/redfish/v1/Oem/Rackpool/MemoryNodes"
	memoryLeases = "/redfish/v1/Oem/Rackpool/MemoryLeases"
)

// startMemnode runs a real memnode on loopback and registers it through
// the API, as `rackpool memnode` does.
func (s *service) startMemnode(capacity uint64) (addr string) {
	s.t.Helper()
	key, _ := memory.NewKey()
	srv, err := memory.NewServer(memory.ServerOptions{Node: "memnode1", Capacity: capacity, Key: key, Clock: s.fabClk})
	if err != nil {
		s.t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		s.t.Fatal(err)
	}
	go func() { _ = srv.Serve(l) }()
	s.t.Cleanup(func() { _ = srv.Close() })
	s.memnode = srv
	r := s.must(http.StatusOK, "POST", memoryNodes, map[string]any{"Device": "memnode1", "Endpoint": l.Addr().String(),
		"CapacityBytes": capacity, "Epoch": srv.Epoch()}, admin).json(s.t)
	k, err := base64.StdEncoding.DecodeString(r["TokenKey"].(string))
	if err != nil {
		s.t.Fatal(err)
	}
	srv.SetKey(k)
	return l.Addr().String()
}

func TestGetMemoryLeases(t *testing.T) {
	s := newService(t)
	blue, red, blueRO := s.tenants()
	// No node yet: a clear refusal.
	r := s.must(http.StatusConflict, "POST", memoryLeases, map[string]any{"CapacityBytes": 4096}, blue)
	if !strings.Contains(string(r.body), "no memory node is registered") {
		t.Errorf("no-node refusal: %s", r.body)
	}
	// Only an Administrator registers nodes (the answer carries the key).
	s.must(http.StatusForbidden, "POST", memoryNodes, map[string]any{"Endpoint": "127.0.0.1:1", "CapacityBytes": 4096}, blue)
	addr := s.startMemnode(16 << 20)
	node := s.must(http.StatusOK, "GET", memoryNodes+"/memnode1", nil, blue).json(t)
	if node["Endpoint"] != addr || node["Online"] != true || node["TokenKey"] != nil {
		t.Fatalf("node = %v", node)
	}
	if blocks := dig(t, node, "Links", "ResourceBlocks"); len(list(t, blocks)) != 1 {
		t.Errorf("a 16 MiB node covers %v blocks, want 1", blocks)
	}

	g := s.must(http.StatusCreated, "POST", memoryLeases, map[string]any{"CapacityBytes": 8192, "Host": "host1", "TTLSeconds": 60}, blue)
	lease := g.json(t)
	id := lease["Id"].(string)
	if g.header.Get("Location") != memoryLeasesPath(id) || lease["Endpoint"] != addr || lease["Tenant"] != "blue" ||
		lease["Owner"] != "alice" || lease["RoundTripNs"].(float64) <= 0 {
		t.Fatalf("lease = %v", lease)
	}
	tok := lease["Token"].(string)
	c, err := memory.Dial(context.Background(), addr, tok)
	if err != nil {
		t.Fatalf("the granted token: %v", err)
	}
	defer c.Close()
	if err := c.Write(context.Background(), 0, []byte("blue data")); err != nil {
		t.Fatal(err)
	}
	// GET never shows the token again.
	got := s.must(http.StatusOK, "GET", memoryLeasesPath(id), nil, blueRO).json(t)
	if got["Token"] != nil || got["State"] != "Active" {
		t.Errorf("GET lease = %v", got)
	}
	// Another tenant sees nothing of it and cannot renew or release it.
	s.must(http.StatusNotFound, "GET", memoryLeasesPath(id), nil, red)
	s.must(http.StatusNotFound, "DELETE", memoryLeasesPath(id), nil, red)
	s.must(http.StatusNotFound, "POST", memoryLeasesPath(id)+"/Actions/Oem/Rackpool.Renew", map[string]any{}, red)
	if n := len(list(t, s.must(http.StatusOK, "GET", memoryLeases, nil, red).json(t)["Members"])); n != 0 {
		t.Errorf("red lists %d leases", n)
	}
	// ReadOnly cannot lease or release.
	s.must(http.StatusForbidden, "POST", memoryLeases, map[string]any{"CapacityBytes": 4096}, blueRO)
	s.must(http.StatusForbidden, "DELETE", memoryLeasesPath(id), nil, blueRO)
	// Bad input: clear errors, nothing changes.
	for _, body := range []any{
		`{"CapacityBytes": `,
		map[string]any{},
		map[string]any{"CapacityBytes": "lots"},
		map[string]any{"CapacityBytes": -1},
		map[string]any{"CapacityBytes": 0},
		map[string]any{"CapacityBytes": 4096, "Bogus": 1},
		map[string]any{"CapacityBytes": 4096, "Rights": "rwx"},
		map[string]any{"CapacityBytes": 4096, "Rights": "a"},
		map[string]any{"CapacityBytes": 4096, "TTLSeconds": -5},
		map[string]any{"CapacityBytes": 4096, "TTLSeconds": 0},
		map[string]any{"CapacityBytes": 4096, "TTLSeconds": 1e-12},
		map[string]any{"CapacityBytes": 4096, "TTLSeconds": 1e12},
		map[string]any{"CapacityBytes": 4096, "Host": "nohost"},
		map[string]any{"CapacityBytes": 4096, "MaxLatencyNs": -1},
	} {
		if r := s.do("POST", memoryLeases, body, blue); r.status != http.StatusBadRequest {
			t.Errorf("body %v: status %d, want 400: %s", body, r.status, r.body)
		}
	}
	s.must(http.StatusConflict, "POST", memoryLeases, map[string]any{"CapacityBytes": 1 << 30}, blue)
	if n := len(list(t, s.must(http.StatusOK, "GET", memoryLeases, nil, admin).json(t)["Members"])); n != 1 {
		t.Errorf("%d leases after bad requests, want 1", n)
	}
	// Renew: a new token and expiry.
	// A zero or negative duration is refused, not read as the default.
	for _, ttl := range []float64{0, -5, 1e-12} {
		s.must(http.StatusBadRequest, "POST", memoryLeasesPath(id)+"/Actions/Oem/Rackpool.Renew", map[string]any{"TTLSeconds": ttl}, blue)
	}
	rn := s.must(http.StatusOK, "POST", memoryLeasesPath(id)+"/Actions/Oem/Rackpool.Renew", map[string]any{"TTLSeconds": 120}, blue).json(t)
	if rn["Token"] == tok || rn["Token"] == nil {
		t.Errorf("renew gave token %v", rn["Token"])
	}
	if err := c.Renew(context.Background(), rn["Token"].(string)); err != nil {
		t.Fatalf("re-authenticating with the renewed token: %v", err)
	}
	// Release: the memory is zeroed and the token refused.
	s.must(http.StatusNoContent, "DELETE", memoryLeasesPath(id), nil, blue)
	s.must(http.StatusNotFound, "GET", memoryLeasesPath(id), nil, admin)
	if _, err := memory.Dial(context.Background(), addr, tok); err == nil {
		t.Error("a released lease's token still authenticates")
	}
	if !s.auditHas("alice", "success", memoryLeases) {
		t.Error("GetMemory not audited")
	}
	if !s.auditHas("mallory", "failure", memoryLeasesPath(id)) && !s.auditHas("mallory", "denied", memoryLeasesPath(id)) {
		t.Error("red's attempt on blue's lease not audited")
	}
}

func memoryLeasesPath(id string) string { return memoryLeases + "/" + id }

// TestDriveTokenTTLMustBePositive: a drive token asked for with a zero,
// negative or sub-nanosecond TTLSeconds is refused (once a zero read as
// the ten-minute default, and the CLI sent nothing for a negative one).
func TestDriveTokenTTLMustBePositive(t *testing.T) {
	s := newService(t)
	for _, ttl := range []float64{0, -5, 1e-12} {
		r := s.do("POST", "/redfish/v1/Oem/Rackpool/Drives/hdd1/Actions/Oem/Rackpool.Connect", map[string]any{"TTLSeconds": ttl}, admin)
		if r.status != http.StatusBadRequest || r.errorCode(t) != "Base.1.22.PropertyValueIncorrect" || !strings.Contains(string(r.body), "TTLSeconds") {
			t.Errorf("TTLSeconds %v: status %d, want 400 naming TTLSeconds: %s", ttl, r.status, r.body)
		}
	}
}
