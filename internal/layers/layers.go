// Package layers is the map of the module's packages as layers, and the
// rules its tests hold every import to (in the style of Tailscale's
// deptest). A package imports only packages of its own layer or below;
// a package that is in no layer fails the test until it is given one, so
// that where a new package sits is decided when it is written.
//
// Two rules stand beside the layers: only the Redfish service and the
// API's client-side packages import rackpool/api (the wire types are the
// service's and its clients', not the model's), and nothing under
// internal/fabric imports the northbound service.
package layers

// Layer is one layer of the tree, from the bottom up.
type Layer struct {
	Name string
	// Packages are import paths relative to the module ("internal/clock");
	// a trailing "/..." takes every package below as well.
	Packages []string
}

// Layers are the module's layers, from the bottom: each may import its own
// and those before it. cmd/..., bench/... and e2e sit above every layer.
var Layers = []Layer{
	{"foundation: clocks, units, limits, child processes, certificates, capability tokens, connection loops, the model's vocabulary", []string{
		"internal/clock", "internal/units", "internal/jsonlimit", "internal/childproc", "internal/profiling",
		"internal/metrics", "internal/chart/...", "internal/pki", "internal/netserve", "internal/kwait", "internal/captoken", "internal/inventory",
		"internal/forecast", "internal/demand", "internal/console", "internal/pager/workload",
		"internal/replica/alloctest", "internal/fabric", "internal/store", "internal/layers", "examples",
	}},
	{"protocols, wire types and single-purpose servers: Redfish, NBD, memcached, pooled memory, store backends, topology", []string{
		"api", "internal/rf", "internal/topology", "internal/store/...", "internal/memory", "internal/nbd",
		"internal/cache", "internal/telemetry/...", "internal/tenancy", "internal/schedule",
		"internal/hostagent/hoststep", "internal/bmc/...", "internal/blocknode", "internal/hba", "internal/pager",
		"internal/memlease", "internal/odata",
	}},
	{"fabric drivers, the fabric managers' emulator, discovery, the fabric monitor", []string{
		"internal/fabric/...", "internal/events", "internal/telemetry/fabricreport",
	}},
	{"engines: composition, memory leases, drives, provisioning, simulation, replication", []string{
		"internal/compose", "internal/compose/bmcpower", "internal/lease", "internal/drive", "internal/provision", "internal/sim/...", "internal/dra", "internal/slurm/...",
		"internal/replica", "internal/hostagent", "internal/observe",
	}},
	{"the northbound Redfish service", []string{
		// the core (internal/redfish), what its families share with it
		// (service) and the families in packages of their own
		// (telemetryservice, managers, eventservice, oem)
		"internal/redfish/...",
	}},
}

// APIImporters are the packages allowed to import rackpool/api: the
// service that serves it and the client-side packages that speak it.
var APIImporters = []string{
	"internal/redfish/...", "internal/memlease", "internal/telemetry/report", "internal/dra", "internal/slurm/...",
}
