package telemetry

import (
	"context"
	"errors"
	"fmt"
	"math"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"rackpool/internal/clock"
	"rackpool/internal/store/sqlite"
)

var t0 = time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)

func newTestStore(t testing.TB, o Options) (*Store, *clock.Manual) {
	t.Helper()
	clk := clock.NewManual(t0)
	if o.Clock == nil {
		o.Clock = clk
	}
	s, err := Open(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	return s, clk
}

func sysKey(src, metric string) Key { return Key{Kind: System, Source: src, Metric: metric} }

// samples returns n samples every step ending at end, values from v.
func samples(end time.Time, n int, step time.Duration, v float64) []Sample {
	out := make([]Sample, n)
	for i := range n {
		out[i] = Sample{Time: end.Add(-time.Duration(n-1-i) * step), Value: v + float64(i)}
	}
	return out
}

func TestAppendWindowLatest(t *testing.T) {
	s, clk := newTestStore(t, Options{})
	k := sysKey("sys-1", MemoryUsed)
	if _, ok := s.Latest(k); ok {
		t.Fatal("Latest of an unknown series")
	}
	in := samples(t0, 5, 10*time.Second, 100)
	if err := s.Append(k, in); err != nil {
		t.Fatal(err)
	}
	got := s.Window(k, time.Time{})
	if !reflect.DeepEqual(got, in) {
		t.Fatalf("Window = %v, want %v", got, in)
	}
	if got := s.Window(k, t0.Add(-15*time.Second)); !reflect.DeepEqual(got, in[3:]) {
		t.Errorf("Window since -15s = %v, want %v", got, in[3:])
	}
	if l, ok := s.Latest(k); !ok || l != in[4] {
		t.Errorf("Latest = %v %v", l, ok)
	}
	// AppendWindow reuses the caller's buffer.
	buf := make([]Sample, 0, 16)
	buf = s.AppendWindow(buf[:0], k, time.Time{})
	if len(buf) != 5 || cap(buf) != 16 {
		t.Errorf("AppendWindow: len %d cap %d", len(buf), cap(buf))
	}
	clk.Advance(10 * time.Second)
	if err := s.AppendAll([]Batch{
		{Key: k, Samples: []Sample{{Time: clk.Now(), Value: 7}}},
		{Key: sysKey("sys-1", IORead), Samples: []Sample{{Time: clk.Now(), Value: 0}}},
		{Key: Key{Kind: Cache, Source: "lease-1", Metric: CacheRemoteLive}, Samples: []Sample{{Time: clk.Now(), Value: 1 << 20}}},
	}); err != nil {
		t.Fatal(err)
	}
	if got, want := s.Series(Filter{Kind: System}), []Key{sysKey("sys-1", IORead), k}; !reflect.DeepEqual(got, want) {
		t.Errorf("Series(System) = %v, want %v", got, want)
	}
	all := s.LatestAll(Filter{})
	if len(all) != 3 || all[0].Key.Kind != Cache || all[0].Value != 1<<20 || all[2].Value != 7 {
		t.Errorf("LatestAll = %v", all)
	}
	if got := s.Series(Filter{Source: "lease-1"}); len(got) != 1 {
		t.Errorf("Series(Source) = %v", got)
	}
}

func TestRetentionByAge(t *testing.T) {
	s, clk := newTestStore(t, Options{Retention: time.Hour})
	k := sysKey("h", MemoryUsed)
	if err := s.Append(k, samples(t0, 60, time.Minute, 1)); err != nil { // t0-59m .. t0
		t.Fatal(err)
	}
	clk.Advance(30 * time.Minute)
	w := s.Window(k, time.Time{})
	if len(w) != 31 || !w[0].Time.Equal(t0.Add(-30*time.Minute)) { // an hour old is still kept
		t.Fatalf("after 30 min: %d samples from %v", len(w), w[0].Time)
	}
	// An explicit since before the retention is cut at the retention.
	if got := s.Window(k, t0.Add(-10*time.Hour)); len(got) != 31 {
		t.Errorf("Window since long ago: %d samples", len(got))
	}
	clk.Advance(31 * time.Minute)
	if w := s.Window(k, time.Time{}); len(w) != 0 {
		t.Errorf("after the retention: %v", w)
	}
	if _, ok := s.Latest(k); ok {
		t.Error("Latest of an expired series")
	}
	if n := len(s.Series(Filter{})); n != 0 {
		t.Errorf("%d series listed after expiry", n)
	}
	if s.Len() != 1 {
		t.Fatalf("Len before Prune = %d", s.Len())
	}
	s.Prune()
	if s.Len() != 0 {
		t.Errorf("Len after Prune = %d", s.Len())
	}
}

func TestRetentionByCount(t *testing.T) {
	s, clk := newTestStore(t, Options{MaxSamples: 4})
	k := sysKey("h", MemoryUsed)
	for i := range 10 {
		clk.Advance(time.Second)
		if err := s.Append(k, []Sample{{Time: clk.Now(), Value: float64(i)}}); err != nil {
			t.Fatal(err)
		}
	}
	w := s.Window(k, time.Time{})
	if len(w) != 4 || w[0].Value != 6 || w[3].Value != 9 {
		t.Fatalf("Window = %v, want the newest 4", w)
	}
	// A push larger than a series keeps is refused.
	clk.Advance(time.Minute)
	if err := s.Append(k, samples(clk.Now(), 5, time.Second, 0)); !errors.Is(err, ErrTooManySamples) {
		t.Errorf("5 samples into a ring of 4: %v", err)
	}
	// Dropping wrapped samples by age keeps order right.
	if err := s.Append(k, samples(clk.Now(), 3, time.Second, 100)); err != nil {
		t.Fatal(err)
	}
	if w := s.Window(k, time.Time{}); len(w) != 4 || w[0].Value != 9 || w[1].Value != 100 || w[3].Value != 102 {
		t.Errorf("after wrap: %v", w)
	}
}

func TestMaxSeries(t *testing.T) {
	s, _ := newTestStore(t, Options{MaxSeries: 2})
	now := []Sample{{Time: t0, Value: 1}}
	if err := s.Append(sysKey("a", MemoryUsed), now); err != nil {
		t.Fatal(err)
	}
	// Two new series in one push: refused whole, the existing one
	// unchanged by it.
	later := []Sample{{Time: t0.Add(time.Second), Value: 2}}
	err := s.AppendAll([]Batch{{Key: sysKey("a", MemoryUsed), Samples: later}, {Key: sysKey("b", MemoryUsed), Samples: now},
		{Key: sysKey("c", MemoryUsed), Samples: now}})
	if !errors.Is(err, ErrTooManySeries) {
		t.Fatalf("push beyond the bound: %v", err)
	}
	if s.Len() != 1 || len(s.Window(sysKey("a", MemoryUsed), time.Time{})) != 1 {
		t.Errorf("a refused push changed the store: %d series, %v", s.Len(), s.Window(sysKey("a", MemoryUsed), time.Time{}))
	}
	if err := s.Append(sysKey("b", MemoryUsed), now); err != nil {
		t.Fatal(err)
	}
	if err := s.Append(sysKey("c", MemoryUsed), now); !errors.Is(err, ErrTooManySeries) || !strings.Contains(err.Error(), "bound of 2") {
		t.Errorf("third series: %v", err)
	}
	// Existing series still take samples.
	if err := s.Append(sysKey("b", MemoryUsed), later); err != nil {
		t.Errorf("existing series at the bound: %v", err)
	}
}

// dump is everything the store holds, for "changed nothing" checks.
func dump(s *Store) map[Key][]Sample {
	out := map[Key][]Sample{}
	s.mu.RLock()
	defer s.mu.RUnlock()
	for k, se := range s.series {
		se.mu.RLock()
		for i := range se.n {
			p := se.at(i)
			out[k] = append(out[k], Sample{Time: time.Unix(0, p.t).UTC(), Value: p.v})
		}
		se.mu.RUnlock()
	}
	return out
}

func TestValidation(t *testing.T) {
	s, _ := newTestStore(t, Options{Retention: time.Hour, MaxSkew: 5 * time.Second})
	k := sysKey("sys-1", MemoryUsed)
	if err := s.Append(k, samples(t0.Add(-time.Minute), 3, 10*time.Second, 10)); err != nil { // -80s, -70s, -60s
		t.Fatal(err)
	}
	good := Sample{Time: t0, Value: 1}
	other := sysKey("sys-2", MemoryUsed)
	tests := []struct {
		name    string
		batches []Batch
		want    error
	}{
		{"NaN", []Batch{{k, []Sample{{t0, math.NaN()}}}}, ErrInvalid},
		{"+Inf", []Batch{{k, []Sample{{t0, math.Inf(1)}}}}, ErrInvalid},
		{"negative", []Batch{{k, []Sample{good, {t0.Add(time.Second), -1}}}}, ErrInvalid},
		{"no time", []Batch{{k, []Sample{{time.Time{}, 1}}}}, ErrInvalid},
		{"future", []Batch{{k, []Sample{{t0.Add(6 * time.Second), 1}}}}, ErrFuture},
		{"too old", []Batch{{other, []Sample{{t0.Add(-61 * time.Minute), 1}}}}, ErrTooOld},
		{"duplicate in push", []Batch{{k, []Sample{good, good}}}, ErrOutOfOrder},
		{"backwards in push", []Batch{{k, []Sample{good, {t0.Add(-time.Second), 2}}}}, ErrOutOfOrder},
		{"before stored", []Batch{{k, []Sample{{t0.Add(-65 * time.Second), 1}}}}, ErrOutOfOrder},
		{"stored time, other value", []Batch{{k, []Sample{{t0.Add(-time.Minute), 99}, good}}}, ErrOutOfOrder},
		{"unknown metric", []Batch{{sysKey("sys-1", "cpu_magic"), []Sample{good}}}, ErrUnknownMetric},
		{"metric of another kind", []Batch{{sysKey("sys-1", LeaseBytesInUse), []Sample{good}}}, ErrUnknownMetric},
		{"unknown kind", []Batch{{Key{Kind: "Rack", Source: "r", Metric: MemoryUsed}, []Sample{good}}}, ErrInvalid},
		{"empty source", []Batch{{sysKey("", MemoryUsed), []Sample{good}}}, ErrInvalid},
		{"slash in source", []Batch{{sysKey("a/b", MemoryUsed), []Sample{good}}}, ErrInvalid},
		{"no samples", []Batch{{other, nil}}, ErrInvalid},
		{"no batches", nil, ErrInvalid},
		{"series twice", []Batch{{other, []Sample{good}}, {other, []Sample{{t0.Add(time.Second), 1}}}}, ErrInvalid},
		// One bad batch spoils the good ones with it.
		{"good then bad", []Batch{{other, []Sample{good}}, {k, []Sample{{t0, -5}}}}, ErrInvalid},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			before := dump(s)
			err := s.AppendAll(tc.batches)
			if !errors.Is(err, tc.want) {
				t.Fatalf("err = %v, want %v", err, tc.want)
			}
			if after := dump(s); !reflect.DeepEqual(before, after) {
				t.Errorf("a refused push changed the store:\nbefore %v\nafter  %v", before, after)
			}
		})
	}
}

// TestRepeatedPush: a push repeated after a lost answer stores nothing
// twice; a push overlapping stored samples stores only the new ones.
func TestRepeatedPush(t *testing.T) {
	s, _ := newTestStore(t, Options{})
	k := sysKey("sys-1", MemoryUsed)
	first := samples(t0, 3, time.Second, 1)
	for range 2 {
		if err := s.Append(k, first); err != nil {
			t.Fatal(err)
		}
	}
	if w := s.Window(k, time.Time{}); !reflect.DeepEqual(w, first) {
		t.Fatalf("after a repeat: %v", w)
	}
	next := append(first[1:], Sample{Time: t0.Add(time.Second), Value: 9})
	if err := s.Append(k, next); err != nil {
		t.Fatal(err)
	}
	if w := s.Window(k, time.Time{}); len(w) != 4 || w[3].Value != 9 {
		t.Errorf("after an overlapping push: %v", w)
	}
}

func TestOptionsValidate(t *testing.T) {
	for _, o := range []Options{{Retention: -1}, {Retention: time.Millisecond}, {MaxSamples: -1}, {MaxSeries: -1}, {MaxSkew: -1}} {
		if _, err := Open(context.Background(), o); err == nil {
			t.Errorf("Open(%+v) accepted", o)
		}
	}
}

func TestConcurrent(t *testing.T) {
	s, clk := newTestStore(t, Options{MaxSamples: 64})
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Add(2)
		go func() {
			defer wg.Done()
			k := sysKey(fmt.Sprintf("sys-%d", w), MemoryUsed)
			for i := range 200 {
				if err := s.Append(k, []Sample{{Time: t0.Add(time.Duration(i) * time.Millisecond), Value: float64(i)}}); err != nil {
					t.Error(err)
					return
				}
			}
		}()
		go func() {
			defer wg.Done()
			var buf []Sample
			for range 200 {
				buf = s.AppendWindow(buf[:0], sysKey(fmt.Sprintf("sys-%d", w), MemoryUsed), time.Time{})
				for i := 1; i < len(buf); i++ {
					if !buf[i].Time.After(buf[i-1].Time) {
						t.Error("window out of order")
						return
					}
				}
				s.LatestAll(Filter{})
			}
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for range 20 {
			if err := s.Checkpoint(context.Background()); err != nil {
				t.Error(err)
			}
		}
	}()
	wg.Wait()
	_ = clk
	for w := range 4 {
		if w := s.Window(sysKey(fmt.Sprintf("sys-%d", w), MemoryUsed), time.Time{}); len(w) != 64 || w[63].Value != 199 {
			t.Errorf("%d samples, want the newest 64", len(w))
		}
	}
}

// TestCheckpointRestore: buffered, samples survive a restart through the
// SQLite store up to the last checkpoint; expired segments are deleted; a
// checkpoint that failed is retried by the next.
func TestCheckpointRestore(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	st, err := sqlite.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	clk := clock.NewManual(t0)
	s, err := Open(ctx, Options{Store: st, Clock: clk, Retention: time.Hour, Buffered: true})
	if err != nil {
		t.Fatal(err)
	}
	mem := sysKey("sys-1", MemoryUsed)
	lease := Key{Kind: MemoryLease, Source: "lease-1", Metric: LeaseBytesInUse}
	if err := s.AppendAll([]Batch{{mem, samples(t0, 3, 10*time.Second, 1)}, {lease, []Sample{{t0, 4096}}}}); err != nil {
		t.Fatal(err)
	}
	if err := s.Checkpoint(ctx); err != nil {
		t.Fatal(err)
	}
	// A second checkpoint with nothing new writes nothing.
	if err := s.Checkpoint(ctx); err != nil {
		t.Fatal(err)
	}
	if objs, _ := st.Objects(ctx, kindSegment); len(objs) != 1 {
		t.Fatalf("%d segments after two checkpoints, want 1", len(objs))
	}
	clk.Advance(40 * time.Minute)
	later := []Sample{{clk.Now(), 50}}
	if err := s.Append(mem, later); err != nil {
		t.Fatal(err)
	}
	if err := s.Checkpoint(ctx); err != nil {
		t.Fatal(err)
	}
	// Not checkpointed: lost on a restart (the bounded loss).
	clk.Advance(time.Second)
	if err := s.Append(mem, []Sample{{clk.Now(), 60}}); err != nil {
		t.Fatal(err)
	}
	want := dump(s)
	want[mem] = want[mem][:len(want[mem])-1]

	// Restart: a new process on the same directory.
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	st, err = sqlite.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	s, err = Open(ctx, Options{Store: st, Clock: clk, Retention: time.Hour, Buffered: true})
	if err != nil {
		t.Fatal(err)
	}
	if got := dump(s); !reflect.DeepEqual(got, want) {
		t.Fatalf("restored %v\nwant     %v", got, want)
	}
	// Appends go on after the restored samples; a checkpoint writes only
	// them.
	clk.Advance(time.Second)
	if err := s.Append(mem, []Sample{{clk.Now(), 70}}); err != nil {
		t.Fatal(err)
	}
	if err := s.Checkpoint(ctx); err != nil {
		t.Fatal(err)
	}
	objs, _ := st.Objects(ctx, kindSegment)
	if len(objs) != 3 {
		t.Fatalf("%d segments, want 3", len(objs))
	}
	last, err := decodeSegment(objs[2].Data)
	if err != nil || len(last) != 1 || len(last[0].pts) != 1 || last[0].pts[0].v != 70 {
		t.Errorf("last segment = %v, %v", last, err)
	}
	// Past the retention of the first segment's samples: it is deleted,
	// the series it alone held is gone.
	clk.Advance(25 * time.Minute)
	if err := s.Checkpoint(ctx); err != nil {
		t.Fatal(err)
	}
	objs, _ = st.Objects(ctx, kindSegment)
	if len(objs) != 2 {
		t.Errorf("%d segments after the first expired, want 2", len(objs))
	}
	if _, ok := s.Latest(lease); ok || s.Len() != 1 {
		t.Errorf("expired lease series still held (%d series)", s.Len())
	}
	s2, err := Open(ctx, Options{Store: st, Clock: clk, Retention: time.Hour, Buffered: true})
	if err != nil {
		t.Fatal(err)
	}
	if w := s2.Window(mem, time.Time{}); len(w) != 2 || w[0].Value != 50 || w[1].Value != 70 {
		t.Errorf("restored after expiry: %v", w)
	}
}

// TestWriteThrough: by default every acknowledged push is in the store
// before AppendAll returns, so a store reopened without any checkpoint
// (the leader lost) holds every sample; a checkpoint merges the pushes'
// segments into one, placed so that later pushes still load after it; a
// push the store cannot take is refused whole.
func TestWriteThrough(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	st, err := sqlite.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	clk := clock.NewManual(t0)
	s, err := Open(ctx, Options{Store: st, Clock: clk, Retention: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	mem := sysKey("sys-1", MemoryUsed)
	lease := Key{Kind: MemoryLease, Source: "lease-1", Metric: LeaseBytesInUse}
	push := func(v float64) {
		t.Helper()
		clk.Advance(10 * time.Second)
		if err := s.AppendAll([]Batch{{mem, []Sample{{clk.Now(), v}}}, {lease, []Sample{{clk.Now(), 10 * v}}}}); err != nil {
			t.Fatal(err)
		}
	}
	segments := func() int {
		t.Helper()
		objs, err := st.Objects(ctx, kindSegment)
		if err != nil {
			t.Fatal(err)
		}
		return len(objs)
	}
	reopen := func() *Store {
		t.Helper()
		s2, err := Open(ctx, Options{Store: st, Clock: clk, Retention: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		return s2
	}
	for v := range 3 {
		push(float64(v + 1))
	}
	if n := segments(); n != 3 {
		t.Fatalf("%d segments after 3 pushes, want one each", n)
	}
	// A push that repeats what is held writes nothing.
	if err := s.Append(mem, []Sample{{clk.Now(), 3}}); err != nil || segments() != 3 {
		t.Fatalf("a repeated push: %v, %d segments", err, segments())
	}
	if got, want := dump(reopen()), dump(s); !reflect.DeepEqual(got, want) {
		t.Fatalf("without a checkpoint, restored %v\nwant %v", got, want)
	}
	if err := s.Checkpoint(ctx); err != nil {
		t.Fatal(err)
	}
	if n := segments(); n != 1 {
		t.Fatalf("%d segments after the checkpoint, want the pushes' merged into 1", n)
	}
	push(4)
	push(5)
	if got, want := dump(reopen()), dump(s); !reflect.DeepEqual(got, want) || len(want[mem]) != 5 {
		t.Fatalf("after a checkpoint and two pushes, restored %v\nwant %v", got, want)
	}
	if err := s.Checkpoint(ctx); err != nil {
		t.Fatal(err)
	}
	if n := segments(); n != 2 {
		t.Fatalf("%d segments after the second checkpoint, want 2", n)
	}
	// The store gone: the push is refused and nothing of it is held.
	before := dump(s)
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	clk.Advance(10 * time.Second)
	err = s.Append(mem, []Sample{{clk.Now(), 6}})
	if !errors.Is(err, ErrNotStored) {
		t.Fatalf("push with the store closed: %v, want ErrNotStored", err)
	}
	if got := dump(s); !reflect.DeepEqual(got, before) {
		t.Fatalf("a refused push changed the samples held: %v", got)
	}
	st, err = sqlite.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if got := dump(reopen()); !reflect.DeepEqual(got, before) {
		t.Fatalf("restored %v\nwant %v", got, before)
	}
}

// TestCheckpointCorruptSegment: a segment that does not decode is
// skipped at start-up and deleted by the next checkpoint.
func TestCheckpointCorruptSegment(t *testing.T) {
	ctx := context.Background()
	st, err := sqlite.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	s, clk := newTestStore(t, Options{Store: st})
	if err := s.Append(sysKey("a", MemoryUsed), []Sample{{t0, 1}}); err != nil {
		t.Fatal(err)
	}
	if err := s.Checkpoint(ctx); err != nil {
		t.Fatal(err)
	}
	objs, _ := st.Objects(ctx, kindSegment)
	bad := objs[0]
	bad.Data = bad.Data[:len(bad.Data)-3]
	if err := st.PutObject(ctx, kindSegment, bad); err != nil {
		t.Fatal(err)
	}
	s, err = Open(ctx, Options{Store: st, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	if s.Len() != 0 {
		t.Errorf("restored %d series from a corrupt segment", s.Len())
	}
	if err := s.Checkpoint(ctx); err != nil {
		t.Fatal(err)
	}
	if objs, _ := st.Objects(ctx, kindSegment); len(objs) != 0 {
		t.Errorf("corrupt segment kept: %d", len(objs))
	}
}

func TestSegmentRoundTrip(t *testing.T) {
	in := []segSeries{
		{key: sysKey("sys-1", MemoryUsed), pts: []point{{t: -5, v: 0}, {t: 1, v: 1.5}, {t: 1 << 62, v: math.MaxFloat64}}},
		{key: Key{Kind: Cache, Source: "lease-x", Metric: CacheRemoteItems}, pts: []point{{t: t0.UnixNano(), v: 3}}},
	}
	got, err := decodeSegment(encodeSegment(in))
	if err != nil || !reflect.DeepEqual(got, in) {
		t.Fatalf("round trip: %v %v", got, err)
	}
}

func FuzzDecodeSegment(f *testing.F) {
	f.Add(encodeSegment([]segSeries{{key: sysKey("sys-1", MemoryUsed), pts: []point{{t: 1, v: 2}, {t: 3, v: 4}}}}))
	f.Add(encodeSegment(nil))
	f.Add([]byte("RPTS\x01\xff\xff\xff\xff\x0f"))
	f.Fuzz(func(t *testing.T, data []byte) {
		ss, err := decodeSegment(data)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("error %v does not wrap ErrCorrupt", err)
			}
			return
		}
		for _, s := range ss {
			if checkKey(s.key) != nil || len(s.pts) == 0 {
				t.Fatalf("decoded an invalid series %v", s)
			}
			for i, p := range s.pts {
				if p.v < 0 || math.IsNaN(p.v) || math.IsInf(p.v, 0) || (i > 0 && p.t <= s.pts[i-1].t) {
					t.Fatalf("decoded an invalid sample %v", p)
				}
			}
		}
		// What decodes re-encodes to the same bytes.
		if again := encodeSegment(ss); string(again) != string(data) {
			t.Fatalf("re-encoding differs")
		}
	})
}

// BenchmarkWindow reads a 10-minute window (60 samples) of each of 10^4
// series holding an hour each, as a provisioning loop's step would, into
// one reused buffer.
func BenchmarkWindow(b *testing.B) {
	s, clk := newTestStore(b, Options{})
	const nseries, nsamples = 10000, 360
	keys := make([]Key, nseries)
	for i := range keys {
		keys[i] = sysKey(fmt.Sprintf("sys-%05d", i), MemoryUsed)
		if err := s.Append(keys[i], samples(t0, nsamples, 10*time.Second, 1)); err != nil {
			b.Fatal(err)
		}
	}
	since := clk.Now().Add(-10 * time.Minute)
	var buf []Sample
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		n := 0
		for _, k := range keys {
			buf = s.AppendWindow(buf[:0], k, since)
			n += len(buf)
		}
		if n != nseries*61 {
			b.Fatalf("read %d samples", n)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/nseries, "ns/series")
}

// BenchmarkAppend is one push of one sample to each of 10^4 series.
func BenchmarkAppend(b *testing.B) {
	s, clk := newTestStore(b, Options{MaxSamples: 64})
	const nseries = 10000
	batches := make([]Batch, nseries)
	for i := range batches {
		batches[i] = Batch{Key: sysKey(fmt.Sprintf("sys-%05d", i), MemoryUsed), Samples: []Sample{{}}}
	}
	b.ReportAllocs()
	for b.Loop() {
		clk.Advance(time.Second)
		for i := range batches {
			batches[i].Samples[0] = Sample{Time: clk.Now(), Value: float64(i)}
		}
		if err := s.AppendAll(batches); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkPushStored is one agent's push (six metrics of one system) with
// the SQLite store: written through (the default, durable before the
// answer) against buffered until the next checkpoint.
func BenchmarkPushStored(b *testing.B) {
	for _, buffered := range []bool{false, true} {
		name := "write-through"
		if buffered {
			name = "buffered"
		}
		b.Run(name, func(b *testing.B) {
			st, err := sqlite.Open(b.TempDir())
			if err != nil {
				b.Fatal(err)
			}
			defer st.Close()
			s, clk := newTestStore(b, Options{Store: st, Buffered: buffered, MaxSamples: 64})
			var batches []Batch
			for _, m := range Metrics(System) {
				batches = append(batches, Batch{Key: sysKey("sys-1", m.Name), Samples: []Sample{{}}})
			}
			b.ReportAllocs()
			n := 0
			for b.Loop() {
				clk.Advance(time.Second)
				for i := range batches {
					batches[i].Samples[0] = Sample{Time: clk.Now(), Value: float64(i)}
				}
				if err := s.AppendAll(batches); err != nil {
					b.Fatal(err)
				}
				if n++; n%600 == 0 {
					// A checkpoint a minute at one push a 100 ms.
					if err := s.Checkpoint(context.Background()); err != nil {
						b.Fatal(err)
					}
				}
			}
		})
	}
}
