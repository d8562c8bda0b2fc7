package redfish_test

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"io"
	"net/http"
	"reflect"
	"testing"

	"rackpool/api"
	"rackpool/internal/redfish"
	"rackpool/internal/topology"
)

const topologyPath = "/redfish/v1/Oem/Rackpool/Topology"

// sharedRacks has what the example rack has not: two racks sharing a
// fabric, a fabric no host reaches, a rack of more hosts than the console
// draws one by one, and names that JSON must escape.
const sharedRacks = `
name: "shared \"racks\""
racks:
  - id: rackA
    hosts:
      - {id: "a{n}", count: 70, cores: 8, memory: 16GiB, ports: [{id: eth, fabric: vlan1, port: "{n}", metres: 2}]}
  - id: rackB
    hosts:
      - id: "b{n}"
        count: 2
        cores: 8
        memory: 16GiB
        ports:
          - {id: eth, fabric: vlan1, port: "10{n}", metres: 2}
          - {id: ocs, fabric: ocsB, port: "{n}", metres: 2}
fabrics:
  - id: vlan1
    kind: ethernet-vlan
    switches: [{id: sw, ports: 256, latency_ns: 500}]
    devices:
      - {id: "nic{n}", count: 4, kind: nic, model: "Müller <x> & \\ \t", port: "200", metres: 1}
  - id: ocsB
    kind: optical-circuit
    switches: [{id: osw, ports: 48, latency_ns: 25.5}]
    devices:
      - {id: memB, kind: memory, capacity: 64GiB, block_size: 8GiB, ports: ["21", "22"], metres: 2}
  - id: lonely
    kind: sas-circuit
    switches: [{id: "s{n}", count: 3, ports: 16, latency_ns: 100}]
    devices:
      - {id: "hdd{n}", count: 3, kind: hdd, model: H, capacity: 1TB, switch: s2, port: "5", metres: 1}
`

// compactTopology is the compact topology document, decoded.
type compactTopology struct {
	ODataID string `json:"@odata.id"`
	Name    string
	Format  string
	Hosts   [][]any
	Fabrics []struct {
		ID                string
		Kind              string
		ReconfigurationMs float64
		Rack              *string
		Switches          [][]any
		Drawers           [][]any
		Devices           [][]any
	}
	Zones []api.ZoneView
}

// strs reads a JSON array of strings.
func strs(v any) []string {
	var out []string
	for _, s := range v.([]any) {
		out = append(out, s.(string))
	}
	return out
}

// expand turns the compact document back into the plain one's shape (less
// the cable lengths it leaves out), and says which rack each fabric is in.
func (c *compactTopology) expand() (*api.TopologyView, map[string]*string) {
	v := &api.TopologyView{ODataID: c.ODataID, ODataType: "#RackpoolTopology.v1_0_0.RackpoolTopology", Name: c.Name, Zones: c.Zones}
	racks := map[string]*string{}
	for _, f := range c.Fabrics {
		fv := api.FabricView{ID: f.ID, Kind: f.Kind, ReconfigurationMs: f.ReconfigurationMs}
		racks[f.ID] = f.Rack
		for _, s := range f.Switches {
			fv.Switches = append(fv.Switches, api.SwitchView{ID: s[0].(string), Ports: int(s[1].(float64)), LatencyNs: s[2].(float64)})
		}
		for _, d := range f.Drawers {
			fv.Drawers = append(fv.Drawers, api.DrawerView{ID: d[0].(string), Mode: d[1].(string), Slots: int(d[2].(float64)), HostPorts: strs(d[3])})
		}
		for _, d := range f.Devices {
			dv := api.DeviceView{ID: d[0].(string), Kind: d[1].(string), Model: d[2].(string), Switch: f.Switches[int(d[3].(float64))][0].(string),
				Slot: int(d[5].(float64)), CapacityBytes: int64(d[6].(float64)), Blocks: int(d[7].(float64)), Ports: strs(d[8])}
			if at := int(d[4].(float64)); at >= 0 {
				dv.Drawer = f.Drawers[at][0].(string)
			}
			fv.Devices = append(fv.Devices, dv)
		}
		v.Fabrics = append(v.Fabrics, fv)
	}
	for _, h := range c.Hosts {
		hv := api.HostView{ID: h[0].(string), Rack: h[1].(string), Cores: int(h[2].(float64)), MemoryGiB: int(h[3].(float64))}
		ports := h[4].([]any)
		for i := 0; i+3 < len(ports); i += 4 {
			f := c.Fabrics[int(ports[i+1].(float64))]
			hv.Ports = append(hv.Ports, api.PortView{ID: ports[i].(string), Fabric: f.ID, Switch: f.Switches[int(ports[i+2].(float64))][0].(string), Port: ports[i+3].(string)})
		}
		v.Hosts = append(v.Hosts, hv)
	}
	return v, racks
}

// TestTopologyCompact: ?format=compact is the plain document's topology,
// written compactly, with each fabric's rack: the one rack whose hosts
// reach it, null when several racks' (or no) hosts do.
func TestTopologyCompact(t *testing.T) {
	shared, err := topology.Parse("shared.yaml", []byte(sharedRacks))
	if err != nil {
		t.Fatal(err)
	}
	generated, err := topology.Parse("generated", topology.GenerateRacks(3))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		top   *topology.Topology
		racks map[string]string // fabric → rack; absent: null
	}{
		{"example", topology.LoadDefault(), map[string]string{"falcon1": "rack1", "sas1": "rack1", "ocs1": "rack1", "vlan1": "rack1"}},
		{"generated", generated, nil},
		{"shared", shared, map[string]string{"ocsB": "rackB"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newServiceOn(t, tc.top)
			r := s.must(http.StatusOK, "GET", topologyPath+"?format=compact", nil, admin)
			var c compactTopology
			if err := json.Unmarshal(r.body, &c); err != nil {
				t.Fatalf("not JSON (%v): %.300s", err, r.body)
			}
			if c.Format != "compact" || c.ODataID != topologyPath {
				t.Fatalf("Format %q, @odata.id %q", c.Format, c.ODataID)
			}
			got, racks := c.expand()
			want := redfish.TopologyView(tc.top)
			for i := range want.Hosts {
				for j := range want.Hosts[i].Ports {
					want.Hosts[i].Ports[j].Metres = 0
				}
			}
			if !reflect.DeepEqual(got, want) {
				g, _ := json.Marshal(got)
				w, _ := json.Marshal(want)
				t.Fatalf("the compact document is another topology:\ngot  %.2000s\nwant %.2000s", g, w)
			}
			if tc.racks == nil { // one fabric set per rack
				tc.racks = map[string]string{}
				for _, h := range tc.top.Hosts {
					for _, p := range h.Ports {
						tc.racks[p.Fabric.ID] = h.Rack
					}
				}
			}
			for _, f := range tc.top.Fabrics {
				rack, ok := tc.racks[f.ID]
				switch got := racks[f.ID]; {
				case !ok && got != nil:
					t.Errorf("fabric %s: Rack %q, want null", f.ID, *got)
				case ok && (got == nil || *got != rack):
					t.Errorf("fabric %s: Rack %v, want %q", f.ID, got, rack)
				}
			}
		})
	}
}

// TestTopologyCompactQuery: the compact document has an ETag and answers
// If-None-Match with 304, also to HEAD; it is gzipped for a client that
// accepts gzip; it is sent whole, so $ options and only are refused beside
// it, as is a format the service does not know. The plain document is
// unchanged.
func TestTopologyCompactQuery(t *testing.T) {
	s := newService(t)
	path := topologyPath + "?format=compact"
	r := s.must(http.StatusOK, "GET", path, nil, cred{basic: true, hdr: map[string]string{"Accept-Encoding": "identity"}})
	if r.header.Get("Content-Encoding") != "" || r.header.Get("Vary") != "Accept-Encoding" {
		t.Fatalf("Content-Encoding %q, Vary %q", r.header.Get("Content-Encoding"), r.header.Get("Vary"))
	}
	for _, ae := range []string{"gzip", "br, gzip;q=0.5", "GZIP", "deflate, gzip ; q=1"} {
		z := s.must(http.StatusOK, "GET", path, nil, cred{basic: true, hdr: map[string]string{"Accept-Encoding": ae}})
		if z.header.Get("Content-Encoding") != "gzip" {
			t.Fatalf("Accept-Encoding %q: Content-Encoding %q", ae, z.header.Get("Content-Encoding"))
		}
		zr, err := gzip.NewReader(bytes.NewReader(z.body))
		if err != nil {
			t.Fatal(err)
		}
		if plain, err := io.ReadAll(zr); err != nil || !bytes.Equal(plain, r.body) || len(z.body) >= len(r.body) {
			t.Fatalf("Accept-Encoding %q: %d gzipped bytes are not the %d of the document (%v)", ae, len(z.body), len(r.body), err)
		}
	}
	for _, ae := range []string{"gzip;q=0", "br", "gzipx"} {
		if z := s.must(http.StatusOK, "GET", path, nil, cred{basic: true, hdr: map[string]string{"Accept-Encoding": ae}}); z.header.Get("Content-Encoding") != "" {
			t.Fatalf("Accept-Encoding %q: Content-Encoding %q", ae, z.header.Get("Content-Encoding"))
		}
	}
	tag := r.header.Get("ETag")
	if tag == "" || r.header.Get("Content-Type") != "application/json; charset=utf-8" || r.header.Get("Allow") == "" {
		t.Fatalf("headers %v", r.header)
	}
	if again := s.must(http.StatusOK, "GET", path, nil, admin); again.header.Get("ETag") != tag || string(again.body) != string(r.body) {
		t.Fatalf("a second GET answers another document: ETag %q, want %q", again.header.Get("ETag"), tag)
	}
	for _, tc := range []struct {
		method, inm string
		status      int
	}{
		{"GET", tag, http.StatusNotModified},
		{"GET", `W/"other", ` + tag, http.StatusNotModified},
		{"GET", `W/"other"`, http.StatusOK},
		{"HEAD", tag, http.StatusNotModified},
		{"HEAD", `W/"other"`, http.StatusOK},
	} {
		r := s.do(tc.method, path, nil, cred{basic: true, hdr: map[string]string{"If-None-Match": tc.inm}})
		if r.status != tc.status {
			t.Errorf("%s If-None-Match %s: %d, want %d", tc.method, tc.inm, r.status, tc.status)
		}
		if (r.status == http.StatusNotModified || tc.method == "HEAD") && len(r.body) != 0 {
			t.Errorf("%s If-None-Match %s: %d with a body of %d bytes", tc.method, tc.inm, r.status, len(r.body))
		}
	}
	for _, tc := range []struct{ query, code string }{
		{"?format=compact&$select=Name", "Base.1.22.QueryCombinationInvalid"},
		{"?$top=1&format=compact", "Base.1.22.QueryCombinationInvalid"},
		{"?format=compact&only", "Base.1.22.QueryCombinationInvalid"},
		{"?format=xml", "Base.1.22.QueryParameterValueFormatError"},
	} {
		if got := s.must(http.StatusBadRequest, "GET", topologyPath+tc.query, nil, admin).errorCode(t); got != tc.code {
			t.Errorf("GET %s: %s, want %s", tc.query, got, tc.code)
		}
	}
	s.must(http.StatusUnauthorized, "GET", path, nil, cred{})
	plain := s.get(topologyPath)
	if plain["@odata.type"] != "#RackpoolTopology.v1_0_0.RackpoolTopology" || plain["Hosts"] == nil || plain["Format"] != nil {
		t.Fatalf("the plain document changed: %v", plain)
	}
}
