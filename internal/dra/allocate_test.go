package dra

import (
	"context"
	"fmt"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/dynamic-resource-allocation/cel"
	"k8s.io/dynamic-resource-allocation/structured"

	"rackpool/internal/inventory"
	"rackpool/internal/topology"
)

// classes are the DeviceClasses of the tests, by kind: a CEL selector on
// the driver and its kind attribute, as docs will give them.
type classes map[string]*resourceapi.DeviceClass

func (c classes) List() ([]*resourceapi.DeviceClass, error) {
	var out []*resourceapi.DeviceClass
	for _, dc := range c {
		out = append(out, dc)
	}
	return out, nil
}

func (c classes) Get(name string) (*resourceapi.DeviceClass, error) {
	if dc := c[name]; dc != nil {
		return dc, nil
	}
	return nil, fmt.Errorf("no device class %s", name)
}

func deviceClasses(kinds ...string) classes {
	out := classes{}
	for _, k := range kinds {
		name := k + "." + DriverName
		out[name] = &resourceapi.DeviceClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: resourceapi.DeviceClassSpec{
			Selectors: []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{
				Expression: fmt.Sprintf(`device.driver == %q && device.attributes[%q].kind == %q`, DriverName, DriverName, k)}}},
		}}
	}
	return out
}

// slicesOf puts the pools into ResourceSlices as the controller will: per
// device node selection, at most 64 devices a slice.
func slicesOf(pools map[string][]resourceapi.Device) []*resourceapi.ResourceSlice {
	var out []*resourceapi.ResourceSlice
	for pool, devs := range pools {
		chunks := slices.Collect(slices.Chunk(devs, 64))
		for i, chunk := range chunks {
			out = append(out, &resourceapi.ResourceSlice{
				ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-%s-%d", DriverName, pool, i)},
				Spec: resourceapi.ResourceSliceSpec{Driver: DriverName, Pool: resourceapi.ResourcePool{Name: pool, Generation: 1, ResourceSliceCount: int64(len(chunks))},
					PerDeviceNodeSelection: ptr(true), Devices: chunk},
			})
		}
	}
	return out
}

func node(host string) *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-" + host, Labels: map[string]string{HostLabel: host}}}
}

func claim(name string, constraints []resourceapi.DeviceConstraint, reqs ...resourceapi.DeviceRequest) *resourceapi.ResourceClaim {
	return &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID("uid-" + name)},
		Spec: resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{Requests: reqs, Constraints: constraints}}}
}

func request(name, kind string, count int64) resourceapi.DeviceRequest {
	return resourceapi.DeviceRequest{Name: name, Exactly: &resourceapi.ExactDeviceRequest{DeviceClassName: kind + "." + DriverName,
		AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: count}}
}

// TestSchedulerAllocates runs Kubernetes' own structured allocator (the
// scheduler's) over the published slices: a node gets only devices its
// rackpool host reaches, two GPUs on one drawer come from one drawer, and
// each allocation carries BindsToNode's node selector and the binding
// conditions the controller must satisfy.
func TestSchedulerAllocates(t *testing.T) {
	top := topology.LoadDefault()
	held := map[string]bool{}
	pools := Devices(top, func(b *inventory.Block) bool { return !held[b.ID] })
	ctx := context.Background()
	features := structured.Features{PartitionableDevices: true, DeviceBindingAndStatus: true}
	alloc, err := structured.NewAllocator(ctx, features, structured.AllocatedState{AllocatedDevices: sets.New[structured.DeviceID]()},
		deviceClasses("gpu", "nvme", "memory"), slicesOf(pools), cel.NewCache(10, cel.Features{}))
	if err != nil {
		t.Fatal(err)
	}
	drawer := DriverName + "/drawer"
	for _, host := range []string{"host1", "host3"} {
		for _, tc := range []struct {
			name  string
			claim *resourceapi.ResourceClaim
			n     int
		}{
			{"one GPU", claim("gpu", nil, request("gpu", "gpu", 1)), 1},
			{"two GPUs on one drawer", claim("gpus", []resourceapi.DeviceConstraint{{Requests: []string{"gpus"}, MatchAttribute: (*resourceapi.FullyQualifiedName)(&drawer)}},
				request("gpus", "gpu", 2)), 2},
			{"an NVMe drive", claim("nvme", nil, request("nvme", "nvme", 1)), 1},
			{"pooled memory", claim("mem", nil, request("mem", "memory", 1)), 1},
		} {
			results, err := alloc.Allocate(ctx, node(host), []*resourceapi.ResourceClaim{tc.claim})
			if err != nil || len(results) != 1 {
				t.Fatalf("%s for %s: %v, %d results", tc.name, host, err, len(results))
			}
			r := results[0]
			if len(r.Devices.Results) != tc.n {
				t.Fatalf("%s for %s: %d devices, want %d", tc.name, host, len(r.Devices.Results), tc.n)
			}
			var drawers []string
			for _, d := range r.Devices.Results {
				b := blockOf(t, top, pools, d.Pool, d.Device)
				if _, ok := top.Path(top.Inventory.Host(host), b); !ok {
					t.Errorf("%s for %s: %s, which %s cannot reach", tc.name, host, b.ID, host)
				}
				if !slices.Equal(d.BindingConditions, []string{ConditionAttached}) || !slices.Equal(d.BindingFailureConditions, []string{ConditionAttachFailed}) {
					t.Errorf("%s: allocation of %s carries conditions %v / %v", tc.name, b.ID, d.BindingConditions, d.BindingFailureConditions)
				}
				if b.Device.Drawer != nil {
					drawers = append(drawers, b.Device.Drawer.ID)
				}
			}
			if tc.n == 2 && (len(drawers) != 2 || drawers[0] != drawers[1]) {
				t.Errorf("two GPUs on one drawer for %s: drawers %v", host, drawers)
			}
			// BindsToNode: the allocation is for this node alone.
			if r.NodeSelector == nil || len(r.NodeSelector.NodeSelectorTerms) != 1 {
				t.Errorf("%s for %s: allocation node selector %+v", tc.name, host, r.NodeSelector)
			}
		}
	}
	// A node whose host reaches no GPU gets none: the rack's hosts all
	// reach the drawers, so a node of no rackpool host stands for it.
	if results, _ := alloc.Allocate(ctx, node("nowhere"), []*resourceapi.ResourceClaim{claim("gpu", nil, request("gpu", "gpu", 1))}); len(results) != 0 {
		t.Errorf("a node of no rackpool host was given %+v", results)
	}
}

// blockOf is the block of device name in pool.
func blockOf(t *testing.T, top *topology.Topology, pools map[string][]resourceapi.Device, pool, name string) *inventory.Block {
	t.Helper()
	for _, d := range pools[pool] {
		if d.Name == name {
			return top.Block(*d.Attributes["block"].StringValue)
		}
	}
	t.Fatalf("no device %s in pool %s", name, pool)
	return nil
}
