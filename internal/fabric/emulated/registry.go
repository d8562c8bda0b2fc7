package emulated

import (
	"fmt"

	"rackpool/internal/clock"
	"rackpool/internal/fabric"
	"rackpool/internal/inventory"
	"rackpool/internal/topology"
)

// Builder constructs the emulated driver for one fabric of a topology.
type Builder func(top *topology.Topology, f *inventory.Fabric, clk clock.Clock) (fabric.Driver, error)

// Builders maps every fabric kind to its emulated driver's constructor.
// It is the one place a new kind is registered.
var Builders = map[inventory.FabricKind]Builder{
	inventory.PCIeSwitch: func(top *topology.Topology, f *inventory.Fabric, clk clock.Clock) (fabric.Driver, error) {
		return NewPCIe(top, f, clk)
	},
	inventory.SASCircuit: func(top *topology.Topology, f *inventory.Fabric, clk clock.Clock) (fabric.Driver, error) {
		return NewSAS(top, f, clk)
	},
	inventory.OpticalCircuit: func(top *topology.Topology, f *inventory.Fabric, clk clock.Clock) (fabric.Driver, error) {
		return NewOptical(top, f, clk)
	},
	inventory.EthernetVLAN: func(top *topology.Topology, f *inventory.Fabric, clk clock.Clock) (fabric.Driver, error) {
		return NewVLAN(top, f, clk)
	},
	inventory.CXLMemory: func(top *topology.Topology, f *inventory.Fabric, clk clock.Clock) (fabric.Driver, error) {
		return NewCXL(top, f, clk)
	},
}

// New returns the emulated driver for fabric f of top, chosen by f.Kind.
// A nil clk means the wall clock.
func New(top *topology.Topology, f *inventory.Fabric, clk clock.Clock) (fabric.Driver, error) {
	if f == nil {
		return nil, fmt.Errorf("emulated driver: nil fabric")
	}
	build, ok := Builders[f.Kind]
	if !ok {
		return nil, fmt.Errorf("emulated driver for fabric %s: no emulation of kind %q", f.ID, f.Kind)
	}
	return build(top, f, clk)
}

// NewAll returns an emulated driver for every fabric of top, keyed by
// fabric ID. The drivers share clk.
func NewAll(top *topology.Topology, clk clock.Clock) (map[string]fabric.Driver, error) {
	out := make(map[string]fabric.Driver, len(top.Fabrics))
	for _, f := range top.Fabrics {
		d, err := New(top, f, clk)
		if err != nil {
			return nil, err
		}
		out[f.ID] = d
	}
	return out, nil
}
