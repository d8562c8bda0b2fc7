// Package sim is rackpool's datacenter simulator: a discrete-event engine
// with a virtual clock that places every request with the live control
// plane's scheduler (schedule.Scheduler.Place on a schedule.State) on a
// topology loaded by package topology, exactly as `rackpool serve` would.
//
// A run (Run) builds the topology of its architecture (Build: traditional
// servers, rack-scale pools, or a PoD over MONet's parallel optical planes
// or a non-parallel fat tree), produces its workload (the MONet generator,
// a CSV trace, or P0's time-varying Giraph demand), replays it in virtual
// time (departures before arrivals at the same instant) and measures
// acceptance, utilisation over time, hops and round trips, switch power,
// P0 Eq. 1 cost and the MFP slowdown. Package report (internal/sim/report) turns the Result into
// summary.json, CSV series, SVG plots and one HTML page; RunSweep runs a
// parameter grid over the cores, in shards when it outgrows one machine.
// Nothing about placement lives here: see docs/simulation.md.
package sim
