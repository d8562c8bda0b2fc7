package discover

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"rackpool/internal/topology"
)

// mapGetter serves bodies from a map; a missing path is ErrNotFound. It
// records the paths read.
type mapGetter struct {
	bodies map[string]string
	read   []string
}

func (m *mapGetter) get(_ context.Context, path string) ([]byte, error) {
	m.read = append(m.read, path)
	b, ok := m.bodies[path]
	if !ok {
		return nil, fmt.Errorf("%w (no such key)", ErrNotFound)
	}
	return []byte(b), nil
}

// small is a valid service: one PCIe fabric, one switch with two ports, a
// host's initiator and a GPU target zoned together.
func small() map[string]string {
	return map[string]string{
		"/redfish/v1":                                   `{"@odata.type":"#ServiceRoot.v1_5_0.ServiceRoot","Id":"RootService","Vendor":"Test","Fabrics":{"@odata.id":"/redfish/v1/Fabrics"}}`,
		"/redfish/v1/Fabrics":                           `{"@odata.type":"#FabricCollection.FabricCollection","Members":[{"@odata.id":"/redfish/v1/Fabrics/PCIe"}]}`,
		"/redfish/v1/Fabrics/PCIe":                      `{"@odata.type":"#Fabric.v1_4_0.Fabric","Id":"PCIe","FabricType":"PCIe","Switches":{"@odata.id":"/redfish/v1/Fabrics/PCIe/Switches"},"Endpoints":{"@odata.id":"/redfish/v1/Fabrics/PCIe/Endpoints"},"Zones":{"@odata.id":"/redfish/v1/Fabrics/PCIe/Zones"},"SomethingNew":{"x":1}}`,
		"/redfish/v1/Fabrics/PCIe/Switches":             `{"Members":[{"@odata.id":"/redfish/v1/Fabrics/PCIe/Switches/sw1"}]}`,
		"/redfish/v1/Fabrics/PCIe/Switches/sw1":         `{"@odata.type":"#Switch.v1_9_0.Switch","Id":"sw1","Ports":{"@odata.id":"/redfish/v1/Fabrics/PCIe/Switches/sw1/Ports"}}`,
		"/redfish/v1/Fabrics/PCIe/Switches/sw1/Ports":   `{"Members":[{"@odata.id":"/redfish/v1/Fabrics/PCIe/Switches/sw1/Ports/1"},{"@odata.id":"/redfish/v1/Fabrics/PCIe/Switches/sw1/Ports/2"}]}`,
		"/redfish/v1/Fabrics/PCIe/Switches/sw1/Ports/1": `{"@odata.type":"#Port.v1_4_0.Port","Id":"1"}`,
		"/redfish/v1/Fabrics/PCIe/Switches/sw1/Ports/2": `{"@odata.type":"#Port.v1_4_0.Port","Id":"2"}`,
		"/redfish/v1/Fabrics/PCIe/Endpoints":            `{"Members":[{"@odata.id":"/redfish/v1/Fabrics/PCIe/Endpoints/host1-pcie"},{"@odata.id":"/redfish/v1/Fabrics/PCIe/Endpoints/gpu1"}]}`,
		"/redfish/v1/Fabrics/PCIe/Endpoints/host1-pcie": `{"@odata.type":"#Endpoint.v1_8_0.Endpoint","Id":"host1-pcie","ConnectedEntities":[{"EntityType":"RootComplex","EntityRole":"Initiator","EntityLink":{"@odata.id":"/redfish/v1/Systems/host1"}}],"Links":{"ConnectedPorts":[{"@odata.id":"/redfish/v1/Fabrics/PCIe/Switches/sw1/Ports/1"}]}}`,
		"/redfish/v1/Fabrics/PCIe/Endpoints/gpu1":       `{"@odata.type":"#Endpoint.v1_8_0.Endpoint","Id":"gpu1","ConnectedEntities":[{"EntityType":"Processor","EntityRole":"Target","EntityLink":{"@odata.id":"/redfish/v1/Chassis/c1/Processors/gpu1"}}],"Links":{"ConnectedPorts":[{"@odata.id":"/redfish/v1/Fabrics/PCIe/Switches/sw1/Ports/2"}]}}`,
		"/redfish/v1/Chassis/c1/Processors/gpu1":        `{"@odata.type":"#Processor.v1_10_0.Processor","Id":"gpu1","ProcessorType":"GPU","Model":"A100","MemorySummary":{"TotalMemorySizeMiB":40960}}`,
		"/redfish/v1/Systems/host1":                     `{"@odata.type":"#ComputerSystem.v1_10_0.ComputerSystem","Id":"host1","ProcessorSummary":{"CoreCount":64},"MemorySummary":{"TotalSystemMemoryGiB":256}}`,
		"/redfish/v1/Fabrics/PCIe/Zones":                `{"Members":[{"@odata.id":"/redfish/v1/Fabrics/PCIe/Zones/z1"}]}`,
		"/redfish/v1/Fabrics/PCIe/Zones/z1":             `{"@odata.type":"#Zone.v1_4_0.Zone","Id":"z1","ZoneType":"ZoneOfEndpoints","Links":{"Endpoints":[{"@odata.id":"/redfish/v1/Fabrics/PCIe/Endpoints/host1-pcie"},{"@odata.id":"/redfish/v1/Fabrics/PCIe/Endpoints/gpu1"}]}}`,
	}
}

func TestWalkSmall(t *testing.T) {
	m := &mapGetter{bodies: small()}
	r, err := Walk(context.Background(), m.get, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Fabrics) != 1 || len(r.Fabrics[0].Endpoints) != 2 || len(r.Fabrics[0].Zones) != 1 {
		t.Fatalf("found %s", r.Summary())
	}
	d, err := r.Topology(TopologyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	y, err := d.YAML()
	if err != nil {
		t.Fatal(err)
	}
	top, err := topology.Parse("small.yaml", y)
	if err != nil {
		t.Fatalf("%v\n%s", err, y)
	}
	h := top.Inventory.Hosts[0]
	if h.ID != "host1" || h.Cores != 64 || h.MemoryGiB != 256 || len(h.Ports) != 1 || h.Ports[0].ID != "pcie" || h.Ports[0].Port != "1" {
		t.Errorf("host %+v, ports %+v", h, h.Ports[0])
	}
	dev := top.Inventory.Devices[0]
	if dev.ID != "gpu1" || dev.Kind != "gpu" || dev.Model != "A100" || dev.CapacityBytes != 40<<30 || dev.Ports[0] != "2" {
		t.Errorf("device %+v", dev)
	}
	if len(d.Attachments) != 1 || d.Attachments[0] != (Attachment{Fabric: "PCIe", Via: "zone z1", Host: "host1", Port: "pcie", Device: "gpu1", InTopology: true}) {
		t.Errorf("attachments %+v", d.Attachments)
	}
	if strings.Contains(string(y), "default") && strings.Contains(string(y), "cores: 64 #") {
		t.Errorf("a reported value is marked default:\n%s", y)
	}
	for _, p := range m.read {
		if !strings.HasPrefix(p, "/redfish/v1") {
			t.Errorf("read %s", p)
		}
	}
}

func TestWalkBadInput(t *testing.T) {
	huge := func() string {
		var b strings.Builder
		b.WriteString(`{"Members":[`)
		for i := range 50 {
			if i > 0 {
				b.WriteString(",")
			}
			fmt.Fprintf(&b, `{"@odata.id":"/redfish/v1/Fabrics/PCIe/Endpoints/e%d"}`, i)
		}
		b.WriteString(`]}`)
		return b.String()
	}()
	tests := []struct {
		name   string
		change map[string]string
		o      Options
		want   error
		text   string // in the error
	}{
		{"malformed JSON", map[string]string{"/redfish/v1/Fabrics/PCIe/Zones/z1": `{"Id": "z1",`}, Options{}, ErrMalformed, "GET /redfish/v1/Fabrics/PCIe/Zones/z1: malformed resource: not JSON"},
		{"not an object", map[string]string{"/redfish/v1/Fabrics": `[1,2]`}, Options{}, ErrMalformed, "not an object"},
		{"nested too deep", map[string]string{"/redfish/v1/Fabrics/PCIe": `{"Id":"PCIe","Oem":` + strings.Repeat("[", 100000) + strings.Repeat("]", 100000) + `}`}, Options{}, ErrMalformed, "JSON nests deeper than 64 levels of objects and arrays (at byte 82)"},
		{"wrong type", map[string]string{"/redfish/v1/Fabrics/PCIe": `{"Id":"PCIe","FabricType":7}`}, Options{}, ErrMalformed, "property FabricType: a JSON number where a string was expected"},
		{"links not a list", map[string]string{"/redfish/v1/Fabrics/PCIe/Zones/z1": `{"Id":"z1","Links":{"Endpoints":"all"}}`}, Options{}, ErrMalformed, "property Links.Endpoints"},
		{"link without @odata.id", map[string]string{"/redfish/v1/Fabrics/PCIe/Zones/z1": `{"Id":"z1","Links":{"Endpoints":[{"href":"x"}]}}`}, Options{}, ErrMalformed, "Links.Endpoints[0] has no @odata.id"},
		{"link to another host", map[string]string{"/redfish/v1/Fabrics": `{"Members":[{"@odata.id":"https://evil.example/redfish/v1/Fabrics/X"}]}`}, Options{}, ErrMalformed, "not a path of this service"},
		{"link outside the service", map[string]string{"/redfish/v1/Fabrics": `{"Members":[{"@odata.id":"/etc/passwd"}]}`}, Options{}, ErrMalformed, "not a /redfish/v1 path"},
		{"wrong resource type", map[string]string{"/redfish/v1/Fabrics": `{"Members":[{"@odata.id":"/redfish/v1/Fabrics/PCIe/Zones/z1"}]}`}, Options{}, ErrMalformed, "a Zone where a Fabric was expected"},
		{"collection lists itself", map[string]string{"/redfish/v1/Fabrics": `{"Members":[{"@odata.id":"/redfish/v1/Fabrics"}]}`}, Options{}, ErrCycle, "GET /redfish/v1/Fabrics: link cycle"},
		{"collection lists an ancestor", map[string]string{"/redfish/v1/Fabrics/PCIe/Zones": `{"Members":[{"@odata.id":"/redfish/v1/Fabrics/PCIe"}]}`}, Options{}, ErrCycle, "lists /redfish/v1/Fabrics/PCIe"},
		{"page loop", map[string]string{
			"/redfish/v1/Fabrics/PCIe/Zones":         `{"Members":[],"Members@odata.nextLink":"/redfish/v1/Fabrics/PCIe/Zones?$skip=1"}`,
			"/redfish/v1/Fabrics/PCIe/Zones?$skip=1": `{"Members":[],"Members@odata.nextLink":"/redfish/v1/Fabrics/PCIe/Zones"}`}, Options{}, ErrCycle, "nextLink comes back"},
		{"huge count", map[string]string{"/redfish/v1/Fabrics/PCIe/Endpoints": `{"Members@odata.count": 1000000, "Members":[]}`}, Options{}, ErrTooMany, "1000000 members"},
		{"more members than the limit", map[string]string{"/redfish/v1/Fabrics/PCIe/Endpoints": huge}, Options{MaxResources: 30}, ErrTooMany, "GET /redfish/v1/Fabrics/PCIe/Endpoints: too many resources"},
		{"body too large", map[string]string{"/redfish/v1/Fabrics/PCIe": `{"Id":"PCIe","Description":"` + strings.Repeat("x", 2000) + `"}`}, Options{MaxBodyBytes: 1000}, ErrTooLarge, "GET /redfish/v1/Fabrics/PCIe: body too large"},
		{"missing member", map[string]string{"/redfish/v1/Fabrics/PCIe/Zones": `{"Members":[{"@odata.id":"/redfish/v1/Fabrics/PCIe/Zones/nope"}]}`}, Options{}, ErrNotFound, "GET /redfish/v1/Fabrics/PCIe/Zones/nope"},
		{"unknown fabric", nil, Options{Fabrics: []string{"IB"}}, ErrUnknownFabric, `unknown fabric "IB" (the service has: PCIe)`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			bodies := small()
			for k, v := range tt.change {
				bodies[k] = v
			}
			m := &mapGetter{bodies: bodies}
			_, err := Walk(context.Background(), m.get, tt.o)
			if !errors.Is(err, tt.want) || !strings.Contains(err.Error(), tt.text) {
				t.Fatalf("got %v, want %v containing %q", err, tt.want, tt.text)
			}
		})
	}
}

// A link followed only to learn more that leads nowhere is a note; the
// topology then uses defaults and says so.
func TestWalkTolerates(t *testing.T) {
	bodies := small()
	delete(bodies, "/redfish/v1/Systems/host1")
	delete(bodies, "/redfish/v1/Chassis/c1/Processors/gpu1")
	// A zone that lists an endpoint the collection does not.
	bodies["/redfish/v1/Fabrics/PCIe/Zones/z1"] = `{"Id":"z1","Links":{"Endpoints":[{"@odata.id":"/redfish/v1/Fabrics/PCIe/Endpoints/host1-pcie"},{"@odata.id":"/redfish/v1/Fabrics/PCIe/Endpoints/nic1"}]}}`
	bodies["/redfish/v1/Fabrics/PCIe/Endpoints/nic1"] = `{"Id":"nic1","ConnectedEntities":[{"EntityType":"NetworkController","EntityRole":"Target"}]}`
	m := &mapGetter{bodies: bodies}
	r, err := Walk(context.Background(), m.get, Options{})
	if err != nil {
		t.Fatal(err)
	}
	notes := strings.Join(r.Notes, "\n")
	for _, want := range []string{"system /redfish/v1/Systems/host1, which does not exist", "Processors/gpu1, which does not exist", "Endpoints/nic1 is linked but not listed"} {
		if !strings.Contains(notes, want) {
			t.Errorf("notes lack %q:\n%s", want, notes)
		}
	}
	d, err := r.Topology(TopologyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	y, err := d.YAML()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := topology.Parse("t.yaml", y); err != nil {
		t.Fatalf("%v\n%s", err, y)
	}
	for _, want := range []string{"cores: 1 # default", "memory: 1GiB # default", "host host1: cores and memory: default", "{id: nic1, kind: nic, switch: sw1, port: \"3\"}"} {
		if !strings.Contains(string(y), want) {
			t.Errorf("file lacks %q:\n%s", want, y)
		}
	}
}

// FuzzWalk: whatever one resource holds, Walk returns a result or an
// error, and a result's topology compiles when Topology says it has one.
func FuzzWalk(f *testing.F) {
	for k, v := range small() {
		f.Add(k, v)
	}
	f.Add("/redfish/v1/Fabrics/PCIe/Endpoints/gpu1", `{"Id":"gpu1","ConnectedEntities":[{"EntityRole":"Target","EntityType":"Drive","EntityLink":{"@odata.id":"/redfish/v1/Systems/x"}}]}`)
	f.Fuzz(func(t *testing.T, path, body string) {
		bodies := small()
		if _, ok := bodies[path]; !ok {
			return
		}
		bodies[path] = body
		m := &mapGetter{bodies: bodies}
		r, err := Walk(context.Background(), m.get, Options{MaxResources: 100})
		if err != nil {
			return
		}
		d, err := r.Topology(TopologyOptions{})
		if err != nil {
			return
		}
		y, err := d.YAML()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := topology.Parse("fuzz.yaml", y); err != nil {
			t.Fatalf("%v\n%s", err, y)
		}
	})
}

// composerService is a small vendor composer: a CompositionService with a
// Compute block and a GPU block, and one composed system of both.
func composerService() map[string]string {
	return map[string]string{
		"/redfish/v1":                                                     `{"@odata.type":"#ServiceRoot.v1_5_0.ServiceRoot","Id":"RootService","CompositionService":{"@odata.id":"/redfish/v1/CompositionService"},"Systems":{"@odata.id":"/redfish/v1/Systems"}}`,
		"/redfish/v1/CompositionService":                                  `{"@odata.type":"#CompositionService.v1_2_0.CompositionService","Id":"CompositionService","ResourceBlocks":{"@odata.id":"/redfish/v1/CompositionService/ResourceBlocks"}}`,
		"/redfish/v1/CompositionService/ResourceBlocks":                   `{"Members":[{"@odata.id":"/redfish/v1/CompositionService/ResourceBlocks/n1"},{"@odata.id":"/redfish/v1/CompositionService/ResourceBlocks/g1"}]}`,
		"/redfish/v1/CompositionService/ResourceBlocks/n1":                `{"@odata.type":"#ResourceBlock.v1_4_0.ResourceBlock","Id":"n1","ResourceBlockType":["Compute"],"Processors":[{"@odata.id":"/redfish/v1/CompositionService/ResourceBlocks/n1/Processors/CPU"}]}`,
		"/redfish/v1/CompositionService/ResourceBlocks/n1/Processors/CPU": `{"@odata.type":"#Processor.v1_10_0.Processor","Id":"CPU","ProcessorType":"CPU","TotalCores":32}`,
		"/redfish/v1/CompositionService/ResourceBlocks/g1":                `{"@odata.type":"#ResourceBlock.v1_4_0.ResourceBlock","Id":"g1","ResourceBlockType":["Processor"],"Processors":[{"@odata.id":"/redfish/v1/CompositionService/ResourceBlocks/g1/Processors/g1"}]}`,
		"/redfish/v1/CompositionService/ResourceBlocks/g1/Processors/g1":  `{"@odata.type":"#Processor.v1_10_0.Processor","Id":"g1","ProcessorType":"GPU","Model":"A100"}`,
		"/redfish/v1/Systems":                                             `{"Members":[{"@odata.id":"/redfish/v1/Systems/s1"}]}`,
		"/redfish/v1/Systems/s1":                                          `{"@odata.type":"#ComputerSystem.v1_20_0.ComputerSystem","Id":"s1","SystemType":"Composed","Links":{"ResourceBlocks":[{"@odata.id":"/redfish/v1/CompositionService/ResourceBlocks/n1"},{"@odata.id":"/redfish/v1/CompositionService/ResourceBlocks/g1"}]}}`,
	}
}

// TestComposerWalk reads a vendor composer (Compute block n1 a host of 32
// cores, g1 a GPU, s1 an attachment), and refuses malformed answers with
// errors that name the path, as the fabric walk does.
func TestComposerWalk(t *testing.T) {
	m := &mapGetter{bodies: composerService()}
	r, err := Walk(context.Background(), m.get, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if r.Composer == nil || !r.Composer.CanCompose() || r.Composer.Composed != 1 || len(r.Fabrics) != 1 {
		t.Fatalf("composer %+v, %d fabrics", r.Composer, len(r.Fabrics))
	}
	d, err := r.Topology(TopologyOptions{Source: "https://box.example:8443", User: "ops"})
	if err != nil {
		t.Fatal(err)
	}
	y, err := d.YAML()
	if err != nil {
		t.Fatal(err)
	}
	top, err := topology.Parse("composer.yaml", y)
	if err != nil {
		t.Fatalf("%v\n%s", err, y)
	}
	if h := top.Inventory.Host("n1"); h == nil || h.Cores != 32 {
		t.Errorf("host n1: %+v", h)
	}
	f := top.Inventory.Fabric(DefaultComposerFabric)
	if dev := top.Inventory.Device("g1"); dev == nil || dev.Kind != "gpu" || f.Manager == nil || f.Manager.API != "composition" ||
		f.Manager.URL != "https://box.example:8443" || f.Manager.User != "ops" {
		t.Errorf("g1 %+v; manager %+v", dev, f.Manager)
	}
	if len(d.Attachments) != 1 || d.Attachments[0].Host != "n1" || d.Attachments[0].Device != "g1" {
		t.Errorf("attachments %+v", d.Attachments)
	}

	for _, tt := range []struct {
		name   string
		change map[string]string
		want   error
		text   string
	}{
		{"block type not a list", map[string]string{"/redfish/v1/CompositionService/ResourceBlocks/g1": `{"Id":"g1","ResourceBlockType":"Processor"}`},
			ErrMalformed, "GET /redfish/v1/CompositionService/ResourceBlocks/g1"},
		{"system's blocks not a list", map[string]string{"/redfish/v1/Systems/s1": `{"Id":"s1","SystemType":"Composed","Links":{"ResourceBlocks":{"@odata.id":"x"}}}`},
			ErrMalformed, "GET /redfish/v1/Systems/s1"},
		{"block link to another host", map[string]string{"/redfish/v1/CompositionService/ResourceBlocks": `{"Members":[{"@odata.id":"https://evil.example/redfish/v1/x"}]}`},
			ErrMalformed, "not a path of this service"},
		{"block is no block", map[string]string{"/redfish/v1/CompositionService/ResourceBlocks": `{"Members":[{"@odata.id":"/redfish/v1/Systems/s1"}]}`},
			ErrMalformed, "a ComputerSystem where a ResourceBlock was expected"},
		{"blocks list themselves", map[string]string{"/redfish/v1/CompositionService/ResourceBlocks": `{"Members":[{"@odata.id":"/redfish/v1/CompositionService/ResourceBlocks"}]}`},
			ErrCycle, "link cycle"},
		{"missing block", map[string]string{"/redfish/v1/CompositionService/ResourceBlocks": `{"Members":[{"@odata.id":"/redfish/v1/CompositionService/ResourceBlocks/nope"}]}`},
			ErrNotFound, "ResourceBlocks/nope"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			bodies := composerService()
			for k, v := range tt.change {
				bodies[k] = v
			}
			_, err := Walk(context.Background(), (&mapGetter{bodies: bodies}).get, Options{})
			if !errors.Is(err, tt.want) || !strings.Contains(err.Error(), tt.text) {
				t.Fatalf("got %v, want %v containing %q", err, tt.want, tt.text)
			}
		})
	}
}
