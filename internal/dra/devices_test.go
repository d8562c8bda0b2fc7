package dra

import (
	"slices"
	"testing"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	"rackpool/internal/inventory"
	"rackpool/internal/topology"
)

// TestDevices publishes the example rack's free blocks: a pool per fabric,
// each device with the nodes of exactly the hosts the topology lets reach
// it, its attributes and capacity, BindsToNode and the binding
// conditions; a held block is not offered.
func TestDevices(t *testing.T) {
	top := topology.LoadDefault()
	held := map[string]bool{"gpu2": true}
	pools := Devices(top, func(b *inventory.Block) bool { return !held[b.ID] })

	byName := map[string]bool{}
	n := 0
	for pool, devs := range pools {
		if top.Inventory.Fabric(pool) == nil {
			t.Errorf("pool %s is no fabric", pool)
		}
		for _, d := range devs {
			n++
			if errs := validation.IsDNS1123Label(d.Name); len(errs) > 0 {
				t.Errorf("device name %q: %v", d.Name, errs)
			}
			if byName[pool+"/"+d.Name] {
				t.Errorf("device %s twice in pool %s", d.Name, pool)
			}
			byName[pool+"/"+d.Name] = true
			if d.BindsToNode == nil || !*d.BindsToNode || !slices.Equal(d.BindingConditions, []string{ConditionAttached}) ||
				!slices.Equal(d.BindingFailureConditions, []string{ConditionAttachFailed}) {
				t.Errorf("%s: binding %v %v %v", d.Name, d.BindsToNode, d.BindingConditions, d.BindingFailureConditions)
			}
			b := top.Block(*d.Attributes["block"].StringValue)
			if b == nil || b.Device.Fabric.ID != pool {
				t.Fatalf("%s names block %v", d.Name, d.Attributes["block"])
			}
			// The node selector names exactly the hosts one of whose
			// ports reaches the device.
			var want []string
			for _, h := range top.Inventory.Hosts {
				if slices.ContainsFunc(h.Ports, func(p *inventory.HostPort) bool { return top.Reaches(p, b.Device) }) {
					want = append(want, h.ID)
				}
			}
			terms := d.NodeSelector.NodeSelectorTerms
			if len(terms) != 1 || len(terms[0].MatchExpressions) != 1 || terms[0].MatchExpressions[0].Key != HostLabel ||
				!slices.Equal(terms[0].MatchExpressions[0].Values, want) {
				t.Errorf("%s: node selector %+v, want hosts %v", d.Name, terms, want)
			}
			if size := d.Capacity["size"].Value; b.CapacityBytes > 0 && size.Value() != b.CapacityBytes {
				t.Errorf("%s: size %v, block %d", d.Name, d.Capacity["size"].Value, b.CapacityBytes)
			}
			if len(d.Attributes)+len(d.Capacity) > 32 {
				t.Errorf("%s: %d attributes and capacities, the API allows 32", d.Name, len(d.Attributes)+len(d.Capacity))
			}
		}
	}
	// Every free pooled block is offered once; gpu2 is held, NICs are not
	// pooled devices.
	want := 0
	for _, b := range top.Inventory.Blocks {
		if b.Device != nil && pooled[b.Kind] && !held[b.ID] {
			want++
		}
	}
	if n != want || n == 0 {
		t.Errorf("%d devices, want %d", n, want)
	}
	if byName["falcon1/gpu2"] || !byName["falcon1/gpu1"] {
		t.Errorf("gpu1 offered %v, gpu2 (held) offered %v", byName["falcon1/gpu1"], byName["falcon1/gpu2"])
	}
	gpu1 := pools["falcon1"][slices.IndexFunc(pools["falcon1"], func(d resourceapi.Device) bool { return d.Name == "gpu1" })]
	if *gpu1.Attributes["model"].StringValue != "V100" || *gpu1.Attributes["kind"].StringValue != "gpu" ||
		*gpu1.Attributes["pciVendorId"].StringValue != "0x10de" || *gpu1.Attributes["drawer"].StringValue != "falcon1-drawer1" {
		t.Errorf("gpu1's attributes: %v", gpu1.Attributes)
	}
	hdd1 := pools["sas1"][slices.IndexFunc(pools["sas1"], func(d resourceapi.Device) bool { return d.Name == "hdd1" })]
	size := hdd1.Capacity["size"].Value
	if *hdd1.Attributes["switch"].StringValue != "sas1-sas-sw1" || *hdd1.Attributes["kind"].StringValue != "hdd" || size.Value() != 10_000_000_000_000 {
		t.Errorf("hdd1's attributes: %v, capacity %v", hdd1.Attributes, hdd1.Capacity)
	}
}

func TestDeviceName(t *testing.T) {
	for id, want := range map[string]string{"gpu1": "gpu1", "memnode1-b01": "memnode1-b01"} {
		if got := deviceName(id); got != want {
			t.Errorf("deviceName(%q) = %q, want %q", id, got, want)
		}
	}
	seen := map[string]string{}
	for _, id := range []string{"Tray1-SAS", "tray1-sas", "tray1_sas", "_", "a.b", string(make([]byte, 100)) + "x", "x" + string(make([]byte, 70))} {
		got := deviceName(id)
		if errs := validation.IsDNS1123Label(got); len(errs) > 0 {
			t.Errorf("deviceName(%q) = %q: %v", id, got, errs)
		}
		if prev, dup := seen[got]; dup {
			t.Errorf("%q and %q both name %q", prev, id, got)
		}
		seen[got] = id
	}
}
