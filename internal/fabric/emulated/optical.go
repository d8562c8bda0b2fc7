package emulated

import (
	"cmp"
	"fmt"
	"slices"
	"time"

	"rackpool/internal/clock"
	"rackpool/internal/fabric"
	"rackpool/internal/inventory"
	"rackpool/internal/topology"
)

// Optical emulates an optical circuit switch in front of memory nodes
// (P4). A circuit is a light path between exactly one host-side switch
// port and one device-side port; a port is in at most one circuit. Every
// block of a memory node attached to a host port shares the one circuit
// between them, which is set up for the first block and torn down after
// the last.
type Optical struct {
	*engine
	byHost    map[string]*circuit // "host/port" -> circuit
	byDevPort map[string]*circuit // "device/switch port" -> circuit
}

var (
	_ fabric.Driver          = (*Optical)(nil)
	_ fabric.StatsReporter   = (*Optical)(nil)
	_ fabric.FaultInjector   = (*Optical)(nil)
	_ fabric.Restorer        = (*Optical)(nil)
	_ fabric.LatencyReporter = (*Optical)(nil)
)

type circuit struct {
	hp      *inventory.HostPort
	dev     *inventory.Device
	devPort string
	blocks  int
	since   time.Time
}

// Circuit is one optical circuit as Circuits reports it.
type Circuit struct {
	Host       string // host ID
	HostPort   string // the host's port ID
	SwitchPort string // the switch port the host port is cabled to
	Device     string
	DevicePort string // the device's switch port
	Blocks     int    // attached blocks sharing the circuit
	Since      time.Time
}

// NewOptical returns a driver for the optical-circuit fabric f of top. A
// nil clk means the wall clock.
func NewOptical(top *topology.Topology, f *inventory.Fabric, clk clock.Clock) (*Optical, error) {
	e, err := newEngine(top, f, clk, inventory.OpticalCircuit)
	if err != nil {
		return nil, err
	}
	o := &Optical{engine: e, byHost: map[string]*circuit{}, byDevPort: map[string]*circuit{}}
	e.model = o
	e.links = linkDefaults{speed: "25Gb/s", width: func(d *inventory.Device) int { return len(d.Ports) }}
	return o, nil
}

// attach reuses the circuit between the host port and the block's node
// (no time), or sets one up on a free port of the node (one OCS
// reconfiguration). A host port already in a circuit to another node, or
// a node with every port in a circuit, is ErrPortBusy.
func (o *Optical) attach(l *link) (time.Duration, error) {
	if err := o.checkInUse(l); err != nil {
		return 0, err
	}
	hk := fabric.PortName(l.Host, l.HostPort)
	if c := o.byHost[hk]; c != nil {
		if c.dev != l.dev {
			return 0, fmt.Errorf("%s carries a circuit to %s port %s: %w", hk, c.dev.ID, c.devPort, fabric.ErrPortBusy)
		}
		c.blocks++
		return 0, nil
	}
	for _, p := range l.dev.Ports {
		dk := l.dev.ID + "/" + p
		if o.byDevPort[dk] != nil {
			continue
		}
		c := &circuit{hp: l.hp, dev: l.dev, devPort: p, blocks: 1, since: o.clk.Now()}
		o.byHost[hk], o.byDevPort[dk] = c, c
		return o.fab.Reconfig, nil
	}
	return 0, fmt.Errorf("all %d ports of %s carry circuits: %w", len(l.dev.Ports), l.dev.ID, fabric.ErrPortBusy)
}

// detach releases the block's share of its circuit, tearing the circuit
// down (one reconfiguration) when it was the last.
func (o *Optical) detach(l *link) time.Duration {
	hk := fabric.PortName(l.Host, l.HostPort)
	c := o.byHost[hk]
	if c == nil {
		return 0
	}
	c.blocks--
	if c.blocks > 0 {
		return 0
	}
	delete(o.byHost, hk)
	delete(o.byDevPort, c.dev.ID+"/"+c.devPort)
	return o.fab.Reconfig
}

// Circuits returns the circuits that are set up, sorted by host and port.
func (o *Optical) Circuits() []Circuit {
	o.mu.Lock()
	defer o.mu.Unlock()
	out := make([]Circuit, 0, len(o.byHost))
	for _, c := range o.byHost {
		out = append(out, Circuit{
			Host: c.hp.Host.ID, HostPort: c.hp.ID, SwitchPort: c.hp.Port,
			Device: c.dev.ID, DevicePort: c.devPort, Blocks: c.blocks, Since: c.since,
		})
	}
	slices.SortFunc(out, func(a, b Circuit) int {
		return cmp.Or(cmp.Compare(a.Host, b.Host), cmp.Compare(a.HostPort, b.HostPort))
	})
	return out
}
