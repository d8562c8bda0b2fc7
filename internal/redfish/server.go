// Package redfish is rackpool's northbound API: a DMTF Redfish service with
// CompositionService (ResourceBlocks, ResourceZones), Systems (physical
// hosts and composed systems), Chassis, Fabrics (Switches, Ports,
// Endpoints, Zones) and SessionService. One file per resource family; the
// routes are literal patterns registered in routes(), each with the
// privilege it needs.
//
// Every error leaves as the Redfish error body with a Base or Composition
// registry message ID (errors.go). Unauthenticated clients may read only
// /redfish, /redfish/v1, $metadata and odata, and create a session.
// Anything Redfish has no word for (placement explanations, fault
// injection, telemetry) is under Oem.Rackpool.
package redfish

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"runtime/debug"
	"strings"
	"time"

	"rackpool/internal/compose"
	"rackpool/internal/topology"
)

// MaxBody is the largest request body accepted.
const MaxBody = 1 << 20

// Privilege is what a route requires.
type privilege int

const (
	public              privilege = iota // no authentication
	login                                // any authenticated account (Redfish "Login")
	configureComponents                  // mutations (Redfish "ConfigureComponents")
)

// Server serves the Redfish API over one composition manager.
type Server struct {
	mgr     *compose.Manager
	top     *topology.Topology
	auth    *Auth
	log     *slog.Logger
	mux     *http.ServeMux
	started time.Time
	uuid    string
}

// New returns a Server. log may be nil.
func New(mgr *compose.Manager, auth *Auth, log *slog.Logger) *Server {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &Server{mgr: mgr, top: mgr.Topology(), auth: auth, log: log, mux: http.NewServeMux(), started: time.Now(),
		uuid: serviceUUID(mgr.Topology().Name)}
	s.routes()
	return s
}

type handlerFunc func(w http.ResponseWriter, r *http.Request) error

// handle registers pattern with its privilege.
func (s *Server) handle(pattern string, priv privilege, h handlerFunc) {
	s.mux.Handle(pattern, s.wrap(priv, h))
}

// ServeHTTP implements http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	rec := &statusRecorder{ResponseWriter: w, status: 200}
	defer func() {
		if v := recover(); v != nil {
			s.log.Error("panic serving request", "method", r.Method, "path", r.URL.Path, "panic", v, "stack", string(debug.Stack()))
			writeError(rec, errInternal(fmt.Errorf("internal error")))
		}
		s.log.Debug("request", "method", r.Method, "path", r.URL.Path, "status", rec.status, "took", time.Since(start))
	}()
	// Redfish URIs may end in a slash; serve both forms (but /redfish/v1/
	// itself is the service root).
	if p := r.URL.Path; len(p) > len("/redfish/v1/") && strings.HasSuffix(p, "/") {
		r.URL.Path = strings.TrimRight(p, "/")
	}
	if _, pattern := s.mux.Handler(r); pattern == "" {
		if allowed := s.allowedMethods(r); len(allowed) > 0 {
			rec.Header().Set("Allow", strings.Join(allowed, ", "))
			writeError(rec, errMethod())
			return
		}
		writeError(rec, newError(http.StatusNotFound, baseRegistry+"ResourceMissingAtURI",
			fmt.Sprintf("The resource at the URI '%s' was not found.", r.URL.Path), r.URL.Path))
		return
	}
	s.mux.ServeHTTP(rec, r) // sets the path values
}

// allowedMethods lists the methods the path answers to.
func (s *Server) allowedMethods(r *http.Request) []string {
	var out []string
	for _, m := range []string{"GET", "POST", "PATCH", "DELETE"} {
		probe := r.Clone(r.Context())
		probe.Method = m
		if _, p := s.mux.Handler(probe); p != "" {
			out = append(out, m)
			if m == "GET" {
				out = append(out, "HEAD")
			}
		}
	}
	return out
}

type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (r *statusRecorder) WriteHeader(code int) {
	r.status = code
	r.ResponseWriter.WriteHeader(code)
}

// wrap authenticates, authorises and renders handler errors.
func (s *Server) wrap(priv privilege, h handlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "no-cache")
		if priv != public {
			user, ok := s.authenticate(r)
			if !ok {
				writeError(w, errNoSession())
				return
			}
			if priv == configureComponents && user != AdminUser {
				writeError(w, errPrivilege())
				return
			}
		}
		if r.ContentLength > MaxBody {
			writeError(w, errTooLarge(MaxBody))
			return
		}
		r.Body = http.MaxBytesReader(w, r.Body, MaxBody)
		if err := h(w, r); err != nil {
			writeError(w, translate(err))
		}
	})
}

// authenticate accepts an X-Auth-Token session or HTTP Basic credentials.
func (s *Server) authenticate(r *http.Request) (string, bool) {
	if tok := r.Header.Get("X-Auth-Token"); tok != "" {
		sess, ok := s.auth.bySessionToken(tok)
		if !ok {
			return "", false
		}
		return sess.User, true
	}
	if user, pass, ok := r.BasicAuth(); ok && s.auth.verify(user, pass) {
		return user, true
	}
	return "", false
}

// decode reads a JSON object body into v strictly: malformed JSON, wrong
// types, unknown properties and trailing data are errors naming the
// property. Redfish annotations ("@odata.*") are ignored.
func decode(r *http.Request, v any) error {
	data, err := io.ReadAll(r.Body)
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return errTooLarge(MaxBody)
		}
		return errMalformed(err.Error())
	}
	if len(bytes.TrimSpace(data)) == 0 {
		return errMalformed("The request body is empty.")
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(data, &raw); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			return errMalformed("The request body must be a JSON object.")
		}
		return errMalformed(err.Error())
	}
	for k := range raw {
		if strings.HasPrefix(k, "@odata.") {
			delete(raw, k)
		}
	}
	clean, _ := json.Marshal(raw)
	dec := json.NewDecoder(bytes.NewReader(clean))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		var te *json.UnmarshalTypeError
		switch {
		case errors.As(err, &te):
			field := te.Field
			if field == "" {
				field = "(body)"
			}
			return errPropertyType(field, te.Value)
		case strings.HasPrefix(err.Error(), "json: unknown field "):
			return errPropertyUnknown(strings.Trim(strings.TrimPrefix(err.Error(), "json: unknown field "), `"`))
		}
		return errMalformed(err.Error())
	}
	return nil
}

// odataID is a Redfish reference.
type odataID struct {
	ID string `json:"@odata.id"`
}

func ref(id string) odataID { return odataID{ID: id} }

func reff(format string, args ...any) odataID { return odataID{ID: fmt.Sprintf(format, args...)} }

func collection(id, typ, name string, members []odataID) map[string]any {
	if members == nil {
		members = []odataID{}
	}
	return map[string]any{
		"@odata.id":           id,
		"@odata.type":         "#" + typ + "." + typ,
		"Name":                name,
		"Members":             members,
		"Members@odata.count": len(members),
	}
}

func serviceUUID(name string) string {
	// A stable UUID derived from the topology name (version 5 layout).
	h := []byte(fmt.Sprintf("%x", sha1Sum("rackpool:"+name)))
	return fmt.Sprintf("%s-%s-5%s-a%s-%s", h[0:8], h[8:12], h[13:16], h[17:20], h[20:32])
}
