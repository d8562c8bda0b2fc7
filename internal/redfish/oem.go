package redfish

import (
	"net/http"

	"rackpool/internal/inventory"
)

// TopologyView is the body of GET /redfish/v1/Oem/Rackpool/Topology: the
// whole shape of the rack in one document, for the CLI's topology view.
type TopologyView struct {
	Name    string
	Hosts   []HostView
	Fabrics []FabricView
	Zones   []ZoneView
}

// HostView is one host.
type HostView struct {
	ID, Rack  string
	Cores     int
	MemoryGiB int
	Ports     []PortView
}

// PortView is one host port.
type PortView struct {
	ID, Fabric, Switch, Port string
	Metres                   float64
}

// FabricView is one fabric.
type FabricView struct {
	ID, Kind          string
	ReconfigurationMs float64
	Switches          []SwitchView
	Drawers           []DrawerView `json:",omitempty"`
	Devices           []DeviceView
}

// SwitchView is one switch.
type SwitchView struct {
	ID        string
	Ports     int
	LatencyNs float64
}

// DrawerView is one chassis drawer.
type DrawerView struct {
	ID, Mode  string
	Slots     int
	HostPorts []string
}

// DeviceView is one device.
type DeviceView struct {
	ID, Kind, Model, Switch string
	Ports                   []string
	Drawer                  string `json:",omitempty"`
	Slot                    int    `json:",omitempty"`
	CapacityBytes           int64
	Blocks                  int
}

// ZoneView is one topology zone.
type ZoneView struct {
	ID      string
	Hosts   []string
	Devices []string
}

func (s *Server) getTopology(w http.ResponseWriter, r *http.Request) error {
	v := TopologyView{Name: s.top.Name}
	for _, h := range s.top.Hosts {
		hv := HostView{ID: h.ID, Rack: h.Rack, Cores: h.Cores, MemoryGiB: h.MemoryGiB}
		for _, p := range h.Ports {
			hv.Ports = append(hv.Ports, PortView{ID: p.ID, Fabric: p.Fabric.ID, Switch: p.Switch.ID, Port: p.Port, Metres: p.Metres})
		}
		v.Hosts = append(v.Hosts, hv)
	}
	for _, f := range s.top.Fabrics {
		fv := FabricView{ID: f.ID, Kind: string(f.Kind), ReconfigurationMs: float64(f.Reconfig.Microseconds()) / 1000}
		for _, sw := range f.Switches {
			fv.Switches = append(fv.Switches, SwitchView{ID: sw.ID, Ports: len(portIDs(sw)), LatencyNs: sw.LatencyNS})
		}
		for _, d := range f.Drawers {
			fv.Drawers = append(fv.Drawers, DrawerView{ID: d.ID, Mode: string(d.Mode), Slots: d.Slots, HostPorts: d.HostPorts})
		}
		for _, d := range f.Devices {
			dv := DeviceView{ID: d.ID, Kind: string(d.Kind), Model: d.Model, Switch: d.Switch.ID, Ports: d.Ports,
				Slot: d.Slot, CapacityBytes: d.CapacityBytes, Blocks: len(d.Blocks)}
			if d.Drawer != nil {
				dv.Drawer = d.Drawer.ID
			}
			fv.Devices = append(fv.Devices, dv)
		}
		v.Fabrics = append(v.Fabrics, fv)
	}
	for _, z := range s.top.Zones {
		v.Zones = append(v.Zones, ZoneView{ID: z.ID, Hosts: inventory.SortedKeys(z.Hosts), Devices: inventory.SortedKeys(z.Devices)})
	}
	writeJSON(w, http.StatusOK, v)
	return nil
}
