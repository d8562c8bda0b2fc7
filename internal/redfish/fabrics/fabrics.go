package fabrics

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"rackpool/internal/compose"
	"rackpool/internal/fabric"
	"rackpool/internal/inventory"
	"rackpool/internal/odata"
	"rackpool/internal/redfish/service"
	"rackpool/internal/rf"
	"rackpool/internal/store"
	"rackpool/internal/topology"
)

// Routes are the routes of Fabrics, Switches, Ports, Endpoints, Zones and
// fault injection, then of Connections (connections.go); the core's
// routes.go gathers them.
var Routes = slices.Concat(fabricRoutes, connectionRoutes)

var fabricRoutes = []service.Route[*Service]{
	{Pattern: "GET /redfish/v1/Fabrics", Priv: service.Login, Handler: (*Service).getFabrics},
	{Pattern: "GET /redfish/v1/Fabrics/{id}", Priv: service.Login, Handler: (*Service).getFabric},
	{Pattern: "GET /redfish/v1/Fabrics/{id}/Switches", Priv: service.Login, Handler: (*Service).getSwitches},
	{Pattern: "GET /redfish/v1/Fabrics/{id}/Switches/{sw}", Priv: service.Login, Handler: (*Service).getSwitch},
	{Pattern: "GET /redfish/v1/Fabrics/{id}/Switches/{sw}/Ports", Priv: service.Login, Handler: (*Service).getPorts},
	{Pattern: "GET /redfish/v1/Fabrics/{id}/Switches/{sw}/Ports/{port}", Priv: service.Login, Handler: (*Service).getPort},
	{Pattern: "GET /redfish/v1/Fabrics/{id}/Endpoints", Priv: service.Login, Handler: (*Service).getEndpoints},
	{Pattern: "GET /redfish/v1/Fabrics/{id}/Endpoints/{ep}", Priv: service.Login, Handler: (*Service).getEndpoint},
	{Pattern: "GET /redfish/v1/Fabrics/{id}/Zones", Priv: service.Login, Handler: (*Service).getFabricZones},
	{Pattern: "GET /redfish/v1/Fabrics/{id}/Zones/{zone}", Priv: service.Login, Handler: (*Service).getFabricZone},
	{Pattern: "POST /redfish/v1/Fabrics/{id}/Actions/Oem/Rackpool.InjectFault", Priv: service.ConfigureComponents, Handler: (*Service).injectFault},
	{Pattern: "POST /redfish/v1/Fabrics/{id}/Actions/Oem/Rackpool.ClearFaults", Priv: service.ConfigureComponents, Handler: (*Service).clearFaults},
}

// Compositions is what the Fabrics need of the composition manager
// (compose.Manager): its fabric drivers, the live compositions the Zones
// and Connections are views of, and the changes a Connection makes.
type Compositions interface {
	Drivers() map[string]fabric.Driver
	List() []*inventory.Composition
	Get(id string) (*inventory.Composition, error)
	BlockStatus(id string) compose.BlockStatus
	Compose(ctx context.Context, req compose.Request) (*inventory.Composition, error)
	Update(ctx context.Context, id string, ur compose.UpdateRequest) (*inventory.Composition, error)
	Decompose(ctx context.Context, id string, version int64) error
}

// Quotas are the tenants' quotas (tenancy.Service): a Connection that
// composes or grows a system is held to its tenant's.
type Quotas interface {
	Quota(tenant string) (map[inventory.Kind]int, []store.ObjectRef)
}

// Deps are what a Service serves from.
type Deps struct {
	Topology *topology.Topology
	Mgr      Compositions
	// Health is a device's health as the core reads it (the fabric
	// monitor's cache, or the fabric itself).
	Health func(ctx context.Context, d *inventory.Device) fabric.Health
	// MemoryChunks is the CXL MemoryChunkInfo of blocks on f, as the
	// core's Chassis show them (empty on other fabrics).
	MemoryChunks func(f *inventory.Fabric, blocks []string) []map[string]any
	Quotas       Quotas
	Hider        service.Hider
	Logger       *slog.Logger
}

// Service serves the Fabrics and their children.
type Service struct {
	top          *topology.Topology
	mgr          Compositions
	health       func(ctx context.Context, d *inventory.Device) fabric.Health
	memoryChunks func(f *inventory.Fabric, blocks []string) []map[string]any
	quotas       Quotas
	hider        service.Hider
	log          *slog.Logger
}

// New returns a Service over d.
func New(d Deps) *Service {
	return &Service{top: d.Topology, mgr: d.Mgr, health: d.Health, memoryChunks: d.MemoryChunks, quotas: d.Quotas, hider: d.Hider, log: d.Logger}
}

// Fabrics show the same attachments as compositions, from the fabric's
// side: every device and every host port is an Endpoint; each host's
// attachments on a fabric form one Zone of endpoints. Zones are computed
// from the compositions (one truth, two views).

var fabricTypes = rf.FabricTypes

func (s *Service) fabric(r *http.Request) (*inventory.Fabric, error) {
	f := s.top.Fabric(r.PathValue("id"))
	if f == nil {
		return nil, rf.NotFound("Fabric", r.PathValue("id"))
	}
	return f, nil
}

func (s *Service) getFabrics(w http.ResponseWriter, r *http.Request) error {
	var members []rf.ODataID
	for _, f := range s.top.Fabrics {
		members = append(members, rf.Reff("/redfish/v1/Fabrics/%s", f.ID))
	}
	service.WriteJSON(w, http.StatusOK, rf.Collection("/redfish/v1/Fabrics", "FabricCollection", "Fabric Collection", members))
	return nil
}

func (s *Service) getFabric(w http.ResponseWriter, r *http.Request) error {
	f, err := s.fabric(r)
	if err != nil {
		return err
	}
	base := "/redfish/v1/Fabrics/" + f.ID
	service.WriteJSON(w, http.StatusOK, map[string]any{
		"@odata.id":   base,
		"@odata.type": "#Fabric.v1_3_0.Fabric",
		"Id":          f.ID,
		"Name":        string(f.Kind) + " fabric " + f.ID,
		"FabricType":  fabricTypes[f.Kind],
		"Status":      map[string]string{"State": "Enabled", "Health": "OK"},
		"Switches":    rf.Ref(base + "/Switches"),
		"Endpoints":   rf.Ref(base + "/Endpoints"),
		"Zones":       rf.Ref(base + "/Zones"),
		"Connections": rf.Ref(base + "/Connections"),
		"Actions": map[string]any{"Oem": map[string]any{
			"#Rackpool.InjectFault": map[string]string{"target": base + "/Actions/Oem/Rackpool.InjectFault"},
			"#Rackpool.ClearFaults": map[string]string{"target": base + "/Actions/Oem/Rackpool.ClearFaults"},
		}},
		"Oem": service.RackpoolOem("Fabric", map[string]any{
			"Kind":              f.Kind,
			"ReconfigurationMs": float64(f.Reconfig.Microseconds()) / 1000,
			"DriveOnlineMs":     float64(f.DriveOnline.Microseconds()) / 1000,
		}),
	})
	return nil
}

func (s *Service) getSwitches(w http.ResponseWriter, r *http.Request) error {
	f, err := s.fabric(r)
	if err != nil {
		return err
	}
	var members []rf.ODataID
	for _, sw := range f.Switches {
		members = append(members, rf.Reff("/redfish/v1/Fabrics/%s/Switches/%s", f.ID, sw.ID))
	}
	service.WriteJSON(w, http.StatusOK, rf.Collection("/redfish/v1/Fabrics/"+f.ID+"/Switches", "SwitchCollection", "Switch Collection", members))
	return nil
}

func (s *Service) fabricSwitch(r *http.Request) (*inventory.Fabric, *inventory.Switch, error) {
	f, err := s.fabric(r)
	if err != nil {
		return nil, nil, err
	}
	sw := f.Switch(r.PathValue("sw"))
	if sw == nil {
		return nil, nil, rf.NotFound("Switch", r.PathValue("sw"))
	}
	return f, sw, nil
}

func (s *Service) getSwitch(w http.ResponseWriter, r *http.Request) error {
	f, sw, err := s.fabricSwitch(r)
	if err != nil {
		return err
	}
	base := fmt.Sprintf("/redfish/v1/Fabrics/%s/Switches/%s", f.ID, sw.ID)
	service.WriteJSON(w, http.StatusOK, map[string]any{
		"@odata.id":        base,
		"@odata.type":      "#Switch.v1_9_0.Switch",
		"Id":               sw.ID,
		"Name":             "Switch " + sw.ID,
		"SwitchType":       fabricTypes[f.Kind],
		"TotalSwitchWidth": len(portIDs(sw)),
		"Status":           map[string]string{"State": "Enabled", "Health": "OK"},
		"Ports":            rf.Ref(base + "/Ports"),
		"Oem":              service.RackpoolOem("Switch", map[string]any{"PortToPortLatencyNs": sw.LatencyNS}),
	})
	return nil
}

// portIDs lists a switch's ports: 1..Ports, then named ports. Named ports
// contain "/" (drawer slots) which URIs cannot carry, so slots become
// "drawer1-slot3".
func portIDs(sw *inventory.Switch) []string {
	var out []string
	for i := 1; i <= sw.Ports; i++ {
		out = append(out, strconv.Itoa(i))
	}
	for _, n := range sw.PortNames {
		out = append(out, strings.ReplaceAll(n, "/", "-"))
	}
	return out
}

func (s *Service) getPorts(w http.ResponseWriter, r *http.Request) error {
	f, sw, err := s.fabricSwitch(r)
	if err != nil {
		return err
	}
	base := fmt.Sprintf("/redfish/v1/Fabrics/%s/Switches/%s/Ports", f.ID, sw.ID)
	var members []rf.ODataID
	for _, p := range portIDs(sw) {
		members = append(members, rf.Reff("%s/%s", base, p))
	}
	service.WriteJSON(w, http.StatusOK, rf.Collection(base, "PortCollection", "Port Collection", members))
	return nil
}

// portUser returns the endpoint cabled to a switch port, if any.
func (s *Service) portUser(f *inventory.Fabric, sw *inventory.Switch, port string) (endpoint string, role string) {
	for _, hp := range f.Ports {
		if hp.Switch == sw && hp.Port == port {
			return hp.Host.ID + "-" + hp.ID, "Initiator"
		}
	}
	for _, d := range f.Devices {
		if d.Switch == sw && slices.Contains(d.Ports, port) {
			return d.ID, "Target"
		}
	}
	return "", ""
}

func (s *Service) getPort(w http.ResponseWriter, r *http.Request) error {
	f, sw, err := s.fabricSwitch(r)
	if err != nil {
		return err
	}
	id := r.PathValue("port")
	if !slices.Contains(portIDs(sw), id) {
		return rf.NotFound("Port", id)
	}
	name := id
	for _, n := range sw.PortNames {
		if strings.ReplaceAll(n, "/", "-") == id {
			name = n
		}
	}
	ep, role := s.portUser(f, sw, name)
	links := map[string]any{}
	status := map[string]string{"State": "Enabled", "Health": "OK"}
	link := "LinkUp"
	portOem := map[string]any{}
	if role != "" {
		portOem["Role"] = role
	}
	if ep == "" {
		status["State"] = "Absent"
		link = "NoLink"
	} else {
		links["AssociatedEndpoints"] = []rf.ODataID{rf.Reff("/redfish/v1/Fabrics/%s/Endpoints/%s", f.ID, ep)}
	}
	service.WriteJSON(w, http.StatusOK, map[string]any{
		"@odata.id":    fmt.Sprintf("/redfish/v1/Fabrics/%s/Switches/%s/Ports/%s", f.ID, sw.ID, id),
		"@odata.type":  "#Port.v1_11_0.Port",
		"Id":           id,
		"Name":         "Port " + name,
		"PortId":       name,
		"PortProtocol": fabricTypes[f.Kind],
		"LinkStatus":   link,
		"Status":       status,
		"Links":        links,
		"Oem":          service.RackpoolOem("Port", portOem),
	})
	return nil
}

func (s *Service) getEndpoints(w http.ResponseWriter, r *http.Request) error {
	f, err := s.fabric(r)
	if err != nil {
		return err
	}
	head := rf.Collection("/redfish/v1/Fabrics/"+f.ID+"/Endpoints", "EndpointCollection", "Endpoint Collection", nil)
	delete(head, "Members")
	delete(head, "Members@odata.count")
	service.WriteJSON(w, http.StatusOK, &odata.Collection{Head: head, Members: &endpointList{s: s, r: r, f: f}})
	return nil
}

// endpointList is a fabric's endpoints, its host ports then its devices
// (odata.Members).
type endpointList struct {
	s     *Service
	r     *http.Request
	f     *inventory.Fabric
	stats map[string]fabric.DeviceStats // read once, for the bodies
}

// Len implements odata.Members.
func (l *endpointList) Len() int { return len(l.f.Ports) + len(l.f.Devices) }

// Path implements odata.Members.
func (l *endpointList) Path(i int) string {
	base := "/redfish/v1/Fabrics/" + l.f.ID + "/Endpoints/"
	if i < len(l.f.Ports) {
		hp := l.f.Ports[i]
		return base + hp.Host.ID + "-" + hp.ID
	}
	return base + l.f.Devices[i-len(l.f.Ports)].ID
}

// AppendBody implements odata.Renderer.
func (l *endpointList) AppendBody(w []byte, i int) ([]byte, bool) {
	at := len(w)
	if i < len(l.f.Ports) {
		out, err := appendPortEndpoint(w, l.f, l.f.Ports[i])
		if err != nil {
			return w[:at], false
		}
		return out, true
	}
	if l.stats == nil {
		l.stats = l.s.deviceStats(l.r, l.f)
	}
	raw, err := odata.Marshal(l.s.deviceEndpoint(l.r, l.f, l.f.Devices[i-len(l.f.Ports)], l.stats))
	if err != nil {
		return w, false
	}
	return append(w, raw...), true
}

// Body implements odata.Bodies.
func (l *endpointList) Body(i int) any {
	w, ok := l.AppendBody(nil, i)
	if !ok {
		return nil
	}
	return json.RawMessage(w)
}

func (s *Service) getEndpoint(w http.ResponseWriter, r *http.Request) error {
	f, err := s.fabric(r)
	if err != nil {
		return err
	}
	id := r.PathValue("ep")
	for _, hp := range f.Ports {
		if hp.Host.ID+"-"+hp.ID == id {
			body, err := appendPortEndpoint(nil, f, hp)
			if err != nil {
				return err
			}
			service.WriteJSON(w, http.StatusOK, json.RawMessage(body))
			return nil
		}
	}
	for _, d := range f.Devices {
		if d.ID == id {
			service.WriteJSON(w, http.StatusOK, s.deviceEndpoint(r, f, d, s.deviceStats(r, f)))
			return nil
		}
	}
	return rf.NotFound("Endpoint", id)
}

// deviceStats is the fabric's per-device counters, by device, when its
// driver reports them (nil otherwise).
func (s *Service) deviceStats(r *http.Request, f *inventory.Fabric) map[string]fabric.DeviceStats {
	out := map[string]fabric.DeviceStats{}
	if sr, ok := s.mgr.Drivers()[f.ID].(fabric.StatsReporter); ok {
		if stats, err := sr.Stats(r.Context()); err == nil {
			for _, st := range stats {
				out[st.Device] = st
			}
		}
	}
	return out
}

// deviceEndpoint is the endpoint of device d on fabric f.
func (s *Service) deviceEndpoint(r *http.Request, f *inventory.Fabric, d *inventory.Device, stats map[string]fabric.DeviceStats) map[string]any {
	entity := map[inventory.Kind]string{inventory.GPU: "Processor", inventory.FPGA: "Processor", inventory.NVMe: "Drive",
		inventory.SSD: "Drive", inventory.HDD: "Drive", inventory.NIC: "NetworkController", inventory.Memory: "MemoryChunk"}[d.Kind]
	var ports []rf.ODataID
	for _, p := range d.Ports {
		ports = append(ports, rf.Reff("/redfish/v1/Fabrics/%s/Switches/%s/Ports/%s", f.ID, d.Switch.ID, strings.ReplaceAll(p, "/", "-")))
	}
	var blocks []rf.ODataID
	for _, b := range d.Blocks {
		blocks = append(blocks, rf.Ref(service.BlocksPath+b.ID))
	}
	conn := map[string]any{"EntityType": entity, "EntityRole": "Target"}
	if f.Kind == inventory.CXLMemory {
		conn = map[string]any{"EntityType": "CXLDevice", "EntityRole": "Target", "EntityLink": rf.Reff("/redfish/v1/Chassis/%s/PCIeDevices/1", d.ID)}
	}
	oem := map[string]any{"ResourceBlocks": blocks}
	if st, ok := stats[d.ID]; ok {
		oem["Telemetry"] = st
	}
	return map[string]any{
		"@odata.id":         "/redfish/v1/Fabrics/" + f.ID + "/Endpoints/" + d.ID,
		"@odata.type":       "#Endpoint.v1_8_0.Endpoint",
		"Id":                d.ID,
		"Name":              string(d.Kind) + " " + d.ID,
		"EndpointProtocol":  fabricTypes[f.Kind],
		"ConnectedEntities": []any{conn},
		"Status":            map[string]string{"State": "Enabled", "Health": string(s.health(r.Context(), d))},
		"Links":             map[string]any{"ConnectedPorts": ports},
		"Oem":               service.RackpoolOem("Endpoint", oem),
	}
}

// fabricZones groups the live compositions' attachments on f by host.
func (s *Service) fabricZones(r *http.Request, f *inventory.Fabric) map[string][]string {
	zones := map[string][]string{}
	p := service.Principal(r)
	for _, c := range s.mgr.List() {
		if !p.Sees(c.Tenant) {
			continue
		}
		h := s.top.Host(c.Host)
		for _, id := range c.AllBlocks() {
			b := s.top.Block(id)
			if b == nil || b.Device == nil || b.Device.Fabric != f {
				continue
			}
			port := c.Ports[id]
			for _, hp := range h.Ports {
				if hp.ID == port {
					ep := h.ID + "-" + hp.ID
					if !slices.Contains(zones[ep], ep) {
						zones[ep] = append(zones[ep], ep)
					}
					if !slices.Contains(zones[ep], b.Device.ID) {
						zones[ep] = append(zones[ep], b.Device.ID)
					}
				}
			}
		}
	}
	return zones
}

func (s *Service) getFabricZones(w http.ResponseWriter, r *http.Request) error {
	f, err := s.fabric(r)
	if err != nil {
		return err
	}
	var members []rf.ODataID
	zones := s.fabricZones(r, f)
	for _, hp := range f.Ports {
		if id := hp.Host.ID + "-" + hp.ID; zones[id] != nil {
			members = append(members, rf.Reff("/redfish/v1/Fabrics/%s/Zones/%s", f.ID, id))
		}
	}
	service.WriteJSON(w, http.StatusOK, rf.Collection("/redfish/v1/Fabrics/"+f.ID+"/Zones", "ZoneCollection", "Zone Collection", members))
	return nil
}

func (s *Service) getFabricZone(w http.ResponseWriter, r *http.Request) error {
	f, err := s.fabric(r)
	if err != nil {
		return err
	}
	id := r.PathValue("zone")
	eps, ok := s.fabricZones(r, f)[id]
	if !ok {
		return rf.NotFound("Zone", id)
	}
	var links []rf.ODataID
	for _, ep := range eps {
		links = append(links, rf.Reff("/redfish/v1/Fabrics/%s/Endpoints/%s", f.ID, ep))
	}
	service.WriteJSON(w, http.StatusOK, map[string]any{
		"@odata.id":   "/redfish/v1/Fabrics/" + f.ID + "/Zones/" + id,
		"@odata.type": "#Zone.v1_6_0.Zone",
		"Id":          id,
		"Name":        "Attachments of " + id,
		"ZoneType":    "ZoneOfEndpoints",
		"Status":      map[string]string{"State": "Enabled", "Health": "OK"},
		"Links":       map[string]any{"Endpoints": links},
	})
	return nil
}

func (s *Service) injectFault(w http.ResponseWriter, r *http.Request) error {
	f, err := s.fabric(r)
	if err != nil {
		return err
	}
	var body struct {
		Kind   string
		Target string
		Count  int
	}
	if err := rf.Decode(r, &body, rf.MaxBody); err != nil {
		return err
	}
	fi, ok := s.mgr.Drivers()[f.ID].(fabric.FaultInjector)
	if !ok {
		return rf.New(http.StatusBadRequest, rf.Registry+"ActionNotSupported",
			"The action Rackpool.InjectFault is not supported by the resource.", "Rackpool.InjectFault")
	}
	switch fabric.FaultKind(body.Kind) {
	case fabric.AttachFails, fabric.DeviceFails, fabric.PortFails, fabric.HostFails, fabric.ReleaseStalls:
	default:
		return rf.PropertyValue("Kind", body.Kind, "Use attach-fails, device-fails, port-fails, host-fails or (cxl-memory fabrics) release-stalls.")
	}
	if err := fi.InjectFault(fabric.Fault{Kind: fabric.FaultKind(body.Kind), Target: body.Target, Count: body.Count}); err != nil {
		return rf.PropertyValue("Target", body.Target, err.Error())
	}
	s.log.Warn("fault injected", "fabric", f.ID, "kind", body.Kind, "target", body.Target, "count", body.Count)
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (s *Service) clearFaults(w http.ResponseWriter, r *http.Request) error {
	f, err := s.fabric(r)
	if err != nil {
		return err
	}
	if fi, ok := s.mgr.Drivers()[f.ID].(fabric.FaultInjector); ok {
		fi.ClearFaults()
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}
