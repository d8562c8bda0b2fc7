package redfish

// ETags (DSP0266 §7.1, RFC 9110 §8.8.3, §13.1).
//
// Every GET or HEAD answered 200 with JSON carries an ETag: the handler's
// own when it set one (composed systems: W/"<version>", which their
// PATCH, DELETE and actions check atomically against the store), else
// W/"<hash of the body>". The hash is of the resource as its handler
// rendered it, before only/$select/$expand/$top/$skip: it is the ETag of
// the resource, so a client may send it back in If-Match whatever query
// it read the resource with. (A $select answer is a function of the
// resource, so If-None-Match may 304 it; an $expand answer also depends on
// the resources it inlines, so it is never 304.)
//
// If-Match on PATCH, PUT, DELETE, and on a POST to an action (checked
// against the resource the action belongs to) is checked for every route
// by ifMatchGuard, after authentication and authorisation and before the
// handler: an in-process GET of the resource as the same client, weak
// comparison. A mismatch is 412 PreconditionFailed and the handler never
// runs. On a match the header is narrowed to the matching tag, so a
// handler that checks versions itself (composed systems) sees the one tag
// that matched and agrees; between the check and the handler's change a
// concurrent writer can still slip in, which only such a handler catches.

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"hash/crc32"
	"net/http"
	"strings"

	"rackpool/internal/rf"
)

// pageETag is the weak ETag of a rendered page of a collection: two
// CRC-32s of it (Castagnoli and IEEE polynomials, 64 bits together),
// which the processor computes at over 20 GB/s where SHA-256 runs at
// under 2: a page of 1,000 expanded blocks is about a megabyte, and its
// SHA-256 was a tenth of the read. A weak validator needs to change when
// the page does, not to resist forgery: the page is the server's own
// writing, and If-Match guards on resources keep bodyETag.
func pageETag(data []byte) string {
	var sum [8]byte
	binary.BigEndian.PutUint32(sum[:4], crc32.Checksum(data, castagnoli))
	binary.BigEndian.PutUint32(sum[4:], crc32.ChecksumIEEE(data))
	return `W/"` + hex.EncodeToString(sum[:]) + `"`
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// bodyETag is the weak ETag of a rendered body.
func bodyETag(data []byte) string {
	sum := sha256.Sum256(data)
	return `W/"` + hex.EncodeToString(sum[:8]) + `"`
}

// ifMatchGuard checks If-Match before h runs (see the file comment).
//
// A conditional request holds its resource's lock from the check through
// the handler, so of two writers sending the same If-Match exactly one
// succeeds and the other gets 412 (the resource's ETag has changed by the
// time it checks).
func (s *Server) ifMatchGuard(h rf.HandlerFunc) rf.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		if list := strings.TrimSpace(strings.Join(r.Header.Values("If-Match"), ",")); list != "" && list != "*" {
			unlock, err := s.resLocks.Lock(r.Context(), ifMatchTarget(r))
			if err != nil {
				return err // the client went away while it waited
			}
			defer unlock()
		}
		if e := s.checkIfMatch(r); e != nil {
			return e
		}
		return h(w, r)
	}
}

// ifMatchTarget is the resource a conditional request changes: the path,
// or for an action the resource the action belongs to.
func ifMatchTarget(r *http.Request) string {
	if i := strings.Index(r.URL.Path, "/Actions/"); i >= 0 {
		return r.URL.Path[:i]
	}
	return r.URL.Path
}

// checkIfMatch compares If-Match with the ETag of the resource r changes.
// A resource that cannot be read (no GET route, not found, refused)
// leaves the decision to the handler.
func (s *Server) checkIfMatch(r *http.Request) *apiError {
	list := strings.Join(r.Header.Values("If-Match"), ",")
	if strings.TrimSpace(list) == "" || strings.TrimSpace(list) == "*" {
		return nil
	}
	target := r.URL.Path
	switch r.Method {
	case http.MethodPatch, http.MethodPut, http.MethodDelete:
	case http.MethodPost:
		i := strings.Index(target, "/Actions/")
		if i < 0 {
			return nil // a POST to a collection creates; there is nothing to match
		}
		target = target[:i]
	default:
		return nil
	}
	res := s.internalGet(r, target)
	cur := res.header.Get("ETag")
	if res.status != http.StatusOK || cur == "" {
		return nil
	}
	if !rf.ETagMatches(list, cur) {
		e := errPreconditionFailed()
		e.resolution = "The resource's current ETag is " + cur + "; GET it again, and retry with that ETag in If-Match."
		return e
	}
	r.Header.Set("If-Match", cur)
	return nil
}

func errPreconditionFailed() *apiError {
	return newError(http.StatusPreconditionFailed, baseRegistry+"PreconditionFailed",
		"The ETag supplied did not match the ETag required to change this resource.")
}

// subResponse is the answer to an in-process request.
type subResponse struct {
	status int
	header http.Header
	body   []byte
}

// conditionalHeaders are not passed on to in-process GETs.
var conditionalHeaders = []string{"If-Match", "If-None-Match", "If-Modified-Since", "If-Unmodified-Since", "If-Range",
	"Content-Type", "Content-Length"}

// internalGet answers GET path in process, as the client of orig: same
// headers (credentials included), so the route's authentication and
// authorisation apply exactly as to a GET the client sent itself.
func (s *Server) internalGet(orig *http.Request, path string) (res subResponse) {
	res.header = http.Header{}
	if len(path) > len("/redfish/v1/") && strings.HasSuffix(path, "/") {
		path = strings.TrimRight(path, "/")
	}
	req, err := http.NewRequestWithContext(orig.Context(), http.MethodGet, path, nil)
	if err != nil {
		res.status = http.StatusBadRequest
		return res
	}
	req.Header = orig.Header.Clone()
	for _, h := range conditionalHeaders {
		req.Header.Del(h)
	}
	req.Host, req.RemoteAddr, req.TLS = orig.Host, orig.RemoteAddr, orig.TLS
	if _, pattern := s.mux.Handler(req); pattern == "" {
		res.status = http.StatusNotFound
		return res
	}
	cw := &rf.Recorder{}
	res.header = cw.Header()
	rec := &statusRecorder{ResponseWriter: cw, status: http.StatusOK, srv: s, req: req, internal: true}
	defer func() {
		if v := recover(); v != nil {
			s.log.Error("panic serving an in-process GET", "path", path, "for", orig.URL.Path, "panic", v)
			res.status = http.StatusInternalServerError
		}
	}()
	s.mux.ServeHTTP(rec, req)
	res.status, res.body = rec.status, cw.Body.Bytes()
	return res
}
