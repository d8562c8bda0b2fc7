package metrics

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// replicaRegistry is one replica's metrics: a counter, a histogram and,
// for the leader, a gauge of its own.
func replicaRegistry(leader bool, requests float64) *Registry {
	r := NewRegistry()
	r.Counter("req_total", "Requests.", "code").With("200").Add(requests)
	r.Histogram("lat_seconds", "Latency.", []float64{0.1, 1}).With().Observe(0.5)
	if leader {
		r.GaugeFunc("usage", "Usage.", []string{"source"}, func() []Sample { return []Sample{{Labels: []string{"m1"}, Value: 7}} })
	}
	return r
}

// serveMerged scrapes Merged(label, value, regs, others) in the text format.
func serveMerged(t *testing.T, value string, regs []*Registry, others ...string) (int, string) {
	t.Helper()
	var raw [][]byte
	for _, o := range others {
		raw = append(raw, []byte(o))
	}
	h, err := Merged("replica", value, regs, raw)
	if err != nil {
		t.Fatal(err)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	body, _ := io.ReadAll(rec.Body)
	return rec.Code, string(body)
}

// TestMerged: a replica's own series are labelled with its tag; another
// replica's exposition (labelled by that replica) joins them family by
// family, histograms and the leader's own families included; a family
// whose help differs takes this replica's; a repeated series fails the
// scrape, and an exposition that does not parse is an error.
func TestMerged(t *testing.T) {
	code, leader := serveMerged(t, "aaaa", []*Registry{replicaRegistry(true, 3)})
	if code != http.StatusOK || !strings.Contains(leader, `req_total{code="200",replica="aaaa"} 3`) ||
		!strings.Contains(leader, `lat_seconds_bucket{replica="aaaa",le="1"} 1`) || !strings.Contains(leader, `usage{replica="aaaa",source="m1"} 7`) {
		t.Fatalf("the leader's own, labelled: %d\n%s", code, leader)
	}
	other := strings.Replace(leader, "# HELP req_total Requests.", "# HELP req_total Requests (older wording).", 1)
	code, all := serveMerged(t, "bbbb", []*Registry{replicaRegistry(false, 5)}, other)
	if code != http.StatusOK {
		t.Fatalf("merged: %d\n%s", code, all)
	}
	want := "# HELP req_total Requests.\n# TYPE req_total counter\n" +
		"req_total{code=\"200\",replica=\"aaaa\"} 3\nreq_total{code=\"200\",replica=\"bbbb\"} 5\n"
	if !strings.Contains(all, want) {
		t.Errorf("merged counter: want\n%s\nin\n%s", want, all)
	}
	for _, w := range []string{`lat_seconds_bucket{replica="aaaa",le="1"} 1`, `lat_seconds_bucket{replica="bbbb",le="1"} 1`,
		`lat_seconds_count{replica="bbbb"} 1`, `usage{replica="aaaa",source="m1"} 7`} {
		if !strings.Contains(all, w) {
			t.Errorf("no %s in\n%s", w, all)
		}
	}
	if strings.Contains(all, `replica="bbbb",source`) || strings.Count(all, "# TYPE req_total") != 1 {
		t.Errorf("merged families:\n%s", all)
	}

	// The same replica twice: its series repeat.
	if code, body := serveMerged(t, "aaaa", []*Registry{replicaRegistry(true, 3)}, leader); code != http.StatusInternalServerError {
		t.Errorf("repeated series: %d\n%s", code, body)
	}
	if _, err := Merged("replica", "bbbb", nil, [][]byte{[]byte("req_total{code=\"200\" 3\n")}); err == nil {
		t.Error("an exposition that does not parse was merged")
	}
}
