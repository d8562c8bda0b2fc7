package emulated

import (
	"fmt"
	"maps"
	"slices"
	"time"

	"rackpool/internal/clock"
	"rackpool/internal/fabric"
	"rackpool/internal/inventory"
	"rackpool/internal/topology"
)

// PCIe emulates a Falcon-4016-like PCIe chassis (P2): drawers of slots,
// each drawer in a mode that decides which chassis host ports reach which
// slots and how many hosts may share it.
type PCIe struct {
	*engine
}

var (
	_ fabric.Driver          = (*PCIe)(nil)
	_ fabric.StatsReporter   = (*PCIe)(nil)
	_ fabric.FaultInjector   = (*PCIe)(nil)
	_ fabric.Restorer        = (*PCIe)(nil)
	_ fabric.LatencyReporter = (*PCIe)(nil)
)

// NewPCIe returns a driver for the pcie-switch fabric f of top. A nil clk
// means the wall clock.
func NewPCIe(top *topology.Topology, f *inventory.Fabric, clk clock.Clock) (*PCIe, error) {
	e, err := newEngine(top, f, clk, inventory.PCIeSwitch)
	if err != nil {
		return nil, err
	}
	p := &PCIe{engine: e}
	e.model = p
	e.links = linkDefaults{speed: "16GT/s", width: func(*inventory.Device) int { return 16 }}
	return p, nil
}

// attach enforces the device's sharing limit and the drawer mode's host
// limit; reachability (which host ports a mode connects to a slot) was
// checked by the engine. One hot-plug per attach.
func (p *PCIe) attach(l *link) (time.Duration, error) {
	if err := p.checkInUse(l); err != nil {
		return 0, err
	}
	if dr := l.dev.Drawer; dr != nil {
		hosts := map[string]bool{}
		for _, o := range p.att {
			if o.dev.Drawer == dr {
				hosts[o.Host] = true
			}
		}
		if limit := dr.Mode.MaxHosts(); !hosts[l.Host] && len(hosts) >= limit {
			return 0, fmt.Errorf("%s (%s) already serves %d hosts, the most mode %s allows: %w",
				dr.ID, l.dev.ID, len(hosts), dr.Mode, fabric.ErrDrawerHosts)
		}
	}
	return p.fab.Reconfig, nil
}

// detach is one hot-remove.
func (p *PCIe) detach(*link) time.Duration { return p.fab.Reconfig }

// DrawerHosts returns the hosts that have attachments in drawer, sorted.
func (p *PCIe) DrawerHosts(drawer string) []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	hosts := map[string]bool{}
	for _, l := range p.att {
		if l.dev.Drawer != nil && l.dev.Drawer.ID == drawer {
			hosts[l.Host] = true
		}
	}
	return slices.Sorted(maps.Keys(hosts))
}
