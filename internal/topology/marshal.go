package topology

import (
	"bytes"
	"fmt"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Marshal writes spec as a topology file that Parse accepts and compiles
// to the same model as Compile(spec). Zero fields are left out; mappings
// of plain values (host ports, switches, links, devices, drawers, zones)
// and lists of plain values are written in flow style, one item to a
// line where it fits, the way the example files are written.
func Marshal(spec *Spec) ([]byte, error) {
	if spec == nil {
		return nil, fmt.Errorf("topology: marshal: no spec")
	}
	var doc yaml.Node
	if err := doc.Encode(spec); err != nil {
		return nil, fmt.Errorf("topology: marshal: %w", err)
	}
	flowLeaves(&doc)
	var b bytes.Buffer
	name := spec.Name
	if name == "" {
		name = "topology"
	}
	fmt.Fprintf(&b, "# %s: a rackpool topology file (rackpool serve --topology FILE).\n", strings.ReplaceAll(name, "\n", " "))
	b.WriteString("# Templates: {n} is a copy's number, {q} and {r} the quotient and remainder\n")
	b.WriteString("# of n-1 by per (both from 1).\n")
	enc := yaml.NewEncoder(&b)
	enc.SetIndent(2)
	if err := enc.Encode(&doc); err != nil {
		return nil, fmt.Errorf("topology: marshal: %w", err)
	}
	if err := enc.Close(); err != nil {
		return nil, fmt.Errorf("topology: marshal: %w", err)
	}
	return b.Bytes(), nil
}

// flowLeaves sets flow style, below the document's top mapping, on every
// non-empty sequence of scalars and every mapping whose values are all
// plain: scalars, sequences of scalars or mappings of scalars.
func flowLeaves(doc *yaml.Node) {
	var walk func(n *yaml.Node, top bool)
	walk = func(n *yaml.Node, top bool) {
		for _, c := range n.Content {
			walk(c, n.Kind == yaml.DocumentNode)
		}
		if top || len(n.Content) == 0 {
			return
		}
		switch n.Kind {
		case yaml.SequenceNode:
			if allScalars(n.Content) {
				n.Style = yaml.FlowStyle
			}
		case yaml.MappingNode:
			for i := 1; i < len(n.Content); i += 2 {
				v := n.Content[i]
				switch {
				case v.Kind == yaml.ScalarNode:
				case v.Kind == yaml.SequenceNode && allScalars(v.Content):
				case v.Kind == yaml.MappingNode && allScalars(v.Content):
				default:
					return
				}
			}
			n.Style = yaml.FlowStyle
		}
	}
	walk(doc, false)
}

func allScalars(ns []*yaml.Node) bool {
	for _, n := range ns {
		if n.Kind != yaml.ScalarNode {
			return false
		}
	}
	return true
}
