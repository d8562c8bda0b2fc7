package topology

import (
	"fmt"
	"reflect"
	"sort"
	"strings"

	"go.yaml.in/yaml/v3"
)

// The file format. A topology file decodes into a Spec (Parse), and a
// program can build a Spec itself and hand it to Compile, or write it as a
// file with Marshal; either way the same validation and model building
// run. Strings in ids, switch names and ports may be templates: {n} is the
// copy's number (1-based), {q} and {r} the quotient and remainder of n-1
// by per, both 1-based.
//
// Every spec type records the line of its mapping and of each key when it
// is decoded, so validation can name file, line and field; a Spec built in
// code has no lines, and its errors name the file and the field only.

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

// Spec is a whole topology file.
type Spec struct {
	pos      `yaml:"-"`
	Name     string        `yaml:"name,omitempty"`
	Defaults DefaultsSpec  `yaml:"defaults,omitempty"`
	Racks    []*RackSpec   `yaml:"racks,omitempty"`
	Fabrics  []*FabricSpec `yaml:"fabrics,omitempty"`
	Zones    []*ZoneSpec   `yaml:"zones,omitempty"`
}

// DefaultsSpec overrides the default reconfiguration times (durations such
// as "25ms"; empty: DefaultPCIeHotplug and the others).
type DefaultsSpec struct {
	pos            `yaml:"-"`
	PCIeHotplug    string `yaml:"pcie_hotplug,omitempty"`
	SASRemap       string `yaml:"sas_remap,omitempty"`
	SASDriveOnline string `yaml:"sas_drive_online,omitempty"`
	VLANChange     string `yaml:"vlan_change,omitempty"`
	OCSReconfig    string `yaml:"ocs_reconfig,omitempty"`
	// CXLReconfig is one CXL fabric-manager operation: bind a logical
	// device or add an extent, and a host's acknowledged release.
	CXLReconfig string `yaml:"cxl_reconfig,omitempty"`
	// CXLReleaseTimeout is how long a host may take to acknowledge a
	// release before the fabric manager forces it.
	CXLReleaseTimeout string `yaml:"cxl_release_timeout,omitempty"`
	// HostPowerOn and HostShutdown are an emulated host's modelled power
	// times (a host's power_on and shutdown override them).
	HostPowerOn  string `yaml:"host_power_on,omitempty"`
	HostShutdown string `yaml:"host_shutdown,omitempty"`
}

// RackSpec is a rack of hosts.
type RackSpec struct {
	pos   `yaml:"-"`
	ID    string      `yaml:"id,omitempty"`
	Hosts []*HostSpec `yaml:"hosts,omitempty"`
}

// HostSpec is Count hosts (0: one) alike; ID, and the switch and port of
// each of Ports, are templates. A numeric port without a template advances
// by one with each copy.
type HostSpec struct {
	pos    `yaml:"-"`
	ID     string          `yaml:"id,omitempty"`
	Count  int             `yaml:"count,omitempty"`
	Per    int             `yaml:"per,omitempty"`
	Cores  int             `yaml:"cores,omitempty"`
	Memory string          `yaml:"memory,omitempty"` // a size: "256GiB"
	Ports  []*HostPortSpec `yaml:"ports,omitempty"`
	// PowerOn and Shutdown override defaults.host_power_on and
	// defaults.host_shutdown.
	PowerOn  string `yaml:"power_on,omitempty"`
	Shutdown string `yaml:"shutdown,omitempty"`
	// BMC, when set, manages the host's power and boot through Redfish.
	BMC *BMCSpec `yaml:"bmc,omitempty"`
}

// BMCSpec is where a host's BMC is and how to log in; URL and System are
// templates like the host's id. The password comes from the environment
// variable PasswordEnv, never from the file.
type BMCSpec struct {
	pos         `yaml:"-"`
	URL         string `yaml:"url,omitempty"`
	System      string `yaml:"system,omitempty"`
	CAFile      string `yaml:"ca_file,omitempty"`
	User        string `yaml:"user,omitempty"`
	PasswordEnv string `yaml:"password_env,omitempty"`
}

// HostPortSpec cables a host to a port of a fabric's switch (Switch may be
// empty when the fabric has one switch; ID defaults to the fabric's id).
type HostPortSpec struct {
	pos    `yaml:"-"`
	ID     string  `yaml:"id,omitempty"`
	Fabric string  `yaml:"fabric,omitempty"`
	Switch string  `yaml:"switch,omitempty"`
	Port   string  `yaml:"port,omitempty"`
	Metres float64 `yaml:"metres,omitempty"`
}

// FabricSpec is one fabric: a kind, switches (or, for pcie-switch, a
// chassis), the links between switches and the devices on them.
type FabricSpec struct {
	pos         `yaml:"-"`
	ID          string `yaml:"id,omitempty"`
	Kind        string `yaml:"kind,omitempty"`
	Reconfig    string `yaml:"reconfig,omitempty"`
	DriveOnline string `yaml:"drive_online,omitempty"`
	// ReleaseTimeout (cxl-memory) overrides defaults.cxl_release_timeout.
	ReleaseTimeout string `yaml:"release_timeout,omitempty"`
	// Driver chooses how the control plane drives the fabric
	// (docs/southbound.md): emulated (default), redfish (Manager says
	// where) or netns (ethernet-vlan only).
	Driver   string        `yaml:"driver,omitempty"`
	Manager  *ManagerSpec  `yaml:"manager,omitempty"`
	Chassis  *ChassisSpec  `yaml:"chassis,omitempty"`
	Switches []*SwitchSpec `yaml:"switches,omitempty"`
	Links    []*LinkSpec   `yaml:"links,omitempty"`
	Devices  []*DeviceSpec `yaml:"devices,omitempty"`
}

// ManagerSpec is where a redfish-driven fabric's manager is and how to
// log in; the password comes from the environment variable PasswordEnv,
// never from the file.
type ManagerSpec struct {
	pos `yaml:"-"`
	// API is what the manager offers: "fabric" (the default: a Fabric with
	// Endpoints and Zones or Connections) or "composition" (a vendor's
	// composer: resource blocks composed into ComputerSystems).
	API         string `yaml:"api,omitempty"`
	URL         string `yaml:"url,omitempty"`
	Fabric      string `yaml:"fabric,omitempty"`
	CAFile      string `yaml:"ca_file,omitempty"`
	User        string `yaml:"user,omitempty"`
	PasswordEnv string `yaml:"password_env,omitempty"`
}

// ChassisSpec is a PCIe chassis with host ports H1..HostPorts and drawers
// of slots.
type ChassisSpec struct {
	pos       `yaml:"-"`
	ID        string        `yaml:"id,omitempty"`
	LatencyNS float64       `yaml:"latency_ns,omitempty"`
	HostPorts int           `yaml:"host_ports,omitempty"`
	Drawers   []*DrawerSpec `yaml:"drawers,omitempty"`
}

// DrawerSpec is a chassis drawer and the host ports cabled to it.
type DrawerSpec struct {
	pos       `yaml:"-"`
	ID        string   `yaml:"id,omitempty"`
	Mode      string   `yaml:"mode,omitempty"`
	Slots     int      `yaml:"slots,omitempty"`
	HostPorts []string `yaml:"host_ports,omitempty"`
}

// SwitchSpec is Count switches (0: one) alike; ID is a template ({n}).
type SwitchSpec struct {
	pos       `yaml:"-"`
	ID        string  `yaml:"id,omitempty"`
	Count     int     `yaml:"count,omitempty"`
	Ports     int     `yaml:"ports,omitempty"`
	LatencyNS float64 `yaml:"latency_ns,omitempty"`
}

// LinkSpec is Count links (0: one) between switches A and B (templates).
type LinkSpec struct {
	pos    `yaml:"-"`
	Count  int     `yaml:"count,omitempty"`
	Per    int     `yaml:"per,omitempty"`
	A      string  `yaml:"a,omitempty"`
	B      string  `yaml:"b,omitempty"`
	Metres float64 `yaml:"metres,omitempty"`
}

// DeviceSpec is Count devices (0: one) alike, numbered from First (0:
// one); ID, Switch and the ports are templates. Numeric ports without a
// template advance with each copy.
type DeviceSpec struct {
	pos             `yaml:"-"`
	ID              string            `yaml:"id,omitempty"`
	Count           int               `yaml:"count,omitempty"`
	Per             int               `yaml:"per,omitempty"`
	First           int               `yaml:"first,omitempty"`
	Kind            string            `yaml:"kind,omitempty"`
	Model           string            `yaml:"model,omitempty"`
	Vendor          string            `yaml:"vendor,omitempty"`
	VendorID        string            `yaml:"vendor_id,omitempty"`
	DeviceID        string            `yaml:"device_id,omitempty"`
	Capacity        string            `yaml:"capacity,omitempty"`
	BlockSize       string            `yaml:"block_size,omitempty"`
	LinkWidth       int               `yaml:"link_width,omitempty"`
	LinkSpeed       string            `yaml:"link_speed,omitempty"`
	Switch          string            `yaml:"switch,omitempty"`
	Port            string            `yaml:"port,omitempty"`
	Ports           []string          `yaml:"ports,omitempty"`
	Metres          float64           `yaml:"metres,omitempty"`
	Drawer          string            `yaml:"drawer,omitempty"`
	Slot            int               `yaml:"slot,omitempty"`
	MaxCompositions int               `yaml:"max_compositions,omitempty"`
	OverheadNS      float64           `yaml:"overhead_ns,omitempty"`
	Attrs           map[string]string `yaml:"attrs,omitempty"`
	// CXL memory devices (cxl-memory fabrics only): the capacity less
	// DCDCapacity is split into LogicalDevices equal LDs (1..16; default
	// 1 when there is room left), and DCDCapacity (default: all of the
	// capacity when ExtentSize is given) into extents of ExtentSize.
	LogicalDevices int    `yaml:"logical_devices,omitempty"`
	DCDCapacity    string `yaml:"dcd_capacity,omitempty"`
	ExtentSize     string `yaml:"extent_size,omitempty"`
}

// ZoneSpec restricts compositions to the listed hosts and devices.
type ZoneSpec struct {
	pos     `yaml:"-"`
	ID      string   `yaml:"id,omitempty"`
	Hosts   []string `yaml:"hosts,omitempty"`
	Devices []string `yaml:"devices,omitempty"`
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

func (s *Spec) UnmarshalYAML(n *yaml.Node) error {
	type alias Spec
	var a alias
	err := decodeStrict(n, &a, &a.pos, "topology")
	*s = Spec(a)
	return err
}

func (s *DefaultsSpec) UnmarshalYAML(n *yaml.Node) error {
	type alias DefaultsSpec
	var a alias
	err := decodeStrict(n, &a, &a.pos, "defaults")
	*s = DefaultsSpec(a)
	return err
}

func (s *RackSpec) UnmarshalYAML(n *yaml.Node) error {
	type alias RackSpec
	var a alias
	err := decodeStrict(n, &a, &a.pos, "rack")
	*s = RackSpec(a)
	return err
}

func (s *HostSpec) UnmarshalYAML(n *yaml.Node) error {
	type alias HostSpec
	var a alias
	err := decodeStrict(n, &a, &a.pos, "host")
	*s = HostSpec(a)
	return err
}

func (s *BMCSpec) UnmarshalYAML(n *yaml.Node) error {
	type alias BMCSpec
	var a alias
	err := decodeStrict(n, &a, &a.pos, "bmc")
	*s = BMCSpec(a)
	return err
}

func (s *HostPortSpec) UnmarshalYAML(n *yaml.Node) error {
	type alias HostPortSpec
	var a alias
	err := decodeStrict(n, &a, &a.pos, "host port")
	*s = HostPortSpec(a)
	return err
}

func (s *FabricSpec) UnmarshalYAML(n *yaml.Node) error {
	type alias FabricSpec
	var a alias
	err := decodeStrict(n, &a, &a.pos, "fabric")
	*s = FabricSpec(a)
	return err
}

func (s *ChassisSpec) UnmarshalYAML(n *yaml.Node) error {
	type alias ChassisSpec
	var a alias
	err := decodeStrict(n, &a, &a.pos, "chassis")
	*s = ChassisSpec(a)
	return err
}

func (s *DrawerSpec) UnmarshalYAML(n *yaml.Node) error {
	type alias DrawerSpec
	var a alias
	err := decodeStrict(n, &a, &a.pos, "drawer")
	*s = DrawerSpec(a)
	return err
}

func (s *SwitchSpec) UnmarshalYAML(n *yaml.Node) error {
	type alias SwitchSpec
	var a alias
	err := decodeStrict(n, &a, &a.pos, "switch")
	*s = SwitchSpec(a)
	return err
}

func (s *LinkSpec) UnmarshalYAML(n *yaml.Node) error {
	type alias LinkSpec
	var a alias
	err := decodeStrict(n, &a, &a.pos, "link")
	*s = LinkSpec(a)
	return err
}

func (s *DeviceSpec) UnmarshalYAML(n *yaml.Node) error {
	type alias DeviceSpec
	var a alias
	err := decodeStrict(n, &a, &a.pos, "device")
	*s = DeviceSpec(a)
	return err
}

func (s *ZoneSpec) UnmarshalYAML(n *yaml.Node) error {
	type alias ZoneSpec
	var a alias
	err := decodeStrict(n, &a, &a.pos, "zone")
	*s = ZoneSpec(a)
	return err
}
