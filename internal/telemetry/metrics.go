package telemetry

import (
	"slices"
	"strings"
)

// Kind is the kind of a series' source.
type Kind string

// Source kinds.
const (
	// System is a composed system (or a physical host): what an agent on
	// it reports (rackpool agent).
	System Kind = "System"
	// MemoryLease is a memory lease as its memnode sees it.
	MemoryLease Kind = "MemoryLease"
	// Cache is a cache's remote tier, identified by the memory lease it
	// lives on (rackpool cache).
	Cache Kind = "Cache"
)

// Kinds lists every kind, in the order reports show them.
var Kinds = []Kind{System, MemoryLease, Cache}

// Metric names. Bytes are bytes; rates are per second, averaged over the
// reporter's interval.
const (
	// MemoryUsed is the memory a system uses: its cgroup's memory.current
	// (v1: memory.usage_in_bytes), or MemTotal − MemAvailable of the whole
	// machine.
	MemoryUsed = "memory_used_bytes"
	// MemoryPeak is the cgroup's memory.peak (v1: max_usage_in_bytes).
	MemoryPeak = "memory_peak_bytes"
	// MemoryLimit is the cgroup's memory.max (v1: limit_in_bytes) when it
	// is set, or MemTotal of the machine.
	MemoryLimit = "memory_limit_bytes"
	// IORead and IOWrite are block-device bytes per second.
	IORead  = "io_read_bytes_per_second"
	IOWrite = "io_write_bytes_per_second"
	// GPUMemoryUsed is the memory in use on the system's GPUs, summed.
	GPUMemoryUsed = "gpu_memory_used_bytes"

	// LeaseBytesInUse is the part of a lease its holder has written: the
	// 4 KiB pages touched since the lease was granted or last zeroed.
	LeaseBytesInUse = "bytes_in_use"

	// CacheRemoteLive is the bytes of live records in a cache's remote
	// log: its remote working set.
	CacheRemoteLive = "remote_live_bytes"
	// CacheRemoteItems is the number of items in the remote log.
	CacheRemoteItems = "remote_items"
	// CacheRemoteRead is bytes read from the remote tier per second.
	CacheRemoteRead = "remote_read_bytes_per_second"
)

// Metric describes one metric of a kind.
type Metric struct {
	Name string
	// Unit is a UCUM unit, as Redfish MetricDefinition.Units has them:
	// "By" bytes, "By/s" bytes per second, "{item}" a count.
	Unit string
	Help string
}

var metricTable = map[Kind][]Metric{
	System: {
		{MemoryUsed, "By", "memory in use (cgroup memory.current, or MemTotal - MemAvailable)"},
		{MemoryPeak, "By", "peak memory in use (cgroup memory.peak)"},
		{MemoryLimit, "By", "memory limit (cgroup memory.max, or MemTotal)"},
		{IORead, "By/s", "block-device bytes read per second"},
		{IOWrite, "By/s", "block-device bytes written per second"},
		{GPUMemoryUsed, "By", "GPU memory in use, all GPUs"},
	},
	MemoryLease: {
		{LeaseBytesInUse, "By", "bytes of the lease written by its holder (touched 4 KiB pages)"},
	},
	Cache: {
		{CacheRemoteLive, "By", "live bytes in the remote victim log (remote working set)"},
		{CacheRemoteItems, "{item}", "items in the remote victim log"},
		{CacheRemoteRead, "By/s", "bytes read from the remote tier per second"},
	},
}

// Metrics returns the metrics kind k carries (nil for an unknown kind).
func Metrics(k Kind) []Metric { return slices.Clone(metricTable[k]) }

// Lookup returns metric name of kind k.
func Lookup(k Kind, name string) (Metric, bool) {
	for _, m := range metricTable[k] {
		if m.Name == name {
			return m, true
		}
	}
	return Metric{}, false
}

// ParseKind returns the kind named s.
func ParseKind(s string) (Kind, bool) {
	k := Kind(s)
	return k, slices.Contains(Kinds, k)
}

func metricNames(k Kind) string {
	var names []string
	for _, m := range metricTable[k] {
		names = append(names, m.Name)
	}
	return strings.Join(names, ", ")
}
