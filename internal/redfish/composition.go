package redfish

import (
	"context"
	"net/http"
	"strings"

	"rackpool/internal/compose"
	"rackpool/internal/fabric"
	"rackpool/internal/inventory"
	"rackpool/internal/redfish/service"
)

// blockRoutes are the routes of the CompositionService, its ResourceBlocks and ResourceZones (routes.go).
var blockRoutes = []route{
	{"GET /redfish/v1/CompositionService", login, (*Server).getCompositionService},
	{"GET /redfish/v1/CompositionService/ResourceBlocks", login, (*Server).getResourceBlocks},
	{"GET /redfish/v1/CompositionService/ResourceBlocks/{id}", login, (*Server).getResourceBlock},
	{"GET /redfish/v1/CompositionService/ResourceZones", login, (*Server).getResourceZones},
	{"GET /redfish/v1/CompositionService/ResourceZones/{id}", login, (*Server).getResourceZone},
	{"POST /redfish/v1/CompositionService/Actions/Oem/Rackpool.Explain", login, (*Server).explain},
}

func (s *Server) getCompositionService(w http.ResponseWriter, r *http.Request) error {
	writeJSON(w, http.StatusOK, s.compositionServiceBody())
	return nil
}

func (s *Server) getResourceBlocks(w http.ResponseWriter, r *http.Request) error {
	p := principal(r)
	members := make([]odataID, 0, len(s.top.Blocks))
	for _, b := range s.top.Blocks {
		if s.visibleBlock(p, b) {
			members = append(members, ref(blocksPath+b.ID))
		}
	}
	writeJSON(w, http.StatusOK, collection("/redfish/v1/CompositionService/ResourceBlocks", "ResourceBlockCollection", "Resource Block Collection", members))
	return nil
}

// health returns the fabric's view of a device's health: the monitor's as
// of its last poll (a device it has not seen is OK), or, without a
// monitor, the fabric's answer now.
func (s *Server) health(ctx context.Context, d *inventory.Device) fabric.Health {
	if s.healthSrc != nil {
		if h, ok := s.healthSrc.DeviceHealth(d.Fabric.ID, d.ID); ok {
			return h
		}
		return fabric.OK
	}
	drv := s.mgr.Drivers()[d.Fabric.ID]
	if drv == nil {
		return fabric.OK
	}
	st, err := drv.Discover(ctx)
	if err != nil {
		return fabric.Warning
	}
	if h, ok := st.Health[d.ID]; ok {
		return h
	}
	return fabric.OK
}

func (s *Server) getResourceBlock(w http.ResponseWriter, r *http.Request) error {
	b := s.top.Block(r.PathValue("id"))
	if b == nil {
		return errNotFound("ResourceBlock", r.PathValue("id"))
	}
	st := s.mgr.BlockStatus(b.ID)
	if !service.BlockVisible(principal(r), b, st) {
		return s.hide(r, "ResourceBlock", b.ID)
	}
	writeJSON(w, http.StatusOK, s.blockBody(r, b, st))
	return nil
}

func (s *Server) blockBody(r *http.Request, b *inventory.Block, st compose.BlockStatus) map[string]any {
	ctx := r.Context()
	health := fabric.OK
	oem := map[string]any{"Kind": b.Kind, "Model": b.Model}
	var chassis []odataID
	if b.CapacityBytes > 0 {
		oem["CapacityBytes"] = b.CapacityBytes
	}
	if d := b.Device; d != nil {
		health = s.health(ctx, d)
		oem["Device"] = d.ID
		oem["Fabric"] = d.Fabric.ID
		oem["Switch"] = d.Switch.ID
		oem["SwitchPorts"] = d.Ports
		if d.Vendor != "" {
			oem["Vendor"] = d.Vendor
		}
		if d.VendorID != "" {
			oem["VendorId"] = d.VendorID
			oem["DeviceId"] = d.DeviceID
		}
		if d.LinkWidth > 0 {
			oem["LinkWidth"] = d.LinkWidth
			oem["LinkSpeed"] = d.LinkSpeed
		}
		if d.Drawer != nil {
			oem["Drawer"] = d.Drawer.ID
			oem["DrawerMode"] = d.Drawer.Mode
			oem["Slot"] = d.Slot
			chassis = append(chassis, reff("/redfish/v1/Chassis/%s-%s", d.Fabric.ID, d.Drawer.ID))
		}
		if len(b.Attrs) > 0 {
			oem["Attributes"] = b.Attrs
		}
	} else {
		oem["Cores"] = b.Host.Cores
		oem["LocalMemoryGiB"] = b.Host.MemoryGiB
		chassis = append(chassis, reff("/redfish/v1/Chassis/%s", b.Host.Rack))
	}
	if st.HeldBy != "" {
		oem["HeldBy"] = st.HeldBy // e.g. leases-memnode1: memory leased outside compositions
	}
	state := st.State
	if health == fabric.Critical {
		state = "Failed"
	}
	var systems []odataID
	for _, c := range s.visibleSystems(principal(r), st.Compositions) {
		systems = append(systems, reff("/redfish/v1/Systems/%s", c))
	}
	if systems == nil {
		systems = []odataID{}
	}
	if chassis == nil {
		chassis = []odataID{}
	}
	return map[string]any{
		"@odata.id":         blocksPath + b.ID,
		"@odata.type":       "#ResourceBlock.v1_4_0.ResourceBlock",
		"Id":                b.ID,
		"Name":              strings.ToUpper(string(b.Kind[:1])) + string(b.Kind[1:]) + " " + b.ID,
		"ResourceBlockType": []string{b.Kind.BlockType()},
		"Status":            map[string]string{"State": "Enabled", "Health": string(health)},
		"CompositionStatus": map[string]any{
			"Reserved":             len(st.Reservations) > 0,
			"CompositionState":     state,
			"SharingCapable":       b.MaxCompositions > 1,
			"MaxCompositions":      b.MaxCompositions,
			"NumberOfCompositions": len(st.Compositions),
		},
		"Links": map[string]any{
			"ComputerSystems": systems,
			"Chassis":         chassis,
			"Zones":           s.zonesOf(b),
		},
		"Oem": rackpoolOem("ResourceBlock", oem),
	}
}

// Resource zones: one per host ("host1": the host's compute block and
// every device block it can reach in the current drawer modes and
// cabling), and one per zone of the topology file ("zone-training").

func (s *Server) zonesOf(b *inventory.Block) []odataID {
	out := []odataID{}
	for _, h := range s.top.Hosts {
		if _, ok := s.top.Path(h, b); ok {
			out = append(out, reff("/redfish/v1/CompositionService/ResourceZones/%s", h.ID))
		}
	}
	for _, z := range s.top.Zones {
		if z.Contains(b) {
			out = append(out, reff("/redfish/v1/CompositionService/ResourceZones/zone-%s", z.ID))
		}
	}
	return out
}

func (s *Server) getResourceZones(w http.ResponseWriter, r *http.Request) error {
	var members []odataID
	for _, h := range s.top.Hosts {
		members = append(members, reff("/redfish/v1/CompositionService/ResourceZones/%s", h.ID))
	}
	for _, z := range s.top.Zones {
		members = append(members, reff("/redfish/v1/CompositionService/ResourceZones/zone-%s", z.ID))
	}
	writeJSON(w, http.StatusOK, collection("/redfish/v1/CompositionService/ResourceZones", "ZoneCollection", "Resource Zone Collection", members))
	return nil
}

func (s *Server) getResourceZone(w http.ResponseWriter, r *http.Request) error {
	id := r.PathValue("id")
	var blocks []odataID
	desc := ""
	if h := s.top.Host(id); h != nil {
		desc = "Blocks host " + h.ID + " can be composed with in the current cabling and drawer modes"
		for _, b := range s.top.Blocks {
			if _, ok := s.top.Path(h, b); ok && s.visibleBlock(principal(r), b) {
				blocks = append(blocks, ref(blocksPath+b.ID))
			}
		}
	} else if z := s.top.Zone(strings.TrimPrefix(id, "zone-")); z != nil && strings.HasPrefix(id, "zone-") {
		desc = "Zone " + z.ID + " of the topology file"
		for _, b := range s.top.Blocks {
			if z.Contains(b) && s.visibleBlock(principal(r), b) {
				blocks = append(blocks, ref(blocksPath+b.ID))
			}
		}
	} else {
		return errNotFound("Zone", id)
	}
	if blocks == nil {
		blocks = []odataID{}
	}
	writeJSON(w, http.StatusOK, map[string]any{
		"@odata.id":   "/redfish/v1/CompositionService/ResourceZones/" + id,
		"@odata.type": "#Zone.v1_6_0.Zone",
		"Id":          id,
		"Name":        "Resource Zone " + id,
		"Description": desc,
		"ZoneType":    "ZoneOfResourceBlocks",
		"Status":      map[string]string{"State": "Enabled", "Health": "OK"},
		"Links":       map[string]any{"ResourceBlocks": blocks},
	})
	return nil
}

// explain answers "would this request fit, where, and if not why": the
// same body as POST /redfish/v1/Systems, nothing is changed.
func (s *Server) explain(w http.ResponseWriter, r *http.Request) error {
	_, req, err := s.readCompose(r)
	if err != nil {
		return err
	}
	plan, err := s.mgr.Plan(req)
	if err != nil {
		if perr := policyError(err, req); perr != err {
			return perr
		}
		p := problem(err)
		details, ok := p.Oem["Rackpool"]
		if !ok {
			return p
		}
		writeJSON(w, http.StatusOK, map[string]any{"Fits": false, "Reason": p.Resolution, "Details": details})
		return nil
	}
	var blocks []map[string]any
	for _, a := range plan.Assignments {
		e := map[string]any{"Id": a.Block.ID, "Kind": a.Block.Kind, "RoundTripNs": a.RTTNS, "Hops": a.Hops}
		if a.Port != nil {
			e["HostPort"] = a.Port.ID
		}
		blocks = append(blocks, e)
	}
	writeJSON(w, http.StatusOK, map[string]any{"Fits": true, "Host": plan.Host.ID, "Blocks": blocks,
		"TotalRoundTripNs": plan.TotalRTTNS, "TotalHops": plan.TotalHops, "Groups": plan.Groups})
	return nil
}
