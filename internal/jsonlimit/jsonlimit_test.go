package jsonlimit

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

func TestCheck(t *testing.T) {
	nest := func(open, close string, n int) string {
		return strings.Repeat(open, n) + "1" + strings.Repeat(close, n)
	}
	for _, c := range []struct {
		name   string
		doc    string
		offset int64 // -1: accepted
	}{
		{"flat", `{"a":1,"b":[1,2],"c":"x"}`, -1},
		{"objects at the limit", nest(`{"a":`, "}", 4), -1},
		{"objects past the limit", nest(`{"a":`, "}", 5), 20},
		{"arrays past the limit", nest("[", "]", 50000), 4},
		{"siblings do not add up", `[[[[1]],[[2]],[[3]]]]`, -1},
		{"brackets in strings", `{"a":"[[[[[[{{{{{{","b":"\"[[[[["}`, -1},
		{"escaped backslash ends the string", `{"a":"\\","b":[[[[[1]]]]]}`, 17},
		{"unterminated string", `{"a":"[[[[[[[[[`, -1},
		{"stray closers", `]]]]{"a":[[[[1]]]]}`, 12},
		{"empty", ``, -1},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := Check([]byte(c.doc), 4)
			var de *DepthError
			switch {
			case c.offset < 0 && err != nil:
				t.Fatalf("refused: %v", err)
			case c.offset >= 0 && !errors.As(err, &de):
				t.Fatalf("got %v, want a DepthError", err)
			case c.offset >= 0 && (de.Offset != c.offset || de.Limit != 4):
				t.Fatalf("got %+v, want offset %d limit 4", de, c.offset)
			}
		})
	}
}

// FuzzCheck: on well-formed JSON, Check refuses exactly the documents
// nesting deeper than the limit, measured here on the decoded value.
func FuzzCheck(f *testing.F) {
	for _, s := range []string{`{"a":[1,{"b":"]]"}]}`, `[[[[[[]]]]]]`, `"\\\""`, `{"a":{"a":{"a":{}}}}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var v any
		if json.Unmarshal(data, &v) != nil {
			_ = Check(data, 4) // must not panic on anything
			return
		}
		want := depth(v) > 4
		if got := Check(data, 4) != nil; got != want {
			t.Fatalf("Check says too deep %v, the decoded value nests %d", got, depth(v))
		}
	})
}

func depth(v any) int {
	d := 0
	switch v := v.(type) {
	case map[string]any:
		for _, x := range v {
			d = max(d, depth(x))
		}
		return d + 1
	case []any:
		for _, x := range v {
			d = max(d, depth(x))
		}
		return d + 1
	}
	return 0
}
