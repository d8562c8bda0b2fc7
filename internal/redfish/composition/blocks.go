package composition

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"

	"rackpool/internal/compose"
	"rackpool/internal/fabric"
	"rackpool/internal/inventory"
	"rackpool/internal/odata"
	"rackpool/internal/redfish/service"
	"rackpool/internal/rf"
	"rackpool/internal/topology"
)

// blockRoutes are the routes of the CompositionService, its ResourceBlocks and ResourceZones.
var blockRoutes = []service.Route[*Service]{
	{Pattern: "GET /redfish/v1/CompositionService", Priv: service.Login, Handler: (*Service).getCompositionService},
	{Pattern: "GET /redfish/v1/CompositionService/ResourceBlocks", Priv: service.Login, Handler: (*Service).getResourceBlocks},
	{Pattern: "GET /redfish/v1/CompositionService/ResourceBlocks/{id}", Priv: service.Login, Handler: (*Service).getResourceBlock},
	{Pattern: "GET /redfish/v1/CompositionService/ResourceZones", Priv: service.Login, Handler: (*Service).getResourceZones},
	{Pattern: "GET /redfish/v1/CompositionService/ResourceZones/{id}", Priv: service.Login, Handler: (*Service).getResourceZone},
	{Pattern: "POST /redfish/v1/CompositionService/Actions/Oem/Rackpool.Explain", Priv: service.Login, Handler: (*Service).explain},
}

func (s *Service) getCompositionService(w http.ResponseWriter, r *http.Request) error {
	service.WriteJSON(w, http.StatusOK, s.compositionServiceBody())
	return nil
}

func (s *Service) getResourceBlocks(w http.ResponseWriter, r *http.Request) error {
	head := rf.Collection("/redfish/v1/CompositionService/ResourceBlocks", "ResourceBlockCollection", "Resource Block Collection", nil)
	delete(head, "Members")
	delete(head, "Members@odata.count")
	service.WriteJSON(w, http.StatusOK, &odata.Collection{Head: head, Members: s.blockList(r, s.top.Blocks)})
	return nil
}

// blockList is the resource blocks a client sees, in topology order: the
// ordered index a page of the collection is cut from (odata.Members). An
// operator sees every block, so its list is the topology's own slice; a
// tenant's is the blocks it may see, found with one status read each.
type blockList struct {
	s      *Service
	r      *http.Request
	blocks []*inventory.Block
}

func (s *Service) blockList(r *http.Request, all []*inventory.Block) *blockList {
	p := service.Principal(r)
	if p.Tenant == "" {
		return &blockList{s: s, r: r, blocks: all}
	}
	var seen []*inventory.Block
	for _, b := range all {
		if s.visibleBlock(p, b) {
			seen = append(seen, b)
		}
	}
	return &blockList{s: s, r: r, blocks: seen}
}

// Len implements odata.Members.
func (l *blockList) Len() int { return len(l.blocks) }

// Path implements odata.Members.
func (l *blockList) Path(i int) string { return service.BlocksPath + l.blocks[i].ID }

// Body implements odata.Bodies: the block as its GET answers it.
func (l *blockList) Body(i int) any {
	w, _ := l.AppendBody(nil, i)
	return json.RawMessage(w)
}

// AppendBody implements odata.Renderer: the block as its GET answers it.
func (l *blockList) AppendBody(w []byte, i int) ([]byte, bool) {
	b := l.blocks[i]
	return l.s.appendBlock(w, l.r, b, l.s.mgr.BlockStatus(b.ID)), true
}

// Where implements odata.Index for the properties a block's record holds:
// its composition state, kind, model, health, fabric and drawer. Each is
// read from the record, not from the block's resource.
func (l *blockList) Where(path, value string) (odata.Members, bool) {
	var match func(b *inventory.Block) bool
	ctx := l.r.Context()
	switch path {
	case "CompositionStatus/CompositionState":
		match = func(b *inventory.Block) bool { return l.s.blockState(ctx, b, l.s.mgr.BlockStatus(b.ID)) == value }
	case "Oem/Rackpool/Kind":
		match = func(b *inventory.Block) bool { return string(b.Kind) == value }
	case "Oem/Rackpool/Model":
		match = func(b *inventory.Block) bool { return b.Model == value }
	case "Status/Health":
		match = func(b *inventory.Block) bool { return string(l.s.blockHealth(ctx, b)) == value }
	case "Oem/Rackpool/Fabric":
		match = func(b *inventory.Block) bool { return b.Device != nil && b.Device.Fabric.ID == value }
	case "Oem/Rackpool/Drawer":
		match = func(b *inventory.Block) bool {
			return b.Device != nil && b.Device.Drawer != nil && b.Device.Drawer.ID == value
		}
	default:
		return nil, false
	}
	var pos []int
	for i, b := range l.blocks {
		if match(b) {
			pos = append(pos, i)
		}
	}
	return odata.NewSub(l, pos), true
}

// blockHealth is a block's Status.Health: its device's, OK for compute.
func (s *Service) blockHealth(ctx context.Context, b *inventory.Block) fabric.Health {
	if b.Device == nil {
		return fabric.OK
	}
	return s.health(ctx, b.Device)
}

// blockState is a block's CompositionStatus.CompositionState: Failed when
// its device is, else the composition manager's word.
func (s *Service) blockState(ctx context.Context, b *inventory.Block, st compose.BlockStatus) string {
	if s.blockHealth(ctx, b) == fabric.Critical {
		return "Failed"
	}
	return st.State
}

func (s *Service) getResourceBlock(w http.ResponseWriter, r *http.Request) error {
	b := s.top.Block(r.PathValue("id"))
	if b == nil {
		return rf.NotFound("ResourceBlock", r.PathValue("id"))
	}
	st := s.mgr.BlockStatus(b.ID)
	if !service.BlockVisible(service.Principal(r), b, st) {
		return s.core.Hide(r, "ResourceBlock", b.ID)
	}
	service.WriteJSON(w, http.StatusOK, json.RawMessage(s.appendBlock(nil, r, b, st)))
	return nil
}

// Resource zones: one per host ("host1": the host's compute block and
// every device block it can reach in the current drawer modes and
// cabling), and one per zone of the topology file ("zone-training").

// maxBlockZones is the most hosts' zones a resource block lists: a block
// more hosts reach (pooled memory on a MONet pod, reached by every CPU
// card) lists none of them and says so (Oem HostZonesOmitted); each host's
// zone still lists it. A block's body stays a few KB at any scale.
const maxBlockZones = 64

// zonesOf returns the zones that hold block b: the zone of each host that
// can be composed with it (its own host's for a compute block), unless
// more than maxBlockZones hosts can (omitted), then the topology's zones.
func (s *Service) zonesOf(b *inventory.Block) (zones []rf.ODataID, omitted bool) {
	zones = []rf.ODataID{}
	var hosts []*inventory.Host
	switch {
	case b.Host != nil:
		hosts = []*inventory.Host{b.Host}
	case b.Device != nil:
		for _, p := range b.Device.Fabric.Ports {
			// A host's ports on one fabric come together, in host order.
			if n := len(hosts); (n > 0 && hosts[n-1] == p.Host) || !s.top.Reaches(p, b.Device) {
				continue
			}
			if hosts = append(hosts, p.Host); len(hosts) > maxBlockZones {
				hosts, omitted = nil, true
				break
			}
		}
	}
	for _, h := range hosts {
		zones = append(zones, rf.Reff("/redfish/v1/CompositionService/ResourceZones/%s", h.ID))
	}
	for _, z := range s.top.Zones {
		if z.Contains(b) {
			zones = append(zones, rf.Reff("/redfish/v1/CompositionService/ResourceZones/zone-%s", z.ID))
		}
	}
	return zones, omitted
}

func (s *Service) getResourceZones(w http.ResponseWriter, r *http.Request) error {
	head := rf.Collection("/redfish/v1/CompositionService/ResourceZones", "ZoneCollection", "Resource Zone Collection", nil)
	delete(head, "Members")
	delete(head, "Members@odata.count")
	service.WriteJSON(w, http.StatusOK, &odata.Collection{Head: head, Members: zoneList{s.top}})
	return nil
}

// zoneList is the resource zones: one per host in topology order, then
// the topology's zones (odata.Members).
type zoneList struct{ top *topology.Topology }

// Len implements odata.Members.
func (l zoneList) Len() int { return len(l.top.Hosts) + len(l.top.Zones) }

// Path implements odata.Members.
func (l zoneList) Path(i int) string {
	if i < len(l.top.Hosts) {
		return "/redfish/v1/CompositionService/ResourceZones/" + l.top.Hosts[i].ID
	}
	return "/redfish/v1/CompositionService/ResourceZones/zone-" + l.top.Zones[i-len(l.top.Hosts)].ID
}

func (s *Service) getResourceZone(w http.ResponseWriter, r *http.Request) error {
	id := r.PathValue("id")
	var blocks []rf.ODataID
	desc := ""
	if h := s.top.Host(id); h != nil {
		desc = "Blocks host " + h.ID + " can be composed with in the current cabling and drawer modes"
		for _, b := range s.top.Reachable(h) {
			if s.visibleBlock(service.Principal(r), b) {
				blocks = append(blocks, rf.Ref(service.BlocksPath+b.ID))
			}
		}
	} else if z := s.top.Zone(strings.TrimPrefix(id, "zone-")); z != nil && strings.HasPrefix(id, "zone-") {
		desc = "Zone " + z.ID + " of the topology file"
		for _, b := range s.top.Blocks {
			if z.Contains(b) && s.visibleBlock(service.Principal(r), b) {
				blocks = append(blocks, rf.Ref(service.BlocksPath+b.ID))
			}
		}
	} else {
		return rf.NotFound("Zone", id)
	}
	if blocks == nil {
		blocks = []rf.ODataID{}
	}
	service.WriteJSON(w, http.StatusOK, map[string]any{
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
func (s *Service) explain(w http.ResponseWriter, r *http.Request) error {
	_, req, err := s.readCompose(r)
	if err != nil {
		return err
	}
	plan, err := s.mgr.Plan(req)
	if err != nil {
		if perr := policyError(err, req); perr != err {
			return perr
		}
		p := s.core.Problem(err)
		details, ok := p.Oem["Rackpool"]
		if !ok {
			return p
		}
		service.WriteJSON(w, http.StatusOK, map[string]any{"Fits": false, "Reason": p.Resolution, "Details": details})
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
	service.WriteJSON(w, http.StatusOK, map[string]any{"Fits": true, "Host": plan.Host.ID, "Blocks": blocks,
		"TotalRoundTripNs": plan.TotalRTTNS, "TotalHops": plan.TotalHops, "Groups": plan.Groups})
	return nil
}
