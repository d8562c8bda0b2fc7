package fmserver

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"rackpool/internal/fabric"
	"rackpool/internal/inventory"
	"rackpool/internal/rf"
)

// fabricRoutes are the routes of the Fabric, its Switches, Ports and
// Endpoints.
var fabricRoutes = []route{
	{"GET /redfish/v1/Fabrics", login, (*Server).getFabrics},
	{"GET /redfish/v1/Fabrics/{id}", login, (*Server).getFabric},
	{"GET /redfish/v1/Fabrics/{id}/Switches", login, (*Server).getSwitches},
	{"GET /redfish/v1/Fabrics/{id}/Switches/{sw}", login, (*Server).getSwitch},
	{"GET /redfish/v1/Fabrics/{id}/Switches/{sw}/Ports", login, (*Server).getPorts},
	{"GET /redfish/v1/Fabrics/{id}/Switches/{sw}/Ports/{port}", login, (*Server).getPort},
	{"GET /redfish/v1/Fabrics/{id}/Endpoints", login, (*Server).getEndpoints},
	{"GET /redfish/v1/Fabrics/{id}/Endpoints/{ep}", login, (*Server).getEndpoint},
}

var fabricTypes = rf.FabricTypes

// InitiatorID is the Id of the initiator endpoint of a host's port: the
// same name the northbound API uses.
func InitiatorID(host, port string) string { return host + "-" + port }

// UsesConnections reports whether d's attachments are Connections (CXL
// memory, and any device with several blocks: memory nodes) rather than
// zone membership.
func UsesConnections(d *inventory.Device) bool {
	return d.Fabric.Kind == inventory.CXLMemory || len(d.Blocks) > 1
}

func (s *Server) base() string { return "/redfish/v1/Fabrics/" + s.fab.ID }

func (s *Server) endpointPath(id string) string { return s.base() + "/Endpoints/" + id }

// checkFabric answers 404 unless r names this server's fabric.
func (s *Server) checkFabric(r *http.Request) error {
	if r.PathValue("id") != s.fab.ID {
		return errNotFound("Fabric", r.PathValue("id"))
	}
	return nil
}

// initiator returns the host port whose initiator endpoint is id, or nil.
func (s *Server) initiator(id string) *inventory.HostPort {
	for _, hp := range s.fab.Ports {
		if InitiatorID(hp.Host.ID, hp.ID) == id {
			return hp
		}
	}
	return nil
}

// device returns the device of this fabric whose target endpoint is id,
// or nil.
func (s *Server) device(id string) *inventory.Device {
	d := s.top.Device(id)
	if d == nil || d.Fabric != s.fab {
		return nil
	}
	return d
}

// state reads the driver's Discover.
func (s *Server) state(ctx context.Context) (fabric.State, error) {
	st, err := s.drv.Discover(ctx)
	if err != nil {
		return fabric.State{}, errInternal(err)
	}
	return st, nil
}

func (s *Server) getFabrics(w http.ResponseWriter, r *http.Request) error {
	rf.WriteJSON(w, http.StatusOK, collection("/redfish/v1/Fabrics", "FabricCollection", "Fabric Collection", []odataID{ref(s.base())}))
	return nil
}

func (s *Server) getFabric(w http.ResponseWriter, r *http.Request) error {
	if err := s.checkFabric(r); err != nil {
		return err
	}
	base := s.base()
	action := func(name string) map[string]string {
		return map[string]string{"target": base + "/Actions/Oem/Rackpool." + name}
	}
	rf.WriteJSON(w, http.StatusOK, map[string]any{
		"@odata.id":   base,
		"@odata.type": "#Fabric.v1_3_0.Fabric",
		"Id":          s.fab.ID,
		"Name":        string(s.fab.Kind) + " fabric " + s.fab.ID,
		"FabricType":  fabricTypes[s.fab.Kind],
		"Status":      statusOK(""),
		"Switches":    ref(base + "/Switches"),
		"Endpoints":   ref(base + "/Endpoints"),
		"Zones":       ref(base + "/Zones"),
		"Connections": ref(base + "/Connections"),
		"Actions": map[string]any{"Oem": map[string]any{
			"#Rackpool.InjectFault":          action("InjectFault"),
			"#Rackpool.ClearFaults":          action("ClearFaults"),
			"#Rackpool.InjectTransportFault": action("InjectTransportFault"),
		}},
		"Oem": map[string]any{"Rackpool": map[string]any{
			"@odata.type":       "#Rackpool.v1_0_0.Fabric",
			"Kind":              s.fab.Kind,
			"ReconfigurationMs": float64(s.fab.Reconfig.Microseconds()) / 1000,
			"TaskThresholdMs":   float64(s.threshold.Microseconds()) / 1000,
		}},
	})
	return nil
}

func (s *Server) getSwitches(w http.ResponseWriter, r *http.Request) error {
	if err := s.checkFabric(r); err != nil {
		return err
	}
	var members []odataID
	for _, sw := range s.fab.Switches {
		members = append(members, ref(s.base()+"/Switches/"+sw.ID))
	}
	rf.WriteJSON(w, http.StatusOK, collection(s.base()+"/Switches", "SwitchCollection", "Switch Collection", members))
	return nil
}

func (s *Server) fabricSwitch(r *http.Request) (*inventory.Switch, error) {
	if err := s.checkFabric(r); err != nil {
		return nil, err
	}
	sw := s.fab.Switch(r.PathValue("sw"))
	if sw == nil {
		return nil, errNotFound("Switch", r.PathValue("sw"))
	}
	return sw, nil
}

func (s *Server) getSwitch(w http.ResponseWriter, r *http.Request) error {
	sw, err := s.fabricSwitch(r)
	if err != nil {
		return err
	}
	base := s.base() + "/Switches/" + sw.ID
	rf.WriteJSON(w, http.StatusOK, map[string]any{
		"@odata.id":        base,
		"@odata.type":      "#Switch.v1_9_0.Switch",
		"Id":               sw.ID,
		"Name":             "Switch " + sw.ID,
		"SwitchType":       fabricTypes[s.fab.Kind],
		"TotalSwitchWidth": len(portIDs(sw)),
		"Status":           statusOK(""),
		"Ports":            ref(base + "/Ports"),
	})
	return nil
}

// portIDs lists a switch's ports: 1..Ports, then named ports, whose "/"
// (drawer slots) URIs cannot carry: "drawer1/3" is "drawer1-3".
func portIDs(sw *inventory.Switch) []string {
	var out []string
	for i := 1; i <= sw.Ports; i++ {
		out = append(out, strconv.Itoa(i))
	}
	for _, n := range sw.PortNames {
		out = append(out, portID(n))
	}
	return out
}

func portID(name string) string { return strings.ReplaceAll(name, "/", "-") }

func (s *Server) getPorts(w http.ResponseWriter, r *http.Request) error {
	sw, err := s.fabricSwitch(r)
	if err != nil {
		return err
	}
	base := s.base() + "/Switches/" + sw.ID + "/Ports"
	var members []odataID
	for _, p := range portIDs(sw) {
		members = append(members, ref(base+"/"+p))
	}
	rf.WriteJSON(w, http.StatusOK, collection(base, "PortCollection", "Port Collection", members))
	return nil
}

// portUser returns the endpoint cabled to a switch port, if any.
func (s *Server) portUser(sw *inventory.Switch, port string) string {
	for _, hp := range s.fab.Ports {
		if hp.Switch == sw && hp.Port == port {
			return InitiatorID(hp.Host.ID, hp.ID)
		}
	}
	for _, d := range s.fab.Devices {
		if d.Switch == sw && slices.Contains(d.Ports, port) {
			return d.ID
		}
	}
	return ""
}

func (s *Server) getPort(w http.ResponseWriter, r *http.Request) error {
	sw, err := s.fabricSwitch(r)
	if err != nil {
		return err
	}
	id := r.PathValue("port")
	if !slices.Contains(portIDs(sw), id) {
		return errNotFound("Port", id)
	}
	name := id
	for _, n := range sw.PortNames {
		if portID(n) == id {
			name = n
		}
	}
	body := map[string]any{
		"@odata.id":    s.base() + "/Switches/" + sw.ID + "/Ports/" + id,
		"@odata.type":  "#Port.v1_11_0.Port",
		"Id":           id,
		"Name":         "Port " + name,
		"PortId":       name,
		"PortProtocol": fabricTypes[s.fab.Kind],
		"LinkStatus":   "LinkUp",
		"Status":       statusOK(""),
		"Links":        map[string]any{},
	}
	if ep := s.portUser(sw, name); ep == "" {
		body["Status"] = map[string]string{"State": "Absent", "Health": "OK"}
		body["LinkStatus"] = "NoLink"
	} else {
		body["Links"] = map[string]any{"AssociatedEndpoints": []odataID{ref(s.endpointPath(ep))}}
	}
	rf.WriteJSON(w, http.StatusOK, body)
	return nil
}

func (s *Server) getEndpoints(w http.ResponseWriter, r *http.Request) error {
	if err := s.checkFabric(r); err != nil {
		return err
	}
	var members []odataID
	for _, hp := range s.fab.Ports {
		members = append(members, ref(s.endpointPath(InitiatorID(hp.Host.ID, hp.ID))))
	}
	for _, d := range s.fab.Devices {
		members = append(members, ref(s.endpointPath(d.ID)))
	}
	rf.WriteJSON(w, http.StatusOK, collection(s.base()+"/Endpoints", "EndpointCollection", "Endpoint Collection", members))
	return nil
}

var entityTypes = map[inventory.Kind]string{inventory.GPU: "Processor", inventory.FPGA: "Processor", inventory.NVMe: "Drive",
	inventory.SSD: "Drive", inventory.HDD: "Drive", inventory.NIC: "NetworkController", inventory.Memory: "MemoryChunk"}

func (s *Server) getEndpoint(w http.ResponseWriter, r *http.Request) error {
	if err := s.checkFabric(r); err != nil {
		return err
	}
	id := r.PathValue("ep")
	st, err := s.state(r.Context())
	if err != nil {
		return err
	}
	body := map[string]any{
		"@odata.id":        s.endpointPath(id),
		"@odata.type":      "#Endpoint.v1_8_0.Endpoint",
		"Id":               id,
		"EndpointProtocol": fabricTypes[s.fab.Kind],
	}
	if hp := s.initiator(id); hp != nil {
		body["Name"] = "Host port " + hp.ID + " of " + hp.Host.ID
		body["ConnectedEntities"] = []any{map[string]any{"EntityType": "RootComplex", "EntityRole": "Initiator",
			"EntityLink": ref("/redfish/v1/Systems/" + hp.Host.ID)}}
		body["Status"] = statusOK(st.Health[hp.Host.ID+"/"+hp.ID])
		body["Links"] = map[string]any{"ConnectedPorts": []odataID{ref(s.base() + "/Switches/" + hp.Switch.ID + "/Ports/" + portID(hp.Port))}}
		rf.WriteJSON(w, http.StatusOK, body)
		return nil
	}
	d := s.device(id)
	if d == nil {
		return errNotFound("Endpoint", id)
	}
	var ports []odataID
	for _, p := range d.Ports {
		ports = append(ports, ref(s.base()+"/Switches/"+d.Switch.ID+"/Ports/"+portID(p)))
	}
	if ports == nil {
		ports = []odataID{}
	}
	entity := map[string]any{"EntityType": entityTypes[d.Kind], "EntityRole": "Target"}
	if s.fab.Kind == inventory.CXLMemory {
		entity["EntityType"] = "CXLDevice"
	}
	if d.Kind == inventory.Memory {
		entity["EntityLink"] = ref("/redfish/v1/Chassis/" + d.ID)
	}
	body["Name"] = fmt.Sprintf("%s %s", d.Kind, d.ID)
	body["ConnectedEntities"] = []any{entity}
	body["Status"] = statusOK(st.Health[d.ID])
	body["Links"] = map[string]any{"ConnectedPorts": ports}
	rf.WriteJSON(w, http.StatusOK, body)
	return nil
}
