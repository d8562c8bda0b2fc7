package rf

import (
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"runtime"
	"slices"
	"strings"
	"testing"

	"rackpool/internal/jsonlimit"
)

// TestDecode: every way a body can be wrong is a Problem with the Base
// MessageId a client can act on, naming the property where there is one.
func TestDecode(t *testing.T) {
	type body struct {
		Name  string
		Count int
	}
	for _, c := range []struct {
		method, in string
		want       string // MessageId suffix; "" for success
		arg        string
	}{
		{"POST", `{"Name": "a", "Count": 2}`, "", ""},
		{"POST", `{"@odata.id": "/x", "Name": "a"}`, "", ""},
		{"POST", ``, "MalformedJSON", ""},
		{"POST", `{"Name": `, "MalformedJSON", ""},
		{"POST", `[1, 2]`, "MalformedJSON", ""},
		{"POST", `{"Name": "a"} {"Name": "b"}`, "MalformedJSON", ""},
		{"POST", `{"Count": "two"}`, "PropertyValueTypeError", "Count"},
		{"POST", `{"Colour": "red"}`, "PropertyUnknown", "Colour"},
		{"PATCH", `{"@odata.etag": "W/\"1\""}`, "NoOperation", ""},
		{"POST", `{"Name": "a", "Name": "b"}`, "PropertyDuplicate", "/Name"},
		{"POST", strings.Repeat(" ", 64) + `{"Name": "long"}`, "PayloadTooLarge", ""},
		{"POST", `null`, "MalformedJSON", ""},
		{"POST", `{"Name": "a"} x`, "MalformedJSON", ""},
		{"POST", `{"Name": "a", "\u004eame": "b"}`, "PropertyDuplicate", "/Name"},
		{"POST", `{"Name": "a"}` + "\n", "", ""},
	} {
		r := httptest.NewRequest(c.method, "/x", strings.NewReader(c.in))
		r.Body = http.MaxBytesReader(httptest.NewRecorder(), r.Body, 64)
		var v body
		err := Decode(r, &v, 64)
		if c.want == "" {
			if err != nil {
				t.Errorf("%s %q: %v", c.method, c.in, err)
			}
			continue
		}
		var p *Problem
		if !errors.As(err, &p) || p.ID != Registry+c.want || p.Status/100 != 4 {
			t.Errorf("%s %q = %v, want %s", c.method, c.in, err, c.want)
			continue
		}
		if c.arg != "" && !strings.Contains(p.Text, c.arg) {
			t.Errorf("%s %q: %q does not name %s", c.method, c.in, p.Text, c.arg)
		}
	}
}

// TestDuplicateMember: a member name repeated in one object is found at
// any depth and named by its JSON pointer; the same name in two objects,
// or in array elements, is not a duplicate.
func TestDuplicateMember(t *testing.T) {
	for in, want := range map[string]string{
		`{"UserName": "u", "RoleId": "ReadOnly", "RoleId": "Administrator"}`: "/RoleId",
		`{"Oem": {"Rackpool": {"Tenant": "a", "Tenant": "b"}}}`:              "/Oem/Rackpool/Tenant",
		`{"Links": [{"a": 1}, {"b": 1, "b": 2}]}`:                            "/Links/1/b",
		`{"a/b~": 1, "a/b~": 2}`:                                             "/a~1b~0",
		`{"a": {"x": 1}, "b": {"x": 1}, "c": [{"x": 1}, {"x": 1}]}`:          "",
		`{"a": [[1, {"y": [2]}], {"z": 3}], "b": 4}`:                         "",
		`{"a": 1`:                    "",
		`[{"a": 1, "a": 2}]`:         "/0/a",
		`{"a": 1, "\u0061": 2}`:      "/a",
		`{"a\"b": 1, "a\u0022b": 2}`: "/a\"b",
		`{"x": {"a": {}, "b": [], "c": {"a": 1}}, "y": {}}`:             "",
		`{"x": [{}, [], {"k": {"k": {"k": 1, "k": 2}}}]}`:               "/x/2/k/k/k",
		many(40) + `, "k39": 0}}`:                                       "/o/k39",
		many(40) + `, "k40": 0}}`:                                       "",
		strings.Repeat("[", 5000) + strings.Repeat("]", 5000):           "",
		strings.Repeat(`{"a":`, 5000) + "1" + strings.Repeat("}", 5000): "",
	} {
		if got := duplicateMember([]byte(in)); got != want {
			t.Errorf("duplicateMember(%.60q) = %q, want %q", in, got, want)
		}
	}
}

// many is an object "o" holding n members k0 to k(n-1), left open.
func many(n int) string {
	var b strings.Builder
	b.WriteString(`{"o": {"k0": 0`)
	for i := 1; i < n; i++ {
		fmt.Fprintf(&b, `, "k%d": %d`, i, i)
	}
	return b.String()
}

// TestDecodeDepthAndValues: a body nesting deeper than jsonlimit.MaxDepth
// is malformed and one of more than MaxValues values too large, each
// refused before it is decoded, with at most 8 bytes allocated per body
// byte and 8 MiB (the old decoder allocated gigabytes for these).
// The nested bodies are the ones that cost seconds and gigabytes when
// every level of nesting built its own path.
func TestDecodeDepthAndValues(t *testing.T) {
	nest := func(open, close string, n int) string {
		return strings.Repeat(open, n) + "1" + strings.Repeat(close, n)
	}
	for _, c := range []struct {
		name, body string
		want       string // MessageId suffix; "" for success
	}{
		{"deepest allowed", nest(`{"Oem":`, "}", jsonlimit.MaxDepth-1), "PropertyUnknown"},
		{"one level too deep", nest(`{"Oem":`, "}", jsonlimit.MaxDepth+1), "MalformedJSON"},
		{"50,000 nested objects (100 KB)", nest(`{"a":`, "}", 50000), "MalformedJSON"},
		{"200,000 nested arrays (400 KB)", `{"a":` + nest("[", "]", 200000) + "}", "MalformedJSON"},
		{"the most values", `{"Samples":[` + strings.Repeat("{},", MaxValues-3) + "{}]}", ""},
		{"a value too many", `{"Samples":[` + strings.Repeat("{},", MaxValues-2) + "{}]}", "PayloadTooLarge"},
	} {
		t.Run(c.name, func(t *testing.T) {
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			err := decodeBody(c.body)
			runtime.ReadMemStats(&after)
			alloc := after.TotalAlloc - before.TotalAlloc
			var p *Problem
			switch {
			case c.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case c.want != "" && (!errors.As(err, &p) || p.ID != Registry+c.want):
				t.Fatalf("got %v, want %s", err, c.want)
			}
			if limit := 8*uint64(len(c.body)) + 8<<20; alloc > limit {
				t.Errorf("%d bytes allocated for a body of %d, want at most %d", alloc, len(c.body), limit)
			}
		})
	}
}

// TestDecodeLogin: a login names both UserName and Password, as strings.
func TestDecodeLogin(t *testing.T) {
	for _, c := range []struct{ in, want, arg string }{
		{`{"UserName": "admin", "Password": ""}`, "", ""},
		{`{"Password": "x"}`, "PropertyMissing", "UserName"},
		{`{"UserName": "admin"}`, "PropertyMissing", "Password"},
		{`{"UserName": 7, "Password": "x"}`, "PropertyValueTypeError", "UserName"},
		{`{"UserName": "admin", "Password": "x", "Role": "Administrator"}`, "PropertyUnknown", "Role"},
	} {
		r := httptest.NewRequest("POST", SessionsPath, strings.NewReader(c.in))
		user, password, err := DecodeLogin(r, MaxBody)
		if c.want == "" {
			if err != nil || user != "admin" || password != "" {
				t.Errorf("%s: %q %q %v", c.in, user, password, err)
			}
			continue
		}
		var p *Problem
		if !errors.As(err, &p) || p.ID != Registry+c.want || !slices.Contains(p.Args, c.arg) {
			t.Errorf("%s: %v, want %s about %s", c.in, err, c.want, c.arg)
		}
	}
}
