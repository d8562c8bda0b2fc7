package managers

import (
	"bufio"
	"encoding/binary"
	"encoding/hex"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
)

// What the host's network configuration says beyond its interfaces: the
// default IPv4 gateway of each interface (the kernel's routing table) and
// the name servers the host resolves with. Read on every request, as the
// interfaces are; a file that cannot be read means none.
var (
	routeFile  = "/proc/net/route"
	route6File = "/proc/net/ipv6_route"
	resolvFile = "/etc/resolv.conf"
	vlanFile   = "/proc/net/vlan/config" // absent without the 8021q module: no VLAN devices
)

// hostNet is the host's gateways and name servers.
type hostNet struct {
	gateways    map[string]net.IP // interface name → default IPv4 gateway
	gateways6   map[string]net.IP // interface name → default IPv6 gateway
	vlans       map[string]int    // 802.1Q VLAN device name → its VLAN ID
	nameServers []string
}

func readHostNet() hostNet {
	var h hostNet
	if f, err := os.Open(routeFile); err == nil {
		h.gateways = parseRoutes(f)
		f.Close()
	}
	if f, err := os.Open(route6File); err == nil {
		h.gateways6 = parseRoutes6(f)
		f.Close()
	}
	if f, err := os.Open(resolvFile); err == nil {
		h.nameServers = parseResolv(f)
		f.Close()
	}
	if f, err := os.Open(vlanFile); err == nil {
		h.vlans = parseVLANs(f)
		f.Close()
	}
	return h
}

// parseVLANs reads the kernel's list of 802.1Q VLAN devices
// (/proc/net/vlan/config: two header lines, then "name | VID | parent").
func parseVLANs(r io.Reader) map[string]int {
	out := map[string]int{}
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		f := strings.Split(sc.Text(), "|")
		if len(f) != 3 {
			continue
		}
		if id, err := strconv.Atoi(strings.TrimSpace(f[1])); err == nil && id >= 0 && id <= 4094 {
			out[strings.TrimSpace(f[0])] = id
		}
	}
	return out
}

// parseRoutes reads the kernel's IPv4 routing table (/proc/net/route:
// hexadecimal fields in the host's byte order, which is little-endian on
// every architecture rackpool builds for) and returns each interface's
// default gateway: the route to 0.0.0.0/0 with the gateway flag, the
// lowest metric winning.
func parseRoutes(r io.Reader) map[string]net.IP {
	out := map[string]net.IP{}
	metrics := map[string]int{}
	sc := bufio.NewScanner(r)
	sc.Scan() // the header
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 8 || f[1] != "00000000" || f[7] != "00000000" {
			continue
		}
		flags, err := hex.DecodeString(padHex(f[3]))
		gw, err2 := hex.DecodeString(f[2])
		if err != nil || err2 != nil || len(gw) != 4 || flags[len(flags)-1]&0x2 == 0 { // RTF_GATEWAY
			continue
		}
		metric := 0
		for _, c := range f[6] {
			if c < '0' || c > '9' {
				metric = -1
				break
			}
			metric = metric*10 + int(c-'0')
		}
		if old, ok := metrics[f[0]]; metric < 0 || ok && old <= metric {
			continue
		}
		ip := make(net.IP, 4)
		binary.BigEndian.PutUint32(ip, binary.LittleEndian.Uint32(gw))
		out[f[0]], metrics[f[0]] = ip, metric
	}
	return out
}

// parseRoutes6 reads the kernel's IPv6 routing table (/proc/net/ipv6_route:
// destination, its prefix length, source, its prefix length, next hop,
// metric, reference count, use, flags, interface; addresses in network
// order) and returns each interface's default gateway: the route to ::/0
// with the gateway flag, the lowest metric winning.
func parseRoutes6(r io.Reader) map[string]net.IP {
	out := map[string]net.IP{}
	metrics := map[string]uint64{}
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 10 || f[0] != strings.Repeat("0", 32) || f[1] != "00" {
			continue
		}
		hop, err := hex.DecodeString(f[4])
		flags, err2 := hex.DecodeString(padHex(f[8]))
		metric, err3 := strconv.ParseUint(f[5], 16, 32)
		if err != nil || err2 != nil || err3 != nil || len(hop) != net.IPv6len || flags[len(flags)-1]&0x2 == 0 {
			continue
		}
		if old, ok := metrics[f[9]]; ok && old <= metric {
			continue
		}
		out[f[9]], metrics[f[9]] = net.IP(hop), metric
	}
	return out
}

// padHex gives a hexadecimal field an even number of digits.
func padHex(s string) string {
	if len(s)%2 == 1 {
		return "0" + s
	}
	return s
}

// parseResolv returns the name servers of a resolv.conf, in its order.
func parseResolv(r io.Reader) []string {
	var out []string
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) >= 2 && f[0] == "nameserver" && net.ParseIP(f[1]) != nil {
			out = append(out, f[1])
		}
	}
	return out
}
