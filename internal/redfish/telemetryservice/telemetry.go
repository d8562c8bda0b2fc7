package telemetryservice

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"rackpool/internal/inventory"
	"rackpool/internal/lease"
	"rackpool/internal/metrics"
	"rackpool/internal/redfish/service"
	"rackpool/internal/rf"
	"rackpool/internal/telemetry"
	"rackpool/internal/tenancy"
)

// Service serves the TelemetryService: usage telemetry (what composed
// systems, memory leases and caches use, pushed by agents, memnodes and
// caches) and the fabric telemetry report (fabric.go), either of which
// makes the service.
type Service struct {
	core    service.Hider
	hosts   Hosts
	systems Systems
	leases  Leases        // nil: no memory service
	tel     UsageStore    // nil: no usage telemetry
	fabric  FabricReports // nil: no fabric telemetry (ServeFabric)
	log     *slog.Logger
}

// UsageStore keeps the usage samples the TelemetryService serves
// (telemetry.Store).
type UsageStore interface {
	AppendAllContext(ctx context.Context, batches []telemetry.Batch) error
	Latest(key telemetry.Key) (telemetry.Sample, bool)
	LatestAll(f telemetry.Filter) []telemetry.Reading
	Window(key telemetry.Key, since time.Time) []telemetry.Sample
	Len() int
	Now() time.Time
	Retention() time.Duration
}

// Hosts finds physical hosts (topology.Topology).
type Hosts interface {
	Host(id string) *inventory.Host
}

// Systems finds composed systems (compose.Manager).
type Systems interface {
	Get(id string) (*inventory.Composition, error)
}

// Leases finds memory leases (lease.Manager).
type Leases interface {
	Get(id, tenant string) (lease.Lease, error)
}

// Deps are what a Service serves from.
type Deps struct {
	Core    service.Hider // tenant hiding (the core service)
	Hosts   Hosts
	Systems Systems
	Leases  Leases     // nil: no memory service
	Usage   UsageStore // nil: no usage telemetry
	Logger  *slog.Logger
}

// New returns a Service over d; fabric telemetry is added by ServeFabric.
func New(d Deps) *Service {
	return &Service{core: d.Core, hosts: d.Hosts, systems: d.Systems, leases: d.Leases, tel: d.Usage, log: d.Logger}
}

// Routes are the routes of usage telemetry: the TelemetryService with its
// metric definitions, report definitions and reports, one series as JSON
// (Oem), and the pushes of usage samples. The core's routes.go gathers
// them. The fabric telemetry report and its definitions (fabric.go) are
// served through the same routes.
var Routes = []service.Route[*Service]{
	{Pattern: "GET /redfish/v1/TelemetryService", Priv: service.Login, Handler: (*Service).getTelemetryService},
	{Pattern: "GET /redfish/v1/TelemetryService/MetricDefinitions", Priv: service.Login, Handler: (*Service).getMetricDefinitions},
	{Pattern: "GET /redfish/v1/TelemetryService/MetricDefinitions/{id}", Priv: service.Login, Handler: (*Service).getMetricDefinition},
	{Pattern: "GET /redfish/v1/TelemetryService/MetricReportDefinitions", Priv: service.Login, Handler: (*Service).getMetricReportDefinitions},
	{Pattern: "GET /redfish/v1/TelemetryService/MetricReportDefinitions/{id}", Priv: service.Login, Handler: (*Service).getMetricReportDefinition},
	{Pattern: "GET /redfish/v1/TelemetryService/MetricReports", Priv: service.Login, Handler: (*Service).getMetricReports},
	{Pattern: "GET /redfish/v1/TelemetryService/MetricReports/{id}", Priv: service.Login, Handler: (*Service).getMetricReport},
	{Pattern: "GET /redfish/v1/TelemetryService/Oem/Rackpool/Series/{kind}/{source}/{metric}", Priv: service.Login, Handler: (*Service).getUsageSeries},
	{Pattern: "POST /redfish/v1/Systems/{id}/Actions/Oem/Rackpool.SubmitUsage", Priv: service.ConfigureComponents, Handler: (*Service).submitSystemUsage},
	{Pattern: "POST /redfish/v1/Oem/Rackpool/MemoryLeases/{id}/Actions/Oem/Rackpool.SubmitUsage", Priv: service.ConfigureComponents, Handler: (*Service).submitLeaseUsage},
}

// Usage telemetry (docs/telemetry.md). Agents on composed hosts push what
// a system uses (SubmitUsage on the system), caches push how they use
// their memory lease (SubmitUsage on the lease), memnodes report each
// lease's bytes in use in their heartbeat (the core's memory.go calls
// RecordLeaseUsage). Samples go to the telemetry store; they are read back
// as one MetricReport per source kind (the newest value of each series),
// one series at a time (Oem), and as Prometheus gauges. A tenant's accounts see and push only for their
// tenant's systems and leases; physical hosts are the unscoped accounts'.

const (
	// Path is the TelemetryService; ReportDefinitionsPath its metric
	// report definitions (EventService's MetricReportDefinition filter).
	Path                  = "/redfish/v1/TelemetryService"
	leasesPath            = "/redfish/v1/Oem/Rackpool/MemoryLeases"
	metricDefsPath        = Path + "/MetricDefinitions"
	ReportDefinitionsPath = Path + "/MetricReportDefinitions"
	reportsPath           = Path + "/MetricReports"
	usageSeriesPath       = Path + "/Oem/Rackpool/Series"
	maxUsageSamples       = 4096 // per push (api.MaxUsageSamples)
	usageSeriesType       = "#RackpoolTelemetrySeries.v1_0_0.RackpoolTelemetrySeries"
	metricReportType      = "#MetricReport.v1_5_2.MetricReport"
	reportDefType         = "#MetricReportDefinition.v1_4_7.MetricReportDefinition"
	metricDefType         = "#MetricDefinition.v1_3_5.MetricDefinition"
	telemetryServType     = "#TelemetryService.v1_4_1.TelemetryService"
)

func errNoTelemetry() *rf.Problem {
	return rf.New(http.StatusNotFound, rf.Registry+"ResourceMissingAtURI",
		"The telemetry service is not enabled on this service.")
}

// reportID is the ID of the report definition and report of kind k.
func reportID(k telemetry.Kind) string { return string(k) + "Usage" }

func reportKind(id string) (telemetry.Kind, bool) {
	for _, k := range telemetry.Kinds {
		if reportID(k) == id {
			return k, true
		}
	}
	return "", false
}

// sourcePath is the @odata.id of a series' source.
func sourcePath(k telemetry.Kind, id string) string {
	if k == telemetry.System {
		return "/redfish/v1/Systems/" + id
	}
	return leasesPath + "/" + id // a lease, or the lease a cache lives on
}

// usageSource is a source as the tenancy rules see it.
type usageSource struct {
	exists bool
	host   bool   // a physical host: unscoped accounts only
	tenant string // owner of a composed system or lease
}

func (s *Service) lookupSource(k telemetry.Kind, id string) usageSource {
	switch k {
	case telemetry.System:
		if s.hosts.Host(id) != nil {
			return usageSource{exists: true, host: true}
		}
		if c, err := s.systems.Get(id); err == nil && c.State != inventory.Reserved {
			return usageSource{exists: true, tenant: c.Tenant}
		}
	case telemetry.MemoryLease, telemetry.Cache:
		if s.leases != nil {
			if l, err := s.leases.Get(id, ""); err == nil {
				return usageSource{exists: true, tenant: l.Tenant}
			}
		}
	}
	return usageSource{}
}

// sees reports whether p may see the usage of src: unscoped accounts see
// every series, also of sources gone since; a tenant's accounts only those
// of its own systems and leases that exist now.
func (src usageSource) seenBy(p tenancy.Principal) bool {
	if p.Tenant == "" {
		return true
	}
	return src.exists && !src.host && src.tenant == p.Tenant
}

// kindName is the Redfish type a source of kind k is, for 404s.
func kindName(k telemetry.Kind) string {
	if k == telemetry.System {
		return "ComputerSystem"
	}
	return "RackpoolMemoryLease"
}

// --- pushes ------------------------------------------------------------------

// submitSystemUsage stores what an agent on the system reports it uses.
func (s *Service) submitSystemUsage(w http.ResponseWriter, r *http.Request) error {
	return s.submitUsage(w, r, telemetry.System)
}

// submitLeaseUsage stores how a lease's holder (a cache's remote tier)
// uses it, as the Cache series of the lease.
func (s *Service) submitLeaseUsage(w http.ResponseWriter, r *http.Request) error {
	return s.submitUsage(w, r, telemetry.Cache)
}

// submitUsage checks that the source exists and the principal's tenant
// owns it (404 otherwise, as a GET answers: existence does not leak),
// then decodes and stores the push whole or not at all. A stored push is
// not audited (an agent pushes every few seconds); a refused one is.
func (s *Service) submitUsage(w http.ResponseWriter, r *http.Request, kind telemetry.Kind) error {
	if s.tel == nil {
		return errNoTelemetry()
	}
	id := r.PathValue("id")
	src := s.lookupSource(kind, id)
	if !src.exists {
		return rf.NotFound(kindName(kind), id)
	}
	if !src.seenBy(service.Principal(r)) {
		return s.core.Hide(r, kindName(kind), id)
	}
	batches, err := decodeUsage(r, kind, id)
	if err != nil {
		return err
	}
	if err := s.tel.AppendAllContext(r.Context(), batches); err != nil {
		if errors.Is(err, telemetry.ErrNotStored) {
			return err // the store's failure: 503 when it is unreachable, else 500
		}
		return translateTelemetry(err)
	}
	service.NoteRoutine(r)
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// decodeUsage reads {"Samples": [{"MetricId", "Timestamp", "Value"}]}
// strictly, grouping the samples by metric in the order given.
func decodeUsage(r *http.Request, kind telemetry.Kind, id string) ([]telemetry.Batch, error) {
	var body struct {
		Samples []struct {
			MetricId  *string
			Timestamp *string
			Value     *float64
		}
	}
	if err := rf.Decode(r, &body, rf.MaxBody); err != nil {
		return nil, err
	}
	if body.Samples == nil {
		return nil, rf.PropertyMissing("Samples")
	}
	if len(body.Samples) == 0 || len(body.Samples) > maxUsageSamples {
		return nil, rf.PropertyValue("Samples", fmt.Sprintf("%d samples", len(body.Samples)),
			fmt.Sprintf("Send 1 to %d samples in one request.", maxUsageSamples))
	}
	var out []telemetry.Batch
	index := map[string]int{}
	for i, sm := range body.Samples {
		at := fmt.Sprintf("Samples/%d/", i)
		switch {
		case sm.MetricId == nil:
			return nil, rf.PropertyMissing(at + "MetricId")
		case sm.Timestamp == nil:
			return nil, rf.PropertyMissing(at + "Timestamp")
		case sm.Value == nil:
			return nil, rf.PropertyMissing(at + "Value")
		}
		t, err := time.Parse(time.RFC3339Nano, *sm.Timestamp)
		if err != nil {
			return nil, rf.PropertyValue(at+"Timestamp", *sm.Timestamp, "Give the time as RFC 3339, e.g. 2025-01-01T12:00:00Z.")
		}
		j, ok := index[*sm.MetricId]
		if !ok {
			j = len(out)
			index[*sm.MetricId] = j
			out = append(out, telemetry.Batch{Key: telemetry.Key{Kind: kind, Source: id, Metric: *sm.MetricId}})
		}
		out[j].Samples = append(out[j].Samples, telemetry.Sample{Time: t, Value: *sm.Value})
	}
	return out, nil
}

// translateTelemetry maps the store's refusals: too many series is a lack
// of room (409); anything else is the request's fault (400), with the
// store's words, which name the series and sample.
func translateTelemetry(err error) *rf.Problem {
	if errors.Is(err, telemetry.ErrTooManySeries) {
		return rf.New(http.StatusConflict, rf.Registry+"ResourceExhaustion",
			"The resource 'TelemetryService' was unable to satisfy the request due to unavailability of resources.", "TelemetryService").
			Resolve(err.Error())
	}
	e := rf.New(http.StatusBadRequest, rf.Registry+"GeneralError", err.Error())
	e.Resolution = "Correct the samples and resubmit the request; nothing of it was stored."
	return e
}

// RecordLeaseUsage stores a memnode's report of its leases' bytes in use
// (already checked by the lease manager) at the time it arrived. A sample
// the store refuses (a clock that went back) is logged and dropped: the
// heartbeat itself succeeded.
func (s *Service) RecordLeaseUsage(node string, usage map[string]uint64) {
	if s.tel == nil || len(usage) == 0 {
		return
	}
	now := s.tel.Now()
	batches := make([]telemetry.Batch, 0, len(usage))
	for id, used := range usage {
		batches = append(batches, telemetry.Batch{Key: telemetry.Key{Kind: telemetry.MemoryLease, Source: id, Metric: telemetry.LeaseBytesInUse},
			Samples: []telemetry.Sample{{Time: now, Value: float64(used)}}})
	}
	if err := s.tel.AppendAllContext(context.Background(), batches); err != nil {
		s.log.Warn("memory node's lease usage not recorded", "node", node, "err", err)
	}
}

// --- reads -------------------------------------------------------------------

// telemetryOn answers errNoTelemetry() unless s has usage telemetry or
// fabric telemetry (fabric.go), either of which makes the
// TelemetryService.
func (s *Service) telemetryOn() error {
	if s.tel == nil && s.fabric == nil {
		return errNoTelemetry()
	}
	return nil
}

func (s *Service) getTelemetryService(w http.ResponseWriter, r *http.Request) error {
	if err := s.telemetryOn(); err != nil {
		return err
	}
	var about []string
	reports := 0
	if s.tel != nil {
		about = append(about, "what composed systems, memory leases and caches really use, as reported by rackpool agent, memnodes and caches")
		reports += len(telemetry.Kinds)
	}
	if s.fabric != nil {
		about = append(about, "the fabric devices' utilisation, temperatures and link errors, as the fabric monitor polls them (FabricTelemetry)")
		reports++
	}
	desc := strings.Join(about, "; and ") + "."
	service.WriteJSON(w, http.StatusOK, map[string]any{
		"@odata.id":               Path,
		"@odata.type":             telemetryServType,
		"Id":                      "TelemetryService",
		"Name":                    "Telemetry Service",
		"Description":             strings.ToUpper(desc[:1]) + desc[1:],
		"ServiceEnabled":          true,
		"Status":                  map[string]string{"State": "Enabled", "Health": "OK"},
		"MaxReports":              reports,
		"MetricDefinitions":       rf.Ref(metricDefsPath),
		"MetricReportDefinitions": rf.Ref(ReportDefinitionsPath),
		"MetricReports":           rf.Ref(reportsPath),
	})
	return nil
}

func (s *Service) getMetricDefinitions(w http.ResponseWriter, r *http.Request) error {
	if err := s.telemetryOn(); err != nil {
		return err
	}
	var members []rf.ODataID
	if s.tel != nil {
		for _, k := range telemetry.Kinds {
			for _, m := range telemetry.Metrics(k) {
				members = append(members, rf.Ref(metricDefsPath+"/"+m.Name))
			}
		}
	}
	if s.fabric != nil {
		for _, m := range fabricMetrics {
			members = append(members, rf.Ref(metricDefsPath+"/"+m.id))
		}
	}
	service.WriteJSON(w, http.StatusOK, rf.Collection(metricDefsPath, "MetricDefinitionCollection", "Metric definitions", members))
	return nil
}

func (s *Service) getMetricDefinition(w http.ResponseWriter, r *http.Request) error {
	if err := s.telemetryOn(); err != nil {
		return err
	}
	id := r.PathValue("id")
	if ft := s.fabric; ft != nil {
		if m, ok := lookupFabricMetric(id); ok {
			service.WriteJSON(w, http.StatusOK, metricDefinition(m, ft.Interval()))
			return nil
		}
	}
	if s.tel == nil {
		return rf.NotFound("MetricDefinition", id)
	}
	for _, k := range telemetry.Kinds {
		if m, ok := telemetry.Lookup(k, id); ok {
			service.WriteJSON(w, http.StatusOK, map[string]any{
				"@odata.id":      metricDefsPath + "/" + id,
				"@odata.type":    metricDefType,
				"Id":             id,
				"Name":           id,
				"Description":    m.Help + " (" + string(k) + ")",
				"MetricType":     "Gauge",
				"MetricDataType": "Decimal",
				"Units":          m.Unit,
			})
			return nil
		}
	}
	return rf.NotFound("MetricDefinition", id)
}

func (s *Service) getMetricReportDefinitions(w http.ResponseWriter, r *http.Request) error {
	return s.perKindCollection(w, ReportDefinitionsPath, "MetricReportDefinitionCollection", "Metric report definitions")
}

// perKindCollection answers a collection with one member per source kind,
// and FabricTelemetry when s serves fabric telemetry.
func (s *Service) perKindCollection(w http.ResponseWriter, path, typ, name string) error {
	if err := s.telemetryOn(); err != nil {
		return err
	}
	var members []rf.ODataID
	if s.tel != nil {
		for _, k := range telemetry.Kinds {
			members = append(members, rf.Ref(path+"/"+reportID(k)))
		}
	}
	if s.fabric != nil {
		members = append(members, rf.Ref(path+"/"+FabricTelemetryID))
	}
	service.WriteJSON(w, http.StatusOK, rf.Collection(path, typ, name, members))
	return nil
}

func (s *Service) getMetricReportDefinition(w http.ResponseWriter, r *http.Request) error {
	if err := s.telemetryOn(); err != nil {
		return err
	}
	id := r.PathValue("id")
	if ft := s.fabric; ft != nil && id == FabricTelemetryID {
		service.WriteJSON(w, http.StatusOK, reportDefinition(ft))
		return nil
	}
	k, ok := reportKind(id)
	if !ok || s.tel == nil {
		return rf.NotFound("MetricReportDefinition", id)
	}
	var ms []map[string]string
	for _, m := range telemetry.Metrics(k) {
		ms = append(ms, map[string]string{"MetricId": m.Name, "CollectionTimeScope": "Point"})
	}
	service.WriteJSON(w, http.StatusOK, map[string]any{
		"@odata.id":                     ReportDefinitionsPath + "/" + id,
		"@odata.type":                   reportDefType,
		"Id":                            id,
		"Name":                          string(k) + " usage",
		"Description":                   fmt.Sprintf("The newest value of each %s metric of each %s, on request; samples are kept %s.", string(k), string(k), s.tel.Retention()),
		"MetricReportDefinitionType":    "OnRequest",
		"MetricReportDefinitionEnabled": true,
		"ReportActions":                 []string{"LogToMetricReportsCollection"},
		"ReportUpdates":                 "Overwrite",
		"Status":                        map[string]string{"State": "Enabled", "Health": "OK"},
		"Metrics":                       ms,
		"MetricReport":                  rf.Ref(reportsPath + "/" + id),
	})
	return nil
}

func (s *Service) getMetricReports(w http.ResponseWriter, r *http.Request) error {
	return s.perKindCollection(w, reportsPath, "MetricReportCollection", "Metric reports")
}

// getMetricReport answers the newest value of every series of the
// report's kind whose source the principal may see, or the fabric
// telemetry report (getFabricTelemetryReport).
func (s *Service) getMetricReport(w http.ResponseWriter, r *http.Request) error {
	if err := s.telemetryOn(); err != nil {
		return err
	}
	id := r.PathValue("id")
	if ft := s.fabric; ft != nil && id == FabricTelemetryID {
		return s.getFabricTelemetryReport(w, r, ft)
	}
	k, ok := reportKind(id)
	if !ok || s.tel == nil {
		return rf.NotFound("MetricReport", id)
	}
	p := service.Principal(r)
	seen := map[string]bool{}
	values := []map[string]string{}
	for _, rd := range s.tel.LatestAll(telemetry.Filter{Kind: k}) {
		visible, ok := seen[rd.Key.Source]
		if !ok {
			visible = s.lookupSource(k, rd.Key.Source).seenBy(p)
			seen[rd.Key.Source] = visible
		}
		if !visible {
			continue
		}
		values = append(values, map[string]string{
			"MetricId":       rd.Key.Metric,
			"MetricProperty": sourcePath(k, rd.Key.Source),
			"MetricValue":    strconv.FormatFloat(rd.Value, 'f', -1, 64),
			"Timestamp":      rd.Time.Format(time.RFC3339Nano),
		})
	}
	service.WriteJSON(w, http.StatusOK, map[string]any{
		"@odata.id":              reportsPath + "/" + id,
		"@odata.type":            metricReportType,
		"Id":                     id,
		"Name":                   string(k) + " usage",
		"MetricReportDefinition": rf.Ref(ReportDefinitionsPath + "/" + id),
		"Timestamp":              s.tel.Now().UTC().Format(time.RFC3339Nano),
		"MetricValues":           values,
	})
	return nil
}

// getUsageSeries answers one series as JSON (Oem): its samples since
// ?since= (RFC 3339; default all that are retained), at most the newest
// ?limit= of them.
func (s *Service) getUsageSeries(w http.ResponseWriter, r *http.Request) error {
	if s.tel == nil {
		return errNoTelemetry()
	}
	kindS, source, metric := r.PathValue("kind"), r.PathValue("source"), r.PathValue("metric")
	path := usageSeriesPath + "/" + kindS + "/" + source + "/" + metric
	kind, ok := telemetry.ParseKind(kindS)
	if !ok {
		return rf.NotFound("RackpoolTelemetrySeries", kindS+"/"+source+"/"+metric)
	}
	m, ok := telemetry.Lookup(kind, metric)
	if !ok {
		return rf.NotFound("RackpoolTelemetrySeries", kindS+"/"+source+"/"+metric)
	}
	q := r.URL.Query()
	var since time.Time
	if v := q.Get("since"); v != "" {
		t, err := time.Parse(time.RFC3339Nano, v)
		if err != nil {
			return service.ErrQueryValue("since", v)
		}
		since = t
	}
	limit := 0
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			return service.ErrQueryValue("limit", v)
		}
		limit = n
	}
	key := telemetry.Key{Kind: kind, Source: source, Metric: metric}
	src := s.lookupSource(kind, source)
	samples := s.tel.Window(key, since)
	if !src.exists && len(samples) == 0 && !s.hasSeries(key) {
		return rf.NotFound("RackpoolTelemetrySeries", kindS+"/"+source+"/"+metric)
	}
	if !src.seenBy(service.Principal(r)) {
		if !src.exists {
			return rf.NotFound("RackpoolTelemetrySeries", kindS+"/"+source+"/"+metric)
		}
		return s.core.Hide(r, kindName(kind), source)
	}
	if limit > 0 && len(samples) > limit {
		samples = samples[len(samples)-limit:]
	}
	out := make([]map[string]any, len(samples))
	for i, sm := range samples {
		out[i] = map[string]any{"Timestamp": sm.Time.Format(time.RFC3339Nano), "Value": sm.Value}
	}
	service.WriteJSON(w, http.StatusOK, map[string]any{
		"@odata.id":           path,
		"@odata.type":         usageSeriesType,
		"Id":                  metric,
		"Name":                key.String(),
		"Kind":                string(kind),
		"Source":              rf.Ref(sourcePath(kind, source)),
		"MetricId":            metric,
		"Units":               m.Unit,
		"Samples":             out,
		"Samples@odata.count": len(out),
	})
	return nil
}

// hasSeries reports whether the store holds key (with samples in the
// retention).
func (s *Service) hasSeries(key telemetry.Key) bool {
	_, ok := s.tel.Latest(key)
	return ok
}

// RegisterUsageMetrics registers rackpool_usage, the newest value of every
// series, in reg: at most telemetry.Options.MaxSeries samples a scrape.
// reg is exposed to unscoped accounts only (getMetrics): its labels name
// every tenant's systems and leases.
func (s *Service) RegisterUsageMetrics(reg *metrics.Registry) {
	reg.GaugeFunc("rackpool_usage", "Newest usage sample of each telemetry series (bytes, bytes per second or items, by metric).",
		[]string{"kind", "source", "metric"}, func() []metrics.Sample {
			rs := s.tel.LatestAll(telemetry.Filter{})
			out := make([]metrics.Sample, len(rs))
			for i, rd := range rs {
				out[i] = metrics.Sample{Labels: []string{string(rd.Key.Kind), rd.Key.Source, rd.Key.Metric}, Value: rd.Value}
			}
			return out
		})
	reg.GaugeFunc("rackpool_usage_series", "Telemetry series held (bounded by serve --telemetry-max-series).", nil, func() []metrics.Sample {
		return []metrics.Sample{{Value: float64(s.tel.Len())}}
	})
}
