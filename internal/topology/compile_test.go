package topology

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"rackpool/examples"
)

func viewJSON(t *testing.T, top *Topology) []byte {
	t.Helper()
	b, err := json.Marshal(top.View())
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
			parsed, err := Parse(name, src)
			if err != nil {
				t.Fatal(err)
			}
			spec, err := Decode(name, src)
			if err != nil {
				t.Fatal(err)
			}
			compiled, err := Compile(name, spec)
			if err != nil {
				t.Fatal(err)
			}
			out, err := Marshal(spec)
			if err != nil {
				t.Fatal(err)
			}
			reparsed, err := Parse("marshalled-"+name, out)
			if err != nil {
				t.Fatalf("Marshal's output does not parse: %v\n%s", err, out)
			}
			want := viewJSON(t, parsed)
			for what, top := range map[string]*Topology{"Compile": compiled, "Parse(Marshal)": reparsed} {
				if got := viewJSON(t, top); !bytes.Equal(got, want) {
					t.Errorf("%s differs from Parse:\n got %s\nwant %s", what, got, want)
				}
				if len(top.Blocks) != len(parsed.Blocks) {
					t.Errorf("%s: %d blocks, Parse %d", what, len(top.Blocks), len(parsed.Blocks))
				}
			}
			// Marshal is stable: the re-decoded spec writes the same file.
			again, err := Decode("again", out)
			if err != nil {
				t.Fatal(err)
			}
			out2, err := Marshal(again)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(out, out2) {
				t.Errorf("Marshal(Decode(Marshal(spec))) differs from Marshal(spec):\n%s\n---\n%s", out, out2)
			}
		})
	}
}

// TestCompileErrorsNameTheField checks that a Spec built in code, which has
// no lines, gets errors naming the file and the field path.
func TestCompileErrorsNameTheField(t *testing.T) {
	spec := func() *Spec {
		return &Spec{
			Name: "gen",
			Racks: []*RackSpec{{ID: "r1", Hosts: []*HostSpec{{ID: "h{n}", Count: 2, Cores: 4, Memory: "8GiB",
				Ports: []*HostPortSpec{{Fabric: "ocs", Port: "1"}}}}}},
			Fabrics: []*FabricSpec{{ID: "ocs", Kind: "optical-circuit",
				Switches: []*SwitchSpec{{ID: "sw", Ports: 8, LatencyNS: 25}},
				Devices:  []*DeviceSpec{{ID: "mem", Kind: "memory", Capacity: "16GiB", BlockSize: "4GiB", Ports: []string{"5"}}}}},
		}
	}
	if top, err := Compile("gen.yaml", spec()); err != nil || len(top.Blocks) != 2+4 {
		t.Fatalf("valid spec: %v", err)
	}
	cases := []struct {
		name   string
		mutate func(s *Spec)
		want   string
	}{
		{"device without port", func(s *Spec) { s.Fabrics[0].Devices[0].Ports = nil },
			"gen.yaml: fabrics[0].devices[0].port: a device needs a switch port"},
		{"port taken", func(s *Spec) { s.Fabrics[0].Devices[0].Ports = []string{"2"} },
			"gen.yaml: racks[0].hosts[0].ports[0].port: port 2 of switch sw is already used by device mem"},
		{"unknown fabric", func(s *Spec) { s.Racks[0].Hosts[0].Ports[0].Fabric = "pcie" },
			`gen.yaml: racks[0].hosts[0].ports[0].fabric: unknown fabric "pcie"`},
		{"nil device", func(s *Spec) { s.Fabrics[0].Devices = append(s.Fabrics[0].Devices, nil) },
			"gen.yaml: fabrics[0].devices[1]: empty device"},
		{"nil host port", func(s *Spec) { s.Racks[0].Hosts[0].Ports = append(s.Racks[0].Hosts[0].Ports, nil) },
			"gen.yaml: racks[0].hosts[0].ports[1]: empty host port"},
	}
	for _, tc := range cases {
		s := spec()
		tc.mutate(s)
		_, err := Compile("gen.yaml", s)
		if err == nil || err.Error() != tc.want {
			t.Errorf("%s: got %v, want %s", tc.name, err, tc.want)
		}
	}
	if _, err := Compile("gen.yaml", nil); err == nil {
		t.Error("Compile(nil) succeeded")
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
		_, err := Parse("x.yaml", []byte(src))
		if err == nil || err.Error() != want {
			t.Errorf("%q: got %v, want %s", src, err, want)
		}
	}
}

// TestMarshalIsATopologyFile checks Marshal's header and that zero fields
// are left out.
func TestMarshalIsATopologyFile(t *testing.T) {
	spec, err := Decode("rack.yaml", examples.Rack)
	if err != nil {
		t.Fatal(err)
	}
	out, err := Marshal(spec)
	if err != nil {
		t.Fatal(err)
	}
	s := string(out)
	if !strings.HasPrefix(s, "# example-rack: ") {
		t.Errorf("no header comment:\n%s", s)
	}
	for _, zero := range []string{": 0\n", ": 0,", ": \"\"", "count: 0", "null"} {
		if strings.Contains(s, zero) {
			t.Errorf("Marshal wrote a zero field (%q):\n%s", zero, s)
		}
	}
}
