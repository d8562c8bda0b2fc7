package redfish

import (
	"net/http"
	"time"
)

// managerRoutes are the routes of the one Manager, the control plane
// itself (routes.go); its LogServices are in log_services.go, its network
// in manager_net.go.
var managerRoutes = []route{
	{"GET /redfish/v1/Managers", login, (*Server).getManagers},
	{"GET /redfish/v1/Managers/rackpool", login, (*Server).getManager},
}

const (
	managerPath = "/redfish/v1/Managers/rackpool"
	auditPath   = managerPath + "/LogServices/Audit"
	eventLog    = managerPath + "/LogServices/Events"
)

func (s *Server) getManagers(w http.ResponseWriter, r *http.Request) error {
	writeJSON(w, http.StatusOK, collection("/redfish/v1/Managers", "ManagerCollection", "Manager Collection", []odataID{ref(managerPath)}))
	return nil
}

func (s *Server) getManager(w http.ResponseWriter, r *http.Request) error {
	writeJSON(w, http.StatusOK, map[string]any{
		"@odata.id":             managerPath,
		"@odata.type":           "#Manager.v1_19_0.Manager",
		"Id":                    "rackpool",
		"Name":                  "rackpool control plane",
		"ManagerType":           "Service",
		"UUID":                  s.uuid,
		"FirmwareVersion":       Version,
		"ServiceEntryPointUUID": s.uuid,
		"DateTime":              time.Now().UTC().Format(time.RFC3339),
		"Status":                map[string]string{"State": "Enabled", "Health": "OK"},
		"LogServices":           ref(managerPath + "/LogServices"),
		"EthernetInterfaces":    ref(ethernetPath),
		"NetworkProtocol":       ref(networkProtocolPath),
	})
	return nil
}

// Version is the service's version, set by main.
var Version = "dev"
