package base

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
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
		`{"a": 1`:            "",
		`[{"a": 1, "a": 2}]`: "/0/a",
		strings.Repeat("[", 5000) + strings.Repeat("]", 5000): "",
	} {
		if got := duplicateMember([]byte(in)); got != want {
			t.Errorf("duplicateMember(%.60q) = %q, want %q", in, got, want)
		}
	}
}
