package rf

import (
	"bytes"
	"encoding/json"
	"flag"
	"net/http/httptest"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"rackpool/internal/jsonlimit"
)

// FuzzOutline: on well-formed JSON within the depth limit, scanOutline
// finds the duplicate encoding/json's tokenizer finds (refDuplicate), the
// same top-level members and annotations, and the same number of values.
func FuzzOutline(f *testing.F) {
	for _, s := range []string{
		`{"a": 1, "b": [1, {"c": 2, "c": 3}]}`,
		`{"@odata.etag": "x", "Name": "n"}`,
		`{"a\u0062": 1, "ab": 2}`,
		`[[], {}, "x", null, true, -1.5e3]`,
		many(20) + `, "k3": 1}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		o := scanOutline(data) // never panics, whatever data is
		if !json.Valid(data) || jsonlimit.Check(data, jsonlimit.MaxDepth) != nil {
			return
		}
		if want := refDuplicate(data); o.dup != want {
			t.Fatalf("duplicate %q, want %q", o.dup, want)
		}
		if o.dup != "" {
			return
		}
		if want := countValues(data); o.values != min(want, MaxValues+1) {
			t.Fatalf("%d values, want %d", o.values, want)
		}
		var top map[string]json.RawMessage
		isObject := bytes.HasPrefix(bytes.TrimLeft(data, " \t\r\n"), []byte("{"))
		if o.object != isObject {
			t.Fatalf("object %v, want %v", o.object, isObject)
		}
		if !isObject || o.values > MaxValues || json.Unmarshal(data, &top) != nil {
			// (json.Unmarshal fails where a number is too large for a
			// float64; that is the decoder's to say.)
			return
		}
		annotations := 0
		for k := range top {
			if strings.HasPrefix(k, "@odata.") {
				annotations++
			}
		}
		if o.members != len(top) || o.annotations != annotations {
			t.Fatalf("%d members, %d annotations; want %d, %d", o.members, o.annotations, len(top), annotations)
		}
	})
}

// refDuplicate is duplicateMember as encoding/json's tokenizer sees it:
// slow (a path per level), but plainly right.
func refDuplicate(data []byte) string {
	type frame struct {
		keys    map[string]bool
		wantKey bool
		key     string
		index   int
		path    string
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	var stack []*frame
	for {
		tok, err := dec.Token()
		if err != nil {
			return ""
		}
		if d, ok := tok.(json.Delim); ok && (d == '}' || d == ']') {
			stack = stack[:len(stack)-1]
			continue
		}
		var path string
		if len(stack) > 0 {
			top := stack[len(stack)-1]
			switch {
			case top.keys != nil && top.wantKey:
				key := tok.(string)
				if top.keys[key] {
					return top.path + "/" + pointerEscape.Replace(key)
				}
				top.keys[key], top.key, top.wantKey = true, key, false
				continue
			case top.keys != nil:
				path, top.wantKey = top.path+"/"+pointerEscape.Replace(top.key), true
			default:
				path = top.path + "/" + strconv.Itoa(top.index)
				top.index++
			}
		}
		switch tok {
		case json.Delim('{'):
			stack = append(stack, &frame{keys: map[string]bool{}, wantKey: true, path: path})
		case json.Delim('['):
			stack = append(stack, &frame{path: path})
		}
	}
}

// countValues counts the values of data, a well-formed document without
// duplicate names, as encoding/json decodes them.
func countValues(data []byte) int {
	var v any
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber() // numbers too large for a float64 are values too
	if dec.Decode(&v) != nil {
		return -1
	}
	var count func(v any) int
	count = func(v any) int {
		n := 1
		switch v := v.(type) {
		case map[string]any:
			for _, x := range v {
				n += count(x)
			}
		case []any:
			for _, x := range v {
				n += count(x)
			}
		}
		return n
	}
	return count(v)
}

// FuzzDecodeBounds: a body of up to 1 MiB (the services' MaxBody), any
// head followed by any unit repeated, costs Decode at most 8 bytes
// allocated per body byte plus 8 MiB, whatever it holds. When fuzzing
// (-fuzz), its time is also held to 10 times that of a body of the same
// size holding one string, plus 50 ms; a plain test run asserts no time.
func FuzzDecodeBounds(f *testing.F) {
	nest := func(s string, n int) []byte { return []byte(strings.Repeat(s, n)) }
	f.Add([]byte(`{"a":`), []byte(`{"a":`), uint32(100<<10))
	f.Add([]byte(`{"a":`), []byte(`[`), uint32(400<<10))
	f.Add([]byte(`{"Samples":[`), []byte(`{},`), uint32(1<<20))
	f.Add([]byte(`{"Samples":[`), []byte(`1,`), uint32(1<<20))
	f.Add([]byte(`{"Links":{"ResourceBlocks":[`), []byte(`{"@odata.id":"/x"},`), uint32(1<<20))
	f.Add(nest(`{"Oem":`, 60), []byte(`{"k":1,`), uint32(1<<20))
	f.Add([]byte(`{"Name":"`), []byte(`é`), uint32(1<<20))
	timed := flag.Lookup("test.fuzz").Value.String() != ""
	f.Fuzz(func(t *testing.T, head, unit []byte, size uint32) {
		n := int(size % (1<<20 + 1))
		if len(unit) == 0 || len(head) > n {
			return
		}
		body := string(head) + strings.Repeat(string(unit), (n-len(head))/len(unit))
		flat := `{"Name":"` + strings.Repeat("x", max(0, len(body)-11)) + `"}`
		alloc, took := measureDecode(body)
		if limit := 8*uint64(len(body)) + 8<<20; alloc > limit {
			t.Fatalf("%d bytes allocated for a body of %d bytes (%.40q…), want at most %d", alloc, len(body), body, limit)
		}
		if !timed {
			return
		}
		_, flatTook := measureDecode(flat)
		if took > 10*flatTook+50*time.Millisecond {
			t.Fatalf("%v for a body of %d bytes (%.40q…), %v for a string as long", took, len(body), body, flatTook)
		}
	})
}

// measureDecode decodes body as a request's and returns the bytes that
// allocated and the time it took.
func measureDecode(body string) (uint64, time.Duration) {
	var before, after runtime.MemStats
	r := httptest.NewRequest("POST", "/x", strings.NewReader(body))
	runtime.ReadMemStats(&before)
	start := time.Now()
	var v probe
	_ = Decode(r, &v, 1<<20)
	took := time.Since(start)
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc, took
}
