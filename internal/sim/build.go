package sim

import (
	"fmt"
	"strconv"

	"rackpool/internal/topology"
)

// Build compiles the topology of c's architecture and network with the
// live control plane's loader (topology.Compile, the code path of
// topology.Parse without the YAML), so the simulator places on exactly the
// model `rackpool serve` would: the same validation, the same latency and
// hop model (topology.Path), the same optical port and circuit physics in
// the scheduler's State. A scenario whose estimated memory exceeds the
// machine's (CheckMemory) is refused before anything is built.
func Build(c *Config) (*topology.Topology, error) {
	if err := c.CheckMemory(); err != nil {
		return nil, err
	}
	top, err := topology.Compile(c.Name+"-topology.yaml", TopologySpec(c))
	if err != nil {
		return nil, fmt.Errorf("sim: building the %s topology: %w", c.Architecture, err)
	}
	return top, nil
}

// TopologyFile returns the topology Build compiles, as a topology file
// (`rackpool sim --write-topology` writes it; `rackpool serve --topology`
// accepts it and loads the same model).
func TopologyFile(c *Config) []byte {
	data, err := topology.Marshal(TopologySpec(c))
	if err != nil {
		// A Spec holds only strings, numbers, lists and maps of them.
		panic("sim: writing the topology file: " + err.Error())
	}
	return data
}

// TopologySpec returns the topology of c's architecture and network, the
// Spec Build compiles. It stays compact at any size: copies of hosts,
// switches, links and memory nodes are templated (count, per, {n}, {q},
// {r}) rather than listed.
func TopologySpec(c *Config) *topology.Spec {
	switch c.Architecture {
	case Traditional:
		return traditionalSpec(c)
	case RackPools:
		return rackPoolsSpec(c)
	case PodPools:
		if c.Network == FatTree {
			return fatTreeSpec(c)
		}
		return monetSpec(c)
	}
	return &topology.Spec{Name: c.Name}
}

// gib writes n GiB as a topology size.
func gib(n int) string { return strconv.Itoa(n) + "GiB" }

// traditionalSpec: racks of identical servers, no fabrics.
func traditionalSpec(c *Config) *topology.Spec {
	s := &topology.Spec{Name: c.Name + "-traditional"}
	left := c.Hosts
	for r := 1; left > 0; r++ {
		n := min(left, c.HostsPerRack)
		left -= n
		s.Racks = append(s.Racks, &topology.RackSpec{ID: fmt.Sprintf("rack%d", r), Hosts: []*topology.HostSpec{
			{ID: fmt.Sprintf("r%d-h{n}", r), Count: n, Cores: c.HostCores, Memory: gib(c.HostRAMGB)},
		}})
	}
	return s
}

// rackPoolsSpec: per rack, CPU cards with CardPorts optical ports into the
// rack's optical circuit switch (memory nodes with CardPorts ports each)
// and one port into the rack's PCIe switch (GPUs, NVMe drives). Cards keep
// 1 GiB of local memory for their own use; requests' RAM comes from the
// pool.
func rackPoolsSpec(c *Config) *topology.Spec {
	s := &topology.Spec{Name: c.Name + "-rack-pools"}
	cards, ports := c.CPUCardsPerRack, c.CardPorts
	devices := c.GPUsPerRack + c.NVMePerRack
	for r := 1; r <= c.Racks; r++ {
		h := &topology.HostSpec{ID: fmt.Sprintf("r%d-cpu{n}", r), Count: cards, Cores: c.CardCores, Memory: "1GiB"}
		for k := range ports {
			h.Ports = append(h.Ports, &topology.HostPortSpec{ID: fmt.Sprintf("ocs%d", k+1), Fabric: fmt.Sprintf("ocs-r%d", r),
				Port: strconv.Itoa(k*cards + 1), Metres: c.IntraLinkMetres})
		}
		if devices > 0 {
			h.Ports = append(h.Ports, &topology.HostPortSpec{ID: "pcie", Fabric: fmt.Sprintf("pcie-r%d", r), Port: "1", Metres: 1})
		}
		s.Racks = append(s.Racks, &topology.RackSpec{ID: fmt.Sprintf("rack%d", r), Hosts: []*topology.HostSpec{h}})
	}
	for r := 1; r <= c.Racks; r++ {
		ocsPorts := (cards + c.MemoryNodesPerRack) * ports
		ocs := &topology.FabricSpec{ID: fmt.Sprintf("ocs-r%d", r), Kind: "optical-circuit",
			Switches: []*topology.SwitchSpec{{ID: "sw", Ports: ocsPorts, LatencyNS: c.SwitchLatencyNS}}}
		ocs.Devices = appendMemory(ocs.Devices, fmt.Sprintf("r%d-mem{n}", r), "", c.MemoryNodesPerRack, cards*ports+1, ports, c)
		s.Fabrics = append(s.Fabrics, ocs)
		if devices > 0 {
			pcie := &topology.FabricSpec{ID: fmt.Sprintf("pcie-r%d", r), Kind: "pcie-switch",
				Switches: []*topology.SwitchSpec{{ID: "sw", Ports: cards + devices, LatencyNS: 150}}}
			if c.GPUsPerRack > 0 {
				pcie.Devices = append(pcie.Devices, &topology.DeviceSpec{ID: fmt.Sprintf("r%d-gpu{n}", r), Count: c.GPUsPerRack,
					Kind: "gpu", Model: "A100", Capacity: "40GiB", Port: strconv.Itoa(cards + 1), Metres: 1})
			}
			if c.NVMePerRack > 0 {
				pcie.Devices = append(pcie.Devices, &topology.DeviceSpec{ID: fmt.Sprintf("r%d-nvme{n}", r), Count: c.NVMePerRack,
					Kind: "nvme", Model: "PM1733", Capacity: strconv.Itoa(c.NVMeGB) + "GB", Port: strconv.Itoa(cards + c.GPUsPerRack + 1), Metres: 1})
			}
			s.Fabrics = append(s.Fabrics, pcie)
		}
	}
	return s
}

// appendMemory appends count memory nodes named id on switch sw (""
// for a fabric's only switch), each with perNode numeric ports starting at
// first.
func appendMemory(devs []*topology.DeviceSpec, id, sw string, count, first, perNode int, c *Config) []*topology.DeviceSpec {
	if count == 0 {
		return devs
	}
	ports := make([]string, perNode)
	for k := range ports {
		ports[k] = strconv.Itoa(first + k)
	}
	return append(devs, &topology.DeviceSpec{ID: id, Count: count, Kind: "memory", Model: "DDR4",
		Capacity: gib(c.MemoryNodeGB), BlockSize: gib(c.MemoryBlockGB), Switch: sw, Ports: ports,
		Metres: c.IntraLinkMetres, OverheadNS: c.ReadOverheadNS})
}

// podCards splits a tray's cards: half CPU cards, half memory cards.
func podCards(c *Config) (cpu, mem int) { return c.CardsPerTray / 2, c.CardsPerTray / 2 }

// monetSpec: P4's 2-tier parallel topology. Planes are independent
// optical fabrics; each has an intra-tray switch per tray and an
// inter-tray tier joined to every intra-tray switch. Every CPU card has
// one port into every plane; each memory card is homed in one plane
// (round robin within its tray) and carries one port per plane on that
// plane's intra-tray switch (the modelling choice of
// examples/monet-pod.yaml). Same tray: 1 hop; other trays: 3.
func monetSpec(c *Config) *topology.Spec {
	cpu, mem := podCards(c)
	P := c.Planes
	inter := interSwitches(c.Trays)
	h := &topology.HostSpec{ID: "t{q}-cpu{r}", Count: c.Trays * cpu, Per: cpu, Cores: c.CardCores, Memory: "1GiB"}
	for p := 1; p <= P; p++ {
		h.Ports = append(h.Ports, &topology.HostPortSpec{ID: fmt.Sprintf("plane%d", p), Fabric: fmt.Sprintf("plane%d", p),
			Switch: fmt.Sprintf("p%d-intra{q}", p), Port: "{r}", Metres: c.IntraLinkMetres})
	}
	s := &topology.Spec{Name: c.Name + "-monet", Racks: []*topology.RackSpec{{ID: "pod1", Hosts: []*topology.HostSpec{h}}}}
	for p := 1; p <= P; p++ {
		// Card-facing ports on an intra-tray switch: one per CPU card plus
		// P per memory card homed here; as many uplinks again.
		homed := homedIn(mem, P, p)
		down := cpu + homed*P
		f := &topology.FabricSpec{ID: fmt.Sprintf("plane%d", p), Kind: "optical-circuit",
			Switches: []*topology.SwitchSpec{
				{ID: fmt.Sprintf("p%d-intra{n}", p), Count: c.Trays, Ports: 2 * down, LatencyNS: c.SwitchLatencyNS},
				{ID: fmt.Sprintf("p%d-inter{n}", p), Count: inter, Ports: ceilDiv(c.Trays*down, inter), LatencyNS: c.SwitchLatencyNS},
			},
			Links: []*topology.LinkSpec{{Count: c.Trays * inter, Per: inter, A: fmt.Sprintf("p%d-intra{q}", p),
				B: fmt.Sprintf("p%d-inter{r}", p), Metres: c.InterLinkMetres}},
		}
		for t := 1; t <= c.Trays && homed > 0; t++ {
			f.Devices = appendMemory(f.Devices, fmt.Sprintf("t%d-p%d-mem{n}", t, p), fmt.Sprintf("p%d-intra%d", p, t), homed, cpu+1, P, c)
		}
		s.Fabrics = append(s.Fabrics, f)
	}
	return s
}

// largestSwitch returns the switch with the most ports the pod's network
// needs, as monetSpec and fatTreeSpec size them, and its port count.
func largestSwitch(c *Config) (string, int) {
	cpu, mem := podCards(c)
	P := c.Planes
	if c.Network == FatTree {
		down := (cpu + mem) * P
		edge, agg, core := 2*down, 2*trayGroup*down, c.Trays*down
		if core >= agg && core >= edge {
			return "core", core
		}
		if agg >= edge {
			return "aggregation", agg
		}
		return "edge", edge
	}
	down := cpu + ceilDiv(mem, P)*P // the plane with the most memory cards homed
	intra, inter := 2*down, ceilDiv(c.Trays*down, interSwitches(c.Trays))
	if inter >= intra {
		return "inter-tray", inter
	}
	return "intra-tray", intra
}

// homedIn is how many of a tray's mem memory cards live in plane p of P
// (round robin: card j in plane (j-1) mod P + 1).
func homedIn(mem, planes, p int) int {
	n := mem / planes
	if p <= mem%planes {
		n++
	}
	return n
}

// interSwitches sizes the second tier: up to 4 switches, fewer for small
// pods.
func interSwitches(trays int) int { return max(1, min(4, trays/2)) }

// trayGroup is how many trays share an aggregation switch in the fat
// tree.
const trayGroup = 4

// fatTreeSpec: the non-parallel baseline. One optical fabric shaped as a
// three-tier tree: an edge switch per tray (cards at 0.25 m, each with
// Planes ports so it has the same transceivers as in MONet), an
// aggregation switch per trayGroup trays (3 m) and a core switch joining
// the aggregation switches (10 m). Same tray: 1 hop; same group: 3; other
// groups: 5.
func fatTreeSpec(c *Config) *topology.Spec {
	cpu, mem := podCards(c)
	P := c.Planes
	groups := ceilDiv(c.Trays, trayGroup)
	pod := &topology.RackSpec{ID: "pod1"}
	for t := 1; t <= c.Trays; t++ {
		h := &topology.HostSpec{ID: fmt.Sprintf("t%d-cpu{n}", t), Count: cpu, Cores: c.CardCores, Memory: "1GiB"}
		for p := 1; p <= P; p++ {
			h.Ports = append(h.Ports, &topology.HostPortSpec{ID: fmt.Sprintf("port%d", p), Fabric: "tree",
				Switch: fmt.Sprintf("edge%d", t), Port: strconv.Itoa((p-1)*cpu + 1), Metres: c.IntraLinkMetres})
		}
		pod.Hosts = append(pod.Hosts, h)
	}
	down := (cpu + mem) * P
	tree := &topology.FabricSpec{ID: "tree", Kind: "optical-circuit", Switches: []*topology.SwitchSpec{
		{ID: "edge{n}", Count: c.Trays, Ports: 2 * down, LatencyNS: c.SwitchLatencyNS},
		{ID: "agg{n}", Count: groups, Ports: 2 * trayGroup * down, LatencyNS: c.SwitchLatencyNS},
		{ID: "core", Ports: c.Trays * down, LatencyNS: c.SwitchLatencyNS},
	}}
	for t := 1; t <= c.Trays; t++ {
		tree.Links = append(tree.Links, &topology.LinkSpec{A: fmt.Sprintf("edge%d", t), B: fmt.Sprintf("agg%d", (t-1)/trayGroup+1), Metres: c.InterLinkMetres})
	}
	for g := 1; g <= groups; g++ {
		tree.Links = append(tree.Links, &topology.LinkSpec{A: fmt.Sprintf("agg%d", g), B: "core", Metres: c.InterRackLinkMetres})
	}
	for t := 1; t <= c.Trays; t++ {
		tree.Devices = appendMemory(tree.Devices, fmt.Sprintf("t%d-mem{n}", t), fmt.Sprintf("edge%d", t), mem, cpu*P+1, P, c)
	}
	return &topology.Spec{Name: c.Name + "-fat-tree", Racks: []*topology.RackSpec{pod}, Fabrics: []*topology.FabricSpec{tree}}
}

func ceilDiv(a, b int) int { return (a + b - 1) / b }
