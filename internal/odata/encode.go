package odata

import (
	"encoding/json"
	"math"
	"slices"
	"strconv"
	"strings"

	"rackpool/internal/rf"
)

// Marshal encodes v as json.Marshal does, byte for byte, without
// reflection for the values resource bodies are built of: maps with string
// keys (in sorted key order), slices, strings, booleans, integers,
// float64s, references and raw JSON. Anything else (float32s, named types, types with
// their own encoding) and any string that needs escaping is encoded by
// json.Marshal, so the output is always encoding/json's. An expanded page
// encodes each of its members' bodies; reflection made that most of the
// page's cost (docs/benchmarks.md, "Collections at scale").
func Marshal(v any) ([]byte, error) {
	return appendValue(make([]byte, 0, 1024), v)
}

func appendValue(b []byte, v any) ([]byte, error) {
	switch x := v.(type) {
	case nil:
		return append(b, "null"...), nil
	case string:
		return appendString(b, x)
	case bool:
		return strconv.AppendBool(b, x), nil
	case int:
		return strconv.AppendInt(b, int64(x), 10), nil
	case int32:
		return strconv.AppendInt(b, int64(x), 10), nil
	case int64:
		return strconv.AppendInt(b, x, 10), nil
	case uint32:
		return strconv.AppendUint(b, uint64(x), 10), nil
	case uint64:
		return strconv.AppendUint(b, x, 10), nil
	case float64:
		return appendFloat(b, x)
	case json.RawMessage:
		if x == nil {
			return append(b, "null"...), nil
		}
		return appendMarshal(b, x) // compacted and checked, as json.Marshal does
	case rf.ODataID:
		return appendRef(b, x)
	case []rf.ODataID:
		return appendSlice(b, x, appendRef)
	case []string:
		return appendSlice(b, x, appendString)
	case []any:
		return appendSlice(b, x, appendValue)
	case []map[string]any:
		return appendSlice(b, x, func(b []byte, m map[string]any) ([]byte, error) { return appendValue(b, m) })
	case map[string]any:
		if x == nil {
			return append(b, "null"...), nil
		}
		return appendMap(b, x, appendValue)
	case map[string]string:
		if x == nil {
			return append(b, "null"...), nil
		}
		return appendMap(b, x, appendString)
	}
	return appendMarshal(b, v)
}

// AppendString appends s quoted as json.Marshal quotes it: for a body
// written by hand (Renderer).
func AppendString(b []byte, s string) []byte {
	b, _ = appendString(b, s) // a string always encodes
	return b
}

// AppendJoined appends the concatenation of parts, quoted, without
// building it.
func AppendJoined(b []byte, parts ...string) []byte {
	for _, p := range parts {
		if !plain(p) {
			return AppendString(b, strings.Join(parts, ""))
		}
	}
	b = append(b, '"')
	for _, p := range parts {
		b = append(b, p...)
	}
	return append(b, '"')
}

// AppendFloat appends f as json.Marshal writes a float64; NaN and the
// infinities are its error.
func AppendFloat(b []byte, f float64) ([]byte, error) { return appendFloat(b, f) }

// AppendStrings appends ss as json.Marshal writes a []string (null when
// nil).
func AppendStrings(b []byte, ss []string) []byte {
	b, _ = appendSlice(b, ss, appendString)
	return b
}

// AppendRefs appends refs as json.Marshal writes a []rf.ODataID (null
// when nil).
func AppendRefs(b []byte, refs []rf.ODataID) []byte {
	b, _ = appendSlice(b, refs, appendRef)
	return b
}

// appendFloat writes f as encoding/json does (ES6 number formatting:
// exponent form below 1e-6 and from 1e21, the exponent without leading
// zeros); NaN and infinities are json.Marshal's error.
func appendFloat(b []byte, f float64) ([]byte, error) {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return appendMarshal(b, f)
	}
	format := byte('f')
	if a := math.Abs(f); a != 0 && (a < 1e-6 || a >= 1e21) {
		format = 'e'
	}
	b = strconv.AppendFloat(b, f, format, -1, 64)
	if format == 'e' {
		// clean up e-09 to e-9
		if n := len(b); n >= 4 && b[n-4] == 'e' && b[n-3] == '-' && b[n-2] == '0' {
			b[n-2] = b[n-1]
			b = b[:n-1]
		}
	}
	return b, nil
}

// appendRef writes a reference, {"@odata.id": ...}.
func appendRef(b []byte, r rf.ODataID) ([]byte, error) {
	b = append(b, `{"@odata.id":`...)
	b, err := appendString(b, r.ID)
	return append(b, '}'), err
}

// appendSlice writes an array of xs, each by value; a nil slice is
// null, as encoding/json writes it.
func appendSlice[V any](b []byte, xs []V, value func([]byte, V) ([]byte, error)) ([]byte, error) {
	if xs == nil {
		return append(b, "null"...), nil
	}
	b = append(b, '[')
	for i, x := range xs {
		if i > 0 {
			b = append(b, ',')
		}
		var err error
		if b, err = value(b, x); err != nil {
			return b, err
		}
	}
	return append(b, ']'), nil
}

// appendMap writes an object of m's entries in sorted key order, each
// value by value.
func appendMap[V any](b []byte, m map[string]V, value func([]byte, V) ([]byte, error)) ([]byte, error) {
	type entry struct {
		k string
		v V
	}
	var small [32]entry
	es := small[:0]
	for k, v := range m {
		es = append(es, entry{k, v})
	}
	slices.SortFunc(es, func(a, b entry) int { return strings.Compare(a.k, b.k) })
	b = append(b, '{')
	for i, e := range es {
		if i > 0 {
			b = append(b, ',')
		}
		var err error
		if b, err = appendString(b, e.k); err != nil {
			return b, err
		}
		b = append(b, ':')
		if b, err = value(b, e.v); err != nil {
			return b, err
		}
	}
	return append(b, '}'), nil
}

// appendString quotes s; a string with anything json.Marshal escapes
// (quotes, backslashes, control characters, <, > and &, anything beyond
// ASCII) is left to it.
func appendString(b []byte, s string) ([]byte, error) {
	if !plain(s) {
		return appendMarshal(b, s)
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"'), nil
}

// plain says whether s is written between quotes as it is.
func plain(s string) bool {
	for i := 0; i < len(s); i++ {
		if !plainByte[s[i]] {
			return false
		}
	}
	return true
}

// plainByte is the bytes json.Marshal writes as they are: printable
// ASCII but for quotes, backslashes, <, > and &.
var plainByte = func() (t [256]bool) {
	for c := 0x20; c < 0x7f; c++ {
		t[c] = c != '"' && c != '\\' && c != '<' && c != '>' && c != '&'
	}
	return t
}()

func appendMarshal(b []byte, v any) ([]byte, error) {
	raw, err := json.Marshal(v)
	if err != nil {
		return b, err
	}
	return append(b, raw...), nil
}
