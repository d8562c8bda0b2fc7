package metrics

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func scrape(t *testing.T, r *Registry) (int, string) {
	t.Helper()
	rec := httptest.NewRecorder()
	r.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	body, _ := io.ReadAll(rec.Body)
	return rec.Code, string(body)
}

// TestGaugeFunc: samples are read at every scrape, and a bad sample fails
// the scrape rather than exposing a wrong family.
func TestGaugeFunc(t *testing.T) {
	tests := []struct {
		name     string
		samples  []Sample
		wantCode int
		want     string
	}{
		{"samples in label order", []Sample{{Labels: []string{"b", "y"}, Value: 2}, {Labels: []string{"a", "x"}, Value: 1}},
			http.StatusOK, "# HELP f Help.\n# TYPE f gauge\nf{k=\"a\",l=\"x\"} 1\nf{k=\"b\",l=\"y\"} 2\n"},
		{"no samples", nil, http.StatusOK, ""},
		{"too few label values", []Sample{{Labels: []string{"a"}}}, http.StatusInternalServerError, "inconsistent label cardinality"},
		{"duplicate series", []Sample{{Labels: []string{"a", "x"}, Value: 1}, {Labels: []string{"a", "x"}, Value: 2}},
			http.StatusInternalServerError, "collected before with the same name and label values"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := NewRegistry()
			r.GaugeFunc("f", "Help.", []string{"k", "l"}, func() []Sample { return tt.samples })
			code, body := scrape(t, r)
			if code != tt.wantCode {
				t.Fatalf("status %d, want %d: %s", code, tt.wantCode, body)
			}
			if (code == http.StatusOK && body != tt.want) || !strings.Contains(body, tt.want) {
				t.Errorf("body:\n%s\nwant:\n%s", body, tt.want)
			}
		})
	}
}

// TestUnlabelled: a family without labels is exposed at zero before its
// first update.
func TestUnlabelled(t *testing.T) {
	r := NewRegistry()
	r.Counter("c_total", "Help.")
	r.Histogram("h_seconds", "Help.", []float64{1})
	want := "# HELP c_total Help.\n# TYPE c_total counter\nc_total 0\n" +
		"# HELP h_seconds Help.\n# TYPE h_seconds histogram\nh_seconds_bucket{le=\"1\"} 0\nh_seconds_bucket{le=\"+Inf\"} 0\nh_seconds_sum 0\nh_seconds_count 0\n"
	if code, body := scrape(t, r); code != http.StatusOK || body != want {
		t.Fatalf("status %d, body:\n%s\nwant:\n%s", code, body, want)
	}
}

// TestHandlerMerges: Handler exposes several registries as one, families
// in name order, and fails a scrape that finds a family in two.
func TestHandlerMerges(t *testing.T) {
	a, b := NewRegistry(), NewRegistry()
	a.Counter("z_total", "Help.")
	b.GaugeFunc("a", "Help.", []string{"k"}, func() []Sample { return []Sample{{Labels: []string{"x"}, Value: 3}} })
	rec := httptest.NewRecorder()
	Handler(a, b).ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	want := "# HELP a Help.\n# TYPE a gauge\na{k=\"x\"} 3\n# HELP z_total Help.\n# TYPE z_total counter\nz_total 0\n"
	if rec.Code != http.StatusOK || rec.Body.String() != want {
		t.Fatalf("status %d, body:\n%s\nwant:\n%s", rec.Code, rec.Body, want)
	}
	b.Counter("z_total", "Help.")
	rec = httptest.NewRecorder()
	Handler(a, b).ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	if rec.Code != http.StatusInternalServerError {
		t.Errorf("a family in two registries: status %d", rec.Code)
	}
}
