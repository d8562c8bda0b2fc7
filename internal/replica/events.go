package replica

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"rackpool/internal/events"
	"rackpool/internal/store/postgres"
)

// EventLog gives the active replicas one event stream (docs/ha.md, "One
// event stream, one exposition"). It is the Relay of this replica's bus
// (BusOptions):
// it appends every event the bus publishes to the store's event log, in
// order, a batch at a time; and it reads the log, every replica's events in
// the log's one order, and hands each to the bus's Deliver with its
// sequence number as its ID. Every replica's bus thus holds the same
// events under the same IDs, this replica's own included (they come back
// from the log like the others'), and an event is in the others' streams
// once it is in the database, whatever becomes of the replica that
// published it.
//
//	Publish ─▶ Relay ─▶ pending ─▶ writer ─AppendEvents─▶ events table ─NOTIFY─┐
//	SSE, push ◀── bus ◀── Deliver(ID = seq) ◀── reader ◀─EventsAfter───────────┘
//
// Memory is bounded: at most maxPendingEvents wait to be appended (more are
// dropped and counted, while the database is unreachable), and the reader
// reads a page at a time. The leader prunes the log (postgres.PruneLoop).
type EventLog struct {
	st     *postgres.Store
	tag    string
	log    *slog.Logger
	start  int64          // the last sequence number read at open
	recent []events.Event // what was read at open, for the bus's ring

	mu      sync.Mutex
	pending []postgres.LoggedEvent // published here, not yet appended
	next    int64                  // the number of the last event published here

	dropped atomic.Uint64
	wake    chan struct{} // pending has events
	kick    chan struct{} // the log may have new events
	running atomic.Bool
	stopped chan struct{} // closed when Run has returned
}

const (
	// maxPendingEvents bounds the events waiting to be appended.
	maxPendingEvents = 4096
	// eventBatch is the most events one append carries.
	eventBatch = 256
	// eventPage is the most events one read of the log returns.
	eventPage = 1000
	// flushTimeout bounds the last append when Run stops.
	flushTimeout = 5 * time.Second
)

// OpenEventLog returns the event log of the replica tagged tag on st. It
// reads the newest events.DefaultHistory events of the log, for the bus
// to start with (BusOptions), so that a replica that starts holds what
// the others hold: an SSE client of a replica that stopped resumes here
// with its Last-Event-ID.
func OpenEventLog(ctx context.Context, st *postgres.Store, tag string, log *slog.Logger) (*EventLog, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	start, err := st.EventsStart(ctx, events.DefaultHistory)
	if err != nil {
		return nil, err
	}
	l := &EventLog{st: st, tag: tag, log: log, start: start,
		wake: make(chan struct{}, 1), kick: make(chan struct{}, 1), stopped: make(chan struct{})}
	logged, err := st.EventsAfter(ctx, start, events.DefaultHistory)
	if err != nil {
		return nil, err
	}
	for _, le := range logged {
		l.start = le.Seq
		if e, ok := l.event(le); ok {
			l.recent = append(l.recent, e)
		}
	}
	return l, nil
}

var _ events.Relay = (*EventLog)(nil)

// BusOptions returns o for this replica's bus: this log its Relay, and
// the newest events of the log when it was opened its Seed (and StartID),
// so that Run delivers from there on.
func (l *EventLog) BusOptions(o events.Options) events.Options {
	o.Relay, o.Seed, o.StartID = l, l.recent, uint64(l.start)
	return o
}

// Dropped is how many events published here were lost because too many
// were waiting to be appended.
func (l *EventLog) Dropped() uint64 { return l.dropped.Load() }

// Relay takes an event the bus published (events.Relay): it is appended
// to the log by Run's writer.
func (l *EventLog) Relay(e events.Event) {
	data, err := encodeEvent(e)
	if err != nil {
		l.log.Error("event log: event not encodable; dropped", "message", e.MessageID, "err", err)
		return
	}
	l.mu.Lock()
	if len(l.pending) >= maxPendingEvents {
		l.mu.Unlock()
		if n := l.dropped.Add(1); n == 1 || n%1000 == 0 {
			l.log.Warn("event log: too many events waiting for the database; dropped", "dropped", n)
		}
		return
	}
	l.next++
	l.pending = append(l.pending, postgres.LoggedEvent{Num: l.next, Data: data})
	l.mu.Unlock()
	signal(l.wake)
}

// Deliverer is what the reader hands the log's events to (events.Bus).
type Deliverer interface {
	Deliver(e events.Event) bool
}

// Run appends the events published here and delivers the log's to bus
// until ctx ends; then it appends what is still waiting (for at most
// flushTimeout) and returns. Call it once.
func (l *EventLog) Run(ctx context.Context, bus Deliverer) {
	l.running.Store(true)
	defer close(l.stopped)
	written := make(chan struct{})
	go func() {
		defer close(written)
		l.write(ctx)
	}()
	go l.st.ListenEvents(ctx, time.Second, l.log, func() { signal(l.kick) })
	pos, failing := l.start, false
	for {
		select {
		case <-ctx.Done():
			<-written
			return
		case <-l.kick:
		}
		var err error
		pos, err = l.deliver(ctx, bus, pos)
		switch {
		case err != nil && !failing && ctx.Err() == nil:
			l.log.Warn("event log: cannot read; retrying", "err", err)
			failing = true
		case err == nil && failing:
			l.log.Info("event log: reading again")
			failing = false
		}
	}
}

// Close waits for Run to return, if it was started.
func (l *EventLog) Close() {
	if l.running.Load() {
		<-l.stopped
	}
}

// deliver hands bus every event logged after pos and returns the last
// sequence number read.
func (l *EventLog) deliver(ctx context.Context, bus Deliverer, pos int64) (int64, error) {
	for {
		logged, err := l.st.EventsAfter(ctx, pos, eventPage)
		if err != nil {
			return pos, err
		}
		for _, le := range logged {
			pos = le.Seq
			if e, ok := l.event(le); ok {
				bus.Deliver(e)
			}
		}
		if len(logged) < eventPage {
			return pos, nil
		}
	}
}

// event is the event le logged, numbered by its place in the log and
// marked with its replica unless it is this one; false if it cannot be
// read (logged and skipped).
func (l *EventLog) event(le postgres.LoggedEvent) (events.Event, bool) {
	e, err := decodeEvent(le.Data)
	if err != nil {
		l.log.Error("event log: event not readable; skipped", "seq", le.Seq, "replica", le.Replica, "err", err)
		return events.Event{}, false
	}
	e.ID = uint64(le.Seq)
	if le.Replica != l.tag {
		e.Replica = le.Replica
	}
	return e, true
}

// write appends the pending events as they come until ctx ends, then
// what is left, for at most flushTimeout.
func (l *EventLog) write(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), flushTimeout)
			defer cancel()
			l.appendAll(fctx)
			return
		case <-l.wake:
		}
		l.appendAll(ctx)
	}
}

// appendAll appends the pending events, retrying with backoff while the
// database cannot be written, until none is left or ctx ends.
func (l *EventLog) appendAll(ctx context.Context) {
	failing := false
	for backoff := 50 * time.Millisecond; ctx.Err() == nil; {
		more, err := l.appendBatch(ctx)
		if err != nil {
			if !failing {
				l.log.Warn("event log: cannot append; retrying", "err", err)
				failing = true
			}
			sleep(ctx, backoff)
			backoff = min(2*backoff, time.Second)
			continue
		}
		if failing {
			l.log.Info("event log: appending again")
			failing = false
		}
		if !more {
			return
		}
	}
}

// appendBatch appends the oldest pending events, at most eventBatch, and
// reports whether more are waiting. A failed append leaves them waiting,
// a fenced one too: a replica whose membership moved on either takes it
// again (and appends) or has been evicted and stops.
func (l *EventLog) appendBatch(ctx context.Context) (bool, error) {
	l.mu.Lock()
	batch := l.pending[:min(len(l.pending), eventBatch)]
	l.mu.Unlock()
	if len(batch) == 0 {
		return false, nil
	}
	if err := l.st.AppendEvents(ctx, l.tag, batch); err != nil {
		return true, err
	}
	l.mu.Lock()
	l.pending = append(l.pending[:0], l.pending[len(batch):]...)
	more := len(l.pending) > 0
	l.mu.Unlock()
	signal(l.kick)
	return more, nil
}

// wireEvent is an event as the log keeps it: its ID is the log's sequence
// number, and its replica the log's column.
type wireEvent struct {
	Time      time.Time
	Type      string         `json:",omitempty"`
	MessageID string         `json:",omitempty"`
	Message   string         `json:",omitempty"`
	Args      []string       `json:",omitempty"`
	Severity  string         `json:",omitempty"`
	Origin    string         `json:",omitempty"`
	Tenant    string         `json:",omitempty"`
	Oem       map[string]any `json:",omitempty"`
}

// encodeEvent is e as the log keeps it. An Oem that cannot be encoded is
// left out, as events.Payload leaves it out of what clients receive.
func encodeEvent(e events.Event) ([]byte, error) {
	w := wireEvent{Time: e.Time, Type: e.Type, MessageID: e.MessageID, Message: e.Message, Args: e.Args,
		Severity: e.Severity, Origin: e.Origin, Tenant: e.Tenant, Oem: e.Oem}
	data, err := json.Marshal(w)
	if err != nil && w.Oem != nil {
		w.Oem = nil
		data, err = json.Marshal(w)
	}
	return data, err
}

// decodeEvent reads an event encodeEvent wrote.
func decodeEvent(data []byte) (events.Event, error) {
	var w wireEvent
	if err := json.Unmarshal(data, &w); err != nil {
		return events.Event{}, fmt.Errorf("decode event: %w", err)
	}
	return events.Event{Time: w.Time, Type: w.Type, MessageID: w.MessageID, Message: w.Message, Args: w.Args,
		Severity: w.Severity, Origin: w.Origin, Tenant: w.Tenant, Oem: w.Oem}, nil
}

// signal wakes whoever waits on ch (capacity 1) without blocking.
func signal(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// sleep waits d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}
