package redfish

import (
	"net/http"
)

func (s *Server) getTopology(w http.ResponseWriter, r *http.Request) error {
	writeJSON(w, http.StatusOK, s.top.View())
	return nil
}
