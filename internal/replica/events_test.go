package replica_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"rackpool/internal/events"
	"rackpool/internal/replica"
	"rackpool/internal/store/postgres"
	"rackpool/internal/store/postgres/pgtest"
)

// eventNode is one replica's event stream: its own store, bus and event
// log, running until stop.
type eventNode struct {
	st   *postgres.Store
	log  *replica.EventLog
	bus  *events.Bus
	stop func()
}

func startEventNode(t *testing.T, url, tag string) *eventNode {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	st, err := postgres.Open(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	l, err := replica.OpenEventLog(ctx, st, tag, nil)
	if err != nil {
		t.Fatal(err)
	}
	bus := events.New(l.BusOptions(events.Options{}))
	go l.Run(ctx, bus)
	n := &eventNode{st: st, log: l, bus: bus}
	stopped := false
	n.stop = func() {
		if !stopped {
			stopped = true
			cancel()
			l.Close()
			bus.Close()
			st.Close()
		}
	}
	t.Cleanup(n.stop)
	return n
}

// take reads n events from ch, failing t if they do not come within a
// minute or ch closes first.
func take(t *testing.T, ch <-chan events.Event, n int) []events.Event {
	t.Helper()
	var out []events.Event
	timeout := time.After(time.Minute)
	for len(out) < n {
		select {
		case e, ok := <-ch:
			if !ok {
				t.Fatalf("stream closed after %d of %d events", len(out), n)
			}
			out = append(out, e)
		case <-timeout:
			t.Fatalf("got %d of %d events: %v", len(out), n, out)
		}
	}
	return out
}

// seen is an event as a consumer tells it apart: its ID, message and the
// replica it came from.
func seen(evs []events.Event) []string {
	var out []string
	for _, e := range evs {
		out = append(out, fmt.Sprintf("%d %s %s %s", e.ID, e.Message, e.Tenant, e.Replica))
	}
	return out
}

// sent is an event as its SSE client gets it.
func sent(evs []events.Event) []string {
	var out []string
	for _, e := range evs {
		out = append(out, string(events.Payload(events.Destination{}, e)))
	}
	return out
}

// TestEventLog: two active replicas' buses carry every event either
// publishes, once each, under the same IDs, in one order (each replica's
// in the order it published them), with their tenants; each marks the
// other's events as the other's. Nothing delivered is logged again. A
// replica that stops appends what it had published before it goes, and
// one that starts later holds the same recent events, so a Last-Event-ID
// from one resumes at another.
func TestEventLog(t *testing.T) {
	if testing.Short() {
		t.Skip("starts PostgreSQL")
	}
	pg := pgtest.Start(t)
	url := pg.CreateDatabase(t, pgtest.DatabaseName(t))
	a, b := startEventNode(t, url, "aaaa"), startEventNode(t, url, "bbbb")
	atA, cancelA := a.bus.Subscribe(nil, a.bus.LastID())
	defer cancelA()
	atB, cancelB := b.bus.Subscribe(nil, b.bus.LastID())
	defer cancelB()

	a.bus.Publish(events.Event{Message: "a1"})
	b.bus.Publish(events.Event{Message: "b1", Tenant: "acme"})
	a.bus.Publish(events.Event{Message: "a2", Tenant: "acme", Oem: map[string]any{"Rackpool": map[string]any{"Blocks": []string{"gpu1"}}}})
	b.bus.Publish(events.Event{Message: "b2"})
	a.bus.Publish(events.Event{Message: "a3"})
	gotA, gotB := take(t, atA, 5), take(t, atB, 5)
	ids := func(evs []events.Event) []uint64 {
		var out []uint64
		for _, e := range evs {
			out = append(out, e.ID)
		}
		return out
	}
	if !slices.Equal(ids(gotA), ids(gotB)) || !slices.IsSorted(ids(gotA)) {
		t.Fatalf("a's stream %v and b's %v: want the same IDs, growing", seen(gotA), seen(gotB))
	}
	order := func(evs []events.Event, replica string) []string {
		var out []string
		for _, e := range evs {
			if e.Replica == replica {
				out = append(out, e.Message)
			}
		}
		return out
	}
	if got := order(gotB, "aaaa"); !slices.Equal(got, []string{"a1", "a2", "a3"}) {
		t.Errorf("a's events at b: %v; b's stream %v", got, seen(gotB))
	}
	if got := order(gotB, ""); !slices.Equal(got, []string{"b1", "b2"}) {
		t.Errorf("b's own events at b: %v; b's stream %v", got, seen(gotB))
	}
	if got := order(gotA, "bbbb"); !slices.Equal(got, []string{"b1", "b2"}) {
		t.Errorf("b's events at a: %v; a's stream %v", got, seen(gotA))
	}
	for i := range gotA {
		ea, eb := gotA[i], gotB[i]
		if ea.Message != eb.Message || ea.Tenant != eb.Tenant || !ea.Time.Equal(eb.Time) || !slices.Equal(sent(gotA[i:i+1]), sent(gotB[i:i+1])) {
			t.Errorf("event %d differs: at a %+v, at b %+v", ea.ID, ea, eb)
		}
	}
	// Each event is in the log once: what came back was not logged again.
	logged, err := a.st.EventsAfter(context.Background(), 0, 100)
	if err != nil || len(logged) != 5 {
		t.Fatalf("the log holds %d events, %v; want 5", len(logged), err)
	}

	// a publishes and stops at once: what it published reaches b.
	a.bus.Publish(events.Event{Message: "a4"})
	a.bus.Publish(events.Event{Message: "a5"})
	a.stop()
	if got := seen(take(t, atB, 2)); len(got) != 2 {
		t.Fatalf("a's last events at b: %v", got)
	}

	// c starts: its bus holds what b's holds from the start, a client of
	// c gets what is published from then on, and b's client resumes at c.
	c := startEventNode(t, url, "cccc")
	if got, want := sent(c.bus.Recent(0, nil)), sent(b.bus.Recent(0, nil)); !slices.Equal(got, want) {
		t.Fatalf("c starts with %v, b holds %v", got, want)
	}
	fresh, cancelFresh := c.bus.Subscribe(nil, c.bus.LastID())
	defer cancelFresh()
	b.bus.Publish(events.Event{Message: "b3"})
	if got := take(t, fresh, 1)[0]; got.Message != "b3" || got.Replica != "bbbb" {
		t.Fatalf("the first event at c's new client: %+v, want b's b3", got)
	}
	if got := take(t, atB, 1)[0]; got.Message != "b3" {
		t.Fatalf("b's b3 at b: %+v", got)
	}
	resumed, cancelC := c.bus.Subscribe(nil, gotB[2].ID)
	defer cancelC()
	if got, want := sent(take(t, resumed, 5)), sent(b.bus.Recent(5, nil)); !slices.Equal(got, want) {
		t.Fatalf("resumed at c after %d: %v, want %v", gotB[2].ID, got, want)
	}
}
