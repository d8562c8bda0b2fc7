package redfish

import (
	"net/http"
	"slices"

	"rackpool/internal/tenancy"
)

// Routes, bmcweb style: every file of a resource family declares its routes
// as literal "METHOD /path" patterns, each beside the privilege it requires
// and its handler; routeTable gathers them, and nothing is registered any
// other way. Grep a URL to find its handler and its privilege.

// privilege is what a route requires: none, or one Redfish privilege.
type privilege int

const (
	public              privilege = iota // no authentication
	login                                // any authenticated account (Redfish "Login")
	configureComponents                  // compositions, reservations, connections ("ConfigureComponents")
	configureUsers                       // accounts and tenants ("ConfigureUsers")
	configureManager                     // service-wide settings, faults, logs ("ConfigureManager")
	configureSelf                        // one's own account and sessions ("ConfigureSelf")
	hostAgent                            // a host agent's steps (rackpool's OEM "RackpoolHostAgent")
)

var privilegeNames = map[privilege]string{public: "", login: tenancy.Login, configureComponents: tenancy.ConfigureComponents,
	configureUsers: tenancy.ConfigureUsers, configureManager: tenancy.ConfigureManager, configureSelf: tenancy.ConfigureSelf,
	hostAgent: tenancy.HostAgent}

// route is one endpoint of the service.
type route struct {
	pattern string // "METHOD /path", as http.ServeMux takes it
	priv    privilege
	handler func(*Server, http.ResponseWriter, *http.Request) error
}

// routeTable is every route of the service, family by family.
var routeTable = slices.Concat(serviceRoutes, schemaRoutes, accountRoutes, systemRoutes, powerRoutes, blockRoutes, composeRoutes,
	configRoutes, chassisRoutes, cxlRoutes, fabricRoutes, connectionRoutes, oemRoutes, memoryRoutes, driveRoutes, taskRoutes, eventRoutes,
	metricsRoutes, logRoutes, telemetryRoutes, provisioningRoutes, hostAgentRoutes)

type handlerFunc func(w http.ResponseWriter, r *http.Request) error

// routes registers routeTable on s's mux.
func (s *Server) routes() {
	for _, rt := range routeTable {
		h := rt.handler
		s.mux.Handle(rt.pattern, s.wrap(rt.pattern, rt.priv, s.ifMatchGuard(func(w http.ResponseWriter, r *http.Request) error {
			return h(s, w, r)
		})))
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
		out[i] = Route{Pattern: rt.pattern, Privilege: privilegeNames[rt.priv]}
	}
	return out
}
