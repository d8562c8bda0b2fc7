package redfish

import (
	"net/http"
	"strings"

	"rackpool/internal/odata"
	"rackpool/internal/redfish/service"
	"rackpool/internal/rf"
)

// topologyRoutes are the routes of the Oem topology document: the topology
// the service composes over, as the console draws it (routes.go).
var topologyRoutes = []route{
	{"GET /redfish/v1/Oem/Rackpool/Topology", login, (*Server).getTopology},
}

// getTopology answers the topology document, or with ?format=compact its
// compact form (topology_compact.go), which is sent as it is rendered:
// it takes no $ query parameters.
func (s *Server) getTopology(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	switch format := q.Get("format"); format {
	case "":
		writeJSON(w, http.StatusOK, TopologyView(s.top))
		return nil
	case "compact":
		for k := range q {
			if k == "only" || strings.HasPrefix(k, "$") {
				return odata.Combination("format=compact cannot be combined with " + k + ": the compact document is sent whole.")
			}
		}
		doc := cachedCompact(s.top)
		s.writeRendered(w, r, doc.body, doc.gzipped, doc.etag)
		return nil
	default:
		return service.ErrQueryValue("format", format)
	}
}

// writeRendered answers a GET with a JSON body its handler rendered (and
// gzipped: sent to a client that accepts gzip), and its ETag, past the
// query shaping; a matching If-None-Match is answered 304.
func (s *Server) writeRendered(w http.ResponseWriter, r *http.Request, body, gzipped []byte, tag string) {
	h := w.Header()
	h.Set("ETag", tag)
	h.Set("Vary", "Accept-Encoding")
	if allowed := s.allowedMethods(r); len(allowed) > 0 {
		h.Set("Allow", strings.Join(allowed, ", "))
	}
	if inm := strings.Join(r.Header.Values("If-None-Match"), ","); inm != "" && rf.ETagMatches(inm, tag) {
		w.WriteHeader(http.StatusNotModified)
		return
	}
	if gzipped != nil && acceptsGzip(r) {
		h.Set("Content-Encoding", "gzip")
		body = gzipped
	}
	rf.WriteJSON(w, http.StatusOK, rf.Rendered(body))
}

// acceptsGzip says whether r's Accept-Encoding takes gzip (at a quality
// above 0).
func acceptsGzip(r *http.Request) bool {
	for _, v := range r.Header.Values("Accept-Encoding") {
		for _, c := range strings.Split(v, ",") {
			name, params, _ := strings.Cut(strings.TrimSpace(c), ";")
			if !strings.EqualFold(strings.TrimSpace(name), "gzip") {
				continue
			}
			q := strings.ReplaceAll(strings.TrimSpace(params), " ", "")
			return q != "q=0" && q != "q=0.0" && q != "q=0.00" && q != "q=0.000"
		}
	}
	return false
}
