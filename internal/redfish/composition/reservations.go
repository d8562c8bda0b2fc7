package composition

import (
	"maps"
	"net/http"
	"slices"
	"time"

	"rackpool/internal/inventory"
	"rackpool/internal/redfish/service"
	"rackpool/internal/rf"
)

// CompositionReservations: what a PreviewReserve (compose_action.go)
// holds, one reservation per request, grouping one reserved system per
// ComposeSystem stanza until it is applied, deleted or expires.

// reservationRoutes are the routes of the reservations.
var reservationRoutes = []service.Route[*Service]{
	{Pattern: "GET /redfish/v1/CompositionService/CompositionReservations", Priv: service.Login, Handler: (*Service).getReservations},
	{Pattern: "GET /redfish/v1/CompositionService/CompositionReservations/{id}", Priv: service.Login, Handler: (*Service).getReservation},
	{Pattern: "DELETE /redfish/v1/CompositionService/CompositionReservations/{id}", Priv: service.ConfigureComponents, Handler: (*Service).deleteReservation},
}

// reservationGroups returns the live reservations r's principal may see,
// grouped by request.
func (s *Service) reservationGroups(r *http.Request) map[string][]*inventory.Composition {
	p := service.Principal(r)
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
func (s *Service) missingReservation(r *http.Request, id string) error {
	for _, c := range s.mgr.Reservations() {
		if c.Group == id || c.ID == id {
			return s.core.Hide(r, "CompositionReservation", id)
		}
	}
	return rf.NotFound("CompositionReservation", id)
}

func (s *Service) getReservations(w http.ResponseWriter, r *http.Request) error {
	var members []rf.ODataID
	for _, g := range slices.Sorted(maps.Keys(s.reservationGroups(r))) {
		members = append(members, rf.Ref(reservationsPath+g))
	}
	service.WriteJSON(w, http.StatusOK, rf.Collection("/redfish/v1/CompositionService/CompositionReservations",
		"CompositionReservationCollection", "Composition Reservation Collection", members))
	return nil
}

func (s *Service) reservationBody(id string, rs []*inventory.Composition) map[string]any {
	var blocks []rf.ODataID
	var stanzas []any
	for _, c := range rs {
		var links []rf.ODataID
		for _, b := range c.Blocks {
			blocks = append(blocks, rf.Ref(service.BlocksPath+b))
			links = append(links, rf.Ref(service.BlocksPath+b))
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
		"Oem": service.RackpoolOem("CompositionReservation", map[string]any{"ExpiresAt": first.ExpiresAt.UTC().Format(time.RFC3339)}),
	}
}

func (s *Service) getReservation(w http.ResponseWriter, r *http.Request) error {
	id := r.PathValue("id")
	rs, ok := s.reservationGroups(r)[id]
	if !ok {
		return s.missingReservation(r, id)
	}
	service.WriteJSON(w, http.StatusOK, s.reservationBody(id, rs))
	return nil
}

func (s *Service) deleteReservation(w http.ResponseWriter, r *http.Request) error {
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
