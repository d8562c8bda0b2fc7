package main

// The transport floor of a read: what moving its bytes costs with no work
// at all.
//
// A page with $expand=. carries many times the bytes of the same page of
// links (a P4 pod block: about 880 bytes against a link's 83), so the
// issue's "$expand at most 4x the same page" is bounded below by what
// sending the bytes alone costs. The floor is measured beside every
// expanded read: a bare net/http TLS server in this process (the HTTP
// stack serve runs, HTTP/2 as this client negotiates with serve) answers
// GET /N with N bytes and its length, read by a client with the
// benchmark's own transport (api.HTTPClient's settings), one keep-alive
// connection, the same median of -reps. docs/benchmarks.md, "Collections
// at scale", says what was decided about the target from it.

import (
	"crypto/tls"
	"crypto/x509"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"time"

	"rackpool/internal/childproc"
)

// floor is the bare server and its client.
type floor struct {
	srv  *httptest.Server
	hc   *http.Client
	body []byte
}

// maxFloor is the largest body the floor server sends (a page of members
// is cut at 8 MiB of inlined members, plus its head).
const maxFloor = 9 << 20

func startFloor() *floor {
	f := &floor{body: []byte(strings.Repeat(`{"@odata.id":"/redfish/v1/x"},`, maxFloor/30+1))[:maxFloor]}
	f.srv = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n, err := strconv.Atoi(strings.TrimPrefix(r.URL.Path, "/"))
		if err != nil || n < 0 || n > maxFloor {
			http.Error(w, "GET /N, N at most 9 MiB", http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Content-Length", strconv.Itoa(n))
		_, _ = w.Write(f.body[:n])
	}))
	f.srv.EnableHTTP2 = true
	f.srv.StartTLS()
	childproc.AtExit(f.srv.Close)
	roots := x509.NewCertPool()
	roots.AddCert(f.srv.Certificate())
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}
	f.hc = &http.Client{Transport: tr, Timeout: time.Minute}
	return f
}

// floorReps is the least number of reads a floor is the median of: a
// floor is a few milliseconds at most, and on a shared machine the median
// of five moved by 2x from run to run.
const floorReps = 21

// read returns the median time of reading n bytes, reps times (at least
// floorReps).
func (f *floor) read(n int64, reps int) Result {
	reps = max(reps, floorReps)
	r := Result{Name: "floor", Query: "/" + strconv.FormatInt(n, 10), Bytes: n, Pages: 1}
	if n <= 0 || n > maxFloor {
		r.Skipped = "no bytes to send, or over 9 MiB"
		return r
	}
	ds := make([]time.Duration, 0, reps)
	for range reps {
		t0 := time.Now()
		resp, err := f.hc.Get(f.srv.URL + r.Query)
		if err != nil {
			childproc.Fatalf("floor: %v", err)
		}
		data, err := io.ReadAll(resp.Body) // as the benchmark reads serve
		resp.Body.Close()
		if err != nil || int64(len(data)) != n || resp.ProtoMajor != 2 {
			childproc.Fatalf("floor: read %d of %d bytes over HTTP/%d: %v", len(data), n, resp.ProtoMajor, err)
		}
		ds = append(ds, time.Since(t0))
	}
	slices.Sort(ds)
	r.Seconds = ds[len(ds)/2].Seconds()
	return r
}
