package sim

import (
	"fmt"
	"math"
	"slices"
	"strings"

	"rackpool/internal/provision"
	"rackpool/internal/schedule"
	"rackpool/internal/topology"
)

// Architectures a run can simulate.
const (
	Traditional = "traditional" // fixed servers: cores and RAM welded together
	RackPools   = "rack"        // rack-scale composable pools
	PodPools    = "pod"         // PoD/DC-scale composable pools over an optical network
)

// Networks for PodPools.
const (
	MONet   = "monet"    // P4's 2-tier parallel planes
	FatTree = "fat-tree" // non-parallel spine-leaf tree
)

// Workload kinds.
const (
	WorkloadMONet  = "monet"  // P4 §5.A generator
	WorkloadTrace  = "trace"  // CSV replay
	WorkloadGiraph = "giraph" // P0 §9 time-varying memory demand
)

// Config is one simulation run. Zero fields take the defaults of
// Defaults(); Validate names the first bad field.
type Config struct {
	Name         string
	Seed         int64
	Architecture string
	Network      string
	Policy       schedule.Policy

	// Traditional: identical servers.
	Hosts        int
	HostCores    int
	HostRAMGB    int
	HostsPerRack int

	// RackPools: per rack, CPU cards sharing pooled memory, GPUs and NVMe
	// drives over rack fabrics (an optical circuit switch for memory, a
	// PCIe switch for devices).
	Racks               int
	CPUCardsPerRack     int
	CardCores           int
	MemoryNodesPerRack  int
	MemoryNodeGB        int
	MemoryBlockGB       int
	GPUsPerRack         int
	NVMePerRack         int
	NVMeGB              int
	CardPorts           int // optical ports per CPU card (and per memory node)
	SwitchLatencyNS     float64
	ReadOverheadNS      float64 // P4 Eq. 1 M_overhead (read)
	PortPowerW          float64
	IntraLinkMetres     float64 // card <-> first switch
	InterLinkMetres     float64 // first <-> second tier
	InterRackLinkMetres float64 // fat-tree: second <-> third tier

	// PodPools: trays of cards (CPU:memory 1:1) over Planes parallel
	// planes (MONet) or one tree (FatTree).
	Trays        int
	CardsPerTray int
	Planes       int

	Workload Workload

	// Metrics.
	SampleEvery float64            // virtual time between samples; 0: about 1,000 samples
	MFP         float64            // memory latency sensitivity (P0 Eq. 2)
	LocalNS     float64            // local DRAM latency (P0: 75 ns)
	UnitCost    map[string]float64 // P0 Eq. 1 C_i per resource type
}

// Workload says where requests come from.
type Workload struct {
	Kind string
	// MONet generator (P4 §5.A).
	Requests         int
	MeanInterarrival float64 // P4: 10
	Load             float64 // multiplies the arrival rate (sweeps)
	HoldBase         float64 // P4: 6300
	HoldStep         float64 // P4: +360 ...
	HoldEvery        int     // ... every 100 requests
	CoresMin         int
	CoresMax         int
	RAMGB            []float64 // RAM sizes drawn uniformly
	LatencyMinNS     float64   // CPU–RAM round-trip bound drawn uniformly
	LatencyMaxNS     float64
	BandwidthGbps    []float64
	// Trace replay.
	Trace string
	// Giraph-like demand (P0 §9).
	Nodes             int
	Steps             int
	StepLength        float64
	NodeAvgGB         float64
	NodePeakToAverage float64 // P0: 2.78
	AggPeakToAverage  float64 // P0: 1.68
	// DemandTrace, when set, replaces the generated Giraph demand with a
	// demand trace (docs/provisioning.md): one node per entity, one step
	// per interval, its memory_gib read as the simulator's GB.
	DemandTrace string
	// Provisioning is how a composable node's pooled memory follows its
	// demand: oracle (each step's demand, the default), static-peak,
	// reactive or predictive (internal/provision, default rules).
	Provisioning string
}

// FieldError is a bad configuration value. Field is the scenario file's
// name for it ("workload.requests"), so a scenario loader can name the
// line.
type FieldError struct {
	Field string
	Msg   string
}

func (e *FieldError) Error() string { return e.Field + ": " + e.Msg }

func fieldErr(field, format string, args ...any) error {
	return &FieldError{Field: field, Msg: fmt.Sprintf(format, args...)}
}

// Defaults returns the defaults: P4 §5.A's MONet pod and workload (1,000
// requests, mean inter-arrival 10, holding 6300 + 360 per 100 requests,
// 4-core CPU cards, 25 ns OCS, 0.25 m / 3 m links, 5 W per port).
func Defaults() Config {
	return Config{
		Name:                "rackpool-sim",
		Seed:                1,
		Architecture:        PodPools,
		Network:             MONet,
		Policy:              schedule.Locality,
		Hosts:               100,
		HostCores:           4,
		HostRAMGB:           16,
		HostsPerRack:        40,
		Racks:               10,
		CPUCardsPerRack:     16,
		CardCores:           4,
		MemoryNodesPerRack:  4,
		MemoryNodeGB:        64,
		MemoryBlockGB:       2,
		GPUsPerRack:         8,
		NVMePerRack:         8,
		NVMeGB:              3840,
		CardPorts:           3,
		SwitchLatencyNS:     25,
		ReadOverheadNS:      37.4,
		PortPowerW:          5,
		IntraLinkMetres:     0.25,
		InterLinkMetres:     3,
		InterRackLinkMetres: 10,
		Trays:               24,
		CardsPerTray:        24,
		Planes:              3,
		Workload: Workload{
			Kind:              WorkloadMONet,
			Requests:          1000,
			MeanInterarrival:  10,
			Load:              1,
			HoldBase:          6300,
			HoldStep:          360,
			HoldEvery:         100,
			CoresMin:          1,
			CoresMax:          4,
			RAMGB:             []float64{2, 4, 8, 16},
			LatencyMinNS:      100,
			LatencyMaxNS:      600,
			BandwidthGbps:     []float64{10, 25, 50, 100},
			Nodes:             50,
			Steps:             200,
			StepLength:        60,
			NodeAvgGB:         32,
			NodePeakToAverage: 2.78,
			AggPeakToAverage:  1.68,
		},
		MFP:      0.20,
		LocalNS:  75,
		UnitCost: map[string]float64{"cores": 1, "memory_gb": 1, "gpus": 1, "storage_gb": 1},
	}
}

// Validate checks c, naming the first bad field.
func (c *Config) Validate() error {
	switch c.Architecture {
	case Traditional, RackPools, PodPools:
	default:
		return fieldErr("architecture", "unknown architecture %q (valid: traditional, rack, pod)", c.Architecture)
	}
	if c.Architecture == PodPools && c.Network != MONet && c.Network != FatTree {
		return fieldErr("network", "unknown network %q (valid: monet, fat-tree)", c.Network)
	}
	if _, err := schedule.ParsePolicy(string(c.Policy)); err != nil {
		return fieldErr("policy", "%v", err)
	}
	positive := []struct {
		name string
		v    int
		arch string
	}{
		{"hosts", c.Hosts, Traditional}, {"host_cores", c.HostCores, Traditional}, {"host_ram_gb", c.HostRAMGB, Traditional},
		{"hosts_per_rack", c.HostsPerRack, Traditional},
		{"racks", c.Racks, RackPools}, {"cpu_cards_per_rack", c.CPUCardsPerRack, RackPools},
		{"card_cores", c.CardCores, RackPools}, {"card_cores", c.CardCores, PodPools},
		{"memory_nodes_per_rack", c.MemoryNodesPerRack, RackPools}, {"memory_node_gb", c.MemoryNodeGB, RackPools},
		{"memory_block_gb", c.MemoryBlockGB, RackPools}, {"memory_block_gb", c.MemoryBlockGB, PodPools},
		{"memory_node_gb", c.MemoryNodeGB, PodPools},
		{"card_ports", c.CardPorts, RackPools}, {"card_ports", c.CardPorts, PodPools},
		{"trays", c.Trays, PodPools}, {"cards_per_tray", c.CardsPerTray, PodPools}, {"planes", c.Planes, PodPools},
	}
	for _, p := range positive {
		if p.arch == c.Architecture && p.v < 1 {
			return fieldErr(p.name, "must be at least 1, got %d", p.v)
		}
	}
	if c.Architecture == Traditional && c.Hosts > 1_000_000 {
		return fieldErr("hosts", "at most 1,000,000, got %d", c.Hosts)
	}
	if c.Architecture == RackPools && c.Racks*(c.CPUCardsPerRack+c.MemoryNodesPerRack+c.GPUsPerRack+c.NVMePerRack) > 1_000_000 {
		return fieldErr("racks", "at most 1,000,000 cards and devices in all")
	}
	if c.Architecture == PodPools {
		if c.CardsPerTray < 2 || c.CardsPerTray%2 != 0 {
			return fieldErr("cards_per_tray", "must be even (CPU:memory cards 1:1), got %d", c.CardsPerTray)
		}
		if c.Trays*c.CardsPerTray > 200_000 {
			return fieldErr("trays", "at most 200,000 cards in all, got %d", c.Trays*c.CardsPerTray)
		}
		if (c.Network == MONet || c.Network == FatTree) && c.Planes > 0 {
			if name, ports := largestSwitch(c); ports > topology.MaxSwitchPorts {
				return fieldErr("trays", "a %s pod of %d trays x %d cards and %d planes needs a %s switch of %d ports; a switch has at most %d (use fewer trays, cards_per_tray or planes)",
					c.Network, c.Trays, c.CardsPerTray, c.Planes, name, ports, topology.MaxSwitchPorts)
			}
		}
	}
	if c.GPUsPerRack < 0 || c.NVMePerRack < 0 || c.NVMeGB < 0 {
		return fieldErr("gpus_per_rack", "device counts and sizes must not be negative")
	}
	if c.MemoryBlockGB > 0 && c.MemoryNodeGB%c.MemoryBlockGB != 0 {
		return fieldErr("memory_block_gb", "%d GB does not divide the %d GB memory node", c.MemoryBlockGB, c.MemoryNodeGB)
	}
	for _, f := range []struct {
		name string
		v    float64
	}{
		{"switch_latency_ns", c.SwitchLatencyNS}, {"read_overhead_ns", c.ReadOverheadNS}, {"port_power_w", c.PortPowerW},
		{"intra_link_metres", c.IntraLinkMetres}, {"inter_link_metres", c.InterLinkMetres},
		{"inter_rack_link_metres", c.InterRackLinkMetres}, {"sample_every", c.SampleEvery},
		{"mfp", c.MFP}, {"local_ns", c.LocalNS},
	} {
		if f.v < 0 || math.IsNaN(f.v) || math.IsInf(f.v, 0) {
			return fieldErr(f.name, "must be a finite number >= 0, got %v", f.v)
		}
	}
	for k, v := range c.UnitCost {
		if !slices.Contains(ResourceTypes, k) {
			return fieldErr("unit_cost."+k, "unknown resource type (valid: %s)", strings.Join(ResourceTypes, ", "))
		}
		if v < 0 || math.IsNaN(v) {
			return fieldErr("unit_cost."+k, "must be >= 0, got %v", v)
		}
	}
	return c.Workload.validate()
}

// ResourceTypes are the resource types utilisation and cost are reported
// for.
var ResourceTypes = []string{"cores", "memory_gb", "gpus", "storage_gb"}

func (w *Workload) validate() error {
	switch w.Kind {
	case WorkloadMONet:
		if w.Requests < 1 || w.Requests > 100_000_000 {
			return fieldErr("workload.requests", "must be between 1 and 100,000,000, got %d", w.Requests)
		}
		if !(w.MeanInterarrival > 0) {
			return fieldErr("workload.mean_interarrival", "must be > 0, got %v", w.MeanInterarrival)
		}
		if !(w.Load > 0) {
			return fieldErr("workload.load", "must be > 0, got %v", w.Load)
		}
		if w.HoldBase < 0 || w.HoldStep < 0 || w.HoldEvery < 1 {
			return fieldErr("workload.hold_base", "holding time parameters must not be negative (hold_every >= 1)")
		}
		if w.CoresMin < 1 || w.CoresMax < w.CoresMin {
			return fieldErr("workload.cores_min", "need 1 <= cores_min <= cores_max, got %d..%d", w.CoresMin, w.CoresMax)
		}
		if len(w.RAMGB) == 0 {
			return fieldErr("workload.ram_gb", "needs at least one size")
		}
		for _, r := range w.RAMGB {
			if !(r > 0) {
				return fieldErr("workload.ram_gb", "sizes must be > 0, got %v", r)
			}
		}
		if w.LatencyMinNS < 0 || w.LatencyMaxNS < w.LatencyMinNS {
			return fieldErr("workload.latency_min_ns", "need 0 <= latency_min_ns <= latency_max_ns")
		}
	case WorkloadTrace:
		if w.Trace == "" {
			return fieldErr("workload.trace", "a trace workload needs a CSV file")
		}
	case WorkloadGiraph:
		if w.Provisioning != "" {
			if _, err := provision.ParsePolicy(w.Provisioning); err != nil {
				return fieldErr("workload.provisioning", "%v", err)
			}
		}
		if w.DemandTrace != "" {
			break
		}
		if w.Nodes < 1 || w.Steps < 2 || !(w.StepLength > 0) || !(w.NodeAvgGB > 0) {
			return fieldErr("workload.nodes", "needs nodes >= 1, steps >= 2, step_length > 0, node_avg_gb > 0")
		}
		if w.NodePeakToAverage < 1 || w.AggPeakToAverage < 1 || w.AggPeakToAverage > w.NodePeakToAverage {
			return fieldErr("workload.aggregate_peak_to_average", "need 1 <= aggregate <= node peak-to-average, got %v and %v",
				w.AggPeakToAverage, w.NodePeakToAverage)
		}
	default:
		return fieldErr("workload.kind", "unknown workload %q (valid: monet, trace, giraph)", w.Kind)
	}
	return nil
}
