package odata

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"

	"rackpool/internal/rf"
)

// MaxExpandLevels is the largest $levels (ServiceRoot
// ProtocolFeaturesSupported.ExpandQuery.MaxLevels).
const MaxExpandLevels = 3

// expandKind is the $expand option: which references are inlined.
type expandKind byte

const (
	expandNone        expandKind = 0
	expandAll         expandKind = '*' // every reference
	expandSubordinate expandKind = '.' // references not under Links
	expandLinks       expandKind = '~' // references under Links
)

// Query is the parsed query of a GET or HEAD. The zero value (as parsed
// from an empty query) asks for nothing.
type Query struct {
	only        bool
	top, skip   int // meaningful when hasTop, hasSkip
	hasTop      bool
	hasSkip     bool
	expand      expandKind
	expandValue string // $expand as sent (unescaped), for its error
	levels      int
	sel         *selection // nil: every property
	filter      *filter    // nil: every member
	params      []queryParam
	other       []string // the parameters without $ (other than only), as sent
}

// queryParam is one $-parameter as sent, kept to build nextLink.
type queryParam struct{ key, raw string }

// supportedParams are the $-parameters the service implements.
var supportedParams = map[string]bool{"$select": true, "$expand": true, "$levels": true, "$top": true, "$skip": true,
	"$filter": true}

// Parse parses a raw query string. Parameters without $ other than only
// are ignored. An unsupported $-parameter is a 501 even when another
// parameter is also malformed.
func Parse(raw string) (*Query, *rf.Problem) {
	q := &Query{}
	vals := map[string]string{}
	for _, pair := range strings.Split(raw, "&") {
		if pair == "" {
			continue
		}
		rk, rv, _ := strings.Cut(pair, "=")
		key, err := url.QueryUnescape(rk)
		if err != nil {
			if strings.HasPrefix(rk, "$") {
				return nil, errFormat(rv, rk)
			}
			continue
		}
		if key != "only" && !strings.HasPrefix(key, "$") {
			q.other = append(q.other, pair) // kept in nextLink: the resource's own parameters
			continue
		}
		if key != "only" && !supportedParams[key] {
			return nil, errUnsupported(key)
		}
		val, err := url.QueryUnescape(rv)
		if err != nil {
			return nil, errFormat(rv, key)
		}
		if _, dup := vals[key]; dup {
			return nil, errFormat(val, key).Resolve("Give the query parameter " + key + " once.")
		}
		vals[key] = val
		if key != "only" {
			q.params = append(q.params, queryParam{key: key, raw: pair})
		}
	}
	// Unsupported parameters have been refused; now the values.
	var err *rf.Problem
	if v, ok := vals["only"]; ok {
		if v != "" {
			return nil, errFormat(v, "only").Resolve("Give only without a value: ?only.")
		}
		if len(q.params) > 0 {
			return nil, Combination("only cannot be combined with other query parameters.")
		}
		q.only = true
	}
	if v, ok := vals["$top"]; ok {
		if q.top, err = parseCount(v, "$top"); err != nil {
			return nil, err
		}
		q.hasTop = true
	}
	if v, ok := vals["$skip"]; ok {
		if q.skip, err = parseCount(v, "$skip"); err != nil {
			return nil, err
		}
		q.hasSkip = true
	}
	if v, ok := vals["$expand"]; ok {
		if q.expand, q.levels, err = parseExpand(v); err != nil {
			return nil, err
		}
		q.expandValue = v
	}
	if v, ok := vals["$levels"]; ok {
		// OData puts $levels inside $expand's value; a separate $levels is
		// accepted as a convenience, once, next to $expand.
		if q.expand == expandNone || strings.Contains(vals["$expand"], "(") {
			return nil, Combination("$levels needs $expand and is given once: $expand=.($levels=2).")
		}
		if q.levels, err = parseLevels(v); err != nil {
			return nil, err
		}
	}
	if v, ok := vals["$select"]; ok {
		if q.sel, err = parseSelect(v); err != nil {
			return nil, err
		}
	}
	if v, ok := vals["$filter"]; ok {
		if q.filter, err = parseFilter(v); err != nil {
			return nil, err
		}
	}
	return q, nil
}

// parseCount parses the value of $top or $skip: an integer ≥ 0.
func parseCount(v, param string) (int, *rf.Problem) {
	n, err := strconv.Atoi(v)
	switch {
	case errors.Is(err, strconv.ErrRange):
		return 0, errRange(v, param, "0 to "+strconv.Itoa(int(^uint32(0)>>1)))
	case err != nil:
		return 0, errFormat(v, param)
	case n < 0:
		return 0, errRange(v, param, "0 to "+strconv.Itoa(int(^uint32(0)>>1)))
	}
	return n, nil
}

// parseLevels parses a $levels value: 1 to MaxExpandLevels.
func parseLevels(v string) (int, *rf.Problem) {
	n, err := strconv.Atoi(v)
	switch {
	case err != nil && !errors.Is(err, strconv.ErrRange):
		return 0, errFormat(v, "$levels")
	case err != nil || n < 1 || n > MaxExpandLevels:
		return 0, errRange(v, "$levels", fmt.Sprintf("1 to %d", MaxExpandLevels))
	}
	return n, nil
}

// parseExpand parses "*", "." or "~", optionally followed by ($levels=N).
func parseExpand(v string) (expandKind, int, *rf.Problem) {
	if v == "" || !strings.ContainsRune("*.~", rune(v[0])) {
		return expandNone, 0, errFormat(v, "$expand").
			Resolve("Use $expand=* (all references), . (subordinate resources) or ~ (Links), optionally followed by ($levels=N).")
	}
	kind, rest := expandKind(v[0]), v[1:]
	if rest == "" {
		return kind, 1, nil
	}
	inner, ok := strings.CutPrefix(rest, "($levels=")
	if !ok || !strings.HasSuffix(inner, ")") {
		return expandNone, 0, errFormat(v, "$expand").Resolve("Write the levels as $expand=" + string(kind) + "($levels=N).")
	}
	n, err := parseLevels(strings.TrimSuffix(inner, ")"))
	return kind, n, err
}

// selection is a parsed $select: the properties kept at one level of the
// body. all keeps the whole value.
type selection struct {
	all  bool
	kids map[string]*selection
}

// parseSelect parses a comma-separated list of property paths
// (Name, Status/Health, Members/Name; * selects every property at its
// level).
func parseSelect(v string) (*selection, *rf.Problem) {
	root := &selection{}
	for _, path := range strings.Split(v, ",") {
		node := root
		segs := strings.Split(strings.TrimSpace(path), "/")
		for i, seg := range segs {
			if seg == "*" && i == len(segs)-1 {
				node.all = true
				break
			}
			if !validSelectSegment(seg) {
				return nil, errFormat(v, "$select").
					Resolve("List property paths separated by commas, with / between levels: $select=Name,Status/Health.")
			}
			if node.kids == nil {
				node.kids = map[string]*selection{}
			}
			kid := node.kids[seg]
			if kid == nil {
				kid = &selection{}
				node.kids[seg] = kid
			}
			node = kid
			if i == len(segs)-1 {
				node.all = true
			}
		}
	}
	return root, nil
}

// validSelectSegment reports whether s can be a property name or a
// property annotation (Members@odata.count, #ComputerSystem.Reset).
func validSelectSegment(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range s {
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', strings.ContainsRune("_@.#-", c):
		default:
			return false
		}
	}
	return true
}

// keptAnnotations stay in every object $select reaches.
var keptAnnotations = []string{"@odata.id", "@odata.type", "@odata.etag", "@odata.context"}

// apply returns the selected part of v; v itself is not changed.
func (sel *selection) apply(v any) (any, bool) {
	if sel.all {
		return v, true
	}
	switch x := v.(type) {
	case map[string]any:
		out := map[string]any{}
		for _, k := range keptAnnotations {
			if a, ok := x[k]; ok {
				out[k] = a
			}
		}
		for name, kid := range sel.kids {
			val, ok := x[name]
			if !ok {
				continue
			}
			if val, ok = kid.apply(val); !ok {
				continue
			}
			out[name] = val
			// Property annotations travel with their property
			// (Members@odata.count, Members@odata.nextLink).
			for k, a := range x {
				if strings.HasPrefix(k, name+"@") {
					out[k] = a
				}
			}
		}
		return out, true
	case []any:
		out := make([]any, 0, len(x))
		for _, e := range x {
			if r, ok := sel.apply(e); ok {
				out = append(out, r)
			}
		}
		return out, true
	}
	return nil, false // a path into a scalar selects nothing
}

// page applies $skip and $top to a collection's Members; other
// resources are left alone.
func (q *Query) page(body map[string]any, path string) {
	members, ok := body["Members"].([]any)
	if !ok || (!q.hasTop && !q.hasSkip) {
		return
	}
	total := len(members)
	start := min(q.skip, total)
	end := total
	if q.hasTop && q.top < total-start {
		end = start + q.top
	}
	body["Members"] = members[start:end]
	body["Members@odata.count"] = total
	if end < total && end > start { // $top=0 asks for no members, not for a link to the same empty page
		body["Members@odata.nextLink"] = q.nextLink(path, end)
	} else {
		delete(body, "Members@odata.nextLink")
	}
}

// nextLink is the URI of the page starting at member skip: the request's
// $-parameters as sent, with $skip replaced.
func (q *Query) nextLink(path string, skip int) string {
	parts := make([]string, 0, len(q.other)+len(q.params)+1)
	parts = append(parts, q.other...)
	replaced := false
	for _, p := range q.params {
		if p.key == "$skip" {
			parts = append(parts, "$skip="+strconv.Itoa(skip))
			replaced = true
			continue
		}
		parts = append(parts, p.raw)
	}
	if !replaced {
		parts = append(parts, "$skip="+strconv.Itoa(skip))
	}
	return path + "?" + strings.Join(parts, "&")
}

// refTarget returns the target of a reference object {"@odata.id": "..."}.
func refTarget(m map[string]any) (string, bool) {
	if len(m) != 1 {
		return "", false
	}
	id, ok := m["@odata.id"].(string)
	return id, ok
}

// DecodeObject decodes a JSON object, keeping numbers exact.
func DecodeObject(data []byte) (map[string]any, bool) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var m map[string]any
	if err := dec.Decode(&m); err != nil || m == nil {
		return nil, false
	}
	return m, true
}
