package redfish

import (
	"maps"
	"net/http"
	"slices"
	"time"

	"rackpool/internal/inventory"
)

// CompositionReservations: what a PreviewReserve (compose_action.go)
// holds, one reservation per request, grouping one reserved system per
// ComposeSystem stanza until it is applied, deleted or expires.

// reservationRoutes are the routes of the reservations (routes.go).
var reservationRoutes = []route{
	{"GET /redfish/v1/CompositionService/CompositionReservations", login, (*Server).getReservations},
	{"GET /redfish/v1/CompositionService/CompositionReservations/{id}", login, (*Server).getReservation},
	{"DELETE /redfish/v1/CompositionService/CompositionReservations/{id}", configureComponents, (*Server).deleteReservation},
}

// reservationGroups returns the live reservations r's principal may see,
// grouped by request.
func (s *Server) reservationGroups(r *http.Request) map[string][]*inventory.Composition {
	p := principal(r)
	out := map[string][]*inventory.Composition{}
	for _, c := range s.mgr.Reservations() {
		if p.Sees(c.Tenant) {
			g := c.Group
			if g == "" {
				g = c.ID
			}
			out[g] = append(out[g], c)
		}
	}
	return out
}

// missingReservation answers a reservation r's principal cannot see: 404,
// audited as denied when it exists for another tenant.
func (s *Server) missingReservation(r *http.Request, id string) error {
	for _, c := range s.mgr.Reservations() {
		if c.Group == id || c.ID == id {
			return s.hide(r, "CompositionReservation", id)
		}
	}
	return errNotFound("CompositionReservation", id)
}

func (s *Server) getReservations(w http.ResponseWriter, r *http.Request) error {
	var members []odataID
	for _, g := range slices.Sorted(maps.Keys(s.reservationGroups(r))) {
		members = append(members, ref(reservationsPath+g))
	}
	writeJSON(w, http.StatusOK, collection("/redfish/v1/CompositionService/CompositionReservations",
		"CompositionReservationCollection", "Composition Reservation Collection", members))
	return nil
}

func (s *Server) reservationBody(id string, rs []*inventory.Composition) map[string]any {
	var blocks []odataID
	var stanzas []any
	for _, c := range rs {
		var links []odataID
		for _, b := range c.Blocks {
			blocks = append(blocks, ref(blocksPath+b))
			links = append(links, ref(blocksPath+b))
		}
		stanzas = append(stanzas, map[string]any{
			"StanzaType": "ComposeSystem",
			"StanzaId":   c.Name,
			"Request":    map[string]any{"Name": c.Name, "Links": map[string]any{"ResourceBlocks": links}},
		})
	}
	first := rs[0]
	return map[string]any{
		"@odata.id":              reservationsPath + id,
		"@odata.type":            "#CompositionReservation.v1_0_0.CompositionReservation",
		"Id":                     id,
		"Name":                   "Composition Reservation " + id,
		"ReservationTime":        first.CreatedAt.UTC().Format(time.RFC3339),
		"Client":                 first.Tenant,
		"ReservedResourceBlocks": blocks,
		"Manifest": map[string]any{
			"Description": first.Description,
			"Timestamp":   first.CreatedAt.UTC().Format(time.RFC3339),
			"Expand":      "None",
			"Stanzas":     stanzas,
		},
		"Oem": rackpoolOem("CompositionReservation", map[string]any{"ExpiresAt": first.ExpiresAt.UTC().Format(time.RFC3339)}),
	}
}

func (s *Server) getReservation(w http.ResponseWriter, r *http.Request) error {
	id := r.PathValue("id")
	rs, ok := s.reservationGroups(r)[id]
	if !ok {
		return s.missingReservation(r, id)
	}
	writeJSON(w, http.StatusOK, s.reservationBody(id, rs))
	return nil
}

func (s *Server) deleteReservation(w http.ResponseWriter, r *http.Request) error {
	id := r.PathValue("id")
	rs, ok := s.reservationGroups(r)[id]
	if !ok {
		return s.missingReservation(r, id)
	}
	for _, c := range rs {
		if err := s.mgr.Release(r.Context(), c.ID); err != nil {
			return err
		}
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}
