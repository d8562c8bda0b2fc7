package sim

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// Peak memory of a run, estimated from counts before anything is built.
//
// The constants are bytes of peak resident memory (RSS) per item, measured
// on this code (Go 1.26, default GOGC=100) with a throwaway probe:
//
//   - Topology and scheduler: runtime.MemStats.HeapAlloc after
//     runtime.GC, around Build, schedule.New plus schedule.NewState, and a
//     Place on every host (which builds every host's reach), on 15
//     topologies of every architecture (3,000 to 200,000 hosts). Least
//     squares gave live bytes per host 194, host port 93, device 800,
//     block 183 (within 10% on all but the smallest); switch 250 and link
//     80 are from their structs, a fat tree's distance entry 16. These are
//     multiplied by 2.2, the ratio of peak RSS (VmHWM) to peak live heap
//     (runtime/metrics /gc/heap/live:bytes) of whole runs (1.8 to 2.3):
//     Go lets the heap grow to twice what is live before it collects.
//   - Requests, from the peak RSS of whole runs: 10^6 and 10^7 MONet
//     requests on a 24-tray pod (few accepted), 200 bytes each; 2*10^5 and
//     10^6 on P4's pod with short holds (all accepted, so with their
//     accepted id and slowdown), 229; a 2*10^6-row CSV trace, 278 a row.
//   - Requests held at once: ~79,000 instead of ~125 on P4's pod (10^6
//     requests) added 1.1 to 1.4 KB of live heap each on pooled resources
//     (plan, assignments, departure, circuits): 3,000 bytes of RSS taken;
//     265,000 instead of a few on 200,000 servers added 100 bytes each.
//
// Checked against whole runs: P4's pod with 10^6 requests
// (examples/sim/monet-p4-scale.yaml) is estimated at 0.81 GB and peaked
// at 0.82 GB; 1,000 racks with 10^5 requests at 0.14 (measured 0.13); a
// 4,000-tray fat tree with 10^5 requests at 0.26 (0.23); 200,000 servers
// with 10^6 requests at 0.47 (0.38); 10^7 requests on a 24-tray pod at
// 2.3 (2.0). Small runs are the 16 MiB base (measured 11 to 15 MB).
const (
	memBase                  = 16 << 20 // runtime, binary, report buffers
	memPerHost               = 430      // host, compute block, scheduler state
	memPerHostPort           = 205
	memPerSwitch             = 550
	memPerLink               = 175
	memPerDevice             = 1_760 // device, memory layout and index
	memPerBlock              = 400
	memPerDistEntry          = 35    // fat-tree distance rows
	memPerRequest            = 230   // MONet generator: Request, id, accepted id, slowdown
	memPerTraceRow           = 280   // CSV trace: the same plus the duplicate-id table
	memPerRunning            = 3_000 // a request held on pooled resources: plan, assignments, departure, circuits
	memPerRunningTraditional = 230   // a request held on a server
	memPerDemandStep         = 18    // Giraph demand: one node's GB at one step
)

// MemoryCounts is what EstimateBytes counts: the topology's hosts, host
// ports, switches, links, devices and resource blocks, the requests, and
// how many are expected to run at once.
type MemoryCounts struct {
	Hosts, HostPorts, Switches, Links, Devices, Blocks int64
	DistEntries                                        int64 // fat-tree distance rows x switches
	Requests                                           int64 // MONet requests or trace rows
	DemandSteps                                        int64 // Giraph: nodes x steps
	Running                                            int64
}

// MemoryCounts returns the counts of c (valid, see Validate) without building
// anything; a trace's rows are counted in its file (0 when it cannot be
// read).
func (c *Config) MemoryCounts() MemoryCounts {
	var m MemoryCounts
	var cores, poolGB int64 // capacity, for the requests running at once
	blocksPerNode := int64(1)
	if c.MemoryBlockGB > 0 {
		blocksPerNode = int64(c.MemoryNodeGB / c.MemoryBlockGB)
	}
	switch c.Architecture {
	case Traditional:
		m.Hosts = int64(c.Hosts)
		m.Blocks = m.Hosts
		cores, poolGB = m.Hosts*int64(c.HostCores), m.Hosts*int64(c.HostRAMGB)
	case RackPools:
		racks, cards := int64(c.Racks), int64(c.CPUCardsPerRack)
		devices := int64(c.GPUsPerRack + c.NVMePerRack)
		mem := int64(c.MemoryNodesPerRack)
		m.Hosts = racks * cards
		m.HostPorts = m.Hosts * int64(c.CardPorts)
		m.Switches = racks
		if devices > 0 {
			m.HostPorts += m.Hosts
			m.Switches += racks
		}
		m.Devices = racks * (mem + devices)
		m.Blocks = m.Hosts + racks*(mem*blocksPerNode+devices)
		cores, poolGB = m.Hosts*int64(c.CardCores), racks*mem*int64(c.MemoryNodeGB)
	case PodPools:
		trays, P := int64(c.Trays), int64(c.Planes)
		cpu, mem := podCards(c)
		m.Hosts = trays * int64(cpu)
		m.HostPorts = m.Hosts * P
		m.Devices = trays * int64(mem)
		m.Blocks = m.Hosts + m.Devices*blocksPerNode
		if c.Network == FatTree {
			groups := int64(ceilDiv(c.Trays, trayGroup))
			m.Switches = trays + groups + 1
			m.Links = trays + groups
			m.DistEntries = groups * m.Switches
		} else {
			inter := int64(interSwitches(c.Trays))
			m.Switches = P * (trays + inter)
			m.Links = P * trays * inter
			m.DistEntries = P * (trays + inter)
		}
		cores, poolGB = m.Hosts*int64(c.CardCores), m.Devices*int64(c.MemoryNodeGB)
	}
	w := &c.Workload
	switch w.Kind {
	case WorkloadMONet:
		m.Requests = int64(w.Requests)
		// Request i (from 0) arrives at i*gap and holds HoldBase +
		// i*step, so at the last arrival, when most are held, requests
		// i > (N*gap - HoldBase) / (gap + step) still run (Little's law,
		// HoldBase/gap, when holds do not grow); capped by what the
		// capacity holds of average requests.
		running := float64(w.Requests)
		if w.MeanInterarrival > 0 && w.Load > 0 && w.HoldEvery > 0 {
			gap, step := w.MeanInterarrival/w.Load, w.HoldStep/float64(w.HoldEvery)
			n := float64(w.Requests)
			running = min(running, n-max(0, (n*gap-w.HoldBase)/(gap+step))+1)
		}
		if meanCores := float64(w.CoresMin+w.CoresMax) / 2; meanCores > 0 {
			running = min(running, float64(cores)/meanCores)
		}
		meanGB := 0.0
		for _, r := range w.RAMGB {
			meanGB += r / float64(len(w.RAMGB))
		}
		if meanGB > 0 && poolGB > 0 {
			running = min(running, float64(poolGB)/meanGB)
		}
		m.Running = int64(running)
	case WorkloadTrace:
		m.Requests = countLines(w.Trace)
		m.Running = min(m.Requests, cores)
	case WorkloadGiraph:
		m.DemandSteps = int64(w.Nodes) * int64(w.Steps)
		m.Running = int64(w.Nodes)
	}
	return m
}

// EstimateBytes estimates the peak resident memory of running c: its
// topology, scheduler, workload and the requests it holds at once (see
// the constants above for how they were measured).
func (c *Config) EstimateBytes() int64 {
	return c.MemoryCounts().Bytes(c.Architecture, c.Workload.Kind)
}

// Bytes is the estimated peak resident memory of a run of these counts
// on architecture arch with a workload of kind kind.
func (m MemoryCounts) Bytes(arch, kind string) int64 {
	reqBytes := int64(memPerRequest)
	if kind == WorkloadTrace {
		reqBytes = memPerTraceRow
	}
	runBytes := int64(memPerRunning)
	if arch == Traditional {
		runBytes = memPerRunningTraditional
	}
	return memBase + m.Hosts*memPerHost + m.HostPorts*memPerHostPort + m.Switches*memPerSwitch +
		m.Links*memPerLink + m.Devices*memPerDevice + m.Blocks*memPerBlock + m.DistEntries*memPerDistEntry +
		m.Requests*reqBytes + m.DemandSteps*memPerDemandStep + m.Running*runBytes
}

// countLines counts the lines of a file (a trace's rows, plus its
// header), or returns 0 when it cannot be read.
func countLines(path string) int64 {
	f, err := os.Open(path)
	if err != nil {
		return 0
	}
	defer f.Close()
	buf := make([]byte, 1<<20)
	var n int64
	for {
		k, err := f.Read(buf)
		n += int64(bytes.Count(buf[:k], []byte{'\n'}))
		if err != nil {
			return n
		}
	}
}

// AvailableMemory returns the memory a run may use, in bytes, or 0 when
// it is unknown (then CheckMemory lets every run go): MemTotal of
// /proc/meminfo, or the memory limit of the process's cgroup when that is
// lower. A variable, so tests (and embedders) can set their own.
var AvailableMemory = machineMemory

func machineMemory() int64 {
	data, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0
	}
	var total int64
	for _, line := range strings.Split(string(data), "\n") {
		if rest, ok := strings.CutPrefix(line, "MemTotal:"); ok {
			f := strings.Fields(rest)
			if len(f) == 2 && f[1] == "kB" {
				if kb, err := strconv.ParseInt(f[0], 10, 64); err == nil {
					total = kb << 10
				}
			}
		}
	}
	if total <= 0 {
		return 0
	}
	for _, p := range []string{"/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"} {
		if b, err := os.ReadFile(p); err == nil {
			if v, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64); err == nil && v > 0 && v < total {
				total = v
			}
		}
	}
	return total
}

// MemoryError is a run refused because its estimate exceeds the memory
// of the machine.
type MemoryError struct {
	Need, Have int64
	Counts     MemoryCounts
	Workload   string
}

func (e *MemoryError) Error() string {
	var what []string
	what = append(what, plural(e.Counts.Hosts, "host"), plural(e.Counts.Blocks, "block"))
	switch e.Workload {
	case WorkloadMONet, WorkloadTrace:
		what = append(what, plural(e.Counts.Requests, "request"))
	case WorkloadGiraph:
		what = append(what, plural(e.Counts.DemandSteps, "node step"))
	}
	return fmt.Sprintf("sim: this scenario needs ~%s GiB (%s); this machine has %s GiB",
		gibString(e.Need), strings.Join(what, ", "), gibString(e.Have))
}

// CheckMemory refuses, before anything is built, a run whose estimated
// peak memory (EstimateBytes) exceeds AvailableMemory.
func (c *Config) CheckMemory() error {
	have := AvailableMemory()
	if have <= 0 {
		return nil
	}
	m := c.MemoryCounts()
	if need := m.Bytes(c.Architecture, c.Workload.Kind); need > have {
		return &MemoryError{Need: need, Have: have, Counts: m, Workload: c.Workload.Kind}
	}
	return nil
}

func plural(n int64, what string) string {
	if n != 1 {
		what += "s"
	}
	return thousands(n) + " " + what
}

// thousands writes n with commas: 1,000,000.
func thousands(n int64) string {
	s := strconv.FormatInt(n, 10)
	if n < 0 {
		return "-" + thousands(-n)
	}
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

// gibString writes bytes in GiB with one decimal (two below 1 GiB).
func gibString(b int64) string {
	g := float64(b) / (1 << 30)
	if g < 1 {
		return strconv.FormatFloat(g, 'f', 2, 64)
	}
	return strconv.FormatFloat(g, 'f', 1, 64)
}
