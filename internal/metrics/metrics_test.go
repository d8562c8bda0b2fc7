package metrics

import (
	"bytes"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"unicode/utf8"
)

func render(t *testing.T, r *Registry) string {
	t.Helper()
	var b bytes.Buffer
	n, err := r.WriteTo(&b)
	if err != nil {
		t.Fatalf("WriteTo: %v", err)
	}
	if n != int64(b.Len()) {
		t.Fatalf("WriteTo returned %d, wrote %d bytes", n, b.Len())
	}
	return b.String()
}

func TestExpositionGolden(t *testing.T) {
	r := NewRegistry()
	// Registered out of name order: the output is sorted anyway.
	req := r.Counter("rackpool_http_requests_total", "HTTP requests served.", "method", "code")
	up := r.Gauge("rackpool_up", "Whether the control plane is serving.")
	lat := r.Histogram("rackpool_compose_seconds", "Time to compose a system.", []float64{0.01, 0.1, 1}, "kind")
	r.GaugeFunc("rackpool_compositions", "Compositions by state.", []string{"state"}, func() []Sample {
		return []Sample{{Labels: []string{"Composing"}, Value: 1}, {Labels: []string{"Composed"}, Value: 12}}
	})
	r.Counter("rackpool_unused_total", "A vector with no children yet is left out.", "x")

	req.With("POST", "201").Add(3)
	req.With("GET", "200").Inc()
	req.With("GET", "200").Inc()
	req.With("GET", "404").Inc()
	up.With().Set(1)
	for _, v := range []float64{0.005, 0.01, 0.05, 0.5, 3} {
		lat.With("gpu").Observe(v)
	}
	lat.With("memory").Observe(0.25)

	want := `# HELP rackpool_compose_seconds Time to compose a system.
# TYPE rackpool_compose_seconds histogram
rackpool_compose_seconds_bucket{kind="gpu",le="0.01"} 2
rackpool_compose_seconds_bucket{kind="gpu",le="0.1"} 3
rackpool_compose_seconds_bucket{kind="gpu",le="1"} 4
rackpool_compose_seconds_bucket{kind="gpu",le="+Inf"} 5
rackpool_compose_seconds_sum{kind="gpu"} 3.565
rackpool_compose_seconds_count{kind="gpu"} 5
rackpool_compose_seconds_bucket{kind="memory",le="0.01"} 0
rackpool_compose_seconds_bucket{kind="memory",le="0.1"} 0
rackpool_compose_seconds_bucket{kind="memory",le="1"} 1
rackpool_compose_seconds_bucket{kind="memory",le="+Inf"} 1
rackpool_compose_seconds_sum{kind="memory"} 0.25
rackpool_compose_seconds_count{kind="memory"} 1
# HELP rackpool_compositions Compositions by state.
# TYPE rackpool_compositions gauge
rackpool_compositions{state="Composed"} 12
rackpool_compositions{state="Composing"} 1
# HELP rackpool_http_requests_total HTTP requests served.
# TYPE rackpool_http_requests_total counter
rackpool_http_requests_total{method="GET",code="200"} 2
rackpool_http_requests_total{method="GET",code="404"} 1
rackpool_http_requests_total{method="POST",code="201"} 3
# HELP rackpool_up Whether the control plane is serving.
# TYPE rackpool_up gauge
rackpool_up 1
`
	got := render(t, r)
	if got != want {
		t.Fatalf("exposition:\n%s\nwant:\n%s", got, want)
	}
	if _, err := parseExposition(got); err != nil {
		t.Fatalf("golden text does not parse: %v", err)
	}
}

func TestEscaping(t *testing.T) {
	tests := []struct {
		name      string
		help      string
		value     string
		wantHelp  string
		wantLabel string
	}{
		{"plain", "Plain help.", "plain", `Plain help.`, `plain`},
		{"backslash", `C:\path`, `C:\path`, `C:\\path`, `C:\\path`},
		{"newline", "two\nlines", "two\nlines", `two\nlines`, `two\nlines`},
		{"quote", `say "hi"`, `say "hi"`, `say "hi"`, `say \"hi\"`},
		{"all", "\\\"\n", "\\\"\n", `\\"\n`, `\\\"\n`},
		{"unicode", "ünï — ok", "ünï — ok", "ünï — ok", "ünï — ok"},
		{"invalid utf-8", "bad\xffbyte", "bad\xffbyte", "bad\uFFFDbyte", "bad\uFFFDbyte"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := NewRegistry()
			r.Gauge("m", tt.help, "l").With(tt.value).Set(1)
			want := "# HELP m " + tt.wantHelp + "\n# TYPE m gauge\nm{l=\"" + tt.wantLabel + "\"} 1\n"
			got := render(t, r)
			if got != want {
				t.Fatalf("got\n%q\nwant\n%q", got, want)
			}
			fams, err := parseExposition(got)
			if err != nil {
				t.Fatalf("parse: %v", err)
			}
			wantValue := strings.ToValidUTF8(tt.value, "\uFFFD")
			if v, _ := fams[0].samples[0].label("l"); v != wantValue {
				t.Errorf("label reads back as %q, want %q", v, wantValue)
			}
			if h := fams[0].help; h != strings.ToValidUTF8(tt.help, "\uFFFD") {
				t.Errorf("help reads back as %q, want %q", h, tt.help)
			}
		})
	}
}

func FuzzLabelValue(f *testing.F) {
	for _, s := range []string{"", "plain", `a\b`, "a\nb", `"q"`, "\\\"\n", "bad\xff", "\\n", `\`} {
		f.Add(s, s)
	}
	f.Fuzz(func(t *testing.T, value, help string) {
		r := NewRegistry()
		r.Counter("fuzz_total", help, "v").With(value).Inc()
		var b bytes.Buffer
		if _, err := r.WriteTo(&b); err != nil {
			t.Fatal(err)
		}
		fams, err := parseExposition(b.String())
		if err != nil {
			t.Fatalf("output does not parse: %v\n%s", err, b.String())
		}
		if len(fams) != 1 || len(fams[0].samples) != 1 {
			t.Fatalf("parsed %+v", fams)
		}
		if got, want := fams[0].help, strings.ToValidUTF8(help, "\uFFFD"); got != want {
			t.Errorf("help %q reads back as %q", want, got)
		}
		if got, _ := fams[0].samples[0].label("v"); got != strings.ToValidUTF8(value, "\uFFFD") {
			t.Errorf("label %q reads back as %q", value, got)
		}
		if !utf8.Valid(b.Bytes()) {
			t.Errorf("output is not UTF-8")
		}
	})
}

func TestFormatFloat(t *testing.T) {
	tests := []struct {
		v    float64
		want string
	}{
		{0, "0"},
		{1, "1"},
		{-3, "-3"},
		{1e6, "1000000"},
		{123456789012, "123456789012"},
		{1 << 53, "9007199254740992"},
		{1e20, "1e+20"},
		{0.1, "0.1"},
		{0.00025, "0.00025"},
		{1.5e-7, "1.5e-07"},
		{2.5, "2.5"},
		{math.Inf(1), "+Inf"},
		{math.Inf(-1), "-Inf"},
		{math.NaN(), "NaN"},
	}
	for _, tt := range tests {
		if got := formatFloat(tt.v); got != tt.want {
			t.Errorf("formatFloat(%v) = %q, want %q", tt.v, got, tt.want)
		}
		if back, err := parseValue(formatFloat(tt.v)); err != nil || (back != tt.v && !math.IsNaN(tt.v)) {
			t.Errorf("formatFloat(%v) reads back as %v, %v", tt.v, back, err)
		}
	}
}

func TestHistogramBuckets(t *testing.T) {
	bounds := []float64{1, 2, 5}
	tests := []struct {
		name    string
		observe []float64
		want    []float64 // cumulative counts for le=1, 2, 5, +Inf
		sum     float64
	}{
		{"empty", nil, []float64{0, 0, 0, 0}, 0},
		{"on a bound counts in that bucket", []float64{1, 2, 5}, []float64{1, 2, 3, 3}, 8},
		{"just above a bound counts in the next", []float64{1.0000001, 5.0000001}, []float64{0, 1, 1, 2}, 6.0000002},
		{"below the first bound", []float64{-10, 0, 0.5}, []float64{3, 3, 3, 3}, -9.5},
		{"above the last bound", []float64{6, 1e9}, []float64{0, 0, 0, 2}, 1e9 + 6},
		{"+Inf", []float64{math.Inf(1)}, []float64{0, 0, 0, 1}, math.Inf(1)},
		{"mixed", []float64{0.5, 1.5, 1.5, 3, 7}, []float64{1, 3, 4, 5}, 13.5},
	}
	les := []string{"1", "2", "5", "+Inf"}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := NewRegistry()
			h := r.Histogram("h", "help", bounds)
			for _, v := range tt.observe {
				h.With().Observe(v)
			}
			fams, err := parseExposition(render(t, r))
			if err != nil {
				t.Fatal(err)
			}
			got := map[string]float64{}
			var sum, count float64
			for _, s := range fams[0].samples {
				switch s.name {
				case "h_bucket":
					le, _ := s.label("le")
					got[le] = s.value
				case "h_sum":
					sum = s.value
				case "h_count":
					count = s.value
				}
			}
			for i, le := range les {
				if got[le] != tt.want[i] {
					t.Errorf("le=%s: %v, want %v", le, got[le], tt.want[i])
				}
			}
			if sum != tt.sum && math.Abs(sum-tt.sum) > 1e-9*math.Abs(tt.sum) {
				t.Errorf("sum %v, want %v", sum, tt.sum)
			}
			if count != float64(len(tt.observe)) {
				t.Errorf("count %v, want %d", count, len(tt.observe))
			}
		})
	}
}

func TestDefBuckets(t *testing.T) {
	if DefBuckets[0] != 0.0001 || DefBuckets[len(DefBuckets)-1] != 10 {
		t.Fatalf("DefBuckets span %v..%v, want 100µs..10s", DefBuckets[0], DefBuckets[len(DefBuckets)-1])
	}
	r := NewRegistry()
	r.Histogram("d_seconds", "help", DefBuckets).With().Observe(0.003)
	fams, err := parseExposition(render(t, r))
	if err != nil {
		t.Fatal(err)
	}
	if n := len(fams[0].samples); n != len(DefBuckets)+3 {
		t.Fatalf("%d samples, want %d buckets + +Inf + sum + count", n, len(DefBuckets))
	}
}

func TestGaugeOperations(t *testing.T) {
	r := NewRegistry()
	g := r.Gauge("g", "help").With()
	g.Set(10)
	g.Inc()
	g.Dec()
	g.Dec()
	g.Add(-2.5)
	g.Add(0.25)
	if v := g.Value(); v != 6.75 {
		t.Fatalf("gauge = %v, want 6.75", v)
	}
	c := r.Counter("c_total", "help").With()
	c.Inc()
	c.Add(1.5)
	if v := c.Value(); v != 2.5 {
		t.Fatalf("counter = %v, want 2.5", v)
	}
	if got, want := render(t, r), "# HELP c_total help\n# TYPE c_total counter\nc_total 2.5\n# HELP g help\n# TYPE g gauge\ng 6.75\n"; got != want {
		t.Fatalf("got\n%s\nwant\n%s", got, want)
	}
}

func TestGaugeFuncEvaluatedAtScrape(t *testing.T) {
	r := NewRegistry()
	var mu sync.Mutex
	active := 0
	r.GaugeFunc("sessions", "Active sessions.", nil, func() []Sample {
		mu.Lock()
		defer mu.Unlock()
		return []Sample{{Value: float64(active)}}
	})
	for _, n := range []int{0, 3, 1} {
		mu.Lock()
		active = n
		mu.Unlock()
		want := fmt.Sprintf("# HELP sessions Active sessions.\n# TYPE sessions gauge\nsessions %d\n", n)
		if got := render(t, r); got != want {
			t.Fatalf("got\n%s\nwant\n%s", got, want)
		}
	}
}

func TestGaugeFuncErrors(t *testing.T) {
	tests := []struct {
		name    string
		samples []Sample
		wantErr string
	}{
		{"too few label values", []Sample{{Labels: []string{"a"}}}, "1 label values for 2 labels"},
		{"too many label values", []Sample{{Labels: []string{"a", "b", "c"}}}, "3 label values"},
		{"duplicate series", []Sample{{Labels: []string{"a", "b"}, Value: 1}, {Labels: []string{"a", "b"}, Value: 2}}, "two samples"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := NewRegistry()
			r.Gauge("a_ok", "help").With().Set(1)
			r.GaugeFunc("b_bad", "help", []string{"x", "y"}, func() []Sample { return tt.samples })
			var b bytes.Buffer
			_, err := r.WriteTo(&b)
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("WriteTo = %v, want error containing %q", err, tt.wantErr)
			}
			if b.Len() != 0 {
				t.Errorf("WriteTo wrote %q despite the error", b.String())
			}
			rec := httptest.NewRecorder()
			r.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
			if rec.Code != http.StatusInternalServerError {
				t.Errorf("Handler status %d, want 500", rec.Code)
			}
		})
	}
}

func TestPanics(t *testing.T) {
	tests := []struct {
		name string
		fn   func(r *Registry)
	}{
		{"same name twice", func(r *Registry) { r.Counter("x_total", "h"); r.Gauge("x_total", "h") }},
		{"name of a histogram series", func(r *Registry) { r.Histogram("lat", "h", DefBuckets); r.Counter("lat_count", "h") }},
		{"histogram over a taken series", func(r *Registry) { r.Gauge("lat_sum", "h"); r.Histogram("lat", "h", DefBuckets) }},
		{"same GaugeFunc twice", func(r *Registry) {
			r.GaugeFunc("f", "h", nil, func() []Sample { return nil })
			r.GaugeFunc("f", "h", nil, func() []Sample { return nil })
		}},
		{"bad metric name", func(r *Registry) { r.Counter("1abc", "h") }},
		{"metric name with dash", func(r *Registry) { r.Counter("a-b", "h") }},
		{"empty metric name", func(r *Registry) { r.Gauge("", "h") }},
		{"bad label name", func(r *Registry) { r.Counter("a", "h", "has:colon") }},
		{"reserved label name", func(r *Registry) { r.Counter("a", "h", "__name") }},
		{"duplicate label name", func(r *Registry) { r.Counter("a", "h", "x", "x") }},
		{"le on a histogram", func(r *Registry) { r.Histogram("a", "h", DefBuckets, "le") }},
		{"no buckets", func(r *Registry) { r.Histogram("a", "h", nil) }},
		{"unsorted buckets", func(r *Registry) { r.Histogram("a", "h", []float64{1, 0.5}) }},
		{"repeated bucket", func(r *Registry) { r.Histogram("a", "h", []float64{1, 1}) }},
		{"infinite bucket", func(r *Registry) { r.Histogram("a", "h", []float64{1, math.Inf(1)}) }},
		{"too few label values", func(r *Registry) { r.Counter("a", "h", "x", "y").With("1") }},
		{"too many label values", func(r *Registry) { r.Gauge("a", "h", "x").With("1", "2") }},
		{"values for an unlabelled metric", func(r *Registry) { r.Histogram("a", "h", DefBuckets).With("1") }},
		{"negative counter add", func(r *Registry) { r.Counter("a", "h").With().Add(-1) }},
		{"nil GaugeFunc", func(r *Registry) { r.GaugeFunc("a", "h", nil, nil) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			defer func() {
				if recover() == nil {
					t.Fatal("did not panic")
				}
			}()
			tt.fn(NewRegistry())
		})
	}
}

func TestConcurrentUpdates(t *testing.T) {
	r := NewRegistry()
	cv := r.Counter("ops_total", "help", "worker")
	shared := r.Counter("shared_total", "help").With()
	g := r.Gauge("inflight", "help").With()
	h := r.Histogram("lat", "help", []float64{0.5, 1.5})
	const (
		workers = 8
		rounds  = 2000
	)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := range rounds {
				cv.With(fmt.Sprint(w % 4)).Inc()
				shared.Add(0.5)
				g.Inc()
				h.With().Observe(float64(i % 3)) // 0, 1, 2: one in each bucket
				g.Dec()
			}
		})
	}
	// Scrape while the workers run: every scrape must parse and keep the
	// histogram consistent.
	wg.Go(func() {
		for range 50 {
			var b bytes.Buffer
			if _, err := r.WriteTo(&b); err != nil {
				t.Error(err)
				return
			}
			if _, err := parseExposition(b.String()); err != nil {
				t.Errorf("scrape during updates: %v", err)
				return
			}
		}
	})
	wg.Wait()
	for w := range 4 {
		if v := cv.With(fmt.Sprint(w)).Value(); v != 2*rounds {
			t.Errorf("worker %d counter = %v, want %d", w, v, 2*rounds)
		}
	}
	if v := shared.Value(); v != workers*rounds/2 {
		t.Errorf("shared = %v, want %d", v, workers*rounds/2)
	}
	if v := g.Value(); v != 0 {
		t.Errorf("gauge = %v, want 0", v)
	}
	fams, err := parseExposition(render(t, r))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fams {
		if f.name != "lat" {
			continue
		}
		for _, s := range f.samples {
			if s.name == "lat_count" && s.value != workers*rounds {
				t.Errorf("histogram count %v, want %d", s.value, workers*rounds)
			}
		}
	}
}

func TestHandler(t *testing.T) {
	r := NewRegistry()
	r.Counter("hits_total", "Hits.").With().Inc()
	srv := httptest.NewServer(r.Handler())
	defer srv.Close()
	tests := []struct {
		method   string
		code     int
		wantBody string
	}{
		{"GET", 200, "# HELP hits_total Hits.\n# TYPE hits_total counter\nhits_total 1\n"},
		{"HEAD", 200, ""},
		{"POST", 405, "method not allowed\n"},
	}
	for _, tt := range tests {
		t.Run(tt.method, func(t *testing.T) {
			req, _ := http.NewRequest(tt.method, srv.URL, nil)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			body, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != tt.code {
				t.Fatalf("status %d, want %d", resp.StatusCode, tt.code)
			}
			if string(body) != tt.wantBody {
				t.Errorf("body %q, want %q", body, tt.wantBody)
			}
			if tt.code == 200 {
				if ct := resp.Header.Get("Content-Type"); ct != "text/plain; version=0.0.4; charset=utf-8" {
					t.Errorf("Content-Type %q", ct)
				}
			}
		})
	}
}

func BenchmarkCounterInc(b *testing.B) {
	c := NewRegistry().Counter("b_total", "help").With()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			c.Inc()
		}
	})
}

func BenchmarkHistogramObserve(b *testing.B) {
	h := NewRegistry().Histogram("b_seconds", "help", DefBuckets).With()
	b.RunParallel(func(pb *testing.PB) {
		v := 0.0
		for pb.Next() {
			h.Observe(v)
			v += 0.0001
		}
	})
}
