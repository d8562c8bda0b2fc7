package redfish

import (
	"fmt"
	"net/http"
	"slices"
	"strings"

	"rackpool/internal/compose"
	"rackpool/internal/inventory"
	"rackpool/internal/schedule"
)

// connectionRoutes are the routes of fabric Connections (routes.go).
var connectionRoutes = []route{
	{"GET /redfish/v1/Fabrics/{id}/Connections", login, (*Server).getConnections},
	{"POST /redfish/v1/Fabrics/{id}/Connections", configureComponents, (*Server).postConnection},
	{"GET /redfish/v1/Fabrics/{id}/Connections/{conn}", login, (*Server).getConnection},
	{"DELETE /redfish/v1/Fabrics/{id}/Connections/{conn}", configureComponents, (*Server).deleteConnection},
}

// Connections are the fabric-level way to attach devices to a host: a
// Connection links a host port endpoint (initiator) to device endpoints
// (targets) on one fabric. They are not stored on their own: a Connection
// is the view, from one fabric, of one composed system's blocks on that
// fabric (one truth, two views).
//
//	POST   .../Fabrics/{id}/Connections  adds the targets' blocks to the
//	       system composed on the initiator's host, or composes a new system
//	       there holding just them. A device with several blocks (a memory
//	       node) gives Oem.Rackpool.BlockCount of its free blocks (default 1).
//	DELETE .../Connections/{id}           removes the system's blocks on
//	       that fabric; a system left with no device at all is decomposed.
//
// The Connection Id is the system's Id. Every change goes through the
// composition manager, all or nothing, with the same tenancy and quotas as
// the ComputerSystem API.

// fabric is the fabric the request's path names.
func (s *Server) fabric(r *http.Request) (*inventory.Fabric, error) {
	f := s.top.Fabric(r.PathValue("id"))
	if f == nil {
		return nil, errNotFound("Fabric", r.PathValue("id"))
	}
	return f, nil
}

// onFabric lists c's device blocks on fabric f.
func (s *Server) onFabric(c *inventory.Composition, f *inventory.Fabric) []string {
	var out []string
	for _, id := range c.Blocks {
		if b := s.top.Block(id); b != nil && b.Device != nil && b.Device.Fabric == f {
			out = append(out, id)
		}
	}
	return out
}

func (s *Server) getConnections(w http.ResponseWriter, r *http.Request) error {
	f, err := s.fabric(r)
	if err != nil {
		return err
	}
	p := principal(r)
	var members []odataID
	for _, c := range s.mgr.List() {
		if p.Sees(c.Tenant) && len(s.onFabric(c, f)) > 0 {
			members = append(members, reff("/redfish/v1/Fabrics/%s/Connections/%s", f.ID, c.ID))
		}
	}
	writeJSON(w, http.StatusOK, collection("/redfish/v1/Fabrics/"+f.ID+"/Connections", "ConnectionCollection", "Connection Collection", members))
	return nil
}

var connectionTypes = map[inventory.Kind]string{inventory.Memory: "Memory", inventory.NVMe: "Storage", inventory.SSD: "Storage", inventory.HDD: "Storage"}

func (s *Server) connectionBody(f *inventory.Fabric, c *inventory.Composition) map[string]any {
	h := s.top.Host(c.Host)
	var targets []odataID
	initiators := []odataID{}
	typ := ""
	seenDev, seenPort := map[string]bool{}, map[string]bool{}
	for _, id := range s.onFabric(c, f) {
		b := s.top.Block(id)
		if !seenDev[b.Device.ID] {
			seenDev[b.Device.ID] = true
			targets = append(targets, reff("/redfish/v1/Fabrics/%s/Endpoints/%s", f.ID, b.Device.ID))
		}
		if port := c.Ports[id]; port != "" && !seenPort[port] {
			seenPort[port] = true
			initiators = append(initiators, reff("/redfish/v1/Fabrics/%s/Endpoints/%s-%s", f.ID, h.ID, port))
		}
		if t, ok := connectionTypes[b.Kind]; ok && typ == "" {
			typ = t
		}
	}
	body := map[string]any{
		"@odata.id":   "/redfish/v1/Fabrics/" + f.ID + "/Connections/" + c.ID,
		"@odata.type": "#Connection.v1_3_0.Connection",
		"Id":          c.ID,
		"Name":        "Connection of " + c.Name,
		"Status":      map[string]string{"State": "Enabled", "Health": "OK"},
		"Links": map[string]any{
			"InitiatorEndpoints": initiators,
			"TargetEndpoints":    targets,
		},
		"Oem": rackpoolOem("Connection", map[string]any{
			"System":         ref("/redfish/v1/Systems/" + c.ID),
			"ResourceBlocks": blockRefs(s.onFabric(c, f)),
		}),
	}
	if typ != "" {
		body["ConnectionType"] = typ
	}
	if info := s.memoryChunkInfo(f, s.onFabric(c, f)); len(info) > 0 {
		body["MemoryChunkInfo"] = info
	}
	return body
}

func (s *Server) connectionTarget(r *http.Request) (*inventory.Fabric, *inventory.Composition, error) {
	f, err := s.fabric(r)
	if err != nil {
		return nil, nil, err
	}
	id := r.PathValue("conn")
	c, err := s.mgr.Get(id)
	if err != nil || len(s.onFabric(c, f)) == 0 {
		return nil, nil, errNotFound("Connection", id)
	}
	if !principal(r).Sees(c.Tenant) {
		return nil, nil, s.hide(r, "Connection", id)
	}
	return f, c, nil
}

func (s *Server) getConnection(w http.ResponseWriter, r *http.Request) error {
	f, c, err := s.connectionTarget(r)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, s.connectionBody(f, c))
	return nil
}

// endpointID extracts the endpoint ID from a link into fabric f.
func endpointID(f *inventory.Fabric, link odataID, prop string) (string, error) {
	prefix := "/redfish/v1/Fabrics/" + f.ID + "/Endpoints/"
	id, ok := strings.CutPrefix(link.ID, prefix)
	if !ok || id == "" || strings.Contains(id, "/") {
		return "", errPropertyValue(prop, link.ID, "Use endpoints of this fabric: "+prefix+"{Id}.")
	}
	return id, nil
}

func (s *Server) postConnection(w http.ResponseWriter, r *http.Request) error {
	f, err := s.fabric(r)
	if err != nil {
		return err
	}
	var body struct {
		Name           string
		ConnectionType string
		Links          *struct {
			InitiatorEndpoints []odataID
			TargetEndpoints    []odataID
		}
		Oem *struct {
			Rackpool *struct {
				BlockCount int
			}
		}
	}
	if err := decode(r, &body); err != nil {
		return err
	}
	if body.Links == nil || len(body.Links.InitiatorEndpoints) == 0 {
		return errPropertyMissing("Links.InitiatorEndpoints")
	}
	if len(body.Links.InitiatorEndpoints) != 1 {
		return errPropertyValue("Links.InitiatorEndpoints", fmt.Sprint(len(body.Links.InitiatorEndpoints)), "Name exactly one host port endpoint.")
	}
	if len(body.Links.TargetEndpoints) == 0 {
		return errPropertyMissing("Links.TargetEndpoints")
	}
	count := 1
	if body.Oem != nil && body.Oem.Rackpool != nil && body.Oem.Rackpool.BlockCount != 0 {
		count = body.Oem.Rackpool.BlockCount
		if count < 1 || count > 4096 {
			return errPropertyValue("Oem.Rackpool.BlockCount", fmt.Sprint(count), "Use 1 to 4096.")
		}
	}
	ini, err := endpointID(f, body.Links.InitiatorEndpoints[0], "Links.InitiatorEndpoints[0]")
	if err != nil {
		return err
	}
	var host *inventory.Host
	for _, hp := range f.Ports {
		if hp.Host.ID+"-"+hp.ID == ini {
			host = hp.Host
		}
	}
	if host == nil {
		return errPropertyValue("Links.InitiatorEndpoints[0]", body.Links.InitiatorEndpoints[0].ID, "The initiator must be a host port endpoint of this fabric.")
	}
	var blocks []string
	p := principal(r)
	for i, l := range body.Links.TargetEndpoints {
		prop := fmt.Sprintf("Links.TargetEndpoints[%d]", i)
		id, err := endpointID(f, l, prop)
		if err != nil {
			return err
		}
		var dev *inventory.Device
		for _, d := range f.Devices {
			if d.ID == id {
				dev = d
			}
		}
		if dev == nil {
			return errPropertyValue(prop, l.ID, "The target must be a device endpoint of this fabric.")
		}
		want := 1
		if len(dev.Blocks) > 1 {
			want = count
		}
		got := 0
		for _, b := range dev.Blocks {
			if got == want {
				break
			}
			st := s.mgr.BlockStatus(b.ID)
			if len(st.Compositions)+len(st.Reservations) == 0 && blockVisible(p, b, st) && !slices.Contains(blocks, b.ID) {
				blocks = append(blocks, b.ID)
				got++
			}
		}
		if got < want {
			if len(dev.Blocks) == 1 {
				blocks = append(blocks, dev.Blocks[0].ID) // let the scheduler say why it is taken
				continue
			}
			return translate(fmt.Errorf("%w", &schedule.Unsatisfiable{Rejections: []schedule.Rejection{{Host: host.ID,
				Reason: schedule.InUse, Detail: fmt.Sprintf("%s has %d free blocks, %d wanted", dev.ID, got, want)}}}))
		}
	}
	var sys *inventory.Composition
	for _, c := range s.mgr.List() {
		if c.Host == host.ID {
			if !p.Sees(c.Tenant) {
				return translate(fmt.Errorf("%w: host %s is in use", compose.ErrBusy, host.ID))
			}
			sys = c
		}
	}
	if sys == nil {
		name := body.Name
		req := compose.Request{Name: name, Tenant: tenantOf(r), Host: host.ID, Blocks: blocks}
		req.Quota, req.Check = s.quotaOf(r)
		sys, err = s.mgr.Compose(r.Context(), req)
	} else {
		ur := compose.UpdateRequest{Blocks: blocks}
		ur.Quota, ur.Check = s.quotaOf(r)
		sys, err = s.mgr.Update(r.Context(), sys.ID, ur)
	}
	if err != nil {
		return err
	}
	loc := "/redfish/v1/Fabrics/" + f.ID + "/Connections/" + sys.ID
	w.Header().Set("Location", loc)
	writeJSON(w, http.StatusCreated, s.connectionBody(f, sys))
	return nil
}

func (s *Server) deleteConnection(w http.ResponseWriter, r *http.Request) error {
	f, c, err := s.connectionTarget(r)
	if err != nil {
		return err
	}
	remove := s.onFabric(c, f)
	devices := 0
	for _, id := range c.Blocks {
		if b := s.top.Block(id); b != nil && b.Device != nil {
			devices++
		}
	}
	if devices == len(remove) {
		err = s.mgr.Decompose(r.Context(), c.ID, c.Version)
	} else {
		_, err = s.mgr.Update(r.Context(), c.ID, compose.UpdateRequest{Version: c.Version, Remove: remove})
	}
	if err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}
