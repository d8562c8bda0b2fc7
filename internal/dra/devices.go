// Package dra is rackpool's Kubernetes Dynamic Resource Allocation driver,
// rackpool.io (docs/kubernetes.md): it publishes the pool, attaches what
// the scheduler allocates, and prepares it on the node.
//
// Devices turns the pool's free device blocks into DRA devices: one pool
// per fabric, every device with its own node selector (the Kubernetes
// nodes whose rackpool host the topology lets reach it), BindsToNode, and
// the binding conditions the controller sets once the device is composed
// onto the node's system (ConditionAttached) or could not be
// (ConditionAttachFailed). Follow keeps the published slices in step with
// rackpool's event stream; Attacher and RunAttacher compose on allocation
// and release after a grace period; NodePlugin is the kubelet plugin the
// host agent serves. Run is the controller, `rackpool dra`.
package dra

import (
	"fmt"
	"hash/fnv"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"rackpool/api"
	"rackpool/internal/inventory"
	"rackpool/internal/topology"
)

// The driver's names in Kubernetes.
const (
	// DriverName is the DRA driver's name, the domain of its attributes.
	DriverName = "rackpool.io"
	// HostLabel is the node label that names a node's rackpool host; a
	// device's node selector selects the nodes of the hosts that reach it.
	HostLabel = "rackpool.io/host"
	// ConditionAttached is set True in the claim's status.devices when the
	// device is composed onto the node's system: the pod may bind.
	ConditionAttached = "rackpool.io/Attached"
	// ConditionAttachFailed is set True when it could not be: the
	// scheduler puts the pod back and tries again.
	ConditionAttachFailed = "rackpool.io/AttachFailed"
	// TaintUnhealthy is the taint of a device rackpool reports failed
	// (health Critical): NoSchedule, so no new claim is given it.
	TaintUnhealthy = "rackpool.io/unhealthy"
)

// pooled are the kinds of block the driver publishes.
var pooled = map[inventory.Kind]bool{inventory.GPU: true, inventory.FPGA: true, inventory.NVMe: true,
	inventory.SSD: true, inventory.HDD: true, inventory.Memory: true}

// Devices returns the device blocks for which free is true as DRA devices,
// by pool (the fabric's Id), in block order. A block no host reaches is
// left out: no node could ever be given it.
func Devices(top *topology.Topology, free func(*inventory.Block) bool) map[string][]resourceapi.Device {
	out := map[string][]resourceapi.Device{}
	for _, b := range top.Inventory.Blocks {
		if b.Device == nil || !pooled[b.Kind] || !free(b) {
			continue
		}
		var hosts []string
		var nearest float64
		for _, h := range top.Inventory.Hosts {
			if p, ok := top.Path(h, b); ok {
				hosts = append(hosts, h.ID)
				if nearest == 0 || p.RTTNS < nearest {
					nearest = p.RTTNS
				}
			}
		}
		if len(hosts) == 0 {
			continue
		}
		f := b.Device.Fabric.ID
		out[f] = append(out[f], device(b, hosts, nearest))
	}
	return out
}

// device is block b as a DRA device reachable from hosts, nearest the
// lowest round trip of any of them.
func device(b *inventory.Block, hosts []string, nearest float64) resourceapi.Device {
	d := b.Device
	attrs := map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{
		"kind":         str(string(b.Kind)),
		"block":        str(b.ID),
		"fabric":       str(d.Fabric.ID),
		"fabricKind":   str(string(d.Fabric.Kind)),
		"roundTripNs":  {IntValue: ptr(int64(nearest + 0.5))},
		"latencyClass": str(latencyClass(nearest)),
	}
	for name, v := range map[resourceapi.QualifiedName]string{"model": b.Model, "vendor": d.Vendor, "pciVendorId": d.VendorID, "pciDeviceId": d.DeviceID} {
		if v != "" {
			attrs[name] = str(v)
		}
	}
	if d.Drawer != nil {
		attrs["drawer"] = str(d.Fabric.ID + "-" + d.Drawer.ID)
	}
	if d.Switch != nil { // a SAS drive's enclosure switch, a memory node's, a device's in a PCIe drawer
		attrs["switch"] = str(d.Fabric.ID + "-" + d.Switch.ID)
	}
	if d.Slot > 0 {
		attrs["slot"] = resourceapi.DeviceAttribute{IntValue: ptr(int64(d.Slot))}
	}
	dev := resourceapi.Device{
		Name:       deviceName(b.ID),
		Attributes: attrs,
		NodeSelector: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
			MatchExpressions: []corev1.NodeSelectorRequirement{{Key: HostLabel, Operator: corev1.NodeSelectorOpIn, Values: slices.Sorted(slices.Values(hosts))}},
		}}},
		BindsToNode:              ptr(true),
		BindingConditions:        []string{ConditionAttached},
		BindingFailureConditions: []string{ConditionAttachFailed},
	}
	if b.CapacityBytes > 0 {
		dev.Capacity = map[resourceapi.QualifiedName]resourceapi.DeviceCapacity{
			"size": {Value: *resource.NewQuantity(b.CapacityBytes, resource.BinarySI)},
		}
	}
	return dev
}

// latencyClass names a round trip as P0 Table 1's tiers do: a PCIe switch
// (under 1 µs), a rack's fabric (under 5 µs), beyond.
func latencyClass(ns float64) string {
	switch {
	case ns < 1000:
		return "switch"
	case ns < 5000:
		return "rack"
	}
	return "remote"
}

func str(s string) resourceapi.DeviceAttribute { return resourceapi.DeviceAttribute{StringValue: &s} }

func ptr[T any](v T) *T { return &v }

// deviceName is a block's device name: a DNS label (lowercase letters,
// digits and '-', at most 63). An ID that is one already is its name;
// another is folded into one and given a hash of the ID, so two IDs that
// fold alike stay apart.
func deviceName(id string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(id) {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-' {
			b.WriteRune(r)
		} else {
			b.WriteByte('-')
		}
	}
	name := strings.Trim(b.String(), "-")
	if name == id && len(name) <= 63 && name != "" {
		return name
	}
	h := fnv.New32a()
	h.Write([]byte(id))
	suffix := fmt.Sprintf("-%08x", h.Sum32())
	if len(name) > 63-len(suffix) {
		name = strings.TrimRight(name[:63-len(suffix)], "-")
	}
	if name == "" {
		name = "b"
	}
	return name + suffix
}

// HostDevice is how a host finds block b once it is attached (what the
// control plane gives a host agent's attach step): false for a block that
// is no device.
func HostDevice(b *inventory.Block) (api.HostDevice, bool) {
	if b == nil || b.Device == nil {
		return api.HostDevice{}, false
	}
	d := b.Device
	serial := d.Attrs["serial"]
	if serial == "" {
		serial = d.Attrs["wwn"]
	}
	return api.HostDevice{Block: b.ID, Device: d.ID, Kind: string(b.Kind), Fabric: string(d.Fabric.Kind),
		VendorID: d.VendorID, DeviceID: d.DeviceID, Serial: serial, Bytes: b.CapacityBytes}, true
}

// Taint marks the devices of failed blocks with TaintUnhealthy, effect
// NoSchedule: the allocator gives them to no claim that does not tolerate
// it, and the cluster shows why they are not used.
func Taint(pools map[string][]resourceapi.Device, failed map[string]bool) {
	for _, devs := range pools {
		for i := range devs {
			if b := devs[i].Attributes["block"].StringValue; b != nil && failed[*b] {
				devs[i].Taints = []resourceapi.DeviceTaint{{Key: TaintUnhealthy, Value: "Critical", Effect: resourceapi.DeviceTaintEffectNoSchedule}}
			}
		}
	}
}
