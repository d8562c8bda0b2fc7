package observe

import (
	"errors"
	"io"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"rackpool/internal/compose"
	"rackpool/internal/drive"
	"rackpool/internal/events"
	"rackpool/internal/inventory"
	"rackpool/internal/metrics"
	"rackpool/internal/provision"
)

func newObserver(t *testing.T) (*Observer, *events.Bus) {
	bus := events.New(events.Options{})
	t.Cleanup(bus.Close)
	return New(metrics.NewRegistry(), bus), bus
}

// exposition is the registry's Prometheus text.
func exposition(t *testing.T, o *Observer) string {
	t.Helper()
	rec := httptest.NewRecorder()
	o.Registry().Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	b, _ := io.ReadAll(rec.Body)
	return string(b)
}

func comp(id string, st inventory.State, power string) *inventory.Composition {
	return &inventory.Composition{ID: id, Host: "host1", Tenant: "red", State: st, Blocks: []string{"gpu1"},
		Power: inventory.Power{State: power}}
}

// TestOnChange: each committed change is one event for the tenant, of the
// registry message its reason and power transition call for; a
// reservation's change names the reservation group; a reason without an
// event is counted only.
func TestOnChange(t *testing.T) {
	res := comp("r1", inventory.Reserved, "")
	res.Group = "g1"
	for _, tc := range []struct {
		name   string
		ch     compose.Change
		typ    string
		msg    string // "" for no event
		origin string
	}{
		{"composed", compose.Change{New: comp("s1", inventory.Composed, "")}, events.TypeResourceAdded, "ResourceEvent.1.4.ResourceCreated", "/redfish/v1/Systems/s1"},
		{"updated", compose.Change{New: comp("s1", inventory.Composed, "")}, events.TypeResourceUpdated, "ResourceEvent.1.4.ResourceChanged", "/redfish/v1/Systems/s1"},
		{"decomposed", compose.Change{Old: comp("s1", inventory.Composed, "")}, events.TypeResourceRemoved, "ResourceEvent.1.4.ResourceRemoved", "/redfish/v1/Systems/s1"},
		{"reserved", compose.Change{New: res}, events.TypeResourceAdded, "ResourceEvent.1.4.ResourceCreated", reservationsPath + "g1"},
		{"expired", compose.Change{Old: comp("r2", inventory.Reserved, "")}, events.TypeResourceRemoved, "ResourceEvent.1.4.ResourceRemoved", reservationsPath + "r2"},
		{"power", compose.Change{Old: comp("s1", inventory.Composed, inventory.PowerOff), New: comp("s1", inventory.Composed, inventory.PowerPoweringOn)},
			events.TypeResourceUpdated, "ResourceEvent.1.4.ResourcePoweringOn", "/redfish/v1/Systems/s1"},
		{"power", compose.Change{Old: comp("s1", inventory.Composed, inventory.PowerPoweringOn), New: comp("s1", inventory.Composed, inventory.PowerOn)},
			events.TypeResourceUpdated, "ResourceEvent.1.4.ResourcePoweredOn", "/redfish/v1/Systems/s1"},
		{"power", compose.Change{Old: comp("s1", inventory.Composed, ""), New: comp("s1", inventory.Composed, inventory.PowerOff)},
			events.TypeResourceUpdated, "ResourceEvent.1.4.ResourceChanged", "/redfish/v1/Systems/s1"}, // off to off
		{"failed", compose.Change{New: comp("s1", inventory.Composing, ""), Err: errors.New("attach gpu1: boom")},
			events.TypeAlert, "Composition.1.1.ResourceBlockCompositionStateChanged", "/redfish/v1/Systems/s1"},
		{"resumed", compose.Change{New: comp("s1", inventory.Composed, "")}, "", "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o, bus := newObserver(t)
			tc.ch.Reason = tc.name
			o.OnChange(tc.ch)
			got := bus.Recent(0, nil)
			if tc.msg == "" {
				if len(got) != 0 {
					t.Fatalf("events %+v", got)
				}
			} else {
				if len(got) != 1 {
					t.Fatalf("events %+v", got)
				}
				e := got[0]
				if e.Type != tc.typ || e.MessageID != tc.msg || e.Origin != tc.origin || e.Tenant != "red" {
					t.Fatalf("event %+v", e)
				}
				if tc.name == "failed" && (e.Severity != events.SeverityWarning || e.Oem["Rackpool"].(map[string]any)["Error"] != "attach gpu1: boom") {
					t.Fatalf("failed event %+v", e)
				}
			}
			if want := `rackpool_composition_changes_total{reason="` + tc.name + `"} 1`; !strings.Contains(exposition(t, o), want) {
				t.Fatalf("no %s in\n%s", want, exposition(t, o))
			}
		})
	}
}

// TestRemoteChange: a change another active replica committed is that
// replica's to publish and count; Sync's report of it here is neither.
func TestRemoteChange(t *testing.T) {
	o, bus := newObserver(t)
	o.OnChange(compose.Change{New: comp("s1", inventory.Composed, ""), Reason: "composed", Remote: true})
	if got := bus.Recent(0, nil); len(got) != 0 {
		t.Fatalf("another replica's change published here: %+v", got)
	}
	if text := exposition(t, o); strings.Contains(text, `rackpool_composition_changes_total{`) {
		t.Fatalf("another replica's change counted here:\n%s", text)
	}
}

func TestDriveAndProvisioningEvents(t *testing.T) {
	o, bus := newObserver(t)
	o.OnDriveEvent(drive.Event{Severity: events.SeverityCritical, Drive: "hdd1", Node: "bn1", Message: "failed"})
	o.OnDriveEvent(drive.Event{Severity: events.SeverityOK, Node: "bn1", Message: "online"})
	o.OnProvisioningEvent(provision.Event{Severity: events.SeverityWarning, System: "s1", Tenant: "red", Message: "short"})
	got := bus.Recent(0, nil)
	if len(got) != 3 {
		t.Fatalf("events %+v", got)
	}
	for i, want := range []struct{ origin, msg, tenant string }{
		{drivesPath + "/hdd1", "ResourceEvent.1.4.ResourceStatusChangedCritical", ""},
		{blockNodesPath + "/bn1", "ResourceEvent.1.4.ResourceStatusChangedOK", ""},
		{"/redfish/v1/Systems/s1", "ResourceEvent.1.4.ResourceStatusChangedWarning", "red"},
	} {
		if e := got[i]; e.Origin != want.origin || e.MessageID != want.msg || e.Tenant != want.tenant || e.Type != events.TypeStatusChange {
			t.Errorf("event %d: %+v, want %+v", i, e, want)
		}
	}
	if p := got[2].Oem["Rackpool"].(map[string]any)["Provisioning"]; p != provisioningPath+"/s1" {
		t.Errorf("provisioning link %v", p)
	}
}

// TestMetrics: the scheduler's and fabric's timings by outcome, and the
// fabric monitor's fault events counted by severity (OK ones not, nor
// another active replica's, which it counts).
func TestMetrics(t *testing.T) {
	o, bus := newObserver(t)
	o.OnSchedule(time.Millisecond, nil)
	o.OnSchedule(time.Millisecond, errors.New("no fit"))
	o.OnFabricOp(inventory.PCIeSwitch, "attach", time.Millisecond, nil)
	o.Watch()
	bus.Deliver(events.Event{ID: 1000, MessageID: "ResourceEvent.1.4.ResourceStatusChangedCritical", Severity: events.SeverityCritical, Replica: "other"})
	bus.Publish(events.Event{MessageID: "ResourceEvent.1.4.ResourceStatusChangedCritical", Severity: events.SeverityCritical})
	bus.Publish(events.Event{MessageID: "ResourceEvent.1.4.ResourceStatusChangedOK", Severity: events.SeverityOK})
	bus.Publish(events.Event{MessageID: "Other.1.0.X", Severity: events.SeverityWarning})
	want := []string{
		`rackpool_scheduler_decision_seconds_count{outcome="ok"} 1`,
		`rackpool_scheduler_decision_seconds_count{outcome="error"} 1`,
		`rackpool_fabric_operation_seconds_count{fabric_kind="pcie-switch",op="attach",outcome="ok"} 1`,
		`rackpool_fabric_faults_total{severity="Critical"} 1`,
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		text := exposition(t, o)
		missing := ""
		for _, w := range want {
			if !strings.Contains(text, w) {
				missing = w
			}
		}
		if missing == "" {
			if strings.Contains(text, `severity="Warning"`) || strings.Contains(text, `severity="OK"`) {
				t.Fatalf("counted a non-fault event:\n%s", text)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("no %s in\n%s", missing, text)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
