package telemetry

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"rackpool/internal/clock"
	"rackpool/internal/store"
)

// Defaults of Options.
const (
	DefaultRetention  = 24 * time.Hour
	DefaultMaxSamples = 8640
	DefaultMaxSeries  = 16384
	DefaultMaxSkew    = 10 * time.Second
	// MaxSourceLen bounds a source ID.
	MaxSourceLen = 128
)

// Key identifies a series.
type Key struct {
	Kind   Kind
	Source string // the system's, lease's or cache lease's ID
	Metric string // from Metrics(Kind)
}

func (k Key) String() string { return string(k.Kind) + "/" + k.Source + "/" + k.Metric }

func (k Key) compare(o Key) int {
	return cmp.Or(cmp.Compare(k.Kind, o.Kind), cmp.Compare(k.Source, o.Source), cmp.Compare(k.Metric, o.Metric))
}

// Sample is one value at one time.
type Sample struct {
	Time  time.Time
	Value float64
}

// Batch is the samples of one series in a push.
type Batch struct {
	Key     Key
	Samples []Sample
}

// Reading is the newest sample of a series.
type Reading struct {
	Key Key
	Sample
}

// Filter selects series; an empty field matches any.
type Filter struct {
	Kind   Kind
	Source string
	Metric string
}

func (f Filter) match(k Key) bool {
	return (f.Kind == "" || f.Kind == k.Kind) && (f.Source == "" || f.Source == k.Source) && (f.Metric == "" || f.Metric == k.Metric)
}

// Options configure a Store. The zero value of each field means its
// default.
type Options struct {
	// Clock decides what is in the future and what has expired; default
	// clock.Real{}.
	Clock clock.Clock
	// Retention: samples older than this are dropped; default 24 h.
	Retention time.Duration
	// MaxSamples is the most samples a series keeps (the oldest go
	// first); default 8640.
	MaxSamples int
	// MaxSeries bounds the number of series; default 16384.
	MaxSeries int
	// MaxSkew is how far ahead of Clock a sample's time may be; default
	// 10 s.
	MaxSkew time.Duration
	// Store keeps the samples (segments); nil keeps them in memory only.
	Store store.Store
	// Buffered keeps accepted samples in memory until the next
	// checkpoint, which a crash loses; by default (false) every accepted
	// push is written to Store before AppendAll returns, and checkpoints
	// merge those writes (see the package doc).
	Buffered bool
	// Logger; default discard.
	Logger *slog.Logger
}

// Validate reports whether the options can make a Store.
func (o Options) Validate() error {
	switch {
	case o.Retention < 0:
		return fmt.Errorf("telemetry: retention %v is negative", o.Retention)
	case o.Retention != 0 && o.Retention < time.Second:
		return fmt.Errorf("telemetry: retention %v is below a second", o.Retention)
	case o.MaxSamples < 0:
		return fmt.Errorf("telemetry: MaxSamples %d is negative", o.MaxSamples)
	case o.MaxSeries < 0:
		return fmt.Errorf("telemetry: MaxSeries %d is negative", o.MaxSeries)
	case o.MaxSkew < 0:
		return fmt.Errorf("telemetry: MaxSkew %v is negative", o.MaxSkew)
	}
	return nil
}

func (o *Options) defaults() {
	if o.Clock == nil {
		o.Clock = clock.Real{}
	}
	if o.Retention == 0 {
		o.Retention = DefaultRetention
	}
	if o.MaxSamples == 0 {
		o.MaxSamples = DefaultMaxSamples
	}
	if o.MaxSeries == 0 {
		o.MaxSeries = DefaultMaxSeries
	}
	if o.MaxSkew == 0 {
		o.MaxSkew = DefaultMaxSkew
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
}

// Store is the sample store. It is safe for concurrent use.
type Store struct {
	o Options

	// appendMu serialises the changes of series contents (appends,
	// pruning), so a push is validated and applied against one state.
	appendMu sync.Mutex

	mu     sync.RWMutex // the map, not the series' contents
	series map[Key]*series

	// ckMu serialises checkpoints; it guards segs and every series'
	// persisted mark.
	ckMu sync.Mutex
	segs []segmentInfo
	// lastSeg is the sequence number of the newest segment written.
	lastSeg atomic.Int64
	// pending is what pushes wrote through since the last checkpoint,
	// oldest first, for the next one to merge; guarded by pendMu.
	pendMu  sync.Mutex
	pending []written
}

// series is one ring of samples.
type series struct {
	key Key
	mu  sync.RWMutex // contents; changed only under Store.appendMu
	buf []point      // ring: the oldest at start, n valid
	beg int
	n   int
	// persisted is the time of the newest sample a checkpoint wrote;
	// guarded by Store.ckMu.
	persisted int64
}

// point is a sample as kept: 16 bytes.
type point struct {
	t int64 // Unix ns
	v float64
}

// Open returns a Store and, when o.Store is set, loads the samples of the
// stored segments that are within the retention.
func Open(ctx context.Context, o Options) (*Store, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	o.defaults()
	s := &Store{o: o, series: map[Key]*series{}}
	if o.Store != nil {
		if err := s.load(ctx); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// Now is the time on the store's clock: what a sample recorded as of now
// is stamped with.
func (s *Store) Now() time.Time { return s.o.Clock.Now() }

// Retention returns how long samples are kept.
func (s *Store) Retention() time.Duration { return s.o.Retention }

// MaxSeries returns the bound on the number of series.
func (s *Store) MaxSeries() int { return s.o.MaxSeries }

// MaxSamples returns how many samples a series keeps at most.
func (s *Store) MaxSamples() int { return s.o.MaxSamples }

func (se *series) at(i int) point { return se.buf[(se.beg+i)%len(se.buf)] }

// newest returns the time of the newest sample; ok false when empty.
func (se *series) newest() (int64, bool) {
	if se.n == 0 {
		return 0, false
	}
	return se.at(se.n - 1).t, true
}

// push adds p, newer than every sample held, dropping the oldest when the
// ring is at limit. se.mu held.
func (se *series) push(p point, limit int) {
	if se.n == len(se.buf) {
		if len(se.buf) < limit {
			nb := make([]point, min(limit, max(8, 2*len(se.buf))))
			for i := range se.n {
				nb[i] = se.at(i)
			}
			se.buf, se.beg = nb, 0
		} else {
			se.buf[se.beg] = p
			se.beg = (se.beg + 1) % len(se.buf)
			return
		}
	}
	se.buf[(se.beg+se.n)%len(se.buf)] = p
	se.n++
}

// search returns the index of the first sample at or after t.
func (se *series) search(t int64) int {
	return sort.Search(se.n, func(i int) bool { return se.at(i).t >= t })
}

// dropBefore removes samples before t. se.mu held.
func (se *series) dropBefore(t int64) {
	i := se.search(t)
	if i == 0 {
		return
	}
	se.beg = (se.beg + i) % max(len(se.buf), 1)
	se.n -= i
	if se.n == 0 {
		se.buf, se.beg = nil, 0
	}
}

// horizon is the oldest time still retained at now.
func (s *Store) horizon(now time.Time) int64 { return now.Add(-s.o.Retention).UnixNano() }

func (s *Store) lookup(k Key) *series {
	s.mu.RLock()
	se := s.series[k]
	s.mu.RUnlock()
	return se
}

// Append adds samples, oldest first, to the series of key. See
// AppendAll.
func (s *Store) Append(key Key, samples []Sample) error {
	return s.AppendAll([]Batch{{Key: key, Samples: samples}})
}

// AppendAll adds the samples of every batch, all or none: it returns an
// error wrapping one of this package's sentinels, and changes nothing,
// when any sample of any batch is refused (see the package doc). Samples
// that repeat stored ones exactly are skipped.
func (s *Store) AppendAll(batches []Batch) error {
	return s.AppendAllContext(context.Background(), batches)
}

// AppendAllContext is AppendAll with the context of the store write
// (write-through): a push that cannot be written fails with ErrNotStored
// and changes nothing.
func (s *Store) AppendAllContext(ctx context.Context, batches []Batch) error {
	if len(batches) == 0 {
		return fmt.Errorf("%w: no samples", ErrInvalid)
	}
	now := s.o.Clock.Now()
	future := now.Add(s.o.MaxSkew).UnixNano()
	horizon := s.horizon(now)
	s.appendMu.Lock()
	defer s.appendMu.Unlock()
	type todo struct {
		se    *series
		key   Key
		first int // index of the first sample that is new
	}
	plan := make([]todo, 0, len(batches))
	seen := make(map[Key]bool, len(batches))
	created := 0
	for _, b := range batches {
		if err := checkKey(b.Key); err != nil {
			return err
		}
		if seen[b.Key] {
			return fmt.Errorf("%w: series %s given twice", ErrInvalid, b.Key)
		}
		seen[b.Key] = true
		if len(b.Samples) == 0 {
			return fmt.Errorf("%w: series %s has no samples", ErrInvalid, b.Key)
		}
		if len(b.Samples) > s.o.MaxSamples {
			return fmt.Errorf("%w: %d samples for %s, at most %d", ErrTooManySamples, len(b.Samples), b.Key, s.o.MaxSamples)
		}
		var prev int64
		for i, sm := range b.Samples {
			if err := checkSample(b.Key, i, sm, future, horizon); err != nil {
				return err
			}
			t := sm.Time.UnixNano()
			if i > 0 && t <= prev {
				return fmt.Errorf("%w: %s sample %d at %s is not after the one before it", ErrOutOfOrder, b.Key, i, sm.Time.UTC().Format(time.RFC3339Nano))
			}
			prev = t
		}
		se := s.lookup(b.Key)
		first := 0
		if se != nil {
			var err error
			if first, err = se.repeats(b); err != nil {
				return err
			}
		} else {
			created++
		}
		plan = append(plan, todo{se: se, key: b.Key, first: first})
	}
	if created > 0 {
		s.mu.RLock()
		n := len(s.series)
		s.mu.RUnlock()
		if n+created > s.o.MaxSeries {
			return fmt.Errorf("%w: %d series held, %d new ones would pass the bound of %d", ErrTooManySeries, n, created, s.o.MaxSeries)
		}
	}
	// Everything checked: write through, then apply.
	if s.o.Store != nil && !s.o.Buffered {
		var ss []segSeries
		for i, td := range plan {
			b := batches[i]
			if td.first == len(b.Samples) {
				continue
			}
			pts := make([]point, 0, len(b.Samples)-td.first)
			for _, sm := range b.Samples[td.first:] {
				pts = append(pts, point{t: sm.Time.UnixNano(), v: sm.Value})
			}
			ss = append(ss, segSeries{key: td.key, pts: pts})
		}
		if len(ss) > 0 {
			if err := s.writeThrough(ctx, now, ss); err != nil {
				return err
			}
		}
	}
	for i, td := range plan {
		se := td.se
		if se == nil {
			se = &series{key: td.key}
			s.mu.Lock()
			s.series[td.key] = se
			s.mu.Unlock()
		}
		b := batches[i]
		if td.first == len(b.Samples) {
			continue
		}
		se.mu.Lock()
		se.dropBefore(horizon)
		for _, sm := range b.Samples[td.first:] {
			se.push(point{t: sm.Time.UnixNano(), v: sm.Value}, s.o.MaxSamples)
		}
		se.mu.Unlock()
	}
	return nil
}

// repeats returns the index of the first sample of b after the series'
// newest; the samples before it must repeat stored ones exactly. Called
// under Store.appendMu (the contents cannot change).
func (se *series) repeats(b Batch) (int, error) {
	se.mu.RLock()
	defer se.mu.RUnlock()
	last, ok := se.newest()
	if !ok {
		return 0, nil
	}
	for i, sm := range b.Samples {
		t := sm.Time.UnixNano()
		if t > last {
			return i, nil
		}
		j := se.search(t)
		if j == se.n || se.at(j).t != t || se.at(j).v != sm.Value {
			return 0, fmt.Errorf("%w: %s sample %d at %s is not after the newest stored (%s)", ErrOutOfOrder, b.Key, i,
				sm.Time.UTC().Format(time.RFC3339Nano), time.Unix(0, last).UTC().Format(time.RFC3339Nano))
		}
	}
	return len(b.Samples), nil
}

func checkKey(k Key) error {
	if _, ok := ParseKind(string(k.Kind)); !ok {
		return fmt.Errorf("%w: unknown source kind %q (System, MemoryLease or Cache)", ErrInvalid, k.Kind)
	}
	if err := CheckSource(k.Source); err != nil {
		return err
	}
	if _, ok := Lookup(k.Kind, k.Metric); !ok {
		return fmt.Errorf("%w: %q is not a metric of %s (%s)", ErrUnknownMetric, k.Metric, k.Kind, metricNames(k.Kind))
	}
	return nil
}

// CheckSource reports whether id can name a source: 1 to MaxSourceLen
// bytes of letters, digits and . _ : -.
func CheckSource(id string) error {
	if id == "" || len(id) > MaxSourceLen {
		return fmt.Errorf("%w: a source ID has 1 to %d bytes", ErrInvalid, MaxSourceLen)
	}
	for _, c := range []byte(id) {
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == ':' || c == '-'
		if !ok {
			return fmt.Errorf("%w: source ID %q has a character other than letters, digits and . _ : -", ErrInvalid, id)
		}
	}
	return nil
}

func checkSample(k Key, i int, sm Sample, future, horizon int64) error {
	switch {
	case math.IsNaN(sm.Value) || math.IsInf(sm.Value, 0):
		return fmt.Errorf("%w: %s sample %d: value %v is not a finite number", ErrInvalid, k, i, sm.Value)
	case sm.Value < 0:
		return fmt.Errorf("%w: %s sample %d: value %v is negative", ErrInvalid, k, i, sm.Value)
	case sm.Time.IsZero():
		return fmt.Errorf("%w: %s sample %d has no time", ErrInvalid, k, i)
	}
	t := sm.Time.UnixNano()
	switch {
	case t > future:
		return fmt.Errorf("%w: %s sample %d at %s is ahead of the service's clock", ErrFuture, k, i, sm.Time.UTC().Format(time.RFC3339Nano))
	case t < horizon:
		return fmt.Errorf("%w: %s sample %d at %s is older than the retention", ErrTooOld, k, i, sm.Time.UTC().Format(time.RFC3339Nano))
	}
	return nil
}

// Window returns the samples of key at or after since that are within
// the retention, oldest first (nil for an unknown series).
func (s *Store) Window(key Key, since time.Time) []Sample {
	return s.AppendWindow(nil, key, since)
}

// AppendWindow appends the samples Window returns to dst and returns the
// extended slice: a caller reading many series reuses one buffer.
func (s *Store) AppendWindow(dst []Sample, key Key, since time.Time) []Sample {
	se := s.lookup(key)
	if se == nil {
		return dst
	}
	from := max(since.UnixNano(), s.horizon(s.o.Clock.Now()))
	if since.IsZero() {
		from = s.horizon(s.o.Clock.Now())
	}
	se.mu.RLock()
	defer se.mu.RUnlock()
	i := se.search(from)
	dst = slices.Grow(dst, se.n-i)
	// The ring's samples from i on are at most two runs of buf.
	start := (se.beg + i) % max(len(se.buf), 1)
	n := se.n - i
	for _, run := range [2][]point{se.buf[start:min(len(se.buf), start+n)], se.buf[:max(0, start+n-len(se.buf))]} {
		for _, p := range run {
			dst = append(dst, Sample{Time: time.Unix(0, p.t).UTC(), Value: p.v})
		}
	}
	return dst
}

// Latest returns the newest sample of key, if it is within the retention.
func (s *Store) Latest(key Key) (Sample, bool) {
	se := s.lookup(key)
	if se == nil {
		return Sample{}, false
	}
	horizon := s.horizon(s.o.Clock.Now())
	se.mu.RLock()
	defer se.mu.RUnlock()
	if se.n == 0 {
		return Sample{}, false
	}
	p := se.at(se.n - 1)
	if p.t < horizon {
		return Sample{}, false
	}
	return Sample{Time: time.Unix(0, p.t).UTC(), Value: p.v}, true
}

// Series returns the keys of the series f selects that hold samples
// within the retention, ordered by kind, source and metric.
func (s *Store) Series(f Filter) []Key {
	rs := s.LatestAll(f)
	out := make([]Key, len(rs))
	for i, r := range rs {
		out[i] = r.Key
	}
	return out
}

// LatestAll returns the newest sample of every series f selects that has
// one within the retention, ordered by kind, source and metric.
func (s *Store) LatestAll(f Filter) []Reading {
	horizon := s.horizon(s.o.Clock.Now())
	s.mu.RLock()
	list := make([]*series, 0, len(s.series))
	for k, se := range s.series {
		if f.match(k) {
			list = append(list, se)
		}
	}
	s.mu.RUnlock()
	out := make([]Reading, 0, len(list))
	for _, se := range list {
		se.mu.RLock()
		if se.n > 0 {
			if p := se.at(se.n - 1); p.t >= horizon {
				out = append(out, Reading{Key: se.key, Sample: Sample{Time: time.Unix(0, p.t).UTC(), Value: p.v}})
			}
		}
		se.mu.RUnlock()
	}
	slices.SortFunc(out, func(a, b Reading) int { return a.Key.compare(b.Key) })
	return out
}

// Len returns the number of series held (expired ones included until
// the next Prune).
func (s *Store) Len() int {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return len(s.series)
}

// Prune drops the samples older than the retention and the series left
// empty. Checkpoint prunes too.
func (s *Store) Prune() {
	s.ckMu.Lock()
	defer s.ckMu.Unlock()
	s.prune(s.o.Clock.Now())
}

// prune is Prune. s.ckMu held.
func (s *Store) prune(now time.Time) {
	horizon := s.horizon(now)
	s.appendMu.Lock()
	defer s.appendMu.Unlock()
	s.mu.Lock()
	defer s.mu.Unlock()
	for k, se := range s.series {
		se.mu.Lock()
		se.dropBefore(horizon)
		empty := se.n == 0
		se.mu.Unlock()
		if empty {
			delete(s.series, k)
		}
	}
}

// Run checkpoints (and prunes) every interval of the store's clock until
// ctx ends. The caller checkpoints once more at shutdown.
func (s *Store) Run(ctx context.Context, every time.Duration) {
	t := clock.NewTicker(s.o.Clock, every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C():
			if err := s.Checkpoint(ctx); err != nil && !errors.Is(err, context.Canceled) {
				s.o.Logger.Warn("telemetry checkpoint failed; the samples stay in memory for the next one", "err", err)
			}
		}
	}
}
