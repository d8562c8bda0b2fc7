package redfish

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"rackpool/internal/events"
	"rackpool/internal/inventory"
	"rackpool/internal/metrics"
)

// metricsRoutes are the routes of Prometheus metrics (routes.go).
var metricsRoutes = []route{
	{"GET /metrics", login, (*Server).getMetrics},
}

// request records one API request.
func (m *apiMetrics) request(method string, code int, took time.Duration) {
	switch method {
	case "GET", "HEAD", "POST", "PATCH", "PUT", "DELETE":
	default:
		method = "OTHER" // clients choose methods; keep the label set bounded
	}
	m.requests.With(method, strconv.Itoa(code)).Inc()
	m.reqLatency.With(method).Observe(took.Seconds())
}

// apiMetrics are the Redfish service's own metrics, registered beside the
// Observer's in its registry.
type apiMetrics struct {
	reg         *metrics.Registry
	requests    *metrics.CounterVec
	reqLatency  *metrics.HistogramVec
	composeLat  *metrics.HistogramVec
	refusals    *metrics.CounterVec
	auditFailed prometheus.Counter
}

// newAPIMetrics registers the service's metrics in reg: the requests, and
// the gauges that read the server's state.
func newAPIMetrics(reg *metrics.Registry, bus *events.Bus, s *Server) *apiMetrics {
	m := &apiMetrics{reg: reg,
		requests: reg.Counter("rackpool_http_requests_total", "Redfish API requests by method and status code.", "method", "code"),
		reqLatency: reg.Histogram("rackpool_http_request_duration_seconds", "Redfish API request latency.",
			metrics.DefBuckets, "method"),
		composeLat: reg.Histogram("rackpool_compose_duration_seconds",
			"Time to compose a system through the API (placement, durable records, fabric attach), by outcome.",
			metrics.DefBuckets, "outcome"),
		refusals: reg.Counter("rackpool_refused_requests_total", "Requests refused for authentication or authorisation, by reason.", "reason"),
		auditFailed: reg.Counter("rackpool_audit_write_failures_total",
			"Audit entries that could not be written (the request itself was answered).").With(),
	}
	reg.GaugeFunc("rackpool_compositions", "Compositions and reservations by state.", []string{"state"}, func() []metrics.Sample {
		counts := map[inventory.State]int{inventory.Composing: 0, inventory.Composed: 0, inventory.Updating: 0,
			inventory.Decomposing: 0, inventory.Reserved: 0}
		for _, c := range s.mgr.List() {
			counts[c.State]++
		}
		counts[inventory.Reserved] = len(s.mgr.Reservations())
		var out []metrics.Sample
		for st, n := range counts {
			out = append(out, metrics.Sample{Labels: []string{string(st)}, Value: float64(n)})
		}
		return out
	})
	reg.GaugeFunc("rackpool_sessions_active", "Live Redfish sessions.", nil, func() []metrics.Sample {
		return []metrics.Sample{{Value: float64(s.auth.ActiveSessions(context.Background()))}}
	})
	reg.GaugeFunc("rackpool_tasks", "Tasks by state.", []string{"state"}, func() []metrics.Sample {
		var out []metrics.Sample
		for st, n := range s.tasks.States() {
			out = append(out, metrics.Sample{Labels: []string{st}, Value: float64(n)})
		}
		return out
	})
	reg.GaugeFunc("rackpool_event_subscribers", "Live SSE streams (kind sse: events and metric reports) and push destinations (kind destination).", []string{"kind"}, func() []metrics.Sample {
		return []metrics.Sample{
			{Labels: []string{"sse"}, Value: float64(s.eventsvc.Streams())},
			{Labels: []string{"destination"}, Value: float64(len(bus.Destinations()))},
		}
	})
	return m
}

// getMetrics serves the Prometheus exposition. It needs the Login
// privilege like the rest of the API (a scraper uses a ReadOnly account).
// The usage gauges (rackpool_usage) name every tenant's systems and
// leases: only accounts without a tenant get them, and only from the
// replica that keeps the usage telemetry (the leader of active replicas).
//
// An active replica labels its series replica="TAG", and answers every
// replica's: it reads the others' own (?local, with the client's
// credentials, Options.Gather) and merges them with its own. If one
// cannot be read it answers 503 with Retry-After, never a partial
// exposition (which would differ from replica to replica). With ?local it
// answers its own series alone: a scraper that scrapes every replica asks
// each for its own.
func (s *Server) getMetrics(w http.ResponseWriter, r *http.Request) error {
	regs := []*metrics.Registry{s.metrics.reg}
	if s.usageReg != nil && principal(r).Tenant == "" && (s.leads == nil || s.leads()) {
		regs = append(regs, s.usageReg)
	}
	if s.replica == "" {
		metrics.Handler(regs...).ServeHTTP(w, r)
		return nil
	}
	var others [][]byte
	if s.gather != nil && !r.URL.Query().Has("local") {
		var err error
		if others, err = s.gather(r, localMetricsPath); err != nil {
			return newError(http.StatusServiceUnavailable, baseRegistry+"ServiceTemporarilyUnavailable",
				"The service is temporarily unavailable.  Retry in 1 seconds.", "1").
				withResolution("Another replica's metrics could not be read (" + err.Error() + "). Retry shortly.")
		}
	}
	h, err := metrics.Merged("replica", s.replica, regs, others)
	if err != nil {
		return fmt.Errorf("another replica's metrics: %w", err)
	}
	h.ServeHTTP(w, r)
	return nil
}

// localMetricsPath asks a replica for its own series.
const localMetricsPath = "/metrics?local"
