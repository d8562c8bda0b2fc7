package rf

import (
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"
)

// bodies are request bodies of about n bytes, each a shape that costs a
// decoder something different. flat is the yardstick: one member holding
// a string.
func bodies(n int) map[string]string {
	fill := func(head, unit, tail string) string {
		k := max(0, (n-len(head)-len(tail))/len(unit))
		return head + strings.Repeat(unit, k) + tail
	}
	nest := func(open, close string, k int) string {
		return strings.Repeat(open, k) + "1" + strings.Repeat(close, k)
	}
	return map[string]string{
		"flat":            fill(`{"Name":"`, "x", `"}`),
		"samples":         fill(`{"Samples":[`, `{"MetricId":"cpu","Value":1.5},`, `{}]}`),
		"references":      fill(`{"Links":{"ResourceBlocks":[`, `{"@odata.id":"/redfish/v1/CompositionService/ResourceBlocks/gpu1"},`, `{}]}}`),
		"nested-objects":  nest(`{"a":`, "}", n/6),
		"nested-arrays":   nest("[", "]", n/2),
		"deepest-allowed": fill(`{"a":[`, nest(`{"a":`, "}", 60)+",", `1]}`),
		"numbers":         fill(`{"Samples":[`, "1,", `1]}`),
		"unknown-numbers": fill(`{"a":[`, "1,", `1]}`),
		"members":         members(n),
	}
}

// members is an object of n/14 distinct members.
func members(n int) string {
	var b strings.Builder
	b.WriteString(`{"o":{`)
	for i := 0; b.Len() < n-16; i++ {
		fmt.Fprintf(&b, `"k%07d":1,`, i)
	}
	b.WriteString(`"z":1}}`)
	return b.String()
}

// probe is the shape of the bodies the services decode: names, numbers,
// references and arrays of small objects (a telemetry push's samples).
type probe struct {
	Name    string
	Count   int
	Samples []struct {
		MetricId  *string
		Timestamp *string
		Value     *float64
	}
	Links struct{ ResourceBlocks []ODataID }
	Oem   struct {
		Rackpool struct {
			Needs []struct {
				Kind  string
				Count int
			}
		}
	}
}

func decodeBody(body string) error {
	r := httptest.NewRequest("POST", "/x", strings.NewReader(body))
	var v probe
	return Decode(r, &v, 1<<20)
}

// BenchmarkDecode decodes bodies of 100 KB and 1 MiB (MaxBody) of each
// shape; compare each shape's time and B/op with flat's at the same size.
// encoding-json is the yardstick beside it: json.Unmarshal of the flat
// body, no checks at all.
func BenchmarkDecode(b *testing.B) {
	for _, size := range []int{100 << 10, 1 << 20} {
		all := bodies(size)
		b.Run("encoding-json/"+sizeName(size), func(b *testing.B) {
			body := []byte(all["flat"])
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			for b.Loop() {
				var v probe
				if err := json.Unmarshal(body, &v); err != nil {
					b.Fatal(err)
				}
			}
		})
		for _, shape := range []string{"flat", "samples", "references", "members", "deepest-allowed", "nested-objects", "nested-arrays", "numbers", "unknown-numbers"} {
			body := all[shape]
			b.Run(shape+"/"+sizeName(size), func(b *testing.B) {
				b.SetBytes(int64(len(body)))
				b.ReportAllocs()
				for b.Loop() {
					_ = decodeBody(body)
				}
			})
		}
	}
}

func sizeName(n int) string {
	if n >= 1<<20 {
		return "1MiB"
	}
	return "100KB"
}
