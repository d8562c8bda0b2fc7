package redfish

import (
	"net/http"
	"slices"

	"rackpool/internal/redfish/composition"
	"rackpool/internal/redfish/eventservice"
	"rackpool/internal/redfish/fabrics"
	"rackpool/internal/redfish/managers"
	"rackpool/internal/redfish/oem"
	"rackpool/internal/redfish/service"
	"rackpool/internal/redfish/telemetryservice"
	"rackpool/internal/rf"
)

// Routes, bmcweb style: every file of a resource family declares its routes
// as literal "METHOD /path" patterns, each beside the privilege it requires
// and its handler; routeTable gathers them, and nothing is registered any
// other way. Grep a URL to find its handler and its privilege.

// The privileges routes require (rf.Privilege), named as tenancy's roles
// grant them.
const (
	public              = service.Public
	login               = service.Login
	configureComponents = service.ConfigureComponents
	configureUsers      = service.ConfigureUsers
	configureManager    = service.ConfigureManager
	configureSelf       = service.ConfigureSelf
	hostAgent           = service.HostAgent
)

// route is one endpoint of the service.
type route struct {
	pattern string // "METHOD /path", as http.ServeMux takes it
	priv    rf.Privilege
	handler func(*Server, http.ResponseWriter, *http.Request) error
}

// routeTable is every route of the service, family by family; a family in
// a package of its own (composition, eventservice, fabrics, managers, oem,
// telemetryservice) exports its table, which
// familyRoutes binds to the Server's instance of that family.
var routeTable = slices.Concat(serviceRoutes, sessionRoutes, schemaRoutes, accountRoutes,
	familyRoutes(composition.Routes, func(s *Server) *composition.Service { return s.composition }), chassisRoutes, cxlRoutes,
	familyRoutes(fabrics.Routes, func(s *Server) *fabrics.Service { return s.fabrics }),
	topologyRoutes, familyRoutes(oem.MemoryRoutes, func(s *Server) *oem.Memory { return s.memory }), familyRoutes(oem.DriveRoutes, func(s *Server) *oem.PooledDrives { return s.pooledDrives }), taskRoutes,
	familyRoutes(eventservice.Routes, func(s *Server) *eventservice.Service { return s.eventsvc }), metricsRoutes,
	familyRoutes(managers.Routes, func(s *Server) *managers.Service { return s.managers }),
	familyRoutes(telemetryservice.Routes, func(s *Server) *telemetryservice.Service { return s.telemetry }), familyRoutes(oem.ProvisioningRoutes, func(s *Server) *oem.Provisioning { return s.provisioning }),
	familyRoutes(oem.HostAgentRoutes, func(s *Server) *oem.HostAgents { return s.hostAgents }))

// familyRoutes are the routes of a family whose handlers are methods of
// H, each bound to the Server's H (of).
func familyRoutes[H any](rts []service.Route[H], of func(*Server) H) []route {
	out := make([]route, len(rts))
	for i, rt := range rts {
		h := rt.Handler
		out[i] = route{pattern: rt.Pattern, priv: rt.Priv, handler: func(s *Server, w http.ResponseWriter, r *http.Request) error {
			return h(of(s), w, r)
		}}
	}
	return out
}

// routes registers routeTable on s's mux, each route in the pipeline of
// rf.Policy: admit (authentication, privileges), the body limit, serve
// (catch-up, the audit of mutations), the If-Match check, the handler, and
// answerError for what fails.
func (s *Server) routes() {
	policy := rf.Policy{Admit: s.admit, Fail: s.answerError}
	for _, rt := range routeTable {
		h := rt.handler
		s.mux.Handle(rt.pattern, policy.Wrap(rt.pattern, rt.priv, s.serve(rt.pattern, s.ifMatchGuard(func(w http.ResponseWriter, r *http.Request) error {
			return h(s, w, r)
		}))))
	}
}

// Route is one route as Routes lists it.
type Route struct {
	// Pattern is "METHOD /path" with {name} wildcards.
	Pattern string
	// Privilege is the Redfish privilege required; "" for a public route.
	Privilege string
}

// Routes lists every route the service registers, in table order.
func Routes() []Route {
	out := make([]Route, len(routeTable))
	for i, rt := range routeTable {
		out[i] = Route{Pattern: rt.pattern, Privilege: string(rt.priv)}
	}
	return out
}
