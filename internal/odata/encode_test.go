package odata

import (
	"bytes"
	"encoding/json"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"rackpool/internal/rf"
)

type kind string

type marshaler struct{}

func (marshaler) MarshalJSON() ([]byte, error) { return []byte(`{"custom":true}`), nil }

// TestMarshalAsEncodingJSON: Marshal writes exactly what json.Marshal
// writes, for the values its fast paths take, the ones it hands over, and
// strings that need escaping.
func TestMarshalAsEncodingJSON(t *testing.T) {
	values := []any{
		nil, "", "plain", `q"uote`, `back\slash`, "<tag> & amp", "tab\there", "\x00\x1f", "é ünïcode", "\u2028\u2029",
		"bad \xff utf-8", true, false, 0, -7, int32(-1 << 31), int64(math.MaxInt64), uint32(math.MaxUint32), uint64(math.MaxUint64),
		1.5, float32(0.1), math.SmallestNonzeroFloat64, 1e21, 1e20, 999999999999999999999.0, 1e-6, 9.99e-7, -1e-7, 1.25e-300,
		0.0, math.Copysign(0, -1), 0.25, 12.5, -3.0, math.MaxFloat64, 123456789.123, math.Inf(1), kind("gpu"), time.Unix(0, 0).UTC(), marshaler{},
		json.RawMessage(`{ "spaced" : [ 1, 2 ] }`), json.RawMessage(nil),
		rf.Ref("/redfish/v1/Systems/a<b"), []rf.ODataID{}, []rf.ODataID(nil), []rf.ODataID{rf.Ref("/x"), rf.Ref("/y")},
		[]string{}, []string(nil), []string{"a", "b&c"}, []any{}, []any{1, "x", nil, []any{true}}, []map[string]any{{"b": 1, "a": 2}},
		map[string]any{}, map[string]any(nil), map[string]string{"z": "1", "a": "<"},
		map[string]any{"b": 1, "a": map[string]any{"y": []string{"q"}, "x": kind("memory")}, "@odata.id": "/r", "Ü": 2, "c\"d": 3},
		struct {
			A int    `json:"a"`
			B string `json:"-"`
		}{A: 1},
	}
	for _, v := range values {
		want, wantErr := json.Marshal(v)
		got, err := Marshal(v)
		if (err == nil) != (wantErr == nil) || !bytes.Equal(got, want) {
			t.Errorf("Marshal(%#v) = %s, %v; json.Marshal: %s, %v", v, got, err, want, wantErr)
		}
	}
	// Errors are json.Marshal's.
	if _, err := Marshal(map[string]any{"f": math.NaN()}); err == nil {
		t.Error("NaN encoded")
	}
	if _, err := Marshal(json.RawMessage(`{bad`)); err == nil {
		t.Error("invalid raw JSON encoded")
	}
}

// TestMarshalRandomTrees: random bodies of nested maps, slices and
// scalars encode as json.Marshal encodes them.
func TestMarshalRandomTrees(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	words := []string{"Id", "Name", "@odata.id", "Oem", "a&b", "Zones", "ü", "x\ny", "Links", ""}
	var tree func(depth int) any
	tree = func(depth int) any {
		switch n := rng.IntN(10); {
		case depth > 3 || n < 3:
			switch rng.IntN(6) {
			case 0:
				return words[rng.IntN(len(words))]
			case 1:
				return rng.IntN(2) == 0
			case 2:
				return rng.Int64() - rng.Int64()
			case 3:
				return (rng.Float64() - 0.5) * math.Pow(10, float64(rng.IntN(60)-30))
			case 4:
				return rf.Ref("/redfish/v1/" + words[rng.IntN(len(words))])
			default:
				return nil
			}
		case n < 5:
			var s []any
			for range rng.IntN(4) {
				s = append(s, tree(depth+1))
			}
			return s
		case n < 6:
			return []string{words[rng.IntN(len(words))], words[rng.IntN(len(words))]}
		default:
			m := map[string]any{}
			for range rng.IntN(6) {
				m[words[rng.IntN(len(words))]] = tree(depth + 1)
			}
			return m
		}
	}
	for range 2000 {
		v := tree(0)
		want, wantErr := json.Marshal(v)
		got, err := Marshal(v)
		if (err == nil) != (wantErr == nil) || !bytes.Equal(got, want) {
			t.Fatalf("Marshal(%#v) = %s, %v; json.Marshal: %s, %v", v, got, err, want, wantErr)
		}
	}
}

func mustMarshal(t *testing.T, v any) []byte {
	t.Helper()
	data, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// FuzzMarshal: any string, as a value, a key and in a list, encodes as
// json.Marshal encodes it (escapes, invalid UTF-8, HTML characters); so
// does any string in parts (AppendJoined) and any float64 (AppendFloat).
func FuzzMarshal(f *testing.F) {
	for _, s := range []string{"", "plain", "<&>", "\x00", "\xff", "\u2028", `"\`} {
		f.Add(s, int64(len(s)))
	}
	f.Fuzz(func(t *testing.T, s string, n int64) {
		// The writers of hand-written bodies: a string in parts, a float.
		if got, want := AppendJoined([]byte("x"), "/redfish/", s, "/", s), mustMarshal(t, "/redfish/"+s+"/"+s); !bytes.Equal(got[1:], want) {
			t.Fatalf("AppendJoined = %s; json.Marshal: %s", got[1:], want)
		}
		x := math.Float64frombits(uint64(n))
		wantX, errX := json.Marshal(x)
		if got, err := AppendFloat(nil, x); (err == nil) != (errX == nil) || (err == nil && !bytes.Equal(got, wantX)) {
			t.Fatalf("AppendFloat(%v) = %s, %v; json.Marshal: %s, %v", x, got, err, wantX, errX)
		}
		v := map[string]any{s: []any{s, n, map[string]string{s: s}}, "refs": []rf.ODataID{rf.Ref(s)}, "list": []string{s}}
		want, wantErr := json.Marshal(v)
		got, err := Marshal(v)
		if (err == nil) != (wantErr == nil) || !bytes.Equal(got, want) {
			t.Fatalf("Marshal = %s, %v; json.Marshal: %s, %v", got, err, want, wantErr)
		}
	})
}
