// Package metrics is a small, dependency-free registry of counters, gauges
// and histograms that it exposes in the Prometheus text format, version
// 0.0.4 (what every Prometheus server and agent scrapes).
//
// A metric is registered once, by name, with its help text and label names;
// registering a name twice, a malformed name or a wrong number of label
// values is a programming error and panics. With returns the child for one
// set of label values, creating it on first use; hot paths keep the child
// rather than calling With each time. Updating a child is one atomic
// operation (a compare-and-swap loop for float sums) and never takes a lock.
//
// WriteTo renders every family in name order and, within a family, every
// child in label-value order, so the output is deterministic. A histogram's
// _count is the sum of its buckets as read during that scrape, so it always
// equals the +Inf bucket; _sum is read separately and may lag an Observe
// that runs concurrently with the scrape.
//
// # Exposition format
//
//	# HELP <name> <help, with \ and newline escaped>
//	# TYPE <name> counter|gauge|histogram
//	<name>{<label>="<value, with \ " and newline escaped>",...} <value>
//
// Histograms add _bucket{le="<bound>"} lines (cumulative, ending with
// le="+Inf"), _sum and _count. Values are written as Prometheus writes them:
// +Inf, -Inf, NaN, integers without an exponent, other numbers in the
// shortest form that reads back exactly.
package metrics

import (
	"bytes"
	"fmt"
	"io"
	"math"
	"net/http"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"unicode/utf8"
)

// ContentType is the media type of the exposition Handler serves.
const ContentType = "text/plain; version=0.0.4; charset=utf-8"

// DefBuckets are histogram upper bounds for durations in seconds, from
// 100 µs to 10 s in 1-2.5-5 steps.
var DefBuckets = []float64{
	0.0001, 0.00025, 0.0005,
	0.001, 0.0025, 0.005,
	0.01, 0.025, 0.05,
	0.1, 0.25, 0.5,
	1, 2.5, 5, 10,
}

// Registry holds registered metrics. The zero value is not usable; call
// NewRegistry. It is safe for concurrent use.
type Registry struct {
	mu       sync.RWMutex
	families map[string]family
	taken    map[string]string // every series name in use → the family that uses it
}

// NewRegistry returns an empty registry.
func NewRegistry() *Registry {
	return &Registry{families: map[string]family{}, taken: map[string]string{}}
}

// family is one registered metric name.
type family interface {
	// write appends the family's samples, without HELP and TYPE lines, in
	// label-value order.
	write(b *bytes.Buffer) error
	header() (help, typ string)
}

// register adds f under name, claiming the series names it writes. It
// panics if any is taken or a name is malformed.
func (r *Registry) register(name string, labels []string, f family, series ...string) {
	if !validMetricName(name) {
		panic(fmt.Sprintf("metrics: invalid metric name %q", name))
	}
	seen := map[string]bool{}
	for _, l := range labels {
		if !validLabelName(l) {
			panic(fmt.Sprintf("metrics: %s: invalid label name %q", name, l))
		}
		if seen[l] {
			panic(fmt.Sprintf("metrics: %s: duplicate label name %q", name, l))
		}
		seen[l] = true
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, s := range append([]string{name}, series...) {
		if owner, ok := r.taken[s]; ok {
			panic(fmt.Sprintf("metrics: %s: series name %s already registered by %s", name, s, owner))
		}
	}
	for _, s := range append([]string{name}, series...) {
		r.taken[s] = name
	}
	r.families[name] = f
}

// WriteTo writes every metric in the text exposition format, families in
// name order. The whole exposition is rendered before anything is written,
// so an error (a GaugeFunc sample with the wrong number of label values, or
// two samples with the same labels) writes nothing.
func (r *Registry) WriteTo(w io.Writer) (int64, error) {
	var b bytes.Buffer
	if err := r.render(&b); err != nil {
		return 0, err
	}
	n, err := w.Write(b.Bytes())
	return int64(n), err
}

func (r *Registry) render(b *bytes.Buffer) error {
	r.mu.RLock()
	names := make([]string, 0, len(r.families))
	fams := make(map[string]family, len(r.families))
	for n, f := range r.families {
		names = append(names, n)
		fams[n] = f
	}
	r.mu.RUnlock()
	sort.Strings(names)
	var body bytes.Buffer
	for _, name := range names {
		f := fams[name]
		body.Reset()
		if err := f.write(&body); err != nil {
			return err
		}
		if body.Len() == 0 {
			continue // a vector with no children yet
		}
		help, typ := f.header()
		b.WriteString("# HELP ")
		b.WriteString(name)
		b.WriteByte(' ')
		b.WriteString(escapeHelp(help))
		b.WriteString("\n# TYPE ")
		b.WriteString(name)
		b.WriteByte(' ')
		b.WriteString(typ)
		b.WriteByte('\n')
		b.Write(body.Bytes())
	}
	return nil
}

// Handler serves the exposition for GET and HEAD requests.
func (r *Registry) Handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.Method != http.MethodGet && req.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		var b bytes.Buffer
		if err := r.render(&b); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", ContentType)
		w.Header().Set("Content-Length", strconv.Itoa(b.Len()))
		if req.Method == http.MethodHead {
			return
		}
		w.Write(b.Bytes())
	})
}

// vec is the part every vector shares: the label names and the children by
// label values.
type vec[T any] struct {
	name   string
	help   string
	labels []string
	newT   func() *T

	mu       sync.RWMutex
	children map[string]*child[T] // by joined label values
}

type child[T any] struct {
	values []string
	m      *T
}

func newVec[T any](name, help string, labels []string, newT func() *T) *vec[T] {
	v := &vec[T]{
		name:     name,
		help:     help,
		labels:   slices.Clone(labels),
		newT:     newT,
		children: map[string]*child[T]{},
	}
	if len(labels) == 0 {
		v.with() // a metric without labels exists from the start
	}
	return v
}

// with returns the child for values, creating it on first use. It panics
// when the number of values is not the number of label names.
func (v *vec[T]) with(values ...string) *T {
	if len(values) != len(v.labels) {
		panic(fmt.Sprintf("metrics: %s: %d label values for %d labels %v", v.name, len(values), len(v.labels), v.labels))
	}
	key := strings.Join(values, "\xff")
	v.mu.RLock()
	c, ok := v.children[key]
	v.mu.RUnlock()
	if ok {
		return c.m
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	if c, ok := v.children[key]; ok {
		return c.m
	}
	c = &child[T]{values: slices.Clone(values), m: v.newT()}
	v.children[key] = c
	return c.m
}

// sorted returns the children in label-value order.
func (v *vec[T]) sorted() []*child[T] {
	v.mu.RLock()
	out := make([]*child[T], 0, len(v.children))
	for _, c := range v.children {
		out = append(out, c)
	}
	v.mu.RUnlock()
	slices.SortFunc(out, func(a, b *child[T]) int { return slices.Compare(a.values, b.values) })
	return out
}

// atomicFloat is a float64 updated atomically.
type atomicFloat struct{ bits atomic.Uint64 }

func (f *atomicFloat) load() float64   { return math.Float64frombits(f.bits.Load()) }
func (f *atomicFloat) store(v float64) { f.bits.Store(math.Float64bits(v)) }
func (f *atomicFloat) add(d float64) {
	for {
		old := f.bits.Load()
		if f.bits.CompareAndSwap(old, math.Float64bits(math.Float64frombits(old)+d)) {
			return
		}
	}
}

// Counter is a value that only goes up.
type Counter struct{ v atomicFloat }

// Inc adds one.
func (c *Counter) Inc() { c.v.add(1) }

// Add adds d, which must not be negative (it panics otherwise: a counter
// never goes down).
func (c *Counter) Add(d float64) {
	if d < 0 {
		panic(fmt.Sprintf("metrics: counter decreased by %v", d))
	}
	c.v.add(d)
}

// Value returns the counter's current value.
func (c *Counter) Value() float64 { return c.v.load() }

// CounterVec is a counter family with labels.
type CounterVec struct{ v *vec[Counter] }

// Counter registers a counter family. By convention its name ends in
// _total.
func (r *Registry) Counter(name, help string, labels ...string) *CounterVec {
	cv := &CounterVec{newVec(name, help, labels, func() *Counter { return new(Counter) })}
	r.register(name, labels, cv)
	return cv
}

// With returns the counter for the label values, in the order the label
// names were registered.
func (cv *CounterVec) With(values ...string) *Counter { return cv.v.with(values...) }

func (cv *CounterVec) header() (string, string) { return cv.v.help, "counter" }

func (cv *CounterVec) write(b *bytes.Buffer) error {
	for _, c := range cv.v.sorted() {
		writeSample(b, cv.v.name, cv.v.labels, c.values, "", "", c.m.Value())
	}
	return nil
}

// Gauge is a value that goes up and down.
type Gauge struct{ v atomicFloat }

// Set sets the gauge to v.
func (g *Gauge) Set(v float64) { g.v.store(v) }

// Inc adds one.
func (g *Gauge) Inc() { g.v.add(1) }

// Dec subtracts one.
func (g *Gauge) Dec() { g.v.add(-1) }

// Add adds d, which may be negative.
func (g *Gauge) Add(d float64) { g.v.add(d) }

// Value returns the gauge's current value.
func (g *Gauge) Value() float64 { return g.v.load() }

// GaugeVec is a gauge family with labels.
type GaugeVec struct{ v *vec[Gauge] }

// Gauge registers a gauge family.
func (r *Registry) Gauge(name, help string, labels ...string) *GaugeVec {
	gv := &GaugeVec{newVec(name, help, labels, func() *Gauge { return new(Gauge) })}
	r.register(name, labels, gv)
	return gv
}

// With returns the gauge for the label values, in the order the label
// names were registered.
func (gv *GaugeVec) With(values ...string) *Gauge { return gv.v.with(values...) }

func (gv *GaugeVec) header() (string, string) { return gv.v.help, "gauge" }

func (gv *GaugeVec) write(b *bytes.Buffer) error {
	for _, c := range gv.v.sorted() {
		writeSample(b, gv.v.name, gv.v.labels, c.values, "", "", c.m.Value())
	}
	return nil
}

// Sample is one value a GaugeFunc reports: the label values, in the order
// of the label names given at registration, and the value.
type Sample struct {
	Labels []string
	Value  float64
}

type gaugeFunc struct {
	name, help string
	labels     []string
	fn         func() []Sample
}

// GaugeFunc registers a gauge family whose samples fn returns at every
// scrape, such as compositions by state. fn runs on the scraping goroutine
// and must be safe to call concurrently with itself. A sample with the
// wrong number of label values, or two with the same values, makes the
// scrape fail.
func (r *Registry) GaugeFunc(name, help string, labels []string, fn func() []Sample) {
	if fn == nil {
		panic(fmt.Sprintf("metrics: %s: nil GaugeFunc", name))
	}
	r.register(name, labels, &gaugeFunc{name: name, help: help, labels: slices.Clone(labels), fn: fn})
}

func (g *gaugeFunc) header() (string, string) { return g.help, "gauge" }

func (g *gaugeFunc) write(b *bytes.Buffer) error {
	samples := slices.Clone(g.fn())
	for _, s := range samples {
		if len(s.Labels) != len(g.labels) {
			return fmt.Errorf("metrics: %s: sample has %d label values for %d labels %v", g.name, len(s.Labels), len(g.labels), g.labels)
		}
	}
	slices.SortStableFunc(samples, func(a, b Sample) int { return slices.Compare(a.Labels, b.Labels) })
	for i, s := range samples {
		if i > 0 && slices.Equal(samples[i-1].Labels, s.Labels) {
			return fmt.Errorf("metrics: %s: two samples with label values %q", g.name, s.Labels)
		}
		writeSample(b, g.name, g.labels, s.Labels, "", "", s.Value)
	}
	return nil
}

// Histogram counts observations in buckets.
type Histogram struct {
	upper  []float64       // bucket upper bounds, ascending, without +Inf
	counts []atomic.Uint64 // per bucket, not cumulative; the last is +Inf
	sum    atomicFloat
}

// Observe records v: it lands in the first bucket whose upper bound is at
// least v (le means "less than or equal"). NaN lands in +Inf only.
func (h *Histogram) Observe(v float64) {
	i := sort.SearchFloat64s(h.upper, v) // first bound >= v; len(upper) for +Inf
	h.counts[i].Add(1)
	h.sum.add(v)
}

// HistogramVec is a histogram family with labels.
type HistogramVec struct {
	v     *vec[Histogram]
	upper []float64
}

// Histogram registers a histogram family with the given bucket upper bounds
// (use DefBuckets for durations in seconds). The bounds must be strictly
// increasing and finite; +Inf is added by itself. "le" is not a valid
// label name for a histogram.
func (r *Registry) Histogram(name, help string, buckets []float64, labels ...string) *HistogramVec {
	if len(buckets) == 0 {
		panic(fmt.Sprintf("metrics: %s: no buckets", name))
	}
	for i, u := range buckets {
		if math.IsNaN(u) || math.IsInf(u, 0) {
			panic(fmt.Sprintf("metrics: %s: bucket bound %v", name, u))
		}
		if i > 0 && u <= buckets[i-1] {
			panic(fmt.Sprintf("metrics: %s: bucket bounds not strictly increasing at %v", name, u))
		}
	}
	if slices.Contains(labels, "le") {
		panic(fmt.Sprintf("metrics: %s: histogram label named le", name))
	}
	upper := slices.Clone(buckets)
	hv := &HistogramVec{upper: upper}
	hv.v = newVec(name, help, labels, func() *Histogram {
		return &Histogram{upper: upper, counts: make([]atomic.Uint64, len(upper)+1)}
	})
	r.register(name, labels, hv, name+"_bucket", name+"_sum", name+"_count")
	return hv
}

// With returns the histogram for the label values, in the order the label
// names were registered.
func (hv *HistogramVec) With(values ...string) *Histogram { return hv.v.with(values...) }

func (hv *HistogramVec) header() (string, string) { return hv.v.help, "histogram" }

func (hv *HistogramVec) write(b *bytes.Buffer) error {
	name, labels := hv.v.name, hv.v.labels
	for _, c := range hv.v.sorted() {
		h := c.m
		var cum uint64
		for i := range h.counts {
			cum += h.counts[i].Load()
			le := math.Inf(1)
			if i < len(h.upper) {
				le = h.upper[i]
			}
			writeSample(b, name+"_bucket", labels, c.values, "le", formatFloat(le), float64(cum))
		}
		writeSample(b, name+"_sum", labels, c.values, "", "", h.sum.load())
		writeSample(b, name+"_count", labels, c.values, "", "", float64(cum))
	}
	return nil
}

// writeSample writes one sample line; extraName/extraValue, when set, is a
// last label (a histogram's le).
func writeSample(b *bytes.Buffer, name string, labels, values []string, extraName, extraValue string, v float64) {
	b.WriteString(name)
	if len(labels) > 0 || extraName != "" {
		b.WriteByte('{')
		for i, l := range labels {
			if i > 0 {
				b.WriteByte(',')
			}
			b.WriteString(l)
			b.WriteString(`="`)
			b.WriteString(escapeLabelValue(values[i]))
			b.WriteByte('"')
		}
		if extraName != "" {
			if len(labels) > 0 {
				b.WriteByte(',')
			}
			b.WriteString(extraName)
			b.WriteString(`="`)
			b.WriteString(extraValue)
			b.WriteByte('"')
		}
		b.WriteByte('}')
	}
	b.WriteByte(' ')
	b.WriteString(formatFloat(v))
	b.WriteByte('\n')
}

var (
	helpEscaper  = strings.NewReplacer(`\`, `\\`, "\n", `\n`)
	labelEscaper = strings.NewReplacer(`\`, `\\`, "\n", `\n`, `"`, `\"`)
)

// escapeHelp escapes a HELP text: backslash and newline. Invalid UTF-8
// becomes U+FFFD, since the format is UTF-8.
func escapeHelp(s string) string { return helpEscaper.Replace(validUTF8(s)) }

// escapeLabelValue escapes a label value: backslash, double quote and
// newline. Invalid UTF-8 becomes U+FFFD.
func escapeLabelValue(s string) string { return labelEscaper.Replace(validUTF8(s)) }

func validUTF8(s string) string {
	if utf8.ValidString(s) {
		return s
	}
	return strings.ToValidUTF8(s, "\uFFFD")
}

// formatFloat writes v as Prometheus does: +Inf, -Inf and NaN by name,
// integers up to 2^53 in plain digits, everything else in the shortest
// representation that parses back to v.
func formatFloat(v float64) string {
	switch {
	case math.IsInf(v, 1):
		return "+Inf"
	case math.IsInf(v, -1):
		return "-Inf"
	case math.IsNaN(v):
		return "NaN"
	case v == math.Trunc(v) && math.Abs(v) <= 1<<53:
		return strconv.FormatFloat(v, 'f', -1, 64)
	}
	return strconv.FormatFloat(v, 'g', -1, 64)
}

// validMetricName reports whether s matches [a-zA-Z_:][a-zA-Z0-9_:]*.
func validMetricName(s string) bool {
	return validName(s, true)
}

// validLabelName reports whether s matches [a-zA-Z_][a-zA-Z0-9_]* and does
// not start with the reserved "__".
func validLabelName(s string) bool {
	return validName(s, false) && !strings.HasPrefix(s, "__")
}

func validName(s string, colon bool) bool {
	if s == "" {
		return false
	}
	for i, r := range s {
		ok := r == '_' || (colon && r == ':') ||
			('a' <= r && r <= 'z') || ('A' <= r && r <= 'Z') ||
			(i > 0 && '0' <= r && r <= '9')
		if !ok {
			return false
		}
	}
	return true
}

// compile-time checks that every family kind renders.
var (
	_ family = (*CounterVec)(nil)
	_ family = (*GaugeVec)(nil)
	_ family = (*gaugeFunc)(nil)
	_ family = (*HistogramVec)(nil)
)
