package rf

import (
	"bytes"
	"cmp"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"runtime/debug"
	"strconv"
	"strings"
)

// The server side's request pipeline, the part every Redfish service
// runs the same way. A service declares its routes as literal
// "METHOD /path" patterns, each beside the Privilege it requires and its
// handler (grep a URL to find both), and registers them on a Mux, each
// wrapped by its Policy (Policy.Wrap): the service's own authentication
// and authorisation first (Admit), then the body limit (LimitBody), then
// the handler, and its own rendering of whatever error comes of them as
// the Redfish error body (Fail, ending in WriteError). Its ServeHTTP
// recovers panics (Recover), serves "/path/" as "/path" (TrimSlash) and
// answers what no route matches (Mux.Unmatched).

// Privilege is what a route requires: Public (nothing), or the name of a
// Redfish privilege (DSP0266 "Privilege model": Login, ConfigureComponents,
// ConfigureManager, ConfigureUsers, ConfigureSelf) or of an OEM one. A
// service with roles names them as its roles grant them.
type Privilege string

const (
	Public Privilege = ""      // no authentication
	Login  Privilege = "Login" // any authenticated account
)

// MaxBody is the largest request body a service accepts (413 beyond it).
const MaxBody = 1 << 20

// MaxDiscard bounds how much of an oversized body is read and thrown away
// before the 413 is answered. A client that writes its whole body before
// it reads the answer (Python's urllib and requests, the DMTF redfish
// library) would otherwise find the connection reset under it and never
// see the 413; past this bound the connection is closed after the answer.
const MaxDiscard = 16 * MaxBody

// DrainOversized reads and discards what is left of an oversized body, up
// to MaxDiscard, and marks the answer Connection: close (the rest of a
// larger body is not read). A body under LimitBody's limit is drained
// from beneath the limit. An answer already marked so has been drained:
// it does nothing.
func DrainOversized(w http.ResponseWriter, body io.Reader) {
	if w.Header().Get("Connection") == "close" {
		return
	}
	if lb, ok := body.(*limitedBody); ok {
		body = lb.raw
	}
	_, _ = io.CopyN(io.Discard, body, MaxDiscard)
	w.Header().Set("Connection", "close")
}

// LimitBody bounds r's body to limit bytes. A body announced larger is
// drained (DrainOversized) and refused: LimitBody returns the Problem to
// answer (TooLarge) and the service answers nothing else. A body that
// turns out larger while a handler reads it fails that read with an
// *http.MaxBytesError (Decode's TooLarge).
func LimitBody(w http.ResponseWriter, r *http.Request, limit int64) *Problem {
	if r.ContentLength > limit {
		DrainOversized(w, r.Body)
		return TooLarge(limit)
	}
	r.Body = &limitedBody{ReadCloser: http.MaxBytesReader(w, r.Body, limit), raw: r.Body}
	return nil
}

// limitedBody is a body under LimitBody's limit, with the body beneath
// it: what DrainOversized reads once the limit is hit.
type limitedBody struct {
	io.ReadCloser
	raw io.Reader
}

// HandlerFunc is a route's handler: it answers r, or returns the error to
// answer.
type HandlerFunc func(w http.ResponseWriter, r *http.Request) error

// Policy is a service's own part of its routes' pipeline.
type Policy struct {
	// Admit decides on r for the route of pattern, which requires priv,
	// before any of its body is read: it authenticates and authorises
	// (for a Public route it may still read what r carries), and returns
	// the request to serve (with what it learnt in its context), or the
	// error to answer.
	Admit func(r *http.Request, pattern string, priv Privilege) (*http.Request, error)
	// Fail answers err in the service's error shape: Admit's error, the
	// body limit's *Problem (TooLarge; the body is drained already), or
	// a handler's error. It never shows the client internal detail.
	Fail func(w http.ResponseWriter, r *http.Request, err error)
}

// Wrap is the pipeline of one route: Cache-Control: no-cache (an answer
// depends on who asks), Admit, the body bounded by MaxBody, then h; any
// error on the way is answered by Fail.
func (p Policy) Wrap(pattern string, priv Privilege, h HandlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "no-cache")
		admitted, err := p.Admit(r, pattern, priv)
		if err != nil {
			p.Fail(w, r, err)
			return
		}
		r = admitted
		if tooLarge := LimitBody(w, r, MaxBody); tooLarge != nil {
			p.Fail(w, r, tooLarge)
			return
		}
		if err := h(w, r); err != nil {
			p.Fail(w, r, err)
		}
	})
}

// Mux is an http.ServeMux of literal "METHOD /path" patterns that answers
// what none of them matches as Redfish asks (Unmatched).
type Mux struct {
	http.ServeMux
	// Head: the service answers HEAD wherever it answers GET (ServeMux
	// does so for every GET pattern), and Allow says so.
	Head bool
}

// Match reports whether a route matches r.
func (m *Mux) Match(r *http.Request) bool {
	_, pattern := m.Handler(r)
	return pattern != ""
}

// Allowed lists the methods r's path answers to, in the order GET (HEAD),
// POST, PATCH, DELETE.
func (m *Mux) Allowed(r *http.Request) []string {
	var out []string
	for _, method := range []string{"GET", "POST", "PATCH", "DELETE"} {
		probe := r.Clone(r.Context())
		probe.Method = method
		if m.Match(probe) {
			out = append(out, method)
			if method == "GET" && m.Head {
				out = append(out, "HEAD")
			}
		}
	}
	return out
}

// Unmatched answers r and reports true when no route matches it: 405
// OperationNotAllowed with Allow when its path answers other methods, 404
// ResourceMissingAtURI otherwise, each rendered by answer (the service's
// own error rendering; WriteError where it has none).
func (m *Mux) Unmatched(w http.ResponseWriter, r *http.Request, answer func(http.ResponseWriter, *Problem)) bool {
	if m.Match(r) {
		return false
	}
	if allowed := m.Allowed(r); len(allowed) > 0 {
		w.Header().Set("Allow", strings.Join(allowed, ", "))
		answer(w, MethodNotAllowed())
		return true
	}
	answer(w, MissingAtURI(r.URL.Path))
	return true
}

// TrimSlash serves a path that ends in a slash as the path without it
// (Redfish URIs may end in one), but for the service root /redfish/v1/.
func TrimSlash(r *http.Request) {
	if p := r.URL.Path; len(p) > len("/redfish/v1/") && strings.HasSuffix(p, "/") {
		r.URL.Path = strings.TrimRight(p, "/")
	}
}

// Recover, deferred by a service's ServeHTTP, stops a panic in a handler:
// it logs the panic and its stack with attrs, and answer renders the
// service's internal error, which shows the client none of it.
// http.ErrAbortHandler still aborts the request, as net/http means it to.
func Recover(log *slog.Logger, r *http.Request, answer func(panicked any), attrs ...any) {
	v := recover()
	if v == nil {
		return
	}
	if v == http.ErrAbortHandler {
		panic(v)
	}
	log.Error("panic serving request", append(attrs, "method", r.Method, "path", r.URL.Path, "panic", v, "stack", string(debug.Stack()))...)
	answer(v)
}

// MissingAtURI: no resource at uri.
func MissingAtURI(uri string) *Problem {
	return New(http.StatusNotFound, Registry+"ResourceMissingAtURI",
		"The resource at the URI '"+uri+"' was not found.", uri)
}

// MethodNotAllowed: the resource does not answer the request's method.
func MethodNotAllowed() *Problem {
	return New(http.StatusMethodNotAllowed, Registry+"OperationNotAllowed",
		"The HTTP method is not allowed on this resource.")
}

// Info is p as one @Message.ExtendedInfo entry: RelatedProperties when p
// has a Related list (empty included), Resolution when p has one, Oem
// when p has it.
func (p *Problem) Info() map[string]any {
	args := p.Args
	if args == nil {
		args = []string{}
	}
	entry := map[string]any{
		"@odata.type":     "#Message.v1_1_1.Message",
		"MessageId":       p.ID,
		"Message":         p.Text,
		"MessageArgs":     args,
		"MessageSeverity": p.Severity,
	}
	if p.Resolution != "" {
		entry["Resolution"] = p.Resolution
	}
	if p.Related != nil {
		entry["RelatedProperties"] = p.Related
	}
	if p.Oem != nil {
		entry["Oem"] = p.Oem
	}
	return entry
}

// ErrorDocument is the Redfish error body of one or more messages:
// error.code and error.message are the first's, and every one is an
// @Message.ExtendedInfo entry.
func ErrorDocument(first *Problem, more ...*Problem) map[string]any {
	info := []any{first.Info()}
	for _, p := range more {
		info = append(info, p.Info())
	}
	return map[string]any{"error": map[string]any{
		"code":                  first.ID,
		"message":               first.Text,
		"@Message.ExtendedInfo": info,
	}}
}

// WriteError answers the Redfish error body of p and more, with p's
// status.
func WriteError(w http.ResponseWriter, p *Problem, more ...*Problem) {
	WriteJSON(w, p.Status, ErrorDocument(p, more...))
}

// WriteJSON answers status with v as its JSON body (indented, OData 4.0).
func WriteJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.Header().Set("OData-Version", "4.0")
	if b, ok := v.(Rendered); ok {
		// A body known whole is sent with its length, not chunked.
		w.Header().Set("Content-Length", strconv.Itoa(len(b)))
		w.WriteHeader(status)
		_, _ = w.Write(b)
		return
	}
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}

// Rendered is a body WriteJSON sends as it is: Render's output.
type Rendered []byte

// Render encodes v as WriteJSON sends it (indented, one line feed at the
// end), for a caller that needs the bytes first (to hash them for an ETag).
func Render(v any) (Rendered, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return Rendered(buf.Bytes()), nil
}

// Recorder is an http.ResponseWriter that keeps the answer instead of
// sending it: for a task monitor to answer later, for an audit entry to be
// committed first, for a transport fault to lose. The first status
// written is the answer's; a body without one is 200.
type Recorder struct {
	Status int
	Body   bytes.Buffer
	header http.Header
}

// Header implements http.ResponseWriter.
func (r *Recorder) Header() http.Header {
	if r.header == nil {
		r.header = http.Header{}
	}
	return r.header
}

// WriteHeader implements http.ResponseWriter.
func (r *Recorder) WriteHeader(code int) {
	if r.Status == 0 {
		r.Status = code
	}
}

// Write implements http.ResponseWriter.
func (r *Recorder) Write(b []byte) (int, error) {
	if r.Status == 0 {
		r.Status = http.StatusOK
	}
	return r.Body.Write(b)
}

// Replay sends the recorded answer to w: its headers (replacing w's of
// the same names), its status (200 when none was written) and its body.
func (r *Recorder) Replay(w http.ResponseWriter) {
	for k, vs := range r.header {
		w.Header()[k] = vs
	}
	w.WriteHeader(cmp.Or(r.Status, http.StatusOK))
	_, _ = w.Write(r.Body.Bytes())
}
