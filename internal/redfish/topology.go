package redfish

import (
	"net/http"
)

// topologyRoutes are the routes of the Oem topology document: the topology
// the service composes over, as the console draws it (routes.go).
var topologyRoutes = []route{
	{"GET /redfish/v1/Oem/Rackpool/Topology", login, (*Server).getTopology},
}

func (s *Server) getTopology(w http.ResponseWriter, r *http.Request) error {
	writeJSON(w, http.StatusOK, TopologyView(s.top))
	return nil
}
