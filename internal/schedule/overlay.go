package schedule

import "rackpool/internal/inventory"

// overlay tracks what a plan under construction would consume, on top of
// the State.
type overlay struct {
	st       *State
	host     *inventory.Host
	used     map[int32]bool
	portPeer map[*inventory.HostPort]*inventory.Device
	circuits map[*inventory.Device]int
	drawers  map[*inventory.Drawer]bool
	groupKey map[*inventory.Fabric]string // affinity: the chosen group per fabric
}

func newOverlay(st *State, h *inventory.Host) *overlay {
	return &overlay{st: st, host: h}
}

// check returns "" when block b can be added through port p, else the reason.
func (o *overlay) check(b *inventory.Block, p *inventory.HostPort) (Reason, *inventory.HostPort) {
	if o.used[int32(b.Index)] {
		return Duplicate, nil
	}
	if !o.st.Free(b) {
		return InUse, nil
	}
	d := b.Device
	if d.Drawer != nil && !o.drawers[d.Drawer] {
		m := o.st.drawerHosts[d.Drawer]
		if m[o.host] == 0 && len(m) >= d.Drawer.Mode.MaxHosts() {
			return DrawerHosts, nil
		}
	}
	if d.Fabric.Kind == inventory.OpticalCircuit {
		// A circuit to d already up on one of the host's ports, or a free
		// host port and a free port on d.
		var free *inventory.HostPort
		for _, hp := range o.host.Ports {
			if hp.Fabric != d.Fabric {
				continue
			}
			peer := o.portPeer[hp]
			if peer == nil {
				peer = o.st.portPeer[hp]
			}
			if peer == d {
				return "", hp
			}
			if peer == nil && free == nil && o.st.top.Reaches(hp, d) {
				free = hp
			}
		}
		if free == nil || o.st.circuits[d]+o.circuits[d] >= len(d.Ports) {
			return PortBusy, nil
		}
		return "", free
	}
	return "", p
}

func (o *overlay) use(b *inventory.Block) {
	if o.used == nil {
		o.used = make(map[int32]bool, 8)
	}
	o.used[int32(b.Index)] = true
}

func (o *overlay) take(b *inventory.Block, p *inventory.HostPort) {
	o.use(b)
	d := b.Device
	if d.Drawer != nil {
		if o.drawers == nil {
			o.drawers = map[*inventory.Drawer]bool{}
		}
		o.drawers[d.Drawer] = true
	}
	if d.Fabric.Kind == inventory.OpticalCircuit && o.st.portPeer[p] == nil && o.portPeer[p] == nil {
		if o.portPeer == nil {
			o.portPeer = map[*inventory.HostPort]*inventory.Device{}
			o.circuits = map[*inventory.Device]int{}
		}
		o.portPeer[p] = d
		o.circuits[d]++
	}
}
