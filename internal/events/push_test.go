package events

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
)

// receiver is an httptest server standing in for an event listener. Its
// handler answers each POST with the next status from statuses (200 once
// they run out) and records what it got.
type receiver struct {
	srv *httptest.Server

	mu       sync.Mutex
	statuses []int
	posts    []post
	got      chan post
}

type post struct {
	contentType string
	body        []byte
	status      int
	path        string
}

// payloadJSON is a decoded Event payload.
type payloadJSON struct {
	ODataType string `json:"@odata.type"`
	ID        string `json:"Id"`
	Name      string
	Context   *string
	Events    []struct {
		EventID           string `json:"EventId"`
		EventType         string
		MessageID         string `json:"MessageId"`
		Severity          string
		OriginOfCondition struct {
			ID string `json:"@odata.id"`
		}
	}
}

func newReceiver(t *testing.T, statuses ...int) *receiver {
	r := &receiver{statuses: statuses, got: make(chan post, 1000)}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		r.mu.Lock()
		status := http.StatusOK
		if len(r.statuses) > 0 {
			status, r.statuses = r.statuses[0], r.statuses[1:]
		}
		p := post{contentType: req.Header.Get("Content-Type"), body: body, status: status, path: req.URL.Path}
		if req.Method != http.MethodPost {
			p.contentType = "method " + req.Method
		}
		r.posts = append(r.posts, p)
		r.mu.Unlock()
		if status/100 == 3 {
			w.Header().Set("Location", "/elsewhere")
		}
		w.WriteHeader(status)
		r.got <- p
	}))
	t.Cleanup(r.srv.Close)
	return r
}

// next waits for the receiver's next request.
func (r *receiver) next(t *testing.T) post {
	t.Helper()
	select {
	case p := <-r.got:
		return p
	case <-time.After(5 * time.Second):
		t.Fatal("no POST arrived")
		return post{}
	}
}

func decode(t *testing.T, body []byte) payloadJSON {
	t.Helper()
	var p payloadJSON
	if err := json.Unmarshal(body, &p); err != nil {
		t.Fatalf("payload %s: %v", body, err)
	}
	return p
}

// waitStats waits until cond holds for the bus's stats.
func waitStats(t *testing.T, b *Bus, cond func(Stats) bool) Stats {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		s := b.Stats()
		if cond(s) {
			return s
		}
		if time.Now().After(deadline) {
			t.Fatalf("stats never reached the condition: %+v", s)
		}
		time.Sleep(time.Millisecond)
	}
}

func TestPushDelivery(t *testing.T) {
	r := newReceiver(t)
	b := New(Options{})
	defer b.Close()
	d := Destination{ID: "1", URL: r.srv.URL + "/events", Context: "my-context", RegistryPrefixes: []string{"ResourceEvent"}}
	if err := b.AddDestination(d); err != nil {
		t.Fatal(err)
	}
	b.Publish(Event{MessageID: "Composition.1.1.Other"}) // filtered out
	e := b.Publish(sampleEvent())
	p := r.next(t)
	if p.contentType != "application/json" {
		t.Errorf("Content-Type %q", p.contentType)
	}
	got := decode(t, p.body)
	if got.ODataType != EventODataType || got.Name != "Event" || got.Context == nil || *got.Context != "my-context" {
		t.Errorf("payload header %+v", got)
	}
	if len(got.Events) != 1 {
		t.Fatalf("%d events, want 1 (the other is filtered out)", len(got.Events))
	}
	ev := got.Events[0]
	if ev.EventID != "2" || ev.MessageID != e.MessageID || ev.Severity != SeverityCritical || ev.OriginOfCondition.ID != e.Origin {
		t.Errorf("event record %+v", ev)
	}
	waitStats(t, b, func(s Stats) bool { return s.Delivered == 1 })
	if ds := b.Destinations(); len(ds) != 1 || ds[0].ID != "1" || ds[0].Protocol != ProtocolRedfish {
		t.Errorf("Destinations = %+v", ds)
	}
}

// TestPushBatches holds the receiver on the first POST so that events
// queue up; they then arrive together, in order, in one payload.
func TestPushBatches(t *testing.T) {
	release := make(chan struct{})
	var (
		mu     sync.Mutex
		bodies [][]byte
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		mu.Lock()
		bodies = append(bodies, body)
		first := len(bodies) == 1
		mu.Unlock()
		if first {
			<-release
		}
	}))
	defer srv.Close()
	b := New(Options{})
	defer b.Close()
	if err := b.AddDestination(Destination{ID: "d", URL: srv.URL}); err != nil {
		t.Fatal(err)
	}
	b.Publish(Event{})
	waitFor(t, func() bool { mu.Lock(); defer mu.Unlock(); return len(bodies) == 1 })
	for range 5 {
		b.Publish(Event{})
	}
	close(release)
	waitStats(t, b, func(s Stats) bool { return s.Delivered == 6 })
	mu.Lock()
	defer mu.Unlock()
	if len(bodies) != 2 {
		t.Fatalf("%d POSTs, want 2", len(bodies))
	}
	p := decode(t, bodies[1])
	var got []string
	for _, e := range p.Events {
		got = append(got, e.EventID)
	}
	if strings.Join(got, ",") != "2,3,4,5,6" || p.ID != "2" {
		t.Fatalf("second payload Id %s carries %v, want 2..6", p.ID, got)
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition never held")
		}
		time.Sleep(time.Millisecond)
	}
}

func TestPushRetries(t *testing.T) {
	tests := []struct {
		name       string
		statuses   []int
		wantPosts  int
		delivered  uint64
		failed     uint64
		minElapsed time.Duration
	}{
		{"500 then 200", []int{500, 200}, 2, 1, 0, 10 * time.Millisecond},
		{"500, 503 then 204", []int{500, 503, 204}, 3, 1, 0, 30 * time.Millisecond},
		{"redirect is a failure", []int{307, 200}, 2, 1, 0, 10 * time.Millisecond},
		{"always failing gives up after 3 tries", []int{500, 500, 500, 200}, 3, 0, 1, 30 * time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newReceiver(t, tt.statuses...)
			b := New(Options{RetryBackoff: 10 * time.Millisecond})
			defer b.Close()
			if err := b.AddDestination(Destination{ID: "d", URL: r.srv.URL + "/"}); err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			b.Publish(sampleEvent())
			s := waitStats(t, b, func(s Stats) bool { return s.Delivered+s.DeliveryFailures > 0 })
			elapsed := time.Since(start)
			if s.Delivered != tt.delivered || s.DeliveryFailures != tt.failed {
				t.Errorf("Stats = %+v, want delivered %d, failed %d", s, tt.delivered, tt.failed)
			}
			// Backoff doubles: 10 ms, then 20 ms.
			if elapsed < tt.minElapsed {
				t.Errorf("done after %v, want at least %v of backoff", elapsed, tt.minElapsed)
			}
			expectNoPost := time.After(50 * time.Millisecond)
			<-expectNoPost
			r.mu.Lock()
			defer r.mu.Unlock()
			if len(r.posts) != tt.wantPosts {
				t.Fatalf("%d POSTs, want %d", len(r.posts), tt.wantPosts)
			}
			for i, p := range r.posts {
				if string(p.body) != string(r.posts[0].body) {
					t.Errorf("try %d sent a different body", i+1)
				}
				if p.path != "/" {
					t.Errorf("try %d went to %s (a redirect was followed)", i+1, p.path)
				}
			}
		})
	}
}

func TestPushTenantScoped(t *testing.T) {
	r1, rOps := newReceiver(t), newReceiver(t)
	b := New(Options{})
	defer b.Close()
	if err := b.AddDestination(Destination{ID: "t1", URL: r1.srv.URL, Tenant: "t1"}); err != nil {
		t.Fatal(err)
	}
	if err := b.AddDestination(Destination{ID: "ops", URL: rOps.srv.URL}); err != nil {
		t.Fatal(err)
	}
	b.Publish(Event{Tenant: "t2", Message: "t2's"})
	b.Publish(Event{Message: "operators'"})
	b.Publish(Event{Tenant: "t1", Message: "t1's"})
	if got := decode(t, r1.next(t).body); len(got.Events) != 1 || got.Events[0].EventID != "3" {
		t.Fatalf("tenant t1's destination got %+v, want only event 3", got)
	}
	n := 0
	for n < 3 {
		n += len(decode(t, rOps.next(t).body).Events)
	}
	if n != 3 {
		t.Fatalf("operators' destination got %d events, want 3", n)
	}
}

func TestAddDestinationErrors(t *testing.T) {
	b := New(Options{})
	defer b.Close()
	if err := b.AddDestination(Destination{ID: "taken", URL: "http://127.0.0.1:9/"}); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		d    Destination
		want error
	}{
		{"no ID", Destination{URL: "http://example.invalid/"}, ErrInvalidDestination},
		{"no URL", Destination{ID: "a"}, ErrInvalidDestination},
		{"relative URL", Destination{ID: "a", URL: "/events"}, ErrInvalidDestination},
		{"other scheme", Destination{ID: "a", URL: "ftp://example.invalid/"}, ErrInvalidDestination},
		{"no host", Destination{ID: "a", URL: "http:///x"}, ErrInvalidDestination},
		{"bad URL", Destination{ID: "a", URL: "http://[::1"}, ErrInvalidDestination},
		{"other protocol", Destination{ID: "a", URL: "http://example.invalid/", Protocol: "SNMPv2c"}, ErrInvalidDestination},
		{"ID taken", Destination{ID: "taken", URL: "http://example.invalid/"}, ErrDestinationExists},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := b.AddDestination(tt.d); !errors.Is(err, tt.want) {
				t.Fatalf("AddDestination = %v, want %v", err, tt.want)
			}
		})
	}
	if n := len(b.Destinations()); n != 1 {
		t.Fatalf("%d destinations after failed adds", n)
	}
}

func TestDestinationsAreCopies(t *testing.T) {
	b := New(Options{})
	defer b.Close()
	types := []string{TypeAlert}
	if err := b.AddDestination(Destination{ID: "b", URL: "http://127.0.0.1:9/", EventTypes: types}); err != nil {
		t.Fatal(err)
	}
	if err := b.AddDestination(Destination{ID: "a", URL: "http://127.0.0.1:9/"}); err != nil {
		t.Fatal(err)
	}
	types[0] = "changed"
	ds := b.Destinations()
	if len(ds) != 2 || ds[0].ID != "a" || ds[1].ID != "b" {
		t.Fatalf("Destinations = %+v, want a, b", ds)
	}
	if ds[1].EventTypes[0] != TypeAlert {
		t.Fatalf("caller's slice shared: %v", ds[1].EventTypes)
	}
	ds[1].EventTypes[0] = "changed"
	if b.Destinations()[1].EventTypes[0] != TypeAlert {
		t.Fatal("returned slice shared")
	}
}

func TestRemoveDestination(t *testing.T) {
	r := newReceiver(t)
	b := New(Options{})
	defer b.Close()
	if err := b.AddDestination(Destination{ID: "d", URL: r.srv.URL}); err != nil {
		t.Fatal(err)
	}
	b.Publish(Event{})
	r.next(t)
	if !b.RemoveDestination("d") {
		t.Fatal("RemoveDestination(d) = false")
	}
	if b.RemoveDestination("d") {
		t.Fatal("second RemoveDestination(d) = true")
	}
	b.Publish(Event{})
	select {
	case p := <-r.got:
		t.Fatalf("POST after removal: %s", p.body)
	case <-time.After(50 * time.Millisecond):
	}
	checkNoGoroutines(t)
	// The ID is free again.
	if err := b.AddDestination(Destination{ID: "d", URL: r.srv.URL}); err != nil {
		t.Fatal(err)
	}
}

// TestPublishNeverBlocksOnPush points a destination at a receiver that
// never answers: publishing goes on at full speed, the destination's queue
// overflows and the overflow is counted.
func TestPublishNeverBlocksOnPush(t *testing.T) {
	hang := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		select {
		case <-hang:
		case <-req.Context().Done():
		}
	}))
	defer srv.Close()
	defer close(hang)
	b := New(Options{})
	if err := b.AddDestination(Destination{ID: "d", URL: srv.URL}); err != nil {
		t.Fatal(err)
	}
	const n = 5 * destinationQueue
	done := make(chan struct{})
	go func() {
		defer close(done)
		for range n {
			b.Publish(Event{})
		}
	}()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Publish blocked on a destination that does not answer")
	}
	s := b.Stats()
	// At most one batch is in flight and one queue is full.
	if s.DeliveryDropped < n-destinationQueue-maxBatch {
		t.Errorf("DeliveryDropped = %d, want at least %d", s.DeliveryDropped, n-destinationQueue-maxBatch)
	}
	// Close abandons the POST in flight and returns promptly.
	closed := make(chan struct{})
	go func() { b.Close(); close(closed) }()
	select {
	case <-closed:
	case <-time.After(5 * time.Second):
		t.Fatal("Close waited for a hanging POST")
	}
	checkNoGoroutines(t)
}

// TestCloseLeavesNoGoroutines closes buses in each state a deliverer can
// be in — idle, POSTing, waiting to retry — and checks that no goroutine
// of the package, and no client connection of the bus, is left.
func TestCloseLeavesNoGoroutines(t *testing.T) {
	tests := []struct {
		name  string
		state func(t *testing.T, b *Bus, r *receiver)
	}{
		{"idle", func(t *testing.T, b *Bus, r *receiver) {}},
		{"after deliveries", func(t *testing.T, b *Bus, r *receiver) {
			for range 3 {
				b.Publish(Event{})
			}
			// Three events to each of three destinations.
			waitStats(t, b, func(s Stats) bool { return s.Delivered == 9 })
		}},
		{"waiting to retry", func(t *testing.T, b *Bus, r *receiver) {
			r.mu.Lock()
			r.statuses = []int{500, 500, 500}
			r.mu.Unlock()
			b.Publish(Event{})
			r.next(t) // the first try failed; the deliverer now waits an hour
		}},
		{"with subscribers", func(t *testing.T, b *Bus, r *receiver) {
			b.Subscribe(nil, 0)
			b.Subscribe(func(Event) bool { return false }, 0)
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newReceiver(t)
			before := runtime.NumGoroutine()
			b := New(Options{RetryBackoff: time.Hour})
			defer b.Close() // when the test fails early
			for _, id := range []string{"a", "b", "c"} {
				if err := b.AddDestination(Destination{ID: id, URL: r.srv.URL}); err != nil {
					t.Fatal(err)
				}
			}
			tt.state(t, b, r)
			start := time.Now()
			b.Close()
			if d := time.Since(start); d > time.Second {
				t.Errorf("Close took %v", d)
			}
			// Close waited for the deliverers: none may be left, at once.
			checkNoGoroutines(t)
			// The bus's own client connections close too (the server's
			// side goes with r.srv.Close at cleanup).
			r.srv.CloseClientConnections()
			waitFor(t, func() bool { return runtime.NumGoroutine() <= before })
		})
	}
}
