package redfish_test

import (
	"bytes"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"

	"rackpool/internal/redfish"
)

const (
	ethernetInterfaces = "/redfish/v1/Managers/rackpool/EthernetInterfaces"
	networkProtocol    = "/redfish/v1/Managers/rackpool/NetworkProtocol"
)

// loopbackName is the name of the interface that holds 127.0.0.1.
func loopbackName(t testing.TB) string {
	t.Helper()
	ifaces, err := net.Interfaces()
	if err != nil {
		t.Fatal(err)
	}
	for _, ifc := range ifaces {
		addrs, _ := ifc.Addrs()
		for _, a := range addrs {
			if n, ok := a.(*net.IPNet); ok && n.IP.Equal(net.IPv4(127, 0, 0, 1)) {
				return ifc.Name
			}
		}
	}
	t.Skip("no interface holds 127.0.0.1")
	return ""
}

// serviceListening is newService's service served by a second Server,
// over the same manager, accounts and store, that listens on 127.0.0.1 on
// a port of its own and is told listen (with "PORT" replaced by that
// port). It returns the service and the port.
func serviceListening(t *testing.T, listen string) (*service, int) {
	t.Helper()
	base := newService(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	h := redfish.New(base.mgr, base.auth, redfish.Options{Store: base.store, AsyncThreshold: -1,
		Listen: strings.ReplaceAll(listen, "PORT", strconv.Itoa(port))})
	srv := httptest.NewUnstartedServer(h)
	_ = srv.Listener.Close()
	srv.Listener = ln
	srv.StartTLS()
	t.Cleanup(srv.Close)
	s := *base
	s.handler, s.srv = h, srv
	return &s, port
}

// sameJSON reports whether a and b encode to the same JSON.
func sameJSON(a, b any) bool {
	x, err1 := json.Marshal(a)
	y, err2 := json.Marshal(b)
	return err1 == nil && err2 == nil && bytes.Equal(x, y)
}

// memberNames are the Ids of a collection's members.
func memberNames(t *testing.T, s *service, collection string) []string {
	t.Helper()
	var names []string
	for _, m := range list(t, s.get(collection)["Members"]) {
		id := m.(map[string]any)["@odata.id"].(string)
		if !strings.HasPrefix(id, collection+"/") {
			t.Errorf("member %s is not in %s", id, collection)
		}
		names = append(names, id[strings.LastIndex(id, "/")+1:])
	}
	return names
}

// TestManagerNetwork: a service listening on 127.0.0.1:PORT lists the
// loopback interface alone, with 127.0.0.1 and no MAC address, and its
// NetworkProtocol shows HTTPS on PORT; the Manager links both; an unknown
// interface is a 404; the resources are read-only (405 with Allow).
func TestManagerNetwork(t *testing.T) {
	lo := loopbackName(t)
	s, port := serviceListening(t, "127.0.0.1:PORT")

	mgr := s.get("/redfish/v1/Managers/rackpool")
	if got := mgr["EthernetInterfaces"]; !sameJSON(got, map[string]any{"@odata.id": ethernetInterfaces}) {
		t.Errorf("Manager EthernetInterfaces = %v", got)
	}
	if got := mgr["NetworkProtocol"]; !sameJSON(got, map[string]any{"@odata.id": networkProtocol}) {
		t.Errorf("Manager NetworkProtocol = %v", got)
	}

	coll := s.get(ethernetInterfaces)
	if coll["@odata.type"] != "#EthernetInterfaceCollection.EthernetInterfaceCollection" {
		t.Errorf("collection @odata.type %v", coll["@odata.type"])
	}
	if names := memberNames(t, s, ethernetInterfaces); !slices.Equal(names, []string{lo}) {
		t.Fatalf("members %v, want [%s] alone", names, lo)
	}

	eth := s.get(ethernetInterfaces + "/" + lo)
	for k, want := range map[string]any{"@odata.type": "#EthernetInterface.v1_12_4.EthernetInterface", "Id": lo,
		"InterfaceEnabled": true, "LinkStatus": "LinkUp"} {
		if eth[k] != want {
			t.Errorf("%s = %v, want %v", k, eth[k], want)
		}
	}
	if mtu, _ := eth["MTUSize"].(float64); mtu <= 0 {
		t.Errorf("MTUSize %v", eth["MTUSize"])
	}
	for _, k := range []string{"MACAddress", "PermanentMACAddress", "Oem"} {
		if v, ok := eth[k]; ok {
			t.Errorf("loopback has %s %v", k, v)
		}
	}
	if st, _ := eth["Status"].(map[string]any); st["State"] != "Enabled" || st["Health"] != "OK" {
		t.Errorf("Status %v", eth["Status"])
	}
	found := false
	for _, a := range list(t, eth["IPv4Addresses"]) {
		a := a.(map[string]any)
		if a["Address"] == "127.0.0.1" {
			found = true
			// Loopback has no default route: its Gateway is there, null.
			if gw, ok := a["Gateway"]; a["SubnetMask"] == nil || a["AddressOrigin"] != "Static" || !ok || gw != nil {
				t.Errorf("127.0.0.1: %v", a)
			}
		}
	}
	if !found {
		t.Errorf("IPv4Addresses %v lack 127.0.0.1", eth["IPv4Addresses"])
	}
	if len(list(t, eth["IPv4StaticAddresses"])) == 0 {
		t.Errorf("IPv4StaticAddresses %v", eth["IPv4StaticAddresses"])
	}
	if _, ok := eth["NameServers"].([]any); !ok {
		t.Errorf("NameServers %v", eth["NameServers"])
	}
	for _, k := range []string{"IPv6StaticAddresses", "IPv6DefaultGateway", "IPv6StaticDefaultGateways", "StaticNameServers", "VLAN"} {
		if _, ok := eth[k]; !ok {
			t.Errorf("no %s", k)
		}
	}
	for _, a := range list(t, eth["IPv6Addresses"]) {
		a := a.(map[string]any)
		if net.ParseIP(a["Address"].(string)) == nil || a["PrefixLength"] == nil || a["AddressState"] != "Preferred" ||
			a["AddressOrigin"] != "Static" && a["AddressOrigin"] != "LinkLocal" {
			t.Errorf("IPv6 address %v", a)
		}
	}

	np := s.get(networkProtocol)
	if np["@odata.type"] != "#ManagerNetworkProtocol.v1_12_0.ManagerNetworkProtocol" || np["Id"] != "NetworkProtocol" {
		t.Errorf("NetworkProtocol %v %v", np["@odata.type"], np["Id"])
	}
	if !sameJSON(np["HTTPS"], map[string]any{"ProtocolEnabled": true, "Port": port}) {
		t.Errorf("HTTPS %v, want port %d", np["HTTPS"], port)
	}
	if !sameJSON(np["HTTP"], map[string]any{"ProtocolEnabled": false}) {
		t.Errorf("HTTP %v", np["HTTP"])
	}
	if host, err := os.Hostname(); err == nil && host != "" {
		short, _, _ := strings.Cut(host, ".")
		if np["HostName"] != short {
			t.Errorf("HostName %v, want %s", np["HostName"], short)
		}
	}
	if _, ok := np["Oem"]; ok {
		t.Errorf("NetworkProtocol has Oem %v", np["Oem"])
	}

	for _, path := range []string{ethernetInterfaces + "/nope0", ethernetInterfaces + "/" + lo + "x"} {
		r := s.must(http.StatusNotFound, "GET", path, nil, admin)
		if code := r.errorCode(t); !strings.HasSuffix(code, ".ResourceNotFound") {
			t.Errorf("GET %s: %s", path, code)
		}
	}

	for _, path := range []string{ethernetInterfaces, ethernetInterfaces + "/" + lo, networkProtocol} {
		for _, method := range []string{"PATCH", "POST", "DELETE", "PUT"} {
			r := s.must(http.StatusMethodNotAllowed, method, path, map[string]any{"InterfaceEnabled": false}, admin)
			if allow := r.header.Get("Allow"); allow != "GET, HEAD" {
				t.Errorf("%s %s: Allow %q, want \"GET, HEAD\"", method, path, allow)
			}
			if code := r.errorCode(t); !strings.HasSuffix(code, ".OperationNotAllowed") {
				t.Errorf("%s %s: %s", method, path, code)
			}
		}
	}
	if after := s.get(ethernetInterfaces + "/" + lo); after["InterfaceEnabled"] != true {
		t.Errorf("after the refused PATCH: %v", after)
	}
}

// TestManagerNetworkWildcard: a service listening on every address (":PORT")
// lists every interface that is up and has an address, loopback
// included; one told a host name or port 0 reports what the request's
// connection arrived at (127.0.0.1 and its port).
func TestManagerNetworkWildcard(t *testing.T) {
	lo := loopbackName(t)
	ifaces, err := net.Interfaces()
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, ifc := range ifaces {
		if addrs, _ := ifc.Addrs(); ifc.Flags&net.FlagUp != 0 && len(addrs) > 0 {
			want = append(want, ifc.Name)
		}
	}
	for _, listen := range []string{":PORT", "0.0.0.0:PORT", "[::]:PORT", ":0"} {
		t.Run(listen, func(t *testing.T) {
			s, port := serviceListening(t, listen)
			names := memberNames(t, s, ethernetInterfaces)
			if !slices.Equal(names, want) || !slices.Contains(names, lo) {
				t.Errorf("members %v, want %v (with %s)", names, want, lo)
			}
			for _, name := range names {
				if eth := s.get(ethernetInterfaces + "/" + name); eth["Id"] != name {
					t.Errorf("%s: Id %v", name, eth["Id"])
				}
			}
			if np := s.get(networkProtocol); !sameJSON(np["HTTPS"], map[string]any{"ProtocolEnabled": true, "Port": port}) {
				t.Errorf("HTTPS %v, want port %d", np["HTTPS"], port)
			}
		})
	}
	for _, listen := range []string{"localhost:PORT", "127.0.0.1:0", ""} {
		t.Run("from the connection "+listen, func(t *testing.T) {
			s, port := serviceListening(t, listen)
			if names := memberNames(t, s, ethernetInterfaces); !slices.Equal(names, []string{lo}) {
				t.Errorf("members %v, want [%s]", names, lo)
			}
			if np := s.get(networkProtocol); !sameJSON(np["HTTPS"], map[string]any{"ProtocolEnabled": true, "Port": port}) {
				t.Errorf("HTTPS %v, want port %d", np["HTTPS"], port)
			}
		})
	}
}
