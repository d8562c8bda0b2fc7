package composition

import (
	"slices"
	"testing"

	"rackpool/examples"
	"rackpool/internal/inventory"
	"rackpool/internal/topology"
)

// TestZoneBlocks: a host's zone holds exactly the blocks topology.Path
// finds a way to from the host, in topology order, on the example rack,
// generated racks, the CXL rack and the MONet pod (a memory block every
// CPU card reaches on three planes).
func TestZoneBlocks(t *testing.T) {
	tops := []*topology.Topology{topology.LoadDefault()}
	for name, data := range map[string][]byte{"generated": topology.GenerateRacks(3), "cxl-rack.yaml": examples.CXLRack, "monet-pod.yaml": examples.MONetPod} {
		top, err := topology.Parse(name, data)
		if err != nil {
			t.Fatal(err)
		}
		tops = append(tops, top)
	}
	for _, top := range tops {
		s := &Service{top: top}
		for _, h := range top.Hosts {
			var want []*inventory.Block
			for _, b := range top.Blocks {
				if _, ok := top.Path(h, b); ok {
					want = append(want, b)
				}
			}
			if got := s.zoneBlocks(h); !slices.Equal(got, want) {
				t.Fatalf("%s: host %s's zone: %d blocks, want %d", top.Name, h.ID, len(got), len(want))
			}
		}
	}
}
