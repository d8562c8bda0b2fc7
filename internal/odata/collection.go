package odata

// Collections are paged before they are shaped.
//
// A handler answers a collection with a Collection: the collection's own
// properties and its Members, an ordered index of its records that can
// say how many there are and name the i-th without building the others.
// Shaping then costs what the answer holds, not what the collection holds:
//
//	$filter   a comparison the index answers (Index: composition state,
//	          kind, model, power state, ...) selects positions without
//	          reading a member; any other filter reads each member's body
//	          once (Bodies, else a GET), one at a time, keeping none
//	$skip     a position, not a walk
//	$top      at most MaxPage members a page, and at most maxExpandBytes
//	          of inlined members: the service ends the page early and its
//	          Members@odata.nextLink continues where it stopped
//	          (server-driven paging, DSP0266 §7.3.2)
//	$expand   reads the members of the page only
//	ETag      of the page as rendered
//
// A handler that answers a map with a Members array (rf.Collection) gets
// the same treatment: its members are already a slice of references.

import (
	"encoding/json"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"rackpool/internal/rf"
)

// MaxPage is the most members one page of a collection holds. A GET
// without $top (or with a larger one) of a larger collection is answered
// with the first MaxPage members and a Members@odata.nextLink to the rest.
const MaxPage = 100_000

// Members is a collection's members in a stable order: the ordered index
// a page is cut from. Path returns the URI of member i, 0 ≤ i < Len().
type Members interface {
	Len() int
	Path(i int) string
}

// Bodies is implemented by Members that render a member without a GET:
// Body returns what a GET of Path(i) by the same client answers (a value
// encoding/json renders), nil when that client may not read it.
type Bodies interface {
	Body(i int) any
}

// Renderer is implemented by Bodies that write a member's body as JSON
// themselves, faster than Marshal(Body(i)) and with the same meaning:
// AppendBody appends member i's body, compact, to b; ok is false (and b
// unchanged) when the client may not read it. An expanded page writes its
// members into one buffer this way.
type Renderer interface {
	AppendBody(b []byte, i int) (out []byte, ok bool)
}

// Index is implemented by Members that answer a comparison `path eq
// value` (path as written in $filter, Status/Health; value a string
// literal) without reading the members: the members it holds for, in
// collection order. ok is false when path is not indexed.
type Index interface {
	Where(path, value string) (m Members, ok bool)
}

// Collection is a resource collection as a handler answers it: Head holds
// its properties other than Members (@odata.id, @odata.type, Name,
// @Redfish.CollectionCapabilities, ...).
type Collection struct {
	Head    map[string]any
	Members Members
	// Expanded collections (log entries) inline their members whatever
	// $expand says.
	Expanded bool
	// PageSize is the page a GET without $top gets (0: MaxPage).
	PageSize int
}

// MarshalJSON renders the whole collection, its members as references.
func (c *Collection) MarshalJSON() ([]byte, error) {
	body := make(map[string]any, len(c.Head)+2)
	for k, v := range c.Head {
		body[k] = v
	}
	n := c.Members.Len()
	refs := make([]rf.ODataID, n)
	for i := range refs {
		refs[i] = rf.Ref(c.Members.Path(i))
	}
	body["Members"] = refs
	body["Members@odata.count"] = n
	return json.Marshal(body)
}

// Paths is a collection's members as a list of URIs.
type Paths []string

// Len implements Members.
func (p Paths) Len() int { return len(p) }

// Path implements Members.
func (p Paths) Path(i int) string { return p[i] }

// Sub is the members of m at positions pos (ascending): what a filter
// keeps.
type Sub struct {
	m   Members
	pos []int
}

// Len implements Members.
func (s *Sub) Len() int { return len(s.pos) }

// Path implements Members.
func (s *Sub) Path(i int) string { return s.m.Path(s.pos[i]) }

// bodiesSub is a Sub of Members that render their bodies.
type bodiesSub struct{ Sub }

// Body implements Bodies.
func (s *bodiesSub) Body(i int) any { return s.m.(Bodies).Body(s.pos[i]) }

// renderSub is a Sub of Members that write their bodies.
type renderSub struct{ bodiesSub }

// AppendBody implements Renderer.
func (s *renderSub) AppendBody(b []byte, i int) ([]byte, bool) {
	return s.m.(Renderer).AppendBody(b, s.pos[i])
}

// NewSub returns the members of m at positions pos (ascending, in
// range). They render (and write) bodies when m does.
func NewSub(m Members, pos []int) Members {
	if _, ok := m.(Renderer); ok {
		return &renderSub{bodiesSub{Sub{m: m, pos: pos}}}
	}
	if _, ok := m.(Bodies); ok {
		return &bodiesSub{Sub{m: m, pos: pos}}
	}
	return &Sub{m: m, pos: pos}
}

// AsCollection returns the collection a handler's map body holds: a map
// with a Members array of references. ok is false for any other body,
// and for a collection whose members are inlined objects (it is shaped as
// a resource).
func AsCollection(v any) (*Collection, bool) {
	switch t := v.(type) {
	case *Collection:
		return t, true
	case map[string]any:
		var paths Paths
		switch ms := t["Members"].(type) {
		case []rf.ODataID:
			paths = make(Paths, len(ms))
			for i, m := range ms {
				paths[i] = m.ID
			}
		case []any:
			paths = make(Paths, len(ms))
			for i, m := range ms {
				switch r := m.(type) {
				case rf.ODataID:
					paths[i] = r.ID
				case map[string]any:
					id, ok := refTarget(r)
					if !ok {
						return nil, false
					}
					paths[i] = id
				default:
					return nil, false
				}
			}
		default:
			return nil, false
		}
		head := make(map[string]any, len(t))
		for k, e := range t {
			if k != "Members" && !strings.HasPrefix(k, "Members@") {
				head[k] = e
			}
		}
		return &Collection{Head: head, Members: paths}, true
	}
	return nil, false
}

// Only reports whether the query is ?only.
func (q *Query) Only() bool { return q.only }

// pageRef is a member left a reference on a page.
type pageRef = rf.ODataID

// ShapeCollection answers a GET of the collection c at path with the
// query's page of it. Member bodies come from c.Members when it renders
// them (Bodies), else from fetch. Members that write their own bodies
// (Renderer) are written into *buf, grown as needed (buf nil: a new
// buffer); the page's members are slices of it, so the caller may reuse
// it once it has rendered the page.
func (q *Query) ShapeCollection(c *Collection, path string, fetch Fetch, buf *[]byte) (any, *rf.Problem) {
	members := c.Members
	if q.filter != nil {
		var p *rf.Problem
		if members, p = q.filter.select_(members, fetch); p != nil {
			return nil, p
		}
	}
	total := members.Len()
	start := min(q.skip, total)
	top := MaxPage
	if c.PageSize > 0 {
		top = min(c.PageSize, MaxPage)
	}
	if q.hasTop {
		top = min(q.top, MaxPage)
	}
	end := start + min(top, total-start)

	body := make(map[string]any, len(c.Head)+3)
	x := &expander{fetch: fetch, kind: q.expand, cache: map[string]fetched{}, left: maxExpandBytes}
	x.writer, _ = members.(Renderer)
	x.pageLen = end - start
	if buf != nil {
		x.page = (*buf)[:0]
		defer func() { *buf = x.page }()
	}
	for k, v := range c.Head {
		if q.expand != expandNone && !strings.Contains(k, "@") {
			r, err := x.value(v, q.levels, k == "Links")
			if err != nil {
				return nil, q.errExpand()
			}
			v = r
		}
		body[k] = v
	}
	inline := c.Expanded || q.expand == expandAll || q.expand == expandSubordinate
	out := make([]any, 0, end-start)
	bodies, _ := members.(Bodies)
	for i := start; i < end; i++ {
		if !inline {
			out = append(out, pageRef{ID: members.Path(i)})
			continue
		}
		p := ""
		if x.writer == nil {
			p = members.Path(i)
		}
		m, size, err := q.member(bodies, i, p, x)
		if err == nil {
			x.left -= size
		}
		if err != nil || x.left < 0 {
			if i == start {
				return nil, q.errExpand()
			}
			end = i // the page ends here; nextLink continues
			break
		}
		if m == nil {
			out = append(out, pageRef{ID: members.Path(i)})
			continue
		}
		out = append(out, m)
	}
	body["Members"] = out
	body["Members@odata.count"] = total
	if end < total && end > start { // $top=0 asks for no members, not for a link to the same empty page
		body["Members@odata.nextLink"] = q.nextLink(path, end)
	}
	if q.sel != nil {
		sel, _ := q.sel.apply(normalize(body))
		return sel, nil
	}
	return body, nil
}

// member is the body of member i inlined on a page (levels deep), with
// its size; nil when it stays a reference. err is errExpandTooLarge when
// what it inlines below the member passes the expansion limit.
func (q *Query) member(bodies Bodies, i int, path string, x *expander) (any, int, error) {
	var raw []byte
	if x.writer != nil {
		// Members are written one after another into the page's buffer;
		// each is a slice of it, capped so that nothing appends over it.
		at := len(x.page)
		var ok bool
		if x.page, ok = x.writer.AppendBody(x.page, i); !ok {
			return nil, 0, nil
		}
		if c := min(len(x.page)*x.pageLen*5/4, maxExpandBytes+len(x.page)); at == 0 && x.pageLen > 1 && cap(x.page) < c {
			// The first member sizes the buffer for the page (a little
			// over, within the expansion limit): one allocation, not a
			// copy each time it doubles.
			x.page = append(make([]byte, 0, c), x.page...)
		}
		raw = x.page[at:len(x.page):len(x.page)]
	} else if bodies != nil {
		v := bodies.Body(i)
		if v == nil {
			return nil, 0, nil
		}
		var err error
		if raw, err = Marshal(v); err != nil {
			return nil, 0, nil
		}
	} else {
		f := x.get(path)
		if f.body == nil {
			return nil, 0, nil
		}
		if q.levels <= 1 {
			return f.body, f.size, nil
		}
		v, err := x.value(f.body, q.levels-1, false)
		return v, f.size, err
	}
	if q.levels <= 1 {
		return json.RawMessage(raw), len(raw), nil
	}
	m, ok := DecodeObject(raw)
	if !ok {
		return nil, 0, nil
	}
	v, err := x.value(m, q.levels-1, false)
	return v, len(raw), err
}

func (q *Query) errExpand() *rf.Problem {
	return errRange(q.expandValue, "$expand", "(at most "+strconv.Itoa(maxExpandBytes>>20)+" MiB of expanded resources)").
		Resolve("Expand fewer levels.")
}

// normalize turns a body holding typed values (references, raw members)
// into plain JSON values, for $select.
func normalize(body map[string]any) map[string]any {
	data, err := json.Marshal(body)
	if err != nil {
		return body
	}
	m, ok := DecodeObject(data)
	if !ok {
		return body
	}
	return m
}

// select_ returns the members f matches. A comparison the index answers
// narrows the members first; the rest of the filter is evaluated on the
// bodies of those left, read one at a time. A property path that no
// member read has is a 400.
func (f *filter) select_(m Members, fetch Fetch) (Members, *rf.Problem) {
	candidates, rest, narrowed := m, f.root, false
	if ix, ok := m.(Index); ok {
		if sub, left, ok := f.root.indexed(ix); ok {
			candidates, rest, narrowed = sub, left, true
		}
	}
	if rest == nil {
		return candidates, nil
	}
	bodies, _ := candidates.(Bodies)
	var kept []int
	seen := make([]bool, len(f.paths))
	unseen, read := len(f.paths), 0
	for i := range candidates.Len() {
		obj := readBody(bodies, i, candidates.Path(i), fetch)
		if obj == nil {
			continue
		}
		read++
		for k, path := range f.paths {
			if unseen == 0 {
				break
			}
			if _, ok := lookup(obj, path); ok && !seen[k] {
				seen[k] = true
				unseen--
			}
		}
		if rest.eval(obj) {
			kept = append(kept, i)
		}
	}
	if read > 0 && unseen > 0 && !narrowed {
		for k, path := range f.paths {
			if !seen[k] {
				return nil, Invalid("$filter", "No member of this collection has the property "+strings.Join(path, "/")+
					"; check its spelling and case, and the levels of the path (Status/Health).")
			}
		}
	}
	return NewSub(candidates, kept), nil
}

// readBody reads a member's body as plain JSON values, nil when the
// client may not read it.
func readBody(bodies Bodies, i int, path string, fetch Fetch) map[string]any {
	if w, ok := bodies.(Renderer); ok {
		data, ok := w.AppendBody(nil, i)
		if !ok {
			return nil
		}
		obj, _ := DecodeObject(data)
		return obj
	}
	if bodies != nil {
		v := bodies.Body(i)
		if v == nil {
			return nil
		}
		data, err := json.Marshal(v)
		if err != nil {
			return nil
		}
		obj, _ := DecodeObject(data)
		return obj
	}
	if !strings.HasPrefix(path, "/redfish/v1") || strings.ContainsAny(path, "?#") {
		return nil
	}
	res := fetch(path)
	if res.Status != http.StatusOK {
		return nil
	}
	obj, _ := DecodeObject(res.Body)
	return obj
}

// indexed answers n, or one comparison of n when n is an and, from the
// index: the members it selects and the part of n left to evaluate on
// them (nil: nothing). ok is false when the index answers no part of n.
func (n *filterNode) indexed(ix Index) (Members, *filterNode, bool) {
	if m, ok := n.lookupIndex(ix); ok {
		return m, nil, true
	}
	if n.op != filterAnd {
		return nil, nil, false
	}
	for i, k := range n.kids {
		m, ok := k.lookupIndex(ix)
		if !ok {
			continue
		}
		left := slices.Delete(slices.Clone(n.kids), i, i+1)
		if len(left) == 1 {
			return m, left[0], true
		}
		return m, &filterNode{op: filterAnd, kids: left}, true
	}
	return nil, nil, false
}

// lookupIndex answers a comparison path eq 'string' (either way round)
// from the index.
func (n *filterNode) lookupIndex(ix Index) (Members, bool) {
	if n.op != filterCmp || n.cmp != "eq" {
		return nil, false
	}
	path, lit := n.l, n.r
	if path.path == nil {
		path, lit = lit, path
	}
	if path.path == nil || lit.path != nil || lit.lit.kind != kindString {
		return nil, false
	}
	return ix.Where(strings.Join(path.path, "/"), lit.lit.s)
}
