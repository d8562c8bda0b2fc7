package redfish

import (
	"maps"
	"slices"

	"rackpool/api"
	"rackpool/internal/topology"
)

// TopologyView renders a topology as the API's topology document, which both the
// server (GET /redfish/v1/Oem/Rackpool/Topology) and the CLI's local
// `topology --file` show.
func TopologyView(t *topology.Topology) *api.TopologyView {
	v := &api.TopologyView{ODataID: "/redfish/v1/Oem/Rackpool/Topology", ODataType: "#RackpoolTopology.v1_0_0.RackpoolTopology", Name: t.Name}
	for _, h := range t.Hosts {
		hv := api.HostView{ID: h.ID, Rack: h.Rack, Cores: h.Cores, MemoryGiB: h.MemoryGiB}
		for _, p := range h.Ports {
			hv.Ports = append(hv.Ports, api.PortView{ID: p.ID, Fabric: p.Fabric.ID, Switch: p.Switch.ID, Port: p.Port, Metres: p.Metres})
		}
		v.Hosts = append(v.Hosts, hv)
	}
	for _, f := range t.Fabrics {
		fv := api.FabricView{ID: f.ID, Kind: string(f.Kind), ReconfigurationMs: float64(f.Reconfig.Microseconds()) / 1000}
		for _, sw := range f.Switches {
			fv.Switches = append(fv.Switches, api.SwitchView{ID: sw.ID, Ports: sw.Ports + len(sw.PortNames), LatencyNs: sw.LatencyNS})
		}
		for _, d := range f.Drawers {
			fv.Drawers = append(fv.Drawers, api.DrawerView{ID: d.ID, Mode: string(d.Mode), Slots: d.Slots, HostPorts: d.HostPorts})
		}
		for _, d := range f.Devices {
			dv := api.DeviceView{ID: d.ID, Kind: string(d.Kind), Model: d.Model, Switch: d.Switch.ID, Ports: d.Ports,
				Slot: d.Slot, CapacityBytes: d.CapacityBytes, Blocks: len(d.Blocks)}
			if d.Drawer != nil {
				dv.Drawer = d.Drawer.ID
			}
			fv.Devices = append(fv.Devices, dv)
		}
		v.Fabrics = append(v.Fabrics, fv)
	}
	v.Zones = zoneViews(t)
	return v
}

// zoneViews lists t's zones, an array even when the file has none
// (Redfish: never null).
func zoneViews(t *topology.Topology) []api.ZoneView {
	zones := []api.ZoneView{}
	for _, z := range t.Zones {
		zones = append(zones, api.ZoneView{ID: z.ID, Hosts: slices.Sorted(maps.Keys(z.Hosts)), Devices: slices.Sorted(maps.Keys(z.Devices))})
	}
	return zones
}
