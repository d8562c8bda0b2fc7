package events

import (
	"slices"
	"sync"
	"testing"
)

// relayed is a Relay that keeps what it is handed.
type relayed struct {
	mu  sync.Mutex
	evs []Event
}

func (r *relayed) Relay(e Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.evs = append(r.evs, e)
}

// TestRelay: with a Relay, Publish stamps an event and hands it over
// without numbering or delivering it; Deliver delivers events numbered
// elsewhere, in ID order, each once, to subscribers, the ring and
// destinations, and never hands them to the relay (no loop).
func TestRelay(t *testing.T) {
	r := &relayed{}
	b := New(Options{Clock: stepClock(), Relay: r, StartID: 100})
	defer b.Close()
	ch, cancel := b.Subscribe(nil, b.LastID())
	defer cancel()

	args := []string{"a"}
	e := b.Publish(Event{MessageID: "X.1.0.A", Args: args})
	args[0] = "changed"
	if e.ID != 0 || !e.Time.Equal(t0.Add(1e9)) {
		t.Fatalf("published through a relay: ID %d, time %v; want no ID and the clock's time", e.ID, e.Time)
	}
	if len(r.evs) != 1 || r.evs[0].MessageID != "X.1.0.A" || !slices.Equal(r.evs[0].Args, []string{"a"}) {
		t.Fatalf("relayed %+v", r.evs)
	}
	if b.LastID() != 100 || len(b.Recent(0, nil)) != 0 {
		t.Fatalf("the bus numbered or kept a relayed event: LastID %d, ring %v", b.LastID(), b.Recent(0, nil))
	}
	expectNothing(t, ch)

	// What the shared log numbers comes back; repeats and stale IDs are
	// dropped.
	for _, d := range []struct {
		id   uint64
		want bool
	}{{101, true}, {101, false}, {105, true}, {103, false}, {100, false}, {106, true}} {
		if got := b.Deliver(Event{ID: d.id, MessageID: "X.1.0.B", Replica: "other"}); got != d.want {
			t.Errorf("Deliver(%d) = %v, want %v", d.id, got, d.want)
		}
	}
	if got := ids(receive(t, ch, 3)); !slices.Equal(got, []uint64{101, 105, 106}) {
		t.Fatalf("subscriber got %v, want 101 105 106", got)
	}
	expectNothing(t, ch)
	if got := ids(b.Recent(0, nil)); !slices.Equal(got, []uint64{101, 105, 106}) {
		t.Fatalf("ring %v", got)
	}
	if b.LastID() != 106 {
		t.Errorf("LastID = %d, want 106", b.LastID())
	}
	if len(r.evs) != 1 {
		t.Errorf("delivered events were relayed again: %v", r.evs)
	}
	// A Last-Event-ID from the shared numbering resumes.
	late, cancel2 := b.Subscribe(nil, 101)
	defer cancel2()
	if got := ids(receive(t, late, 2)); !slices.Equal(got, []uint64{105, 106}) {
		t.Fatalf("resumed after 101: %v", got)
	}
	if s := b.Stats(); s.Published != 1 {
		t.Errorf("Stats.Published = %d, want 1", s.Published)
	}
}

// TestDeliverWithoutRelay: a bus without a relay takes delivered events
// too, and numbers what it publishes after them.
func TestDeliverWithoutRelay(t *testing.T) {
	b := New(Options{})
	defer b.Close()
	if !b.Deliver(Event{ID: 7}) {
		t.Fatal("Deliver(7) refused")
	}
	if e := b.Publish(Event{}); e.ID != 8 {
		t.Fatalf("published after 7: ID %d", e.ID)
	}
}

// TestSeed: a bus starts with its seed in the ring, numbered as given, and
// goes on after the last one: a resumed subscriber replays from the seed,
// a new one gets only what comes next.
func TestSeed(t *testing.T) {
	b := New(Options{Seed: []Event{{ID: 40, Message: "old"}, {ID: 42, Message: "newest"}}, StartID: 7})
	defer b.Close()
	if b.LastID() != 42 || !slices.Equal(ids(b.Recent(0, nil)), []uint64{40, 42}) {
		t.Fatalf("seeded bus: LastID %d, ring %v", b.LastID(), ids(b.Recent(0, nil)))
	}
	fresh, cancel := b.Subscribe(nil, b.LastID())
	defer cancel()
	resumed, cancel2 := b.Subscribe(nil, 40)
	defer cancel2()
	if b.Deliver(Event{ID: 41}) || !b.Deliver(Event{ID: 43}) {
		t.Fatal("Deliver took an ID before the seed's last, or refused the next")
	}
	if got := ids(receive(t, fresh, 1)); !slices.Equal(got, []uint64{43}) {
		t.Fatalf("a new subscriber got %v, want 43", got)
	}
	if got := ids(receive(t, resumed, 2)); !slices.Equal(got, []uint64{42, 43}) {
		t.Fatalf("resumed after 40: %v, want 42 43", got)
	}
}
