package sim

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"rackpool/internal/redfish"
	"rackpool/internal/topology"
)

// buildConfigs are small configurations of every architecture and network.
func buildConfigs() map[string]Config {
	out := map[string]Config{}
	c := Defaults()
	c.Architecture, c.Hosts, c.HostsPerRack = Traditional, 95, 40
	out["traditional"] = c

	c = Defaults()
	c.Architecture, c.Racks = RackPools, 3
	out["rack with GPUs and NVMe"] = c
	c.GPUsPerRack, c.NVMePerRack = 0, 0
	out["rack without devices"] = c
	c.GPUsPerRack = 2
	out["rack with GPUs only"] = c

	c = Defaults()
	c.Trays, c.CardsPerTray, c.Planes = 5, 10, 3
	out["pod monet"] = c
	c.Trays, c.CardsPerTray, c.Planes = 1, 2, 3 // memory cards in fewer planes than there are
	out["pod monet, one tray"] = c

	c = Defaults()
	c.Network, c.Trays, c.CardsPerTray = FatTree, 9, 8
	out["pod fat-tree"] = c
	return out
}

// TestBuildMatchesTopologyFile checks that the model Build compiles from
// the Spec is the model `rackpool serve --topology` loads from the file
// `rackpool sim --write-topology` writes.
func TestBuildMatchesTopologyFile(t *testing.T) {
	for name, c := range buildConfigs() {
		t.Run(name, func(t *testing.T) {
			if err := c.Validate(); err != nil {
				t.Fatal(err)
			}
			built, err := Build(&c)
			if err != nil {
				t.Fatal(err)
			}
			file := TopologyFile(&c)
			parsed, err := topology.Parse("sim.yaml", file)
			if err != nil {
				t.Fatalf("the written topology does not load: %v\n%s", err, file)
			}
			bv, _ := json.Marshal(redfish.TopologyView(built))
			pv, _ := json.Marshal(redfish.TopologyView(parsed))
			if !bytes.Equal(bv, pv) {
				t.Errorf("views differ:\nbuilt  %s\nparsed %s", bv, pv)
			}
			if got, want := blockList(parsed), blockList(built); got != want {
				t.Errorf("blocks differ:\nbuilt\n%s\nparsed\n%s", want, got)
			}
			if got, want := hostPorts(parsed), hostPorts(built); got != want {
				t.Errorf("host ports differ:\nbuilt\n%s\nparsed\n%s", want, got)
			}
			if len(built.Hosts) == 0 || len(built.Blocks) <= len(built.Hosts) && c.Architecture != Traditional {
				t.Errorf("%d hosts, %d blocks: the topology is empty", len(built.Hosts), len(built.Blocks))
			}
		})
	}
}

func blockList(top *topology.Topology) string {
	var b strings.Builder
	for _, blk := range top.Blocks {
		fmt.Fprintf(&b, "%s %s %d %d\n", blk.ID, blk.Kind, blk.CapacityBytes, blk.MaxCompositions)
	}
	return b.String()
}

func hostPorts(top *topology.Topology) string {
	var b strings.Builder
	for _, h := range top.Hosts {
		fmt.Fprintf(&b, "%s:", h.ID)
		for _, p := range h.Ports {
			fmt.Fprintf(&b, " %s=%s/%s/%s@%gm", p.ID, p.Fabric.ID, p.Switch.ID, p.Port, p.Metres)
		}
		b.WriteByte('\n')
	}
	return b.String()
}

// TestTopologySpecIsCompact checks that the spec stays templated: a pod
// of thousands of cards is a handful of host entries and one memory entry
// per tray and plane.
func TestTopologySpecIsCompact(t *testing.T) {
	c := Defaults()
	c.Trays, c.CardsPerTray, c.Planes = 512, 24, 8
	s := TopologySpec(&c)
	hosts := 0
	for _, r := range s.Racks {
		hosts += len(r.Hosts)
	}
	devices := 0
	for _, f := range s.Fabrics {
		devices += len(f.Devices)
	}
	if hosts != 1 || devices != c.Trays*c.Planes {
		t.Errorf("%d host entries, %d device entries; want 1 and %d", hosts, devices, c.Trays*c.Planes)
	}
}

// TestLargestSwitch: the switch size Validate checks against the limit is
// the largest switch the builders make, and a pod that needs one past the
// limit is refused by Validate, naming trays, not by the topology compiler.
func TestLargestSwitch(t *testing.T) {
	for _, net := range []string{MONet, FatTree} {
		for _, dims := range [][3]int{{1, 2, 1}, {1, 2, 3}, {5, 10, 3}, {9, 8, 8}, {64, 24, 8}, {3, 30, 4}, {400, 24, 8}} {
			c := Defaults()
			c.Network, c.Trays, c.CardsPerTray, c.Planes = net, dims[0], dims[1], dims[2]
			name, want := largestSwitch(&c)
			got := 0
			for _, f := range TopologySpec(&c).Fabrics {
				for _, s := range f.Switches {
					got = max(got, s.Ports)
				}
			}
			if got != want {
				t.Errorf("%s %v: largestSwitch = %s with %d ports, the builder's largest has %d", net, dims, name, want, got)
			}
		}
	}
	c := Defaults()
	c.Network, c.Trays, c.CardsPerTray, c.Planes = FatTree, 4096, 24, 8
	err := c.Validate()
	if err == nil || !strings.Contains(err.Error(), "trays: a fat-tree pod of 4096 trays") || !strings.Contains(err.Error(), "core switch of 786432 ports") {
		t.Errorf("Validate of a fat tree past the switch limit = %v", err)
	}
	c.Network = MONet
	if err := c.Validate(); err != nil {
		t.Errorf("Validate of the P4-scale MONet pod = %v", err)
	}
}
