package fmserver

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"rackpool/internal/clock"
)

const actions = "/redfish/v1/Fabrics/falcon1/Actions/Oem/Rackpool."

func TestTransportUnavailable(t *testing.T) {
	f := newFM(t, rackTopology(t), "falcon1", Options{})
	f.must(f.raw("POST", actions+"InjectTransportFault", `{"Kind":"unavailable","Count":2}`, nil), http.StatusNoContent, "inject")
	// The fault actions are never subject to transport faults.
	f.must(f.raw("POST", actions+"InjectFault", `{"Kind":"device-fails","Target":"gpu8"}`, nil), http.StatusNoContent, "fault action while unavailable")
	for i := 0; i < 2; i++ {
		res := f.must(f.get("/redfish/v1"), http.StatusServiceUnavailable, "unavailable")
		if res.header.Get("Retry-After") == "" || messageIDs(res)[0] != baseRegistry+"ServiceTemporarilyUnavailable" {
			t.Fatalf("503: %v %s", res.header, res.body)
		}
	}
	f.must(f.get("/redfish/v1"), http.StatusOK, "after the fault")
	// ClearFaults disarms transport faults too.
	f.must(f.raw("POST", actions+"InjectTransportFault", `{"Kind":"unavailable","Count":5}`, nil), http.StatusNoContent, "inject")
	f.must(f.raw("POST", actions+"ClearFaults", ``, nil), http.StatusNoContent, "clear")
	f.must(f.get("/redfish/v1/Fabrics"), http.StatusOK, "after clear")
	if h := f.get("/redfish/v1/Fabrics/falcon1/Endpoints/gpu8").json["Status"].(map[string]any)["Health"]; h != "OK" {
		t.Fatalf("gpu8 health %v after ClearFaults", h)
	}
}

func TestTransportLoseResponse(t *testing.T) {
	f := newFM(t, rackTopology(t), "falcon1", Options{TaskThreshold: time.Second})
	if err := f.srv.InjectTransportFault(LoseResponse, 1); err != nil {
		t.Fatal(err)
	}
	// Reads are not changes: answered.
	f.must(f.get("/redfish/v1/Fabrics/falcon1/Zones"), http.StatusOK, "GET")
	res := f.raw("POST", "/redfish/v1/Fabrics/falcon1/Zones", endpoints("falcon1", "host1-pcie", "gpu1"), nil)
	if res.status != -1 {
		t.Fatalf("a lost answer arrived: %d %s", res.status, res.body)
	}
	if got := f.discover().Attachments; len(got) != 1 || got[0].Block != "gpu1" {
		t.Fatalf("the change whose answer was lost was not made: %v", got)
	}
	f.must(f.get("/redfish/v1/Fabrics/falcon1/Zones/host1-pcie"), http.StatusOK, "zone exists")
	f.must(f.raw("PATCH", "/redfish/v1/Fabrics/falcon1/Zones/host1-pcie", endpoints("falcon1", "host1-pcie"), map[string]string{"If-Match": "*"}), http.StatusOK, "next change answered")
}

func TestTransportRestart(t *testing.T) {
	// On the wall clock with a 10 ms threshold, a hot-plug (100 ms) is a
	// task in flight when the restart comes.
	f := newFM(t, rackTopology(t), "falcon1", Options{Clock: clock.Real{}, TaskThreshold: 10 * time.Millisecond})
	res := f.must(f.raw("POST", "/redfish/v1/Fabrics/falcon1/Zones", endpoints("falcon1", "host1-pcie", "gpu1"), nil), http.StatusAccepted, "change")
	monitor := res.header.Get("Location")
	f.must(f.raw("POST", actions+"InjectTransportFault", `{"Kind":"restart"}`, nil), http.StatusNoContent, "restart")
	f.must(f.get("/redfish/v1/Fabrics"), http.StatusUnauthorized, "old session after a restart")
	f.login()
	f.must(f.get(monitor), http.StatusNotFound, "task monitor after a restart")
	// The change in flight finishes; the hardware state stays.
	deadline := time.Now().Add(5 * time.Second)
	for len(f.discover().Attachments) == 0 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if got := f.discover().Attachments; len(got) != 1 {
		t.Fatalf("attachments after restart %v", got)
	}
	time.Sleep(150 * time.Millisecond) // the change's modelled time ends
	f.must(f.get("/redfish/v1/Fabrics/falcon1/Zones/host1-pcie"), http.StatusOK, "zone after restart")
	// Task IDs are not reused after a restart.
	res = f.settle(f.raw("PATCH", "/redfish/v1/Fabrics/falcon1/Zones/host1-pcie", endpoints("falcon1", "host1-pcie"), map[string]string{"If-Match": "*"}))
	f.must(res, http.StatusOK, "change after restart")
}

// TestChaos drives a seeded server through a fixed sequence of requests:
// 503 bursts, lost answers and restarts all happen, the same ones for the
// same seed, and a client that retries and reconciles ends where it wanted.
func TestChaos(t *testing.T) {
	run := func(seed int64) (string, map[int]int, int) {
		f := newFM(t, rackTopology(t), "sas1", Options{Chaos: seed})
		var trace strings.Builder
		counts := map[int]int{}
		restarts := 0
		for i := 0; i < 300; i++ {
			dev := []string{"hdd1", "hdd2", "hdd3", "ssd1"}[i%4]
			var res result
			switch i % 3 {
			case 0:
				res = f.get("/redfish/v1/Fabrics/sas1/Zones/host1-sas")
			case 1:
				res = f.raw("POST", "/redfish/v1/Fabrics/sas1/Zones", endpoints("sas1", "host1-sas", dev), nil)
			default:
				res = f.raw("PATCH", "/redfish/v1/Fabrics/sas1/Zones/host1-sas", endpoints("sas1", "host1-sas", dev), map[string]string{"If-Match": "*"})
			}
			if res.status == http.StatusUnauthorized {
				restarts++
				f.login()
			}
			counts[res.status]++
			trace.WriteString(" " + http.StatusText(res.status))
		}
		return trace.String(), counts, restarts
	}
	a, counts, restarts := run(42)
	b, _, _ := run(42)
	if a != b {
		t.Fatal("the same seed gave different faults")
	}
	c, _, _ := run(43)
	if a == c {
		t.Fatal("different seeds gave the same faults")
	}
	if counts[http.StatusServiceUnavailable] < 10 || counts[-1] < 1 || restarts < 1 {
		t.Fatalf("300 requests: %v, %d restarts seen", counts, restarts)
	}
	t.Logf("300 requests: %v, %d restarts seen", counts, restarts)
}
