package fabricreport

import (
	"fmt"
	"math"
	"slices"
	"testing"
	"time"

	"rackpool/internal/fabric"
	"rackpool/internal/topology"
)

var t0 = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)

func groupOf(t *testing.T, rep *Report, fid, kind string) Group {
	t.Helper()
	for _, g := range rep.Groups {
		if g.Fabric == fid && g.Kind == kind {
			return g
		}
	}
	t.Fatalf("no group %s/%s in %+v", fid, kind, rep.Groups)
	return Group{}
}

func newest(t *testing.T, c *Condenser) *Report {
	t.Helper()
	reps := c.Reports()
	if len(reps) == 0 {
		t.Fatal("no report")
	}
	return reps[len(reps)-1]
}

// TestRecord: groups by fabric, then kind (unknown devices apart); means
// and maxima over the devices that had a value, NaN when none had;
// link errors are the counters' increase since the device's previous
// poll, a reset counting from 0 and a first poll counting none.
func TestRecord(t *testing.T) {
	c := New(Options{Topology: topology.LoadDefault()})
	c.Record(t0, map[string][]fabric.DeviceStats{
		"sas1": {{Device: "hdd1", UtilisationPercent: 5, TemperatureC: 35, LinkWidth: 4, CorrectableErrors: 7}},
		"falcon1": {
			{Device: "gpu1", UtilisationPercent: 20, TemperatureC: 50, LinkWidth: 16, CorrectableErrors: 5, UncorrectableErrs: 1},
			{Device: "gpu2", UtilisationPercent: 60, TemperatureC: 70, LinkWidth: 0, CorrectableErrors: 10},
			{Device: "ghost", UtilisationPercent: math.NaN(), TemperatureC: math.NaN(), LinkWidth: 1},
		},
	})
	rep := newest(t, c)
	var order []string
	for _, g := range rep.Groups {
		order = append(order, g.Fabric+"/"+g.Kind)
	}
	if want := []string{"falcon1/gpu", "falcon1/" + UnknownKind, "sas1/hdd"}; !slices.Equal(order, want) {
		t.Fatalf("groups %v, want %v", order, want)
	}
	gpu := groupOf(t, rep, "falcon1", "gpu")
	if gpu.Devices != 2 || gpu.UtilMean != 40 || gpu.UtilMax != 60 || gpu.TempMax != 70 || gpu.LinksDown != 1 || gpu.LinkErrors != 0 {
		t.Fatalf("gpu group %+v", gpu)
	}
	if g := groupOf(t, rep, "falcon1", UnknownKind); g.Devices != 1 || !math.IsNaN(g.UtilMean) || !math.IsNaN(g.UtilMax) || !math.IsNaN(g.TempMax) {
		t.Fatalf("unknown group %+v", g)
	}

	c.Record(t0.Add(2*time.Second), map[string][]fabric.DeviceStats{
		"falcon1": {
			{Device: "gpu1", TemperatureC: 50, LinkWidth: 16, CorrectableErrors: 8, UncorrectableErrs: 2}, // +3 +1
			{Device: "gpu2", TemperatureC: 70, LinkWidth: 16, CorrectableErrors: 2},                       // reset: +2
			{Device: "gpu3", TemperatureC: 45, LinkWidth: 16, CorrectableErrors: 100},                     // first poll: +0
		},
	})
	rep = newest(t, c)
	if g := groupOf(t, rep, "falcon1", "gpu"); g.LinkErrors != 6 || g.Devices != 3 || g.LinksDown != 0 {
		t.Fatalf("second poll %+v", g)
	}
	if len(rep.Groups) != 1 {
		t.Fatalf("a fabric that did not answer has a group: %+v", rep.Groups)
	}
	// sas1 answers again: its counters are those of its last answer.
	c.Record(t0.Add(4*time.Second), map[string][]fabric.DeviceStats{"sas1": {{Device: "hdd1", LinkWidth: 4, CorrectableErrors: 9}}})
	if g := groupOf(t, newest(t, c), "sas1", "hdd"); g.LinkErrors != 2 {
		t.Fatalf("sas1 %+v", g)
	}
}

// TestHot: the ten hottest devices over every fabric, hottest first,
// ties by fabric then device; devices without a temperature are not
// ranked.
func TestHot(t *testing.T) {
	c := New(Options{})
	var many []fabric.DeviceStats
	for i := range 15 {
		many = append(many, fabric.DeviceStats{Device: fmt.Sprintf("d%02d", i), TemperatureC: float64(30 + i%12)})
	}
	many = append(many, fabric.DeviceStats{Device: "cold", TemperatureC: math.NaN()})
	c.Record(t0, map[string][]fabric.DeviceStats{"f2": many, "f1": {{Device: "z", TemperatureC: 41}}})
	var got []string
	for _, h := range newest(t, c).Hot {
		got = append(got, fmt.Sprintf("%s/%s=%g", h.Fabric, h.Device, h.TempC))
	}
	want := []string{"f1/z=41", "f2/d11=41", "f2/d10=40", "f2/d09=39", "f2/d08=38", "f2/d07=37", "f2/d06=36",
		"f2/d05=35", "f2/d04=34", "f2/d03=33"}
	if !slices.Equal(got, want) {
		t.Fatalf("hot\n got %v\nwant %v", got, want)
	}
}

// TestHistory: the newest History reports, oldest first; a poll older
// than the newest report is ignored; sequence numbers increase and are at
// least the poll's time in microseconds.
func TestHistory(t *testing.T) {
	c := New(Options{History: 3})
	if c.History() != 3 || c.Interval() <= 0 {
		t.Fatalf("History %d, Interval %v", c.History(), c.Interval())
	}
	for i := range 5 {
		c.Record(t0.Add(time.Duration(i)*time.Second), map[string][]fabric.DeviceStats{"f": {{Device: "d", LinkWidth: 1}}})
	}
	c.Record(t0.Add(3*time.Second), map[string][]fabric.DeviceStats{}) // overlapped by a later poll
	reps := c.Reports()
	var at []int
	for i, rep := range reps {
		at = append(at, rep.At.Second())
		if i > 0 && rep.Seq <= reps[i-1].Seq {
			t.Fatalf("sequence %d after %d", rep.Seq, reps[i-1].Seq)
		}
		if rep.Seq < uint64(rep.At.UnixMicro()) {
			t.Fatalf("sequence %d below the poll's time", rep.Seq)
		}
	}
	if !slices.Equal(at, []int{2, 3, 4}) {
		t.Fatalf("retained %v", at)
	}
	// Two polls in one microsecond still get distinct numbers.
	c.Record(t0.Add(4*time.Second), map[string][]fabric.DeviceStats{})
	if reps := c.Reports(); reps[2].Seq != reps[1].Seq+1 {
		t.Fatalf("same-time poll: %d after %d", reps[2].Seq, reps[1].Seq)
	}
}

// TestSubscribe: resume replays the retained reports after lastID; a
// subscriber that falls behind loses its oldest queued reports, not the
// newest; after cancel nothing more is queued.
func TestSubscribe(t *testing.T) {
	c := New(Options{})
	rec := func(i int) { c.Record(t0.Add(time.Duration(i)*time.Second), map[string][]fabric.DeviceStats{}) }
	rec(0)
	rec(1)
	first := c.Reports()[0].Seq
	replay, ch, cancel := c.Subscribe(first, true)
	if len(replay) != 1 || replay[0].At != t0.Add(time.Second) {
		t.Fatalf("replay %+v", replay)
	}
	if r, _, cancel2 := c.Subscribe(first, false); r != nil {
		t.Fatalf("replay without resume: %+v", r)
	} else {
		cancel2()
	}
	for i := 2; i < 2+subBuffer+3; i++ {
		rec(i)
	}
	var got []int
	for range subBuffer {
		got = append(got, (<-ch).At.Second())
	}
	if want := []int{5, 6, 7, 8}; !slices.Equal(got, want) {
		t.Fatalf("queued %v, want %v", got, want)
	}
	cancel()
	rec(20)
	select {
	case rep := <-ch:
		t.Fatalf("after cancel: %+v", rep)
	default:
	}
}

// BenchmarkRecord: one poll of 10^4 devices on four
// fabrics, aggregated and kept (no SSE client).
func BenchmarkRecord(b *testing.B) {
	ft := New(Options{})
	stats := map[string][]fabric.DeviceStats{}
	for i := range 10000 {
		f := fmt.Sprintf("fabric%d", i%4)
		stats[f] = append(stats[f], fabric.DeviceStats{Device: fmt.Sprintf("dev%05d", i), UtilisationPercent: float64(i % 100),
			TemperatureC: float64(30 + i%60), LinkWidth: i % 16, CorrectableErrors: uint64(i)})
	}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		ft.Record(t0.Add(time.Duration(i)*time.Second), stats)
	}
}
