package redfish

// Query parameters (DSP0266 §7.3) for every JSON resource, applied by
// package odata.
//
// Handlers know nothing of them: they call writeJSON(w, status, body).
// ServeHTTP parses the query of a GET or HEAD before routing (so an
// unsupported or malformed one is refused before any handler runs) and
// hangs it, with the request, on the statusRecorder every handler writes
// to. For a GET or HEAD answered 200, writeJSON finds the recorder and
// shape() gives the body its ETag (the handler's, else W/"<hash of the
// body>", etag.go), answers If-None-Match with 304 when the query allows
// it, has odata shape the body, and adds the Link (describedby) and Allow
// headers.
//
// odata reads the resources it inlines or tests by an in-process GET
// through s.mux with the client's own headers (internalGet), so the same
// authentication and authorisation decide what a client sees inline as
// what it may GET.

import (
	"encoding/json"
	"net/http"
	"strings"
	"sync"

	"rackpool/internal/odata"
	"rackpool/internal/rf"
)

// Shape is writeJSON's step for a GET or HEAD answered 200: it returns the
// body to send, or done when it has answered itself (304, or an error such
// as only on a resource that is not a collection).
func (rec *statusRecorder) Shape(w http.ResponseWriter, v any) (out any, done bool) {
	r := rec.req
	if r == nil || (r.Method != http.MethodGet && r.Method != http.MethodHead) {
		return v, false
	}
	q := rec.q
	if q == nil {
		q = &odata.Query{}
	}
	h := w.Header()
	if c, ok := odata.AsCollection(v); ok && !rec.internal {
		if out, done := rec.shapeCollection(w, q, c); done || out != nil {
			return out, done
		}
		v = c // ?only of a collection without exactly one member: the collection
	}
	data, err := json.Marshal(v)
	if err != nil {
		return v, false // the encoder will fail the same way; nothing to shape
	}
	if h.Get("ETag") == "" {
		h.Set("ETag", bodyETag(data))
	}
	body, ok := odata.DecodeObject(data)
	if !ok || rec.internal {
		return v, false
	}
	fetch := func(path string) odata.Response {
		res := rec.srv.internalGet(r, path)
		return odata.Response{Status: res.status, Header: res.header, Body: res.body}
	}
	path := r.URL.Path
	member, p := q.Resolve(body, fetch)
	if p != nil {
		h.Del("ETag")
		writeError(w, fromProblem(p))
		return nil, true
	}
	if member != nil {
		body, path = member.Body, member.Path
		h.Del("ETag")
		if tag := member.Header.Get("ETag"); tag != "" {
			h.Set("ETag", tag)
		}
	}
	if q.Cacheable() {
		if inm := strings.Join(r.Header.Values("If-None-Match"), ","); inm != "" && rf.ETagMatches(inm, h.Get("ETag")) {
			h.Del("Content-Type")
			w.WriteHeader(http.StatusNotModified)
			return nil, true
		}
	}
	if out, p = q.Apply(body, path, fetch); p != nil {
		h.Del("ETag")
		writeError(w, fromProblem(p))
		return nil, true
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

// shapeCollection answers a GET of a collection with the query's page of
// it, rendered, its ETag computed from the page (collection.go in package
// odata). out is nil, and done false, when ?only names the collection's
// one member: the caller shapes that member instead.
func (rec *statusRecorder) shapeCollection(w http.ResponseWriter, q *odata.Query, c *odata.Collection) (out any, done bool) {
	r, h := rec.req, w.Header()
	fetch := func(path string) odata.Response {
		res := rec.srv.internalGet(r, path)
		return odata.Response{Status: res.status, Header: res.header, Body: res.body}
	}
	if q.Only() && c.Members.Len() == 1 {
		return nil, false
	}
	members, rendered := getPageBuf(), getPageBuf()
	defer putPageBuf(members)
	defer putPageBuf(rendered)
	shaped, p := q.ShapeCollection(c, r.URL.Path, fetch, members)
	if p != nil {
		h.Del("ETag")
		writeError(w, fromProblem(p))
		return nil, true
	}
	data, err := odata.RenderPage(shaped, (*rendered)[:0])
	*rendered = data
	if err != nil {
		h.Del("ETag")
		writeError(w, rec.srv.fail(r, err))
		return nil, true
	}
	h.Set("ETag", pageETag(data))
	if q.Cacheable() {
		if inm := strings.Join(r.Header.Values("If-None-Match"), ","); inm != "" && rf.ETagMatches(inm, h.Get("ETag")) {
			h.Del("Content-Type")
			w.WriteHeader(http.StatusNotModified)
			return nil, true
		}
	}
	if link := describedBy(c.Head); link != "" {
		h.Set("Link", link)
	}
	if allowed := rec.srv.allowedMethods(r); len(allowed) > 0 {
		h.Set("Allow", strings.Join(allowed, ", "))
	}
	rf.WriteJSON(w, http.StatusOK, data) // before its buffer goes back to the pool
	return nil, true
}

// pageBufs are buffers for pages of collections: the members written by
// the collection (odata.Renderer) and the rendered page. A page of 1,000
// expanded blocks is about a megabyte; allocating (and zeroing) two such
// buffers a read, and collecting them, was a fifth of its cost.
var pageBufs sync.Pool // *[]byte

// maxPooledPage is the largest buffer kept for another page.
const maxPooledPage = 32 << 20

func getPageBuf() *[]byte {
	if b, ok := pageBufs.Get().(*[]byte); ok {
		return b
	}
	return new([]byte)
}

func putPageBuf(b *[]byte) {
	if cap(*b) <= maxPooledPage {
		*b = (*b)[:0]
		pageBufs.Put(b)
	}
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
