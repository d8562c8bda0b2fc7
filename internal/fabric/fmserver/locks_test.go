package fmserver

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// gateClock reads the wall clock and sleeps until the gate opens: a
// change's modelled time lasts as long as the test wants, with the host
// port's lock held.
type gateClock struct {
	gate chan struct{}
	once sync.Once
}

func newGateClock() *gateClock { return &gateClock{gate: make(chan struct{})} }

func (c *gateClock) Now() time.Time      { return time.Now() }
func (c *gateClock) Sleep(time.Duration) { <-c.gate }
func (c *gateClock) open()               { c.once.Do(func() { close(c.gate) }) }

// inFlight counts the requests its handler is serving, by "METHOD path".
type inFlight struct {
	mu sync.Mutex
	n  map[string]int
}

func (f *inFlight) wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		key := r.Method + " " + r.URL.Path
		f.mu.Lock()
		f.n[key]++
		f.mu.Unlock()
		defer func() {
			f.mu.Lock()
			f.n[key]--
			f.mu.Unlock()
		}()
		h.ServeHTTP(w, r)
	})
}

func (f *inFlight) count(key string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.n[key]
}

// TestPortLockWaitEndsWithTheRequest: a change that waits for the change
// in progress on its host port stops waiting when its client goes away,
// instead of holding its handler (and an httptest server's Close, which
// waits for every handler) until that change ends; a client that stays
// is answered 503 with Retry-After once maxLockWait passed, and nothing
// changed.
func TestPortLockWaitEndsWithTheRequest(t *testing.T) {
	clk := newGateClock()
	s, err := New(Options{Topology: rackTopology(t), Fabric: "falcon1", Clock: clk, User: testUser, Password: testPass})
	if err != nil {
		t.Fatal(err)
	}
	flight := &inFlight{n: map[string]int{}}
	h := httptest.NewServer(flight.wrap(s.Handler()))
	t.Cleanup(h.Close)
	t.Cleanup(clk.open) // runs first: the held change ends, then the server closes
	f := &fm{t: t, srv: s, http: h}
	f.login()
	zones := "/redfish/v1/Fabrics/falcon1/Zones"

	// send posts body to zones with a client that gives up after wait.
	send := func(body string, wait time.Duration) (int, error) {
		ctx, cancel := context.WithTimeout(context.Background(), wait)
		defer cancel()
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, h.URL+zones, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("X-Auth-Token", f.token)
		req.Header.Set("Content-Type", "application/json")
		resp, err := h.Client().Do(req)
		if err != nil {
			return 0, err
		}
		resp.Body.Close()
		return resp.StatusCode, nil
	}
	// The first change holds host1's port: its modelled time never ends
	// until the gate opens. Its client gives up.
	if _, err := send(endpoints("falcon1", "host1-pcie", "gpu1"), 300*time.Millisecond); err == nil {
		t.Fatal("the first change answered although its modelled time has not passed")
	}
	// The second change of the same port waits for the first; its client
	// gives up too.
	if _, err := send(endpoints("falcon1", "host1-pcie", "gpu2"), 300*time.Millisecond); err == nil {
		t.Fatal("the second change answered while the first holds the port")
	}
	key := "POST " + zones
	deadline := time.Now().Add(10 * time.Second)
	for flight.count(key) > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("%d POST handlers still running 10 s after their clients went away: a change waits for its host port's lock without the request's deadline", flight.count(key))
		}
		time.Sleep(10 * time.Millisecond)
	}

	// A client that waits longer than maxLockWait hears 503.
	old := maxLockWait
	maxLockWait = 200 * time.Millisecond
	before := f.discover()
	status, err := send(endpoints("falcon1", "host1-pcie", "gpu3"), 30*time.Second)
	maxLockWait = old
	if err != nil || status != http.StatusServiceUnavailable {
		t.Fatalf("a change kept waiting for a held port: status %d, %v; want 503", status, err)
	}
	f.unchanged(before, "a change refused for a held port")

	// Once the first change ends, the port is free again: its zone
	// exists now.
	clk.open()
	f.must(f.raw("POST", zones, endpoints("falcon1", "host1-pcie", "gpu3"), nil), http.StatusConflict, "a second zone of the port, once free")
}
