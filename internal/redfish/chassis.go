package redfish

import (
	"context"
	"net/http"
	"strings"

	"rackpool/internal/fabric"
	"rackpool/internal/inventory"
	"rackpool/internal/redfish/service"
)

// chassisRoutes are the routes of Chassis (routes.go).
var chassisRoutes = []route{
	{"GET /redfish/v1/Chassis", login, (*Server).getChassisCollection},
	{"GET /redfish/v1/Chassis/{id}", login, (*Server).getChassis},
}

// Chassis: one per rack, one per PCIe chassis ("falcon1"), one per
// drawer ("falcon1-drawer1"), one per CXL memory device ("cxlmem1",
// cxl.go), one per memory node ("memnode1") and one enclosure per other
// fabric's devices ("sas1": the SAS drives' enclosure). A device's chassis
// is service.ChassisOf; those with drives list them (Drives, served by
// package composition).

func (s *Server) getChassisCollection(w http.ResponseWriter, r *http.Request) error {
	var members []odataID
	racks := map[string]bool{}
	for _, h := range s.top.Hosts {
		if !racks[h.Rack] {
			racks[h.Rack] = true
			members = append(members, reff("/redfish/v1/Chassis/%s", h.Rack))
		}
	}
	for _, f := range s.top.Fabrics {
		if len(f.Drawers) == 0 {
			continue
		}
		members = append(members, reff("/redfish/v1/Chassis/%s", f.ID))
		for _, d := range f.Drawers {
			members = append(members, reff("/redfish/v1/Chassis/%s-%s", f.ID, d.ID))
		}
	}
	for _, f := range s.top.Fabrics {
		if f.Kind == inventory.CXLMemory {
			for _, d := range f.Devices {
				members = append(members, reff("/redfish/v1/Chassis/%s", d.ID))
			}
		}
	}
	for _, e := range s.enclosures() {
		members = append(members, reff("/redfish/v1/Chassis/%s", e.id))
	}
	writeJSON(w, http.StatusOK, collection("/redfish/v1/Chassis", "ChassisCollection", "Chassis Collection", members))
	return nil
}

func chassisBody(id, typ, name string, extra map[string]any) map[string]any {
	body := map[string]any{
		"@odata.id":   "/redfish/v1/Chassis/" + id,
		"@odata.type": "#Chassis.v1_25_0.Chassis",
		"Id":          id,
		"Name":        name,
		"ChassisType": typ,
		"Status":      map[string]string{"State": "Enabled", "Health": "OK"},
	}
	for k, v := range extra {
		body[k] = v
	}
	return body
}

func (s *Server) getChassis(w http.ResponseWriter, r *http.Request) error {
	id := r.PathValue("id")
	var hosts []odataID
	for _, h := range s.top.Hosts {
		if h.Rack == id {
			hosts = append(hosts, reff("/redfish/v1/Systems/%s", h.ID))
		}
	}
	if hosts != nil {
		// The composed systems on the rack's hosts, as the principal sees them.
		p := principal(r)
		for _, c := range s.mgr.List() {
			if h := s.top.Host(c.Host); h != nil && h.Rack == id && p.Sees(c.Tenant) {
				hosts = append(hosts, reff("/redfish/v1/Systems/%s", c.ID))
			}
		}
		writeJSON(w, http.StatusOK, chassisBody(id, "Rack", "Rack "+id, map[string]any{
			"Links": map[string]any{"ComputerSystems": hosts},
		}))
		return nil
	}
	if d := s.cxlDevice(id); d != nil {
		writeJSON(w, http.StatusOK, s.cxlChassisBody(r, d))
		return nil
	}
	for _, e := range s.enclosures() {
		if e.id == id {
			writeJSON(w, http.StatusOK, chassisBody(id, "Enclosure", e.name, withDrives(id, e.devices, map[string]any{
				"Links": map[string]any{"ResourceBlocks": nonNilRefs(blockRefsOf(e.devices))},
				"Oem":   rackpoolOem("Chassis", map[string]any{"Fabric": e.fabric.ID}),
			})))
			return nil
		}
	}
	for _, f := range s.top.Fabrics {
		if len(f.Drawers) == 0 {
			continue
		}
		if f.ID == id {
			var contains []odataID
			for _, d := range f.Drawers {
				contains = append(contains, reff("/redfish/v1/Chassis/%s-%s", f.ID, d.ID))
			}
			writeJSON(w, http.StatusOK, chassisBody(id, "Enclosure", "PCIe chassis "+id, map[string]any{
				"Links": map[string]any{"Contains": contains},
				"Oem":   rackpoolOem("Chassis", map[string]any{"Fabric": f.ID, "HostPorts": nonNil(hostPortNames(f))}),
			}))
			return nil
		}
		for _, d := range f.Drawers {
			if id != f.ID+"-"+d.ID {
				continue
			}
			var devices []*inventory.Device
			for _, dev := range f.Devices {
				if dev.Drawer == d {
					devices = append(devices, dev)
				}
			}
			writeJSON(w, http.StatusOK, chassisBody(id, "Drawer", "Drawer "+d.ID+" of "+f.ID, withDrives(id, devices, map[string]any{
				"PCIeDevices": ref("/redfish/v1/Chassis/" + id + "/PCIeDevices"),
				"Links":       map[string]any{"ContainedBy": reff("/redfish/v1/Chassis/%s", f.ID), "ResourceBlocks": blockRefsOf(devices)},
				"Oem": rackpoolOem("Chassis", map[string]any{
					"Mode": d.Mode, "Slots": d.Slots, "HostPorts": nonNil(d.HostPorts), "MaxHosts": d.Mode.MaxHosts(),
				}),
			})))
			return nil
		}
	}
	return errNotFound("Chassis", id)
}

// enclosure is a chassis of devices outside drawers and CXL memory: one
// memory node, or the devices of one other fabric.
type enclosure struct {
	id, name string
	fabric   *inventory.Fabric
	devices  []*inventory.Device
}

// enclosures are the chassis of devices that sit in no drawer and are no
// CXL memory device (those are chassis of their own), in topology order.
func (s *Server) enclosures() []enclosure {
	var out []enclosure
	for _, f := range s.top.Fabrics {
		if f.Kind == inventory.CXLMemory {
			continue
		}
		shared := enclosure{id: f.ID, name: "Enclosure of " + f.ID, fabric: f}
		for _, d := range f.Devices {
			switch {
			case d.Drawer != nil:
			case service.ChassisOf(d) == d.ID:
				out = append(out, enclosure{id: d.ID, name: "Memory node " + d.ID, fabric: f, devices: []*inventory.Device{d}})
			default:
				shared.devices = append(shared.devices, d)
			}
		}
		if len(shared.devices) > 0 {
			out = append(out, shared)
		}
	}
	return out
}

// blockRefsOf links every block of devices.
func blockRefsOf(devices []*inventory.Device) []odataID {
	var out []odataID
	for _, d := range devices {
		for _, b := range d.Blocks {
			out = append(out, ref(service.BlocksPath+b.ID))
		}
	}
	return out
}

// withDrives adds the Drives link to body, a chassis id's whose devices
// include drives.
func withDrives(id string, devices []*inventory.Device, body map[string]any) map[string]any {
	for _, d := range devices {
		if service.IsDrive(d.Kind) {
			body["Drives"] = ref("/redfish/v1/Chassis/" + id + "/Drives")
			break
		}
	}
	return body
}

func hostPortNames(f *inventory.Fabric) []string {
	var out []string
	for _, p := range f.Switches[0].PortNames {
		if strings.HasPrefix(p, "H") {
			out = append(out, p)
		}
	}
	return out
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

func nonNilRefs(r []odataID) []odataID { return service.NonNil(r) }
