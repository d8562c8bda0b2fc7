package odata

import (
	"encoding/json"
	"net/http"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"rackpool/internal/rf"
)

// render writes a parsed filter as an S-expression, so that a test sees
// how it grouped.
func render(n *filterNode) string {
	switch n.op {
	case filterOr, filterAnd, filterNot:
		name := map[filterOp]string{filterOr: "or", filterAnd: "and", filterNot: "not"}[n.op]
		parts := []string{name}
		for _, k := range n.kids {
			parts = append(parts, render(k))
		}
		return "(" + strings.Join(parts, " ") + ")"
	}
	return "(" + n.cmp + " " + renderOperand(n.l) + " " + renderOperand(n.r) + ")"
}

func renderOperand(o filterOperand) string {
	if o.path != nil {
		return strings.Join(o.path, "/")
	}
	switch o.lit.kind {
	case kindNull:
		return "null"
	case kindBool:
		return strconv.FormatBool(o.lit.b)
	case kindString:
		return strconv.Quote(o.lit.s)
	}
	return o.lit.s
}

// treeDepth is the depth of a parsed filter, a comparison counting 1.
func treeDepth(n *filterNode) int {
	d := 0
	for _, k := range n.kids {
		d = max(d, treeDepth(k))
	}
	return d + 1
}

func comparisons(n *filterNode) int {
	if n.op == filterCmp {
		return 1
	}
	c := 0
	for _, k := range n.kids {
		c += comparisons(k)
	}
	return c
}

// filterGood are filters that parse, with how they group.
var filterGood = []struct{ filter, tree string }{
	{"SystemType eq 'Physical'", `(eq SystemType "Physical")`},
	{"Status/Health eq 'OK'", `(eq Status/Health "OK")`},
	{"Oem/Rackpool/CompositionState eq 'Composed'", `(eq Oem/Rackpool/CompositionState "Composed")`},
	{"ProcessorSummary/CoreCount gt 16", `(gt ProcessorSummary/CoreCount 16)`},
	{"X ge -3.25 and X le 0.5", `(and (ge X -3.25) (le X 0.5))`},
	{"A eq 1 or B eq 2 and C eq 3", `(or (eq A 1) (and (eq B 2) (eq C 3)))`},
	{"(A eq 1 or B eq 2) and C eq 3", `(and (or (eq A 1) (eq B 2)) (eq C 3))`},
	{"not A eq 1 and B eq 2", `(and (not (eq A 1)) (eq B 2))`},
	{"not (A eq 1 and B eq 2)", `(not (and (eq A 1) (eq B 2)))`},
	{"not not A eq true", `(not (not (eq A true)))`},
	{"A eq 1 or B eq 2 or C eq 3", `(or (eq A 1) (eq B 2) (eq C 3))`},
	{"A eq 1 and B eq 2 and C eq 3", `(and (eq A 1) (eq B 2) (eq C 3))`},
	{"(((A eq null)))", `(eq A null)`},
	{"Name eq 'O''Brien'", `(eq Name "O'Brien")`},
	{"Name eq ''", `(eq Name "")`},
	{"Name eq 'and or not'", `(eq Name "and or not")`},
	{"Name eq 'ünïcode'", `(eq Name "ünïcode")`},
	{"\tA ne false\t", `(ne A false)`},
	{"'On' eq PowerState", `(eq "On" PowerState)`},
	{"A lt B", `(lt A B)`},
	{"Members@odata.count gt 0", `(gt Members@odata.count 0)`},
	{"@odata.id eq '/redfish/v1/Systems/host1'", `(eq @odata.id "/redfish/v1/Systems/host1")`},
	{"Not eq 1", `(eq Not 1)`}, // keywords are lowercase: Not is a property
	{"A eq 1 and(B eq 2)", `(and (eq A 1) (eq B 2))`},
	{"(A eq 1)or(B eq 2)", `(or (eq A 1) (eq B 2))`},
}

func TestFilterParse(t *testing.T) {
	for _, tc := range filterGood {
		f, err := parseFilter(tc.filter)
		if err != nil {
			t.Errorf("%q: %s: %s", tc.filter, err.Text, err.Resolution)
			continue
		}
		if got := render(f.root); got != tc.tree {
			t.Errorf("%q: %s, want %s", tc.filter, got, tc.tree)
		}
	}
}

// filterBad are malformed filters with the resolution they get.
var filterBad = []struct{ filter, resolution string }{
	{"", "At position 1: expected a comparison; the filter is empty."},
	{"   ", "At position 4: expected a comparison; the filter is empty."},
	{"Status/Health eq", "At position 17: expected a value after 'eq', found the end of the filter."},
	{"Status/Health eq ", "At position 18: expected a value after 'eq', found the end of the filter."},
	{"SystemType", "At position 11: expected a comparison operator (eq, ne, gt, ge, lt or le) after 'SystemType', found the end of the filter."},
	{"SystemType EQ 'Physical'", "At position 12: expected a comparison operator (eq, ne, gt, ge, lt or le) after 'SystemType', found 'EQ' (keywords are lowercase: eq)."},
	{"SystemType = 'Physical'", "At position 12: unexpected character '='."},
	{`SystemType eq "Physical"`, `At position 15: unexpected '"'; write strings in single quotes: 'On'.`},
	{"SystemType eq 'Physical", "At position 15: the string that starts here has no closing quote."},
	{"SystemType eq 'it''s", "At position 15: the string that starts here has no closing quote."},
	{"A eq 1 AND B eq 2", "At position 8: expected 'and', 'or' or the end of the filter, found 'AND' (keywords are lowercase: and)."},
	{"NOT (A eq 1)", "At position 5: expected a comparison operator (eq, ne, gt, ge, lt or le) after 'NOT', found '(' (keywords are lowercase: not)."},
	{"A eq 1 B eq 2", "At position 8: expected 'and', 'or' or the end of the filter, found 'B'."},
	{"A eq 1 and", "At position 11: expected a comparison, 'not' or '(', found the end of the filter."},
	{"A eq 1 or or B eq 2", "At position 11: expected a comparison, 'not' or '(', found 'or'."},
	{"(A eq 1", "At position 8: expected ')' to close the '(' at position 1."},
	{"(A eq 1 B", "At position 9: expected 'and', 'or' or ')' to close the '(' at position 1, found 'B'."},
	{"A eq 1)", "At position 7: ')' has no matching '('."},
	{"()", "At position 2: expected a comparison inside '()'."},
	{"not", "At position 4: expected a comparison or '(' after 'not'."},
	{"eq 1", "At position 1: expected a comparison, 'not' or '(', found 'eq'."},
	{"A eq eq", "At position 6: expected a value after 'eq', found 'eq'."},
	{"A eq 1.", "At position 6: malformed number '1.'; write numbers as 42, -3 or 2.5."},
	{"A eq -", "At position 6: malformed number '-'; write numbers as 42, -3 or 2.5."},
	{"A eq 12ab", "At position 6: malformed number '12ab'; write numbers as 42, -3 or 2.5."},
	{"A eq 1.2.3", "At position 6: malformed number '1.2.3'; write numbers as 42, -3 or 2.5."},
	{"A gt true", "At position 3: 'gt' orders numbers and strings; true, false and null compare only with eq and ne."},
	{"A le null", "At position 3: 'le' orders numbers and strings; true, false and null compare only with eq and ne."},
	{"Status/ eq 'OK'", "At position 8: expected a property name after '/' in 'Status/'."},
	{"Status//Health eq 'OK'", "At position 8: expected a property name after '/' in 'Status//Health'."},
	{"Status/1 eq 'OK'", "At position 8: expected a property name after '/' in 'Status/1'."},
	{"Name eq 'é' and ?", "At position 17: unexpected character '?'."}, // positions count characters, not bytes
	{"A eq 1\n", "At position 7: unexpected character '\\n'."},
}

func TestFilterParseErrors(t *testing.T) {
	for _, tc := range filterBad {
		_, err := parseFilter(tc.filter)
		if err == nil {
			t.Errorf("%q parsed", tc.filter)
			continue
		}
		if err.Status != http.StatusBadRequest || err.ID != rf.Registry+"QueryParameterValueFormatError" {
			t.Errorf("%q: %d %s", tc.filter, err.Status, err.ID)
		}
		if err.Resolution != tc.resolution {
			t.Errorf("%q:\n got %s\nwant %s", tc.filter, err.Resolution, tc.resolution)
		}
		if len(err.Args) != 2 || err.Args[0] != tc.filter || err.Args[1] != "$filter" {
			t.Errorf("%q: message arguments %q", tc.filter, err.Args)
		}
	}
}

// TestFilterLimits: too long, too deep and too many comparisons are 400
// QueryParameterOutOfRange, and the limits themselves are accepted.
func TestFilterLimits(t *testing.T) {
	cmp := "Id eq 'x'"
	chain := func(n int) string { return strings.TrimSuffix(strings.Repeat(cmp+" or ", n), " or ") }
	parens := func(n int) string { return strings.Repeat("(", n) + cmp + strings.Repeat(")", n) }
	nots := func(n int) string { return strings.Repeat("not ", n) + cmp }
	long := "Name eq '" + strings.Repeat("é", maxFilterLen-10) + "'" // 4096 characters, more bytes
	for _, tc := range []struct {
		name, filter string
		ok           bool
		resolution   string
	}{
		{"longest", long, true, ""},
		{"too long", long + " ", false, "The filter has 4097 characters; shorten it to at most 4096."},
		{"10,000 parentheses", strings.Repeat("(", 10000), false, "The filter has 10000 characters; shorten it to at most 4096."},
		{"deepest parentheses", parens(maxFilterDepth), true, ""},
		{"parentheses too deep", parens(maxFilterDepth + 1), false, "At position 33: the filter nests deeper than 32 levels; simplify it."},
		{"4,000 parentheses", strings.Repeat("(", 4000), false, "At position 33: the filter nests deeper than 32 levels; simplify it."},
		{"deepest not", nots(maxFilterDepth), true, ""},
		{"not too deep", nots(maxFilterDepth + 1), false, "At position 129: the filter nests deeper than 32 levels; simplify it."},
		{"not and parentheses", strings.Repeat("not (", 17) + cmp + strings.Repeat(")", 17), false, "At position 81: the filter nests deeper than 32 levels; simplify it."},
		{"most comparisons", chain(maxFilterComparisons), true, ""},
		{"too many comparisons", chain(maxFilterComparisons + 1), false, "At position 3329: the filter has more than 256 comparisons; simplify it."},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, err := parseFilter(tc.filter)
			if tc.ok {
				if err != nil {
					t.Fatalf("%s", err.Resolution)
				}
				if d := treeDepth(f.root); d > filterTreeDepth {
					t.Fatalf("tree depth %d", d)
				}
				return
			}
			if err == nil {
				t.Fatalf("parsed")
			}
			if err.Status != http.StatusBadRequest || err.ID != rf.Registry+"QueryParameterOutOfRange" || err.Resolution != tc.resolution {
				t.Fatalf("%d %s: %s", err.Status, err.ID, err.Resolution)
			}
			if echo := err.Args[0]; utf8.RuneCountInString(echo) > maxFilterLen+3 {
				t.Fatalf("the message quotes %d characters", utf8.RuneCountInString(echo))
			}
		})
	}
}

// filterMember is a member body as the service renders one.
const filterMember = `{
	"@odata.id": "/redfish/v1/Systems/host1",
	"Id": "host1",
	"SystemType": "Physical",
	"PowerState": "On",
	"Status": {"State": "Enabled", "Health": "OK"},
	"ProcessorSummary": {"CoreCount": 64, "Count": 1},
	"MemorySummary": {"TotalSystemMemoryGiB": 512.5},
	"Big": 9007199254740993,
	"Reserved": false,
	"Description": null,
	"ResourceBlockType": ["Compute"],
	"Links": {"Chassis": [{"@odata.id": "/redfish/v1/Chassis/rack1"}]},
	"Oem": {"Rackpool": {"Name": "O'Brien"}}
}`

func TestFilterEval(t *testing.T) {
	member, ok := DecodeObject([]byte(filterMember))
	if !ok {
		t.Fatal("member does not decode")
	}
	for _, tc := range []struct {
		filter string
		want   bool
	}{
		{"SystemType eq 'Physical'", true},
		{"SystemType ne 'Physical'", false},
		{"SystemType eq 'physical'", false},
		{"Status/Health eq 'OK'", true},
		{"Status/Health eq 'OK' and PowerState eq 'On'", true},
		{"Status/Health eq 'OK' and PowerState eq 'Off'", false},
		{"Status/Health eq 'Critical' or PowerState eq 'On'", true},
		{"not (Status/Health eq 'Critical')", true},
		{"not Status/Health eq 'OK'", false},
		{"ProcessorSummary/CoreCount gt 32", true},
		{"ProcessorSummary/CoreCount ge 64", true},
		{"ProcessorSummary/CoreCount gt 64", false},
		{"ProcessorSummary/CoreCount eq 64.0", true},
		{"ProcessorSummary/CoreCount lt 64.5", true},
		{"ProcessorSummary/CoreCount gt -1", true},
		{"MemorySummary/TotalSystemMemoryGiB gt 512", true},
		{"MemorySummary/TotalSystemMemoryGiB le 512.49", false},
		{"Big gt 9007199254740992", true}, // exact, not float64
		{"Big eq 9007199254740993.0", true},
		{"Id gt 'host0'", true},  // strings compare lexically
		{"Id lt 'host10'", true}, // a prefix sorts first
		{"Id lt 'host0'", false},
		{"Id ge 'host1'", true},
		{"ProcessorSummary/CoreCount eq '64'", false}, // types differ
		{"ProcessorSummary/CoreCount ne '64'", false},
		{"SystemType eq 1", false},
		{"Reserved eq false", true},
		{"Reserved ne true", true},
		{"Reserved eq 'false'", false},
		{"Description eq null", true}, // null
		{"Description ne null", false},
		{"Description eq 'x'", false},
		{"Description ne 'x'", false},
		{"Missing eq null", true}, // a missing property is null
		{"Missing ne null", false},
		{"Missing eq 'x'", false},
		{"Missing ne 'x'", false},
		{"Missing gt 1", false},
		{"Status/Missing eq null", true},
		{"Status/Health/Deeper eq null", true}, // under a string: missing
		{"SystemType ne null", true},
		{"null eq Missing", true},
		{"Status eq null", false}, // an object has a value, which compares with nothing
		{"Status ne null", true},
		{"ResourceBlockType eq 'Compute'", false}, // arrays match nothing
		{"Oem/Rackpool/Name eq 'O''Brien'", true},
		{"Id eq Id", true},
		{"Id ne SystemType", true},
		{"Missing eq Description", true},
		{"Missing ne SystemType", false},
		{"'a' lt 'b'", true},
		{"@odata.id eq '/redfish/v1/Systems/host1'", true},
	} {
		f, err := parseFilter(tc.filter)
		if err != nil {
			t.Errorf("%q: %s", tc.filter, err.Resolution)
			continue
		}
		if got := f.root.eval(member); got != tc.want {
			t.Errorf("%q: %v, want %v", tc.filter, got, tc.want)
		}
	}
}

// TestFilterMembers: inline members are tested as they are; Members and
// Members@odata.count are replaced; a property no member has is a 400.
func TestFilterMembers(t *testing.T) {
	coll := func() map[string]any {
		body, _ := DecodeObject([]byte(`{"Members": [{"Id": "a", "N": 1}, {"Id": "b", "N": 2}, {"Id": "c"}, "junk"],
			"Members@odata.count": 4, "Members@odata.nextLink": "/x?$skip=4"}`))
		return body
	}
	for _, tc := range []struct {
		filter string
		ids    []string
		status int
	}{
		{"N ge 1", []string{"a", "b"}, 200},
		{"N eq null", []string{"c"}, 200},
		{"not (N eq 2)", []string{"a", "c"}, 200},
		{"Id eq 'z'", nil, 200},
		{"M eq 1", nil, 400},
		{"N eq 1 or Status/Health eq 'OK'", nil, 400},
	} {
		f, err := parseFilter(tc.filter)
		if err != nil {
			t.Fatalf("%q: %s", tc.filter, err.Resolution)
		}
		body := coll()
		e := f.members(body, &expander{cache: map[string]fetched{}})
		if tc.status != 200 {
			if e == nil || e.Status != tc.status || e.ID != rf.Registry+"QueryParameterValueError" || e.Args[0] != "$filter" {
				t.Fatalf("%q: %v", tc.filter, e)
			}
			continue
		}
		if e != nil {
			t.Fatalf("%q: %s", tc.filter, e.Resolution)
		}
		var ids []string
		for _, m := range body["Members"].([]any) {
			ids = append(ids, m.(map[string]any)["Id"].(string))
		}
		if strings.Join(ids, ",") != strings.Join(tc.ids, ",") || body["Members@odata.count"] != len(tc.ids) {
			t.Fatalf("%q: %v, count %v", tc.filter, ids, body["Members@odata.count"])
		}
		if _, ok := body["Members@odata.nextLink"]; ok {
			t.Fatalf("%q: nextLink kept", tc.filter)
		}
	}
	// References are tested on the body the expander reads; one it cannot
	// read (no body) is dropped and does not count for unknown properties.
	x := &expander{cache: map[string]fetched{
		"/redfish/v1/Systems/a": {body: map[string]any{"Id": "a", "N": json.Number("1")}},
		"/redfish/v1/Systems/b": {},
	}}
	refs := func() map[string]any {
		return map[string]any{"Members": []any{map[string]any{"@odata.id": "/redfish/v1/Systems/a"}, map[string]any{"@odata.id": "/redfish/v1/Systems/b"}}}
	}
	for _, tc := range []struct {
		filter string
		kept   int
		ok     bool
	}{{"N eq 1", 1, true}, {"not (N eq 1)", 0, true}, {"Id ne null", 1, true}, {"Secret eq 1", 0, false}} {
		f, _ := parseFilter(tc.filter)
		body := refs()
		e := f.members(body, x)
		if (e == nil) != tc.ok || tc.ok && len(body["Members"].([]any)) != tc.kept {
			t.Fatalf("%q: %v %v", tc.filter, e, body)
		}
		if tc.ok && tc.kept == 1 && !reflect.DeepEqual(body["Members"].([]any)[0], map[string]any{"@odata.id": "/redfish/v1/Systems/a"}) {
			t.Fatalf("%q: the member kept is not the reference: %v", tc.filter, body["Members"])
		}
	}

	// No members: nothing to test, no property unknown.
	f, _ := parseFilter("Nothing eq 1")
	body := map[string]any{"Members": []any{}}
	if e := f.members(body, &expander{cache: map[string]fetched{}}); e != nil || len(body["Members"].([]any)) != 0 {
		t.Fatalf("empty collection: %v %v", e, body)
	}
}

var positionRE = regexp.MustCompile(`^At position ([0-9]+): `)

// FuzzFilter parses arbitrary filters: no panic; a filter that parses is
// within the limits and evaluates; a refusal is a 400 whose position is
// inside the filter (or just past its end).
func FuzzFilter(f *testing.F) {
	for _, tc := range filterGood {
		f.Add(tc.filter)
	}
	for _, tc := range filterBad {
		f.Add(tc.filter)
	}
	f.Add(strings.Repeat("(", 40) + "A eq 1" + strings.Repeat(")", 40))
	f.Add(strings.Repeat("not ", 40) + "A eq 1")
	member, _ := DecodeObject([]byte(filterMember))
	f.Fuzz(func(t *testing.T, s string) {
		flt, err := parseFilter(s)
		if err != nil {
			if err.Status != http.StatusBadRequest {
				t.Fatalf("%q: status %d", s, err.Status)
			}
			if m := positionRE.FindStringSubmatch(err.Resolution); m != nil {
				n, _ := strconv.Atoi(m[1])
				if n < 1 || n > utf8.RuneCountInString(s)+1 {
					t.Fatalf("%q: position %d: %s", s, n, err.Resolution)
				}
			} else if !strings.HasPrefix(err.Resolution, "The filter has ") {
				t.Fatalf("%q: no position: %s", s, err.Resolution)
			}
			if _, jerr := json.Marshal(err.Args); jerr != nil {
				t.Fatalf("%q: %v", s, jerr)
			}
			return
		}
		if d := treeDepth(flt.root); d > filterTreeDepth {
			t.Fatalf("%q: tree depth %d > %d", s, d, filterTreeDepth)
		}
		if n := comparisons(flt.root); n > maxFilterComparisons || n == 0 {
			t.Fatalf("%q: %d comparisons", s, n)
		}
		_ = flt.root.eval(member)
	})
}
