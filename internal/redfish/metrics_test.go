package redfish_test

import (
	"bytes"
	"context"
	"math"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"rackpool/internal/childproc"
	"rackpool/internal/telemetry/fabricreport"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// scrapeAfterUse drives a service through what every family counts (two
// composes, a decompose, a refused request, a fabric fault) and returns
// GET /metrics once the fault has been counted.
func scrapeAfterUse(t *testing.T) []byte {
	t.Helper()
	s := newService(t)
	s.obs.Watch() // counts fault events until the bus closes at cleanup
	sys := s.compose(specificBody("host1", "gpu1"))
	s.must(http.StatusNoContent, "DELETE", "/redfish/v1/Systems/"+sys, nil, admin)
	sys = s.compose(specificBody("host3", "gpu3"))
	s.must(http.StatusNoContent, "POST", submitPath(sys), push(s.fabClk.Now(), map[string]float64{"memory_used_bytes": 1 << 30, "io_read_bytes_per_second": 2.5e6}), admin)
	s.do("GET", "/redfish/v1/Systems", nil, cred{token: "forged"})
	s.injectFault(http.StatusNoContent, "falcon1", map[string]any{"Kind": "device-fails", "Target": "gpu2"})
	if err := s.pollFabrics(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		body := s.must(http.StatusOK, "GET", "/metrics", nil, admin).body
		if bytes.Contains(body, []byte("rackpool_fabric_faults_total{")) {
			return body
		}
		if time.Now().After(deadline) {
			t.Fatalf("the fault was not counted in 5s:\n%s", body)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestMetricsFamilies pins what GET /metrics exposes: every family's name,
// type, label names and histogram buckets, which dashboards and alerts
// depend on (docs/redfish.md lists them), and a few values after known
// operations.
func TestMetricsFamilies(t *testing.T) {
	durations := []float64{0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, math.Inf(1)}
	fast := []float64{1e-6, 5e-6, 1e-5, 5e-5, 1e-4, 2.5e-4, 5e-4, 1e-3, 2.5e-3, 5e-3, 1e-2, 5e-2, 0.1, math.Inf(1)}
	want := []struct {
		name    string
		typ     dto.MetricType
		labels  []string  // sorted, without le
		buckets []float64 // upper bounds as exposed, +Inf last
	}{
		{"rackpool_audit_write_failures_total", dto.MetricType_COUNTER, nil, nil},
		{"rackpool_compose_duration_seconds", dto.MetricType_HISTOGRAM, []string{"outcome"}, durations},
		{"rackpool_composition_changes_total", dto.MetricType_COUNTER, []string{"reason"}, nil},
		{"rackpool_compositions", dto.MetricType_GAUGE, []string{"state"}, nil},
		{"rackpool_event_subscribers", dto.MetricType_GAUGE, []string{"kind"}, nil},
		{"rackpool_fabric_faults_total", dto.MetricType_COUNTER, []string{"severity"}, nil},
		{"rackpool_fabric_operation_seconds", dto.MetricType_HISTOGRAM, []string{"fabric_kind", "op", "outcome"}, durations},
		{"rackpool_http_request_duration_seconds", dto.MetricType_HISTOGRAM, []string{"method"}, durations},
		{"rackpool_http_requests_total", dto.MetricType_COUNTER, []string{"code", "method"}, nil},
		{"rackpool_refused_requests_total", dto.MetricType_COUNTER, []string{"reason"}, nil},
		{"rackpool_scheduler_decision_seconds", dto.MetricType_HISTOGRAM, []string{"outcome"}, fast},
		{"rackpool_sessions_active", dto.MetricType_GAUGE, nil, nil},
		{"rackpool_tasks", dto.MetricType_GAUGE, []string{"state"}, nil},
		{"rackpool_usage", dto.MetricType_GAUGE, []string{"kind", "metric", "source"}, nil},
		{"rackpool_usage_series", dto.MetricType_GAUGE, nil, nil},
	}
	parser := expfmt.NewTextParser(model.LegacyValidation)
	fams, err := parser.TextToMetricFamilies(bytes.NewReader(scrapeAfterUse(t)))
	if err != nil {
		t.Fatalf("exposition does not parse: %v", err)
	}
	var names []string
	for name := range fams {
		names = append(names, name)
	}
	slices.Sort(names)
	var wantNames []string
	for _, w := range want {
		wantNames = append(wantNames, w.name)
	}
	if !slices.Equal(names, wantNames) {
		t.Fatalf("families:\n%s\nwant:\n%s", strings.Join(names, "\n"), strings.Join(wantNames, "\n"))
	}
	for _, w := range want {
		t.Run(w.name, func(t *testing.T) {
			f := fams[w.name]
			if f.GetType() != w.typ {
				t.Errorf("type %v, want %v", f.GetType(), w.typ)
			}
			if f.GetHelp() == "" {
				t.Error("no help text")
			}
			for _, m := range f.GetMetric() {
				var labels []string
				for _, l := range m.GetLabel() {
					labels = append(labels, l.GetName())
				}
				slices.Sort(labels)
				if !slices.Equal(labels, w.labels) {
					t.Errorf("labels %v, want %v", labels, w.labels)
				}
				if w.typ != dto.MetricType_HISTOGRAM {
					continue
				}
				var bounds []float64
				for _, b := range m.GetHistogram().GetBucket() {
					bounds = append(bounds, b.GetUpperBound())
				}
				if !slices.Equal(bounds, w.buckets) {
					t.Errorf("buckets %v, want %v", bounds, w.buckets)
				}
			}
		})
	}

	values := []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"rackpool_compositions", map[string]string{"state": "Composed"}, 1},
		{"rackpool_compositions", map[string]string{"state": "Reserved"}, 0},
		{"rackpool_composition_changes_total", map[string]string{"reason": "composed"}, 2},
		{"rackpool_composition_changes_total", map[string]string{"reason": "decomposed"}, 1},
		{"rackpool_compose_duration_seconds", map[string]string{"outcome": "ok"}, 2},
		{"rackpool_refused_requests_total", map[string]string{"reason": "401"}, 1},
		{"rackpool_http_requests_total", map[string]string{"method": "POST", "code": "201"}, 2},
		{"rackpool_audit_write_failures_total", nil, 0},
	}
	for _, v := range values {
		got, ok := sampleValue(fams[v.name], v.labels)
		if !ok {
			t.Errorf("%s%v: no sample", v.name, v.labels)
		} else if got != v.want {
			t.Errorf("%s%v = %v, want %v", v.name, v.labels, got, v.want)
		}
	}
}

// sampleValue returns the value of the sample with exactly these labels: a
// counter's or gauge's value, a histogram's count.
func sampleValue(f *dto.MetricFamily, labels map[string]string) (float64, bool) {
	for _, m := range f.GetMetric() {
		if len(m.GetLabel()) != len(labels) {
			continue
		}
		match := true
		for _, l := range m.GetLabel() {
			match = match && labels[l.GetName()] == l.GetValue()
		}
		if !match {
			continue
		}
		switch f.GetType() {
		case dto.MetricType_COUNTER:
			return m.GetCounter().GetValue(), true
		case dto.MetricType_GAUGE:
			return m.GetGauge().GetValue(), true
		case dto.MetricType_HISTOGRAM:
			return float64(m.GetHistogram().GetSampleCount()), true
		}
	}
	return 0, false
}

// TestMetricsPromtool runs Prometheus's own linter, promtool check
// metrics, on the exposition of a service in use: it parses the text as
// Prometheus does and flags naming, help and type problems. Like the other
// tests that need a tool (memcached in internal/cache), it runs when
// promtool is on PATH and fails without it when RACKPOOL_E2E=1 (CI, where
// .ci/run installs Debian's prometheus package).
func TestMetricsPromtool(t *testing.T) {
	bin, err := exec.LookPath("promtool")
	if err != nil {
		if os.Getenv("RACKPOOL_E2E") == "1" {
			t.Fatal("promtool is not on PATH (Debian package prometheus; .ci/run installs it)")
		}
		t.Skip("promtool is not on PATH and RACKPOOL_E2E is not 1")
	}
	body := scrapeAfterUse(t)
	cmd := childproc.Command(bin, "check", "metrics")
	cmd.Stdin = bytes.NewReader(body)
	out, err := cmd.CombinedOutput()
	if err != nil || len(bytes.TrimSpace(out)) > 0 {
		t.Fatalf("promtool check metrics: %v\n%s\non:\n%s", err, out, body)
	}
}

// TestMetricsEventSubscribers: rackpool_event_subscribers counts, as its
// help says, the live SSE streams (kind sse: event streams and metric
// report streams alike, not the server's own bus subscribers) and the push
// subscriptions (kind destination); a stream its client closed, or a
// deleted subscription, is no longer counted.
func TestMetricsEventSubscribers(t *testing.T) {
	s, _, _ := newFabricService(t, fabricreport.Options{})
	s.obs.Watch() // one of the server's own subscribers, which is no stream
	parser := expfmt.NewTextParser(model.LegacyValidation)
	count := func(kind string) float64 {
		t.Helper()
		fams, err := parser.TextToMetricFamilies(bytes.NewReader(s.must(http.StatusOK, "GET", "/metrics", nil, admin).body))
		if err != nil {
			t.Fatalf("exposition does not parse: %v", err)
		}
		v, ok := sampleValue(fams["rackpool_event_subscribers"], map[string]string{"kind": kind})
		if !ok {
			t.Fatalf("rackpool_event_subscribers{kind=%q}: no sample", kind)
		}
		return v
	}
	expect := func(kind string, want float64, what string) {
		t.Helper()
		if got := count(kind); got != want {
			t.Fatalf("%s: rackpool_event_subscribers{kind=%q} = %v, want %v", what, kind, got, want)
		}
	}
	// A closed stream is counted until its handler returns, which it does
	// when the server sees the connection close: wait for that, bounded.
	await := func(kind string, want float64, what string) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for got := count(kind); got != want; got = count(kind) {
			if time.Now().After(deadline) {
				t.Fatalf("%s: rackpool_event_subscribers{kind=%q} still %v after 10s, want %v", what, kind, got, want)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	expect("sse", 0, "before any stream")
	expect("destination", 0, "before any subscription")

	sub := s.must(http.StatusCreated, "POST", "/redfish/v1/EventService/Subscriptions", map[string]any{"Destination": newSink(t, make(chan string, 16))}, admin)
	expect("destination", 1, "after a push subscription")
	expect("sse", 0, "after a push subscription")

	blue, _, _ := s.tenants()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	first, closeFirst := context.WithCancel(ctx)
	s.openSSE(first, "", admin, "")
	s.openSSE(ctx, "?EventFormatType=MetricReport", admin, "")
	s.openSSE(ctx, "?RegistryPrefixes=ResourceEvent", blue, "")
	expect("sse", 3, "with an event stream, a metric report stream and a tenant's filtered stream open")
	expect("destination", 1, "with three streams open")

	closeFirst()
	await("sse", 2, "after the client closed one of the three streams")
	cancel()
	await("sse", 0, "after the client closed every stream")

	s.must(http.StatusNoContent, "DELETE", sub.header.Get("Location"), nil, admin)
	expect("destination", 0, "after the subscription was deleted")
}
