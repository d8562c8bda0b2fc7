package eventservice

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"rackpool/internal/events"
	"rackpool/internal/odata"
	"rackpool/internal/redfish/service"
	"rackpool/internal/redfish/telemetryservice"
	"rackpool/internal/rf"
)

// Service serves the EventService: the SSE stream (of events, and of the
// fabric telemetry reports when ServeFabric gave it some) and the push
// subscriptions.
type Service struct {
	events  Bus
	store   Settings                       // nil: subscriptions are not kept
	fabric  telemetryservice.FabricReports // nil: no metric reports to stream
	log     *slog.Logger
	streams atomic.Int64 // live GET .../EventService/SSE streams
}

// Deps are what a Service serves from.
type Deps struct {
	Events   Bus
	Settings Settings // nil: subscriptions are not kept
	Logger   *slog.Logger
}

// New returns a Service over d.
func New(d Deps) *Service {
	return &Service{events: d.Events, store: d.Settings, log: d.Logger}
}

// ServeFabric makes s stream t's reports (EventFormatType=MetricReport;
// nil: none). Call it once, before serving.
func (s *Service) ServeFabric(t telemetryservice.FabricReports) { s.fabric = t }

// Streams is the number of live SSE streams (rackpool_event_subscribers).
func (s *Service) Streams() int64 { return s.streams.Load() }

// Settings keeps the push subscriptions, as one setting
// (store.Store).
type Settings interface {
	Setting(ctx context.Context, key string) (string, bool, error)
	PutSetting(ctx context.Context, key, value string) error
}

// Bus is what the EventService's handlers need of the event bus
// (events.Bus).
type Bus interface {
	Publish(e events.Event) events.Event
	Subscribe(filter func(events.Event) bool, since uint64) (<-chan events.Event, func())
	Recent(n int, filter func(events.Event) bool) []events.Event
	LastID() uint64
	AddDestination(d events.Destination) error
	RemoveDestination(id string) bool
	Destinations() []events.Destination
}

// Routes are the routes of the EventService (the core's routes.go gathers them).
var Routes = []service.Route[*Service]{
	{Pattern: "GET /redfish/v1/EventService", Priv: service.Login, Handler: (*Service).getEventService},
	{Pattern: "GET /redfish/v1/EventService/SSE", Priv: service.Login, Handler: (*Service).getSSE},
	{Pattern: "GET /redfish/v1/EventService/Subscriptions", Priv: service.Login, Handler: (*Service).getSubscriptions},
	{Pattern: "POST /redfish/v1/EventService/Subscriptions", Priv: service.ConfigureComponents, Handler: (*Service).postSubscription},
	{Pattern: "GET /redfish/v1/EventService/Subscriptions/{id}", Priv: service.Login, Handler: (*Service).getSubscription},
	{Pattern: "DELETE /redfish/v1/EventService/Subscriptions/{id}", Priv: service.ConfigureComponents, Handler: (*Service).deleteSubscription},
	{Pattern: "POST /redfish/v1/EventService/Actions/EventService.SubmitTestEvent", Priv: service.ConfigureManager, Handler: (*Service).submitTestEvent},
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

// Event formats (EventService.EventFormatTypes).
const (
	formatEvent        = "Event"
	formatMetricReport = "MetricReport"
)

// eventFormats are the EventFormatTypes s streams.
func (s *Service) eventFormats() []string {
	if s.fabric != nil {
		return []string{formatEvent, formatMetricReport}
	}
	return []string{formatEvent}
}

func (s *Service) getEventService(w http.ResponseWriter, r *http.Request) error {
	service.WriteJSON(w, http.StatusOK, map[string]any{
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
			"ResourceType": false, "EventFormatType": true, "MetricReportDefinition": s.fabric != nil, "SubordinateResources": false,
		},
		"Subscriptions": rf.Ref("/redfish/v1/EventService/Subscriptions"),
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
func errQueryInvalid(param, resolution string) *rf.Problem {
	return odata.Invalid(param, resolution)
}

// errSSEFilter answers $filter on the SSE stream, which is no collection
// and takes its filters as parameters of their own.
func errSSEFilter() *rf.Problem {
	return odata.NotOnResource("$filter applies to resource collections; filter the SSE stream with EventFormatType, " +
		"MetricReportDefinition, EventTypes, MessageIds, RegistryPrefixes or OriginResources.")
}

// sseFormat reads which payloads the SSE client asks for: EventFormatType
// (Event, the default, or MetricReport, one of them) and
// MetricReportDefinition (FabricTelemetry, by Id or URI; it implies
// MetricReport). It reports whether the stream is of metric reports.
func (s *Service) sseFormat(r *http.Request) (bool, error) {
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
		if s.fabric == nil {
			return false, errQueryInvalid("MetricReportDefinition", "This service streams no metric reports.")
		}
		if d != telemetryservice.FabricTelemetryID && strings.TrimSuffix(d, "/") != telemetryservice.ReportDefinitionsPath+"/"+telemetryservice.FabricTelemetryID {
			return false, errQueryInvalid("MetricReportDefinition",
				"Use "+telemetryservice.FabricTelemetryID+" or "+telemetryservice.ReportDefinitionsPath+"/"+telemetryservice.FabricTelemetryID+".")
		}
	}
	reports := (len(formats) == 1 && formats[0] == formatMetricReport) || (len(formats) == 0 && len(defs) > 0)
	if !reports && len(defs) > 0 {
		return false, odata.Combination("MetricReportDefinition selects metric reports: use it with EventFormatType=MetricReport, not Event.")
	}
	if reports {
		for _, k := range sseEventFilters {
			if q.Has(k) {
				return false, odata.Combination(k + " selects events, which a stream of metric reports does not carry; remove it, or open a second stream for events.")
			}
		}
	}
	return reports, nil
}

func (s *Service) getSSE(w http.ResponseWriter, r *http.Request) error {
	p := service.Principal(r)
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
			return rf.New(http.StatusBadRequest, rf.Registry+"HeaderInvalid",
				fmt.Sprintf("The header '%s' is invalid.", "Last-Event-ID: "+v), "Last-Event-ID: "+v)
		}
		since = n
	}
	s.streams.Add(1)
	defer s.streams.Add(-1)
	if reports {
		return s.streamMetricReports(w, r, s.fabric, since, v != "")
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

// RestoreSubscriptions loads the push subscriptions from the store and
// delivers to them from now on: the leader of several active replicas does
// (docs/ha.md), the others forward the subscriptions' routes to it.
func (s *Service) RestoreSubscriptions(ctx context.Context) error {
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

// DropSubscriptions stops delivering to every push subscription (their
// records stay): a replica that does not lead.
func (s *Service) DropSubscriptions() {
	for _, d := range s.events.Destinations() {
		s.events.RemoveDestination(d.ID)
	}
}

// saveSubscriptions stores the push subscriptions, as one setting.
func (s *Service) saveSubscriptions(ctx context.Context) error {
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

func (s *Service) visibleDestination(r *http.Request, id string) (events.Destination, error) {
	for _, d := range s.events.Destinations() {
		if d.ID == id && service.Principal(r).Sees(d.Tenant) {
			return d, nil
		}
	}
	return events.Destination{}, rf.NotFound("EventDestination", id)
}

func (s *Service) getSubscriptions(w http.ResponseWriter, r *http.Request) error {
	p := service.Principal(r)
	var members []rf.ODataID
	for _, d := range s.events.Destinations() {
		if p.Sees(d.Tenant) {
			members = append(members, rf.Ref(subscriptionsPath+d.ID))
		}
	}
	service.WriteJSON(w, http.StatusOK, rf.Collection("/redfish/v1/EventService/Subscriptions", "EventDestinationCollection", "Event Subscriptions", members))
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
		"RegistryPrefixes":    service.NonNil(d.RegistryPrefixes),
		"EventTypes":          service.NonNil(d.EventTypes),
		"OriginResources":     []rf.ODataID{},
		"Status":              map[string]string{"State": "Enabled", "Health": "OK"},
	}
	var origins []rf.ODataID
	for _, o := range d.OriginResources {
		origins = append(origins, rf.Ref(o))
	}
	if origins != nil {
		body["OriginResources"] = origins
	}
	if d.Tenant != "" {
		body["Oem"] = service.RackpoolOem("EventDestination", map[string]any{"Tenant": d.Tenant})
	}
	return body
}

func (s *Service) getSubscription(w http.ResponseWriter, r *http.Request) error {
	d, err := s.visibleDestination(r, r.PathValue("id"))
	if err != nil {
		return err
	}
	service.WriteJSON(w, http.StatusOK, destinationBody(d))
	return nil
}

func (s *Service) postSubscription(w http.ResponseWriter, r *http.Request) error {
	var body struct {
		Destination      *string
		Context          string
		Protocol         string
		SubscriptionType string
		EventFormatType  string
		EventTypes       []string
		RegistryPrefixes []string
		OriginResources  []rf.ODataID
	}
	if err := rf.Decode(r, &body, rf.MaxBody); err != nil {
		return err
	}
	if body.Destination == nil {
		return rf.PropertyMissing("Destination")
	}
	u, err := url.Parse(*body.Destination)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return rf.PropertyValue("Destination", *body.Destination, "Use an absolute http or https URL.")
	}
	if body.Protocol != "" && body.Protocol != "Redfish" {
		return rf.PropertyValue("Protocol", body.Protocol, "Only the Redfish protocol is supported.")
	}
	if body.SubscriptionType != "" && body.SubscriptionType != "RedfishEvent" {
		return rf.PropertyValue("SubscriptionType", body.SubscriptionType, "Use RedfishEvent; for SSE, GET /redfish/v1/EventService/SSE.")
	}
	if body.EventFormatType != "" && body.EventFormatType != "Event" {
		return rf.PropertyValue("EventFormatType", body.EventFormatType, "Only Event is supported.")
	}
	for _, t := range body.EventTypes {
		if !slices.Contains(eventTypes, t) {
			return rf.PropertyValue("EventTypes", t, "Use "+strings.Join(eventTypes, ", ")+".")
		}
	}
	for _, p := range body.RegistryPrefixes {
		if !slices.Contains(registryPrefixes, p) {
			return rf.PropertyValue("RegistryPrefixes", p, "Use "+strings.Join(registryPrefixes, ", ")+".")
		}
	}
	if len(s.events.Destinations()) >= maxSubscriptions {
		return rf.New(http.StatusServiceUnavailable, rf.Registry+"EventSubscriptionLimitExceeded",
			"The event subscription failed due to the number of simultaneous subscriptions exceeding the limit of the implementation.")
	}
	d := events.Destination{ID: service.RandomHex(6), URL: *body.Destination, Context: body.Context, Protocol: "Redfish",
		EventTypes: body.EventTypes, RegistryPrefixes: body.RegistryPrefixes, Tenant: service.Principal(r).Tenant}
	for _, o := range body.OriginResources {
		d.OriginResources = append(d.OriginResources, o.ID)
	}
	if err := s.events.AddDestination(d); err != nil {
		return rf.PropertyValue("Destination", *body.Destination, err.Error())
	}
	if err := s.saveSubscriptions(r.Context()); err != nil {
		s.events.RemoveDestination(d.ID)
		return err
	}
	w.Header().Set("Location", subscriptionsPath+d.ID)
	service.WriteJSON(w, http.StatusCreated, destinationBody(d))
	return nil
}

func (s *Service) deleteSubscription(w http.ResponseWriter, r *http.Request) error {
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

func (s *Service) submitTestEvent(w http.ResponseWriter, r *http.Request) error {
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
	if err := rf.Decode(r, &body, rf.MaxBody); err != nil {
		return err
	}
	e := events.Event{Type: cmp.Or(body.EventType, events.TypeAlert), MessageID: cmp.Or(body.MessageId, "Base.1.22.Success"),
		Message: cmp.Or(body.Message, "Test event."), Args: body.MessageArgs,
		Severity: cmp.Or(body.MessageSeverity, cmp.Or(body.Severity, events.SeverityOK)), Origin: body.OriginOfCondition}
	if !slices.Contains(eventTypes, e.Type) && e.Type != events.TypeOther {
		return rf.PropertyValue("EventType", e.Type, "Use "+strings.Join(eventTypes, ", ")+".")
	}
	if !slices.Contains([]string{events.SeverityOK, events.SeverityWarning, events.SeverityCritical}, e.Severity) {
		return rf.PropertyValue("MessageSeverity", e.Severity, "Use OK, Warning or Critical.")
	}
	s.events.Publish(e)
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// streamMetricReports is the SSE stream of EventFormatType=MetricReport:
// each new report as one message, its id the report's sequence number.
// With a Last-Event-ID the retained reports after it are sent first. The
// stream ends with the request, and when the event bus closes (serve's
// shutdown), like the event stream.
func (s *Service) streamMetricReports(w http.ResponseWriter, r *http.Request, t telemetryservice.FabricReports, lastID uint64, resume bool) error {
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
