package rfdriver

import (
	"context"
	"fmt"
	"net/http"
	"strings"

	"rackpool/internal/fabric"
	"rackpool/internal/rf"
)

// The manager's OEM fault-injection actions on the Fabric (fabric-emulator
// has them; real hardware does not).
const (
	injectAction = "#Rackpool.InjectFault"
	clearAction  = "#Rackpool.ClearFaults"
)

// InjectFault arms f on the manager through its #Rackpool.InjectFault
// action. A target that is not part of the fabric fails with ErrUnknown
// before the manager is asked; a manager without the action fails with an
// error saying so.
func (d *Driver) InjectFault(f fabric.Fault) error {
	if err := d.checkFaultTarget(f); err != nil {
		return fmt.Errorf("inject %s on fabric %s: %w", f.Kind, d.fab.ID, err)
	}
	return d.action(injectAction, map[string]any{"Kind": string(f.Kind), "Target": f.Target, "Count": f.Count})
}

// ClearFaults clears every injected fault through the manager's
// #Rackpool.ClearFaults action. Failures are logged: the interface has no
// error to return.
func (d *Driver) ClearFaults() {
	if err := d.action(clearAction, map[string]any{}); err != nil {
		d.log.Error("clear faults", "err", err)
	}
}

// action posts body to the fabric's OEM action name.
func (d *Driver) action(name string, body any) error {
	target := d.actions[name]
	if target == "" {
		return fmt.Errorf("fabric %s: %s is not supported by this manager (%s advertises no such action)", d.fab.ID, strings.TrimPrefix(name, "#"), d.fabPath)
	}
	ctx, cancel := context.WithTimeout(context.Background(), d.timeout)
	defer cancel()
	var last error
	for attempt := 0; ; attempt++ {
		if attempt > 0 {
			if err := sleep(ctx, backoff(attempt), last); err != nil {
				return fmt.Errorf("fabric %s: %s: %w", d.fab.ID, name, err)
			}
		}
		r, err := d.c.do(ctx, http.MethodPost, target, body, nil)
		switch {
		case err != nil && ctx.Err() == nil && isTransient(err):
			last = err // arming a fault twice is harmless; try again
			continue
		case err != nil:
			return fmt.Errorf("fabric %s: %w", d.fab.ID, err)
		case rf.Busy(r.Status):
			last = statusError(r)
			continue
		case r.Status >= 300:
			return fmt.Errorf("fabric %s: %w", d.fab.ID, statusError(r))
		}
		return nil
	}
}

// checkFaultTarget refuses targets that are not part of the fabric (see
// fabric.FaultKind for what each kind takes).
func (d *Driver) checkFaultTarget(f fabric.Fault) error {
	isDevice := func(id string) bool {
		dev := d.top.Device(id)
		return dev != nil && dev.Fabric == d.fab
	}
	isHost := func(id string) bool {
		for _, p := range d.fab.Ports {
			if p.Host.ID == id {
				return true
			}
		}
		return false
	}
	isPort := func(name string) bool {
		for _, p := range d.fab.Ports {
			if portName(p.Host.ID, p.ID) == name {
				return true
			}
		}
		return false
	}
	ok := true
	switch f.Kind {
	case fabric.AttachFails:
		ok = f.Target == "" || isDevice(f.Target)
	case fabric.DeviceFails:
		ok = isDevice(f.Target)
	case fabric.PortFails:
		ok = isPort(f.Target)
	case fabric.HostFails:
		ok = isHost(f.Target)
	case fabric.ReleaseStalls:
		ok = f.Target == "" || isHost(f.Target) || isPort(f.Target)
	}
	if !ok {
		return fmt.Errorf("target %q: %w", f.Target, fabric.ErrUnknown)
	}
	return nil
}
