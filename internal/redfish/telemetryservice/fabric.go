package telemetryservice

import (
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"slices"
	"strconv"
	"time"

	"rackpool/internal/redfish/service"
	"rackpool/internal/rf"
	"rackpool/internal/telemetry/fabricreport"
)

// FabricReports are the condensed fabric telemetry reports the
// TelemetryService and the SSE stream serve (fabricreport.Condenser).
type FabricReports interface {
	Interval() time.Duration
	History() int
	Reports() []*fabricreport.Report
	Subscribe(lastID uint64, resume bool) (replay []*fabricreport.Report, ch <-chan *fabricreport.Report, cancel func())
}

// Fabric telemetry (docs/telemetry.md): what the fabric monitor polls from
// the fabrics' devices, condensed into one report per poll
// (fabricreport.Condenser), rendered as a MetricReport. It is served as
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
// and what it holds, the core's tenancy.go): they are shown to unscoped accounts only,
// in GETs, in the history and on the stream alike.

// FabricTelemetryID is the Id of the fabric telemetry MetricReportDefinition
// and of its MetricReport.
const FabricTelemetryID = "FabricTelemetry"

const (
	// fabricTelemetryPointer is where an Endpoint carries its device's
	// telemetry (the core's fabrics.go).
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
	Definition   rf.ODataID    `json:"MetricReportDefinition"`
	Timestamp    string        `json:"Timestamp,omitempty"`
	MetricValues []metricValue `json:"MetricValues"`
}

func newMetricReport(at *fabricreport.Report, values []metricValue) metricReport {
	mr := metricReport{ODataID: reportsPath + "/" + FabricTelemetryID, ODataType: metricReportType, ID: FabricTelemetryID,
		Name: "Fabric telemetry", Definition: rf.Ref(ReportDefinitionsPath + "/" + FabricTelemetryID), MetricValues: values}
	if mr.MetricValues == nil {
		mr.MetricValues = []metricValue{}
	}
	if at != nil {
		mr.Timestamp = timestamp(at.At)
	}
	return mr
}

func timestamp(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

// decimal renders v for MetricValue, rounded to two decimals.
func decimal(v float64) string {
	return strconv.FormatFloat(math.Round(v*100)/100, 'f', -1, 64)
}

// appendValues appends rep's values; scoped leaves out the hot devices.
// Each group's MetricProperty is the fabric's endpoints, restricted to
// the kind.
func appendValues(out []metricValue, rep *fabricreport.Report, scoped bool) []metricValue {
	ts := timestamp(rep.At)
	for _, g := range rep.Groups {
		property := fabricsURI + g.Fabric + "/Endpoints?DeviceKind=" + g.Kind
		out = append(out, metricValue{metricFabricDevices, strconv.Itoa(g.Devices), ts, property})
		for _, v := range []struct {
			id string
			v  float64
		}{{metricFabricUtilisationMean, g.UtilMean}, {metricFabricUtilisationMax, g.UtilMax}, {metricFabricTemperatureMax, g.TempMax}} {
			if !math.IsNaN(v.v) { // no device of the group had the value
				out = append(out, metricValue{v.id, decimal(v.v), ts, property})
			}
		}
		out = append(out,
			metricValue{metricFabricLinkErrors, strconv.FormatUint(g.LinkErrors, 10), ts, property},
			metricValue{metricFabricLinksDown, strconv.Itoa(g.LinksDown), ts, property})
	}
	if !scoped {
		for _, h := range rep.Hot {
			out = append(out, metricValue{metricFabricHotDeviceTemp, decimal(h.TempC), ts,
				fabricsURI + h.Fabric + "/Endpoints/" + h.Device + fabricHotDeviceMetricPointer})
		}
	}
	return out
}

// payload is rep as the MetricReport JSON an SSE message carries.
func payload(rep *fabricreport.Report, scoped bool) []byte {
	data, err := json.Marshal(newMetricReport(rep, appendValues(nil, rep, scoped)))
	if err != nil {
		panic(err) // strings only: cannot fail
	}
	return data
}

// WriteReportSSE writes one report message, its id the report's sequence
// number.
func WriteReportSSE(w http.ResponseWriter, rep *fabricreport.Report, scoped bool) error {
	data := payload(rep, scoped)
	b := make([]byte, 0, len(data)+32)
	b = append(b, "id: "...)
	b = strconv.AppendUint(b, rep.Seq, 10)
	b = append(b, "\ndata: "...)
	b = append(b, data...)
	b = append(b, "\n\n"...)
	_, err := w.Write(b)
	return err
}

// fabricDuration renders d as an ISO 8601 duration, fractions of a second
// included (service.ISODuration rounds them away).
func fabricDuration(d time.Duration) string {
	if d%time.Second == 0 {
		return service.ISODuration(d)
	}
	return "PT" + strconv.FormatFloat(d.Seconds(), 'f', -1, 64) + "S"
}

// --- the Service's side ------------------------------------------------------

// ServeFabric makes s serve t's reports (nil: none): the FabricTelemetry
// report, its definition and metric definitions in the TelemetryService.
// Call it once, before serving.
func (s *Service) ServeFabric(t FabricReports) { s.fabric = t }

// metricDefinition is the MetricDefinition of m, for reports made every
// interval.
func metricDefinition(m fabricMetric, interval time.Duration) map[string]any {
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
		"SensingInterval":  fabricDuration(interval),
		"MetricProperties": props,
	}
	if m.function == "Summation" || m.id == metricFabricDevices || m.id == metricFabricLinksDown {
		body["Calculable"] = "Summable"
	}
	if m.function == "Average" || m.function == "Maximum" {
		body["CalculationAlgorithm"] = m.function
	}
	if m.interval {
		body["CalculationTimeInterval"] = fabricDuration(interval)
	}
	return body
}

// reportDefinition is the FabricTelemetry MetricReportDefinition of t's
// reports.
func reportDefinition(t FabricReports) map[string]any {
	interval := t.Interval()
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
			e["CollectionDuration"] = fabricDuration(interval)
		}
		metrics[i] = e
	}
	return map[string]any{
		"@odata.id":   ReportDefinitionsPath + "/" + FabricTelemetryID,
		"@odata.type": reportDefType,
		"Id":          FabricTelemetryID,
		"Name":        "Fabric telemetry",
		"Description": fmt.Sprintf("Every poll of the fabric monitor: per fabric and device kind (MetricProperty "+
			"/redfish/v1/Fabrics/{FabricId}/Endpoints?DeviceKind={kind}) the devices, mean and maximum utilisation, "+
			"maximum temperature, link errors since the previous poll and links down; and the %d hottest devices "+
			"(accounts without a tenant only). The newest %d reports are kept: GET the report with ?history[=N] or "+
			"?since=RFC3339 for them; stream new ones with GET /redfish/v1/EventService/SSE?EventFormatType=MetricReport.",
			fabricreport.HotDevices, t.History()),
		"MetricReportDefinitionType":    "Periodic",
		"Schedule":                      map[string]any{"RecurrenceInterval": fabricDuration(interval)},
		"MetricReportDefinitionEnabled": true,
		"ReportActions":                 []string{"LogToMetricReportsCollection", "RedfishEvent"},
		"ReportUpdates":                 "Overwrite",
		"Status":                        map[string]string{"State": "Enabled", "Health": "OK"},
		"Metrics":                       metrics,
		"MetricReport":                  rf.Ref(reportsPath + "/" + FabricTelemetryID),
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
				return 0, time.Time{}, false, service.ErrQueryValue("history", v)
			}
			limit = n
		}
	}
	if vs, has := q["since"]; has {
		ok = true
		t, perr := time.Parse(time.RFC3339Nano, vs[0])
		if perr != nil {
			return 0, time.Time{}, false, service.ErrQueryValue("since", vs[0])
		}
		since = t
	}
	return limit, since, ok, nil
}

// getFabricTelemetryReport answers the newest report or, with the history
// query, the retained ones oldest first (each value has its poll's
// Timestamp; the report's Timestamp is the newest one's).
func (s *Service) getFabricTelemetryReport(w http.ResponseWriter, r *http.Request, t FabricReports) error {
	limit, since, history, err := historyQuery(r)
	if err != nil {
		return err
	}
	scoped := service.Principal(r).Tenant != ""
	reps := t.Reports()
	var newest *fabricreport.Report
	if len(reps) > 0 {
		newest = reps[len(reps)-1]
	}
	if !history {
		if newest == nil {
			service.WriteJSON(w, http.StatusOK, newMetricReport(nil, nil))
			return nil
		}
		service.WriteJSON(w, http.StatusOK, json.RawMessage(payload(newest, scoped)))
		return nil
	}
	if !since.IsZero() {
		i, _ := slices.BinarySearchFunc(reps, since, func(rep *fabricreport.Report, t time.Time) int {
			if rep.At.After(t) {
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
		values = appendValues(values, rep, scoped)
	}
	service.WriteJSON(w, http.StatusOK, newMetricReport(newest, values))
	return nil
}
