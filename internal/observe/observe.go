// Package observe turns what the control plane does into events (the bus
// the Redfish EventService serves) and Prometheus metrics: the hooks of
// the composition manager (compose.Options: OnChange, OnFabricOp,
// OnSchedule), of the drive manager and of the provisioning loop, and a
// watcher that counts the fabric monitor's faults. Events name their
// resources by the Redfish URIs the northbound service serves them at.
package observe

import (
	"fmt"
	"strings"
	"time"

	"rackpool/internal/compose"
	"rackpool/internal/drive"
	"rackpool/internal/events"
	"rackpool/internal/inventory"
	"rackpool/internal/metrics"
	"rackpool/internal/provision"
)

// The Redfish URIs events name their origins by (internal/redfish serves
// them).
const (
	systemsPath      = "/redfish/v1/Systems/"
	reservationsPath = "/redfish/v1/CompositionService/CompositionReservations/"
	blockNodesPath   = "/redfish/v1/Oem/Rackpool/BlockNodes"
	drivesPath       = "/redfish/v1/Oem/Rackpool/Drives"
	provisioningPath = "/redfish/v1/Oem/Rackpool/Provisioning"
)

// Observer turns what the control plane does into events on the bus and
// Prometheus metrics in the registry. serve wires its hooks into the
// composition manager (compose.Options), the drive manager and the
// provisioning loop before the Redfish service exists, and hands the
// service the same Observer, so one registry and one bus carry both the
// workflows and the API.
type Observer struct {
	bus *events.Bus
	reg *metrics.Registry

	schedLat  *metrics.HistogramVec
	fabricLat *metrics.HistogramVec
	changes   *metrics.CounterVec
	faults    *metrics.CounterVec
}

// New registers the control plane's metrics in reg and publishes to bus.
func New(reg *metrics.Registry, bus *events.Bus) *Observer {
	fast := []float64{1e-6, 5e-6, 1e-5, 5e-5, 1e-4, 2.5e-4, 5e-4, 1e-3, 2.5e-3, 5e-3, 1e-2, 5e-2, 0.1}
	o := &Observer{bus: bus, reg: reg,
		schedLat: reg.Histogram("rackpool_scheduler_decision_seconds", "Scheduler decision time, by outcome.", fast, "outcome"),
		fabricLat: reg.Histogram("rackpool_fabric_operation_seconds", "Fabric attach and detach time, by fabric kind, operation and outcome.",
			metrics.DefBuckets, "fabric_kind", "op", "outcome"),
		changes: reg.Counter("rackpool_composition_changes_total", "Committed composition and reservation changes, by reason.", "reason"),
		faults:  reg.Counter("rackpool_fabric_faults_total", "Faults and threshold crossings reported by fabrics, by severity.", "severity"),
	}
	return o
}

// Bus returns the event bus.
func (o *Observer) Bus() *events.Bus { return o.bus }

// Registry returns the metrics registry.
func (o *Observer) Registry() *metrics.Registry { return o.reg }

// Outcome is the outcome label of an operation that ended with err.
func Outcome(err error) string {
	if err != nil {
		return "error"
	}
	return "ok"
}

// OnSchedule is compose.Options.OnSchedule.
func (o *Observer) OnSchedule(took time.Duration, err error) {
	o.schedLat.With(Outcome(err)).Observe(took.Seconds())
}

// OnFabricOp is compose.Options.OnFabricOp.
func (o *Observer) OnFabricOp(kind inventory.FabricKind, op string, took time.Duration, err error) {
	o.fabricLat.With(string(kind), op, Outcome(err)).Observe(took.Seconds())
}

// OnChange is compose.Options.OnChange: every committed change becomes an
// event for the owning tenant (and the administrators). A change another
// active replica committed (Change.Remote) is that replica's to count and
// publish: its event reaches this replica's bus through the shared event
// log (docs/ha.md), and counting it here too would count it twice in
// /metrics, which sums every replica's.
func (o *Observer) OnChange(ch compose.Change) {
	if ch.Remote {
		return
	}
	o.changes.With(ch.Reason).Inc()
	c := ch.New
	if c == nil {
		c = ch.Old
	}
	origin := systemsPath + c.ID
	if c.State == inventory.Reserved || ch.Reason == "released" || ch.Reason == "expired" {
		origin = reservationsPath + groupOf(c)
	}
	ev := events.Event{Type: events.TypeResourceUpdated, Severity: events.SeverityOK, Origin: origin, Tenant: c.Tenant,
		Oem: map[string]any{"Rackpool": map[string]any{"Reason": ch.Reason, "Composition": c.ID, "Host": c.Host, "Blocks": c.Blocks}}}
	switch ch.Reason {
	case "composed", "reserved":
		ev.Type = events.TypeResourceAdded
		ev.MessageID, ev.Message, ev.Args = "ResourceEvent.1.4.ResourceCreated", "The resource has been created successfully.", nil
	case "decomposed", "released", "expired":
		ev.Type = events.TypeResourceRemoved
		ev.MessageID, ev.Message = "ResourceEvent.1.4.ResourceRemoved", "The resource has been removed successfully."
	case "updated":
		ev.MessageID, ev.Message = "ResourceEvent.1.4.ResourceChanged", "One or more resource properties have changed."
	case "power":
		ev.Oem["Rackpool"].(map[string]any)["PowerState"] = c.Power.State
		switch {
		case ch.Old != nil && ch.Old.Power.State == c.Power.State || c.Power.IsOff() && ch.Old != nil && ch.Old.Power.IsOff():
			ev.MessageID, ev.Message = "ResourceEvent.1.4.ResourceChanged", "One or more resource properties have changed."
		case c.Power.State == inventory.PowerPoweringOn:
			ev.MessageID, ev.Message, ev.Args = "ResourceEvent.1.4.ResourcePoweringOn", fmt.Sprintf("The resource '%s' is powering on.", c.ID), []string{c.ID}
		case c.Power.State == inventory.PowerOn:
			ev.MessageID, ev.Message, ev.Args = "ResourceEvent.1.4.ResourcePoweredOn", fmt.Sprintf("The resource '%s' has powered on.", c.ID), []string{c.ID}
		case c.Power.State == inventory.PowerPoweringOff:
			ev.MessageID, ev.Message, ev.Args = "ResourceEvent.1.4.ResourcePoweringOff", fmt.Sprintf("The resource '%s' is powering off.", c.ID), []string{c.ID}
		default:
			ev.MessageID, ev.Message, ev.Args = "ResourceEvent.1.4.ResourcePoweredOff", fmt.Sprintf("The resource '%s' has powered off.", c.ID), []string{c.ID}
		}
	case "failed":
		ev.Type, ev.Severity = events.TypeAlert, events.SeverityWarning
		ev.MessageID = "Composition.1.1.ResourceBlockCompositionStateChanged"
		ev.Message = fmt.Sprintf("The composition status of the resource block '%s' has changed.", c.Host)
		ev.Args = []string{c.Host}
		if ch.Err != nil {
			ev.Oem["Rackpool"].(map[string]any)["Error"] = ch.Err.Error()
		}
	default:
		return
	}
	o.bus.Publish(ev)
}

func groupOf(c *inventory.Composition) string {
	if c.Group != "" {
		return c.Group
	}
	return c.ID
}

// OnDriveEvent publishes a pooled-drive event (a blocknode online or
// offline, a drive remapped or failed) as a resource status change of the
// drive or blocknode, with the drive manager's explanation under Oem.
func (o *Observer) OnDriveEvent(e drive.Event) {
	origin, name := blockNodesPath+"/"+e.Node, e.Node
	if e.Drive != "" {
		origin, name = drivesPath+"/"+e.Drive, e.Drive
	}
	msg := events.ResourceStatusChangedOK
	switch e.Severity {
	case events.SeverityWarning:
		msg = events.ResourceStatusChangedWarning
	case events.SeverityCritical:
		msg = events.ResourceStatusChangedCritical
	}
	ev := msg.Event(events.TypeStatusChange, origin, name, msg.Severity)
	ev.Oem = map[string]any{"Rackpool": map[string]any{"Detail": e.Message, "Drive": e.Drive, "BlockNode": e.Node}}
	o.bus.Publish(ev)
}

// OnProvisioningEvent publishes a decision or a shortfall of the
// provisioning loop, scoped to the system's tenant.
func (o *Observer) OnProvisioningEvent(e provision.Event) {
	msg := events.ResourceStatusChangedOK
	if e.Severity == events.SeverityWarning {
		msg = events.ResourceStatusChangedWarning
	}
	ev := msg.Event(events.TypeStatusChange, systemsPath+e.System, e.System, msg.Severity)
	ev.Tenant = e.Tenant
	ev.Oem = map[string]any{"Rackpool": map[string]any{"Detail": e.Message, "Provisioning": provisioningPath + "/" + e.System}}
	o.bus.Publish(ev)
}

// fault counts a fabric fault event (from the fabric monitor).
func (o *Observer) fault(e events.Event) {
	if e.Severity != "OK" {
		o.faults.With(e.Severity).Inc()
	}
}

// Watch counts the fabric monitor's fault events until the bus closes:
// this process's own (another active replica's, Event.Replica, are that
// replica's to count).
func (o *Observer) Watch() {
	ch, cancel := o.bus.Subscribe(func(e events.Event) bool {
		return e.Replica == "" && strings.HasPrefix(e.MessageID, "ResourceEvent.") && e.Severity != events.SeverityOK
	}, ^uint64(0))
	go func() {
		defer cancel()
		for e := range ch {
			o.fault(e)
		}
	}()
}
