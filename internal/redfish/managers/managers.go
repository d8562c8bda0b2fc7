package managers

import (
	"context"
	"net/http"
	"slices"
	"time"

	"rackpool/internal/events"
	"rackpool/internal/redfish/service"
	"rackpool/internal/rf"
	"rackpool/internal/store"
)

// Routes are the routes of the one Manager, the control plane itself:
// the Manager, its LogServices (logs.go) and its network (network.go), in
// that order (the core's routes.go gathers them).
var Routes = slices.Concat(managerRoutes, logRoutes, networkRoutes)

var managerRoutes = []service.Route[*Service]{
	{Pattern: "GET /redfish/v1/Managers", Priv: service.Login, Handler: (*Service).getManagers},
	{Pattern: "GET /redfish/v1/Managers/rackpool", Priv: service.Login, Handler: (*Service).getManager},
}

// Service serves the Manager and its children.
type Service struct {
	uuid    string
	version func() string
	listen  string
	store   AuditLog // nil: no audit log
	events  EventLog
}

// AuditLog reads the audit log back (store.Store).
type AuditLog interface {
	Audit(ctx context.Context, q store.AuditQuery) ([]store.AuditEntry, error)
	AuditMatching(ctx context.Context, q store.AuditQuery) (int64, error)
}

// EventLog is the event bus's retained events (events.Bus).
type EventLog interface {
	Recent(n int, filter func(events.Event) bool) []events.Event
}

// Deps are what a Service serves from.
type Deps struct {
	UUID    string        // the service's UUID, the Manager's too
	Version func() string // the service's version (FirmwareVersion)
	// Listen is the address the service listens on (redfish.Options.Listen):
	// EthernetInterfaces and NetworkProtocol report it.
	Listen string
	Audit  AuditLog // nil: no audit log
	Events EventLog
}

// New returns a Service over d.
func New(d Deps) *Service {
	return &Service{uuid: d.UUID, version: d.Version, listen: d.Listen, store: d.Audit, events: d.Events}
}

const (
	managerPath = "/redfish/v1/Managers/rackpool"
	auditPath   = managerPath + "/LogServices/Audit"
	eventLog    = managerPath + "/LogServices/Events"
)

func (s *Service) getManagers(w http.ResponseWriter, r *http.Request) error {
	service.WriteJSON(w, http.StatusOK, rf.Collection("/redfish/v1/Managers", "ManagerCollection", "Manager Collection", []rf.ODataID{rf.Ref(managerPath)}))
	return nil
}

func (s *Service) getManager(w http.ResponseWriter, r *http.Request) error {
	service.WriteJSON(w, http.StatusOK, map[string]any{
		"@odata.id":             managerPath,
		"@odata.type":           "#Manager.v1_19_0.Manager",
		"Id":                    "rackpool",
		"Name":                  "rackpool control plane",
		"ManagerType":           "Service",
		"UUID":                  s.uuid,
		"FirmwareVersion":       s.version(),
		"ServiceEntryPointUUID": s.uuid,
		"DateTime":              time.Now().UTC().Format(time.RFC3339),
		"Status":                map[string]string{"State": "Enabled", "Health": "OK"},
		"LogServices":           rf.Ref(managerPath + "/LogServices"),
		"EthernetInterfaces":    rf.Ref(ethernetPath),
		"NetworkProtocol":       rf.Ref(networkProtocolPath),
	})
	return nil
}
