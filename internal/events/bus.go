package events

import (
	"errors"
	"log/slog"
	"maps"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// Event is one event as the bus carries it. Events handed out by the bus
// are shared between consumers: treat them as read-only.
type Event struct {
	// ID is assigned by Publish; later events have greater IDs.
	ID uint64
	// Time is when it happened; Publish sets it from the bus clock when
	// zero.
	Time time.Time
	// Type is the Redfish EventType: one of the Type constants. Payload
	// writes "Other" for anything else.
	Type string
	// MessageID is the registry message, e.g.
	// "ResourceEvent.1.4.ResourceStatusChangedCritical".
	MessageID string
	// Message is the registry message's text with Args filled in.
	Message string
	Args    []string
	// Severity is OK, Warning or Critical.
	Severity string
	// Origin is the @odata.id of the resource the event is about.
	Origin string
	// Tenant scopes the event: "" means only unscoped accounts (the
	// operators) may see it.
	Tenant string
	// Oem is copied into the event record's Oem property; by Redfish rules
	// its keys are OEM names ("Rackpool").
	Oem map[string]any
	// Replica is the tag of the active replica that published the event
	// when another replica did (it came through the shared event log,
	// Deliver); "" for an event of this process.
	Replica string
}

// Redfish EventType values (Event.EventType in the Event schema).
const (
	TypeStatusChange    = "StatusChange"
	TypeResourceUpdated = "ResourceUpdated"
	TypeResourceAdded   = "ResourceAdded"
	TypeResourceRemoved = "ResourceRemoved"
	TypeAlert           = "Alert"
	TypeOther           = "Other"
)

// Severities (Resource.Health).
const (
	SeverityOK       = "OK"
	SeverityWarning  = "Warning"
	SeverityCritical = "Critical"
)

// Defaults.
const (
	// DefaultHistory is how many events the ring keeps by default.
	DefaultHistory = 1024
	// DefaultSubscriberBuffer is a subscriber channel's default capacity
	// beyond its replay.
	DefaultSubscriberBuffer = 256
	// DeliveryTimeout bounds one POST to a destination.
	DeliveryTimeout = 5 * time.Second
	// DeliveryTries is how many times a payload is POSTed before it is
	// given up.
	DeliveryTries = 3
	// DefaultRetryBackoff is the wait before the first retry; it doubles
	// before each further one.
	DefaultRetryBackoff = time.Second
	// destinationQueue is how many events may wait for one destination.
	destinationQueue = 256
	// maxBatch is the most events one push payload carries.
	maxBatch = 32
)

// Errors.
var (
	// ErrClosed: the bus has been closed.
	ErrClosed = errors.New("events: bus closed")
	// ErrDestinationExists: a destination with that ID is already added.
	ErrDestinationExists = errors.New("events: destination exists")
	// ErrInvalidDestination: the destination has no ID, a bad URL or an
	// unsupported protocol.
	ErrInvalidDestination = errors.New("events: invalid destination")
)

// Options configure a Bus. The zero value means every default.
type Options struct {
	// History is how many recent events the ring keeps for replay and
	// Recent (default DefaultHistory).
	History int
	// Clock stamps events published without a time (default time.Now).
	Clock func() time.Time
	// Logger receives drops and delivery failures (default: discard).
	Logger *slog.Logger
	// SubscriberBuffer is each subscriber's channel capacity on top of
	// its replay (default DefaultSubscriberBuffer).
	SubscriberBuffer int
	// Client POSTs push payloads (default: a client that follows no
	// redirects). DeliveryTimeout applies either way.
	Client *http.Client
	// RetryBackoff is the wait before the first retry of a failed POST
	// (default DefaultRetryBackoff); it doubles each time.
	RetryBackoff time.Duration
	// StartID is the ID before the first event's: IDs start at StartID+1.
	// A server may seed it from the wall clock so that IDs keep growing
	// across restarts and an SSE client's Last-Event-ID stays meaningful.
	StartID uint64
	// Relay, when set, numbers the events elsewhere: Publish hands each
	// event to it instead of delivering it, and the events come back,
	// numbered, through Deliver (an active replica's shared event log,
	// docs/ha.md). Default: Publish numbers and delivers.
	Relay Relay
	// Seed fills the ring with events numbered elsewhere, oldest first,
	// before anything is published or delivered: an active replica's
	// newest events from the shared log, so that a client's Last-Event-ID
	// from another replica resumes here, and nothing from before the bus
	// reaches a subscriber as new. StartID is raised to the last one's ID.
	Seed []Event
}

// Relay takes the events a bus publishes to number and deliver them
// elsewhere (Options.Relay).
type Relay interface {
	// Relay takes e, stamped with its time but not numbered. It must not
	// block and must not call the bus.
	Relay(e Event)
}

// Stats are the bus's counters since New.
type Stats struct {
	Published          uint64 // events published (with a Relay: handed to it)
	Subscribers        int    // current subscribers
	SubscribersDropped uint64 // subscribers dropped for falling behind
	Destinations       int    // current push destinations
	Delivered          uint64 // events POSTed successfully (per destination)
	DeliveryFailures   uint64 // events given up after DeliveryTries (per destination)
	DeliveryDropped    uint64 // events lost to a full destination queue
}

// Bus fans events out to subscribers and push destinations. It is safe for
// concurrent use.
type Bus struct {
	relay     Relay
	clock     func() time.Time
	log       *slog.Logger
	subBuf    int
	client    *http.Client
	ownClient bool
	backoff   time.Duration

	mu     sync.Mutex
	lastID uint64
	ring   []Event // capacity History; oldest at head once full
	head   int
	count  int
	subs   map[*subscriber]struct{}
	dests  map[string]*deliverer
	closed bool

	published, subsDropped                   atomic.Uint64
	delivered, deliveryFailed, deliveryDrops atomic.Uint64
}

type subscriber struct {
	filter func(Event) bool
	ch     chan Event
}

// New returns a running bus.
func New(opts Options) *Bus {
	if opts.History <= 0 {
		opts.History = DefaultHistory
	}
	if opts.Clock == nil {
		opts.Clock = time.Now
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.SubscriberBuffer <= 0 {
		opts.SubscriberBuffer = DefaultSubscriberBuffer
	}
	if opts.RetryBackoff <= 0 {
		opts.RetryBackoff = DefaultRetryBackoff
	}
	for _, e := range opts.Seed {
		opts.StartID = max(opts.StartID, e.ID)
	}
	b := &Bus{
		relay:   opts.Relay,
		clock:   opts.Clock,
		log:     opts.Logger,
		subBuf:  opts.SubscriberBuffer,
		client:  opts.Client,
		backoff: opts.RetryBackoff,
		lastID:  opts.StartID,
		ring:    make([]Event, opts.History),
		subs:    map[*subscriber]struct{}{},
		dests:   map[string]*deliverer{},
	}
	for _, e := range opts.Seed {
		b.push(e)
	}
	if b.client == nil {
		b.ownClient = true
		b.client = &http.Client{
			Transport: http.DefaultTransport.(*http.Transport).Clone(),
			// A destination is the URL it was registered with: a redirect
			// is a failed delivery, not an invitation to POST elsewhere.
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		}
	}
	return b
}

// Publish assigns e its ID (and its time, if zero), keeps it in the ring
// and offers it to every subscriber and destination whose filter it
// passes, without waiting for any of them. It returns e as published.
// After Close the event is still numbered and kept, but goes nowhere.
//
// With a Relay, Publish stamps e's time and hands it to the relay instead,
// returning it without an ID: it comes back through Deliver.
//
// Subscriber filters run inside Publish, under the bus's lock: they must
// be quick and must not call the bus.
func (b *Bus) Publish(e Event) Event {
	e.Args = slices.Clone(e.Args)
	e.Oem = maps.Clone(e.Oem)
	if b.relay != nil {
		if e.Time.IsZero() {
			e.Time = b.clock()
		}
		b.published.Add(1)
		b.relay.Relay(e)
		return e
	}
	b.mu.Lock()
	b.lastID++
	e.ID = b.lastID
	if e.Time.IsZero() {
		e.Time = b.clock()
	}
	b.published.Add(1)
	dropped, full := b.offer(e)
	b.mu.Unlock()
	b.report(e, dropped, full)
	return e
}

// Deliver keeps e, numbered elsewhere (Options.Relay), in the ring and
// offers it to the subscribers and destinations as Publish does. Events
// must come in ID order: one whose ID is not greater than the last one's
// is a repeat and is dropped (Deliver reports false), so that each event
// reaches each consumer once.
func (b *Bus) Deliver(e Event) bool {
	b.mu.Lock()
	if e.ID <= b.lastID {
		b.mu.Unlock()
		return false
	}
	b.lastID = e.ID
	dropped, full := b.offer(e)
	b.mu.Unlock()
	b.report(e, dropped, full)
	return true
}

// offer keeps e in the ring and offers it to every consumer. It returns
// how many subscribers it dropped for falling behind and the destinations
// whose queue was full. Call with b.mu held.
func (b *Bus) offer(e Event) (dropped int, full []string) {
	b.push(e)
	for s := range b.subs {
		if s.filter != nil && !s.filter(e) {
			continue
		}
		select {
		case s.ch <- e:
		default:
			delete(b.subs, s)
			close(s.ch)
			dropped++
		}
	}
	for _, d := range b.dests {
		if !Match(d.dest, e) {
			continue
		}
		select {
		case d.queue <- e:
		default:
			full = append(full, d.dest.ID)
		}
	}
	return dropped, full
}

// report counts and logs what offer dropped.
func (b *Bus) report(e Event, dropped int, full []string) {
	if len(full) > 0 {
		b.deliveryDrops.Add(uint64(len(full)))
		b.log.Warn("event destination queues full: event dropped", "destinations", full, "event", e.ID)
	}
	if dropped > 0 {
		b.subsDropped.Add(uint64(dropped))
		b.log.Warn("event subscribers fell behind and were dropped", "count", dropped, "event", e.ID)
	}
}

// push adds e to the ring, overwriting the oldest when full. Call with
// b.mu held.
func (b *Bus) push(e Event) {
	n := len(b.ring)
	if b.count < n {
		b.ring[(b.head+b.count)%n] = e
		b.count++
		return
	}
	b.ring[b.head] = e
	b.head = (b.head + 1) % n
}

// buffered calls fn for every event in the ring, oldest first, until fn
// returns false. Call with b.mu held.
func (b *Bus) buffered(fn func(Event) bool) {
	n := len(b.ring)
	for i := range b.count {
		if !fn(b.ring[(b.head+i)%n]) {
			return
		}
	}
}

// Subscribe returns a channel that first carries the buffered events with
// an ID greater than since that pass filter (nil passes everything), then
// every later event that passes it, in ID order with nothing missed and
// nothing repeated. since 0 replays the whole ring; pass the newest ID you
// have seen (an SSE Last-Event-ID) to resume. Live events are delivered
// whatever their ID, so a since from before a restart replays nothing and
// loses nothing new.
//
// The channel is closed when cancel is called, when the bus is closed,
// and when the subscriber falls more than its buffer behind (see the
// package comment): a reader that sees the channel close without having
// cancelled should resubscribe from the last ID it got. cancel may be
// called more than once.
func (b *Bus) Subscribe(filter func(Event) bool, since uint64) (<-chan Event, func()) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		ch := make(chan Event)
		close(ch)
		return ch, func() {}
	}
	var replay []Event
	b.buffered(func(e Event) bool {
		if e.ID > since && (filter == nil || filter(e)) {
			replay = append(replay, e)
		}
		return true
	})
	s := &subscriber{filter: filter, ch: make(chan Event, len(replay)+b.subBuf)}
	for _, e := range replay {
		s.ch <- e
	}
	b.subs[s] = struct{}{}
	return s.ch, func() {
		b.mu.Lock()
		defer b.mu.Unlock()
		if _, ok := b.subs[s]; ok {
			delete(b.subs, s)
			close(s.ch)
		}
	}
}

// Recent returns up to n of the newest buffered events that pass filter
// (nil passes everything), oldest first. n <= 0 means every buffered one.
func (b *Bus) Recent(n int, filter func(Event) bool) []Event {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []Event
	size := len(b.ring)
	for i := b.count - 1; i >= 0 && (n <= 0 || len(out) < n); i-- {
		e := b.ring[(b.head+i)%size]
		if filter == nil || filter(e) {
			out = append(out, e)
		}
	}
	slices.Reverse(out)
	return out
}

// LastID returns the ID of the newest event published (Options.StartID
// before the first).
func (b *Bus) LastID() uint64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.lastID
}

// Stats returns the bus's counters.
func (b *Bus) Stats() Stats {
	b.mu.Lock()
	subs, dests := len(b.subs), len(b.dests)
	b.mu.Unlock()
	return Stats{
		Published:          b.published.Load(),
		Subscribers:        subs,
		SubscribersDropped: b.subsDropped.Load(),
		Destinations:       dests,
		Delivered:          b.delivered.Load(),
		DeliveryFailures:   b.deliveryFailed.Load(),
		DeliveryDropped:    b.deliveryDrops.Load(),
	}
}

// Close closes every subscriber channel, stops every deliverer (a POST in
// flight is abandoned) and waits for them. Publish still numbers and keeps
// events afterwards; Subscribe returns a closed channel and AddDestination
// fails with ErrClosed. Close is idempotent.
func (b *Bus) Close() {
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return
	}
	b.closed = true
	for s := range b.subs {
		close(s.ch)
	}
	clear(b.subs)
	ds := slices.Collect(maps.Values(b.dests))
	clear(b.dests)
	b.mu.Unlock()
	for _, d := range ds {
		d.cancel()
	}
	for _, d := range ds {
		<-d.done
	}
	if b.ownClient {
		b.client.CloseIdleConnections()
	}
}

// Visible reports whether an account of tenant may see e: an unscoped
// account ("") sees every event, a tenant's account only its tenant's.
func Visible(tenant string, e Event) bool {
	return tenant == "" || e.Tenant == tenant
}
