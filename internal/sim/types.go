package sim

// Request is one arrival: a virtual machine or job that asks for resources
// for a while. Times are in the simulation's time unit (a trace's unit; the
// MONet generator's abstract unit).
type Request struct {
	ID      string
	Arrival float64
	Hold    float64
	Cores   int
	RAMGB   float64
	// Optional: pooled devices and the CPU–memory latency bound.
	GPUs         int
	StorageGB    float64
	MaxLatencyNS float64 // 0: the scheduler's default for memory (1 µs)
	// MinBandwidthGbps is carried from the MONet generator for the record;
	// the fabric models give every circuit its full line rate.
	MinBandwidthGbps float64
}

// Sample is one point of the utilisation time series: the share of each
// resource type in use at virtual time T, and what is running.
type Sample struct {
	T       float64
	Running int
	// Used and Capacity per resource type ("cores", "memory_gb", "gpus",
	// "storage_gb"), in the type's unit.
	Used     map[string]float64
	Capacity map[string]float64
	// ActivePowerW is the power of the optical switch ports carrying
	// circuits at T (0 without optical fabrics).
	ActivePowerW float64
	// Requests and Accepted count the arrivals decided by T and those
	// placed: the acceptance between two samples is the difference.
	Requests, Accepted int
}

// Result is everything a run measured; report.WriteReport turns it into files.
type Result struct {
	Summary Summary
	Samples []Sample
	// RTTNS and Hops hold one entry per allocated remote memory block
	// (composable architectures): its round trip and switch hops.
	RTTNS []float64
	Hops  []int
	// AcceptedIDs lists the accepted requests' IDs in arrival order (for
	// comparing decisions with another simulator).
	AcceptedIDs []string
}

// SweepRow is one point of a parameter sweep: the parameter values that
// made it and the run's summary.
type SweepRow struct {
	Params  map[string]float64 `json:"params"`
	Shard   int                `json:"shard"`
	Summary Summary            `json:"summary"`
}

// Summary is what summary.json holds.
type Summary struct {
	Name            string  `json:"name"`
	Seed            int64   `json:"seed"`
	Architecture    string  `json:"architecture"`
	Network         string  `json:"network,omitempty"`
	Policy          string  `json:"policy"`
	Requests        int     `json:"requests"`
	Accepted        int     `json:"accepted"`
	Rejected        int     `json:"rejected"`
	AcceptanceRatio float64 `json:"acceptance_ratio"`
	BlockingRatio   float64 `json:"blocking_ratio"`
	// Rejections counts rejected requests by the scheduler's reason.
	Rejections map[string]int `json:"rejections,omitempty"`
	// Mean and peak utilisation per resource type over the run.
	MeanUtilisation map[string]float64 `json:"mean_utilisation"`
	PeakUtilisation map[string]float64 `json:"peak_utilisation"`
	// Remote memory: share of allocated memory blocks by hop count, and
	// round-trip statistics in nanoseconds.
	HopShare     map[string]float64 `json:"hop_share,omitempty"`
	RTTMeanNS    float64            `json:"rtt_mean_ns,omitempty"`
	RTTP50NS     float64            `json:"rtt_p50_ns,omitempty"`
	RTTP99NS     float64            `json:"rtt_p99_ns,omitempty"`
	SwitchPowerW *Power             `json:"switch_power_w,omitempty"`
	Cost         *Cost              `json:"cost,omitempty"`
	// Slowdown is the estimated execution-time increase from the added
	// memory latency, by P0 Eq. 2 (MFP).
	Slowdown *Slowdown `json:"slowdown,omitempty"`
	// Giraph-like time-varying demand (P0 §9), when the workload has it.
	Demand *Demand `json:"demand,omitempty"`
	// Wall-clock cost of the run.
	WallSeconds      float64 `json:"wall_seconds"`
	DecisionsPerSec  float64 `json:"decisions_per_second"`
	VirtualTimeUnits float64 `json:"virtual_time"`
}

// Power is the optical switch power of a run.
type Power struct {
	PerPortW float64 `json:"per_port_w"`
	// Installed counts every switch port of the fabrics; Active only the
	// ports that carry circuits (mean and peak over the run).
	InstalledPorts int     `json:"installed_ports"`
	InstalledW     float64 `json:"installed_w"`
	ActiveMeanW    float64 `json:"active_mean_w"`
	ActivePeakW    float64 `json:"active_peak_w"`
}

// Cost is P0 Eq. 1, C_total = Σ N_i·C_i / U_i, with unit costs per type.
type Cost struct {
	UnitCost    map[string]float64 `json:"unit_cost"`
	Units       map[string]float64 `json:"units"`
	Utilisation map[string]float64 `json:"utilisation"`
	Total       float64            `json:"total"`
	// PerUsedUnit is Total over Σ N_i·C_i: what each unit of cost actually
	// used costs once idle capacity is paid for (1 at full utilisation).
	PerUsedUnit float64 `json:"per_used_unit"`
}

// Slowdown is the MFP estimate: relative increase of execution time =
// MFP × relative increase of memory latency over local DRAM.
type Slowdown struct {
	MFP          float64 `json:"mfp"`
	LocalNS      float64 `json:"local_ns"`
	MeanRemoteNS float64 `json:"mean_remote_ns"`
	Mean         float64 `json:"mean"`
	P99          float64 `json:"p99"`
}

// Demand summarises a time-varying memory workload: what fixed servers must
// hold (every node's own peak) against what a pool must hold (the
// aggregate peak).
type Demand struct {
	Nodes             int     `json:"nodes"`
	NodePeakToAverage float64 `json:"node_peak_to_average"`
	AggPeakToAverage  float64 `json:"aggregate_peak_to_average"`
	SumOfPeaksGB      float64 `json:"sum_of_node_peaks_gb"`
	AggregatePeakGB   float64 `json:"aggregate_peak_gb"`
	PoolSavingRatio   float64 `json:"pool_saving_ratio"`
	Expansions        int     `json:"expansions"`
	ExpansionsFailed  int     `json:"expansions_failed"`
	// Provisioning is the policy pooled memory followed the demand with;
	// the rest measure it: the memory held over the run (GB × steps) and
	// at its peak (what the pool must have for this load), the demand
	// (GB × steps), and the node-steps holding less than their demand.
	Provisioning        string  `json:"provisioning,omitempty"`
	ProvisionedGBSteps  float64 `json:"provisioned_gb_steps,omitempty"`
	PeakProvisionedGB   float64 `json:"peak_provisioned_gb,omitempty"`
	DemandGBSteps       float64 `json:"demand_gb_steps,omitempty"`
	ShortNodeSteps      int     `json:"short_node_steps"`
	ShortNodeStepsRatio float64 `json:"short_node_steps_ratio"`
}
