package odata

import (
	"errors"
	"fmt"
	"net/http"
	"strings"

	"rackpool/internal/rf"
)

// maxExpandBytes bounds what one response inlines (counted as the
// rendered size of each resource inlined): $expand=*($levels=2) over the
// resource blocks, which inlines every zone of every block, is 14 MB.
const maxExpandBytes = 8 << 20

// Response is a resource as a GET answered it.
type Response struct {
	Status int
	Header http.Header
	Body   []byte
}

// Fetch GETs the resource at path (a /redfish/v1 URI without query) as
// the client of the request being answered: with its credentials, so that
// the client sees inline only what it may read.
type Fetch func(path string) Response

// Resource is a member that only put in place of its collection.
type Resource struct {
	Path   string
	Body   map[string]any
	Header http.Header // as the member's GET answered it (its ETag)
}

// Resolve is the first step of shaping body, the answer to a GET of path:
// only and $filter apply to collections (resources with Members) only,
// and only on a collection of exactly one member answers with that member,
// read with fetch. It returns the member, nil when body stays the answer.
func (q *Query) Resolve(body map[string]any, fetch Fetch) (*Resource, *rf.Problem) {
	members, isCollection := body["Members"].([]any)
	if (q.only || q.filter != nil) && !isCollection {
		if q.filter != nil {
			return nil, NotOnResource("$filter applies to resource collections (resources with Members); remove it.")
		}
		return nil, NotOnResource("only applies to resource collections; remove it.")
	}
	if !q.only || len(members) != 1 {
		return nil, nil
	}
	m, ok := members[0].(map[string]any)
	if !ok {
		return nil, nil
	}
	id, ok := refTarget(m)
	if !ok {
		return nil, nil
	}
	res := fetch(id)
	if res.Status != http.StatusOK {
		return nil, nil
	}
	mb, ok := DecodeObject(res.Body)
	if !ok {
		return nil, nil
	}
	return &Resource{Path: id, Body: mb, Header: res.Header}, nil
}

// Cacheable reports whether the answer depends on its body alone, so that
// its ETag may answer If-None-Match with a 304: not with $expand or
// $filter, which read other resources the ETag does not cover.
func (q *Query) Cacheable() bool { return q.expand == expandNone && q.filter == nil }

// Apply applies $filter, $skip and $top, $expand and $select to body, the
// answer to a GET of path (body is changed; the result may share parts of
// it). Resources are read with fetch, each once.
func (q *Query) Apply(body map[string]any, path string, fetch Fetch) (any, *rf.Problem) {
	// The members $filter reads stay in the cache for $expand.
	x := &expander{fetch: fetch, kind: q.expand, cache: map[string]fetched{}, left: maxExpandBytes}
	if q.filter != nil {
		if e := q.filter.members(body, x); e != nil {
			return nil, e
		}
	}
	q.page(body, path)
	var out any = body
	if q.expand != expandNone {
		var err error
		if out, err = x.value(body, q.levels, false); err != nil {
			return nil, errRange(q.expandValue, "$expand", fmt.Sprintf("(at most %d MiB of expanded resources)", maxExpandBytes>>20)).
				Resolve("Expand fewer levels, or page the collection with $top and $skip.")
		}
	}
	if q.sel != nil {
		out, _ = q.sel.apply(out)
	}
	return out, nil
}

// expander inlines references for one response.
type expander struct {
	fetch   Fetch
	kind    expandKind
	cache   map[string]fetched // by path
	left    int                // bytes that may still be inlined
	denied  bool               // a fetch was refused for the credentials
	writer  Renderer           // a page's members, when they write their bodies
	page    []byte             // the members written so far
	pageLen int                // members the page may hold
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
			f := x.get(id)
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

// get reads a referenced resource as the client, once per response.
func (x *expander) get(id string) fetched {
	if f, ok := x.cache[id]; ok {
		return f
	}
	var f fetched
	if !x.denied && strings.HasPrefix(id, "/redfish/v1") && !strings.ContainsAny(id, "?#") {
		res := x.fetch(id)
		switch res.Status {
		case http.StatusOK:
			f.body, _ = DecodeObject(res.Body)
			f.size = len(res.Body)
		case http.StatusUnauthorized:
			x.denied = true
		}
	}
	x.cache[id] = f
	return f
}
