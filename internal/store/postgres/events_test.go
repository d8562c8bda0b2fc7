package postgres_test

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"rackpool/internal/store/postgres"
	"rackpool/internal/store/postgres/pgtest"
)

// logged makes events numbered from..to of one replica, their data
// naming them.
func logged(replica string, from, to int64) []postgres.LoggedEvent {
	var out []postgres.LoggedEvent
	for n := from; n <= to; n++ {
		out = append(out, postgres.LoggedEvent{Num: n, Data: fmt.Appendf(nil, `"%s-%d"`, replica, n)})
	}
	return out
}

// names are the data of evs.
func names(evs []postgres.LoggedEvent) []string {
	var out []string
	for _, e := range evs {
		out = append(out, string(e.Data))
	}
	return out
}

// TestEventLog: every replica's events are in one log, in the order they
// were appended, numbered from the time the log was made in
// microseconds; an append repeated (after a commit of unknown outcome)
// adds nothing; a replica starting reads from before the newest events;
// old events are pruned; an append notifies every listener, its own
// replica's included.
func TestEventLog(t *testing.T) {
	srv := shared(t)
	url := srv.CreateDatabase(t, pgtest.DatabaseName(t))
	ctx := context.Background()
	a, b := openURL(t, url), openURL(t, url)
	defer a.Close()
	defer b.Close()
	if start, err := a.EventsStart(ctx, 10); err != nil || start != 0 {
		t.Fatalf("EventsStart of an empty log = %d, %v", start, err)
	}

	lctx, cancel := context.WithCancel(ctx)
	defer cancel()
	notified := make(chan struct{}, 16)
	go a.ListenEvents(lctx, time.Minute, slog.New(slog.DiscardHandler), func() { notified <- struct{}{} })
	<-notified // the first call, on listening

	made := time.Now().Add(-time.Minute).UnixMicro()
	if err := a.AppendEvents(ctx, "aaaa", logged("aaaa", 1, 3)); err != nil {
		t.Fatal(err)
	}
	select {
	case <-notified:
	case <-time.After(10 * time.Second):
		t.Fatal("a listener was not told of its own replica's append")
	}
	if err := b.AppendEvents(ctx, "bbbb", logged("bbbb", 1, 2)); err != nil {
		t.Fatal(err)
	}
	// A retry of an append that committed adds nothing; the new event in
	// it is added.
	if err := a.AppendEvents(ctx, "aaaa", logged("aaaa", 2, 4)); err != nil {
		t.Fatal(err)
	}
	all, err := b.EventsAfter(ctx, 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{`"aaaa-1"`, `"aaaa-2"`, `"aaaa-3"`, `"bbbb-1"`, `"bbbb-2"`, `"aaaa-4"`}
	if got := names(all); !slices.Equal(got, want) {
		t.Fatalf("log %v, want %v", got, want)
	}
	for i, e := range all {
		if e.Seq < made || i > 0 && e.Seq <= all[i-1].Seq {
			t.Fatalf("sequence numbers %v: want growing, from the log's making in microseconds (after %d)", all, made)
		}
	}
	if all[3].Replica != "bbbb" || all[3].Num != 1 {
		t.Errorf("event %+v, want bbbb's first", all[3])
	}
	page, err := a.EventsAfter(ctx, all[1].Seq, 2)
	if err != nil || !slices.Equal(names(page), want[2:4]) {
		t.Fatalf("page after the second: %v, %v", names(page), err)
	}
	start, err := a.EventsStart(ctx, 2)
	if err != nil || start != all[3].Seq {
		t.Fatalf("EventsStart(2) = %d, %v; want %d, before the newest two", start, err, all[3].Seq)
	}
	if start, err := a.EventsStart(ctx, 100); err != nil || start != all[0].Seq-1 {
		t.Fatalf("EventsStart(100) = %d, %v; want %d, before the first", start, err, all[0].Seq-1)
	}
	if head, err := a.EventsStart(ctx, 0); err != nil || head != all[5].Seq {
		t.Fatalf("EventsStart(0) = %d, %v; want the newest, %d", head, err, all[5].Seq)
	}

	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, `UPDATE events SET at = now() - interval '1 hour' WHERE replica = 'aaaa'`); err != nil {
		t.Fatal(err)
	}
	if n, err := a.PruneEvents(ctx, postgres.EventRetention); err != nil || n != 4 {
		t.Fatalf("PruneEvents = %d, %v, want 4", n, err)
	}
	if left, err := a.EventsAfter(ctx, 0, 100); err != nil || !slices.Equal(names(left), want[3:5]) {
		t.Fatalf("the log after pruning: %v, %v", names(left), err)
	}
}

// TestEventLogConcurrentAppends: replicas appending at once, a batch at a
// time, while a reader reads on from the last sequence number it saw
// (never looking back for gaps): the reader gets every event once, each
// replica's in the order it appended them. Appends commit in the order of
// their sequence numbers.
func TestEventLogConcurrentAppends(t *testing.T) {
	srv := shared(t)
	url := srv.CreateDatabase(t, pgtest.DatabaseName(t))
	ctx := context.Background()
	const replicas, batches, batch = 4, 40, 5
	var wg sync.WaitGroup
	errs := make(chan error, replicas)
	for r := range replicas {
		st := openURL(t, url)
		defer st.Close()
		tag := fmt.Sprint("r", r)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range int64(batches) {
				if err := st.AppendEvents(ctx, tag, logged(tag, i*batch+1, (i+1)*batch)); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	reader := openURL(t, url)
	defer reader.Close()
	last := map[string]int64{}
	var pos int64
	read := func() {
		evs, err := reader.EventsAfter(ctx, pos, 7)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range evs {
			if e.Num != last[e.Replica]+1 {
				t.Fatalf("after %s's event %d came its %d (sequence %d)", e.Replica, last[e.Replica], e.Num, e.Seq)
			}
			last[e.Replica], pos = e.Num, e.Seq
		}
	}
	for running := true; running; {
		select {
		case <-done:
			running = false
		case err := <-errs:
			t.Fatal(err)
		default:
		}
		read()
	}
	for range batches * replicas {
		read()
	}
	for r := range replicas {
		if tag := fmt.Sprint("r", r); last[tag] != batches*batch {
			t.Errorf("read %d of %s's %d events", last[tag], tag, batches*batch)
		}
	}
}
