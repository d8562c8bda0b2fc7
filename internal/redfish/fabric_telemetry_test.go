package redfish_test

import (
	"bufio"
	"context"
	"encoding/json"
	"encoding/xml"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"rackpool/internal/events"
	"rackpool/internal/fabric"
	"rackpool/internal/telemetry/fabricreport"
	"rackpool/internal/tenancy"
)

const (
	fabricReport    = "/redfish/v1/TelemetryService/MetricReports/FabricTelemetry"
	fabricReportDef = "/redfish/v1/TelemetryService/MetricReportDefinitions/FabricTelemetry"
	sseURI          = "/redfish/v1/EventService/SSE"
)

// newFabricService is newService serving fabric telemetry that a monitor
// of the service's fabrics (on its fabric clock) feeds.
func newFabricService(t *testing.T, o fabricreport.Options) (*service, *fabricreport.Condenser, *events.Monitor) {
	t.Helper()
	s := newService(t)
	o.Topology = s.mgr.Topology()
	ft := fabricreport.New(o)
	mon := events.NewMonitor(s.bus, s.drivers, events.MonitorOptions{Clock: s.fabClk, Stats: ft.Record})
	s.handler.ServeFabricTelemetry(ft)
	return s, ft, mon
}

// mval is one MetricValues entry.
type mval struct{ id, value, ts, prop string }

func metricValues(t *testing.T, report map[string]any) []mval {
	t.Helper()
	if report["@odata.type"] != "#MetricReport.v1_5_2.MetricReport" || report["Id"] != "FabricTelemetry" {
		t.Fatalf("not the FabricTelemetry MetricReport: %v", report)
	}
	var out []mval
	for _, v := range list(t, report["MetricValues"]) {
		m := v.(map[string]any)
		for _, k := range []string{"MetricId", "MetricValue", "Timestamp", "MetricProperty"} {
			if _, ok := m[k].(string); !ok {
				t.Fatalf("MetricValues entry without a string %s: %v", k, m)
			}
		}
		if len(m) != 4 {
			t.Errorf("MetricValues entry with other properties: %v", m)
		}
		out = append(out, mval{m["MetricId"].(string), m["MetricValue"].(string), m["Timestamp"].(string), m["MetricProperty"].(string)})
	}
	return out
}

// group is the MetricProperty of a fabric's devices of one kind.
func group(fabricID, kind string) string {
	return "/redfish/v1/Fabrics/" + fabricID + "/Endpoints?DeviceKind=" + kind
}

// values indexes vals by MetricId and MetricProperty.
func values(vals []mval) map[[2]string]string {
	out := map[[2]string]string{}
	for _, v := range vals {
		out[[2]string{v.id, v.prop}] = v.value
	}
	return out
}

// hot lists the hottest-device entries as "endpoint=temperature".
func hot(vals []mval) []string {
	var out []string
	for _, v := range vals {
		if v.id == "FabricHotDeviceTemperature" {
			ep := strings.TrimPrefix(strings.TrimSuffix(v.prop, "#/Oem/Rackpool/Telemetry/TemperatureC"), "/redfish/v1/Fabrics/")
			out = append(out, ep+"="+v.value)
		}
	}
	return out
}

var t0 = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)

// TestFabricTelemetryAggregates: one report per poll, aggregated by fabric
// and device kind; link errors are the counters' increase since the
// device's previous poll, a counter that went down counting from 0; a
// device's first poll counts none; the hottest ten, hottest first.
func TestFabricTelemetryAggregates(t *testing.T) {
	s, ft, _ := newFabricService(t, fabricreport.Options{})
	ft.Record(t0, map[string][]fabric.DeviceStats{
		"falcon1": {
			{Device: "gpu1", UtilisationPercent: 20, TemperatureC: 50, LinkWidth: 16, CorrectableErrors: 5, UncorrectableErrs: 1},
			{Device: "gpu2", UtilisationPercent: 60, TemperatureC: 70, LinkWidth: 0, CorrectableErrors: 10},
			{Device: "nvme1", UtilisationPercent: 10, TemperatureC: 40, LinkWidth: 4},
			{Device: "ghost", TemperatureC: 30, LinkWidth: 1},
		},
		"sas1": {{Device: "hdd1", UtilisationPercent: 5, TemperatureC: 35, LinkWidth: 4, CorrectableErrors: 7}},
	})
	first := values(metricValues(t, s.get(fabricReport)))
	for k, want := range map[[2]string]string{
		{"FabricDevices", group("falcon1", "gpu")}:         "2",
		{"FabricUtilisationMean", group("falcon1", "gpu")}: "40",
		{"FabricLinkErrors", group("falcon1", "gpu")}:      "0", // first poll: no increase yet
		{"FabricLinkErrors", group("sas1", "hdd")}:         "0",
		{"FabricDevices", group("falcon1", "unknown")}:     "1", // not in the topology
	} {
		if first[k] != want {
			t.Errorf("first report %v = %q, want %q", k, first[k], want)
		}
	}

	ft.Record(t0.Add(2*time.Second), map[string][]fabric.DeviceStats{
		"falcon1": {
			{Device: "gpu1", UtilisationPercent: 20, TemperatureC: 50, LinkWidth: 16, CorrectableErrors: 8, UncorrectableErrs: 1}, // +3
			{Device: "gpu2", UtilisationPercent: 60, TemperatureC: 70, LinkWidth: 0, CorrectableErrors: 2},                        // reset: +2
			{Device: "gpu3", UtilisationPercent: 45, TemperatureC: 45, LinkWidth: 16, CorrectableErrors: 100},                     // new: +0
			{Device: "nvme1", UtilisationPercent: 10, TemperatureC: 40, LinkWidth: 4},
			{Device: "ghost", TemperatureC: 30, LinkWidth: 1},
		},
		// sas1 did not answer this poll
	})
	r := s.get(fabricReport)
	vals := metricValues(t, r)
	got := values(vals)
	gpu := group("falcon1", "gpu")
	for k, want := range map[[2]string]string{
		{"FabricDevices", gpu}:                             "3",
		{"FabricUtilisationMean", gpu}:                     "41.67",
		{"FabricUtilisationMax", gpu}:                      "60",
		{"FabricTemperatureMax", gpu}:                      "70",
		{"FabricLinkErrors", gpu}:                          "5",
		{"FabricLinksDown", gpu}:                           "1",
		{"FabricDevices", group("falcon1", "nvme")}:        "1",
		{"FabricLinksDown", group("falcon1", "nvme")}:      "0",
		{"FabricLinkErrors", group("falcon1", "nvme")}:     "0",
		{"FabricUtilisationMax", group("falcon1", "nvme")}: "10",
	} {
		if got[k] != want {
			t.Errorf("second report %v = %q, want %q", k, got[k], want)
		}
	}
	if _, ok := got[[2]string{"FabricDevices", group("sas1", "hdd")}]; ok {
		t.Error("the second report has sas1, which did not answer")
	}
	if want := []string{"falcon1/Endpoints/gpu2=70", "falcon1/Endpoints/gpu1=50", "falcon1/Endpoints/gpu3=45",
		"falcon1/Endpoints/nvme1=40", "falcon1/Endpoints/ghost=30"}; !slices.Equal(hot(vals), want) {
		t.Errorf("hottest = %v, want %v", hot(vals), want)
	}
	ts := "2025-01-01T00:00:02Z"
	if r["Timestamp"] != ts {
		t.Errorf("report Timestamp %v, want %s", r["Timestamp"], ts)
	}
	for _, v := range vals {
		if v.ts != ts {
			t.Fatalf("value %v has Timestamp %s, want %s", v, v.ts, ts)
		}
	}
	if len(vals) != 3*6+5 {
		t.Errorf("%d values, want 3 groups × 6 + 5 hot", len(vals))
	}

	// sas1 answers again: the increase since its last answer, two polls ago.
	ft.Record(t0.Add(4*time.Second), map[string][]fabric.DeviceStats{
		"sas1": {{Device: "hdd1", UtilisationPercent: 5, TemperatureC: 35, LinkWidth: 4, CorrectableErrors: 9}},
	})
	if got := values(metricValues(t, s.get(fabricReport)))[[2]string{"FabricLinkErrors", group("sas1", "hdd")}]; got != "2" {
		t.Errorf("sas1 link errors after a missed poll = %q, want 2", got)
	}

	// At most ten hottest, hottest first, ties by fabric and device.
	var many []fabric.DeviceStats
	for i := 1; i <= 8; i++ {
		many = append(many, fabric.DeviceStats{Device: fmt.Sprintf("gpu%d", i), TemperatureC: float64(40 + i), LinkWidth: 16})
	}
	for i := 1; i <= 4; i++ {
		many = append(many, fabric.DeviceStats{Device: fmt.Sprintf("nvme%d", i), TemperatureC: 45, LinkWidth: 4})
	}
	ft.Record(t0.Add(6*time.Second), map[string][]fabric.DeviceStats{"falcon1": many})
	want := []string{"gpu8=48", "gpu7=47", "gpu6=46", "gpu5=45", "nvme1=45", "nvme2=45", "nvme3=45", "nvme4=45", "gpu4=44", "gpu3=43"}
	for i := range want {
		want[i] = "falcon1/Endpoints/" + want[i]
	}
	if h := hot(metricValues(t, s.get(fabricReport))); !slices.Equal(h, want) {
		t.Errorf("hottest of 12 = %v, want %v", h, want)
	}

	// An older answer (an overlapping poll) changes nothing.
	before := s.get(fabricReport)
	ft.Record(t0.Add(5*time.Second), map[string][]fabric.DeviceStats{"falcon1": many[:1]})
	if after := s.get(fabricReport); fmt.Sprint(after) != fmt.Sprint(before) {
		t.Errorf("an older poll's answer replaced the report:\n%v\n%v", before, after)
	}
}

// TestFabricTelemetryHistory: the report keeps the newest History reports;
// ?history, ?history=N and ?since= answer them oldest first, GET without
// them the newest only; bad values are 400s naming the parameter.
func TestFabricTelemetryHistory(t *testing.T) {
	s, ft, _ := newFabricService(t, fabricreport.Options{History: 3})
	if r := s.get(fabricReport); len(list(t, r["MetricValues"])) != 0 {
		t.Fatalf("report before any poll: %v", r)
	}
	for i := range 5 {
		ft.Record(t0.Add(time.Duration(i)*time.Second), map[string][]fabric.DeviceStats{
			"falcon1": {{Device: "gpu1", UtilisationPercent: float64(10 * i), TemperatureC: 50, LinkWidth: 16}}})
	}
	stamps := func(path string) []string {
		t.Helper()
		var out []string
		for _, v := range metricValues(t, s.get(path)) {
			if v.id == "FabricUtilisationMean" {
				out = append(out, v.ts[len("2025-01-01T00:00:"):]+"="+v.value)
			}
		}
		return out
	}
	for path, want := range map[string][]string{
		fabricReport:                                   {"04Z=40"},
		fabricReport + "?history":                      {"02Z=20", "03Z=30", "04Z=40"},
		fabricReport + "?history=2":                    {"03Z=30", "04Z=40"},
		fabricReport + "?history=100":                  {"02Z=20", "03Z=30", "04Z=40"},
		fabricReport + "?since=2025-01-01T00:00:03Z":   {"04Z=40"},
		fabricReport + "?since=2025-01-01T00:00:02.5Z": {"03Z=30", "04Z=40"},
		fabricReport + "?since=2025-01-01T00:00:04Z":   nil,
	} {
		if got := stamps(path); !slices.Equal(got, want) {
			t.Errorf("GET %s: %v, want %v", path, got, want)
		}
	}
	if r := s.get(fabricReport + "?history"); r["Timestamp"] != "2025-01-01T00:00:04Z" {
		t.Errorf("history Timestamp %v, want the newest report's", r["Timestamp"])
	}
	for _, q := range []string{"history=0", "history=x", "since=yesterday"} {
		r := s.must(http.StatusBadRequest, "GET", fabricReport+"?"+q, nil, admin)
		param, _, _ := strings.Cut(q, "=")
		if code := r.errorCode(t); !strings.HasSuffix(code, ".QueryParameterValueFormatError") || !strings.Contains(string(r.body), param) {
			t.Errorf("?%s: %s", q, r.body)
		}
	}
}

// TestFabricTelemetryTenantScope: accounts with a tenant see the
// aggregates but no device IDs (the hottest devices), in the report and
// its history alike; unscoped accounts see both.
func TestFabricTelemetryTenantScope(t *testing.T) {
	s, ft, _ := newFabricService(t, fabricreport.Options{})
	blue, _, blueRO := s.tenants()
	ft.Record(t0, map[string][]fabric.DeviceStats{
		"falcon1": {{Device: "gpu1", UtilisationPercent: 50, TemperatureC: 80, LinkWidth: 16},
			{Device: "gpu2", UtilisationPercent: 30, TemperatureC: 60, LinkWidth: 16}}})
	adminVals := metricValues(t, s.get(fabricReport))
	if len(hot(adminVals)) != 2 {
		t.Fatalf("admin sees hottest %v, want gpu1 and gpu2", hot(adminVals))
	}
	var aggregates []mval
	for _, v := range adminVals {
		if v.id != "FabricHotDeviceTemperature" {
			aggregates = append(aggregates, v)
		}
	}
	for _, c := range []cred{blue, blueRO} {
		for _, path := range []string{fabricReport, fabricReport + "?history"} {
			r := s.must(http.StatusOK, "GET", path, nil, c)
			vals := metricValues(t, r.json(t))
			if !slices.Equal(vals, aggregates) {
				t.Errorf("tenant GET %s: %v, want the aggregates %v", path, vals, aggregates)
			}
			if strings.Contains(string(r.body), "gpu1") || strings.Contains(string(r.body), "gpu2") {
				t.Errorf("tenant GET %s names a device: %s", path, r.body)
			}
		}
	}
}

// sseMessage is one message of an SSE stream.
type sseMessage struct{ id, data string }

// openSSE opens the SSE stream with query as c (and a Last-Event-ID when
// lastID is not empty) and returns its messages; the stream closes with
// ctx.
func (s *service) openSSE(ctx context.Context, query string, c cred, lastID string) <-chan sseMessage {
	s.t.Helper()
	resp := s.sseRequest(ctx, query, c, lastID)
	out := make(chan sseMessage, 64)
	go func() {
		defer resp.Body.Close()
		defer close(out)
		readSSE(resp, out)
	}()
	return out
}

func (s *service) sseRequest(ctx context.Context, query string, c cred, lastID string) *http.Response {
	s.t.Helper()
	req, err := http.NewRequestWithContext(ctx, "GET", s.srv.URL+sseURI+query, nil)
	if err != nil {
		s.t.Fatal(err)
	}
	for k, v := range c.hdr {
		req.Header.Set(k, v)
	}
	if c.basic {
		req.SetBasicAuth(tenancy.AdminUser, password)
	}
	if lastID != "" {
		req.Header.Set("Last-Event-ID", lastID)
	}
	resp, err := s.srv.Client().Do(req)
	if err != nil {
		s.t.Fatal(err)
	}
	if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		resp.Body.Close()
		s.t.Fatalf("SSE%s: %d %s", query, resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	return resp
}

// sseRefused opens the SSE stream with query as c, expecting a 400; a
// stream that opens instead fails the test (after 5 s) rather than hangs it.
func (s *service) sseRefused(query string, c cred) reply {
	s.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, "GET", s.srv.URL+sseURI+query, nil)
	if err != nil {
		s.t.Fatal(err)
	}
	if c.basic {
		req.SetBasicAuth(tenancy.AdminUser, password)
	}
	for k, v := range c.hdr {
		req.Header.Set(k, v)
	}
	resp, err := s.srv.Client().Do(req)
	if err != nil {
		s.t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest {
		s.t.Fatalf("SSE%s: %d, want 400", query, resp.StatusCode)
	}
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		s.t.Fatal(err)
	}
	return reply{status: resp.StatusCode, header: resp.Header, body: body}
}

// readSSE sends resp's messages to out until the stream ends.
func readSSE(resp *http.Response, out chan<- sseMessage) {
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	var m sseMessage
	for sc.Scan() {
		switch l := sc.Text(); {
		case strings.HasPrefix(l, "id: "):
			m.id = l[len("id: "):]
		case strings.HasPrefix(l, "data: "):
			m.data = l[len("data: "):]
		case l == "" && m.data != "":
			out <- m
			m = sseMessage{}
		}
	}
}

// next returns the next message of ch that contains want, failing after
// 5 s; skipped collects the ones before it.
func next(t *testing.T, ch <-chan sseMessage, want string, skipped *[]sseMessage) sseMessage {
	t.Helper()
	deadline := time.After(5 * time.Second)
	for {
		select {
		case m, ok := <-ch:
			if !ok {
				t.Fatalf("stream ended before a message with %q", want)
			}
			if strings.Contains(m.data, want) {
				return m
			}
			if skipped != nil {
				*skipped = append(*skipped, m)
			}
		case <-deadline:
			t.Fatalf("no message with %q", want)
		}
	}
}

// TestFabricTelemetrySSE: a poll of the monitor sends its report on the
// streams that asked for metric reports (EventFormatType=MetricReport, or
// MetricReportDefinition), to tenants without device IDs; the plain stream,
// the push subscriptions and the Events log get the poll's events but no
// report. A Last-Event-ID resumes from the retained reports.
func TestFabricTelemetrySSE(t *testing.T) {
	s, _, mon := newFabricService(t, fabricreport.Options{})
	blue, _, _ := s.tenants()
	pushed := make(chan string, 64)
	s.must(http.StatusCreated, "POST", "/redfish/v1/EventService/Subscriptions", map[string]any{"Destination": newSink(t, pushed)}, admin)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	reports := s.openSSE(ctx, "?EventFormatType=MetricReport", admin, "")
	byDef := s.openSSE(ctx, "?MetricReportDefinition=/redfish/v1/TelemetryService/MetricReportDefinitions/FabricTelemetry", admin, "")
	blueReports := s.openSSE(ctx, "?EventFormatType=MetricReport&MetricReportDefinition=FabricTelemetry", blue, "")
	plain := s.openSSE(ctx, "", admin, "")
	explicit := s.openSSE(ctx, "?EventFormatType=Event", admin, "")
	time.Sleep(50 * time.Millisecond) // let them subscribe

	s.injectFault(http.StatusNoContent, "falcon1", map[string]any{"Kind": "device-fails", "Target": "gpu2"})
	if err := mon.Poll(context.Background()); err != nil {
		t.Fatal(err)
	}
	m := next(t, reports, "#MetricReport", nil)
	var report map[string]any
	if err := json.Unmarshal([]byte(m.data), &report); err != nil {
		t.Fatalf("report message is not JSON: %v: %s", err, m.data)
	}
	vals := metricValues(t, report)
	if got := values(vals)[[2]string{"FabricLinksDown", group("falcon1", "gpu")}]; got != "1" {
		t.Errorf("streamed report: falcon1 gpu links down %q, want 1 (gpu2 failed)", got)
	}
	if h := hot(vals); len(h) == 0 || !strings.HasPrefix(h[0], "falcon1/Endpoints/gpu2=") {
		t.Errorf("streamed report: hottest %v, want the failed gpu2 first", h)
	}
	if id, err := strconv.ParseUint(m.id, 10, 64); err != nil || id == 0 {
		t.Errorf("report message id %q", m.id)
	}
	if got := s.get(fabricReport); fmt.Sprint(metricValues(t, got)) != fmt.Sprint(vals) {
		t.Errorf("the streamed report differs from GET's:\n%v\n%v", vals, metricValues(t, got))
	}
	if m2 := next(t, byDef, "#MetricReport", nil); m2.id != m.id {
		t.Errorf("MetricReportDefinition stream got report %s, want %s", m2.id, m.id)
	}
	bm := next(t, blueReports, "#MetricReport", nil)
	if strings.Contains(bm.data, "FabricHotDeviceTemperature") || strings.Contains(bm.data, "gpu2") {
		t.Errorf("a tenant's stream names devices: %s", bm.data)
	}
	if !strings.Contains(bm.data, `"FabricLinksDown"`) {
		t.Errorf("a tenant's stream lacks the aggregates: %s", bm.data)
	}

	// The event streams and the push subscription get the poll's events,
	// then a marker event, and no report in between.
	s.must(http.StatusNoContent, "POST", "/redfish/v1/EventService/Actions/EventService.SubmitTestEvent",
		map[string]any{"Message": "marker-after-poll"}, admin)
	for name, ch := range map[string]<-chan sseMessage{"plain": plain, "EventFormatType=Event": explicit} {
		var before []sseMessage
		next(t, ch, "marker-after-poll", &before)
		if !strings.Contains(fmt.Sprint(before), "ResourceStatusChangedCritical") {
			t.Errorf("%s stream: no failure event before the marker: %v", name, before)
		}
		if strings.Contains(fmt.Sprint(before), "MetricReport") {
			t.Errorf("%s stream carried a metric report: %v", name, before)
		}
	}
	for got := ""; !strings.Contains(got, "marker-after-poll"); {
		select {
		case got = <-pushed:
			if strings.Contains(got, "MetricReport") {
				t.Errorf("a push subscription got a metric report: %s", got)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("the push subscription got no marker")
		}
	}
	if body := string(s.must(http.StatusOK, "GET", "/redfish/v1/Managers/rackpool/LogServices/Events/Entries", nil, admin).body); strings.Contains(body, "MetricReport") || strings.Contains(body, "FabricTelemetry") {
		t.Errorf("the Events log has metric reports: %s", body)
	}

	// Resuming: a Last-Event-ID before the report replays it; one at it
	// replays nothing until the next poll.
	prev, _ := strconv.ParseUint(m.id, 10, 64)
	if r := next(t, s.openSSE(ctx, "?EventFormatType=MetricReport", admin, strconv.FormatUint(prev-1, 10)), "#MetricReport", nil); r.id != m.id {
		t.Errorf("resumed stream replayed report %s, want %s", r.id, m.id)
	}
	current := s.openSSE(ctx, "?EventFormatType=MetricReport", admin, m.id)
	time.Sleep(50 * time.Millisecond)
	s.fabClk.Advance(2 * time.Second)
	if err := mon.Poll(context.Background()); err != nil {
		t.Fatal(err)
	}
	if r := next(t, current, "#MetricReport", nil); r.id == m.id {
		t.Errorf("a stream resumed at report %s replayed it", m.id)
	}
}

// TestFabricTelemetrySlowReader: a client that does not read does not
// hold up Record (the monitor); it later gets the newest report, having
// lost older ones.
func TestFabricTelemetrySlowReader(t *testing.T) {
	s, ft, _ := newFabricService(t, fabricreport.Options{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	resp := s.sseRequest(ctx, "?EventFormatType=MetricReport", admin, "")
	defer resp.Body.Close()
	time.Sleep(50 * time.Millisecond)
	// Every device of the rack, so that each report is several kilobytes
	// and the connection's buffers fill.
	stats := map[string][]fabric.DeviceStats{}
	for _, d := range s.mgr.Topology().Devices {
		stats[d.Fabric.ID] = append(stats[d.Fabric.ID], fabric.DeviceStats{Device: d.ID, UtilisationPercent: 33.3, TemperatureC: 55, LinkWidth: 4})
	}
	const n = 2000
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := range n {
			ft.Record(t0.Add(time.Duration(i)*time.Second), stats)
		}
	}()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		go func() { _, _ = io.Copy(io.Discard, resp.Body) }() // unblock it, to fail rather than hang
		<-done
		t.Fatal("Record blocked on a client that does not read")
	}
	out := make(chan sseMessage, 64)
	go func() {
		defer close(out)
		readSSE(resp, out)
	}()
	last := `"Timestamp":"` + t0.Add((n-1)*time.Second).Format(time.RFC3339) + `"`
	var before []sseMessage
	next(t, out, last, &before)
	if len(before)+1 >= n {
		t.Errorf("the slow client got all %d reports: nothing was dropped", n)
	}
	ids := map[string]bool{}
	for _, m := range before {
		if ids[m.id] {
			t.Errorf("report %s sent twice", m.id)
		}
		ids[m.id] = true
	}
	t.Logf("the slow client got %d of %d reports", len(before)+1, n)
}

// TestFabricTelemetrySSEFilters: EventFormatType and MetricReportDefinition
// values the service does not have, and combinations that make no sense,
// are 400s naming the parameter, and open nothing; so is $filter, which
// selects members of collections, not events.
func TestFabricTelemetrySSEFilters(t *testing.T) {
	s, ft, _ := newFabricService(t, fabricreport.Options{})
	subs := len(list(t, s.get("/redfish/v1/EventService/Subscriptions")["Members"]))
	entries := s.get("/redfish/v1/Managers/rackpool/LogServices/Events/Entries")["Members@odata.count"]
	for _, c := range []struct{ query, code, param string }{
		{"?EventFormatType=Bogus", "QueryParameterValueError", "EventFormatType"},
		{"?EventFormatType=Event,MetricReport", "QueryParameterValueError", "EventFormatType"},
		{"?EventFormatType=Event&EventFormatType=MetricReport", "QueryParameterValueError", "EventFormatType"},
		{"?EventFormatType=metricreport", "QueryParameterValueError", "EventFormatType"},
		{"?MetricReportDefinition=SystemUsage", "QueryParameterValueError", "MetricReportDefinition"},
		{"?EventFormatType=MetricReport&MetricReportDefinition=Nope", "QueryParameterValueError", "MetricReportDefinition"},
		{"?EventFormatType=Event&MetricReportDefinition=FabricTelemetry", "QueryCombinationInvalid", "MetricReportDefinition"},
		{"?EventFormatType=MetricReport&EventTypes=Alert", "QueryCombinationInvalid", "EventTypes"},
		{"?EventFormatType=MetricReport&MessageIds=ResourceStatusChangedCritical", "QueryCombinationInvalid", "MessageIds"},
	} {
		r := s.sseRefused(c.query, admin)
		if code := r.errorCode(t); !strings.HasSuffix(code, "."+c.code) {
			t.Errorf("%s: %s, want %s", c.query, code, c.code)
		}
		var e struct {
			Error struct {
				Info []struct {
					MessageArgs []string
					Resolution  string
				} `json:"@Message.ExtendedInfo"`
			} `json:"error"`
		}
		_ = json.Unmarshal(r.body, &e)
		if info := e.Error.Info[0]; !slices.Contains(info.MessageArgs, c.param) && !strings.Contains(info.Resolution, c.param) {
			t.Errorf("%s: the error does not name %s: %s", c.query, c.param, r.body)
		}
		if ct := r.header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
			t.Errorf("%s: Content-Type %s", c.query, ct)
		}
	}
	r := s.sseRefused("?$filter="+strings.ReplaceAll("EventFormatType eq 'MetricReport'", " ", "%20"), admin)
	if code := r.errorCode(t); !strings.HasSuffix(code, ".QueryNotSupportedOnResource") {
		t.Errorf("$filter: %s", code)
	}
	// Nothing was opened or logged, and a report still reaches a good stream.
	if n := len(list(t, s.get("/redfish/v1/EventService/Subscriptions")["Members"])); n != subs {
		t.Errorf("subscriptions %d, were %d", n, subs)
	}
	if n := s.get("/redfish/v1/Managers/rackpool/LogServices/Events/Entries")["Members@odata.count"]; n != entries {
		t.Errorf("event log entries %v, were %v", n, entries)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ch := s.openSSE(ctx, "?EventFormatType=MetricReport", admin, "")
	time.Sleep(50 * time.Millisecond)
	ft.Record(t0, map[string][]fabric.DeviceStats{"falcon1": {{Device: "gpu1", LinkWidth: 16}}})
	next(t, ch, "#MetricReport", nil)

	// A service without fabric telemetry has no MetricReport format.
	plain := newService(t)
	es := plain.get("/redfish/v1/EventService")
	if f := fmt.Sprint(es["EventFormatTypes"]); f != "[Event]" {
		t.Errorf("without fabric telemetry: EventFormatTypes %s", f)
	}
	for _, q := range []string{"?EventFormatType=MetricReport", "?MetricReportDefinition=FabricTelemetry"} {
		if code := plain.sseRefused(q, admin).errorCode(t); !strings.HasSuffix(code, ".QueryParameterValueError") {
			t.Errorf("without fabric telemetry %s: %s", q, code)
		}
	}
	plain.must(http.StatusNotFound, "GET", fabricReport, nil, admin)
	plain.must(http.StatusNotFound, "GET", fabricReportDef, nil, admin)
}

// TestFabricTelemetryMonitorHook: the monitor hands each poll's telemetry
// to its Stats sink, by fabric, sorted by device, at the poll's time, with
// no lock held (the sink can poll again).
func TestFabricTelemetryMonitorHook(t *testing.T) {
	s := newService(t)
	var (
		mon   *events.Monitor
		calls atomic.Int32
		inner = make(chan error, 1)
		got   map[string][]fabric.DeviceStats
		at    time.Time
	)
	mon = events.NewMonitor(s.bus, s.drivers, events.MonitorOptions{Clock: s.fabClk,
		Stats: func(when time.Time, stats map[string][]fabric.DeviceStats) {
			if calls.Add(1) != 1 {
				return
			}
			got, at = stats, when
			go func() { inner <- mon.Poll(context.Background()) }()
			select {
			case err := <-inner:
				if err != nil {
					t.Errorf("poll from the sink: %v", err)
				}
			case <-time.After(5 * time.Second):
				t.Error("a poll from the sink blocked: the sink runs under the monitor's lock")
			}
		}})
	if err := mon.Poll(context.Background()); err != nil {
		t.Fatal(err)
	}
	if calls.Load() != 2 {
		t.Errorf("sink called %d times for two polls", calls.Load())
	}
	if !at.Equal(s.fabClk.Now()) {
		t.Errorf("sink at %v, want the poll's time %v", at, s.fabClk.Now())
	}
	for fid, d := range s.drivers {
		if _, ok := d.(fabric.StatsReporter); !ok {
			continue
		}
		stats := got[fid]
		if len(stats) == 0 || !slices.IsSortedFunc(stats, func(a, b fabric.DeviceStats) int { return strings.Compare(a.Device, b.Device) }) {
			t.Errorf("fabric %s: stats %v, want its devices sorted by ID", fid, stats)
		}
	}
	if len(got) == 0 {
		t.Error("the sink got no fabric's stats")
	}
}

// TestFabricTelemetryResources: the report definition, the metric
// definitions and the report are listed in the TelemetryService, the
// EventService advertises the MetricReport format, and every property is
// one the DMTF schemas declare (testdata/redfish-dmtf/csdl).
func TestFabricTelemetryResources(t *testing.T) {
	s, ft, _ := newFabricService(t, fabricreport.Options{Interval: 1500 * time.Millisecond})
	ft.Record(t0, map[string][]fabric.DeviceStats{"falcon1": {{Device: "gpu1", UtilisationPercent: 12.5, TemperatureC: 51, LinkWidth: 16}}})
	es := s.get("/redfish/v1/EventService")
	if f := fmt.Sprint(es["EventFormatTypes"]); f != "[Event MetricReport]" {
		t.Errorf("EventFormatTypes %s", f)
	}
	if f := es["SSEFilterPropertiesSupported"].(map[string]any); f["EventFormatType"] != true || f["MetricReportDefinition"] != true {
		t.Errorf("SSEFilterPropertiesSupported %v", f)
	}
	ts := s.get("/redfish/v1/TelemetryService")
	if ts["MaxReports"] != float64(4) {
		t.Errorf("MaxReports %v, want 3 usage reports + FabricTelemetry", ts["MaxReports"])
	}
	if m := links(t, s.get("/redfish/v1/TelemetryService/MetricReportDefinitions")["Members"]); !slices.Contains(m, "FabricTelemetry") || len(m) != 4 {
		t.Errorf("MetricReportDefinitions %v", m)
	}
	if m := links(t, s.get("/redfish/v1/TelemetryService/MetricReports")["Members"]); !slices.Contains(m, "FabricTelemetry") || len(m) != 4 {
		t.Errorf("MetricReports %v", m)
	}
	defs := links(t, s.get("/redfish/v1/TelemetryService/MetricDefinitions")["Members"])
	def := s.get(fabricReportDef)
	if def["MetricReportDefinitionType"] != "Periodic" || dig(t, def, "Schedule", "RecurrenceInterval") != "PT1.5S" ||
		dig(t, def, "MetricReport", "@odata.id") != fabricReport {
		t.Errorf("definition %v", def)
	}
	schemaCheck(t, "MetricReportDefinition", def)
	report := s.get(fabricReport)
	if dig(t, report, "MetricReportDefinition", "@odata.id") != fabricReportDef {
		t.Errorf("report's definition link %v", report["MetricReportDefinition"])
	}
	schemaCheck(t, "MetricReport", report)
	schemaCheck(t, "MetricReport", s.get(fabricReport+"?history"))
	seen := map[string]bool{}
	for _, m := range list(t, def["Metrics"]) {
		id := m.(map[string]any)["MetricId"].(string)
		if !slices.Contains(defs, id) {
			t.Errorf("metric %s of the definition is not in MetricDefinitions", id)
		}
		md := s.get("/redfish/v1/TelemetryService/MetricDefinitions/" + id)
		if md["Id"] != id || md["@odata.type"] != "#MetricDefinition.v1_3_5.MetricDefinition" || md["Units"] == "" {
			t.Errorf("MetricDefinition %s: %v", id, md)
		}
		schemaCheck(t, "MetricDefinition", md)
		seen[id] = true
	}
	for _, v := range metricValues(t, report) {
		if !seen[v.id] {
			t.Errorf("report value %v has no metric of the definition", v)
		}
	}
	s.must(http.StatusNotFound, "GET", "/redfish/v1/TelemetryService/MetricDefinitions/FabricNope", nil, admin)
}

// schemaCheck fails the test for a property, nested ones included, that
// no version of the DMTF schema of typ (or Resource, or Schedule)
// declares, for an enumeration value the schema does not list, and for a
// date or duration the DMTF validator's patterns refuse.
func schemaCheck(t *testing.T, typ string, body map[string]any) {
	t.Helper()
	dir := dmtfCSDL(t)
	props, members := map[string]bool{}, map[string]bool{}
	for _, f := range []string{typ, "Resource", "Schedule"} {
		data, err := os.ReadFile(filepath.Join(dir, f+"_v1.xml"))
		if err != nil {
			t.Fatal(err)
		}
		var doc struct {
			Schemas []struct {
				Types []csdlType `xml:",any"`
				Enums []struct {
					Members []struct {
						Name string `xml:"Name,attr"`
					} `xml:"Member"`
				} `xml:"EnumType"`
			} `xml:"DataServices>Schema"`
		}
		if err := xml.Unmarshal(data, &doc); err != nil {
			t.Fatal(err)
		}
		for _, s := range doc.Schemas {
			for _, ty := range s.Types {
				for _, p := range append(ty.Props, ty.NavProps...) {
					props[p.Name] = true
				}
			}
			for _, e := range s.Enums {
				for _, m := range e.Members {
					members[m.Name] = true
				}
			}
		}
	}
	enums := []string{"MetricReportDefinitionType", "ReportActions", "ReportUpdates", "CollectionFunction", "CollectionTimeScope",
		"MetricType", "MetricDataType", "Implementation", "Calculable", "CalculationAlgorithm", "State", "Health"}
	date := regexp.MustCompile(`^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|(\+|-)\d{2}:\d{2})$`)
	duration := regexp.MustCompile(`^P(\d+D)?(T(\d+H)?(\d+M)?(\d+(.\d+)?S)?)?$`)
	var walk func(where string, v any)
	walk = func(where string, v any) {
		switch x := v.(type) {
		case map[string]any:
			for k, e := range x {
				if strings.HasPrefix(k, "@odata.") || strings.Contains(k, "@") {
					continue
				}
				if !props[k] {
					t.Errorf("%s: %s/%s is not a property of %s", typ, where, k, typ)
				}
				walk(where+"/"+k, e)
				for _, s := range asStrings(e) {
					switch {
					case slices.Contains(enums, k) && !members[s]:
						t.Errorf("%s: %s/%s = %q is not a value the schema has", typ, where, k, s)
					case k == "Timestamp" && !date.MatchString(s):
						t.Errorf("%s: %s/%s = %q is not a DateTimeOffset", typ, where, k, s)
					case slices.Contains([]string{"RecurrenceInterval", "CollectionDuration", "SensingInterval", "CalculationTimeInterval"}, k) && !duration.MatchString(s):
						t.Errorf("%s: %s/%s = %q is not a Duration", typ, where, k, s)
					}
				}
			}
		case []any:
			for _, e := range x {
				walk(where, e)
			}
		}
	}
	walk("", body)
}

// asStrings is v's string, or the strings of a list v.
func asStrings(v any) []string {
	switch x := v.(type) {
	case string:
		return []string{x}
	case []any:
		var out []string
		for _, e := range x {
			if s, ok := e.(string); ok {
				out = append(out, s)
			}
		}
		return out
	}
	return nil
}
