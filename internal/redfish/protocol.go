package redfish

import (
	"fmt"
	"net/http"
	"strings"
)

// Protocol rules of DSP0266 that every request shares and that the DMTF
// Redfish Protocol Validator checks, applied by ServeHTTP before routing.

// preflight answers a request that breaks a protocol rule (and reports
// true), or rewrites it into the form the routes serve:
//
//   - OData-Version: a client may only ask for 4.0; anything else is 412
//     PreconditionFailed (DSP0266 "Request headers").
//   - POST to a collection's Members (…/Sessions/Members) is the same as
//     POST to the collection (DSP0266 "POST (create)").
func (s *Server) preflight(w http.ResponseWriter, r *http.Request) bool {
	if v := r.Header.Get("OData-Version"); v != "" && v != "4.0" {
		e := newError(http.StatusPreconditionFailed, baseRegistry+"HeaderInvalid",
			fmt.Sprintf("Header 'OData-Version: %s' is invalid.", v), "OData-Version: "+v)
		e.resolution = "This service supports OData-Version 4.0 only; send 4.0 or omit the header."
		writeError(w, e)
		return true
	}
	if r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/Members") {
		probe := r.Clone(r.Context())
		probe.URL.Path = strings.TrimSuffix(r.URL.Path, "/Members")
		probe.URL.RawPath = ""
		if _, pattern := s.mux.Handler(probe); pattern != "" {
			r.URL.Path, r.URL.RawPath = probe.URL.Path, ""
		}
	}
	return false
}
