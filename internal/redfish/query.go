package redfish

// Query parameters (DSP0266 §7.3) for every JSON resource.
//
// Handlers know nothing of them: they call writeJSON(w, status, body).
// ServeHTTP parses the query of a GET or HEAD before routing (so an
// unsupported or malformed one is refused before any handler runs) and
// hangs it, with the request, on the statusRecorder every handler writes
// to. For a GET or HEAD answered 200, writeJSON finds the recorder and
// shape() turns the body into generic JSON and, in the order DSP0266
// prescribes, applies
//
//	only          a collection of exactly one member answers with that member
//	ETag          the handler's, else W/"<hash of the body>" (etag.go)
//	If-None-Match 304 when the ETag matches (not for $expand or $filter,
//	              see etag.go)
//	$filter       the Members that match (filter.go); Members@odata.count
//	              is their number
//	$skip, $top   a page of Members; Members@odata.count stays the total,
//	              Members@odata.nextLink addresses the next page
//	$expand       . subordinate references (not under Links), ~ those under
//	              Links, * both; ($levels=N), N ≤ maxExpandLevels, default 1
//	$select       Prop, Sub/Prop, Members/Prop; @odata.id, type, etag and
//	              context always stay
//
// and adds the Link (describedby) and Allow headers.
//
// $expand inlines each reference by an in-process GET through s.mux with
// the client's own headers (internalGet), so the same authentication and
// authorisation decide what a client sees inline as what it may GET: a
// reference the client may not read, or that does not exist, stays a
// plain reference. Each resource is fetched at most once per response, at
// most maxExpandBytes are inlined, and the first 401 stops the fetching (bad
// credentials are then not tried again and again, which would count
// towards account lockout).
//
// $filter reads every member it tests the same way, so a member the client
// may not read is left out.
//
// Every other $-parameter ($orderby, $count, ...) is 501 QueryNotSupported;
// a value a supported one cannot take is 400; parameters without $ that no
// handler uses are ignored, as DSP0266 requires.

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"rackpool/internal/rf"
)

const (
	// maxExpandLevels is the largest $levels (ServiceRoot
	// ProtocolFeaturesSupported.ExpandQuery.MaxLevels).
	maxExpandLevels = 3
	// maxExpandBytes bounds what one response inlines (counted as the
	// rendered size of each resource inlined): $expand=*($levels=2) over the
	// resource blocks, which inlines every zone of every block, is 14 MB.
	maxExpandBytes = 8 << 20
)

// expandKind is the $expand option: which references are inlined.
type expandKind byte

const (
	expandNone        expandKind = 0
	expandAll         expandKind = '*' // every reference
	expandSubordinate expandKind = '.' // references not under Links
	expandLinks       expandKind = '~' // references under Links
)

// query is the parsed query of a GET or HEAD. The zero value (as parsed
// from an empty query) asks for nothing; use newQuery.
type query struct {
	only      bool
	top, skip int // -1 when absent
	expand    expandKind
	levels    int
	sel       *selection // nil: every property
	filter    *filter    // nil: every member
	params    []queryParam
}

// queryParam is one $-parameter as sent, kept to build nextLink.
type queryParam struct{ key, raw string }

func newQuery() *query { return &query{top: -1, skip: -1} }

// supportedParams are the $-parameters the service implements.
var supportedParams = map[string]bool{"$select": true, "$expand": true, "$levels": true, "$top": true, "$skip": true,
	"$filter": true}

// parseQuery parses a raw query string. Parameters without $ other than
// only are ignored. An unsupported $-parameter is a 501 even when another
// parameter is also malformed.
func parseQuery(raw string) (*query, *apiError) {
	q := newQuery()
	vals := map[string]string{}
	for _, pair := range strings.Split(raw, "&") {
		if pair == "" {
			continue
		}
		rk, rv, _ := strings.Cut(pair, "=")
		key, err := url.QueryUnescape(rk)
		if err != nil {
			if strings.HasPrefix(rk, "$") {
				return nil, errQueryFormat(rv, rk)
			}
			continue
		}
		if key != "only" && !strings.HasPrefix(key, "$") {
			continue
		}
		if key != "only" && !supportedParams[key] {
			return nil, errQueryUnsupported(key)
		}
		val, err := url.QueryUnescape(rv)
		if err != nil {
			return nil, errQueryFormat(rv, key)
		}
		if _, dup := vals[key]; dup {
			e := errQueryFormat(val, key)
			e.resolution = "Give the query parameter " + key + " once."
			return nil, e
		}
		vals[key] = val
		if key != "only" {
			q.params = append(q.params, queryParam{key: key, raw: pair})
		}
	}
	// Unsupported parameters have been refused; now the values.
	var err *apiError
	if v, ok := vals["only"]; ok {
		if v != "" {
			e := errQueryFormat(v, "only")
			e.resolution = "Give only without a value: ?only."
			return nil, e
		}
		if len(q.params) > 0 {
			return nil, errQueryCombination("only cannot be combined with other query parameters.")
		}
		q.only = true
	}
	if v, ok := vals["$top"]; ok {
		if q.top, err = parseCount(v, "$top"); err != nil {
			return nil, err
		}
	}
	if v, ok := vals["$skip"]; ok {
		if q.skip, err = parseCount(v, "$skip"); err != nil {
			return nil, err
		}
	}
	if v, ok := vals["$expand"]; ok {
		if q.expand, q.levels, err = parseExpand(v); err != nil {
			return nil, err
		}
	}
	if v, ok := vals["$levels"]; ok {
		// OData puts $levels inside $expand's value; a separate $levels is
		// accepted as a convenience, once, next to $expand.
		if q.expand == expandNone || strings.Contains(vals["$expand"], "(") {
			return nil, errQueryCombination("$levels needs $expand and is given once: $expand=.($levels=2).")
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
func parseCount(v, param string) (int, *apiError) {
	n, err := strconv.Atoi(v)
	switch {
	case errors.Is(err, strconv.ErrRange):
		return 0, errQueryRange(v, param, "0 to "+strconv.Itoa(int(^uint32(0)>>1)))
	case err != nil:
		return 0, errQueryFormat(v, param)
	case n < 0:
		return 0, errQueryRange(v, param, "0 to "+strconv.Itoa(int(^uint32(0)>>1)))
	}
	return n, nil
}

// parseLevels parses a $levels value: 1 to maxExpandLevels.
func parseLevels(v string) (int, *apiError) {
	n, err := strconv.Atoi(v)
	switch {
	case err != nil && !errors.Is(err, strconv.ErrRange):
		return 0, errQueryFormat(v, "$levels")
	case err != nil || n < 1 || n > maxExpandLevels:
		return 0, errQueryRange(v, "$levels", fmt.Sprintf("1 to %d", maxExpandLevels))
	}
	return n, nil
}

// parseExpand parses "*", "." or "~", optionally followed by ($levels=N).
func parseExpand(v string) (expandKind, int, *apiError) {
	if v == "" || !strings.ContainsRune("*.~", rune(v[0])) {
		e := errQueryFormat(v, "$expand")
		e.resolution = "Use $expand=* (all references), . (subordinate resources) or ~ (Links), optionally followed by ($levels=N)."
		return expandNone, 0, e
	}
	kind, rest := expandKind(v[0]), v[1:]
	if rest == "" {
		return kind, 1, nil
	}
	inner, ok := strings.CutPrefix(rest, "($levels=")
	if !ok || !strings.HasSuffix(inner, ")") {
		e := errQueryFormat(v, "$expand")
		e.resolution = "Write the levels as $expand=" + string(kind) + "($levels=N)."
		return expandNone, 0, e
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
func parseSelect(v string) (*selection, *apiError) {
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
				e := errQueryFormat(v, "$select")
				e.resolution = "List property paths separated by commas, with / between levels: $select=Name,Status/Health."
				return nil, e
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
func (q *query) page(body map[string]any, path string) {
	members, ok := body["Members"].([]any)
	if !ok || (q.top < 0 && q.skip < 0) {
		return
	}
	total := len(members)
	start := min(max(q.skip, 0), total)
	end := total
	if q.top >= 0 && q.top < total-start {
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
func (q *query) nextLink(path string, skip int) string {
	parts := make([]string, 0, len(q.params)+1)
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

// expander inlines references for one response.
type expander struct {
	s      *Server
	orig   *http.Request
	kind   expandKind
	cache  map[string]fetched // by path
	left   int                // bytes that may still be inlined
	denied bool               // a fetch was refused for the credentials
}

// fetched is a resource read for expansion; body is nil when it stays a
// reference.
type fetched struct {
	body map[string]any
	size int
}

var errExpandTooLarge = errors.New("too many resources to expand")

// value returns v with the references it wants inlined, levels deep;
// inLinks says whether v is under a Links property. Bodies fetched are
// shared, never changed.
func (x *expander) value(v any, levels int, inLinks bool) (any, error) {
	switch t := v.(type) {
	case map[string]any:
		if id, ok := refTarget(t); ok && levels > 0 && x.wants(inLinks) {
			f := x.fetch(id)
			if f.body == nil {
				return t, nil
			}
			if x.left -= f.size; x.left < 0 {
				return nil, errExpandTooLarge
			}
			if levels == 1 {
				return f.body, nil
			}
			return x.value(f.body, levels-1, false)
		}
		out := make(map[string]any, len(t))
		for k, e := range t {
			if strings.Contains(k, "@") {
				out[k] = e // annotations (@Redfish.CollectionCapabilities) are not navigation
				continue
			}
			r, err := x.value(e, levels, inLinks || k == "Links")
			if err != nil {
				return nil, err
			}
			out[k] = r
		}
		return out, nil
	case []any:
		out := make([]any, len(t))
		for i, e := range t {
			r, err := x.value(e, levels, inLinks)
			if err != nil {
				return nil, err
			}
			out[i] = r
		}
		return out, nil
	}
	return v, nil
}

func (x *expander) wants(inLinks bool) bool {
	switch x.kind {
	case expandAll:
		return true
	case expandSubordinate:
		return !inLinks
	case expandLinks:
		return inLinks
	}
	return false
}

// fetch GETs a referenced resource as the client, once per response.
func (x *expander) fetch(id string) fetched {
	if f, ok := x.cache[id]; ok {
		return f
	}
	var f fetched
	if !x.denied && strings.HasPrefix(id, "/redfish/v1") && !strings.ContainsAny(id, "?#") {
		res := x.s.internalGet(x.orig, id)
		switch res.status {
		case http.StatusOK:
			f.body, _ = decodeObject(res.body)
			f.size = len(res.body)
		case http.StatusUnauthorized:
			x.denied = true
		}
	}
	x.cache[id] = f
	return f
}

// refTarget returns the target of a reference object {"@odata.id": "..."}.
func refTarget(m map[string]any) (string, bool) {
	if len(m) != 1 {
		return "", false
	}
	id, ok := m["@odata.id"].(string)
	return id, ok
}

// decodeObject decodes a JSON object, keeping numbers exact.
func decodeObject(data []byte) (map[string]any, bool) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var m map[string]any
	if err := dec.Decode(&m); err != nil || m == nil {
		return nil, false
	}
	return m, true
}

// shape is writeJSON's step for a GET or HEAD answered 200: it returns the
// body to send, or done when it has answered itself (304, or an error such
// as only on a resource that is not a collection).
func (rec *statusRecorder) shape(w http.ResponseWriter, v any) (out any, done bool) {
	r := rec.req
	if r == nil || (r.Method != http.MethodGet && r.Method != http.MethodHead) {
		return v, false
	}
	q := rec.q
	if q == nil {
		q = newQuery()
	}
	h := w.Header()
	data, err := json.Marshal(v)
	if err != nil {
		return v, false // the encoder will fail the same way; nothing to shape
	}
	if h.Get("ETag") == "" {
		h.Set("ETag", bodyETag(data))
	}
	body, ok := decodeObject(data)
	if !ok || rec.internal {
		return v, false
	}
	path := r.URL.Path
	_, isCollection := body["Members"].([]any)
	if (q.only || q.filter != nil) && !isCollection {
		h.Del("ETag")
		why := "only applies to resource collections; remove it."
		if q.filter != nil {
			why = "$filter applies to resource collections (resources with Members); remove it."
		}
		writeError(w, errQueryNotOnResource(why))
		return nil, true
	}
	if q.only {
		if members := body["Members"].([]any); len(members) == 1 {
			if m, ok := members[0].(map[string]any); ok {
				if id, ok := refTarget(m); ok {
					if res := rec.srv.internalGet(r, id); res.status == http.StatusOK {
						if mb, ok := decodeObject(res.body); ok {
							body, path = mb, id
							h.Del("ETag")
							if tag := res.header.Get("ETag"); tag != "" {
								h.Set("ETag", tag)
							}
						}
					}
				}
			}
		}
	}
	// A response with $expand or $filter also depends on the resources it
	// inlines or tests, which the ETag does not cover: never 304 it.
	if q.expand == expandNone && q.filter == nil {
		if inm := strings.Join(r.Header.Values("If-None-Match"), ","); inm != "" && rf.ETagMatches(inm, h.Get("ETag")) {
			h.Del("Content-Type")
			w.WriteHeader(http.StatusNotModified)
			return nil, true
		}
	}
	// The members $filter reads stay in the cache for $expand.
	x := &expander{s: rec.srv, orig: r, kind: q.expand, cache: map[string]fetched{}, left: maxExpandBytes}
	if q.filter != nil {
		if e := q.filter.members(body, x); e != nil {
			h.Del("ETag")
			writeError(w, e)
			return nil, true
		}
	}
	q.page(body, path)
	out = body
	if q.expand != expandNone {
		if out, err = x.value(body, q.levels, false); err != nil {
			h.Del("ETag")
			e := errQueryRange(r.URL.Query().Get("$expand"), "$expand", fmt.Sprintf("(at most %d MiB of expanded resources)", maxExpandBytes>>20))
			e.resolution = "Expand fewer levels, or page the collection with $top and $skip."
			writeError(w, e)
			return nil, true
		}
	}
	if q.sel != nil {
		out, _ = q.sel.apply(out)
	}
	if link := describedBy(body); link != "" {
		h.Set("Link", link)
	}
	probe := r.Clone(r.Context())
	probe.URL.Path = path
	if allowed := rec.srv.allowedMethods(probe); len(allowed) > 0 {
		h.Set("Allow", strings.Join(allowed, ", "))
	}
	return out, false
}

// describedBy is the Link header naming the JSON schema of a body's
// @odata.type, "" when it has none.
func describedBy(body map[string]any) string {
	t, _ := body["@odata.type"].(string)
	t = strings.TrimPrefix(t, "#")
	i := strings.LastIndex(t, ".")
	if i <= 0 {
		return ""
	}
	ns := t[:i] // ComputerSystem.v1_22_0, ComputerSystemCollection
	for _, c := range ns {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '.') {
			return ""
		}
	}
	return "<http://redfish.dmtf.org/schemas/v1/" + ns + ".json>; rel=describedby"
}

// Query errors, with the Base registry's arguments and severities.

func errQueryUnsupported(param string) *apiError {
	e := newError(http.StatusNotImplemented, baseRegistry+"QueryNotSupported",
		"Querying is not supported by the implementation.")
	e.severity = "Warning"
	e.resolution = fmt.Sprintf("The query parameter %s is not supported; remove it and resubmit the request. Supported: $select, $expand, $filter, $top, $skip, only.", param)
	return e
}

func errQueryFormat(value, param string) *apiError {
	e := newError(http.StatusBadRequest, baseRegistry+"QueryParameterValueFormatError",
		fmt.Sprintf("The value '%s' for the parameter %s is not a format that the parameter can accept.", value, param), value, param)
	e.severity = "Warning"
	return e
}

func errQueryRange(value, param, valid string) *apiError {
	e := newError(http.StatusBadRequest, baseRegistry+"QueryParameterOutOfRange",
		fmt.Sprintf("The value '%s' for the query parameter %s is out of range %s.", value, param, valid), value, param, valid)
	e.severity = "Warning"
	return e
}

func errQueryNotOnResource(why string) *apiError {
	e := newError(http.StatusBadRequest, baseRegistry+"QueryNotSupportedOnResource",
		"Querying is not supported on the requested resource.")
	e.severity = "Warning"
	e.resolution = why
	return e
}

// errSSEFilter answers $filter on the SSE stream, which is no collection
// and takes its filters as parameters of their own.
func errSSEFilter() *apiError {
	return errQueryNotOnResource("$filter applies to resource collections; filter the SSE stream with EventFormatType, " +
		"MetricReportDefinition, EventTypes, MessageIds, RegistryPrefixes or OriginResources.")
}

func errQueryCombination(why string) *apiError {
	e := newError(http.StatusBadRequest, baseRegistry+"QueryCombinationInvalid",
		"Two or more query parameters in the request cannot be used together.")
	e.severity = "Warning"
	e.resolution = why
	return e
}
