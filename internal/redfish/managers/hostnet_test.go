package managers

import (
	"net"
	"slices"
	"strings"
	"testing"
)

func TestParseRoutes(t *testing.T) {
	const table = `Iface	Destination	Gateway 	Flags	RefCnt	Use	Metric	Mask		MTU	Window	IRTT
eth0	00000000	010200C0	0003	0	0	100	00000000	0	0	0
eth0	000200C0	00000000	0001	0	0	0	00FFFFFF	0	0	0
eth0	00000000	FE0200C0	0003	0	0	50	00000000	0	0	0
eth1	00000000	0101A8C0	0001	0	0	0	00000000	0	0	0
eth2	00000000	0A0A0A0A	0003	0	0	0	00000080	0	0	0
wg0	00000000	0100000A	0003	0	0	0	00000000	0	0	0
`
	got := parseRoutes(strings.NewReader(table))
	want := map[string]string{"eth0": "192.0.2.254", "wg0": "10.0.0.1"} // eth1: no gateway flag; eth2: not a default route
	if len(got) != len(want) {
		t.Fatalf("gateways %v, want %v", got, want)
	}
	for iface, gw := range want {
		if got[iface].String() != gw {
			t.Errorf("%s: %v, want %s", iface, got[iface], gw)
		}
	}
	if got := parseRoutes(strings.NewReader("")); len(got) != 0 {
		t.Errorf("empty table: %v", got)
	}
}

func TestParseResolv(t *testing.T) {
	got := parseResolv(strings.NewReader("# comment\nsearch example.org\nnameserver 192.0.2.53\nnameserver 2001:db8::53\nnameserver bogus\noptions edns0\n"))
	if want := []string{"192.0.2.53", "2001:db8::53"}; !slices.Equal(got, want) {
		t.Errorf("%v, want %v", got, want)
	}
}

func TestParseRoutes6(t *testing.T) {
	const table = `00000000000000000000000000000000 00 00000000000000000000000000000000 00 fe800000000000000000000000000001 00000400 00000001 00000000 00450003 eth0
00000000000000000000000000000000 00 00000000000000000000000000000000 00 fe800000000000000000000000000002 00000100 00000001 00000000 00450003 eth0
20010db8000000000000000000000000 40 00000000000000000000000000000000 00 00000000000000000000000000000000 00000100 00000001 00000000 00000001 eth0
00000000000000000000000000000000 00 00000000000000000000000000000000 00 00000000000000000000000000000000 ffffffff 00000001 00000000 00200200 lo
`
	got := parseRoutes6(strings.NewReader(table))
	if len(got) != 1 || got["eth0"].String() != "fe80::2" { // the lower metric; lo's is no gateway route
		t.Errorf("gateways %v", got)
	}
}

func TestParseVLANs(t *testing.T) {
	const config = `VLAN Dev name	 | VLAN ID
Name-Type: VLAN_NAME_TYPE_RAW_PLUS_VID_NO_PAD
eth0.100       | 100  | eth0
mgmt           | 4094  | eth1
bad            | 5000  | eth1
`
	got := parseVLANs(strings.NewReader(config))
	if len(got) != 2 || got["eth0.100"] != 100 || got["mgmt"] != 4094 {
		t.Errorf("VLANs %v", got)
	}
}

func TestVLANAndStaticGateways(t *testing.T) {
	n := netInterface{}
	n.Name = "eth0.100"
	h := hostNet{vlans: map[string]int{"eth0.100": 100}, gateways6: map[string]net.IP{"eth0.100": net.ParseIP("fe80::1")}}
	body := ethernetInterfaceBody(n, h)
	if v := body["VLAN"].(map[string]any); v["VLANEnable"] != true || v["VLANId"] != 100 || v["Tagged"] != true {
		t.Errorf("a VLAN device: %v", v)
	}
	if g := body["IPv6StaticDefaultGateways"].([]map[string]any); len(g) != 1 || g[0]["Address"] != "fe80::1" {
		t.Errorf("IPv6StaticDefaultGateways %v", g)
	}
	n.Name = "eth0"
	body = ethernetInterfaceBody(n, h)
	if v := body["VLAN"].(map[string]any); v["VLANEnable"] != false || v["VLANId"] != 0 || v["Tagged"] != false {
		t.Errorf("an untagged interface: %v", v)
	}
	if g := body["IPv6StaticDefaultGateways"].([]map[string]any); len(g) != 0 {
		t.Errorf("no gateway: IPv6StaticDefaultGateways %v", g)
	}
}
