package redfish

import (
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"rackpool/internal/fabric"
	"rackpool/internal/inventory"
	"rackpool/internal/rf"
)

// fabricDrivers gives the Fabrics' handlers the fabric drivers
// (compose.Manager).
type fabricDrivers interface {
	Drivers() map[string]fabric.Driver
}

// fabricRoutes are the routes of Fabrics, Switches, Ports, Endpoints, Zones and fault injection (routes.go).
var fabricRoutes = []route{
	{"GET /redfish/v1/Fabrics", login, (*Server).getFabrics},
	{"GET /redfish/v1/Fabrics/{id}", login, (*Server).getFabric},
	{"GET /redfish/v1/Fabrics/{id}/Switches", login, (*Server).getSwitches},
	{"GET /redfish/v1/Fabrics/{id}/Switches/{sw}", login, (*Server).getSwitch},
	{"GET /redfish/v1/Fabrics/{id}/Switches/{sw}/Ports", login, (*Server).getPorts},
	{"GET /redfish/v1/Fabrics/{id}/Switches/{sw}/Ports/{port}", login, (*Server).getPort},
	{"GET /redfish/v1/Fabrics/{id}/Endpoints", login, (*Server).getEndpoints},
	{"GET /redfish/v1/Fabrics/{id}/Endpoints/{ep}", login, (*Server).getEndpoint},
	{"GET /redfish/v1/Fabrics/{id}/Zones", login, (*Server).getFabricZones},
	{"GET /redfish/v1/Fabrics/{id}/Zones/{zone}", login, (*Server).getFabricZone},
	{"POST /redfish/v1/Fabrics/{id}/Actions/Oem/Rackpool.InjectFault", configureComponents, (*Server).injectFault},
	{"POST /redfish/v1/Fabrics/{id}/Actions/Oem/Rackpool.ClearFaults", configureComponents, (*Server).clearFaults},
}

// Fabrics show the same attachments as compositions, from the fabric's
// side: every device and every host port is an Endpoint; each host's
// attachments on a fabric form one Zone of endpoints. Zones are computed
// from the compositions (one truth, two views).

var fabricTypes = rf.FabricTypes

func (s *Server) fabric(r *http.Request) (*inventory.Fabric, error) {
	f := s.top.Fabric(r.PathValue("id"))
	if f == nil {
		return nil, errNotFound("Fabric", r.PathValue("id"))
	}
	return f, nil
}

func (s *Server) getFabrics(w http.ResponseWriter, r *http.Request) error {
	var members []odataID
	for _, f := range s.top.Fabrics {
		members = append(members, reff("/redfish/v1/Fabrics/%s", f.ID))
	}
	writeJSON(w, http.StatusOK, collection("/redfish/v1/Fabrics", "FabricCollection", "Fabric Collection", members))
	return nil
}

func (s *Server) getFabric(w http.ResponseWriter, r *http.Request) error {
	f, err := s.fabric(r)
	if err != nil {
		return err
	}
	base := "/redfish/v1/Fabrics/" + f.ID
	writeJSON(w, http.StatusOK, map[string]any{
		"@odata.id":   base,
		"@odata.type": "#Fabric.v1_3_0.Fabric",
		"Id":          f.ID,
		"Name":        string(f.Kind) + " fabric " + f.ID,
		"FabricType":  fabricTypes[f.Kind],
		"Status":      map[string]string{"State": "Enabled", "Health": "OK"},
		"Switches":    ref(base + "/Switches"),
		"Endpoints":   ref(base + "/Endpoints"),
		"Zones":       ref(base + "/Zones"),
		"Connections": ref(base + "/Connections"),
		"Actions": map[string]any{"Oem": map[string]any{
			"#Rackpool.InjectFault": map[string]string{"target": base + "/Actions/Oem/Rackpool.InjectFault"},
			"#Rackpool.ClearFaults": map[string]string{"target": base + "/Actions/Oem/Rackpool.ClearFaults"},
		}},
		"Oem": rackpoolOem("Fabric", map[string]any{
			"Kind":              f.Kind,
			"ReconfigurationMs": float64(f.Reconfig.Microseconds()) / 1000,
			"DriveOnlineMs":     float64(f.DriveOnline.Microseconds()) / 1000,
		}),
	})
	return nil
}

func (s *Server) getSwitches(w http.ResponseWriter, r *http.Request) error {
	f, err := s.fabric(r)
	if err != nil {
		return err
	}
	var members []odataID
	for _, sw := range f.Switches {
		members = append(members, reff("/redfish/v1/Fabrics/%s/Switches/%s", f.ID, sw.ID))
	}
	writeJSON(w, http.StatusOK, collection("/redfish/v1/Fabrics/"+f.ID+"/Switches", "SwitchCollection", "Switch Collection", members))
	return nil
}

func (s *Server) fabricSwitch(r *http.Request) (*inventory.Fabric, *inventory.Switch, error) {
	f, err := s.fabric(r)
	if err != nil {
		return nil, nil, err
	}
	sw := f.Switch(r.PathValue("sw"))
	if sw == nil {
		return nil, nil, errNotFound("Switch", r.PathValue("sw"))
	}
	return f, sw, nil
}

func (s *Server) getSwitch(w http.ResponseWriter, r *http.Request) error {
	f, sw, err := s.fabricSwitch(r)
	if err != nil {
		return err
	}
	base := fmt.Sprintf("/redfish/v1/Fabrics/%s/Switches/%s", f.ID, sw.ID)
	writeJSON(w, http.StatusOK, map[string]any{
		"@odata.id":        base,
		"@odata.type":      "#Switch.v1_9_0.Switch",
		"Id":               sw.ID,
		"Name":             "Switch " + sw.ID,
		"SwitchType":       fabricTypes[f.Kind],
		"TotalSwitchWidth": len(portIDs(sw)),
		"Status":           map[string]string{"State": "Enabled", "Health": "OK"},
		"Ports":            ref(base + "/Ports"),
		"Oem":              rackpoolOem("Switch", map[string]any{"PortToPortLatencyNs": sw.LatencyNS}),
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

func (s *Server) getPorts(w http.ResponseWriter, r *http.Request) error {
	f, sw, err := s.fabricSwitch(r)
	if err != nil {
		return err
	}
	base := fmt.Sprintf("/redfish/v1/Fabrics/%s/Switches/%s/Ports", f.ID, sw.ID)
	var members []odataID
	for _, p := range portIDs(sw) {
		members = append(members, reff("%s/%s", base, p))
	}
	writeJSON(w, http.StatusOK, collection(base, "PortCollection", "Port Collection", members))
	return nil
}

// portUser returns the endpoint cabled to a switch port, if any.
func (s *Server) portUser(f *inventory.Fabric, sw *inventory.Switch, port string) (endpoint string, role string) {
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

func (s *Server) getPort(w http.ResponseWriter, r *http.Request) error {
	f, sw, err := s.fabricSwitch(r)
	if err != nil {
		return err
	}
	id := r.PathValue("port")
	if !slices.Contains(portIDs(sw), id) {
		return errNotFound("Port", id)
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
		links["AssociatedEndpoints"] = []odataID{reff("/redfish/v1/Fabrics/%s/Endpoints/%s", f.ID, ep)}
	}
	writeJSON(w, http.StatusOK, map[string]any{
		"@odata.id":    fmt.Sprintf("/redfish/v1/Fabrics/%s/Switches/%s/Ports/%s", f.ID, sw.ID, id),
		"@odata.type":  "#Port.v1_11_0.Port",
		"Id":           id,
		"Name":         "Port " + name,
		"PortId":       name,
		"PortProtocol": fabricTypes[f.Kind],
		"LinkStatus":   link,
		"Status":       status,
		"Links":        links,
		"Oem":          rackpoolOem("Port", portOem),
	})
	return nil
}

func (s *Server) getEndpoints(w http.ResponseWriter, r *http.Request) error {
	f, err := s.fabric(r)
	if err != nil {
		return err
	}
	base := "/redfish/v1/Fabrics/" + f.ID + "/Endpoints"
	var members []odataID
	for _, hp := range f.Ports {
		members = append(members, reff("%s/%s-%s", base, hp.Host.ID, hp.ID))
	}
	for _, d := range f.Devices {
		members = append(members, reff("%s/%s", base, d.ID))
	}
	writeJSON(w, http.StatusOK, collection(base, "EndpointCollection", "Endpoint Collection", members))
	return nil
}

func (s *Server) getEndpoint(w http.ResponseWriter, r *http.Request) error {
	f, err := s.fabric(r)
	if err != nil {
		return err
	}
	id := r.PathValue("ep")
	base := "/redfish/v1/Fabrics/" + f.ID + "/Endpoints/" + id
	body := map[string]any{
		"@odata.id":   base,
		"@odata.type": "#Endpoint.v1_8_0.Endpoint",
		"Id":          id,
		"Status":      map[string]string{"State": "Enabled", "Health": "OK"},
	}
	for _, hp := range f.Ports {
		if hp.Host.ID+"-"+hp.ID == id {
			body["Name"] = "Host port " + hp.ID + " of " + hp.Host.ID
			body["EndpointProtocol"] = fabricTypes[f.Kind]
			body["ConnectedEntities"] = []any{map[string]any{"EntityType": "RootComplex", "EntityRole": "Initiator",
				"EntityLink": reff("/redfish/v1/Systems/%s", hp.Host.ID)}}
			body["Links"] = map[string]any{"ConnectedPorts": []odataID{reff("/redfish/v1/Fabrics/%s/Switches/%s/Ports/%s", f.ID, hp.Switch.ID, strings.ReplaceAll(hp.Port, "/", "-"))}}
			body["Oem"] = rackpoolOem("Endpoint", map[string]any{"Host": hp.Host.ID, "CableMetres": hp.Metres})
			writeJSON(w, http.StatusOK, body)
			return nil
		}
	}
	for _, d := range f.Devices {
		if d.ID != id {
			continue
		}
		entity := map[inventory.Kind]string{inventory.GPU: "Processor", inventory.FPGA: "Processor", inventory.NVMe: "Drive",
			inventory.SSD: "Drive", inventory.HDD: "Drive", inventory.NIC: "NetworkController", inventory.Memory: "MemoryChunk"}[d.Kind]
		var ports []odataID
		for _, p := range d.Ports {
			ports = append(ports, reff("/redfish/v1/Fabrics/%s/Switches/%s/Ports/%s", f.ID, d.Switch.ID, strings.ReplaceAll(p, "/", "-")))
		}
		var blocks []odataID
		for _, b := range d.Blocks {
			blocks = append(blocks, ref(blocksPath+b.ID))
		}
		body["Name"] = string(d.Kind) + " " + d.ID
		body["EndpointProtocol"] = fabricTypes[f.Kind]
		conn := map[string]any{"EntityType": entity, "EntityRole": "Target"}
		if f.Kind == inventory.CXLMemory {
			conn = map[string]any{"EntityType": "CXLDevice", "EntityRole": "Target", "EntityLink": reff("/redfish/v1/Chassis/%s/PCIeDevices/1", d.ID)}
		}
		body["ConnectedEntities"] = []any{conn}
		body["Status"] = map[string]string{"State": "Enabled", "Health": string(s.health(r.Context(), d))}
		body["Links"] = map[string]any{"ConnectedPorts": ports}
		oem := map[string]any{"ResourceBlocks": blocks}
		if sr, ok := s.mgr.Drivers()[f.ID].(fabric.StatsReporter); ok {
			if stats, err := sr.Stats(r.Context()); err == nil {
				for _, st := range stats {
					if st.Device == d.ID {
						oem["Telemetry"] = st
					}
				}
			}
		}
		body["Oem"] = rackpoolOem("Endpoint", oem)
		writeJSON(w, http.StatusOK, body)
		return nil
	}
	return errNotFound("Endpoint", id)
}

// fabricZones groups the live compositions' attachments on f by host.
func (s *Server) fabricZones(r *http.Request, f *inventory.Fabric) map[string][]string {
	zones := map[string][]string{}
	p := principal(r)
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

func (s *Server) getFabricZones(w http.ResponseWriter, r *http.Request) error {
	f, err := s.fabric(r)
	if err != nil {
		return err
	}
	var members []odataID
	zones := s.fabricZones(r, f)
	for _, hp := range f.Ports {
		if id := hp.Host.ID + "-" + hp.ID; zones[id] != nil {
			members = append(members, reff("/redfish/v1/Fabrics/%s/Zones/%s", f.ID, id))
		}
	}
	writeJSON(w, http.StatusOK, collection("/redfish/v1/Fabrics/"+f.ID+"/Zones", "ZoneCollection", "Zone Collection", members))
	return nil
}

func (s *Server) getFabricZone(w http.ResponseWriter, r *http.Request) error {
	f, err := s.fabric(r)
	if err != nil {
		return err
	}
	id := r.PathValue("zone")
	eps, ok := s.fabricZones(r, f)[id]
	if !ok {
		return errNotFound("Zone", id)
	}
	var links []odataID
	for _, ep := range eps {
		links = append(links, reff("/redfish/v1/Fabrics/%s/Endpoints/%s", f.ID, ep))
	}
	writeJSON(w, http.StatusOK, map[string]any{
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

func (s *Server) injectFault(w http.ResponseWriter, r *http.Request) error {
	f, err := s.fabric(r)
	if err != nil {
		return err
	}
	var body struct {
		Kind   string
		Target string
		Count  int
	}
	if err := decode(r, &body); err != nil {
		return err
	}
	fi, ok := s.mgr.Drivers()[f.ID].(fabric.FaultInjector)
	if !ok {
		return newError(http.StatusBadRequest, baseRegistry+"ActionNotSupported",
			"The action Rackpool.InjectFault is not supported by the resource.", "Rackpool.InjectFault")
	}
	switch fabric.FaultKind(body.Kind) {
	case fabric.AttachFails, fabric.DeviceFails, fabric.PortFails, fabric.HostFails, fabric.ReleaseStalls:
	default:
		return errPropertyValue("Kind", body.Kind, "Use attach-fails, device-fails, port-fails, host-fails or (cxl-memory fabrics) release-stalls.")
	}
	if err := fi.InjectFault(fabric.Fault{Kind: fabric.FaultKind(body.Kind), Target: body.Target, Count: body.Count}); err != nil {
		return errPropertyValue("Target", body.Target, err.Error())
	}
	s.log.Warn("fault injected", "fabric", f.ID, "kind", body.Kind, "target", body.Target, "count", body.Count)
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (s *Server) clearFaults(w http.ResponseWriter, r *http.Request) error {
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
