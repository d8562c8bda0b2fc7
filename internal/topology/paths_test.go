package topology

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"rackpool/examples"
	"rackpool/internal/inventory"
)

// TestTwinDistances checks the twin-compressed distances against a
// Dijkstra run from every switch, on the example files and on random
// two-tier fabrics full of twins and ties.
func TestTwinDistances(t *testing.T) {
	var fabrics []*inventory.Fabric
	for name, src := range map[string][]byte{"rack.yaml": examples.Rack, "monet-pod.yaml": examples.MONetPod, "racks": GenerateRacks(3)} {
		top, err := Parse(name, src)
		if err != nil {
			t.Fatal(err)
		}
		fabrics = append(fabrics, top.Fabrics...)
	}
	rng := rand.New(rand.NewPCG(7, 7))
	for range 200 {
		fabrics = append(fabrics, randomFabric(rng))
	}
	for fi, f := range fabrics {
		adj := adjacency(f)
		fd := twins(f, adj)
		fd.rows = map[int32][]hop{}
		for c, r := range fd.rep {
			fd.rows[int32(c)] = shortest(f, adj, int(r))
		}
		for src := range f.Switches {
			want := shortest(f, adj, src)
			for dst := range f.Switches {
				if got := fd.get(src, dst); got != want[dst] {
					t.Fatalf("fabric %d (%s): %s -> %s = %+v, Dijkstra says %+v", fi, f.ID, f.Switches[src].ID, f.Switches[dst].ID, got, want[dst])
				}
			}
		}
	}
}

// randomFabric is a two-tier fabric: leaves linked to random subsets of
// a few spines (equal subsets make twins), with a few lengths and
// latencies so that ties abound, sometimes a leaf-to-leaf link.
func randomFabric(rng *rand.Rand) *inventory.Fabric {
	f := &inventory.Fabric{ID: "random"}
	spines, leaves := 1+rng.IntN(4), 2+rng.IntN(12)
	for i := range spines + leaves {
		f.Switches = append(f.Switches, &inventory.Switch{Index: i, ID: fmt.Sprint("s", i), Fabric: f, LatencyNS: []float64{10, 25}[rng.IntN(2)]})
	}
	for l := spines; l < spines+leaves; l++ {
		for s := range spines {
			if rng.IntN(3) > 0 {
				f.Links = append(f.Links, &inventory.Link{A: f.Switches[l], B: f.Switches[s], Metres: []float64{1, 3}[rng.IntN(2)]})
			}
		}
		if rng.IntN(8) == 0 {
			f.Links = append(f.Links, &inventory.Link{A: f.Switches[l], B: f.Switches[spines+rng.IntN(leaves)], Metres: 1})
		}
	}
	return f
}

// TestReachable: a host's reachable blocks are exactly those Path finds a
// way to, in topology order, on the example rack, generated racks, the
// CXL rack and the MONet pod (a memory block every CPU card reaches on
// three planes).
func TestReachable(t *testing.T) {
	for name, src := range map[string][]byte{"rack.yaml": examples.Rack, "cxl-rack.yaml": examples.CXLRack,
		"monet-pod.yaml": examples.MONetPod, "racks": GenerateRacks(3)} {
		top, err := Parse(name, src)
		if err != nil {
			t.Fatal(err)
		}
		for _, h := range top.Hosts {
			var want []*inventory.Block
			for _, b := range top.Blocks {
				if _, ok := top.Path(h, b); ok {
					want = append(want, b)
				}
			}
			if got := top.Reachable(h); !slices.Equal(got, want) {
				t.Fatalf("%s: host %s reaches %d blocks, want %d", name, h.ID, len(got), len(want))
			}
		}
	}
}
