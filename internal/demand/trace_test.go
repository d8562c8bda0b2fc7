package demand

import (
	"bytes"
	"errors"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestReadValid(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want *Trace
	}{
		{
			name: "interleaved entities, different starts",
			in:   "time_s,entity,memory_gib\n0,a,1\n5,a,2\n5,b,3\n10,a,2.5\n10,b,4\n",
			want: &Trace{Interval: 5, Entities: []Series{
				{Entity: "a", Start: 0, MemoryGiB: []float64{1, 2, 2.5}},
				{Entity: "b", Start: 5, MemoryGiB: []float64{3, 4}},
			}},
		},
		{
			name: "grouped, extra columns in any order, spaces, quotes, blank lines",
			in:   "time_s, entity ,memory_gib,io_mbps,gpus\n\n0.1,\"x, y\",1,100,0\n 0.2 ,\"x, y\",1e1,200,2\n\n0.3,\"x, y\",0,0,1.5\n",
			want: &Trace{Interval: 0.1, Entities: []Series{
				{Entity: "x, y", Start: 0.1, MemoryGiB: []float64{1, 10, 0}, GPUs: []float64{0, 2, 1.5}, IOMBps: []float64{100, 200, 0}},
			}},
		},
		{
			name: "one sample each: interval 0",
			in:   "time_s,entity,memory_gib\n3,a,1\n4,b,2\n",
			want: &Trace{Entities: []Series{{Entity: "a", Start: 3, MemoryGiB: []float64{1}}, {Entity: "b", Start: 4, MemoryGiB: []float64{2}}}},
		},
		{
			name: "steps within tolerance snap to the grid; interval measured over the longest series",
			in:   "time_s,entity,memory_gib\n0,a,1\n0.333,a,1\n0.667,a,1\n1,a,1\n",
			want: &Trace{Interval: 0.333333, Entities: []Series{{Entity: "a", MemoryGiB: []float64{1, 1, 1, 1}}}},
		},
		{
			name: "byte order mark",
			in:   "\ufefftime_s,entity,memory_gib\n0,a,1\n",
			want: &Trace{Entities: []Series{{Entity: "a", MemoryGiB: []float64{1}}}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Read(strings.NewReader(tt.in), "t.csv")
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("got %+v\nwant %+v", got, tt.want)
			}
			roundTrip(t, got)
		})
	}
}

func TestReadErrors(t *testing.T) {
	const h = "time_s,entity,memory_gib\n"
	tests := []struct {
		name, in, want string
	}{
		{"empty", "", "t.csv: empty file"},
		{"header only", h, "t.csv: no samples"},
		{"wrong header", "time,entity,memory_gib\n", `t.csv:1: header "time,entity,memory_gib" must start with time_s,entity,memory_gib`},
		{"header order", "entity,time_s,memory_gib\n", "must start with"},
		{"unknown column", "time_s,entity,memory_gib,cpus\n", `t.csv:1: unknown column "cpus"`},
		{"column twice", "time_s,entity,memory_gib,gpus,gpus\n", `t.csv:1: column "gpus" appears twice`},
		{"not a number", h + "0,a,1\n1,a,abc\n", `t.csv:3: column memory_gib: "abc" is not a number`},
		{"time not a number", h + "x,a,1\n", `t.csv:2: column time_s: "x" is not a number`},
		{"negative", h + "0,a,-1\n", `t.csv:2: column memory_gib: "-1" is negative`},
		{"negative time", h + "-1,a,1\n", `t.csv:2: column time_s: "-1" is negative`},
		{"NaN", h + "0,a,NaN\n", `t.csv:2: column memory_gib: "NaN" is not finite`},
		{"Inf gpus", "time_s,entity,memory_gib,gpus\n0,a,1,+Inf\n", `t.csv:2: column gpus: "+Inf" is not finite`},
		{"empty entity", h + "0, ,1\n", "t.csv:2: column entity: empty"},
		{"control character", h + "0,\"a\nb\",1\n", `t.csv:2: column entity: "a\nb" has a control character`},
		{"too many columns", h + "0,a,1,2\n", "t.csv:2: 4 columns, want 3"},
		{"too few columns", h + "0,a\n", "t.csv:2: 2 columns, want 3"},
		{"backwards", h + "0,a,1\n5,a,1\n4,a,1\n", `t.csv:4: column time_s: time goes backwards: 4 is before "a"'s previous sample at 5 (line 3)`},
		{"duplicate", h + "0,a,1\n0,b,1\n0,a,2\n", `t.csv:4: column time_s: duplicate time 0 for "a" (also line 2)`},
		{"gap", h + "0,a,1\n5,a,1\n20,a,1\n", `t.csv:4: column time_s: gap: 15 s since "a"'s previous sample (line 3), 2 samples missing at the trace's interval of 5 s (set by line 3)`},
		{"other entity's interval", h + "0,a,1\n5,a,1\n0,b,1\n3,b,1\n", `t.csv:5: column time_s: step of 3 s since "b"'s previous sample (line 4) differs from the trace's interval of 5 s`},
		{"drift", h + "0,a,1\n1,a,1\n2,a,1\n3,a,1\n4,a,1\n5,a,1\n0,b,1\n1.009,b,1\n2.018,b,1\n3.027,b,1\n",
			`t.csv:11: column time_s: "b" drifts off the trace's grid: its sample 3 at 3.027 s is 0.027 s from 3 s (start 0 + 3 × interval 1)`},
		{"computed step", h + "0.2,a,1\n0.3,a,1\n0.5,a,1\n", `gap: 0.2 s since "a"'s previous sample (line 3), 1 samples missing at the trace's interval of 0.1 s (set by line 3)`},
		{"bad quote", h + "0,\"a,1\n", "t.csv:2: extraneous or missing"},
		{"too many intervals", h + "1e9,a,1\n1000000000.5,a,1\n", "more than 1e+08 intervals"},
		{"long line", h + strings.Repeat("1", 70000) + ",a,1\n", "t.csv:2: line longer than 65536 bytes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Read(strings.NewReader(tt.in), "t.csv")
			if err == nil {
				t.Fatalf("no error, want %q", tt.want)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error %q, want %q", err, tt.want)
			}
			var pe *ParseError
			if !errors.As(err, &pe) {
				t.Fatalf("error %T is not a *ParseError", err)
			}
		})
	}
}

func TestReadLimits(t *testing.T) {
	in := "time_s,entity,memory_gib\n0,a,1\n0,b,1\n1,a,1\n1,b,1\n"
	if _, err := (Limits{MaxRows: 4, MaxEntities: 2}).Read(strings.NewReader(in), "t.csv"); err != nil {
		t.Fatalf("at the limits: %v", err)
	}
	_, err := Limits{MaxRows: 3}.Read(strings.NewReader(in), "t.csv")
	if !errors.Is(err, ErrLimit) || !strings.Contains(err.Error(), "t.csv:5: more than 3 rows") {
		t.Fatalf("rows: %v", err)
	}
	_, err = Limits{MaxEntities: 1}.Read(strings.NewReader(in), "t.csv")
	if !errors.Is(err, ErrLimit) || !strings.Contains(err.Error(), "t.csv:3: column entity: more than 1 entities") {
		t.Fatalf("entities: %v", err)
	}
}

func TestWriteRefusesInvalid(t *testing.T) {
	ok := func() *Trace {
		return &Trace{Interval: 1, Entities: []Series{{Entity: "a", MemoryGiB: []float64{1, 2}}, {Entity: "b", MemoryGiB: []float64{1}}}}
	}
	tests := []struct {
		name   string
		modify func(*Trace)
		want   string
	}{
		{"no series", func(t *Trace) { t.Entities = nil }, "no series"},
		{"duplicate entity", func(t *Trace) { t.Entities[1].Entity = "a" }, "appears twice"},
		{"spaces", func(t *Trace) { t.Entities[1].Entity = " b" }, "surrounding spaces"},
		{"control", func(t *Trace) { t.Entities[1].Entity = "b\x01c" }, "control character"},
		{"no samples", func(t *Trace) { t.Entities[1].MemoryGiB = nil }, "no samples"},
		{"NaN", func(t *Trace) { t.Entities[0].MemoryGiB[1] = math.NaN() }, "memory_gib[1]"},
		{"negative start", func(t *Trace) { t.Entities[0].Start = -1 }, "start -1"},
		{"gpus in one series only", func(t *Trace) { t.Entities[0].GPUs = []float64{1, 1} }, "every series or in none"},
		{"gpus length", func(t *Trace) {
			t.Entities[0].GPUs = []float64{1}
			t.Entities[1].GPUs = []float64{1}
		}, "different length"},
		{"interval 0", func(t *Trace) { t.Interval = 0 }, "interval 0"},
		{"interval without two samples", func(t *Trace) { t.Entities[0].MemoryGiB = []float64{1} }, "cannot carry it"},
		{"interval digits", func(t *Trace) { t.Interval = 1.0 / 3 }, "6 significant digits"},
		{"too many intervals", func(t *Trace) { t.Entities[0].Start = 2e8 }, "intervals"},
	}
	if err := Write(&bytes.Buffer{}, ok()); err != nil {
		t.Fatal(err)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tr := ok()
			tt.modify(tr)
			err := Write(&bytes.Buffer{}, tr)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error %v, want %q", err, tt.want)
			}
		})
	}
}

func TestWriteFormat(t *testing.T) {
	tr := &Trace{Interval: 0.1, Entities: []Series{
		{Entity: `say "hi", all`, Start: 1e6, MemoryGiB: []float64{0.1, 1e-7, 1e20}, IOMBps: []float64{1, 2, 3}},
	}}
	var b bytes.Buffer
	if err := Write(&b, tr); err != nil {
		t.Fatal(err)
	}
	want := "time_s,entity,memory_gib,io_mbps\n" +
		"1000000,\"say \"\"hi\"\", all\",0.1,1\n" +
		"1000000.1,\"say \"\"hi\"\", all\",1e-07,2\n" +
		"1000000.2,\"say \"\"hi\"\", all\",1e+20,3\n"
	if b.String() != want {
		t.Fatalf("got\n%s\nwant\n%s", b.String(), want)
	}
	roundTrip(t, tr)
}

func TestWriteRoundsGridTimes(t *testing.T) {
	tr := &Trace{Interval: 0.1, Entities: []Series{
		{Entity: "a", MemoryGiB: make([]float64, 1242)},
		{Entity: "b", Start: 0.123456789012, MemoryGiB: make([]float64, 3)},
	}}
	var b bytes.Buffer
	if err := Write(&b, tr); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"\n0.3,a,0\n", "\n124.1,a,0\n", "\n0.123456789012,b,0\n", "\n0.223456789,b,0\n"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("no %q in the output", want)
		}
	}
	if strings.Contains(b.String(), "0000000") {
		t.Errorf("unrounded times in the output")
	}
	roundTrip(t, tr)
}

func TestFileRoundTrip(t *testing.T) {
	tr := &Trace{Interval: 2, Entities: []Series{{Entity: "a", Start: 4, MemoryGiB: []float64{1, 2, 3}, GPUs: []float64{0, 1, 0}}}}
	path := filepath.Join(t.TempDir(), "t.csv")
	if err := WriteFile(path, tr); err != nil {
		t.Fatal(err)
	}
	got, err := ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, tr) {
		t.Fatalf("got %+v, want %+v", got, tr)
	}
	if _, err := os.Stat(path + ".tmp"); !os.IsNotExist(err) {
		t.Fatalf("temporary file left: %v", err)
	}
	if _, err := ReadFile(filepath.Join(t.TempDir(), "missing.csv")); !os.IsNotExist(err) {
		t.Fatalf("missing file: %v", err)
	}
}

func TestAggregate(t *testing.T) {
	tr := &Trace{Interval: 10, Entities: []Series{
		{Entity: "late", Start: 21, MemoryGiB: []float64{1, 1}}, // slots 2 and 3 (21 is nearest 20)
		{Entity: "early", Start: 0, MemoryGiB: []float64{2, 2, 2}},
	}}
	start, agg := tr.Aggregate()
	if start != 0 || !reflect.DeepEqual(agg, []float64{2, 2, 3, 1}) {
		t.Fatalf("Aggregate = %v, %v", start, agg)
	}
	if got := PeakToAverage(agg); got != 3/2.0 {
		t.Fatalf("PeakToAverage = %v", got)
	}
	if PeakToAverage(nil) != 0 || PeakToAverage([]float64{0, 0}) != 0 {
		t.Fatal("PeakToAverage of nothing is not 0")
	}
}

// roundTrip checks that Write then Read gives tr back exactly.
func roundTrip(t *testing.T, tr *Trace) {
	t.Helper()
	var b bytes.Buffer
	if err := Write(&b, tr); err != nil {
		t.Fatalf("write: %v", err)
	}
	got, err := Read(&b, "written.csv")
	if err != nil {
		t.Fatalf("read back: %v", err)
	}
	if !reflect.DeepEqual(got, tr) {
		t.Fatalf("read back %+v\nwant %+v", got, tr)
	}
}

func FuzzRead(f *testing.F) {
	f.Add("time_s,entity,memory_gib\n0,a,1\n5,a,2\n5,b,3\n10,a,2.5\n10,b,4\n")
	f.Add("time_s,entity,memory_gib,io_mbps,gpus\n0.1,\"x, y\",1,100,0\n0.2,\"x, y\",1e1,200,2\n")
	f.Add("time_s,entity,memory_gib\n0,a,1\n0.333,a,1\n0.667,a,1\n1,a,1\n")
	f.Add("time_s,entity,memory_gib\n1e9,a,1\n1000000000.5,a,1\n")
	f.Add("time_s,entity,memory_gib\n0,a,1\n5,a,1\n20,a,1\n")
	f.Add("time_s,entity,memory_gib,gpus\n0,a,1,+Inf\n")
	f.Add("time_s,entity,memory_gib\n0.123456789012,b,0\n0.223456789,b,0\n3,c,1\n")
	f.Add("time_s,entity,memory_gib\n1e-300,a,1\n2e-300,a,1\n")
	f.Fuzz(func(t *testing.T, in string) {
		tr, err := Limits{MaxRows: 1000, MaxEntities: 100}.Read(strings.NewReader(in), "fuzz.csv")
		if err != nil {
			return
		}
		if err := tr.Validate(); err != nil {
			t.Fatalf("Read gave a trace that does not validate: %v", err)
		}
		var b bytes.Buffer
		if err := Write(&b, tr); err != nil {
			t.Fatalf("write: %v", err)
		}
		got, err := Read(bytes.NewReader(b.Bytes()), "written.csv")
		if err != nil {
			t.Fatalf("read back: %v\n%s", err, b.String())
		}
		if !reflect.DeepEqual(got, tr) {
			t.Fatalf("read back %+v\nwant %+v", got, tr)
		}
	})
}
