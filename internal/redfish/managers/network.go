package managers

import (
	"net"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"

	"rackpool/internal/redfish/service"
	"rackpool/internal/rf"
)

// networkRoutes are the routes of the Manager's own network
// (the core's routes.go).
var networkRoutes = []service.Route[*Service]{
	{Pattern: "GET /redfish/v1/Managers/rackpool/EthernetInterfaces", Priv: service.Login, Handler: (*Service).getEthernetInterfaces},
	{Pattern: "GET /redfish/v1/Managers/rackpool/EthernetInterfaces/{id}", Priv: service.Login, Handler: (*Service).getEthernetInterface},
	{Pattern: "GET /redfish/v1/Managers/rackpool/NetworkProtocol", Priv: service.Login, Handler: (*Service).getNetworkProtocol},
}

// The Manager's own network: Managers/rackpool/EthernetInterfaces lists
// the interfaces the service listens on, NetworkProtocol the protocol it
// serves and its port. Both are read-only (networkRoutes) and read the
// host's interfaces (net.Interfaces) on every GET.
//
// What the service listens on comes from Options.Listen (serve's --addr).
// A wildcard host (":8443", "0.0.0.0:8443", "[::]:8443") listens on every
// address, so every interface that is up and has an address is listed,
// loopback included; a specific IP lists the interface that holds it.
// Whatever Listen leaves open (port 0, a host name such as "localhost",
// no Listen at all) is taken from the connection the request arrived on
// (http.LocalAddrContextKey): its port, and its local address as the
// address listened on. The scheme is the request's own: HTTPS over TLS,
// plain HTTP otherwise (serve --insecure-http).
//
// The standard library tells neither how an address was configured nor an
// interface's factory MAC address: every IPv4 address is reported with
// AddressOrigin Static (IPv4LinkLocal for 169.254/16), every IPv6 address
// Static (LinkLocal for fe80::/10), even where DHCP, DHCPv6 or SLAAC
// assigned it; PermanentMACAddress is the current MAC address.

const (
	ethernetPath        = managerPath + "/EthernetInterfaces"
	networkProtocolPath = managerPath + "/NetworkProtocol"
)

// listening is what the service listens on, as far as its Listen option
// and a request tell.
type listening struct {
	all  bool   // every address: a wildcard host
	ip   net.IP // else the address listened on; nil: unknown
	port int    // 0: unknown
}

func (s *Service) listening(r *http.Request) listening {
	var local *net.TCPAddr
	if a, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr); ok {
		local, _ = a.(*net.TCPAddr)
	}
	var l listening
	host, port, err := net.SplitHostPort(s.listen)
	if err != nil {
		host, port = "", ""
	}
	if n, err := strconv.Atoi(port); err == nil && n > 0 && n <= 65535 {
		l.port = n
	} else if local != nil {
		l.port = local.Port
	}
	host, _, _ = strings.Cut(host, "%") // an IPv6 zone
	switch ip := net.ParseIP(host); {
	case s.listen != "" && err == nil && (host == "" || ip != nil && ip.IsUnspecified()):
		l.all = true
	case ip != nil:
		l.ip = ip
	case local != nil:
		l.ip = local.IP
	}
	return l
}

// netInterface is one of the host's interfaces with its addresses.
type netInterface struct {
	net.Interface
	addrs []*net.IPNet
}

// listeningInterfaces returns the host's interfaces the service listens
// on, in the host's order.
func listeningInterfaces(l listening) ([]netInterface, error) {
	if !l.all && l.ip == nil {
		return nil, nil
	}
	ifaces, err := net.Interfaces()
	if err != nil {
		return nil, err
	}
	var out []netInterface
	for _, ifc := range ifaces {
		addrs, err := ifc.Addrs()
		if err != nil {
			continue
		}
		n := netInterface{Interface: ifc}
		for _, a := range addrs {
			if ipn, ok := a.(*net.IPNet); ok {
				n.addrs = append(n.addrs, ipn)
			}
		}
		if l.all && ifc.Flags&net.FlagUp != 0 && len(n.addrs) > 0 || !l.all && n.holds(l.ip) {
			out = append(out, n)
		}
	}
	if !l.all && len(out) > 1 {
		out = out[:1] // the same address on two interfaces: the first holds it
	}
	return out, nil
}

// holds reports whether ip is one of n's addresses or, for a loopback
// interface, in one of its networks (127.0.0.2 on lo's 127.0.0.0/8).
func (n netInterface) holds(ip net.IP) bool {
	for _, a := range n.addrs {
		if a.IP.Equal(ip) || n.Flags&net.FlagLoopback != 0 && a.Contains(ip) {
			return true
		}
	}
	return false
}

func ethernetInterfacePath(name string) string { return ethernetPath + "/" + url.PathEscape(name) }

func (s *Service) getEthernetInterfaces(w http.ResponseWriter, r *http.Request) error {
	ifaces, err := listeningInterfaces(s.listening(r))
	if err != nil {
		return err
	}
	members := make([]rf.ODataID, 0, len(ifaces))
	for _, n := range ifaces {
		members = append(members, rf.Ref(ethernetInterfacePath(n.Name)))
	}
	body := rf.Collection(ethernetPath, "EthernetInterfaceCollection", "Manager Ethernet Interfaces", members)
	body["Description"] = "The network interfaces the rackpool service listens on."
	service.WriteJSON(w, http.StatusOK, body)
	return nil
}

func (s *Service) getEthernetInterface(w http.ResponseWriter, r *http.Request) error {
	id := r.PathValue("id")
	ifaces, err := listeningInterfaces(s.listening(r))
	if err != nil {
		return err
	}
	for _, n := range ifaces {
		if n.Name == id {
			service.WriteJSON(w, http.StatusOK, ethernetInterfaceBody(n, readHostNet()))
			return nil
		}
	}
	return rf.NotFound("EthernetInterface", id)
}

// ethernetInterfaceBody is interface n as the Manager's EthernetInterface,
// with h's default gateway of n (null when it has none) on each IPv4
// address and h's name servers.
func ethernetInterfaceBody(n netInterface, h hostNet) map[string]any {
	var gateway any // null: no default route through n
	if gw := h.gateways[n.Name]; gw != nil {
		gateway = gw.String()
	}
	up, running := n.Flags&net.FlagUp != 0, n.Flags&net.FlagRunning != 0
	state, health, link := "Disabled", "OK", "LinkDown"
	switch {
	case up && running:
		state, link = "Enabled", "LinkUp"
	case up:
		state, health = "Enabled", "Warning" // administratively up, no carrier
	}
	ipv4, ipv6, static, static6 := []map[string]any{}, []map[string]any{}, []map[string]any{}, []map[string]any{}
	var gateway6 any // null: no default IPv6 route through n
	staticGateways6 := []map[string]any{}
	if gw := h.gateways6[n.Name]; gw != nil {
		gateway6 = gw.String()
		staticGateways6 = append(staticGateways6, map[string]any{"Address": gateway6})
	}
	// An interface that is not an 802.1Q VLAN device sends untagged
	// frames: VLAN ID 0, which 802.1Q reserves for "no VLAN".
	vlan := map[string]any{"VLANEnable": false, "VLANId": 0, "VLANPriority": 0, "Tagged": false}
	if id, ok := h.vlans[n.Name]; ok {
		vlan = map[string]any{"VLANEnable": true, "VLANId": id, "VLANPriority": 0, "Tagged": true}
	}
	for _, a := range n.addrs {
		if ip4 := a.IP.To4(); ip4 != nil {
			mask := a.Mask
			if len(mask) == net.IPv6len {
				mask = mask[12:]
			}
			origin := "Static"
			if ip4.IsLinkLocalUnicast() {
				origin = "IPv4LinkLocal"
			}
			addr := map[string]any{"Address": ip4.String(), "SubnetMask": net.IP(mask).String(), "AddressOrigin": origin, "Gateway": gateway}
			ipv4 = append(ipv4, addr)
			if origin == "Static" {
				static = append(static, map[string]any{"Address": addr["Address"], "SubnetMask": addr["SubnetMask"], "Gateway": gateway})
			}
			continue
		}
		prefix, _ := a.Mask.Size()
		origin := "Static"
		if a.IP.IsLinkLocalUnicast() {
			origin = "LinkLocal"
		}
		ipv6 = append(ipv6, map[string]any{"Address": a.IP.String(), "PrefixLength": prefix, "AddressOrigin": origin, "AddressState": "Preferred"})
		if origin == "Static" {
			static6 = append(static6, map[string]any{"Address": a.IP.String(), "PrefixLength": prefix})
		}
	}
	body := map[string]any{
		"@odata.id":           ethernetInterfacePath(n.Name),
		"@odata.type":         "#EthernetInterface.v1_12_4.EthernetInterface",
		"Id":                  n.Name,
		"Name":                "Manager Ethernet Interface " + n.Name,
		"Description":         "A network interface the rackpool service listens on.",
		"InterfaceEnabled":    up,
		"LinkStatus":          link,
		"MTUSize":             n.MTU,
		"IPv4Addresses":       ipv4,
		"IPv6Addresses":       ipv6,
		"IPv4StaticAddresses": static,
		"IPv6StaticAddresses": static6,
		"IPv6DefaultGateway":  gateway6,
		// The default route's gateway as configured: the kernel does not say
		// whether a router advertisement or an operator put it there.
		"IPv6StaticDefaultGateways": staticGateways6,
		"VLAN":                      vlan,
		"StaticNameServers":         []string{}, // the service configures none: NameServers are the host's
		"NameServers":               service.NonNil(h.nameServers),
		"Status":                    map[string]string{"State": state, "Health": health},
	}
	if len(n.HardwareAddr) == 6 { // an Ethernet MAC; loopback has none
		mac := strings.ToUpper(n.HardwareAddr.String())
		body["MACAddress"], body["PermanentMACAddress"] = mac, mac
	}
	return body
}

func (s *Service) getNetworkProtocol(w http.ResponseWriter, r *http.Request) error {
	l := s.listening(r)
	served := map[string]any{"ProtocolEnabled": true}
	if l.port > 0 {
		served["Port"] = l.port
	}
	off := map[string]any{"ProtocolEnabled": false}
	body := map[string]any{
		"@odata.id":   networkProtocolPath,
		"@odata.type": "#ManagerNetworkProtocol.v1_12_0.ManagerNetworkProtocol",
		"Id":          "NetworkProtocol",
		"Name":        "Manager Network Protocol",
		"Description": "The protocol the rackpool service serves Redfish over, and its port.",
		"Status":      map[string]string{"State": "Enabled", "Health": "OK"},
		"HTTPS":       served,
		"HTTP":        off,
	}
	if r.TLS == nil { // serve --insecure-http
		body["HTTP"], body["HTTPS"] = served, off
	}
	if host, err := os.Hostname(); err == nil && host != "" {
		short, _, qualified := strings.Cut(host, ".")
		body["HostName"] = short
		if qualified {
			body["FQDN"] = strings.TrimSuffix(host, ".")
		}
	}
	service.WriteJSON(w, http.StatusOK, body)
	return nil
}
