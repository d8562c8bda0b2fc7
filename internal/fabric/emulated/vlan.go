package emulated

import (
	"slices"
	"time"

	"rackpool/internal/clock"
	"rackpool/internal/fabric"
	"rackpool/internal/inventory"
	"rackpool/internal/topology"
)

// FirstVLAN is the VLAN ID of the fabric's first host port; the n-th host
// port (0-based, in fabric order) owns VLAN FirstVLAN+n.
const FirstVLAN = 100

// VLAN emulates an ExpEther-style Ethernet fabric (P3): PCIe encapsulated
// in Ethernet, with devices assigned to hosts by VLAN grouping. Every host
// port owns one VLAN; attaching a device puts its switch port into that
// VLAN.
type VLAN struct {
	*engine
	vlanOf map[string]int // "host/port" -> VLAN ID
}

var (
	_ fabric.Driver          = (*VLAN)(nil)
	_ fabric.StatsReporter   = (*VLAN)(nil)
	_ fabric.FaultInjector   = (*VLAN)(nil)
	_ fabric.Restorer        = (*VLAN)(nil)
	_ fabric.LatencyReporter = (*VLAN)(nil)
)

// NewVLAN returns a driver for the ethernet-vlan fabric f of top. A nil clk
// means the wall clock.
func NewVLAN(top *topology.Topology, f *inventory.Fabric, clk clock.Clock) (*VLAN, error) {
	e, err := newEngine(top, f, clk, inventory.EthernetVLAN)
	if err != nil {
		return nil, err
	}
	v := &VLAN{engine: e, vlanOf: map[string]int{}}
	for i, p := range f.Ports {
		v.vlanOf[fabric.PortName(p.Host.ID, p.ID)] = FirstVLAN + i
	}
	e.model = v
	e.links = linkDefaults{speed: "10Gb/s", width: func(*inventory.Device) int { return 1 }}
	return v, nil
}

// attach puts the device's port into the host port's VLAN. An exclusive
// device's port is in at most one VLAN; a shared one (MaxCompositions > 1)
// is a member of up to that many. One VLAN change plus hot-plug.
func (v *VLAN) attach(l *link) (time.Duration, error) {
	if err := v.checkInUse(l); err != nil {
		return 0, err
	}
	return v.fab.Reconfig, nil
}

// detach takes the device's port out of the VLAN: one change.
func (v *VLAN) detach(*link) time.Duration { return v.fab.Reconfig }

// VLANOf returns the VLAN ID host's port into this fabric owns.
func (v *VLAN) VLANOf(host, port string) (int, bool) {
	id, ok := v.vlanOf[fabric.PortName(host, port)]
	return id, ok
}

// VLANs returns every host port's VLAN with its member switch ports, named
// "switch/port" and sorted: the host port's own switch port, and the
// switch ports of the devices attached to it.
func (v *VLAN) VLANs() map[int][]string {
	v.mu.Lock()
	defer v.mu.Unlock()
	out := map[int][]string{}
	for _, p := range v.fab.Ports {
		id := v.vlanOf[fabric.PortName(p.Host.ID, p.ID)]
		out[id] = append(out[id], p.Switch.ID+"/"+p.Port)
	}
	for _, l := range v.att {
		id := v.vlanOf[fabric.PortName(l.Host, l.HostPort)]
		for _, sp := range l.dev.Ports {
			out[id] = append(out[id], l.dev.Switch.ID+"/"+sp)
		}
	}
	for id, m := range out {
		slices.Sort(m)
		out[id] = slices.Compact(m)
	}
	return out
}
