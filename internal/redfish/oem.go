package redfish

import (
	"net/http"
)

// oemRoutes are the routes of the Oem topology document (routes.go).
var oemRoutes = []route{
	{"GET /redfish/v1/Oem/Rackpool/Topology", login, (*Server).getTopology},
}

func (s *Server) getTopology(w http.ResponseWriter, r *http.Request) error {
	writeJSON(w, http.StatusOK, TopologyView(s.top))
	return nil
}
