package sim

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestTraceParse(t *testing.T) {
	// Columns out of order, a byte order mark, CRLF, spaces around header
	// names, an empty optional cell and blank lines at the end.
	in := "\uFEFFhold, ID ,ram_gb,arrival,cores,gpus,max_latency_ns\r\n" +
		"3600,vm1,16,0,4,1,500\r\n" +
		"1800,vm2,0.5,0,1,,\r\n" +
		"0,\"vm,3\",2,2.25,2,0,0\r\n" +
		"\r\n\r\n"
	got, err := ParseTrace("t.csv", strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	want := []Request{
		{ID: "vm1", Arrival: 0, Hold: 3600, Cores: 4, RAMGB: 16, GPUs: 1, MaxLatencyNS: 500},
		{ID: "vm2", Arrival: 0, Hold: 1800, Cores: 1, RAMGB: 0.5},
		{ID: "vm,3", Arrival: 2.25, Hold: 0, Cores: 2, RAMGB: 2},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got  %+v\nwant %+v", got, want)
	}
}

func TestTraceErrors(t *testing.T) {
	const h = "id,arrival,cores,ram_gb,hold\n"
	cases := []struct {
		name, in, want string
	}{
		{"empty", "", `t.csv:1: header: empty file`},
		{"only blank lines", "\n\n  \n", `t.csv:1: header: empty file`},
		{"header only", h, `t.csv:1: no requests`},
		{"header only after blank lines", "\n\n" + h + "\n", `t.csv:3: no requests`},
		{"missing columns", "id,arrival,cores\nx,1,2\n", `t.csv:1: header: missing column(s) ram_gb, hold (required: id, arrival, cores, ram_gb, hold)`},
		{"unknown column", "id,arrival,colour,cores,ram_gb,hold\n", `t.csv:1: header: unknown column "colour" (valid: id, arrival, cores, ram_gb, hold, gpus, storage_gb, max_latency_ns, min_bandwidth_gbps)`},
		{"duplicate column", "id,arrival,cores,ram_gb,hold,Cores\n", `t.csv:1: header: column "cores" given twice`},
		{"too few fields", h + "a,0,1,2,3\nb,1,1,2\n", `t.csv:3: row has 4 fields, the header has 5`},
		{"too many fields", h + "a,0,1,2,3,4\n", `t.csv:2: row has 6 fields, the header has 5`},
		{"negative hold", h + "a,0,1,2,-3\n", `t.csv:2: hold: must be a finite number >= 0, got "-3"`},
		{"hold not a number", h + "a,0,1,2,long\n", `t.csv:2: hold: must be a finite number >= 0, got "long"`},
		{"negative arrival", h + "a,-1,1,2,3\n", `t.csv:2: arrival: must be a finite number >= 0, got "-1"`},
		{"NaN arrival", h + "a,NaN,1,2,3\n", `t.csv:2: arrival: must be a finite number >= 0, got "NaN"`},
		{"infinite hold", h + "a,0,1,2,+Inf\n", `t.csv:2: hold: must be a finite number >= 0, got "+Inf"`},
		{"zero cores", h + "a,0,0,2,3\n", `t.csv:2: cores: must be an integer from 1 to 1,000,000, got "0"`},
		{"fractional cores", h + "a,0,2.5,2,3\n", `t.csv:2: cores: must be an integer from 1 to 1,000,000, got "2.5"`},
		{"too many cores", h + "a,0,1000001,2,3\n", `t.csv:2: cores: must be an integer from 1 to 1,000,000, got "1000001"`},
		{"zero ram", h + "a,0,1,0,3\n", `t.csv:2: ram_gb: must be a finite number > 0, got "0"`},
		{"empty ram", h + "a,0,1,,3\n", `t.csv:2: ram_gb: must be a finite number > 0, got ""`},
		{"negative gpus", "id,arrival,cores,ram_gb,hold,gpus\na,0,1,2,3,-1\n", `t.csv:2: gpus: must be an integer from 0 to 1,000,000, got "-1"`},
		{"negative storage", "id,arrival,cores,ram_gb,hold,storage_gb\na,0,1,2,3,-5\n", `t.csv:2: storage_gb: must be a finite number >= 0, got "-5"`},
		{"bad latency", "id,arrival,cores,ram_gb,hold,max_latency_ns\na,0,1,2,3,fast\n", `t.csv:2: max_latency_ns: must be a finite number >= 0, got "fast"`},
		{"empty id", h + " ,0,1,2,3\n", `t.csv:2: id: must not be empty`},
		{"duplicate id", h + "a,0,1,2,3\nb,1,1,2,3\na,2,1,2,3\n", `t.csv:4: id: duplicate id "a" (first on line 2)`},
		{"unsorted", h + "a,7,1,2,3\nb,5,1,2,3\n", `t.csv:3: arrival: 5 is before the previous row's 7 (the trace must be sorted by arrival)`},
		{"bare quote", h + "a,0,1,2,3\nb\"c,1,1,2,3\n", `t.csv:3: csv: bare " in non-quoted-field`},
		{"line numbers count blank lines", h + "a,0,1,2,3\n\n\nb,1,x,2,3\n", `t.csv:5: cores: must be`},
		{"line numbers with CRLF", strings.ReplaceAll(h+"a,0,1,2,3\nb,1,1,2,-1\n", "\n", "\r\n"), `t.csv:3: hold: must be`},
		{"line numbers after a quoted newline", h + "\"a\nb\",0,1,2,3\nc,1,1,2,-1\n", `t.csv:4: hold: must be`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseTrace("t.csv", strings.NewReader(tc.in))
			if err == nil {
				t.Fatalf("no error; want %q", tc.want)
			}
			if !strings.HasPrefix(err.Error(), tc.want) {
				t.Errorf("error %q\nwant prefix %q", err, tc.want)
			}
		})
	}
}

func TestTraceRoundTrip(t *testing.T) {
	reqs := []Request{
		{ID: "a", Arrival: 0, Hold: 6300, Cores: 4, RAMGB: 16},
		{ID: "b,\"quoted\"", Arrival: 0.1, Hold: 1e-9, Cores: 1, RAMGB: 0.3, GPUs: 2, StorageGB: 3840.5},
		{ID: "c", Arrival: 1.0 / 3, Hold: 123456789.123, Cores: 1_000_000, RAMGB: math.MaxFloat64, MaxLatencyNS: 600, MinBandwidthGbps: 25},
		{ID: "d", Arrival: 1e15, Hold: 0, Cores: 2, RAMGB: 5e-324},
	}
	var buf bytes.Buffer
	if err := WriteTrace(&buf, reqs); err != nil {
		t.Fatal(err)
	}
	if first, _, _ := strings.Cut(buf.String(), "\n"); first != "id,arrival,cores,ram_gb,hold,gpus,storage_gb,max_latency_ns,min_bandwidth_gbps" {
		t.Errorf("header %q", first)
	}
	got, err := ParseTrace("round.csv", &buf)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, reqs) {
		t.Errorf("round trip\ngot  %+v\nwant %+v", got, reqs)
	}

	// Optional columns appear only when used.
	buf.Reset()
	if err := WriteTrace(&buf, reqs[:1]); err != nil {
		t.Fatal(err)
	}
	if buf.String() != "id,arrival,cores,ram_gb,hold\na,0,4,16,6300\n" {
		t.Errorf("got %q", buf.String())
	}
}

func TestTraceReadFile(t *testing.T) {
	reqs, err := ReadTrace(filepath.Join("testdata", "traces", "small.csv"))
	if err != nil {
		t.Fatal(err)
	}
	if len(reqs) != 50 || reqs[0].ID != "vm001" || reqs[49].ID != "vm050" {
		t.Errorf("got %d requests, first %+v", len(reqs), reqs[0])
	}
	_, err = ReadTrace(filepath.Join(t.TempDir(), "missing.csv"))
	if err == nil || !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("missing file: %v", err)
	}
	bad := filepath.Join(t.TempDir(), "bad.csv")
	if err := os.WriteFile(bad, []byte("id,arrival,cores,ram_gb,hold\na,0,1,2,-3\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadTrace(bad); err == nil || !strings.HasPrefix(err.Error(), bad+":2: hold: ") {
		t.Errorf("bad file: %v", err)
	}
}

// traceRows is a generated trace of n rows.
func traceRows(n int) []byte {
	var b bytes.Buffer
	b.Grow(n * 40)
	b.WriteString("id,arrival,cores,ram_gb,hold\n")
	for i := range n {
		fmt.Fprintf(&b, "r%d,%g,%d,%d,%g\n", i, float64(i)*10.5, 1+i%4, 2<<(i%4), 6300+float64(i/100)*360)
	}
	return b.Bytes()
}

func TestTraceDuplicateAfterGrowth(t *testing.T) {
	// A plain io.Reader gives no size hint: the id set grows from small.
	data := append(traceRows(100_000), "r5,2000000,1,2,3\n"...)
	_, err := ParseTrace("t.csv", io.MultiReader(bytes.NewReader(data)))
	if want := `t.csv:100002: id: duplicate id "r5" (first on line 7)`; err == nil || err.Error() != want {
		t.Errorf("got %v, want %s", err, want)
	}
	reqs, err := ParseTrace("t.csv", io.MultiReader(bytes.NewReader(traceRows(100_000))))
	if err != nil || len(reqs) != 100_000 {
		t.Errorf("got %d requests, %v", len(reqs), err)
	}
}

// BenchmarkParseTrace parses a trace of 1,000,000 rows.
func BenchmarkParseTrace(b *testing.B) {
	data := traceRows(1_000_000)
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ParseTrace("bench.csv", bytes.NewReader(data)); err != nil {
			b.Fatal(err)
		}
	}
}
