package schedule

import (
	"slices"

	"rackpool/internal/inventory"
	"rackpool/internal/topology"
)

// overlay tracks what a plan under construction would consume, on top of
// the State.
// Plans are small, so the overlay keeps short lists, not maps: a decision
// builds one overlay per host it tries.
type overlay struct {
	st       *State
	host     *inventory.Host
	used     []int32 // blocks taken, held or excluded (block indexes)
	usedSet  map[int32]bool
	circuits []circuit // circuits the plan opens
	drawers  []*inventory.Drawer
	affinity Affinity                     // same-drawer or same-switch, else ""
	groupKey map[*inventory.Fabric]string // affinity: the chosen group per fabric
}

// circuit is an optical circuit a plan opens from host port hp to node d.
type circuit struct {
	hp *inventory.HostPort
	d  *inventory.Device
}

// usedSetFrom is the plan size from which used is also kept as a set.
const usedSetFrom = 32

// isUsed reports whether block index i is taken, held or excluded.
func (o *overlay) isUsed(i int32) bool {
	if o.usedSet != nil {
		return o.usedSet[i]
	}
	return slices.Contains(o.used, i)
}

// peer returns the node the plan circuits hp to, or nil.
func (o *overlay) peer(hp *inventory.HostPort) *inventory.Device {
	for _, c := range o.circuits {
		if c.hp == hp {
			return c.d
		}
	}
	return nil
}

// opened counts the circuits the plan opens to d.
func (o *overlay) opened(d *inventory.Device) int {
	n := 0
	for _, c := range o.circuits {
		if c.d == d {
			n++
		}
	}
	return n
}

// reset empties o for a plan on host h, keeping its lists' storage.
func (o *overlay) reset(st *State, h *inventory.Host) {
	*o = overlay{st: st, host: h, used: o.used[:0], circuits: o.circuits[:0], drawers: o.drawers[:0]}
}

// add puts block b, reached by path through port, into plan.
func (o *overlay) add(plan *Plan, b *inventory.Block, path topology.Path, port *inventory.HostPort) {
	o.take(b, port)
	plan.Assignments = append(plan.Assignments, Assignment{Block: b, Port: port, RTTNS: path.RTTNS, Hops: path.Hops})
	plan.TotalRTTNS += path.RTTNS
	plan.TotalHops += path.Hops
	if o.affinity != "" {
		o.groupKey[b.Device.Fabric] = groupOf(b, o.affinity)
	}
}

// check returns "" when block b can be added through port p, else the reason.
func (o *overlay) check(b *inventory.Block, p *inventory.HostPort) (Reason, *inventory.HostPort) {
	if o.isUsed(int32(b.Index)) {
		return Duplicate, nil
	}
	if !o.st.Free(b) {
		return InUse, nil
	}
	d := b.Device
	if d.Drawer != nil && !slices.Contains(o.drawers, d.Drawer) {
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
			peer := o.peer(hp)
			if peer == nil {
				peer = o.st.portPeer[hp.Index]
			}
			if peer == d {
				return "", hp
			}
			if peer == nil && free == nil && o.st.top.Reaches(hp, d) {
				free = hp
			}
		}
		if free == nil || int(o.st.circuits[d.Index])+o.opened(d) >= len(d.Ports) {
			return PortBusy, nil
		}
		return "", free
	}
	return "", p
}

func (o *overlay) use(b *inventory.Block) {
	i := int32(b.Index)
	o.used = append(o.used, i)
	switch {
	case o.usedSet != nil:
		o.usedSet[i] = true
	case len(o.used) >= usedSetFrom:
		o.usedSet = make(map[int32]bool, 2*len(o.used))
		for _, u := range o.used {
			o.usedSet[u] = true
		}
	}
}

func (o *overlay) take(b *inventory.Block, p *inventory.HostPort) {
	o.use(b)
	d := b.Device
	if d.Drawer != nil && !slices.Contains(o.drawers, d.Drawer) {
		o.drawers = append(o.drawers, d.Drawer)
	}
	if d.Fabric.Kind == inventory.OpticalCircuit && o.st.portPeer[p.Index] == nil && o.peer(p) == nil {
		o.circuits = append(o.circuits, circuit{p, d})
	}
}

// closed reports whether the host can open no new circuit on fabric f:
// f is optical and every host port on it carries a circuit, committed or
// planned.
func (o *overlay) closed(f *inventory.Fabric) bool {
	if f.Kind != inventory.OpticalCircuit {
		return false
	}
	for _, hp := range o.host.Ports {
		if hp.Fabric == f && o.st.portPeer[hp.Index] == nil && o.peer(hp) == nil {
			return false
		}
	}
	return true
}
