package sim

import (
	"fmt"
	"strings"

	"rackpool/internal/topology"
)

// Build writes the topology file for c's architecture and network and
// loads it with the live control plane's loader, so the simulator places
// on exactly the model `rackpool serve` would: the same validation, the
// same latency and hop model (topology.Path), the same optical port and
// circuit physics in the scheduler's State.
func Build(c *Config) (*topology.Topology, error) {
	src := TopologyFile(c)
	top, err := topology.Parse(c.Name+"-topology.yaml", src)
	if err != nil {
		return nil, fmt.Errorf("sim: building the %s topology: %w", c.Architecture, err)
	}
	return top, nil
}

// TopologyFile returns the topology file Build loads (`rackpool sim
// --write-topology` shows it; `rackpool serve --topology` accepts it).
func TopologyFile(c *Config) []byte {
	var b strings.Builder
	switch c.Architecture {
	case Traditional:
		writeTraditional(&b, c)
	case RackPools:
		writeRackPools(&b, c)
	case PodPools:
		if c.Network == FatTree {
			writeFatTree(&b, c)
		} else {
			writeMONet(&b, c)
		}
	}
	return []byte(b.String())
}

// writeTraditional: racks of identical servers, no fabrics.
func writeTraditional(b *strings.Builder, c *Config) {
	fmt.Fprintf(b, "name: %s-traditional\nracks:\n", c.Name)
	left := c.Hosts
	for r := 1; left > 0; r++ {
		n := min(left, c.HostsPerRack)
		left -= n
		fmt.Fprintf(b, "  - id: rack%d\n    hosts:\n      - {id: \"r%d-h{n}\", count: %d, cores: %d, memory: %dGiB}\n",
			r, r, n, c.HostCores, c.HostRAMGB)
	}
}

// writeRackPools: per rack, CPU cards with CardPorts optical ports into the
// rack's optical circuit switch (memory nodes with CardPorts ports each)
// and one port into the rack's PCIe switch (GPUs, NVMe drives). Cards keep
// 1 GiB of local memory for their own use; requests' RAM comes from the
// pool.
func writeRackPools(b *strings.Builder, c *Config) {
	fmt.Fprintf(b, "name: %s-rack-pools\nracks:\n", c.Name)
	cards, ports := c.CPUCardsPerRack, c.CardPorts
	devices := c.GPUsPerRack + c.NVMePerRack
	for r := 1; r <= c.Racks; r++ {
		fmt.Fprintf(b, "  - id: rack%d\n    hosts:\n      - id: \"r%d-cpu{n}\"\n        count: %d\n        cores: %d\n        memory: 1GiB\n        ports:\n",
			r, r, cards, c.CardCores)
		for k := range ports {
			fmt.Fprintf(b, "          - {id: ocs%d, fabric: ocs-r%d, port: \"%d\", metres: %g}\n", k+1, r, k*cards+1, c.IntraLinkMetres)
		}
		if devices > 0 {
			fmt.Fprintf(b, "          - {id: pcie, fabric: pcie-r%d, port: \"1\", metres: 1}\n", r)
		}
	}
	b.WriteString("fabrics:\n")
	for r := 1; r <= c.Racks; r++ {
		ocsPorts := (cards + c.MemoryNodesPerRack) * ports
		fmt.Fprintf(b, "  - id: ocs-r%d\n    kind: optical-circuit\n    switches: [{id: sw, ports: %d, latency_ns: %g}]\n    devices:\n",
			r, ocsPorts, c.SwitchLatencyNS)
		writeMemory(b, fmt.Sprintf("r%d-mem{n}", r), "", c.MemoryNodesPerRack, cards*ports+1, ports, c)
		if devices > 0 {
			fmt.Fprintf(b, "  - id: pcie-r%d\n    kind: pcie-switch\n    switches: [{id: sw, ports: %d, latency_ns: 150}]\n    devices:\n",
				r, cards+devices)
			if c.GPUsPerRack > 0 {
				fmt.Fprintf(b, "      - {id: \"r%d-gpu{n}\", count: %d, kind: gpu, model: A100, capacity: 40GiB, port: \"%d\", metres: 1}\n",
					r, c.GPUsPerRack, cards+1)
			}
			if c.NVMePerRack > 0 {
				fmt.Fprintf(b, "      - {id: \"r%d-nvme{n}\", count: %d, kind: nvme, model: PM1733, capacity: %dGB, port: \"%d\", metres: 1}\n",
					r, c.NVMePerRack, c.NVMeGB, cards+c.GPUsPerRack+1)
			}
		}
	}
}

// writeMemory writes count memory nodes named id on switch sw (""
// for a fabric's only switch), each with perNode numeric ports starting at
// first.
func writeMemory(b *strings.Builder, id, sw string, count, first, perNode int, c *Config) {
	if count == 0 {
		return
	}
	ports := make([]string, perNode)
	for k := range ports {
		ports[k] = fmt.Sprintf("%q", fmt.Sprint(first+k))
	}
	swField := ""
	if sw != "" {
		swField = fmt.Sprintf(" switch: %q,", sw)
	}
	fmt.Fprintf(b, "      - {id: %q, count: %d, kind: memory, model: DDR4, capacity: %dGiB, block_size: %dGiB,%s ports: [%s], metres: %g, overhead_ns: %g}\n",
		id, count, c.MemoryNodeGB, c.MemoryBlockGB, swField, strings.Join(ports, ", "), c.IntraLinkMetres, c.ReadOverheadNS)
}

// podCards splits a tray's cards: half CPU cards, half memory cards.
func podCards(c *Config) (cpu, mem int) { return c.CardsPerTray / 2, c.CardsPerTray / 2 }

// writeMONet: P4's 2-tier parallel topology. Planes are independent
// optical fabrics; each has an intra-tray switch per tray and an
// inter-tray tier joined to every intra-tray switch. Every CPU card has
// one port into every plane; each memory card is homed in one plane
// (round robin within its tray) and carries one port per plane on that
// plane's intra-tray switch (the modelling choice of
// examples/monet-pod.yaml). Same tray: 1 hop; other trays: 3.
func writeMONet(b *strings.Builder, c *Config) {
	cpu, mem := podCards(c)
	P := c.Planes
	inter := interSwitches(c.Trays)
	fmt.Fprintf(b, "name: %s-monet\nracks:\n  - id: pod1\n    hosts:\n      - id: \"t{q}-cpu{r}\"\n        count: %d\n        per: %d\n        cores: %d\n        memory: 1GiB\n        ports:\n",
		c.Name, c.Trays*cpu, cpu, c.CardCores)
	for p := 1; p <= P; p++ {
		fmt.Fprintf(b, "          - {id: plane%d, fabric: plane%d, switch: \"p%d-intra{q}\", port: \"{r}\", metres: %g}\n", p, p, p, c.IntraLinkMetres)
	}
	b.WriteString("fabrics:\n")
	for p := 1; p <= P; p++ {
		// Card-facing ports on an intra-tray switch: one per CPU card plus
		// P per memory card homed here; as many uplinks again.
		homed := homedIn(mem, P, p)
		down := cpu + homed*P
		fmt.Fprintf(b, "  - id: plane%d\n    kind: optical-circuit\n    switches:\n", p)
		fmt.Fprintf(b, "      - {id: \"p%d-intra{n}\", count: %d, ports: %d, latency_ns: %g}\n", p, c.Trays, 2*down, c.SwitchLatencyNS)
		fmt.Fprintf(b, "      - {id: \"p%d-inter{n}\", count: %d, ports: %d, latency_ns: %g}\n", p, inter, ceilDiv(c.Trays*down, inter), c.SwitchLatencyNS)
		fmt.Fprintf(b, "    links:\n      - {count: %d, per: %d, a: \"p%d-intra{q}\", b: \"p%d-inter{r}\", metres: %g}\n",
			c.Trays*inter, inter, p, p, c.InterLinkMetres)
		if homed == 0 {
			continue
		}
		b.WriteString("    devices:\n")
		for t := 1; t <= c.Trays; t++ {
			writeMemory(b, fmt.Sprintf("t%d-p%d-mem{n}", t, p), fmt.Sprintf("p%d-intra%d", p, t), homed, cpu+1, P, c)
		}
	}
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

// writeFatTree: the non-parallel baseline. One optical fabric shaped as a
// three-tier tree: an edge switch per tray (cards at 0.25 m, each with
// Planes ports so it has the same transceivers as in MONet), an
// aggregation switch per trayGroup trays (3 m) and a core switch joining
// the aggregation switches (10 m). Same tray: 1 hop; same group: 3; other
// groups: 5.
func writeFatTree(b *strings.Builder, c *Config) {
	cpu, mem := podCards(c)
	P := c.Planes
	groups := ceilDiv(c.Trays, trayGroup)
	fmt.Fprintf(b, "name: %s-fat-tree\nracks:\n  - id: pod1\n    hosts:\n", c.Name)
	for t := 1; t <= c.Trays; t++ {
		fmt.Fprintf(b, "      - id: \"t%d-cpu{n}\"\n        count: %d\n        cores: %d\n        memory: 1GiB\n        ports:\n", t, cpu, c.CardCores)
		for p := 1; p <= P; p++ {
			fmt.Fprintf(b, "          - {id: port%d, fabric: tree, switch: edge%d, port: \"%d\", metres: %g}\n", p, t, (p-1)*cpu+1, c.IntraLinkMetres)
		}
	}
	down := (cpu + mem) * P
	fmt.Fprintf(b, "fabrics:\n  - id: tree\n    kind: optical-circuit\n    switches:\n")
	fmt.Fprintf(b, "      - {id: \"edge{n}\", count: %d, ports: %d, latency_ns: %g}\n", c.Trays, 2*down, c.SwitchLatencyNS)
	fmt.Fprintf(b, "      - {id: \"agg{n}\", count: %d, ports: %d, latency_ns: %g}\n", groups, 2*trayGroup*down, c.SwitchLatencyNS)
	fmt.Fprintf(b, "      - {id: core, ports: %d, latency_ns: %g}\n", c.Trays*down, c.SwitchLatencyNS)
	b.WriteString("    links:\n")
	for t := 1; t <= c.Trays; t++ {
		fmt.Fprintf(b, "      - {a: edge%d, b: agg%d, metres: %g}\n", t, (t-1)/trayGroup+1, c.InterLinkMetres)
	}
	for g := 1; g <= groups; g++ {
		fmt.Fprintf(b, "      - {a: agg%d, b: core, metres: %g}\n", g, c.InterRackLinkMetres)
	}
	b.WriteString("    devices:\n")
	for t := 1; t <= c.Trays; t++ {
		writeMemory(b, fmt.Sprintf("t%d-mem{n}", t), fmt.Sprintf("edge%d", t), mem, cpu*P+1, P, c)
	}
}

func ceilDiv(a, b int) int { return (a + b - 1) / b }
