// Package metrics is rackpool's thin layer over the Prometheus client
// library (github.com/prometheus/client_golang), which does the work:
// atomic updates, consistent histograms, validation of names, and the
// exposition itself (promhttp, text format with content negotiation).
//
// What this package adds is what the callers share:
//
//   - constructors that take label names positionally and register at
//     once, panicking on a bad or duplicate name (a programming error);
//   - vectors whose With takes label values positionally, and metrics
//     without labels that exist (at zero) from the start;
//   - DefBuckets, the duration buckets rackpool has always exposed;
//   - GaugeFunc, a family whose labelled samples are read at scrape time
//     (client_golang's GaugeFunc has no labels).
package metrics

import (
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// DefBuckets are histogram upper bounds for durations in seconds, from
// 100 µs to 10 s in 1-2.5-5 steps. They are finer than
// prometheus.DefBuckets, which start at 5 ms.
var DefBuckets = []float64{
	0.0001, 0.00025, 0.0005,
	0.001, 0.0025, 0.005,
	0.01, 0.025, 0.05,
	0.1, 0.25, 0.5,
	1, 2.5, 5, 10,
}

// Registry holds registered metrics. The zero value is not usable; call
// NewRegistry. It is safe for concurrent use.
type Registry struct{ reg *prometheus.Registry }

// NewRegistry returns an empty registry: no Go runtime or process
// collectors, only what is registered in it.
func NewRegistry() *Registry { return &Registry{reg: prometheus.NewRegistry()} }

// Handler serves the exposition. A scrape that fails (a GaugeFunc sample
// with the wrong number of label values, two with the same values) is
// answered 500 with nothing of the exposition.
func (r *Registry) Handler() http.Handler {
	return promhttp.HandlerFor(r.reg, promhttp.HandlerOpts{})
}

// Handler serves the exposition of several registries as one, such as
// the metrics every account may read and those only some may (metric
// names must not repeat across them: a scrape that finds one twice fails
// as Registry.Handler's does).
func Handler(regs ...*Registry) http.Handler {
	g := make(prometheus.Gatherers, len(regs))
	for i, r := range regs {
		g[i] = r.reg
	}
	return promhttp.HandlerFor(g, promhttp.HandlerOpts{})
}

// CounterVec is a counter family with labels.
type CounterVec struct{ v *prometheus.CounterVec }

// Counter registers a counter family. By convention its name ends in
// _total.
func (r *Registry) Counter(name, help string, labels ...string) *CounterVec {
	v := prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, labels)
	r.reg.MustRegister(v)
	if len(labels) == 0 {
		v.WithLabelValues() // a metric without labels exists from the start
	}
	return &CounterVec{v}
}

// With returns the counter for the label values, in the order the label
// names were registered. It panics on a wrong number of values.
func (cv *CounterVec) With(values ...string) prometheus.Counter {
	return cv.v.WithLabelValues(values...)
}

// HistogramVec is a histogram family with labels.
type HistogramVec struct{ v *prometheus.HistogramVec }

// Histogram registers a histogram family with the given bucket upper bounds
// (DefBuckets for durations in seconds); +Inf is added by itself.
func (r *Registry) Histogram(name, help string, buckets []float64, labels ...string) *HistogramVec {
	v := prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: name, Help: help, Buckets: buckets}, labels)
	r.reg.MustRegister(v)
	if len(labels) == 0 {
		v.WithLabelValues()
	}
	return &HistogramVec{v}
}

// With returns the histogram for the label values, in the order the label
// names were registered. It panics on a wrong number of values.
func (hv *HistogramVec) With(values ...string) prometheus.Observer {
	return hv.v.WithLabelValues(values...)
}

// Sample is one value a GaugeFunc reports: the label values, in the order
// of the label names given at registration, and the value.
type Sample struct {
	Labels []string
	Value  float64
}

// GaugeFunc registers a gauge family whose samples fn returns at every
// scrape, such as compositions by state. fn runs on the scraping goroutine
// and must be safe to call concurrently with itself.
func (r *Registry) GaugeFunc(name, help string, labels []string, fn func() []Sample) {
	if fn == nil {
		panic("metrics: " + name + ": nil GaugeFunc")
	}
	r.reg.MustRegister(&gaugeFunc{desc: prometheus.NewDesc(name, help, labels, nil), fn: fn})
}

// gaugeFunc is the collector behind GaugeFunc.
type gaugeFunc struct {
	desc *prometheus.Desc
	fn   func() []Sample
}

var _ prometheus.Collector = (*gaugeFunc)(nil)

func (g *gaugeFunc) Describe(ch chan<- *prometheus.Desc) { ch <- g.desc }

func (g *gaugeFunc) Collect(ch chan<- prometheus.Metric) {
	for _, s := range g.fn() {
		m, err := prometheus.NewConstMetric(g.desc, prometheus.GaugeValue, s.Value, s.Labels...)
		if err != nil {
			m = prometheus.NewInvalidMetric(g.desc, err) // fails the scrape
		}
		ch <- m
	}
}
