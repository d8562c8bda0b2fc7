package telemetry

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"slices"
	"strconv"
	"time"

	"rackpool/internal/store"
)

// kindSegment is the store object kind of checkpoint segments; an
// object's ID is its sequence number, zero-padded, so the store's ID order
// is the order they were written in.
const kindSegment = "telemetry-segment"

const (
	segMagic   = "RPTS"
	segVersion = 1
)

// segmentInfo is what the store needs to know of a written segment to
// delete it once every sample in it has expired.
type segmentInfo struct {
	id     string
	newest int64 // Unix ns of its newest sample
}

// written is a segment a push wrote through: what the next checkpoint
// merges.
type written struct {
	info segmentInfo
	ss   []segSeries
}

// nextSeq returns a segment sequence number above every one written,
// at least now's Unix ns (so numbers stay ordered across restarts).
func (s *Store) nextSeq(now time.Time) int64 {
	for {
		last := s.lastSeg.Load()
		n := max(last+1, now.UnixNano())
		if s.lastSeg.CompareAndSwap(last, n) {
			return n
		}
	}
}

// writeThrough stores the new samples of one push as a segment of their
// own (an intent plan: durable with PostgreSQL, surviving a crash of the
// process with SQLite) before the push is acknowledged. Called under
// appendMu, so segments are numbered in the order of the pushes.
func (s *Store) writeThrough(ctx context.Context, now time.Time, ss []segSeries) error {
	w := written{info: segmentInfo{id: fmt.Sprintf("%020d", s.nextSeq(now))}, ss: ss}
	for _, sg := range ss {
		w.info.newest = max(w.info.newest, sg.pts[len(sg.pts)-1].t)
	}
	plan := store.Plan{Intent: true, Objects: []store.ObjectChange{{Kind: kindSegment, Object: store.Object{ID: w.info.id, Data: encodeSegment(ss)}}}}
	if err := s.o.Store.Apply(ctx, plan); err != nil {
		return fmt.Errorf("%w: %w", ErrNotStored, err)
	}
	s.pendMu.Lock()
	s.pending = append(s.pending, w)
	s.pendMu.Unlock()
	return nil
}

// merge joins segments written through, oldest first, into one: each
// series' samples in the order they were pushed.
func merge(ws []written) []segSeries {
	at := map[Key]int{}
	var out []segSeries
	for _, w := range ws {
		for _, sg := range w.ss {
			i, ok := at[sg.key]
			if !ok {
				i = len(out)
				at[sg.key] = i
				out = append(out, segSeries{key: sg.key})
			}
			out[i].pts = append(out[i].pts, sg.pts...)
		}
	}
	slices.SortFunc(out, func(a, b segSeries) int { return a.key.compare(b.key) })
	return out
}

// segSeries is one series' samples in a segment.
type segSeries struct {
	key Key
	pts []point
}

// encodeSegment writes the segment format of the package doc.
func encodeSegment(ss []segSeries) []byte {
	n := len(segMagic) + 1 + binary.MaxVarintLen64
	for _, s := range ss {
		n += 4*binary.MaxVarintLen64 + len(s.key.Kind) + len(s.key.Source) + len(s.key.Metric) + len(s.pts)*(binary.MaxVarintLen64+8)
	}
	b := make([]byte, 0, n)
	b = append(b, segMagic...)
	b = append(b, segVersion)
	b = binary.AppendUvarint(b, uint64(len(ss)))
	for _, s := range ss {
		for _, f := range []string{string(s.key.Kind), s.key.Source, s.key.Metric} {
			b = binary.AppendUvarint(b, uint64(len(f)))
			b = append(b, f...)
		}
		b = binary.AppendUvarint(b, uint64(len(s.pts)))
		for i, p := range s.pts {
			if i == 0 {
				b = binary.AppendVarint(b, p.t)
			} else {
				b = binary.AppendUvarint(b, uint64(p.t-s.pts[i-1].t))
			}
			b = binary.BigEndian.AppendUint64(b, math.Float64bits(p.v))
		}
	}
	return b
}

// segReader reads a segment, failing on the first malformed field.
type segReader struct {
	b   []byte
	err error
}

func (r *segReader) fail(what string) {
	if r.err == nil {
		r.err = fmt.Errorf("%w: %s", ErrCorrupt, what)
	}
}

func (r *segReader) uvarint(what string) uint64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.fail(what)
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *segReader) varint(what string) int64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Varint(r.b)
	if n <= 0 {
		r.fail(what)
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *segReader) str(what string) string {
	n := r.uvarint(what)
	if r.err != nil {
		return ""
	}
	if n > uint64(len(r.b)) || n > 256 {
		r.fail(what)
		return ""
	}
	s := string(r.b[:n])
	r.b = r.b[n:]
	return s
}

func (r *segReader) float(what string) float64 {
	if r.err != nil {
		return 0
	}
	if len(r.b) < 8 {
		r.fail(what)
		return 0
	}
	v := math.Float64frombits(binary.BigEndian.Uint64(r.b))
	r.b = r.b[8:]
	return v
}

// decodeSegment reads a segment. Every sample it returns has a valid key,
// a finite non-negative value and a time after the one before it in its
// series; anything else is ErrCorrupt. It never allocates by a count read
// from the data beyond what the data can hold.
func decodeSegment(data []byte) ([]segSeries, error) {
	if len(data) < len(segMagic)+1 || string(data[:len(segMagic)]) != segMagic {
		return nil, fmt.Errorf("%w: no segment header", ErrCorrupt)
	}
	if data[len(segMagic)] != segVersion {
		return nil, fmt.Errorf("%w: segment version %d", ErrCorrupt, data[len(segMagic)])
	}
	r := &segReader{b: data[len(segMagic)+1:]}
	nseries := r.uvarint("series count")
	// A series takes at least 4+9 bytes (three lengths, a count, a time
	// and a value).
	if nseries > uint64(len(r.b))/13 {
		r.fail("series count")
	}
	var out []segSeries
	for i := uint64(0); i < nseries && r.err == nil; i++ {
		k := Key{Kind: Kind(r.str("kind")), Source: r.str("source"), Metric: r.str("metric")}
		if r.err == nil {
			if err := checkKey(k); err != nil {
				r.fail(err.Error())
			}
		}
		n := r.uvarint("sample count")
		if r.err == nil && (n == 0 || n > uint64(len(r.b))/9) {
			r.fail("sample count")
		}
		if r.err != nil {
			break
		}
		s := segSeries{key: k, pts: make([]point, 0, n)}
		var t int64
		for j := uint64(0); j < n && r.err == nil; j++ {
			if j == 0 {
				t = r.varint("time")
			} else {
				d := r.uvarint("time delta")
				if d == 0 || d > math.MaxInt64 || t > math.MaxInt64-int64(d) {
					r.fail("time delta")
				}
				t += int64(d)
			}
			v := r.float("value")
			if r.err == nil && (math.IsNaN(v) || math.IsInf(v, 0) || v < 0) {
				r.fail("value")
			}
			s.pts = append(s.pts, point{t: t, v: v})
		}
		out = append(out, s)
	}
	if r.err == nil && len(r.b) != 0 {
		r.fail("trailing bytes")
	}
	if r.err != nil {
		return nil, r.err
	}
	return out, nil
}

// load reads the stored segments, oldest first, keeping what is within
// the retention and the bounds. A segment that does not decode is skipped
// (and deleted by the next checkpoint).
func (s *Store) load(ctx context.Context) error {
	objs, err := s.o.Store.Objects(ctx, kindSegment)
	if err != nil {
		return fmt.Errorf("telemetry: load segments: %w", err)
	}
	horizon := s.horizon(s.o.Clock.Now())
	dropped := 0
	for _, ob := range objs {
		if seq, err := strconv.ParseInt(ob.ID, 10, 64); err == nil && seq > s.lastSeg.Load() {
			s.lastSeg.Store(seq)
		}
		ss, err := decodeSegment(ob.Data)
		if err != nil {
			s.o.Logger.Warn("telemetry segment skipped", "segment", ob.ID, "err", err)
			s.segs = append(s.segs, segmentInfo{id: ob.ID})
			continue
		}
		info := segmentInfo{id: ob.ID}
		for _, sg := range ss {
			info.newest = max(info.newest, sg.pts[len(sg.pts)-1].t)
			se := s.series[sg.key]
			if se == nil {
				if len(s.series) >= s.o.MaxSeries {
					dropped++
					continue
				}
				se = &series{key: sg.key}
				s.series[sg.key] = se
			}
			last, ok := se.newest()
			for _, p := range sg.pts {
				// Lenient: a sample written twice (a checkpoint retried
				// after an ambiguous failure) is skipped.
				if p.t < horizon || (ok && p.t <= last) {
					continue
				}
				se.push(p, s.o.MaxSamples)
				last, ok = p.t, true
			}
		}
		s.segs = append(s.segs, info)
	}
	for k, se := range s.series {
		if se.n == 0 {
			delete(s.series, k)
			continue
		}
		se.persisted, _ = se.newest()
	}
	if dropped > 0 {
		s.o.Logger.Warn("telemetry series beyond the bound not restored", "series", dropped, "max_series", s.o.MaxSeries)
	}
	return nil
}

// Reload drops the samples in memory and loads the store's checkpoints
// again: what a replica does when it becomes the leader of several
// (docs/ha.md), since the previous leader checkpointed meanwhile.
func (s *Store) Reload(ctx context.Context) error {
	if s.o.Store == nil {
		return nil
	}
	s.ckMu.Lock()
	defer s.ckMu.Unlock()
	s.appendMu.Lock()
	defer s.appendMu.Unlock()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.series, s.segs = map[Key]*series{}, nil
	s.lastSeg.Store(0)
	s.pendMu.Lock()
	s.pending = nil
	s.pendMu.Unlock()
	return s.load(ctx)
}

// Checkpoint prunes expired samples and deletes the segments that hold
// only expired samples. Written through (the default), it merges the
// segments the pushes since the previous checkpoint wrote into one, kept
// at the first one's place in the order; buffered, it writes every sample
// appended since the previous checkpoint as one segment. One store plan,
// committed as an intent (no fsync of its own; see the package doc).
// Without a store it only prunes. On failure the samples (or the segments
// to merge) are kept for the next one.
func (s *Store) Checkpoint(ctx context.Context) error {
	s.ckMu.Lock()
	defer s.ckMu.Unlock()
	now := s.o.Clock.Now()
	s.prune(now)
	if s.o.Store == nil {
		return nil
	}
	if !s.o.Buffered {
		return s.compact(ctx, now)
	}
	s.mu.RLock()
	list := make([]*series, 0, len(s.series))
	for _, se := range s.series {
		list = append(list, se)
	}
	s.mu.RUnlock()
	slices.SortFunc(list, func(a, b *series) int { return a.key.compare(b.key) })
	var (
		ss     []segSeries
		marks  []int64
		newest int64
	)
	for _, se := range list {
		se.mu.RLock()
		i := se.search(se.persisted + 1)
		if i < se.n {
			pts := make([]point, 0, se.n-i)
			for ; i < se.n; i++ {
				pts = append(pts, se.at(i))
			}
			ss = append(ss, segSeries{key: se.key, pts: pts})
			marks = append(marks, pts[len(pts)-1].t)
			newest = max(newest, pts[len(pts)-1].t)
		}
		se.mu.RUnlock()
	}
	horizon := s.horizon(now)
	var plan store.Plan
	keep := s.segs[:0:0]
	for _, sg := range s.segs {
		if sg.newest < horizon {
			plan.Objects = append(plan.Objects, store.ObjectChange{Kind: kindSegment, Object: store.Object{ID: sg.id}, Delete: true})
		} else {
			keep = append(keep, sg)
		}
	}
	var wrote segmentInfo
	if len(ss) > 0 {
		wrote = segmentInfo{id: fmt.Sprintf("%020d", s.nextSeq(now)), newest: newest}
		plan.Objects = append(plan.Objects, store.ObjectChange{Kind: kindSegment, Object: store.Object{ID: wrote.id, Data: encodeSegment(ss)}})
	}
	if len(plan.Objects) == 0 {
		return nil
	}
	plan.Intent = true
	if err := s.o.Store.Apply(ctx, plan); err != nil {
		return fmt.Errorf("telemetry: checkpoint: %w", err)
	}
	for i, sg := range ss {
		// The series may have been pruned meanwhile (no: prune runs under
		// ckMu); mark what was written.
		if se := s.lookup(sg.key); se != nil {
			se.persisted = marks[i]
		}
	}
	if wrote.id != "" {
		keep = append(keep, wrote)
	}
	s.segs = keep
	return nil
}

// expired splits the segments into those to delete (every sample older
// than horizon) and those to keep.
func (s *Store) expired(horizon int64) (del []store.ObjectChange, keep []segmentInfo) {
	for _, sg := range s.segs {
		if sg.newest < horizon {
			del = append(del, store.ObjectChange{Kind: kindSegment, Object: store.Object{ID: sg.id}, Delete: true})
		} else {
			keep = append(keep, sg)
		}
	}
	return del, keep
}

// compact is Checkpoint written through: the segments pushes wrote since
// the previous one become one, under the first one's ID (so that loading
// in ID order still meets every series' samples oldest first), and
// expired segments go. Called under ckMu.
func (s *Store) compact(ctx context.Context, now time.Time) error {
	s.pendMu.Lock()
	pend := s.pending
	s.pending = nil
	s.pendMu.Unlock()
	plan := store.Plan{Intent: true}
	var keep []segmentInfo
	plan.Objects, keep = s.expired(s.horizon(now))
	var merged segmentInfo
	if len(pend) > 0 {
		merged = pend[0].info
		for _, w := range pend[1:] {
			merged.newest = max(merged.newest, w.info.newest)
			plan.Objects = append(plan.Objects, store.ObjectChange{Kind: kindSegment, Object: store.Object{ID: w.info.id}, Delete: true})
		}
		if len(pend) > 1 {
			plan.Objects = append(plan.Objects, store.ObjectChange{Kind: kindSegment, Object: store.Object{ID: merged.id, Data: encodeSegment(merge(pend))}})
		}
	}
	if len(plan.Objects) > 0 {
		if err := s.o.Store.Apply(ctx, plan); err != nil {
			s.pendMu.Lock()
			s.pending = append(pend, s.pending...)
			s.pendMu.Unlock()
			return fmt.Errorf("telemetry: checkpoint: %w", err)
		}
	}
	if merged.id != "" {
		keep = append(keep, merged)
	}
	s.segs = keep
	return nil
}
