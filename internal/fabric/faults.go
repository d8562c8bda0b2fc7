package fabric

import (
	"fmt"
	"slices"
)

// Faults is the armed state of the four fault kinds every FaultInjector
// takes (AttachFails, DeviceFails, PortFails, HostFails): which devices,
// host ports and hosts have failed, and the attach failures still to fire.
// Drivers keep one and guard it with their own lock; the zero value has
// nothing armed.
type Faults struct {
	attach  []*armedAttach
	devices map[string]bool
	ports   map[string]bool // "host/port"
	hosts   map[string]bool
}

type armedAttach struct {
	target string // device ID, or "" for any
	left   int
}

// Targets says what a fabric has, so that Arm refuses a fault aimed at
// something else: a device ID, a host port as "host/port", a host with a
// port into the fabric.
type Targets struct {
	Device, Port, Host func(id string) bool
}

// PortName is a host port's name in faults and Health: "host/port".
func PortName(host, port string) string { return host + "/" + port }

// Arm records f after checking its target against t (an unknown one wraps
// ErrUnknown). It reports false, changing nothing, for a kind that is not
// one of the four, which the driver may take itself. AttachFails with
// Count 0 fails one attach.
func (fs *Faults) Arm(f Fault, t Targets) (bool, error) {
	var set *map[string]bool
	switch f.Kind {
	case AttachFails:
		if f.Target != "" && !t.Device(f.Target) {
			return true, fmt.Errorf("inject %s: device %q: %w", f.Kind, f.Target, ErrUnknown)
		}
		fs.attach = append(fs.attach, &armedAttach{target: f.Target, left: max(f.Count, 1)})
		return true, nil
	case DeviceFails:
		if !t.Device(f.Target) {
			return true, fmt.Errorf("inject %s: device %q: %w", f.Kind, f.Target, ErrUnknown)
		}
		set = &fs.devices
	case PortFails:
		if !t.Port(f.Target) {
			return true, fmt.Errorf("inject %s: host port %q: %w", f.Kind, f.Target, ErrUnknown)
		}
		set = &fs.ports
	case HostFails:
		if !t.Host(f.Target) {
			return true, fmt.Errorf("inject %s: host %q: %w", f.Kind, f.Target, ErrUnknown)
		}
		set = &fs.hosts
	default:
		return false, nil
	}
	if *set == nil {
		*set = map[string]bool{}
	}
	(*set)[f.Target] = true
	return true, nil
}

// Clear disarms everything.
func (fs *Faults) Clear() { *fs = Faults{} }

// DeviceFailed reports whether device id has failed.
func (fs *Faults) DeviceFailed(id string) bool { return fs.devices[id] }

// HostFailed reports whether host id has failed.
func (fs *Faults) HostFailed(id string) bool { return fs.hosts[id] }

// PortFailed reports whether the host port itself has failed (its host
// failing is HostFailed).
func (fs *Faults) PortFailed(host, port string) bool { return fs.ports[PortName(host, port)] }

// PortDown reports whether the host port cannot carry anything: it or its
// host has failed.
func (fs *Faults) PortDown(host, port string) bool {
	return fs.PortFailed(host, port) || fs.hosts[host]
}

// Failed returns an error wrapping ErrFailed when the device, the host or
// the host port of an attachment has failed.
func (fs *Faults) Failed(device, host, port string) error {
	switch {
	case fs.devices[device]:
		return fmt.Errorf("device %s: %w", device, ErrFailed)
	case fs.hosts[host]:
		return fmt.Errorf("host %s: %w", host, ErrFailed)
	case fs.PortFailed(host, port):
		return fmt.Errorf("host port %s: %w", PortName(host, port), ErrFailed)
	}
	return nil
}

// FireAttach consumes one armed AttachFails fault matching device and
// reports whether one fired.
func (fs *Faults) FireAttach(device string) bool {
	for i, af := range fs.attach {
		if af.target == "" || af.target == device {
			af.left--
			if af.left <= 0 {
				fs.attach = slices.Delete(fs.attach, i, i+1)
			}
			return true
		}
	}
	return false
}
