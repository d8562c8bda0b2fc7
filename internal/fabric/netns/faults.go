package netns

import (
	"fmt"

	"rackpool/internal/fabric"
)

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
	took, err := d.faults.Arm(f, fabric.Targets{
		Device: func(id string) bool { _, ok := d.devIdx[id]; return ok },
		Port:   func(id string) bool { _, ok := d.portIdx[id]; return ok },
		Host:   d.hasHost,
	})
	switch {
	case !took:
		return fmt.Errorf("inject fault: kind %q is not one an %s fabric takes", f.Kind, d.fab.Kind)
	case err != nil || f.Kind == fabric.AttachFails:
		return err
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
	d.faults.Clear()
	if err := d.plumb.applyFaults(); err != nil {
		d.log.Error("clear faults: links not restored", "fabric", d.fab.ID, "err", err)
	}
}

// portDown reports whether host port i has failed or its host has. Call
// with d.mu held.
func (d *Driver) portDown(i int) bool {
	p := d.ports[i]
	return d.faults.PortDown(p.Host.ID, p.ID)
}

// devDown reports whether device j has failed. Call with d.mu held.
func (d *Driver) devDown(j int) bool { return d.faults.DeviceFailed(d.devs[j].ID) }

func (d *Driver) hasHost(id string) bool {
	for _, p := range d.ports {
		if p.Host.ID == id {
			return true
		}
	}
	return false
}
