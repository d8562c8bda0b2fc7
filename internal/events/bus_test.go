package events

import (
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

var t0 = time.Date(2025, 3, 14, 15, 9, 26, 0, time.UTC)

// stepClock returns a clock that advances one second per reading.
func stepClock() func() time.Time {
	var mu sync.Mutex
	now := t0
	return func() time.Time {
		mu.Lock()
		defer mu.Unlock()
		now = now.Add(time.Second)
		return now
	}
}

func ids(evs []Event) []uint64 {
	var out []uint64
	for _, e := range evs {
		out = append(out, e.ID)
	}
	return out
}

// receive reads n events from ch, failing t if they do not come in time
// or ch closes first.
func receive(t *testing.T, ch <-chan Event, n int) []Event {
	t.Helper()
	var out []Event
	timeout := time.After(5 * time.Second)
	for len(out) < n {
		select {
		case e, ok := <-ch:
			if !ok {
				t.Fatalf("channel closed after %d of %d events", len(out), n)
			}
			out = append(out, e)
		case <-timeout:
			t.Fatalf("got %d of %d events", len(out), n)
		}
	}
	return out
}

// expectNothing fails t if ch carries an event or closes within a short
// while.
func expectNothing(t *testing.T, ch <-chan Event) {
	t.Helper()
	select {
	case e, ok := <-ch:
		t.Fatalf("unexpected %+v (open %v)", e, ok)
	case <-time.After(20 * time.Millisecond):
	}
}

// checkNoGoroutines fails t if a goroutine is running code of this
// package.
// checkNoGoroutines fails t if a goroutine of this package outlives the
// test. A goroutine that has signalled it is done may still be unwinding,
// so it looks again for a while before reporting, as goleak does.
func checkNoGoroutines(t *testing.T) {
	t.Helper()
	var left []string
	for wait := time.Millisecond; ; wait *= 2 {
		left = left[:0]
		buf := make([]byte, 1<<20)
		n := runtime.Stack(buf, true)
		for _, g := range strings.Split(string(buf[:n]), "\n\n") {
			if strings.Contains(g, "rackpool/internal/events.") && !strings.Contains(g, "rackpool/internal/events.Test") &&
				!strings.Contains(g, "rackpool/internal/events.checkNoGoroutines") {
				left = append(left, g)
			}
		}
		if len(left) == 0 || wait > time.Second {
			break
		}
		time.Sleep(wait)
	}
	for _, g := range left {
		t.Errorf("goroutine left running:\n%s", g)
	}
}

func TestPublishAssignsIDsAndTimes(t *testing.T) {
	b := New(Options{Clock: stepClock()})
	defer b.Close()
	given := t0.Add(-time.Hour)
	args := []string{"a", "b"}
	e1 := b.Publish(Event{MessageID: "X.1.0.A", Args: args})
	e2 := b.Publish(Event{MessageID: "X.1.0.B", Time: given})
	e3 := b.Publish(Event{MessageID: "X.1.0.C"})
	if got := ids([]Event{e1, e2, e3}); !slices.Equal(got, []uint64{1, 2, 3}) {
		t.Fatalf("IDs %v, want 1 2 3", got)
	}
	if !e1.Time.Equal(t0.Add(time.Second)) || !e3.Time.Equal(t0.Add(2*time.Second)) {
		t.Errorf("times %v, %v: want the clock's", e1.Time, e3.Time)
	}
	if !e2.Time.Equal(given) {
		t.Errorf("given time replaced: %v", e2.Time)
	}
	// The publisher's slice is not shared with the stored event.
	args[0] = "changed"
	if got := b.Recent(0, nil)[0].Args; !slices.Equal(got, []string{"a", "b"}) {
		t.Errorf("stored Args %v changed with the caller's slice", got)
	}
	if b.LastID() != 3 {
		t.Errorf("LastID = %d", b.LastID())
	}
	if s := b.Stats(); s.Published != 3 {
		t.Errorf("Stats.Published = %d", s.Published)
	}
}

func TestStartID(t *testing.T) {
	b := New(Options{StartID: 1_000_000})
	defer b.Close()
	if b.LastID() != 1_000_000 {
		t.Fatalf("LastID = %d", b.LastID())
	}
	if e := b.Publish(Event{}); e.ID != 1_000_001 {
		t.Fatalf("first ID %d, want 1000001", e.ID)
	}
}

// TestOrderingConcurrentPublishers publishes from several goroutines and
// checks every subscriber sees every event once, in ID order.
func TestOrderingConcurrentPublishers(t *testing.T) {
	b := New(Options{History: 16, SubscriberBuffer: 10000})
	defer b.Close()
	const (
		publishers = 8
		each       = 500
	)
	a, cancelA := b.Subscribe(nil, 0)
	defer cancelA()
	odd, cancelOdd := b.Subscribe(func(e Event) bool { return e.ID%2 == 1 }, 0)
	defer cancelOdd()
	var wg sync.WaitGroup
	for p := range publishers {
		wg.Go(func() {
			for i := range each {
				b.Publish(Event{Message: fmt.Sprintf("p%d-%d", p, i)})
			}
		})
	}
	wg.Wait()
	all := receive(t, a, publishers*each)
	for i, e := range all {
		if e.ID != uint64(i+1) {
			t.Fatalf("event %d has ID %d", i, e.ID)
		}
	}
	for i, e := range receive(t, odd, publishers*each/2) {
		if e.ID != uint64(2*i+1) {
			t.Fatalf("filtered event %d has ID %d", i, e.ID)
		}
	}
	expectNothing(t, a)
}

func TestSubscribeReplay(t *testing.T) {
	critical := func(e Event) bool { return e.Severity == SeverityCritical }
	tests := []struct {
		name   string
		since  uint64
		filter func(Event) bool
		want   []uint64
	}{
		{"whole ring", 0, nil, []uint64{3, 4, 5, 6, 7}}, // 1 and 2 fell out of the ring
		{"from the middle", 5, nil, []uint64{6, 7}},
		{"from before the ring", 1, nil, []uint64{3, 4, 5, 6, 7}},
		{"from the newest", 7, nil, nil},
		{"from the future", 100, nil, nil},
		{"filtered", 0, critical, []uint64{4, 6}},
		{"filtered from the middle", 4, critical, []uint64{6}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := New(Options{History: 5})
			defer b.Close()
			for i := 1; i <= 7; i++ {
				sev := SeverityOK
				if i%2 == 0 {
					sev = SeverityCritical
				}
				b.Publish(Event{Severity: sev})
			}
			ch, cancel := b.Subscribe(tt.filter, tt.since)
			defer cancel()
			got := receive(t, ch, len(tt.want))
			if !slices.Equal(ids(got), tt.want) {
				t.Fatalf("replayed %v, want %v", ids(got), tt.want)
			}
			expectNothing(t, ch)
			// Live events follow, whatever since was.
			e := b.Publish(Event{Severity: SeverityCritical})
			if got := receive(t, ch, 1); got[0].ID != e.ID {
				t.Fatalf("live event %d, want %d", got[0].ID, e.ID)
			}
		})
	}
}

// TestReplayThenLiveNoGap subscribes while events are being published:
// replay and live events together are every event after since, once each,
// in order.
func TestReplayThenLiveNoGap(t *testing.T) {
	b := New(Options{History: 100000, SubscriberBuffer: 100000})
	defer b.Close()
	const total = 5000
	var wg sync.WaitGroup
	wg.Go(func() {
		for range total {
			b.Publish(Event{})
		}
	})
	for b.LastID() < total/4 {
		runtime.Gosched()
	}
	ch, cancel := b.Subscribe(nil, 10)
	defer cancel()
	wg.Wait()
	got := receive(t, ch, total-10)
	for i, e := range got {
		if e.ID != uint64(11+i) {
			t.Fatalf("event %d has ID %d, want %d", i, e.ID, 11+i)
		}
	}
	expectNothing(t, ch)
}

// TestSlowSubscriberDropped publishes far more than a subscriber that
// never reads can hold: Publish does not block, the slow subscriber's
// channel is closed and counted, and a reading subscriber misses nothing.
func TestSlowSubscriberDropped(t *testing.T) {
	b := New(Options{SubscriberBuffer: 4, History: 8})
	defer b.Close()
	slow, cancelSlow := b.Subscribe(nil, 0)
	defer cancelSlow()
	fast, cancelFast := b.Subscribe(nil, 0)
	defer cancelFast()
	var got []Event
	done := make(chan struct{})
	go func() {
		defer close(done)
		for e := range fast {
			got = append(got, e)
			if len(got) == 100 {
				return
			}
		}
	}()
	published := make(chan struct{})
	go func() {
		defer close(published)
		for range 100 {
			b.Publish(Event{})
			// Let the fast reader keep up with its small buffer.
			for len(fast) > 2 {
				runtime.Gosched()
			}
		}
	}()
	select {
	case <-published:
	case <-time.After(5 * time.Second):
		t.Fatal("Publish blocked on a subscriber that does not read")
	}
	<-done
	if len(got) != 100 {
		t.Fatalf("reading subscriber got %d events", len(got))
	}
	// The slow one got its buffer's worth, then its channel was closed.
	var n int
	for range slow {
		n++
	}
	if n != 4 {
		t.Errorf("slow subscriber received %d events before the close, want its buffer of 4", n)
	}
	s := b.Stats()
	if s.SubscribersDropped != 1 || s.Subscribers != 1 {
		t.Errorf("Stats = %+v, want 1 dropped, 1 left", s)
	}
	cancelSlow() // a dropped subscriber's cancel is harmless
	// It resumes from the last event it saw and gets what the ring holds.
	again, cancel := b.Subscribe(nil, 4)
	defer cancel()
	if got := receive(t, again, 8); got[0].ID != 93 || got[7].ID != 100 {
		t.Errorf("resubscribe replayed %v, want 93..100", ids(got))
	}
}

func TestCancel(t *testing.T) {
	b := New(Options{})
	defer b.Close()
	ch, cancel := b.Subscribe(nil, 0)
	b.Publish(Event{})
	cancel()
	cancel()
	// The buffered event is still readable, then the channel is closed.
	if e, ok := <-ch; !ok || e.ID != 1 {
		t.Fatalf("after cancel: %+v, %v", e, ok)
	}
	if _, ok := <-ch; ok {
		t.Fatal("channel open after cancel")
	}
	b.Publish(Event{})
	if s := b.Stats(); s.Subscribers != 0 || s.SubscribersDropped != 0 {
		t.Errorf("Stats = %+v", s)
	}
}

func TestRecent(t *testing.T) {
	b := New(Options{History: 6})
	defer b.Close()
	for i := 1; i <= 9; i++ {
		b.Publish(Event{Tenant: map[bool]string{true: "t1", false: ""}[i%3 == 0]})
	}
	t1 := func(e Event) bool { return e.Tenant == "t1" }
	tests := []struct {
		name   string
		n      int
		filter func(Event) bool
		want   []uint64
	}{
		{"all buffered", 0, nil, []uint64{4, 5, 6, 7, 8, 9}},
		{"negative is all", -1, nil, []uint64{4, 5, 6, 7, 8, 9}},
		{"newest two", 2, nil, []uint64{8, 9}},
		{"more than buffered", 50, nil, []uint64{4, 5, 6, 7, 8, 9}},
		{"filtered", 0, t1, []uint64{6, 9}},
		{"filtered newest one", 1, t1, []uint64{9}},
		{"nothing passes", 3, func(Event) bool { return false }, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := ids(b.Recent(tt.n, tt.filter)); !slices.Equal(got, tt.want) {
				t.Fatalf("Recent = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestClose(t *testing.T) {
	b := New(Options{})
	ch, cancel := b.Subscribe(nil, 0)
	b.Close()
	b.Close()
	if _, ok := <-ch; ok {
		t.Fatal("subscriber channel open after Close")
	}
	cancel()
	// After Close: events are still numbered and kept, subscribing gives a
	// closed channel.
	if e := b.Publish(Event{}); e.ID != 1 {
		t.Fatalf("Publish after Close: ID %d", e.ID)
	}
	late, _ := b.Subscribe(nil, 0)
	if _, ok := <-late; ok {
		t.Fatal("Subscribe after Close gave an open channel")
	}
	if len(b.Recent(0, nil)) != 1 {
		t.Fatal("event published after Close not kept")
	}
	if err := b.AddDestination(Destination{ID: "d", URL: "http://127.0.0.1:1/"}); !errors.Is(err, ErrClosed) {
		t.Fatalf("AddDestination after Close = %v, want ErrClosed", err)
	}
	checkNoGoroutines(t)
}

func TestVisible(t *testing.T) {
	tests := []struct {
		tenant, eventTenant string
		want                bool
	}{
		{"", "", true},
		{"", "t1", true},
		{"t1", "t1", true},
		{"t1", "", false},
		{"t1", "t2", false},
	}
	for _, tt := range tests {
		if got := Visible(tt.tenant, Event{Tenant: tt.eventTenant}); got != tt.want {
			t.Errorf("Visible(%q, event of %q) = %v, want %v", tt.tenant, tt.eventTenant, got, tt.want)
		}
	}
}
