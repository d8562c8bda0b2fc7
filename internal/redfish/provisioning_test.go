package redfish_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"rackpool/internal/telemetry"
)

const provisioning = "/redfish/v1/Oem/Rackpool/Provisioning"

// TestProvisioningSubscriptions: a tenant opts its system in, reads the
// loop's explained decision, changes and removes the subscription; another
// tenant sees none of it; bad bodies change nothing.
func TestProvisioningSubscriptions(t *testing.T) {
	s := newService(t)
	blue, red, blueRO := s.tenants()
	sys := s.must(http.StatusCreated, "POST", "/redfish/v1/Systems", specificBody("host1", "gpu1"), blue).json(t)["Id"].(string)

	for _, tc := range []struct {
		name string
		body any
		c    cred
		want int
	}{
		{"another tenant's system", map[string]any{"System": sys, "Mode": "On"}, red, http.StatusNotFound},
		{"unknown system", map[string]any{"System": "sys-000000000000", "Mode": "On"}, blue, http.StatusNotFound},
		{"a physical host", map[string]any{"System": "host2", "Mode": "On"}, blue, http.StatusNotFound},
		{"read-only account", map[string]any{"System": sys, "Mode": "On"}, blueRO, http.StatusForbidden},
		{"mode Off", map[string]any{"System": sys, "Mode": "Off"}, blue, http.StatusBadRequest},
		{"no mode", map[string]any{"System": sys}, blue, http.StatusBadRequest},
		{"no system", map[string]any{"Mode": "On"}, blue, http.StatusBadRequest},
		{"unknown property", map[string]any{"System": sys, "Mode": "On", "Greedy": true}, blue, http.StatusBadRequest},
		{"wrong type", map[string]any{"System": sys, "Mode": "On", "MaxBytes": "lots"}, blue, http.StatusBadRequest},
		{"negative bound", map[string]any{"System": sys, "Mode": "On", "MaxBytes": -1}, blue, http.StatusBadRequest},
		{"min above max", map[string]any{"System": sys, "Mode": "On", "MinBytes": 16 << 30, "MaxBytes": 8 << 30}, blue, http.StatusBadRequest},
	} {
		if r := s.do("POST", provisioning, tc.body, tc.c); r.status != tc.want {
			t.Errorf("%s: %d, want %d: %s", tc.name, r.status, tc.want, r.body)
		}
	}
	if got := list(t, s.get(provisioning)["Members"]); len(got) != 0 {
		t.Fatalf("refused requests left subscriptions: %v", got)
	}
	r := s.must(http.StatusCreated, "POST", provisioning, map[string]any{"System": "/redfish/v1/Systems/" + sys, "Mode": "On", "MaxBytes": 64 << 30}, blue)
	if loc := r.header.Get("Location"); loc != provisioning+"/"+sys {
		t.Errorf("Location %q", loc)
	}
	s.must(http.StatusConflict, "POST", provisioning, map[string]any{"System": sys, "Mode": "DryRun"}, blue)

	// Usage, and a step of the (dry-run) loop: the decision is explained.
	key := telemetry.Key{Kind: telemetry.System, Source: sys, Metric: telemetry.MemoryUsed}
	for i := range 20 {
		at := s.fabClk.Now()
		if err := s.tel.Append(key, []telemetry.Sample{{Time: at, Value: float64(256<<30) + float64(i)*float64(4<<30)}}); err != nil {
			t.Fatal(err)
		}
		s.prov.Step(context.Background())
		s.fabClk.Advance(30 * time.Second)
	}
	sub := s.must(http.StatusOK, "GET", provisioning+"/"+sys, nil, blue).json(t)
	last, _ := sub["LastDecision"].(map[string]any)
	if sub["Mode"] != "On" || sub["Effective"] != "DryRun" || last == nil || last["Action"] != "grow" || last["Applied"] != false ||
		!strings.Contains(last["Explanation"].(string), "observed") {
		t.Fatalf("subscription after a growing use: %v", sub)
	}
	if !s.auditHas("rackpool", "success", "/redfish/v1/Systems/"+sys) {
		t.Error("the loop's proposal was not audited")
	}

	// Another tenant: 404 for the member, nothing in the collection.
	s.must(http.StatusNotFound, "GET", provisioning+"/"+sys, nil, red)
	s.must(http.StatusNotFound, "PATCH", provisioning+"/"+sys, map[string]any{"Mode": "DryRun"}, red)
	s.must(http.StatusNotFound, "DELETE", provisioning+"/"+sys, nil, red)
	if got := list(t, s.do("GET", provisioning, nil, red).json(t)["Members"]); len(got) != 0 {
		t.Errorf("red sees %v", got)
	}
	s.must(http.StatusOK, "GET", provisioning+"/"+sys, nil, blueRO)

	// PATCH: bounds and mode; the system cannot change.
	s.must(http.StatusBadRequest, "PATCH", provisioning+"/"+sys, map[string]any{"System": "other"}, blue)
	if got := s.must(http.StatusOK, "PATCH", provisioning+"/"+sys, map[string]any{"Mode": "DryRun", "MaxBytes": 0}, blue).json(t); got["Mode"] != "DryRun" || got["MaxBytes"].(float64) != 0 {
		t.Errorf("after PATCH: %v", got)
	}
	s.must(http.StatusNoContent, "DELETE", provisioning+"/"+sys, nil, blue)
	s.must(http.StatusNotFound, "GET", provisioning+"/"+sys, nil, blue)
}
