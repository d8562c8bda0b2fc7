package emulated

import (
	"context"
	"slices"
	"testing"
	"time"

	"rackpool/internal/clock"
	"rackpool/internal/fabric"
	"rackpool/internal/topology"
)

// miniRack is a small topology for the physics the example rack cannot
// show: five hosts, each with a single port into every fabric; an advanced
// drawer cabled to three hosts next to a standard-one-host drawer; a NIC
// shared by up to four hosts on the VLAN fabric; memory nodes with two and
// one OCS ports.
const miniRack = `
name: mini
racks:
  - id: r1
    hosts:
      - id: "h{n}"
        count: 5
        cores: 8
        memory: 64GiB
        ports:
          - {id: pcie, fabric: chassis, port: "H{n}"}
          - {id: eth, fabric: eth, port: "{n}"}
          - {id: ocs, fabric: ocs, port: "{n}"}
fabrics:
  - id: chassis
    kind: pcie-switch
    chassis:
      host_ports: 5
      drawers:
        - {id: adv, mode: advanced, slots: 4, host_ports: [H1, H2, H3]}
        - {id: solo, mode: standard-one-host, slots: 4, host_ports: [H4]}
    devices:
      - {id: "g{n}", count: 2, kind: gpu, link_width: 16, link_speed: 16GT/s, drawer: adv, slot: 1}
      - {id: nicA, kind: nic, drawer: adv, slot: 3, max_compositions: 4}
      - {id: "s{n}", count: 2, kind: gpu, drawer: solo, slot: 1}
  - id: eth
    kind: ethernet-vlan
    switches: [{id: sw, ports: 16}]
    devices:
      - {id: nicE, kind: nic, switch: sw, port: "10", max_compositions: 4}
      - {id: ssdE, kind: ssd, switch: sw, port: "11"}
  - id: ocs
    kind: optical-circuit
    switches: [{id: o, ports: 32}]
    devices:
      - {id: mA, kind: memory, capacity: 32GiB, block_size: 8GiB, switch: o, ports: ["20", "21"]}
      - {id: mB, kind: memory, capacity: 32GiB, block_size: 8GiB, switch: o, ports: ["22"]}
`

func mini(t *testing.T) *topology.Topology {
	t.Helper()
	top, err := topology.Parse("mini.yaml", []byte(miniRack))
	if err != nil {
		t.Fatal(err)
	}
	return top
}

// run applies steps to d in order and checks each one's error, that a
// refused step returns a zero Result, and, where took is set, its time.
func run(t *testing.T, d fabric.Driver, steps []step) {
	t.Helper()
	for i, s := range steps {
		r := s.run(t, d)
		if s.err != nil {
			if r != (fabric.Result{}) {
				t.Errorf("step %d: refused %s %v returned %+v", i, s.op, s.a, r)
			}
			continue
		}
		if s.took != 0 && r.Took != s.took {
			t.Errorf("step %d: %s %v took %v, want %v", i, s.op, s.a, r.Took, s.took)
		}
	}
}

func attachOK(a fabric.Attachment) step             { return step{op: "attach", a: a} }
func detachOK(a fabric.Attachment) step             { return step{op: "detach", a: a} }
func attachErr(a fabric.Attachment, err error) step { return step{op: "attach", a: a, err: err} }

func TestPCIeDrawerModes(t *testing.T) {
	cases := []struct {
		name  string
		mini  bool
		steps []step
	}{
		{"host4 is not cabled to advanced drawer1", false, []step{
			attachErr(at("gpu1", "host4", "pcie"), fabric.ErrUnreachable),
		}},
		{"drawer2 standard-two-hosts: slots 1-4 only via H2", false, []step{
			attachErr(at("gpu5", "host4", "pcie"), fabric.ErrUnreachable),
			attachErr(at("gpu8", "host4", "pcie"), fabric.ErrUnreachable),
			attachOK(at("gpu5", "host2", "pcie")),
			attachOK(at("gpu8", "host2", "pcie")),
		}},
		{"drawer2 standard-two-hosts: slots 5-8 only via H4", false, []step{
			attachErr(at("nvme3", "host2", "pcie"), fabric.ErrUnreachable),
			attachOK(at("nvme3", "host4", "pcie")),
			attachOK(at("fpga2", "host4", "pcie")),
		}},
		{"advanced drawer1 moves a device between hosts", false, []step{
			attachOK(at("gpu1", "host1", "pcie")),
			attachErr(at("gpu1", "host2", "pcie"), fabric.ErrInUse),
			detachOK(at("gpu1", "host1", "pcie")),
			attachOK(at("gpu1", "host2", "pcie")),
		}},
		{"shared nic1 on every host drawer1 reaches", false, []step{
			attachOK(at("nic1", "host1", "pcie")),
			attachOK(at("nic1", "host2", "pcie")),
			attachOK(at("nic1", "host3", "pcie")),
			attachErr(at("nic1", "host4", "pcie"), fabric.ErrUnreachable),
		}},
		{"advanced drawer serves three hosts", true, []step{
			attachOK(at("g1", "h1", "pcie")),
			attachOK(at("g2", "h2", "pcie")),
			attachOK(at("nicA", "h3", "pcie")),
			attachOK(at("nicA", "h1", "pcie")),
			attachErr(at("nicA", "h4", "pcie"), fabric.ErrUnreachable),
		}},
		{"standard-one-host drawer serves its one host", true, []step{
			attachOK(at("s1", "h4", "pcie")),
			attachOK(at("s2", "h4", "pcie")),
			attachErr(at("s1", "h1", "pcie"), fabric.ErrUnreachable),
			attachErr(at("g1", "h4", "pcie"), fabric.ErrUnreachable),
			attachErr(at("s1", "h5", "pcie"), fabric.ErrUnreachable),
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			top, fab := topology.LoadDefault(), "falcon1"
			if c.mini {
				top, fab = mini(t), "chassis"
			}
			d, err := NewPCIe(top, top.Fabric(fab), clock.NewManual(epoch))
			if err != nil {
				t.Fatal(err)
			}
			run(t, d, c.steps)
		})
	}
}

// TestPCIeDrawerHostLimit checks the advanced mode's three-host limit. A
// validated topology cables at most three host ports to an advanced
// drawer, so the limit cannot bind through reachability alone; the test
// recables a fourth port into the parsed drawer, as a chassis whose cabling
// changed under the control plane would look.
func TestPCIeDrawerHostLimit(t *testing.T) {
	top := mini(t)
	f := top.Fabric("chassis")
	adv := f.Drawers[0]
	adv.HostPorts = append(adv.HostPorts, "H4")
	d, err := NewPCIe(top, f, clock.NewManual(epoch))
	if err != nil {
		t.Fatal(err)
	}
	run(t, d, []step{
		attachOK(at("g1", "h1", "pcie")),
		attachOK(at("g2", "h2", "pcie")),
		attachOK(at("nicA", "h3", "pcie")),
		attachOK(at("s1", "h4", "pcie")), // another drawer: does not count
		attachErr(at("nicA", "h4", "pcie"), fabric.ErrDrawerHosts),
		attachOK(at("nicA", "h1", "pcie")), // h1 already counted
	})
	if got, want := d.DrawerHosts("adv"), []string{"h1", "h2", "h3"}; !slices.Equal(got, want) {
		t.Fatalf("DrawerHosts(adv) = %v, want %v", got, want)
	}
	run(t, d, []step{
		detachOK(at("nicA", "h3", "pcie")),
		attachOK(at("nicA", "h4", "pcie")),
		attachErr(at("nicA", "h3", "pcie"), fabric.ErrDrawerHosts),
	})
}

func TestSASPartialRemap(t *testing.T) {
	top := topology.LoadDefault()
	clk := clock.NewManual(epoch)
	d, err := NewSAS(top, top.Fabric("sas1"), clk)
	if err != nil {
		t.Fatal(err)
	}
	run(t, d, []step{
		attachOK(at("hdd1", "host1", "sas")),
		attachOK(at("hdd2", "host1", "sas")), // wide port: many drives per host port
		attachOK(at("ssd1", "host2", "sas")),
	})
	before := map[string]Mapping{}
	for _, m := range d.Mappings() {
		before[m.Block] = m
	}
	if len(before) != 3 {
		t.Fatalf("Mappings = %v, want 3", d.Mappings())
	}
	run(t, d, []step{
		attachErr(at("hdd1", "host2", "sas"), fabric.ErrInUse), // a drive maps to one host port
		attachOK(at("hdd3", "host3", "sas")),
		detachOK(at("hdd2", "host1", "sas")),
		attachOK(at("hdd2", "host4", "sas")), // remap one drive
	})
	for _, b := range []string{"hdd1", "ssd1"} {
		port, since, ok := d.Mapping(b)
		if !ok || since != before[b].Since || port != before[b].Host+"/"+before[b].HostPort {
			t.Errorf("Mapping(%s) = %s %v %v, want %s/%s since %v: another drive's remap interrupted it",
				b, port, since, ok, before[b].Host, before[b].HostPort, before[b].Since)
		}
	}
	after := map[string]Mapping{}
	for _, m := range d.Mappings() {
		after[m.Block] = m
	}
	for _, b := range []string{"hdd1", "ssd1"} {
		if after[b] != before[b] {
			t.Errorf("mapping of %s changed from %+v to %+v", b, before[b], after[b])
		}
	}
	if port, since, ok := d.Mapping("hdd2"); !ok || port != "host4/sas" || !since.After(before["hdd2"].Since) {
		t.Errorf("Mapping(hdd2) = %s %v %v, want host4/sas, newer than the first mapping", port, since, ok)
	}
	if after["hdd2"].Generation <= before["hdd2"].Generation {
		t.Errorf("remapped hdd2 kept generation %d", after["hdd2"].Generation)
	}
	if _, _, ok := d.Mapping("hdd9"); ok {
		t.Error("Mapping(hdd9) found a mapping for an unmapped drive")
	}
}

func TestOpticalCircuits(t *testing.T) {
	ms := time.Millisecond
	top := mini(t)
	clk := clock.NewManual(epoch)
	d, err := NewOptical(top, top.Fabric("ocs"), clk)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	circuits := func(want ...Circuit) {
		t.Helper()
		got := d.Circuits()
		for i := range got {
			got[i].Since = time.Time{}
		}
		if !slices.Equal(got, want) {
			t.Fatalf("Circuits = %+v, want %+v", got, want)
		}
	}
	// h1 has a single OCS port: it holds one circuit, to one memory node.
	run(t, d, []step{
		{op: "attach", a: at("mA-b01", "h1", "ocs"), took: 25 * ms},
		{op: "attach", a: at("mA-b02", "h1", "ocs"), took: 0},
		attachErr(at("mB-b01", "h1", "ocs"), fabric.ErrPortBusy),
	})
	circuits(Circuit{Host: "h1", HostPort: "ocs", SwitchPort: "1", Device: "mA", DevicePort: "20", Blocks: 2})
	if r, err := d.Detach(ctx, at("mA-b01", "h1", "ocs")); err != nil || r != (fabric.Result{Changed: true}) {
		t.Fatalf("Detach of one of two blocks = %+v, %v; want Changed with no time", r, err)
	}
	circuits(Circuit{Host: "h1", HostPort: "ocs", SwitchPort: "1", Device: "mA", DevicePort: "20", Blocks: 1})
	attachErr(at("mB-b01", "h1", "ocs"), fabric.ErrPortBusy).run(t, d)
	if r, err := d.Detach(ctx, at("mA-b02", "h1", "ocs")); err != nil || r != (fabric.Result{Took: 25 * ms, Changed: true}) {
		t.Fatalf("Detach of the last block = %+v, %v; want a 25ms teardown", r, err)
	}
	circuits()
	// Now h1's port is free for the other node; device ports run out.
	run(t, d, []step{
		attachOK(at("mB-b01", "h1", "ocs")),
		attachErr(at("mB-b02", "h2", "ocs"), fabric.ErrPortBusy), // mB has one port
		attachOK(at("mA-b01", "h2", "ocs")),
		attachOK(at("mA-b02", "h3", "ocs")),
		attachErr(at("mA-b03", "h4", "ocs"), fabric.ErrPortBusy), // mA has two
		attachErr(at("mA-b01", "h4", "ocs"), fabric.ErrInUse),    // memory blocks are exclusive
	})
	circuits(
		Circuit{Host: "h1", HostPort: "ocs", SwitchPort: "1", Device: "mB", DevicePort: "22", Blocks: 1},
		Circuit{Host: "h2", HostPort: "ocs", SwitchPort: "2", Device: "mA", DevicePort: "20", Blocks: 1},
		Circuit{Host: "h3", HostPort: "ocs", SwitchPort: "3", Device: "mA", DevicePort: "21", Blocks: 1},
	)
	if got := clk.Now().Sub(epoch); got != 5*25*ms {
		t.Errorf("clock advanced %v, want 5 circuit changes of 25ms", got)
	}
}

func TestOpticalTwoPortsTwoNodes(t *testing.T) {
	top := topology.LoadDefault()
	d, err := NewOptical(top, top.Fabric("ocs1"), clock.NewManual(epoch))
	if err != nil {
		t.Fatal(err)
	}
	run(t, d, []step{
		attachOK(at("memnode1-b01", "host1", "ocs-a")),
		attachErr(at("memnode2-b01", "host1", "ocs-a"), fabric.ErrPortBusy),
		attachOK(at("memnode2-b01", "host1", "ocs-b")), // a second port reaches a second node
	})
	if n := len(d.Circuits()); n != 2 {
		t.Fatalf("%d circuits, want 2", n)
	}
}

func TestVLANMembership(t *testing.T) {
	top := topology.LoadDefault()
	d, err := NewVLAN(top, top.Fabric("vlan1"), clock.NewManual(epoch))
	if err != nil {
		t.Fatal(err)
	}
	for i, h := range []string{"host1", "host2", "host3", "host4"} {
		if id, ok := d.VLANOf(h, "eth"); !ok || id != FirstVLAN+i {
			t.Errorf("VLANOf(%s) = %d, %v; want %d", h, id, ok, FirstVLAN+i)
		}
	}
	run(t, d, []step{
		attachOK(at("essd1", "host1", "eth")),
		attachOK(at("essd2", "host1", "eth")),
		attachOK(at("essd3", "host2", "eth")),
		attachErr(at("essd1", "host2", "eth"), fabric.ErrInUse), // an exclusive port is in one VLAN
	})
	want := map[int][]string{
		100: {"eth-sw1/1", "eth-sw1/21", "eth-sw1/22"},
		101: {"eth-sw1/2", "eth-sw1/23"},
		102: {"eth-sw1/3"},
		103: {"eth-sw1/4"},
	}
	check := func() {
		t.Helper()
		got := d.VLANs()
		if len(got) != len(want) {
			t.Fatalf("VLANs = %v, want %v", got, want)
		}
		for id, m := range want {
			if !slices.Equal(got[id], m) {
				t.Errorf("VLAN %d = %v, want %v", id, got[id], m)
			}
		}
	}
	check()
	run(t, d, []step{
		detachOK(at("essd1", "host1", "eth")),
		attachOK(at("essd1", "host2", "eth")),
	})
	want[100] = []string{"eth-sw1/1", "eth-sw1/22"}
	want[101] = []string{"eth-sw1/2", "eth-sw1/21", "eth-sw1/23"}
	check()
}

func TestSharedNICLimit(t *testing.T) {
	top := mini(t)
	d, err := NewVLAN(top, top.Fabric("eth"), clock.NewManual(epoch))
	if err != nil {
		t.Fatal(err)
	}
	run(t, d, []step{
		attachOK(at("nicE", "h1", "eth")),
		attachOK(at("nicE", "h2", "eth")),
		attachOK(at("nicE", "h3", "eth")),
		attachOK(at("nicE", "h4", "eth")),
		attachErr(at("nicE", "h5", "eth"), fabric.ErrInUse), // max_compositions: 4
		attachOK(at("ssdE", "h5", "eth")),
		attachErr(at("ssdE", "h1", "eth"), fabric.ErrInUse), // exclusive
	})
	vl := d.VLANs()
	for i := range 4 {
		if !slices.Contains(vl[FirstVLAN+i], "sw/10") {
			t.Errorf("VLAN %d = %v, want the shared NIC's port sw/10 in it", FirstVLAN+i, vl[FirstVLAN+i])
		}
	}
	run(t, d, []step{
		detachOK(at("nicE", "h2", "eth")),
		attachOK(at("nicE", "h5", "eth")),
	})
}
