package redfish

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"rackpool/internal/events"
	"rackpool/internal/odata"
	"rackpool/internal/redfish/service"
	"rackpool/internal/redfish/telemetryservice"
)

// settingsStore keeps the push subscriptions, as one setting
// (store.Store).
type settingsStore interface {
	Setting(ctx context.Context, key string) (string, bool, error)
	PutSetting(ctx context.Context, key, value string) error
}

// eventBus is what the EventService's handlers need of the event bus
// (events.Bus).
type eventBus interface {
	Publish(e events.Event) events.Event
	Subscribe(filter func(events.Event) bool, since uint64) (<-chan events.Event, func())
	Recent(n int, filter func(events.Event) bool) []events.Event
	LastID() uint64
	AddDestination(d events.Destination) error
	RemoveDestination(id string) bool
	Destinations() []events.Destination
}

// eventRoutes are the routes of the EventService (routes.go).
var eventRoutes = []route{
	{"GET /redfish/v1/EventService", login, (*Server).getEventService},
	{"GET /redfish/v1/EventService/SSE", login, (*Server).getSSE},
	{"GET /redfish/v1/EventService/Subscriptions", login, (*Server).getSubscriptions},
	{"POST /redfish/v1/EventService/Subscriptions", configureComponents, (*Server).postSubscription},
	{"GET /redfish/v1/EventService/Subscriptions/{id}", login, (*Server).getSubscription},
	{"DELETE /redfish/v1/EventService/Subscriptions/{id}", configureComponents, (*Server).deleteSubscription},
	{"POST /redfish/v1/EventService/Actions/EventService.SubmitTestEvent", configureManager, (*Server).submitTestEvent},
}

// EventService: a Server-Sent Events stream (GET .../SSE, resumable with
// Last-Event-ID) and push subscriptions (EventDestination, Redfish
// protocol, POSTed by the bus with retries). Events are composition
// changes (OnChange), task life cycles, and what the fabric monitor sees:
// device, port and host failures and telemetry thresholds. A tenant's
// accounts receive only their tenant's events; accounts without a tenant
// receive all. Subscriptions are stored and re-added at start-up.
//
// With ?EventFormatType=MetricReport (or ?MetricReportDefinition=
// FabricTelemetry) the SSE stream carries the fabric telemetry reports
// instead of events (telemetryservice renders them, streamMetricReports
// below streams them); those never go on the bus, so neither the Events
// log nor push subscriptions see them.

const (
	subscriptionsPath   = "/redfish/v1/EventService/Subscriptions/"
	subscriptionsKey    = "event-subscriptions"
	maxSubscriptions    = 64
	sseKeepAliveDefault = 15 * time.Second
)

// registryPrefixes the service emits.
var registryPrefixes = []string{"ResourceEvent", "Composition", "TaskEvent", "Base"}

var eventTypes = []string{events.TypeStatusChange, events.TypeResourceUpdated, events.TypeResourceAdded,
	events.TypeResourceRemoved, events.TypeAlert}

// publish puts e on the bus.
func (s *Server) publish(e events.Event) { s.events.Publish(e) }

// Event formats (EventService.EventFormatTypes).
const (
	formatEvent        = "Event"
	formatMetricReport = "MetricReport"
)

// eventFormats are the EventFormatTypes s streams.
func (s *Server) eventFormats() []string {
	if s.fabricTelemetry() != nil {
		return []string{formatEvent, formatMetricReport}
	}
	return []string{formatEvent}
}

func (s *Server) getEventService(w http.ResponseWriter, r *http.Request) error {
	writeJSON(w, http.StatusOK, map[string]any{
		"@odata.id":                    "/redfish/v1/EventService",
		"@odata.type":                  "#EventService.v1_10_0.EventService",
		"Id":                           "EventService",
		"Name":                         "Event Service",
		"Status":                       map[string]string{"State": "Enabled", "Health": "OK"},
		"ServiceEnabled":               true,
		"DeliveryRetryAttempts":        events.DeliveryTries - 1,
		"DeliveryRetryIntervalSeconds": int(events.DefaultRetryBackoff.Seconds()),
		"EventFormatTypes":             s.eventFormats(),
		"RegistryPrefixes":             registryPrefixes,
		"ServerSentEventUri":           "/redfish/v1/EventService/SSE",
		"SSEFilterPropertiesSupported": map[string]any{
			"MessageId": true, "OriginResource": true, "RegistryPrefix": true,
			"ResourceType": false, "EventFormatType": true, "MetricReportDefinition": s.fabricTelemetry() != nil, "SubordinateResources": false,
		},
		"Subscriptions": ref("/redfish/v1/EventService/Subscriptions"),
		"Actions": map[string]any{
			"#EventService.SubmitTestEvent": map[string]string{"target": "/redfish/v1/EventService/Actions/EventService.SubmitTestEvent"},
		},
	})
	return nil
}

// sseList is query parameter k of q, comma-separated values and repeats
// joined.
func sseList(q url.Values, k string) []string {
	var out []string
	for _, v := range q[k] {
		for _, p := range strings.Split(v, ",") {
			if p = strings.TrimSpace(p); p != "" {
				out = append(out, p)
			}
		}
	}
	return out
}

// sseEventFilters are the SSE filters that select events.
var sseEventFilters = []string{"EventTypes", "MessageIds", "RegistryPrefixes", "OriginResources"}

// sseFilter reads the SSE filter query: EventTypes, MessageIds,
// RegistryPrefixes and OriginResources, each comma-separated (DSP0266's
// $filter form "EventType eq 'Alert'" is not supported: $filter selects
// members of collections, query.go, and on the stream sseFormat answers it
// 400 QueryNotSupportedOnResource).
func sseFilter(r *http.Request) (events.Destination, []string) {
	q := r.URL.Query()
	return events.Destination{EventTypes: sseList(q, "EventTypes"), RegistryPrefixes: sseList(q, "RegistryPrefixes"),
		OriginResources: sseList(q, "OriginResources")}, sseList(q, "MessageIds")
}

// errQueryInvalid is a 400 for a query parameter's value the service
// does not accept; resolution says what it does.
func errQueryInvalid(param, resolution string) *apiError {
	return fromProblem(odata.Invalid(param, resolution))
}

// sseFormat reads which payloads the SSE client asks for: EventFormatType
// (Event, the default, or MetricReport, one of them) and
// MetricReportDefinition (FabricTelemetry, by Id or URI; it implies
// MetricReport). It reports whether the stream is of metric reports.
func (s *Server) sseFormat(r *http.Request) (bool, error) {
	q := r.URL.Query()
	if q.Has("$filter") {
		return false, errSSEFilter()
	}
	formats, defs := sseList(q, "EventFormatType"), sseList(q, "MetricReportDefinition")
	known := s.eventFormats()
	switch {
	case len(formats) > 1:
		return false, errQueryInvalid("EventFormatType", "Give one EventFormatType: "+strings.Join(known, " or ")+".")
	case len(formats) == 1 && !slices.Contains(known, formats[0]):
		return false, errQueryInvalid("EventFormatType", "Use "+strings.Join(known, " or ")+".")
	}
	for _, d := range defs {
		if s.fabricTelemetry() == nil {
			return false, errQueryInvalid("MetricReportDefinition", "This service streams no metric reports.")
		}
		if d != telemetryservice.FabricTelemetryID && strings.TrimSuffix(d, "/") != telemetryservice.ReportDefinitionsPath+"/"+telemetryservice.FabricTelemetryID {
			return false, errQueryInvalid("MetricReportDefinition",
				"Use "+telemetryservice.FabricTelemetryID+" or "+telemetryservice.ReportDefinitionsPath+"/"+telemetryservice.FabricTelemetryID+".")
		}
	}
	reports := (len(formats) == 1 && formats[0] == formatMetricReport) || (len(formats) == 0 && len(defs) > 0)
	if !reports && len(defs) > 0 {
		return false, fromProblem(odata.Combination("MetricReportDefinition selects metric reports: use it with EventFormatType=MetricReport, not Event."))
	}
	if reports {
		for _, k := range sseEventFilters {
			if q.Has(k) {
				return false, fromProblem(odata.Combination(k + " selects events, which a stream of metric reports does not carry; remove it, or open a second stream for events."))
			}
		}
	}
	return reports, nil
}

func (s *Server) getSSE(w http.ResponseWriter, r *http.Request) error {
	p := principal(r)
	reports, err := s.sseFormat(r)
	if err != nil {
		return err
	}
	filter, msgIDs := sseFilter(r)
	since := s.events.LastID()
	v := r.Header.Get("Last-Event-ID")
	if v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			return newError(http.StatusBadRequest, baseRegistry+"HeaderInvalid",
				fmt.Sprintf("The header '%s' is invalid.", "Last-Event-ID: "+v), "Last-Event-ID: "+v)
		}
		since = n
	}
	s.sseStreams.Add(1)
	defer s.sseStreams.Add(-1)
	if reports {
		return s.streamMetricReports(w, r, s.fabricTelemetry(), since, v != "")
	}
	ch, cancel := s.events.Subscribe(func(e events.Event) bool {
		if !events.Visible(p.Tenant, e) || !events.Match(filter, e) {
			return false
		}
		if len(msgIDs) == 0 {
			return true
		}
		for _, m := range msgIDs {
			if e.MessageID == m || strings.HasSuffix(e.MessageID, "."+m) {
				return true
			}
		}
		return false
	}, since)
	defer cancel()
	rc := http.NewResponseController(w)
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.Header().Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	if err := rc.Flush(); err != nil {
		return nil // the connection cannot stream; nothing more to say
	}
	keepAlive := time.NewTicker(sseKeepAliveDefault)
	defer keepAlive.Stop()
	for {
		select {
		case <-r.Context().Done():
			return nil
		case <-keepAlive.C:
			if _, err := w.Write([]byte(": keep-alive\n\n")); err != nil {
				return nil
			}
		case e, ok := <-ch:
			if !ok {
				return nil // the bus closed or dropped this slow client
			}
			if err := events.WriteSSE(w, e); err != nil {
				return nil
			}
		}
		if err := rc.Flush(); err != nil {
			return nil
		}
	}
}

// restoreSubscriptions re-adds the stored push destinations.
// RestoreSubscriptions loads the push subscriptions from the store and
// delivers to them from now on: the leader of several active replicas does
// (docs/ha.md), the others forward the subscriptions' routes to it.
func (s *Server) RestoreSubscriptions(ctx context.Context) error { return s.restoreSubscriptions(ctx) }

// DropSubscriptions stops delivering to every push subscription (their
// records stay): a replica that does not lead.
func (s *Server) DropSubscriptions() {
	for _, d := range s.events.Destinations() {
		s.events.RemoveDestination(d.ID)
	}
}

func (s *Server) restoreSubscriptions(ctx context.Context) error {
	if s.store == nil {
		return nil
	}
	raw, ok, err := s.store.Setting(ctx, subscriptionsKey)
	if err != nil || !ok {
		return err
	}
	var ds []events.Destination
	if err := json.Unmarshal([]byte(raw), &ds); err != nil {
		return fmt.Errorf("setting %s: %w", subscriptionsKey, err)
	}
	for _, d := range ds {
		if err := s.events.AddDestination(d); err != nil && !errors.Is(err, events.ErrDestinationExists) {
			s.log.Warn("restore event subscription", "id", d.ID, "err", err)
		}
	}
	return nil
}

func (s *Server) saveSubscriptions(ctx context.Context) error {
	if s.store == nil {
		return nil
	}
	ds := s.events.Destinations()
	if ds == nil {
		ds = []events.Destination{}
	}
	raw, err := json.Marshal(ds)
	if err != nil {
		return err
	}
	return s.store.PutSetting(ctx, subscriptionsKey, string(raw))
}

func (s *Server) visibleDestination(r *http.Request, id string) (events.Destination, error) {
	for _, d := range s.events.Destinations() {
		if d.ID == id && principal(r).Sees(d.Tenant) {
			return d, nil
		}
	}
	return events.Destination{}, errNotFound("EventDestination", id)
}

func (s *Server) getSubscriptions(w http.ResponseWriter, r *http.Request) error {
	p := principal(r)
	var members []odataID
	for _, d := range s.events.Destinations() {
		if p.Sees(d.Tenant) {
			members = append(members, ref(subscriptionsPath+d.ID))
		}
	}
	writeJSON(w, http.StatusOK, collection("/redfish/v1/EventService/Subscriptions", "EventDestinationCollection", "Event Subscriptions", members))
	return nil
}

func destinationBody(d events.Destination) map[string]any {
	body := map[string]any{
		"@odata.id":           subscriptionsPath + d.ID,
		"@odata.type":         "#EventDestination.v1_14_0.EventDestination",
		"Id":                  d.ID,
		"Name":                "Event Subscription " + d.ID,
		"Destination":         d.URL,
		"Context":             d.Context,
		"Protocol":            "Redfish",
		"SubscriptionType":    "RedfishEvent",
		"EventFormatType":     "Event",
		"DeliveryRetryPolicy": "RetryForever",
		"RegistryPrefixes":    nonNil(d.RegistryPrefixes),
		"EventTypes":          nonNil(d.EventTypes),
		"OriginResources":     []odataID{},
		"Status":              map[string]string{"State": "Enabled", "Health": "OK"},
	}
	var origins []odataID
	for _, o := range d.OriginResources {
		origins = append(origins, ref(o))
	}
	if origins != nil {
		body["OriginResources"] = origins
	}
	if d.Tenant != "" {
		body["Oem"] = rackpoolOem("EventDestination", map[string]any{"Tenant": d.Tenant})
	}
	return body
}

func (s *Server) getSubscription(w http.ResponseWriter, r *http.Request) error {
	d, err := s.visibleDestination(r, r.PathValue("id"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, destinationBody(d))
	return nil
}

func (s *Server) postSubscription(w http.ResponseWriter, r *http.Request) error {
	var body struct {
		Destination      *string
		Context          string
		Protocol         string
		SubscriptionType string
		EventFormatType  string
		EventTypes       []string
		RegistryPrefixes []string
		OriginResources  []odataID
	}
	if err := decode(r, &body); err != nil {
		return err
	}
	if body.Destination == nil {
		return errPropertyMissing("Destination")
	}
	u, err := url.Parse(*body.Destination)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return errPropertyValue("Destination", *body.Destination, "Use an absolute http or https URL.")
	}
	if body.Protocol != "" && body.Protocol != "Redfish" {
		return errPropertyValue("Protocol", body.Protocol, "Only the Redfish protocol is supported.")
	}
	if body.SubscriptionType != "" && body.SubscriptionType != "RedfishEvent" {
		return errPropertyValue("SubscriptionType", body.SubscriptionType, "Use RedfishEvent; for SSE, GET /redfish/v1/EventService/SSE.")
	}
	if body.EventFormatType != "" && body.EventFormatType != "Event" {
		return errPropertyValue("EventFormatType", body.EventFormatType, "Only Event is supported.")
	}
	for _, t := range body.EventTypes {
		if !slices.Contains(eventTypes, t) {
			return errPropertyValue("EventTypes", t, "Use "+strings.Join(eventTypes, ", ")+".")
		}
	}
	for _, p := range body.RegistryPrefixes {
		if !slices.Contains(registryPrefixes, p) {
			return errPropertyValue("RegistryPrefixes", p, "Use "+strings.Join(registryPrefixes, ", ")+".")
		}
	}
	if len(s.events.Destinations()) >= maxSubscriptions {
		return newError(http.StatusServiceUnavailable, baseRegistry+"EventSubscriptionLimitExceeded",
			"The event subscription failed due to the number of simultaneous subscriptions exceeding the limit of the implementation.")
	}
	d := events.Destination{ID: randomHex(6), URL: *body.Destination, Context: body.Context, Protocol: "Redfish",
		EventTypes: body.EventTypes, RegistryPrefixes: body.RegistryPrefixes, Tenant: tenantOf(r)}
	for _, o := range body.OriginResources {
		d.OriginResources = append(d.OriginResources, o.ID)
	}
	if err := s.events.AddDestination(d); err != nil {
		return errPropertyValue("Destination", *body.Destination, err.Error())
	}
	if err := s.saveSubscriptions(r.Context()); err != nil {
		s.events.RemoveDestination(d.ID)
		return err
	}
	w.Header().Set("Location", subscriptionsPath+d.ID)
	writeJSON(w, http.StatusCreated, destinationBody(d))
	return nil
}

func (s *Server) deleteSubscription(w http.ResponseWriter, r *http.Request) error {
	d, err := s.visibleDestination(r, r.PathValue("id"))
	if err != nil {
		return err
	}
	s.events.RemoveDestination(d.ID)
	if err := s.saveSubscriptions(r.Context()); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (s *Server) submitTestEvent(w http.ResponseWriter, r *http.Request) error {
	var body struct {
		EventType         string
		MessageId         string
		Message           string
		MessageArgs       []string
		Severity          string
		MessageSeverity   string
		OriginOfCondition string
		EventId           string
		EventTimestamp    string
		EventGroupId      int
	}
	if err := decode(r, &body); err != nil {
		return err
	}
	e := events.Event{Type: orDefault(body.EventType, events.TypeAlert), MessageID: orDefault(body.MessageId, "Base.1.22.Success"),
		Message: orDefault(body.Message, "Test event."), Args: body.MessageArgs,
		Severity: orDefault(body.MessageSeverity, orDefault(body.Severity, events.SeverityOK)), Origin: body.OriginOfCondition}
	if !slices.Contains(eventTypes, e.Type) && e.Type != events.TypeOther {
		return errPropertyValue("EventType", e.Type, "Use "+strings.Join(eventTypes, ", ")+".")
	}
	if !slices.Contains([]string{events.SeverityOK, events.SeverityWarning, events.SeverityCritical}, e.Severity) {
		return errPropertyValue("MessageSeverity", e.Severity, "Use OK, Warning or Critical.")
	}
	s.publish(e)
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// streamMetricReports is the SSE stream of EventFormatType=MetricReport:
// each new report as one message, its id the report's sequence number.
// With a Last-Event-ID the retained reports after it are sent first. The
// stream ends with the request, and when the event bus closes (serve's
// shutdown), like the event stream.
func (s *Server) streamMetricReports(w http.ResponseWriter, r *http.Request, t telemetryservice.FabricReports, lastID uint64, resume bool) error {
	scoped := service.Principal(r).Tenant != ""
	closed, stop := s.events.Subscribe(func(events.Event) bool { return false }, s.events.LastID())
	defer stop()
	replay, ch, cancel := t.Subscribe(lastID, resume)
	defer cancel()
	rc := http.NewResponseController(w)
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.Header().Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	for _, rep := range replay {
		if err := telemetryservice.WriteReportSSE(w, rep, scoped); err != nil {
			return nil
		}
	}
	if err := rc.Flush(); err != nil {
		return nil // the connection cannot stream; nothing more to say
	}
	keepAlive := time.NewTicker(sseKeepAliveDefault)
	defer keepAlive.Stop()
	for {
		select {
		case <-r.Context().Done():
			return nil
		case <-closed:
			return nil
		case <-keepAlive.C:
			if _, err := w.Write([]byte(": keep-alive\n\n")); err != nil {
				return nil
			}
		case rep := <-ch:
			if err := telemetryservice.WriteReportSSE(w, rep, scoped); err != nil {
				return nil
			}
		}
		if err := rc.Flush(); err != nil {
			return nil
		}
	}
}
