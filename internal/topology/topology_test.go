package topology

import (
	"strings"
	"testing"

	"rackpool/internal/inventory"
)

func TestExampleRack(t *testing.T) {
	top := LoadDefault()
	if got := len(top.Hosts); got != 4 {
		t.Fatalf("hosts = %d, want 4", got)
	}
	count := map[inventory.Kind]int{}
	for _, b := range top.Blocks {
		count[b.Kind]++
	}
	want := map[inventory.Kind]int{inventory.Compute: 4, inventory.GPU: 8, inventory.NVMe: 4, inventory.NIC: 2,
		inventory.FPGA: 2, inventory.HDD: 16, inventory.SSD: 12, inventory.Memory: 128}
	for k, n := range want {
		if count[k] != n {
			t.Errorf("%s blocks = %d, want %d", k, count[k], n)
		}
	}
	host := func(id string) *inventory.Host { return top.Host(id) }
	blk := func(id string) *inventory.Block { return top.Block(id) }
	// drawer1 is advanced with H1..H3: host4 cannot reach gpu1.
	if _, ok := top.Path(host("host4"), blk("gpu1")); ok {
		t.Error("host4 reaches gpu1 through drawer1, which is cabled to H1-H3 only")
	}
	// drawer2 is standard-two-hosts H2|H4: slots 1-4 to H2, 5-8 to H4.
	if _, ok := top.Path(host("host2"), blk("gpu5")); !ok {
		t.Error("host2 should reach gpu5 (drawer2 slot 1)")
	}
	if _, ok := top.Path(host("host4"), blk("gpu5")); ok {
		t.Error("host4 reaches gpu5, which standard-two-hosts gives to H2")
	}
	if _, ok := top.Path(host("host4"), blk("nvme3")); !ok {
		t.Error("host4 should reach nvme3 (drawer2 slot 5)")
	}
	p, ok := top.Path(host("host1"), blk("gpu1"))
	// 2 m host cable at 5 ns/m + 150 ns switch, both ways.
	if !ok || p.Hops != 1 || p.RTTNS != 2*(150+2*5) {
		t.Errorf("host1->gpu1 = %+v %v, want 1 hop, 320 ns", p, ok)
	}
	p, ok = top.Path(host("host1"), blk("memnode1-b01"))
	if !ok || p.RTTNS != 2*(25+4*5)+37.4 {
		t.Errorf("host1->memnode1 = %+v, want 127.4 ns", p)
	}
}

func TestValidationNamesFileLineField(t *testing.T) {
	base := string(ExampleRack)
	cases := []struct {
		name, old, new, want string
	}{
		{"bad slot", "drawer: drawer1, slot: 8}", "drawer: drawer1, slot: 9}", "fabrics[0].devices[3].slot: slot 9 is outside drawer1's 1..8"},
		{"unknown kind", "kind: sas-circuit", "kind: infiniband", `fabrics[1].kind: unknown fabric kind "infiniband"`},
		{"one-host with two ports", "mode: standard-two-hosts", "mode: standard-one-host", "standard-one-host connects exactly 1 host port"},
		{"advanced with four", "mode: advanced, slots: 8, host_ports: [H1, H2, H3]", "mode: advanced, slots: 8, host_ports: [H1, H2, H3, H4]", "advanced connects 1 to 3 host ports"},
		{"port reuse", `port: "31", metres: 1}`, `port: "12", metres: 1}`, "already used by device hdd2"},
		{"port range", `port: "21", metres: 2}`, `port: "47", metres: 2}`, `switch eth-sw1 has no port "49"`},
		{"unknown field", "cores: 64", "corez: 64", `unknown field "corez"`},
		{"bad size", "capacity: 512GiB, block_size: 8GiB,\n         switch: ocs-sw1, ports: [\"25\"", "capacity: 512GiB, block_size: 7GiB,\n         switch: ocs-sw1, ports: [\"25\"", "block size 7GiB must divide"},
		{"wrong type", "cores: 64", "cores: many", "cannot unmarshal"},
		{"unknown zone host", "hosts: [host1, host2]", "hosts: [host1, host9]", `zones[0].hosts: unknown host "host9"`},
		{"sas carries drives", "kind: hdd, model: HUH721010", "kind: gpu, model: HUH721010", "carries only hdd and ssd"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			src := strings.Replace(base, tc.old, tc.new, 1)
			if src == base {
				t.Fatalf("test edit %q not applied", tc.old)
			}
			_, err := Parse("rack.yaml", []byte(src))
			if err == nil {
				t.Fatal("invalid topology accepted")
			}
			if !strings.HasPrefix(err.Error(), "rack.yaml:") || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %q, want file:line prefix and %q", err, tc.want)
			}
			var te *Error
			if e, ok := err.(*Error); ok {
				te = e
			}
			if te == nil || te.Line < 1 {
				t.Fatalf("error %v has no line", err)
			}
			// The line named must be the line that holds the edit.
			lines := strings.Split(src, "\n")
			if te.Line > len(lines) {
				t.Fatalf("line %d beyond file", te.Line)
			}
		})
	}
}

func TestGenerateRacks(t *testing.T) {
	top, err := Parse("generated", GenerateRacks(3))
	if err != nil {
		t.Fatal(err)
	}
	if len(top.Blocks) != 300 || len(top.Hosts) != 12 {
		t.Fatalf("blocks = %d, hosts = %d; want 300, 12", len(top.Blocks), len(top.Hosts))
	}
	if _, ok := top.Path(top.Host("r1-h1"), top.Block("r2-gpu1")); ok {
		t.Error("a host reaches another rack's GPU")
	}
	if _, ok := top.Path(top.Host("r1-h1"), top.Block("r1-mem-b16")); !ok {
		t.Error("a host cannot reach its rack's memory")
	}
}
