package netns

import (
	"fmt"
	"slices"

	"rackpool/internal/fabric"
)

// faults is the set of armed faults.
type faults struct {
	attach  []*attachFault
	devices map[string]bool
	ports   map[string]bool // "host/port"
	hosts   map[string]bool
}

type attachFault struct {
	target string // device ID, or "" for any
	left   int
}

func newFaults() faults {
	return faults{devices: map[string]bool{}, ports: map[string]bool{}, hosts: map[string]bool{}}
}

// failed returns an ErrFailed error when the device, host or host port
// has failed.
func (f *faults) failed(dev, host, port string) error {
	switch {
	case f.devices[dev]:
		return fmt.Errorf("device %s: %w", dev, fabric.ErrFailed)
	case f.hosts[host]:
		return fmt.Errorf("host %s: %w", host, fabric.ErrFailed)
	case f.ports[port]:
		return fmt.Errorf("host port %s: %w", port, fabric.ErrFailed)
	}
	return nil
}

// fireAttach consumes one armed AttachFails fault matching device and
// reports whether one fired.
func (f *faults) fireAttach(device string) bool {
	for i, af := range f.attach {
		if af.target == "" || af.target == device {
			af.left--
			if af.left <= 0 {
				f.attach = slices.Delete(f.attach, i, i+1)
			}
			return true
		}
	}
	return false
}

// InjectFault arms f; see fabric.FaultInjector. The target must be part of
// this fabric (a device, a "host/port" port or a host with a port into it),
// else the error wraps fabric.ErrUnknown. AttachFails with Count 0 fails
// one attach. DeviceFails, PortFails and HostFails take the links involved
// down in the kernel at once; traffic over them stops.
func (d *Driver) InjectFault(f fabric.Fault) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return errClosed
	}
	switch f.Kind {
	case fabric.AttachFails:
		if _, ok := d.devIdx[f.Target]; f.Target != "" && !ok {
			return fmt.Errorf("inject %s: device %q: %w", f.Kind, f.Target, fabric.ErrUnknown)
		}
		d.faults.attach = append(d.faults.attach, &attachFault{target: f.Target, left: max(f.Count, 1)})
		return nil
	case fabric.DeviceFails:
		if _, ok := d.devIdx[f.Target]; !ok {
			return fmt.Errorf("inject %s: device %q: %w", f.Kind, f.Target, fabric.ErrUnknown)
		}
		d.faults.devices[f.Target] = true
	case fabric.PortFails:
		if _, ok := d.portIdx[f.Target]; !ok {
			return fmt.Errorf("inject %s: host port %q: %w", f.Kind, f.Target, fabric.ErrUnknown)
		}
		d.faults.ports[f.Target] = true
	case fabric.HostFails:
		if !d.hasHost(f.Target) {
			return fmt.Errorf("inject %s: host %q: %w", f.Kind, f.Target, fabric.ErrUnknown)
		}
		d.faults.hosts[f.Target] = true
	default:
		return fmt.Errorf("inject fault: kind %q is not one an %s fabric takes", f.Kind, d.fab.Kind)
	}
	if err := d.plumb.applyFaults(); err != nil {
		return fmt.Errorf("inject %s on %s: %w", f.Kind, f.Target, err)
	}
	return nil
}

// ClearFaults clears every injected fault and brings every link the
// faults took down back up; see fabric.FaultInjector. A kernel error is
// logged: the interface has no error to return.
func (d *Driver) ClearFaults() {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return
	}
	d.faults = newFaults()
	if err := d.plumb.applyFaults(); err != nil {
		d.log.Error("clear faults: links not restored", "fabric", d.fab.ID, "err", err)
	}
}

// portDown reports whether host port i has failed or its host has. Call
// with d.mu held.
func (d *Driver) portDown(i int) bool {
	p := d.ports[i]
	return d.faults.ports[portName(p.Host.ID, p.ID)] || d.faults.hosts[p.Host.ID]
}

// devDown reports whether device j has failed. Call with d.mu held.
func (d *Driver) devDown(j int) bool { return d.faults.devices[d.devs[j].ID] }

func (d *Driver) hasHost(id string) bool {
	for _, p := range d.ports {
		if p.Host.ID == id {
			return true
		}
	}
	return false
}
