package redfish_test

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"rackpool/internal/drive"
	"rackpool/internal/hostagent"
	"rackpool/internal/lease"
	"rackpool/internal/provision"
	"rackpool/internal/redfish"
	"rackpool/internal/telemetry"
)

// TestOptionsNilServices: a service handed to Options as a nil pointer
// (what a caller holds when it did not start one) counts as none: its
// routes answer as they do without it, not with a panic.
func TestOptionsNilServices(t *testing.T) {
	base := newService(t)
	h := redfish.New(base.mgr, base.auth, redfish.Options{Store: base.store, AsyncThreshold: -1,
		Leases: (*lease.Manager)(nil), Drives: (*drive.Manager)(nil), Telemetry: (*telemetry.Store)(nil),
		Provisioning: (*provision.Loop)(nil), Broker: (*hostagent.Broker)(nil)})
	srv := httptest.NewTLSServer(h)
	t.Cleanup(srv.Close)
	s := *base
	s.handler, s.srv = h, srv
	for _, path := range []string{"/redfish/v1/Oem/Rackpool/MemoryLeases", "/redfish/v1/Oem/Rackpool/Drives",
		"/redfish/v1/Oem/Rackpool/Provisioning", "/redfish/v1/TelemetryService"} {
		s.must(http.StatusNotFound, "GET", path, nil, admin)
	}
}
