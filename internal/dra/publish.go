package dra

import (
	"slices"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/dynamic-resource-allocation/resourceslice"
)

// maxSliceDevices is how many devices one ResourceSlice holds: the API's
// limit is 128, or 64 when a device consumes counters or has taints; 64
// keeps every slice valid whichever the devices use.
const maxSliceDevices = 64

// Resources is what the resourceslice controller publishes for pools: a
// pool per fabric, its devices in slices of at most maxSliceDevices with
// per-device node selection (every device says which nodes may have it),
// and an empty slice for a pool with no free device left, so that
// allocators see the pool shrink to nothing rather than vanish.
func Resources(pools map[string][]resourceapi.Device) *resourceslice.DriverResources {
	out := &resourceslice.DriverResources{Pools: map[string]resourceslice.Pool{}}
	for name, devs := range pools {
		var p resourceslice.Pool
		for chunk := range slices.Chunk(devs, maxSliceDevices) {
			p.Slices = append(p.Slices, resourceslice.Slice{PerDeviceNodeSelection: ptr(true), Devices: chunk})
		}
		if len(p.Slices) == 0 {
			p.Slices = []resourceslice.Slice{{PerDeviceNodeSelection: ptr(true)}}
		}
		out.Pools[name] = p
	}
	return out
}
