// Package schedule is rackpool's one placement engine. It is pure: it reads
// a topology and an allocation State and returns a Plan, or the named reason
// every candidate was rejected. The live control plane and the simulator
// both call it.
//
// The pipeline for one request, in the order the checks run (cheapest
// first, as in Nomad's generic stack):
//
//	candidate hosts: the named one; else the policy's order over the
//	hosts with enough free cores and memory (fitIndex, a segment tree)
//	  → host checks (hostChecks): in use, share too big, full, cores,
//	    local memory, zone
//	  → specific blocks (blockChecks): kind, zone, reachable, affinity,
//	    free / optical port / drawer host limit
//	  → for each need: candidate blocks in the host's latency order
//	      (reach: per host, built on first use)
//	      → kind, model, attributes, capacity (static)
//	      → latency bound (static; candidates come by round trip, so the
//	        walk stops at the first class beyond it)
//	      → free, optical port, drawer host limit (dynamic)
//	  → affinity (same drawer / same switch)
//	  → rank feasible hosts: lowest total round trip, fewest hops,
//	    least fragmentation (fewest distinct drawers, switches and memory
//	    nodes touched), then host order
//
// A decision touches what it uses, not the datacenter:
//
//   - Hosts come from the fit index in the policy's order, so hosts without
//     room are never visited. The locality policy ranks at most Limit
//     feasible hosts and stops at the first plan nothing can beat (its
//     round trip, hops and groups equal a lower bound computed from the
//     topology and the state).
//   - Memory comes in round-trip classes (reach.mem): a host's memory nodes
//     grouped by the round trip it sees to them, each class a few ranges of
//     memory nodes (all of a tray's nodes on one plane are one range; all
//     other trays of the plane, two). Within a class, nodes come by fewest
//     free blocks first (best fit) from memIndex, a segment tree over the
//     memory nodes that keeps which free-block counts occur below each
//     node, updated as blocks are taken and released. Nodes already
//     circuited to the host come first. Full nodes are never visited to
//     place; an explanation counts them in bulk.
//   - Switch distances are compressed by twin classes in package topology,
//     so a 4,096-tray plane keeps one row of distances, not 4,096.
//
// Every rejected candidate carries a Reason, so a caller can explain why a
// request does not fit (see Unsatisfiable). The exhaustive engine the
// indexes replaced is kept in the tests (refengine_test.go) and the
// randomized tests check that both make the same decision, and give the same
// explanation, on every step.
package schedule
