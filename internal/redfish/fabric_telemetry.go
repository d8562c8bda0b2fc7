package redfish

import (
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"rackpool/internal/events"
	"rackpool/internal/fabric"
	"rackpool/internal/topology"
)

// Fabric telemetry (docs/telemetry.md): what the fabric monitor polls from
// the fabrics' devices (fabric.StatsReporter), condensed into one
// MetricReport per poll that stays small however many devices there are:
// per fabric and device kind the device count, mean and maximum
// utilisation, maximum temperature, link errors since the previous poll
// and links down, plus the ten hottest devices. It is served as
//
//	MetricReportDefinitions/FabricTelemetry  Periodic, every monitor interval
//	MetricReports/FabricTelemetry            the newest report; with ?history
//	                                         or ?since= the retained ones
//	MetricDefinitions/Fabric*                one per metric
//	EventService/SSE?EventFormatType=MetricReport
//	                                         each new report as it is made
//
// The reports never go on the event bus: they are not events, and would
// flood the Events log and the push subscriptions.
//
// Tenancy: the aggregates name fabrics and device kinds, which every
// account sees in the topology anyway, and no allocation; they are shown
// to everyone. The hottest-device values name devices, which may be
// composed into another tenant's systems (a tenant sees only the free pool
// and what it holds, tenancy.go): they are shown to unscoped accounts only,
// in GETs, in the history and on the stream alike.

// FabricTelemetryID is the Id of the fabric telemetry MetricReportDefinition
// and of its MetricReport.
const FabricTelemetryID = "FabricTelemetry"

// DefaultFabricHistory is how many fabric telemetry reports are kept by
// default: ten minutes at the monitor's default interval of 2 s.
const DefaultFabricHistory = 300

const (
	fabricHotDevices  = 10 // hottest devices in each report
	fabricSubBuffer   = 4  // reports queued for one SSE client before the oldest is dropped
	fabricUnknownKind = "unknown"
	// fabricTelemetryPointer is where an Endpoint carries its device's
	// telemetry (fabrics.go).
	fabricTelemetryPointer = "#/Oem/Rackpool/Telemetry/"
	fabricEndpointPattern  = fabricsURI + "{FabricId}/Endpoints/{EndpointId}" + fabricTelemetryPointer
	fabricsURI             = "/redfish/v1/Fabrics/"
)

// Metric IDs of the fabric telemetry report (MetricDefinition Ids).
const (
	metricFabricDevices          = "FabricDevices"
	metricFabricUtilisationMean  = "FabricUtilisationMean"
	metricFabricUtilisationMax   = "FabricUtilisationMax"
	metricFabricTemperatureMax   = "FabricTemperatureMax"
	metricFabricLinkErrors       = "FabricLinkErrors"
	metricFabricLinksDown        = "FabricLinksDown"
	metricFabricHotDeviceTemp    = "FabricHotDeviceTemperature"
	fabricHotDeviceMetricPointer = fabricTelemetryPointer + "TemperatureC"
)

// fabricMetric describes one metric of the report.
type fabricMetric struct {
	id          string
	units       string // UCUM
	dataType    string // MetricDataType
	metricType  string // MetricType
	function    string // CollectionFunction and CalculationAlgorithm; "" for none
	interval    bool   // counted over the interval since the previous poll
	sources     []string
	description string
}

// fabricMetrics are the report's metrics, in the order each group lists
// them.
var fabricMetrics = []fabricMetric{
	{metricFabricDevices, "{device}", "Integer", "Gauge", "", false, []string{"Device"},
		"The number of devices of the kind on the fabric that reported telemetry in the poll."},
	{metricFabricUtilisationMean, "%", "Decimal", "Gauge", "Average", false, []string{"UtilisationPercent"},
		"The mean utilisation of the devices of the kind on the fabric."},
	{metricFabricUtilisationMax, "%", "Decimal", "Gauge", "Maximum", false, []string{"UtilisationPercent"},
		"The highest utilisation of a device of the kind on the fabric."},
	{metricFabricTemperatureMax, "Cel", "Decimal", "Gauge", "Maximum", false, []string{"TemperatureC"},
		"The highest temperature of a device of the kind on the fabric."},
	{metricFabricLinkErrors, "{error}", "Integer", "Numeric", "Summation", true, []string{"CorrectableErrors", "UncorrectableErrs"},
		"The link errors, correctable and uncorrectable, the devices of the kind on the fabric logged since the previous poll (a counter that went down was reset and counts from 0; a device's first poll counts none)."},
	{metricFabricLinksDown, "{device}", "Integer", "Gauge", "", false, []string{"LinkWidth"},
		"The number of devices of the kind on the fabric whose link is down (negotiated width 0)."},
	{metricFabricHotDeviceTemp, "Cel", "Decimal", "Gauge", "", false, []string{"TemperatureC"},
		"The temperature of one of the ten hottest devices of all fabrics, hottest first; MetricProperty names the device's endpoint. Shown to accounts without a tenant only."},
}

func lookupFabricMetric(id string) (fabricMetric, bool) {
	for _, m := range fabricMetrics {
		if m.id == id {
			return m, true
		}
	}
	return fabricMetric{}, false
}

// FabricTelemetryOptions configure a FabricTelemetry. The zero value means
// every default.
type FabricTelemetryOptions struct {
	// Interval is the fabric monitor's polling period, advertised as the
	// report definition's RecurrenceInterval (default
	// events.DefaultMonitorInterval).
	Interval time.Duration
	// History is how many reports are kept (default DefaultFabricHistory).
	History int
	// Topology gives each device its kind; devices it does not know, and
	// every device when it is nil, are of kind "unknown".
	Topology *topology.Topology
}

// FabricTelemetry condenses the fabric monitor's polls into fabric
// telemetry reports, keeps the newest of them and hands each new one to
// the SSE clients that asked for metric reports. Create it before the
// monitor, pass its Record as events.MonitorOptions.Stats, and hand it to
// the Server with ServeFabricTelemetry. It is safe for concurrent use.
type FabricTelemetry struct {
	interval time.Duration
	top      *topology.Topology

	mu       sync.Mutex
	counters map[string]map[string]linkCounters // fabric → device → counters as last polled
	groups   map[groupKey]string                // MetricProperty of each group, made once
	ring     []*fabricReport                    // the retained reports; oldest at head once full
	head, n  int
	seq      uint64
	subs     map[*reportSub]struct{}
}

// NewFabricTelemetry returns an empty FabricTelemetry.
func NewFabricTelemetry(o FabricTelemetryOptions) *FabricTelemetry {
	if o.Interval <= 0 {
		o.Interval = events.DefaultMonitorInterval
	}
	if o.History <= 0 {
		o.History = DefaultFabricHistory
	}
	return &FabricTelemetry{interval: o.Interval, top: o.Topology, counters: map[string]map[string]linkCounters{},
		groups: map[groupKey]string{}, ring: make([]*fabricReport, o.History), subs: map[*reportSub]struct{}{}}
}

// linkCounters are a device's cumulative link error counters.
type linkCounters struct{ correctable, uncorrectable uint64 }

// groupKey is one fabric's devices of one kind.
type groupKey struct{ fabric, kind string }

// fabricGroup is one group's aggregates in one report.
type fabricGroup struct {
	property   string // MetricProperty: the fabric's endpoints of the kind
	devices    int
	utilN      int // devices with a utilisation (not NaN)
	utilSum    float64
	utilMax    float64 // NaN when utilN is 0
	tempMax    float64 // NaN when no device had a temperature
	linkErrors uint64
	linksDown  int
}

// hotDevice is one of a report's hottest devices.
type hotDevice struct {
	fabric, device string
	tempC          float64
}

// fabricReport is one poll's report. It is not changed once made.
type fabricReport struct {
	seq    uint64 // the SSE id
	at     time.Time
	groups []fabricGroup // by fabric, then kind
	hot    []hotDevice   // hottest first
}

// sseMessage is one report rendered for a stream.
type sseMessage struct {
	id   uint64
	data []byte
}

// reportSub is one SSE client's queue.
type reportSub struct {
	scoped bool // the client's account has a tenant: no device IDs
	ch     chan sseMessage
}

// Record makes the report of one poll (events.MonitorOptions.Stats): at is
// the poll's time, stats each answering fabric's devices. Link errors are
// counted against the counters the device had at its previous poll. An
// answer older than the newest report (from a poll that overlapped a
// later one) is ignored.
func (t *FabricTelemetry) Record(at time.Time, stats map[string][]fabric.DeviceStats) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if last := t.latestLocked(); last != nil && at.Before(last.at) {
		return
	}
	rep := &fabricReport{at: at}
	for _, fid := range slices.Sorted(maps.Keys(stats)) {
		prev := t.counters[fid]
		next := make(map[string]linkCounters, len(stats[fid]))
		byKind := map[string]*fabricGroup{}
		for _, d := range stats[fid] {
			kind := t.kind(d.Device)
			g := byKind[kind]
			if g == nil {
				g = &fabricGroup{property: t.groupProperty(fid, kind), utilMax: math.NaN(), tempMax: math.NaN()}
				byKind[kind] = g
			}
			g.add(d)
			c := linkCounters{d.CorrectableErrors, d.UncorrectableErrs}
			if p, ok := prev[d.Device]; ok {
				g.linkErrors += increase(p.correctable, c.correctable) + increase(p.uncorrectable, c.uncorrectable)
			}
			next[d.Device] = c
			if !math.IsNaN(d.TemperatureC) {
				rep.hot = addHot(rep.hot, hotDevice{fid, d.Device, d.TemperatureC})
			}
		}
		t.counters[fid] = next
		for _, kind := range slices.Sorted(maps.Keys(byKind)) {
			rep.groups = append(rep.groups, *byKind[kind])
		}
	}
	t.seq = max(t.seq+1, uint64(max(at.UnixMicro(), 0)))
	rep.seq = t.seq
	t.ring[(t.head+t.n)%len(t.ring)] = rep
	if t.n < len(t.ring) {
		t.n++
	} else {
		t.head = (t.head + 1) % len(t.ring)
	}
	var rendered [2][]byte // full, scoped
	for s := range t.subs {
		v := 0
		if s.scoped {
			v = 1
		}
		if rendered[v] == nil {
			rendered[v] = rep.payload(s.scoped)
		}
		s.offer(sseMessage{rep.seq, rendered[v]})
	}
}

// add counts device d into g.
func (g *fabricGroup) add(d fabric.DeviceStats) {
	g.devices++
	if d.LinkWidth == 0 {
		g.linksDown++
	}
	if u := d.UtilisationPercent; !math.IsNaN(u) {
		g.utilN++
		g.utilSum += u
		if math.IsNaN(g.utilMax) || u > g.utilMax {
			g.utilMax = u
		}
	}
	if c := d.TemperatureC; !math.IsNaN(c) && (math.IsNaN(g.tempMax) || c > g.tempMax) {
		g.tempMax = c
	}
}

// increase is how much a cumulative counter grew from prev to cur; a
// counter that went down was reset and counts from 0.
func increase(prev, cur uint64) uint64 {
	if cur < prev {
		return cur
	}
	return cur - prev
}

// addHot inserts h into hot (hottest first, then by fabric and device ID),
// keeping at most fabricHotDevices.
func addHot(hot []hotDevice, h hotDevice) []hotDevice {
	i, _ := slices.BinarySearchFunc(hot, h, hotter)
	if i >= fabricHotDevices {
		return hot
	}
	if len(hot) == fabricHotDevices {
		hot = hot[:fabricHotDevices-1]
	}
	return slices.Insert(hot, i, h)
}

// hotter orders hot devices hottest first.
func hotter(a, b hotDevice) int {
	if a.tempC != b.tempC {
		if a.tempC > b.tempC {
			return -1
		}
		return 1
	}
	if c := strings.Compare(a.fabric, b.fabric); c != 0 {
		return c
	}
	return strings.Compare(a.device, b.device)
}

// kind is device's kind as the topology has it.
func (t *FabricTelemetry) kind(device string) string {
	if t.top != nil {
		if d := t.top.Device(device); d != nil {
			return string(d.Kind)
		}
	}
	return fabricUnknownKind
}

// groupProperty is the MetricProperty of a group's values: the fabric's
// endpoints, restricted to the kind. Made once per group. Call with t.mu
// held.
func (t *FabricTelemetry) groupProperty(fid, kind string) string {
	k := groupKey{fid, kind}
	p, ok := t.groups[k]
	if !ok {
		p = fabricsURI + fid + "/Endpoints?DeviceKind=" + kind
		t.groups[k] = p
	}
	return p
}

// offer queues m for s without waiting: a client that is
// fabricSubBuffer reports behind loses its oldest queued one (it sees the
// gap in the ids). Only Record offers, under the FabricTelemetry's lock.
func (s *reportSub) offer(m sseMessage) {
	select {
	case s.ch <- m:
		return
	default:
	}
	select {
	case <-s.ch:
	default:
	}
	select {
	case s.ch <- m:
	default:
	}
}

// latestLocked returns the newest report, nil when there is none. Call
// with t.mu held.
func (t *FabricTelemetry) latestLocked() *fabricReport {
	if t.n == 0 {
		return nil
	}
	return t.ring[(t.head+t.n-1)%len(t.ring)]
}

// reports returns the retained reports, oldest first.
func (t *FabricTelemetry) reports() []*fabricReport {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]*fabricReport, t.n)
	for i := range t.n {
		out[i] = t.ring[(t.head+i)%len(t.ring)]
	}
	return out
}

// subscribe registers an SSE client. With resume, it also returns the
// retained reports newer than lastID (an SSE Last-Event-ID), oldest
// first, for the client to send before what arrives on the channel.
func (t *FabricTelemetry) subscribe(scoped bool, lastID uint64, resume bool) ([]*fabricReport, <-chan sseMessage, func()) {
	s := &reportSub{scoped: scoped, ch: make(chan sseMessage, fabricSubBuffer)}
	t.mu.Lock()
	defer t.mu.Unlock()
	var replay []*fabricReport
	if resume {
		for i := range t.n {
			if rep := t.ring[(t.head+i)%len(t.ring)]; rep.seq > lastID {
				replay = append(replay, rep)
			}
		}
	}
	t.subs[s] = struct{}{}
	return replay, s.ch, func() {
		t.mu.Lock()
		defer t.mu.Unlock()
		delete(t.subs, s)
	}
}

// --- rendering --------------------------------------------------------------

// metricValue is one MetricReport MetricValues entry.
type metricValue struct {
	MetricID       string `json:"MetricId"`
	MetricValue    string `json:"MetricValue"`
	Timestamp      string `json:"Timestamp"`
	MetricProperty string `json:"MetricProperty"`
}

// metricReport is the FabricTelemetry MetricReport.
type metricReport struct {
	ODataID      string        `json:"@odata.id"`
	ODataType    string        `json:"@odata.type"`
	ID           string        `json:"Id"`
	Name         string        `json:"Name"`
	Description  string        `json:"Description,omitempty"`
	Definition   odataID       `json:"MetricReportDefinition"`
	Timestamp    string        `json:"Timestamp,omitempty"`
	MetricValues []metricValue `json:"MetricValues"`
}

func newMetricReport(at *fabricReport, values []metricValue) metricReport {
	mr := metricReport{ODataID: reportsPath + "/" + FabricTelemetryID, ODataType: metricReportType, ID: FabricTelemetryID,
		Name: "Fabric telemetry", Definition: ref(reportDefsPath + "/" + FabricTelemetryID), MetricValues: values}
	if mr.MetricValues == nil {
		mr.MetricValues = []metricValue{}
	}
	if at != nil {
		mr.Timestamp = timestamp(at.at)
	}
	return mr
}

func timestamp(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

// decimal renders v for MetricValue, rounded to two decimals.
func decimal(v float64) string {
	return strconv.FormatFloat(math.Round(v*100)/100, 'f', -1, 64)
}

// appendValues appends rep's values; scoped leaves out the hot devices.
func (rep *fabricReport) appendValues(out []metricValue, scoped bool) []metricValue {
	ts := timestamp(rep.at)
	for _, g := range rep.groups {
		mean := math.NaN()
		if g.utilN > 0 {
			mean = g.utilSum / float64(g.utilN)
		}
		out = append(out, metricValue{metricFabricDevices, strconv.Itoa(g.devices), ts, g.property})
		for _, v := range []struct {
			id string
			v  float64
		}{{metricFabricUtilisationMean, mean}, {metricFabricUtilisationMax, g.utilMax}, {metricFabricTemperatureMax, g.tempMax}} {
			if !math.IsNaN(v.v) { // no device of the group had the value
				out = append(out, metricValue{v.id, decimal(v.v), ts, g.property})
			}
		}
		out = append(out,
			metricValue{metricFabricLinkErrors, strconv.FormatUint(g.linkErrors, 10), ts, g.property},
			metricValue{metricFabricLinksDown, strconv.Itoa(g.linksDown), ts, g.property})
	}
	if !scoped {
		for _, h := range rep.hot {
			out = append(out, metricValue{metricFabricHotDeviceTemp, decimal(h.tempC), ts,
				fabricsURI + h.fabric + "/Endpoints/" + h.device + fabricHotDeviceMetricPointer})
		}
	}
	return out
}

// payload is rep as the MetricReport JSON an SSE message carries.
func (rep *fabricReport) payload(scoped bool) []byte {
	data, err := json.Marshal(newMetricReport(rep, rep.appendValues(nil, scoped)))
	if err != nil {
		panic(err) // strings only: cannot fail
	}
	return data
}

// writeReportSSE writes one report message.
func writeReportSSE(w http.ResponseWriter, m sseMessage) error {
	b := make([]byte, 0, len(m.data)+32)
	b = append(b, "id: "...)
	b = strconv.AppendUint(b, m.id, 10)
	b = append(b, "\ndata: "...)
	b = append(b, m.data...)
	b = append(b, "\n\n"...)
	_, err := w.Write(b)
	return err
}

// fabricDuration renders d as an ISO 8601 duration, fractions of a second
// included (isoDuration rounds them away).
func fabricDuration(d time.Duration) string {
	if d%time.Second == 0 {
		return isoDuration(d)
	}
	return "PT" + strconv.FormatFloat(d.Seconds(), 'f', -1, 64) + "S"
}

// --- the Server's side ------------------------------------------------------

// ServeFabricTelemetry makes s serve t's reports: the FabricTelemetry
// report, its definition and metric definitions in the TelemetryService,
// and the SSE stream's EventFormatType=MetricReport. Call it once, before
// serving.
func (s *Server) ServeFabricTelemetry(t *FabricTelemetry) { s.fabricTel = t }

// fabricTelemetry returns what ServeFabricTelemetry gave s, nil if nothing.
func (s *Server) fabricTelemetry() *FabricTelemetry { return s.fabricTel }

// metricDefinition is the MetricDefinition of m.
func (t *FabricTelemetry) metricDefinition(m fabricMetric) map[string]any {
	props := make([]string, len(m.sources))
	for i, src := range m.sources {
		props[i] = fabricEndpointPattern + src
	}
	body := map[string]any{
		"@odata.id":        metricDefsPath + "/" + m.id,
		"@odata.type":      metricDefType,
		"Id":               m.id,
		"Name":             m.id,
		"Description":      m.description,
		"MetricType":       m.metricType,
		"MetricDataType":   m.dataType,
		"Units":            m.units,
		"Implementation":   "Calculated",
		"Calculable":       "NonSummable",
		"SensingInterval":  fabricDuration(t.interval),
		"MetricProperties": props,
	}
	if m.function == "Summation" || m.id == metricFabricDevices || m.id == metricFabricLinksDown {
		body["Calculable"] = "Summable"
	}
	if m.function == "Average" || m.function == "Maximum" {
		body["CalculationAlgorithm"] = m.function
	}
	if m.interval {
		body["CalculationTimeInterval"] = fabricDuration(t.interval)
	}
	return body
}

// reportDefinition is the FabricTelemetry MetricReportDefinition.
func (t *FabricTelemetry) reportDefinition() map[string]any {
	metrics := make([]map[string]any, len(fabricMetrics))
	for i, m := range fabricMetrics {
		props := make([]string, len(m.sources))
		for j, src := range m.sources {
			props[j] = fabricEndpointPattern + src
		}
		e := map[string]any{"MetricId": m.id, "MetricProperties": props, "CollectionTimeScope": "Point"}
		if m.function != "" {
			e["CollectionFunction"] = m.function
		}
		if m.interval {
			e["CollectionTimeScope"] = "Interval"
			e["CollectionDuration"] = fabricDuration(t.interval)
		}
		metrics[i] = e
	}
	return map[string]any{
		"@odata.id":   reportDefsPath + "/" + FabricTelemetryID,
		"@odata.type": reportDefType,
		"Id":          FabricTelemetryID,
		"Name":        "Fabric telemetry",
		"Description": fmt.Sprintf("Every poll of the fabric monitor: per fabric and device kind (MetricProperty "+
			"/redfish/v1/Fabrics/{FabricId}/Endpoints?DeviceKind={kind}) the devices, mean and maximum utilisation, "+
			"maximum temperature, link errors since the previous poll and links down; and the %d hottest devices "+
			"(accounts without a tenant only). The newest %d reports are kept: GET the report with ?history[=N] or "+
			"?since=RFC3339 for them; stream new ones with GET /redfish/v1/EventService/SSE?EventFormatType=MetricReport.",
			fabricHotDevices, len(t.ring)),
		"MetricReportDefinitionType":    "Periodic",
		"Schedule":                      map[string]any{"RecurrenceInterval": fabricDuration(t.interval)},
		"MetricReportDefinitionEnabled": true,
		"ReportActions":                 []string{"LogToMetricReportsCollection", "RedfishEvent"},
		"ReportUpdates":                 "Overwrite",
		"Status":                        map[string]string{"State": "Enabled", "Health": "OK"},
		"Metrics":                       metrics,
		"MetricReport":                  ref(reportsPath + "/" + FabricTelemetryID),
	}
}

// historyQuery reads the report's Oem query: ?history (every retained
// report), ?history=N (the newest N) and ?since=RFC3339 (those after it).
// ok is false when neither is given: the newest report only.
func historyQuery(r *http.Request) (limit int, since time.Time, ok bool, err error) {
	q := r.URL.Query()
	if vs, has := q["history"]; has {
		ok = true
		if v := vs[0]; v != "" {
			n, perr := strconv.Atoi(v)
			if perr != nil || n < 1 {
				return 0, time.Time{}, false, errQueryValue("history", v)
			}
			limit = n
		}
	}
	if vs, has := q["since"]; has {
		ok = true
		t, perr := time.Parse(time.RFC3339Nano, vs[0])
		if perr != nil {
			return 0, time.Time{}, false, errQueryValue("since", vs[0])
		}
		since = t
	}
	return limit, since, ok, nil
}

// getFabricTelemetryReport answers the newest report or, with the history
// query, the retained ones oldest first (each value has its poll's
// Timestamp; the report's Timestamp is the newest one's).
func (s *Server) getFabricTelemetryReport(w http.ResponseWriter, r *http.Request, t *FabricTelemetry) error {
	limit, since, history, err := historyQuery(r)
	if err != nil {
		return err
	}
	scoped := principal(r).Tenant != ""
	reps := t.reports()
	var newest *fabricReport
	if len(reps) > 0 {
		newest = reps[len(reps)-1]
	}
	if !history {
		if newest == nil {
			writeJSON(w, http.StatusOK, newMetricReport(nil, nil))
			return nil
		}
		writeJSON(w, http.StatusOK, json.RawMessage(newest.payload(scoped)))
		return nil
	}
	if !since.IsZero() {
		i, _ := slices.BinarySearchFunc(reps, since, func(rep *fabricReport, t time.Time) int {
			if rep.at.After(t) {
				return 1
			}
			return -1
		})
		reps = reps[i:]
	}
	if limit > 0 && len(reps) > limit {
		reps = reps[len(reps)-limit:]
	}
	var values []metricValue
	for _, rep := range reps {
		values = rep.appendValues(values, scoped)
	}
	writeJSON(w, http.StatusOK, newMetricReport(newest, values))
	return nil
}

// streamMetricReports is the SSE stream of EventFormatType=MetricReport:
// each new report as one message, its id the report's sequence number.
// With a Last-Event-ID the retained reports after it are sent first. The
// stream ends with the request, and when the event bus closes (serve's
// shutdown), like the event stream.
func (s *Server) streamMetricReports(w http.ResponseWriter, r *http.Request, t *FabricTelemetry, lastID uint64, resume bool) error {
	scoped := principal(r).Tenant != ""
	closed, stop := s.events.Subscribe(func(events.Event) bool { return false }, s.events.LastID())
	defer stop()
	replay, ch, cancel := t.subscribe(scoped, lastID, resume)
	defer cancel()
	rc := http.NewResponseController(w)
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.Header().Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	for _, rep := range replay {
		if err := writeReportSSE(w, sseMessage{rep.seq, rep.payload(scoped)}); err != nil {
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
		case m := <-ch:
			if err := writeReportSSE(w, m); err != nil {
				return nil
			}
		}
		if err := rc.Flush(); err != nil {
			return nil
		}
	}
}
