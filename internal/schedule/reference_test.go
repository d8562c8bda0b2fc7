package schedule

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"testing"

	"rackpool/examples"
	"rackpool/internal/inventory"
	"rackpool/internal/topology"
	"rackpool/internal/units"
)

// refTopologies are the small pods the indexed engine is checked on: the
// example rack (drawers, every kind, 64-block memory nodes), the MONet
// pod, generated racks, MONet, fat-tree and rack-pool layouts written by
// rackpool sim, and a mixed one (linked switches, lengths and overheads
// that differ within a switch, memory on PCIe, nodes above 63 blocks).
func refTopologies(t *testing.T) map[string]*topology.Topology {
	t.Helper()
	srcs := map[string][]byte{"rack": examples.Rack, "monet-pod": examples.MONetPod, "racks": topology.GenerateRacks(2)}
	for _, f := range []string{"monet-6x3", "fat-tree-9", "rack-pools-3", "mixed"} {
		b, err := os.ReadFile("testdata/" + f + ".yaml")
		if err != nil {
			t.Fatal(err)
		}
		srcs[f] = b
	}
	out := map[string]*topology.Topology{}
	for name, src := range srcs {
		top, err := topology.Parse(name, src)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		out[name] = top
	}
	return out
}

// randomRequest draws a request of the shapes callers send: shares of a
// CPU card with pooled memory (the simulator), whole hosts with devices
// (the control plane), specific blocks, filters, zones and affinity.
func randomRequest(rng *rand.Rand, top *topology.Topology) Request {
	var req Request
	pick := func(xs ...string) string { return xs[rng.IntN(len(xs))] }
	if rng.IntN(3) > 0 {
		req.Share = Share{Cores: 1 + rng.IntN(4), MemoryGiB: rng.IntN(2)}
	} else if rng.IntN(3) == 0 {
		req.MinCores = 4 * rng.IntN(3)
	}
	if rng.IntN(5) > 0 {
		n := Need{Kind: inventory.Memory, CapacityBytes: int64(1+rng.IntN(16)) * units.GiB}
		switch rng.IntN(6) {
		case 0:
			n.MaxLatencyNS = -1
		case 1, 2:
			n.MaxLatencyNS = float64(80 + rng.IntN(520))
		}
		if rng.IntN(8) == 0 {
			n.Model = pick("DDR4", "DDR5", "DDR4-3200")
		}
		if rng.IntN(12) == 0 {
			n.Attrs = map[string]string{"ecc": "yes"}
		}
		if rng.IntN(10) == 0 {
			n.Exact = true
		}
		if rng.IntN(10) == 0 {
			n.CapacityBytes, n.Count = 0, 1+rng.IntN(3)
		}
		req.Needs = append(req.Needs, n)
	}
	if rng.IntN(4) == 0 {
		n := Need{Kind: inventory.Kind(pick("gpu", "nvme", "hdd", "ssd", "nic", "fpga")), Count: 1 + rng.IntN(2)}
		if rng.IntN(5) == 0 {
			n.Model = pick("V100", "A100", "PM1733")
		}
		req.Needs = append(req.Needs, n)
	}
	if rng.IntN(8) == 0 && len(req.Needs) > 0 {
		// A second memory need: two needs may share memory nodes.
		req.Needs = append(req.Needs, Need{Kind: inventory.Memory, CapacityBytes: int64(1+rng.IntN(8)) * units.GiB})
	}
	if rng.IntN(10) == 0 {
		var dev []*inventory.Block
		for _, b := range top.Blocks {
			if b.Device != nil {
				dev = append(dev, b)
			}
		}
		if len(dev) > 0 {
			req.Blocks = append(req.Blocks, dev[rng.IntN(len(dev))].ID)
		}
	}
	if rng.IntN(25) == 0 {
		// A host's own compute block, named among the blocks.
		req.Blocks = append(req.Blocks, top.Hosts[rng.IntN(len(top.Hosts))].Block.ID)
	}
	if rng.IntN(8) == 0 {
		req.Affinity = Affinity(pick(string(SameDrawer), string(SameSwitch)))
	}
	if rng.IntN(10) == 0 && len(top.Zones) > 0 {
		req.Zone = top.Zones[0].ID
	}
	if rng.IntN(12) == 0 {
		req.Host = top.Hosts[rng.IntN(len(top.Hosts))].ID
	}
	if len(req.Needs)+len(req.Blocks) == 0 && req.Share.IsZero() {
		req.Share = Share{Cores: 1}
	}
	return req
}

// TestIndexedMatchesExhaustive places random requests, and releases random
// placed ones, on every reference topology under every policy, and checks
// that the indexed engine and the exhaustive reference agree on every
// decision: the same plan (host, blocks, ports, latencies), and on a
// sample of failures the same explanation.
func TestIndexedMatchesExhaustive(t *testing.T) {
	steps := 3000
	if testing.Short() {
		steps = 600
	}
	for name, top := range refTopologies(t) {
		for _, pol := range Policies {
			t.Run(name+"/"+string(pol), func(t *testing.T) {
				rng := rand.New(rand.NewPCG(uint64(len(name)), uint64(len(pol))))
				fast, ref := New(top), newRef(top)
				fast.Policy, ref.Policy = pol, pol
				if rng.IntN(2) == 0 {
					fast.Limit, ref.Limit = 3, 3
				}
				st := NewState(top)
				var live []*Plan
				for step := range steps {
					if len(live) > 0 && rng.IntN(3) == 0 {
						k := rng.IntN(len(live))
						st.Uncommit(live[k])
						live = append(live[:k], live[k+1:]...)
						continue
					}
					req := randomRequest(rng, top)
					got, gerr := fast.Place(st, req)
					want, werr := ref.Place(st, req)
					if fmt.Sprint(gerr) != fmt.Sprint(werr) {
						t.Fatalf("step %d %+v: error %v, reference %v", step, req, gerr, werr)
					}
					if g, w := describePlan(got), describePlan(want); g != w {
						t.Fatalf("step %d %+v:\nindexed:   %s\nreference: %s", step, req, g, w)
					}
					if got == nil && werr == nil && step%7 == 0 {
						_, gerr := fast.Schedule(st, req)
						_, werr := ref.Schedule(st, req)
						var gu, wu *Unsatisfiable
						if !errors.As(gerr, &gu) || !errors.As(werr, &wu) {
							t.Fatalf("step %d: Schedule errors %v / %v", step, gerr, werr)
						}
						if g, w := render(nil, gerr), render(nil, werr); g != w {
							t.Fatalf("step %d %+v: explanation differs:\nindexed:\n%s\nreference:\n%s", step, req, g, w)
						}
						counts, err := fast.Reasons(st, req)
						want := map[Reason]int{}
						for _, r := range wu.Rejections {
							want[r.Reason]++
						}
						if err != nil || fmt.Sprint(counts) != fmt.Sprint(want) {
							t.Fatalf("step %d: Reasons = %v, %v; the explanation counts %v", step, counts, err, want)
						}
					}
					if got != nil {
						st.Commit(got)
						live = append(live, got)
					}
				}
			})
		}
	}
}

func describePlan(p *Plan) string {
	if p == nil {
		return "none"
	}
	return fmt.Sprintf("share=%+v %s", p.Share, render(p, nil))
}
