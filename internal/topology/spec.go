package topology

import (
	"fmt"
	"reflect"
	"sort"
	"strings"

	"gopkg.in/yaml.v3"
)

// The file format. Every spec type records the line of its mapping and of
// each key so validation can name file, line and field.

type pos struct {
	line   int
	fields map[string]int
}

// at returns the line of field f, or of the mapping itself.
func (p pos) at(f string) int {
	if l, ok := p.fields[f]; ok {
		return l
	}
	return p.line
}

type fileSpec struct {
	pos      `yaml:"-"`
	Name     string        `yaml:"name"`
	Defaults defaultsSpec  `yaml:"defaults"`
	Racks    []*rackSpec   `yaml:"racks"`
	Fabrics  []*fabricSpec `yaml:"fabrics"`
	Zones    []*zoneSpec   `yaml:"zones"`
}

type defaultsSpec struct {
	pos            `yaml:"-"`
	PCIeHotplug    string `yaml:"pcie_hotplug"`
	SASRemap       string `yaml:"sas_remap"`
	SASDriveOnline string `yaml:"sas_drive_online"`
	VLANChange     string `yaml:"vlan_change"`
	OCSReconfig    string `yaml:"ocs_reconfig"`
}

type rackSpec struct {
	pos   `yaml:"-"`
	ID    string      `yaml:"id"`
	Hosts []*hostSpec `yaml:"hosts"`
}

type hostSpec struct {
	pos    `yaml:"-"`
	ID     string          `yaml:"id"`
	Count  int             `yaml:"count"`
	Per    int             `yaml:"per"`
	Cores  int             `yaml:"cores"`
	Memory string          `yaml:"memory"`
	Ports  []*hostPortSpec `yaml:"ports"`
}

type hostPortSpec struct {
	pos    `yaml:"-"`
	ID     string  `yaml:"id"`
	Fabric string  `yaml:"fabric"`
	Switch string  `yaml:"switch"`
	Port   string  `yaml:"port"`
	Metres float64 `yaml:"metres"`
}

type fabricSpec struct {
	pos         `yaml:"-"`
	ID          string        `yaml:"id"`
	Kind        string        `yaml:"kind"`
	Reconfig    string        `yaml:"reconfig"`
	DriveOnline string        `yaml:"drive_online"`
	Chassis     *chassisSpec  `yaml:"chassis"`
	Switches    []*switchSpec `yaml:"switches"`
	Links       []*linkSpec   `yaml:"links"`
	Devices     []*deviceSpec `yaml:"devices"`
}

type chassisSpec struct {
	pos       `yaml:"-"`
	ID        string        `yaml:"id"`
	LatencyNS float64       `yaml:"latency_ns"`
	HostPorts int           `yaml:"host_ports"`
	Drawers   []*drawerSpec `yaml:"drawers"`
}

type drawerSpec struct {
	pos       `yaml:"-"`
	ID        string   `yaml:"id"`
	Mode      string   `yaml:"mode"`
	Slots     int      `yaml:"slots"`
	HostPorts []string `yaml:"host_ports"`
}

type switchSpec struct {
	pos       `yaml:"-"`
	ID        string  `yaml:"id"`
	Count     int     `yaml:"count"`
	Ports     int     `yaml:"ports"`
	LatencyNS float64 `yaml:"latency_ns"`
}

type linkSpec struct {
	pos    `yaml:"-"`
	Count  int     `yaml:"count"`
	Per    int     `yaml:"per"`
	A      string  `yaml:"a"`
	B      string  `yaml:"b"`
	Metres float64 `yaml:"metres"`
}

type deviceSpec struct {
	pos             `yaml:"-"`
	ID              string            `yaml:"id"`
	Count           int               `yaml:"count"`
	Per             int               `yaml:"per"`
	First           int               `yaml:"first"`
	Kind            string            `yaml:"kind"`
	Model           string            `yaml:"model"`
	Vendor          string            `yaml:"vendor"`
	VendorID        string            `yaml:"vendor_id"`
	DeviceID        string            `yaml:"device_id"`
	Capacity        string            `yaml:"capacity"`
	BlockSize       string            `yaml:"block_size"`
	LinkWidth       int               `yaml:"link_width"`
	LinkSpeed       string            `yaml:"link_speed"`
	Switch          string            `yaml:"switch"`
	Port            string            `yaml:"port"`
	Ports           []string          `yaml:"ports"`
	Metres          float64           `yaml:"metres"`
	Drawer          string            `yaml:"drawer"`
	Slot            int               `yaml:"slot"`
	MaxCompositions int               `yaml:"max_compositions"`
	OverheadNS      float64           `yaml:"overhead_ns"`
	Attrs           map[string]string `yaml:"attrs"`
}

type zoneSpec struct {
	pos     `yaml:"-"`
	ID      string   `yaml:"id"`
	Hosts   []string `yaml:"hosts"`
	Devices []string `yaml:"devices"`
}

// decodeStrict decodes mapping node n into out (a pointer to an alias of a
// spec type, so UnmarshalYAML is not re-entered), rejecting unknown keys and
// recording the line of each key.
func decodeStrict(n *yaml.Node, out any, p *pos, what string) error {
	if n.Kind != yaml.MappingNode {
		return &yaml.TypeError{Errors: []string{fmt.Sprintf("line %d: %s must be a mapping", n.Line, what)}}
	}
	allowed := map[string]bool{}
	t := reflect.TypeOf(out).Elem()
	for i := 0; i < t.NumField(); i++ {
		tag := strings.Split(t.Field(i).Tag.Get("yaml"), ",")[0]
		if tag != "" && tag != "-" {
			allowed[tag] = true
		}
	}
	p.line = n.Line
	p.fields = map[string]int{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k := n.Content[i]
		if !allowed[k.Value] {
			names := make([]string, 0, len(allowed))
			for a := range allowed {
				names = append(names, a)
			}
			sort.Strings(names)
			return &yaml.TypeError{Errors: []string{fmt.Sprintf("line %d: %s: unknown field %q (valid: %s)", k.Line, what, k.Value, strings.Join(names, ", "))}}
		}
		if _, dup := p.fields[k.Value]; dup {
			return &yaml.TypeError{Errors: []string{fmt.Sprintf("line %d: %s: field %q given twice", k.Line, what, k.Value)}}
		}
		p.fields[k.Value] = k.Line
	}
	return n.Decode(out)
}

func (s *fileSpec) UnmarshalYAML(n *yaml.Node) error {
	type alias fileSpec
	var a alias
	err := decodeStrict(n, &a, &a.pos, "topology")
	*s = fileSpec(a)
	return err
}

func (s *defaultsSpec) UnmarshalYAML(n *yaml.Node) error {
	type alias defaultsSpec
	var a alias
	err := decodeStrict(n, &a, &a.pos, "defaults")
	*s = defaultsSpec(a)
	return err
}

func (s *rackSpec) UnmarshalYAML(n *yaml.Node) error {
	type alias rackSpec
	var a alias
	err := decodeStrict(n, &a, &a.pos, "rack")
	*s = rackSpec(a)
	return err
}

func (s *hostSpec) UnmarshalYAML(n *yaml.Node) error {
	type alias hostSpec
	var a alias
	err := decodeStrict(n, &a, &a.pos, "host")
	*s = hostSpec(a)
	return err
}

func (s *hostPortSpec) UnmarshalYAML(n *yaml.Node) error {
	type alias hostPortSpec
	var a alias
	err := decodeStrict(n, &a, &a.pos, "host port")
	*s = hostPortSpec(a)
	return err
}

func (s *fabricSpec) UnmarshalYAML(n *yaml.Node) error {
	type alias fabricSpec
	var a alias
	err := decodeStrict(n, &a, &a.pos, "fabric")
	*s = fabricSpec(a)
	return err
}

func (s *chassisSpec) UnmarshalYAML(n *yaml.Node) error {
	type alias chassisSpec
	var a alias
	err := decodeStrict(n, &a, &a.pos, "chassis")
	*s = chassisSpec(a)
	return err
}

func (s *drawerSpec) UnmarshalYAML(n *yaml.Node) error {
	type alias drawerSpec
	var a alias
	err := decodeStrict(n, &a, &a.pos, "drawer")
	*s = drawerSpec(a)
	return err
}

func (s *switchSpec) UnmarshalYAML(n *yaml.Node) error {
	type alias switchSpec
	var a alias
	err := decodeStrict(n, &a, &a.pos, "switch")
	*s = switchSpec(a)
	return err
}

func (s *linkSpec) UnmarshalYAML(n *yaml.Node) error {
	type alias linkSpec
	var a alias
	err := decodeStrict(n, &a, &a.pos, "link")
	*s = linkSpec(a)
	return err
}

func (s *deviceSpec) UnmarshalYAML(n *yaml.Node) error {
	type alias deviceSpec
	var a alias
	err := decodeStrict(n, &a, &a.pos, "device")
	*s = deviceSpec(a)
	return err
}

func (s *zoneSpec) UnmarshalYAML(n *yaml.Node) error {
	type alias zoneSpec
	var a alias
	err := decodeStrict(n, &a, &a.pos, "zone")
	*s = zoneSpec(a)
	return err
}
