package topology_test

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"rackpool/examples"
	"rackpool/internal/redfish"
	"rackpool/internal/topology"
)

func viewJSON(t *testing.T, top *topology.Topology) []byte {
	t.Helper()
	b, err := json.Marshal(redfish.TopologyView(top))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestCompileMarshalParseAgree checks, on the shipped examples, that a
// file decoded to a Spec compiles to the model Parse builds, and that the
// Spec written back with Marshal parses to the same model again.
func TestCompileMarshalParseAgree(t *testing.T) {
	for name, src := range map[string][]byte{"rack.yaml": examples.Rack, "monet-pod.yaml": examples.MONetPod, "cxl-rack.yaml": examples.CXLRack} {
		t.Run(name, func(t *testing.T) {
			parsed, err := topology.Parse(name, src)
			if err != nil {
				t.Fatal(err)
			}
			spec, err := topology.Decode(name, src)
			if err != nil {
				t.Fatal(err)
			}
			compiled, err := topology.Compile(name, spec)
			if err != nil {
				t.Fatal(err)
			}
			out, err := topology.Marshal(spec)
			if err != nil {
				t.Fatal(err)
			}
			reparsed, err := topology.Parse("marshalled-"+name, out)
			if err != nil {
				t.Fatalf("topology.Marshal's output does not parse: %v\n%s", err, out)
			}
			want := viewJSON(t, parsed)
			for what, top := range map[string]*topology.Topology{"topology.Compile": compiled, "topology.Parse(topology.Marshal)": reparsed} {
				if got := viewJSON(t, top); !bytes.Equal(got, want) {
					t.Errorf("%s differs from topology.Parse:\n got %s\nwant %s", what, got, want)
				}
				if len(top.Blocks) != len(parsed.Blocks) {
					t.Errorf("%s: %d blocks, topology.Parse %d", what, len(top.Blocks), len(parsed.Blocks))
				}
			}
			// topology.Marshal is stable: the re-decoded spec writes the same file.
			again, err := topology.Decode("again", out)
			if err != nil {
				t.Fatal(err)
			}
			out2, err := topology.Marshal(again)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(out, out2) {
				t.Errorf("topology.Marshal(topology.Decode(topology.Marshal(spec))) differs from topology.Marshal(spec):\n%s\n---\n%s", out, out2)
			}
		})
	}
}

// TestCompileErrorsNameTheField checks that a Spec built in code, which has
// no lines, gets errors naming the file and the field path.
func TestCompileErrorsNameTheField(t *testing.T) {
	spec := func() *topology.Spec {
		return &topology.Spec{
			Name: "gen",
			Racks: []*topology.RackSpec{{ID: "r1", Hosts: []*topology.HostSpec{{ID: "h{n}", Count: 2, Cores: 4, Memory: "8GiB",
				Ports: []*topology.HostPortSpec{{Fabric: "ocs", Port: "1"}}}}}},
			Fabrics: []*topology.FabricSpec{{ID: "ocs", Kind: "optical-circuit",
				Switches: []*topology.SwitchSpec{{ID: "sw", Ports: 8, LatencyNS: 25}},
				Devices:  []*topology.DeviceSpec{{ID: "mem", Kind: "memory", Capacity: "16GiB", BlockSize: "4GiB", Ports: []string{"5"}}}}},
		}
	}
	if top, err := topology.Compile("gen.yaml", spec()); err != nil || len(top.Blocks) != 2+4 {
		t.Fatalf("valid spec: %v", err)
	}
	cases := []struct {
		name   string
		mutate func(s *topology.Spec)
		want   string
	}{
		{"device without port", func(s *topology.Spec) { s.Fabrics[0].Devices[0].Ports = nil },
			"gen.yaml: fabrics[0].devices[0].port: a device needs a switch port"},
		{"port taken", func(s *topology.Spec) { s.Fabrics[0].Devices[0].Ports = []string{"2"} },
			"gen.yaml: racks[0].hosts[0].ports[0].port: port 2 of switch sw is already used by device mem"},
		{"unknown fabric", func(s *topology.Spec) { s.Racks[0].Hosts[0].Ports[0].Fabric = "pcie" },
			`gen.yaml: racks[0].hosts[0].ports[0].fabric: unknown fabric "pcie"`},
		{"nil device", func(s *topology.Spec) { s.Fabrics[0].Devices = append(s.Fabrics[0].Devices, nil) },
			"gen.yaml: fabrics[0].devices[1]: empty device"},
		{"nil host port", func(s *topology.Spec) { s.Racks[0].Hosts[0].Ports = append(s.Racks[0].Hosts[0].Ports, nil) },
			"gen.yaml: racks[0].hosts[0].ports[1]: empty host port"},
	}
	for _, tc := range cases {
		s := spec()
		tc.mutate(s)
		_, err := topology.Compile("gen.yaml", s)
		if err == nil || err.Error() != tc.want {
			t.Errorf("%s: got %v, want %s", tc.name, err, tc.want)
		}
	}
	if _, err := topology.Compile("gen.yaml", nil); err == nil {
		t.Error("topology.Compile(nil) succeeded")
	}
}

// TestEmptyListEntries checks that an empty list item in a file is an
// error with its line, not a crash.
func TestEmptyListEntries(t *testing.T) {
	for src, want := range map[string]string{
		"racks:\n  -\n":                            "x.yaml:1: racks[0]: empty rack",
		"name: x\nfabrics:\n  -\n":                 "x.yaml:2: fabrics[0]: empty fabric",
		"racks:\n  - id: r\n    hosts:\n      -\n": "x.yaml:3: racks[0].hosts[0]: empty host",
	} {
		_, err := topology.Parse("x.yaml", []byte(src))
		if err == nil || err.Error() != want {
			t.Errorf("%q: got %v, want %s", src, err, want)
		}
	}
}

// TestMarshalIsATopologyFile checks topology.Marshal's header and that zero fields
// are left out.
func TestMarshalIsATopologyFile(t *testing.T) {
	spec, err := topology.Decode("rack.yaml", examples.Rack)
	if err != nil {
		t.Fatal(err)
	}
	out, err := topology.Marshal(spec)
	if err != nil {
		t.Fatal(err)
	}
	s := string(out)
	if !strings.HasPrefix(s, "# example-rack: ") {
		t.Errorf("no header comment:\n%s", s)
	}
	for _, zero := range []string{": 0\n", ": 0,", ": \"\"", "count: 0", "null"} {
		if strings.Contains(s, zero) {
			t.Errorf("topology.Marshal wrote a zero field (%q):\n%s", zero, s)
		}
	}
}
