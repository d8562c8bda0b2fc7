package schedule_test

import (
	"context"
	"errors"
	"maps"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"

	"rackpool/internal/inventory"
	"rackpool/internal/schedule"
	"rackpool/internal/sim"
	"rackpool/internal/topology"
	"rackpool/internal/units"
)

// smallMONet builds a MONet pod of 8 trays of 24 cards over 2 planes.
func smallMONet(t *testing.T) *topology.Topology {
	t.Helper()
	c := sim.Defaults()
	c.Architecture, c.Network, c.Trays, c.CardsPerTray, c.Planes = sim.PodPools, "monet", 8, 24, 2
	c.CardCores, c.MemoryNodeGB, c.MemoryBlockGB = 4, 16, 4
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	top, err := sim.Build(&c)
	if err != nil {
		t.Fatal(err)
	}
	return top
}

// fill places n requests from ask on st, committing each plan, and
// returns the plans and how many were refused.
func fill(t *testing.T, s *schedule.Scheduler, st *schedule.State, n int, ask func() schedule.Request) ([]*schedule.Plan, int) {
	t.Helper()
	var plans []*schedule.Plan
	refused := 0
	for range n {
		p, err := s.Place(st, ask())
		if err != nil {
			t.Fatal(err)
		}
		if p == nil {
			refused++
			continue
		}
		st.Commit(p)
		plans = append(plans, p)
	}
	return plans, refused
}

// TestBulkExplainSameReasons: on a MONet pod filled until it refuses, the
// explanation of a refusal on each host counts the same reasons, block
// for block, whether the nodes behind the host's busy optical ports are
// counted from the memory index's sums or visited one by one.
func TestBulkExplainSameReasons(t *testing.T) {
	top := smallMONet(t)
	s := schedule.New(top)
	st := schedule.NewState(top)
	rng := rand.New(rand.NewPCG(5, 6))
	ask := func() schedule.Request {
		return schedule.Request{Share: schedule.Share{Cores: 1},
			Needs: []schedule.Need{{Kind: inventory.Memory, CapacityBytes: int64(4+4*rng.IntN(3)) * units.GiB}}}
	}
	// Fill the pod until it refuses, then let a third of the requests go:
	// memory frees on nodes other hosts' ports are circuited to.
	plans, refused := fill(t, s, st, 4000, ask)
	if refused == 0 {
		t.Fatal("the pod never refused: the test needs a fuller pod")
	}
	for _, p := range plans {
		if rng.IntN(3) == 0 {
			st.Uncommit(p)
		}
	}
	explain := func(req schedule.Request) []schedule.Rejection {
		_, err := s.Schedule(st, req)
		var u *schedule.Unsatisfiable
		if !errors.As(err, &u) {
			t.Fatalf("Schedule on %s: %v", req.Host, err)
		}
		return u.Rejections
	}
	portBusy := 0
	for _, h := range top.Hosts {
		req := ask()
		req.Host = h.ID
		if p, _ := s.Place(st, req); p != nil {
			continue // this host takes it
		}
		*schedule.BulkExplain = true
		fast := explain(req)
		*schedule.BulkExplain = false
		slow := explain(req)
		*schedule.BulkExplain = true
		if !reflect.DeepEqual(fast, slow) {
			t.Fatalf("host %s: sums %+v\nvisits %+v", h.ID, fast, slow)
		}
		for _, r := range fast {
			if strings.Contains(r.Detail, string(schedule.PortBusy)) {
				portBusy++
			}
		}
		if h.Index%32 == 0 {
			t.Logf("%s: %+v", h.ID, fast)
		}
	}
	if portBusy == 0 {
		t.Fatal("no explanation counted port-busy: countClosed was not exercised")
	}
	t.Logf("%d refused while filling; port-busy counted %d times over %d hosts", refused, portBusy, len(top.Hosts))
}

// TestBoundsFollowState: on a MONet pod filled until it refuses, drained
// by a third and filled again, round after round, the fit index's memory
// bounds (updated change by change) equal what the state gives when they
// are recomputed from scratch.
func TestBoundsFollowState(t *testing.T) {
	top := smallMONet(t)
	s := schedule.New(top)
	st := schedule.NewState(top)
	if err := schedule.CheckBounds(st); err != nil {
		t.Fatalf("empty pod: %v", err)
	}
	rng := rand.New(rand.NewPCG(7, 8))
	var plans []*schedule.Plan
	refused := 0
	for round := range 6 {
		more, no := fill(t, s, st, 1500, func() schedule.Request {
			return schedule.Request{Share: schedule.Share{Cores: 1},
				Needs: []schedule.Need{{Kind: inventory.Memory, CapacityBytes: int64(4+4*rng.IntN(4)) * units.GiB}}}
		})
		plans, refused = append(plans, more...), refused+no
		if err := schedule.CheckBounds(st); err != nil {
			t.Fatalf("round %d, filled: %v", round, err)
		}
		rng.Shuffle(len(plans), func(i, j int) { plans[i], plans[j] = plans[j], plans[i] })
		n := len(plans) / 3
		for _, p := range plans[:n] {
			st.Uncommit(p)
		}
		plans = plans[n:]
		if err := schedule.CheckBounds(st); err != nil {
			t.Fatalf("round %d, drained: %v", round, err)
		}
	}
	if refused == 0 {
		t.Fatal("the pod never refused: the test needs a fuller pod")
	}
}

// TestPruneByMemorySamePlans: a MONet pod driven past saturation by P4's
// workload (holding times growing) places every request on the same host
// with the same blocks whether or not the host search skips the hosts that
// could not obtain the memory asked for: on the fit index (hosts whose
// ports are taken) and by reach (memory within the round trip used up).
func TestPruneByMemorySamePlans(t *testing.T) {
	c := sim.Defaults()
	c.Architecture, c.Network, c.Trays, c.CardsPerTray, c.Planes = sim.PodPools, "monet", 8, 24, 2
	c.CardCores, c.MemoryNodeGB, c.MemoryBlockGB = 4, 16, 4
	c.Workload.Kind, c.Workload.Requests, c.Workload.Load, c.Workload.HoldStep = "monet", 20000, 1, 360
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	run := func(prune bool) *sim.Result {
		*schedule.PruneByMemory, *schedule.PruneByReach = prune, prune
		defer func() { *schedule.PruneByMemory, *schedule.PruneByReach = true, true }()
		r, err := sim.Run(context.Background(), c, nil)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	fast, slow := run(true), run(false)
	if fast.Summary.Rejected == 0 || fast.Summary.Accepted == 0 {
		t.Fatalf("%d accepted, %d rejected: the test needs both", fast.Summary.Accepted, fast.Summary.Rejected)
	}
	if !slices.Equal(fast.AcceptedIDs, slow.AcceptedIDs) || fast.Summary.RTTMeanNS != slow.Summary.RTTMeanNS ||
		!maps.Equal(fast.Summary.Rejections, slow.Summary.Rejections) {
		t.Fatalf("pruned: %d accepted, rtt %v, %v\nwalked: %d accepted, rtt %v, %v", fast.Summary.Accepted, fast.Summary.RTTMeanNS,
			fast.Summary.Rejections, slow.Summary.Accepted, slow.Summary.RTTMeanNS, slow.Summary.Rejections)
	}
	t.Logf("%d accepted, %d rejected (%v)", fast.Summary.Accepted, fast.Summary.Rejected, fast.Summary.Rejections)
}
