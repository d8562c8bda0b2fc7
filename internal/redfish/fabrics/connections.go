package fabrics

import (
	"fmt"
	"net/http"
	"slices"
	"strings"

	"rackpool/internal/compose"
	"rackpool/internal/inventory"
	"rackpool/internal/redfish/service"
	"rackpool/internal/rf"
	"rackpool/internal/schedule"
	"rackpool/internal/store"
)

// connectionRoutes are the routes of fabric Connections.
var connectionRoutes = []service.Route[*Service]{
	{Pattern: "GET /redfish/v1/Fabrics/{id}/Connections", Priv: service.Login, Handler: (*Service).getConnections},
	{Pattern: "POST /redfish/v1/Fabrics/{id}/Connections", Priv: service.ConfigureComponents, Handler: (*Service).postConnection},
	{Pattern: "GET /redfish/v1/Fabrics/{id}/Connections/{conn}", Priv: service.Login, Handler: (*Service).getConnection},
	{Pattern: "DELETE /redfish/v1/Fabrics/{id}/Connections/{conn}", Priv: service.ConfigureComponents, Handler: (*Service).deleteConnection},
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

// onFabric lists c's device blocks on fabric f.
func (s *Service) onFabric(c *inventory.Composition, f *inventory.Fabric) []string {
	var out []string
	for _, id := range c.Blocks {
		if b := s.top.Block(id); b != nil && b.Device != nil && b.Device.Fabric == f {
			out = append(out, id)
		}
	}
	return out
}

func (s *Service) getConnections(w http.ResponseWriter, r *http.Request) error {
	f, err := s.fabric(r)
	if err != nil {
		return err
	}
	p := service.Principal(r)
	var members []rf.ODataID
	for _, c := range s.mgr.List() {
		if p.Sees(c.Tenant) && len(s.onFabric(c, f)) > 0 {
			members = append(members, rf.Reff("/redfish/v1/Fabrics/%s/Connections/%s", f.ID, c.ID))
		}
	}
	service.WriteJSON(w, http.StatusOK, rf.Collection("/redfish/v1/Fabrics/"+f.ID+"/Connections", "ConnectionCollection", "Connection Collection", members))
	return nil
}

var connectionTypes = map[inventory.Kind]string{inventory.Memory: "Memory", inventory.NVMe: "Storage", inventory.SSD: "Storage", inventory.HDD: "Storage"}

func (s *Service) connectionBody(f *inventory.Fabric, c *inventory.Composition) map[string]any {
	h := s.top.Host(c.Host)
	var targets []rf.ODataID
	initiators := []rf.ODataID{}
	typ := ""
	seenDev, seenPort := map[string]bool{}, map[string]bool{}
	for _, id := range s.onFabric(c, f) {
		b := s.top.Block(id)
		if !seenDev[b.Device.ID] {
			seenDev[b.Device.ID] = true
			targets = append(targets, rf.Reff("/redfish/v1/Fabrics/%s/Endpoints/%s", f.ID, b.Device.ID))
		}
		if port := c.Ports[id]; port != "" && !seenPort[port] {
			seenPort[port] = true
			initiators = append(initiators, rf.Reff("/redfish/v1/Fabrics/%s/Endpoints/%s-%s", f.ID, h.ID, port))
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
		"Oem": service.RackpoolOem("Connection", map[string]any{
			"System":         rf.Ref("/redfish/v1/Systems/" + c.ID),
			"ResourceBlocks": blockRefs(s.onFabric(c, f)),
		}),
	}
	if typ != "" {
		body["ConnectionType"] = typ
	}
	if info := s.memoryChunks(f, s.onFabric(c, f)); len(info) > 0 {
		body["MemoryChunkInfo"] = info
	}
	return body
}

func (s *Service) connectionTarget(r *http.Request) (*inventory.Fabric, *inventory.Composition, error) {
	f, err := s.fabric(r)
	if err != nil {
		return nil, nil, err
	}
	id := r.PathValue("conn")
	c, err := s.mgr.Get(id)
	if err != nil || len(s.onFabric(c, f)) == 0 {
		return nil, nil, rf.NotFound("Connection", id)
	}
	if !service.Principal(r).Sees(c.Tenant) {
		return nil, nil, s.hider.Hide(r, "Connection", id)
	}
	return f, c, nil
}

func (s *Service) getConnection(w http.ResponseWriter, r *http.Request) error {
	f, c, err := s.connectionTarget(r)
	if err != nil {
		return err
	}
	service.WriteJSON(w, http.StatusOK, s.connectionBody(f, c))
	return nil
}

// endpointID extracts the endpoint ID from a link into fabric f.
func endpointID(f *inventory.Fabric, link rf.ODataID, prop string) (string, error) {
	prefix := "/redfish/v1/Fabrics/" + f.ID + "/Endpoints/"
	id, ok := strings.CutPrefix(link.ID, prefix)
	if !ok || id == "" || strings.Contains(id, "/") {
		return "", rf.PropertyValue(prop, link.ID, "Use endpoints of this fabric: "+prefix+"{Id}.")
	}
	return id, nil
}

func (s *Service) postConnection(w http.ResponseWriter, r *http.Request) error {
	f, err := s.fabric(r)
	if err != nil {
		return err
	}
	var body struct {
		Name           string
		ConnectionType string
		Links          *struct {
			InitiatorEndpoints []rf.ODataID
			TargetEndpoints    []rf.ODataID
		}
		Oem *struct {
			Rackpool *struct {
				BlockCount int
			}
		}
	}
	if err := rf.Decode(r, &body, rf.MaxBody); err != nil {
		return err
	}
	if body.Links == nil || len(body.Links.InitiatorEndpoints) == 0 {
		return rf.PropertyMissing("Links.InitiatorEndpoints")
	}
	if len(body.Links.InitiatorEndpoints) != 1 {
		return rf.PropertyValue("Links.InitiatorEndpoints", fmt.Sprint(len(body.Links.InitiatorEndpoints)), "Name exactly one host port endpoint.")
	}
	if len(body.Links.TargetEndpoints) == 0 {
		return rf.PropertyMissing("Links.TargetEndpoints")
	}
	count := 1
	if body.Oem != nil && body.Oem.Rackpool != nil && body.Oem.Rackpool.BlockCount != 0 {
		count = body.Oem.Rackpool.BlockCount
		if count < 1 || count > 4096 {
			return rf.PropertyValue("Oem.Rackpool.BlockCount", fmt.Sprint(count), "Use 1 to 4096.")
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
		return rf.PropertyValue("Links.InitiatorEndpoints[0]", body.Links.InitiatorEndpoints[0].ID, "The initiator must be a host port endpoint of this fabric.")
	}
	var blocks []string
	p := service.Principal(r)
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
			return rf.PropertyValue(prop, l.ID, "The target must be a device endpoint of this fabric.")
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
			if len(st.Compositions)+len(st.Reservations) == 0 && service.BlockVisible(p, b, st) && !slices.Contains(blocks, b.ID) {
				blocks = append(blocks, b.ID)
				got++
			}
		}
		if got < want {
			if len(dev.Blocks) == 1 {
				blocks = append(blocks, dev.Blocks[0].ID) // let the scheduler say why it is taken
				continue
			}
			return fmt.Errorf("%w", &schedule.Unsatisfiable{Rejections: []schedule.Rejection{{Host: host.ID,
				Reason: schedule.InUse, Detail: fmt.Sprintf("%s has %d free blocks, %d wanted", dev.ID, got, want)}}})
		}
	}
	var sys *inventory.Composition
	for _, c := range s.mgr.List() {
		if c.Host == host.ID {
			if !p.Sees(c.Tenant) {
				return fmt.Errorf("%w: host %s is in use", compose.ErrBusy, host.ID)
			}
			sys = c
		}
	}
	if sys == nil {
		name := body.Name
		req := compose.Request{Name: name, Tenant: service.Principal(r).Tenant, Host: host.ID, Blocks: blocks}
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
	service.WriteJSON(w, http.StatusCreated, s.connectionBody(f, sys))
	return nil
}

func (s *Service) deleteConnection(w http.ResponseWriter, r *http.Request) error {
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

// quotaOf returns the quota of r's tenant and the tenant record it was
// read from, which the composition's plan checks (tenancy.Service.Quota).
func (s *Service) quotaOf(r *http.Request) (compose.Quota, []store.ObjectRef) {
	q, refs := s.quotas.Quota(service.Principal(r).Tenant)
	return q, refs
}

// blockRefs links the ResourceBlocks ids.
func blockRefs(ids []string) []rf.ODataID {
	out := []rf.ODataID{}
	for _, id := range ids {
		out = append(out, rf.Ref(service.BlocksPath+id))
	}
	return out
}
