package fmserver

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"rackpool/internal/fabric"
	"rackpool/internal/inventory"
	"rackpool/internal/rf"
)

// zoneRoutes are the routes of Zones.
var zoneRoutes = []route{
	{"GET /redfish/v1/Fabrics/{id}/Zones", login, (*Server).getZones},
	{"POST /redfish/v1/Fabrics/{id}/Zones", login, (*Server).postZone},
	{"GET /redfish/v1/Fabrics/{id}/Zones/{zone}", login, (*Server).getZone},
	{"PATCH /redfish/v1/Fabrics/{id}/Zones/{zone}", login, (*Server).patchZone},
	{"DELETE /redfish/v1/Fabrics/{id}/Zones/{zone}", login, (*Server).deleteZone},
}

// A zone is a ZoneOfEndpoints holding one host port's initiator endpoint
// and the target endpoints of the devices attached to that port (devices
// with one block, outside CXL: the others attach through Connections). Its
// Id is the initiator endpoint's Id. The membership is the driver's truth
// (Discover); the server remembers only which zones were created and not
// deleted, so a zone left with just its initiator stays. A port with
// attachments always has a zone, created or not.
//
// ETags are strong and derived from the content: a hash of the zone's Id
// and its sorted members, so any change of membership, through this
// server or not, changes it, and a zone that returns to an earlier
// membership returns to that ETag.

// zoneMembers returns the devices attached to hp that belong in zones,
// in fabric order.
func (s *Server) zoneMembers(st fabric.State, hp *inventory.HostPort) []*inventory.Device {
	attached := map[string]bool{}
	for _, a := range st.Attachments {
		if a.Host == hp.Host.ID && a.HostPort == hp.ID {
			attached[a.Device] = true
		}
	}
	var out []*inventory.Device
	for _, d := range s.fab.Devices {
		if attached[d.ID] && !UsesConnections(d) {
			out = append(out, d)
		}
	}
	return out
}

// zoneExists reports whether hp has a zone.
func (s *Server) zoneExists(st fabric.State, hp *inventory.HostPort) bool {
	s.zmu.Lock()
	created := s.zones[InitiatorID(hp.Host.ID, hp.ID)]
	s.zmu.Unlock()
	return created || len(s.zoneMembers(st, hp)) > 0
}

func contentETag(parts ...string) string {
	sum := sha256.Sum256([]byte(strings.Join(parts, "\x00")))
	return `"` + hex.EncodeToString(sum[:8]) + `"`
}

func (s *Server) zoneETag(st fabric.State, hp *inventory.HostPort) string {
	parts := []string{"zone", InitiatorID(hp.Host.ID, hp.ID)}
	for _, d := range s.zoneMembers(st, hp) {
		parts = append(parts, d.ID)
	}
	return contentETag(parts...)
}

func (s *Server) zoneBody(st fabric.State, hp *inventory.HostPort) (map[string]any, string) {
	id := InitiatorID(hp.Host.ID, hp.ID)
	eps := []odataID{ref(s.endpointPath(id))}
	for _, d := range s.zoneMembers(st, hp) {
		eps = append(eps, ref(s.endpointPath(d.ID)))
	}
	etag := s.zoneETag(st, hp)
	return map[string]any{
		"@odata.id":   s.base() + "/Zones/" + id,
		"@odata.type": "#Zone.v1_6_0.Zone",
		"@odata.etag": etag,
		"Id":          id,
		"Name":        "Devices of host port " + hp.ID + " of " + hp.Host.ID,
		"ZoneType":    "ZoneOfEndpoints",
		"Status":      statusOK(""),
		"Links":       map[string]any{"Endpoints": eps},
	}, etag
}

// zoneResponse renders hp's zone as it is now.
func (s *Server) zoneResponse(ctx context.Context, status int, hp *inventory.HostPort) *rf.Recorder {
	st, err := s.state(ctx)
	if err != nil {
		return errorResponse(err.(*apiError))
	}
	body, etag := s.zoneBody(st, hp)
	resp := jsonResponse(status, body)
	resp.Header().Set("ETag", etag)
	if status == http.StatusCreated {
		resp.Header().Set("Location", s.base()+"/Zones/"+InitiatorID(hp.Host.ID, hp.ID))
	}
	return resp
}

func (s *Server) getZones(w http.ResponseWriter, r *http.Request) error {
	if err := s.checkFabric(r); err != nil {
		return err
	}
	st, err := s.state(r.Context())
	if err != nil {
		return err
	}
	var members []odataID
	for _, hp := range s.fab.Ports {
		if s.zoneExists(st, hp) {
			members = append(members, ref(s.base()+"/Zones/"+InitiatorID(hp.Host.ID, hp.ID)))
		}
	}
	rf.WriteJSON(w, http.StatusOK, collection(s.base()+"/Zones", "ZoneCollection", "Zone Collection", members))
	return nil
}

// zonePort returns the host port of the zone r names, with the fabric's
// state, or 404 when it has no zone.
func (s *Server) zonePort(r *http.Request) (*inventory.HostPort, fabric.State, error) {
	if err := s.checkFabric(r); err != nil {
		return nil, fabric.State{}, err
	}
	id := r.PathValue("zone")
	hp := s.initiator(id)
	if hp == nil {
		return nil, fabric.State{}, errNotFound("Zone", id)
	}
	st, err := s.state(r.Context())
	if err != nil {
		return nil, fabric.State{}, err
	}
	if !s.zoneExists(st, hp) {
		return nil, fabric.State{}, errNotFound("Zone", id)
	}
	return hp, st, nil
}

func (s *Server) getZone(w http.ResponseWriter, r *http.Request) error {
	hp, st, err := s.zonePort(r)
	if err != nil {
		return err
	}
	body, etag := s.zoneBody(st, hp)
	w.Header().Set("ETag", etag)
	rf.WriteJSON(w, http.StatusOK, body)
	return nil
}

// zoneRequest is the body of a zone's POST and PATCH.
type zoneRequest struct {
	Name        *string
	Description *string
	ZoneType    *string
	Links       *struct {
		Endpoints []odataID
	}
}

// endpointRef resolves a link to an endpoint of this fabric: a host port
// or a device.
func (s *Server) endpointRef(prop string, l odataID) (*inventory.HostPort, *inventory.Device, error) {
	prefix := s.base() + "/Endpoints/"
	id, ok := strings.CutPrefix(strings.TrimRight(l.ID, "/"), prefix)
	if !ok || id == "" || strings.Contains(id, "/") {
		return nil, nil, errUnknownLink(prop, l.ID, "Link endpoints of this fabric: "+prefix+"{Id}.")
	}
	if hp := s.initiator(id); hp != nil {
		return hp, nil, nil
	}
	if d := s.device(id); d != nil {
		return nil, d, nil
	}
	return nil, nil, errUnknownLink(prop, l.ID, "No endpoint "+id+" in fabric "+s.fab.ID+".")
}

// parseZone checks a zone body and returns its initiator and target
// devices (deduplicated, in the order given).
func (s *Server) parseZone(req *zoneRequest) (*inventory.HostPort, []*inventory.Device, error) {
	if req.ZoneType != nil && *req.ZoneType != "ZoneOfEndpoints" {
		return nil, nil, errPropertyValue("ZoneType", *req.ZoneType, "This fabric manager has zones of endpoints only: ZoneOfEndpoints.")
	}
	if req.Links == nil || req.Links.Endpoints == nil {
		return nil, nil, errPropertyMissing("Links.Endpoints")
	}
	var ini *inventory.HostPort
	var devs []*inventory.Device
	for i, l := range req.Links.Endpoints {
		prop := fmt.Sprintf("Links.Endpoints[%d]", i)
		hp, d, err := s.endpointRef(prop, l)
		if err != nil {
			return nil, nil, err
		}
		switch {
		case hp != nil && ini != nil && hp != ini:
			return nil, nil, errPropertyValue(prop, l.ID, "A zone holds exactly one initiator endpoint (a host port).")
		case hp != nil:
			ini = hp
		case UsesConnections(d):
			return nil, nil, errPropertyValue(prop, l.ID, "Device "+d.ID+" has several blocks or is CXL memory: attach its blocks with Connections.")
		case !slices.Contains(devs, d):
			devs = append(devs, d)
		}
	}
	if ini == nil {
		return nil, nil, errPropertyValue("Links.Endpoints", "", "Name the zone's initiator endpoint (a host port).").
			resolve("A zone of endpoints holds exactly one initiator endpoint (a host port).")
	}
	return ini, devs, nil
}

// checkIfMatch compares r's If-Match with the current ETag: 428 without
// one, 412 when none matches.
func checkIfMatch(r *http.Request, cur string) error {
	list := strings.TrimSpace(strings.Join(r.Header.Values("If-Match"), ","))
	if list == "" {
		return errPreconditionRequired()
	}
	if rf.ETagMatches(list, cur) {
		return nil
	}
	return errPreconditionFailed(cur)
}

func attachment(d *inventory.Device, hp *inventory.HostPort) fabric.Attachment {
	return fabric.Attachment{Block: d.Blocks[0].ID, Device: d.ID, Host: hp.Host.ID, HostPort: hp.ID}
}

func (s *Server) postZone(w http.ResponseWriter, r *http.Request) error {
	if err := s.checkFabric(r); err != nil {
		return err
	}
	var req zoneRequest
	if err := decode(r, &req); err != nil {
		return err
	}
	hp, devs, err := s.parseZone(&req)
	if err != nil {
		return err
	}
	id := InitiatorID(hp.Host.ID, hp.ID)
	unlock, err := s.ports.lock(r.Context(), id)
	if err != nil {
		return err
	}
	st, err := s.state(r.Context())
	if err != nil {
		unlock()
		return err
	}
	if s.zoneExists(st, hp) {
		unlock()
		return errAlreadyExists("Links.Endpoints", s.endpointPath(id))
	}
	var steps []step
	for _, d := range devs {
		steps = append(steps, step{a: attachment(d, hp)})
	}
	s.runChange(w, r, unlock, steps, func(ctx context.Context) *rf.Recorder {
		s.zmu.Lock()
		s.zones[id] = true
		s.zmu.Unlock()
		return s.zoneResponse(ctx, http.StatusCreated, hp)
	})
	return nil
}

func (s *Server) patchZone(w http.ResponseWriter, r *http.Request) error {
	if err := s.checkFabric(r); err != nil {
		return err
	}
	var req zoneRequest
	if err := decode(r, &req); err != nil {
		return err
	}
	if req.Links == nil {
		return errPropertyMissing("Links.Endpoints")
	}
	hp, devs, err := s.parseZone(&req)
	if err != nil {
		return err
	}
	if id := InitiatorID(hp.Host.ID, hp.ID); id != r.PathValue("zone") {
		return errPropertyValue("Links.Endpoints", s.endpointPath(id),
			"A zone's initiator is fixed: it is the zone's Id, "+r.PathValue("zone")+".")
	}
	unlock, err := s.ports.lock(r.Context(), r.PathValue("zone"))
	if err != nil {
		return err
	}
	hp, st, err := s.zonePort(r)
	if err != nil {
		unlock()
		return err
	}
	if err := checkIfMatch(r, s.zoneETag(st, hp)); err != nil {
		unlock()
		return err
	}
	cur := s.zoneMembers(st, hp)
	var steps []step
	for _, d := range cur {
		if !slices.Contains(devs, d) {
			steps = append(steps, step{detach: true, a: attachment(d, hp)})
		}
	}
	for _, d := range devs {
		if !slices.Contains(cur, d) {
			steps = append(steps, step{a: attachment(d, hp)})
		}
	}
	s.runChange(w, r, unlock, steps, func(ctx context.Context) *rf.Recorder {
		s.zmu.Lock()
		s.zones[r.PathValue("zone")] = true
		s.zmu.Unlock()
		return s.zoneResponse(ctx, http.StatusOK, hp)
	})
	return nil
}

func (s *Server) deleteZone(w http.ResponseWriter, r *http.Request) error {
	if err := s.checkFabric(r); err != nil {
		return err
	}
	unlock, err := s.ports.lock(r.Context(), r.PathValue("zone"))
	if err != nil {
		return err
	}
	hp, st, err := s.zonePort(r)
	if err != nil {
		unlock()
		return err
	}
	if err := checkIfMatch(r, s.zoneETag(st, hp)); err != nil {
		unlock()
		return err
	}
	var steps []step
	for _, d := range s.zoneMembers(st, hp) {
		steps = append(steps, step{detach: true, a: attachment(d, hp)})
	}
	s.runChange(w, r, unlock, steps, func(ctx context.Context) *rf.Recorder {
		s.zmu.Lock()
		delete(s.zones, r.PathValue("zone"))
		s.zmu.Unlock()
		return &rf.Recorder{Status: http.StatusNoContent}
	})
	return nil
}
