// Package topology loads and validates topology files (YAML) into an
// inventory, and computes the latency and hop model between every host and
// every device: round trip = 2 × (switch port-to-port latencies on the path +
// 5 ns per metre of cable) + the device's own overhead (P0 §5, P4 Eq. 1).
//
// Validation errors name the file, the line and the field:
//
//	rack.yaml:42: fabrics[0].devices[3].slot: slot 9 is outside drawer1's 1..8
package topology

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"net/url"
	"os"
	"regexp"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"rackpool/examples"
	"rackpool/internal/inventory"
	"rackpool/internal/units"
)

// ExampleRack is the built-in default topology (examples/rack.yaml).
var ExampleRack = examples.Rack

// ExampleRackName is the name used for the built-in topology in messages.
const ExampleRackName = "examples/rack.yaml"

// MaxSwitchPorts is the most ports one switch may have.
const MaxSwitchPorts = 100_000

// NSPerMetre is the propagation delay of light in fibre or copper (P0 §5).
const NSPerMetre = 5.0

// Default reconfiguration times (P1 §3, P4 §2): PCIe hot-plug, SAS remap and
// drive online after COMRESET, a VLAN change, an OCS circuit.
const (
	DefaultPCIeHotplug    = 100 * time.Millisecond
	DefaultSASRemap       = time.Millisecond
	DefaultSASDriveOnline = time.Millisecond
	DefaultVLANChange     = 5 * time.Millisecond
	DefaultOCSReconfig    = 25 * time.Millisecond
	// DefaultCXLReconfig is one CXL fabric-manager operation (bind an LD,
	// add or release an extent with the host's acknowledgement). No source
	// paper measures it; it is an assumption of the order of a PCIe
	// hot-plug's software part, and a topology can set its own.
	DefaultCXLReconfig = 10 * time.Millisecond
	// DefaultCXLReleaseTimeout is how long a host has to acknowledge a
	// release before the fabric manager forces it (an assumption too).
	DefaultCXLReleaseTimeout = 5 * time.Second
	// DefaultHostPowerOn is an emulated host's time from power applied to
	// PowerState On, and DefaultHostShutdown its operating system's
	// graceful shutdown: assumptions of the order of a server's BMC
	// reporting power-on and a Linux shutdown; a topology sets its own.
	DefaultHostPowerOn  = 5 * time.Second
	DefaultHostShutdown = 20 * time.Second
)

// Error is a validation error at a place in a topology file.
type Error struct {
	File  string
	Line  int
	Field string
	Msg   string
}

// Error formats as "file:line: field: msg"; an error in a Spec built in
// code (Compile) has no line: "name: field: msg".
func (e *Error) Error() string {
	where := e.File
	if e.Line > 0 {
		where = fmt.Sprintf("%s:%d", e.File, e.Line)
	}
	if e.Field == "" {
		return fmt.Sprintf("%s: %s", where, e.Msg)
	}
	return fmt.Sprintf("%s: %s: %s", where, e.Field, e.Msg)
}

// LoadFile reads and validates the topology file at path.
func LoadFile(path string) (*Topology, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read topology: %w", err)
	}
	return Parse(path, data)
}

// LoadDefault returns the built-in example rack.
func LoadDefault() *Topology {
	t, err := Parse(ExampleRackName, ExampleRack)
	if err != nil {
		panic("built-in topology is invalid: " + err.Error())
	}
	return t
}

var yamlLine = regexp.MustCompile(`line (\d+): (.*)`)

// Parse validates data, read from file name, into a Topology: it decodes
// the file into a Spec (rejecting unknown and repeated keys) and compiles
// it (Compile).
func Parse(name string, data []byte) (*Topology, error) {
	spec, err := Decode(name, data)
	if err != nil {
		return nil, err
	}
	return Compile(name, spec)
}

// Decode reads a topology file, from file name, into its Spec without
// validating it further; errors name the file and the line.
func Decode(name string, data []byte) (*Spec, error) {
	var spec Spec
	dec := yaml.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&spec); err != nil {
		var te *yaml.TypeError
		if errors.As(err, &te) && len(te.Errors) > 0 {
			if m := yamlLine.FindStringSubmatch(te.Errors[0]); m != nil {
				line, _ := strconv.Atoi(m[1])
				return nil, &Error{File: name, Line: line, Msg: m[2]}
			}
		}
		if m := yamlLine.FindStringSubmatch(err.Error()); m != nil {
			line, _ := strconv.Atoi(m[1])
			return nil, &Error{File: name, Line: line, Msg: m[2]}
		}
		return nil, &Error{File: name, Line: 1, Msg: err.Error()}
	}
	return &spec, nil
}

// Compile validates spec into a Topology, exactly as Parse validates a
// file: the same checks and the same model. name stands for the file in
// errors. A Spec decoded from a file (Decode) keeps its line numbers in
// errors; one built in code has none, and its errors name the field path
// ("fabrics[3].devices[0].ports"). Compile does not change spec.
func Compile(name string, spec *Spec) (*Topology, error) {
	if spec == nil {
		return nil, &Error{File: name, Msg: "no topology"}
	}
	b := &builder{file: name, inv: &inventory.Inventory{Name: spec.Name}, ports: map[string]string{}}
	if err := b.build(spec); err != nil {
		return nil, err
	}
	b.inv.Index()
	return newTopology(b.inv), nil
}

type builder struct {
	file     string
	inv      *inventory.Inventory
	ports    map[string]string // "fabric/switch/port" -> who uses it
	switches map[*inventory.Fabric]map[string]*inventory.Switch
	// powerOn and shutdown are the defaults' host power times.
	powerOn, shutdown time.Duration
}

// emptyf reports an empty entry of the list under key of the mapping at p.
func (b *builder) emptyf(p pos, key, path, msg string) error {
	return &Error{File: b.file, Line: p.at(key), Field: path, Msg: msg}
}

func (b *builder) errf(p pos, field, path, format string, args ...any) error {
	f := path
	if field != "" {
		f = path + "." + field
	}
	return &Error{File: b.file, Line: p.at(field), Field: f, Msg: fmt.Sprintf(format, args...)}
}

// expand substitutes {n} (1-based index), {q} and {r} (quotient and remainder
// of n-1 by per, both 1-based) in a templated string.
func expand(s string, n, per int) string {
	if !strings.Contains(s, "{") {
		return s
	}
	if per <= 0 {
		per = 1
	}
	s = strings.ReplaceAll(s, "{n}", strconv.Itoa(n))
	s = strings.ReplaceAll(s, "{q}", strconv.Itoa((n-1)/per+1))
	s = strings.ReplaceAll(s, "{r}", strconv.Itoa((n-1)%per+1))
	return s
}

func parseDuration(s string, def time.Duration) (time.Duration, error) {
	if s == "" {
		return def, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("%q is not a duration (e.g. 25ms)", s)
	}
	if d < 0 {
		return 0, fmt.Errorf("%q is negative", s)
	}
	return d, nil
}

func (b *builder) build(spec *Spec) error {
	if b.inv.Name == "" {
		b.inv.Name = "topology"
	}
	d := spec.Defaults
	var err error
	defs := map[string]*time.Duration{}
	pcie, sasRemap, sasOnline, vlan, ocs := DefaultPCIeHotplug, DefaultSASRemap, DefaultSASDriveOnline, DefaultVLANChange, DefaultOCSReconfig
	cxl, cxlRelease := DefaultCXLReconfig, DefaultCXLReleaseTimeout
	b.powerOn, b.shutdown = DefaultHostPowerOn, DefaultHostShutdown
	for _, x := range []struct {
		field string
		val   string
		dst   *time.Duration
	}{{"pcie_hotplug", d.PCIeHotplug, &pcie}, {"sas_remap", d.SASRemap, &sasRemap}, {"sas_drive_online", d.SASDriveOnline, &sasOnline},
		{"vlan_change", d.VLANChange, &vlan}, {"ocs_reconfig", d.OCSReconfig, &ocs},
		{"cxl_reconfig", d.CXLReconfig, &cxl}, {"cxl_release_timeout", d.CXLReleaseTimeout, &cxlRelease},
		{"host_power_on", d.HostPowerOn, &b.powerOn}, {"host_shutdown", d.HostShutdown, &b.shutdown}} {
		if *x.dst, err = parseDuration(x.val, *x.dst); err != nil {
			return b.errf(d.pos, x.field, "defaults", "%v", err)
		}
		defs[x.field] = x.dst
	}

	// Fabrics first: hosts and zones refer to them.
	fabByID := map[string]*inventory.Fabric{}
	devByID := map[string]*inventory.Device{}
	for fi, fs := range spec.Fabrics {
		if fs == nil {
			return b.emptyf(spec.pos, "fabrics", fmt.Sprintf("fabrics[%d]", fi), "empty fabric")
		}
		path := fmt.Sprintf("fabrics[%d]", fi)
		if fs.ID == "" {
			return b.errf(fs.pos, "id", path, "missing fabric id")
		}
		if fabByID[fs.ID] != nil {
			return b.errf(fs.pos, "id", path, "duplicate fabric id %q", fs.ID)
		}
		f := &inventory.Fabric{ID: fs.ID, Kind: inventory.FabricKind(fs.Kind)}
		switch f.Kind {
		case inventory.PCIeSwitch:
			f.Reconfig = pcie
		case inventory.SASCircuit:
			f.Reconfig, f.DriveOnline = sasRemap, sasOnline
		case inventory.EthernetVLAN:
			f.Reconfig = vlan
		case inventory.OpticalCircuit:
			f.Reconfig = ocs
		case inventory.CXLMemory:
			f.Reconfig, f.ReleaseTimeout = cxl, cxlRelease
		default:
			return b.errf(fs.pos, "kind", path, "unknown fabric kind %q (valid: pcie-switch, sas-circuit, ethernet-vlan, optical-circuit, cxl-memory)", fs.Kind)
		}
		if f.Reconfig, err = parseDuration(fs.Reconfig, f.Reconfig); err != nil {
			return b.errf(fs.pos, "reconfig", path, "%v", err)
		}
		if fs.DriveOnline != "" && f.Kind != inventory.SASCircuit {
			return b.errf(fs.pos, "drive_online", path, "only sas-circuit fabrics have a drive online time")
		}
		if f.DriveOnline, err = parseDuration(fs.DriveOnline, f.DriveOnline); err != nil {
			return b.errf(fs.pos, "drive_online", path, "%v", err)
		}
		if fs.ReleaseTimeout != "" && f.Kind != inventory.CXLMemory {
			return b.errf(fs.pos, "release_timeout", path, "only cxl-memory fabrics have a release timeout")
		}
		if f.ReleaseTimeout, err = parseDuration(fs.ReleaseTimeout, f.ReleaseTimeout); err != nil {
			return b.errf(fs.pos, "release_timeout", path, "%v", err)
		}
		if err := b.buildDriver(f, fs, path); err != nil {
			return err
		}
		fabByID[f.ID] = f
		b.inv.Fabrics = append(b.inv.Fabrics, f)
		if err := b.buildSwitches(f, fs, path); err != nil {
			return err
		}
		for di, ds := range fs.Devices {
			if ds == nil {
				return b.emptyf(fs.pos, "devices", fmt.Sprintf("%s.devices[%d]", path, di), "empty device")
			}
			if err := b.buildDevices(f, ds, fmt.Sprintf("%s.devices[%d]", path, di), devByID); err != nil {
				return err
			}
		}
	}

	hostByID := map[string]*inventory.Host{}
	for ri, rs := range spec.Racks {
		if rs == nil {
			return b.emptyf(spec.pos, "racks", fmt.Sprintf("racks[%d]", ri), "empty rack")
		}
		rpath := fmt.Sprintf("racks[%d]", ri)
		if rs.ID == "" {
			return b.errf(rs.pos, "id", rpath, "missing rack id")
		}
		for hi, hs := range rs.Hosts {
			if hs == nil {
				return b.emptyf(rs.pos, "hosts", fmt.Sprintf("%s.hosts[%d]", rpath, hi), "empty host")
			}
			if err := b.buildHosts(rs.ID, hs, fmt.Sprintf("%s.hosts[%d]", rpath, hi), fabByID, hostByID); err != nil {
				return err
			}
		}
	}
	if len(b.inv.Hosts) == 0 {
		return &Error{File: b.file, Line: spec.pos.at("racks"), Field: "racks", Msg: "the topology has no hosts"}
	}

	for zi, zs := range spec.Zones {
		if zs == nil {
			return b.emptyf(spec.pos, "zones", fmt.Sprintf("zones[%d]", zi), "empty zone")
		}
		path := fmt.Sprintf("zones[%d]", zi)
		if zs.ID == "" {
			return b.errf(zs.pos, "id", path, "missing zone id")
		}
		z := &inventory.Zone{ID: zs.ID, Hosts: map[string]bool{}, Devices: map[string]bool{}}
		for _, prev := range b.inv.Zones {
			if prev.ID == z.ID {
				return b.errf(zs.pos, "id", path, "duplicate zone id %q", z.ID)
			}
		}
		for _, h := range zs.Hosts {
			if hostByID[h] == nil {
				return b.errf(zs.pos, "hosts", path, "unknown host %q", h)
			}
			z.Hosts[h] = true
		}
		for _, dv := range zs.Devices {
			if devByID[dv] == nil {
				return b.errf(zs.pos, "devices", path, "unknown device %q", dv)
			}
			z.Devices[dv] = true
		}
		b.inv.Zones = append(b.inv.Zones, z)
	}
	return nil
}

func (b *builder) buildSwitches(f *inventory.Fabric, fs *FabricSpec, path string) error {
	if fs.Chassis != nil {
		c := fs.Chassis
		cpath := path + ".chassis"
		if f.Kind != inventory.PCIeSwitch {
			return b.errf(fs.pos, "chassis", path, "only pcie-switch fabrics have a chassis")
		}
		if len(fs.Switches) > 0 {
			return b.errf(fs.pos, "switches", path, "a pcie-switch fabric has either a chassis or switches, not both")
		}
		id := c.ID
		if id == "" {
			id = "chassis"
		}
		if c.HostPorts < 1 || c.HostPorts > 16 {
			return b.errf(c.pos, "host_ports", cpath, "must be 1..16, got %d", c.HostPorts)
		}
		if c.LatencyNS < 0 {
			return b.errf(c.pos, "latency_ns", cpath, "must not be negative")
		}
		sw := &inventory.Switch{ID: id, Fabric: f, LatencyNS: c.LatencyNS}
		for i := 1; i <= c.HostPorts; i++ {
			sw.PortNames = append(sw.PortNames, fmt.Sprintf("H%d", i))
		}
		if len(c.Drawers) == 0 {
			return b.errf(c.pos, "drawers", cpath, "a chassis needs at least one drawer")
		}
		for di, ds := range c.Drawers {
			if ds == nil {
				return b.emptyf(c.pos, "drawers", fmt.Sprintf("%s.drawers[%d]", cpath, di), "empty drawer")
			}
			dpath := fmt.Sprintf("%s.drawers[%d]", cpath, di)
			if ds.ID == "" {
				return b.errf(ds.pos, "id", dpath, "missing drawer id")
			}
			for _, prev := range f.Drawers {
				if prev.ID == ds.ID {
					return b.errf(ds.pos, "id", dpath, "duplicate drawer id %q", ds.ID)
				}
			}
			dr := &inventory.Drawer{ID: ds.ID, Mode: inventory.DrawerMode(ds.Mode), Slots: ds.Slots}
			if dr.Slots == 0 {
				dr.Slots = 8
			}
			if dr.Slots < 1 || dr.Slots > 32 {
				return b.errf(ds.pos, "slots", dpath, "must be 1..32, got %d", ds.Slots)
			}
			max := dr.Mode.MaxHosts()
			if max == 0 {
				return b.errf(ds.pos, "mode", dpath, "unknown drawer mode %q (valid: standard-one-host, standard-two-hosts, advanced)", ds.Mode)
			}
			seen := map[string]bool{}
			for _, hp := range ds.HostPorts {
				n, err := strconv.Atoi(strings.TrimPrefix(hp, "H"))
				if !strings.HasPrefix(hp, "H") || err != nil || n < 1 || n > c.HostPorts {
					return b.errf(ds.pos, "host_ports", dpath, "unknown chassis host port %q (valid: H1..H%d)", hp, c.HostPorts)
				}
				if seen[hp] {
					return b.errf(ds.pos, "host_ports", dpath, "host port %s listed twice", hp)
				}
				seen[hp] = true
			}
			switch {
			case dr.Mode == inventory.StandardOneHost && len(ds.HostPorts) != 1:
				return b.errf(ds.pos, "host_ports", dpath, "mode standard-one-host connects exactly 1 host port to the drawer, got %d", len(ds.HostPorts))
			case dr.Mode == inventory.StandardTwoHosts && len(ds.HostPorts) != 2:
				return b.errf(ds.pos, "host_ports", dpath, "mode standard-two-hosts connects exactly 2 host ports to the drawer, got %d", len(ds.HostPorts))
			case dr.Mode == inventory.Advanced && (len(ds.HostPorts) < 1 || len(ds.HostPorts) > max):
				return b.errf(ds.pos, "host_ports", dpath, "mode advanced connects 1 to %d host ports to the drawer, got %d", max, len(ds.HostPorts))
			}
			dr.HostPorts = append([]string(nil), ds.HostPorts...)
			for s := 1; s <= dr.Slots; s++ {
				sw.PortNames = append(sw.PortNames, fmt.Sprintf("%s/slot%d", dr.ID, s))
			}
			f.Drawers = append(f.Drawers, dr)
		}
		f.Switches = []*inventory.Switch{sw}
		return nil
	}
	if len(fs.Switches) == 0 {
		return b.errf(fs.pos, "switches", path, "a fabric needs at least one switch (or a chassis, for pcie-switch)")
	}
	byID := map[string]*inventory.Switch{}
	if b.switches == nil {
		b.switches = map[*inventory.Fabric]map[string]*inventory.Switch{}
	}
	b.switches[f] = byID
	for si, ss := range fs.Switches {
		if ss == nil {
			return b.emptyf(fs.pos, "switches", fmt.Sprintf("%s.switches[%d]", path, si), "empty switch")
		}
		spath := fmt.Sprintf("%s.switches[%d]", path, si)
		count := ss.Count
		if count == 0 {
			count = 1
		}
		if count < 0 {
			return b.errf(ss.pos, "count", spath, "must not be negative")
		}
		for n := 1; n <= count; n++ {
			id := expand(ss.ID, n, 1)
			if id == "" {
				return b.errf(ss.pos, "id", spath, "missing switch id")
			}
			if count > 1 && !strings.Contains(ss.ID, "{") {
				return b.errf(ss.pos, "id", spath, "count %d needs {n} in the id", count)
			}
			if byID[id] != nil {
				return b.errf(ss.pos, "id", spath, "duplicate switch id %q", id)
			}
			if ss.Ports < 1 || ss.Ports > MaxSwitchPorts {
				return b.errf(ss.pos, "ports", spath, "must be 1..%d, got %d", MaxSwitchPorts, ss.Ports)
			}
			if ss.LatencyNS < 0 {
				return b.errf(ss.pos, "latency_ns", spath, "must not be negative")
			}
			sw := &inventory.Switch{ID: id, Fabric: f, Ports: ss.Ports, LatencyNS: ss.LatencyNS}
			byID[id] = sw
			f.Switches = append(f.Switches, sw)
		}
	}
	for li, ls := range fs.Links {
		if ls == nil {
			return b.emptyf(fs.pos, "links", fmt.Sprintf("%s.links[%d]", path, li), "empty link")
		}
		lpath := fmt.Sprintf("%s.links[%d]", path, li)
		if err := b.buildLinks(f, ls, lpath, byID); err != nil {
			return err
		}
	}
	return nil
}

func (b *builder) buildLinks(f *inventory.Fabric, ls *LinkSpec, lpath string, byID map[string]*inventory.Switch) error {
	count := max(ls.Count, 1)
	for n := 1; n <= count; n++ {
		an, bn := expand(ls.A, n, ls.Per), expand(ls.B, n, ls.Per)
		a, bb := byID[an], byID[bn]
		if a == nil {
			return b.errf(ls.pos, "a", lpath, "unknown switch %q", an)
		}
		if bb == nil {
			return b.errf(ls.pos, "b", lpath, "unknown switch %q", bn)
		}
		if a == bb {
			return b.errf(ls.pos, "b", lpath, "a link joins two different switches")
		}
		if ls.Metres < 0 {
			return b.errf(ls.pos, "metres", lpath, "must not be negative")
		}
		f.Links = append(f.Links, &inventory.Link{A: a, B: bb, Metres: ls.Metres})
	}
	return nil
}

func (b *builder) findSwitch(f *inventory.Fabric, id string) *inventory.Switch {
	if id == "" && len(f.Switches) == 1 {
		return f.Switches[0]
	}
	if byID := b.switches[f]; byID != nil {
		return byID[id]
	}
	for _, s := range f.Switches { // a chassis: one switch
		if s.ID == id {
			return s
		}
	}
	return nil
}

// claimPort checks port is a real port of sw and not already in use.
func (b *builder) claimPort(sw *inventory.Switch, port, who string) error {
	valid := false
	if n, err := strconv.Atoi(port); err == nil && n >= 1 && n <= sw.Ports {
		valid = true
	}
	for _, pn := range sw.PortNames {
		if pn == port {
			valid = true
		}
	}
	if !valid {
		if len(sw.PortNames) > 0 && sw.Ports == 0 {
			return fmt.Errorf("switch %s has no port %q (host ports H1..H%d)", sw.ID, port, countHostPorts(sw))
		}
		return fmt.Errorf("switch %s has no port %q (ports 1..%d)", sw.ID, port, sw.Ports)
	}
	key := sw.Fabric.ID + "/" + sw.ID + "/" + port
	if prev, ok := b.ports[key]; ok {
		return fmt.Errorf("port %s of switch %s is already used by %s", port, sw.ID, prev)
	}
	b.ports[key] = who
	return nil
}

func countHostPorts(sw *inventory.Switch) int {
	n := 0
	for _, p := range sw.PortNames {
		if strings.HasPrefix(p, "H") {
			n++
		}
	}
	return n
}

func (b *builder) buildDevices(f *inventory.Fabric, ds *DeviceSpec, path string, devByID map[string]*inventory.Device) error {
	count := ds.Count
	if count == 0 {
		count = 1
	}
	if count < 0 {
		return b.errf(ds.pos, "count", path, "must not be negative")
	}
	if count > 1 && !strings.Contains(ds.ID, "{") {
		return b.errf(ds.pos, "id", path, "count %d needs {n} in the id", count)
	}
	kind := inventory.Kind(ds.Kind)
	validKind := false
	for _, k := range inventory.DeviceKinds {
		validKind = validKind || k == kind
	}
	if !validKind {
		return b.errf(ds.pos, "kind", path, "unknown device kind %q (valid: gpu, fpga, nvme, ssd, hdd, nic, memory)", ds.Kind)
	}
	if f.Kind == inventory.SASCircuit && kind != inventory.HDD && kind != inventory.SSD {
		return b.errf(ds.pos, "kind", path, "a sas-circuit fabric carries only hdd and ssd drives, not %s", kind)
	}
	if f.Kind == inventory.CXLMemory && kind != inventory.Memory {
		return b.errf(ds.pos, "kind", path, "a cxl-memory fabric carries only memory devices (CXL type 3), not %s", kind)
	}
	capacity := int64(0)
	if ds.Capacity != "" {
		c, err := units.ParseBytes(ds.Capacity)
		if err != nil {
			return b.errf(ds.pos, "capacity", path, "%v", err)
		}
		capacity = c
	}
	var blockBytes int64
	cxl, err := b.cxlShape(f, ds, path, capacity)
	if err != nil {
		return err
	}
	if kind == inventory.Memory && f.Kind != inventory.CXLMemory { // a CXL device's blocks are its LDs and extents
		if capacity <= 0 {
			return b.errf(ds.pos, "capacity", path, "a memory device needs a capacity")
		}
		blockBytes = capacity
		if ds.BlockSize != "" {
			bs, err := units.ParseBytes(ds.BlockSize)
			if err != nil {
				return b.errf(ds.pos, "block_size", path, "%v", err)
			}
			if bs <= 0 || capacity%bs != 0 {
				return b.errf(ds.pos, "block_size", path, "block size %s must divide the capacity %s", ds.BlockSize, ds.Capacity)
			}
			if capacity/bs > 4096 {
				return b.errf(ds.pos, "block_size", path, "at most 4096 blocks per memory device, got %d", capacity/bs)
			}
			blockBytes = bs
		}
	} else if ds.BlockSize != "" {
		return b.errf(ds.pos, "block_size", path, "only memory devices are split into blocks")
	}
	if ds.MaxCompositions < 0 || ds.MaxCompositions > 64 {
		return b.errf(ds.pos, "max_compositions", path, "must be 0..64, got %d", ds.MaxCompositions)
	}
	if kind == inventory.Memory && ds.MaxCompositions > 1 {
		return b.errf(ds.pos, "max_compositions", path, "memory blocks are exclusive")
	}
	if ds.LinkWidth < 0 || ds.LinkWidth > 32 {
		return b.errf(ds.pos, "link_width", path, "must be 0..32 lanes, got %d", ds.LinkWidth)
	}
	if ds.Metres < 0 {
		return b.errf(ds.pos, "metres", path, "must not be negative")
	}
	if ds.OverheadNS < 0 {
		return b.errf(ds.pos, "overhead_ns", path, "must not be negative")
	}
	per := ds.Per
	if ds.First < 0 {
		return b.errf(ds.pos, "first", path, "must not be negative")
	}
	first := max(ds.First, 1)
	for n := 1; n <= count; n++ {
		id := expand(ds.ID, n+first-1, per)
		if id == "" {
			return b.errf(ds.pos, "id", path, "missing device id")
		}
		if devByID[id] != nil {
			return b.errf(ds.pos, "id", path, "duplicate device id %q", id)
		}
		dev := &inventory.Device{
			ID: id, Kind: kind, Model: ds.Model, Vendor: ds.Vendor, VendorID: ds.VendorID, DeviceID: ds.DeviceID,
			CapacityBytes: capacity, BlockBytes: blockBytes, LinkWidth: ds.LinkWidth, LinkSpeed: ds.LinkSpeed,
			Fabric: f, Metres: ds.Metres, MaxCompositions: max(ds.MaxCompositions, 1),
			OverheadNS: ds.OverheadNS, Attrs: ds.Attrs,
			LogicalDevices: cxl.lds, DCDBytes: cxl.dcd, ExtentBytes: cxl.extent,
		}
		if dev.OverheadNS == 0 && kind == inventory.Memory {
			dev.OverheadNS = 37.4 // P4 Eq. 1: remote read overhead
		}
		if ds.Drawer != "" || ds.Slot != 0 {
			if len(f.Drawers) == 0 {
				return b.errf(ds.pos, "drawer", path, "fabric %s has no chassis drawers", f.ID)
			}
			var dr *inventory.Drawer
			for _, x := range f.Drawers {
				if x.ID == ds.Drawer {
					dr = x
				}
			}
			if dr == nil {
				return b.errf(ds.pos, "drawer", path, "unknown drawer %q", ds.Drawer)
			}
			slot := ds.Slot + n - 1
			if ds.Slot < 1 || slot > dr.Slots {
				return b.errf(ds.pos, "slot", path, "slot %d is outside %s's 1..%d", slot, dr.ID, dr.Slots)
			}
			dev.Drawer, dev.Slot, dev.Switch = dr, slot, f.Switches[0]
			port := fmt.Sprintf("%s/slot%d", dr.ID, slot)
			if err := b.claimPort(dev.Switch, port, "device "+id); err != nil {
				return b.errf(ds.pos, "slot", path, "%v", err)
			}
			dev.Ports = []string{port}
		} else {
			if len(f.Drawers) > 0 {
				return b.errf(ds.pos, "drawer", path, "a device in a chassis needs a drawer and slot")
			}
			sw := b.findSwitch(f, expand(ds.Switch, n, per))
			if sw == nil {
				return b.errf(ds.pos, "switch", path, "unknown switch %q in fabric %s", expand(ds.Switch, n, per), f.ID)
			}
			dev.Switch = sw
			ports := ds.Ports
			if ds.Port != "" {
				ports = append([]string{ds.Port}, ports...)
			}
			if len(ports) == 0 {
				return b.errf(ds.pos, "port", path, "a device needs a switch port")
			}
			for _, p := range ports {
				p = expand(p, n, per)
				if count > 1 && !strings.Contains(ds.Port+strings.Join(ds.Ports, ""), "{") {
					// Numeric ports advance with each copy.
					if v, err := strconv.Atoi(p); err == nil {
						p = strconv.Itoa(v + (n-1)*len(ports))
					}
				}
				if err := b.claimPort(sw, p, "device "+id); err != nil {
					return b.errf(ds.pos, "port", path, "%v", err)
				}
				dev.Ports = append(dev.Ports, p)
			}
		}
		devByID[id] = dev
		f.Devices = append(f.Devices, dev)
		b.inv.Devices = append(b.inv.Devices, dev)
		b.addBlocks(dev)
	}
	return nil
}

// cxlSpec is a CXL memory device's split: lds logical devices sharing
// the capacity less dcd, and a dynamic-capacity region of dcd bytes in
// extents of extent bytes.
type cxlSpec struct {
	lds         int
	dcd, extent int64
}

// cxlShape validates a device's CXL fields: only memory devices of a
// cxl-memory fabric have them, and there every memory device is split by
// them (block_size does not apply).
func (b *builder) cxlShape(f *inventory.Fabric, ds *DeviceSpec, path string, capacity int64) (cxlSpec, error) {
	if f.Kind != inventory.CXLMemory {
		for _, x := range []struct {
			field string
			set   bool
		}{{"logical_devices", ds.LogicalDevices != 0}, {"dcd_capacity", ds.DCDCapacity != ""}, {"extent_size", ds.ExtentSize != ""}} {
			if x.set {
				return cxlSpec{}, b.errf(ds.pos, x.field, path, "only memory devices of a cxl-memory fabric have %s", x.field)
			}
		}
		return cxlSpec{}, nil
	}
	if capacity <= 0 {
		return cxlSpec{}, b.errf(ds.pos, "capacity", path, "a CXL memory device needs a capacity")
	}
	if ds.BlockSize != "" {
		return cxlSpec{}, b.errf(ds.pos, "block_size", path, "a CXL memory device is split by logical_devices and extent_size, not block_size")
	}
	var c cxlSpec
	if ds.ExtentSize != "" {
		e, err := units.ParseBytes(ds.ExtentSize)
		if err != nil {
			return cxlSpec{}, b.errf(ds.pos, "extent_size", path, "%v", err)
		}
		if e <= 0 {
			return cxlSpec{}, b.errf(ds.pos, "extent_size", path, "must be positive")
		}
		c.extent, c.dcd = e, capacity
	}
	if ds.DCDCapacity != "" {
		if c.extent == 0 {
			return cxlSpec{}, b.errf(ds.pos, "dcd_capacity", path, "a dynamic-capacity region needs an extent_size")
		}
		d, err := units.ParseBytes(ds.DCDCapacity)
		if err != nil {
			return cxlSpec{}, b.errf(ds.pos, "dcd_capacity", path, "%v", err)
		}
		if d <= 0 || d > capacity {
			return cxlSpec{}, b.errf(ds.pos, "dcd_capacity", path, "must be 1 byte to the capacity %s, got %s", ds.Capacity, ds.DCDCapacity)
		}
		c.dcd = d
	}
	if c.extent > 0 {
		if c.dcd%c.extent != 0 {
			return cxlSpec{}, b.errf(ds.pos, "extent_size", path, "extent size %s must divide the dynamic capacity %d bytes", ds.ExtentSize, c.dcd)
		}
		if c.dcd/c.extent > 4096 {
			return cxlSpec{}, b.errf(ds.pos, "extent_size", path, "at most 4096 extents per CXL memory device, got %d", c.dcd/c.extent)
		}
	}
	static := capacity - c.dcd
	if ds.LogicalDevices < 0 || ds.LogicalDevices > inventory.MaxLogicalDevices {
		return cxlSpec{}, b.errf(ds.pos, "logical_devices", path, "must be 1..%d, got %d", inventory.MaxLogicalDevices, ds.LogicalDevices)
	}
	switch {
	case static == 0 && ds.LogicalDevices > 0:
		return cxlSpec{}, b.errf(ds.pos, "logical_devices", path, "the dynamic-capacity region takes the whole capacity: no room for logical devices (set dcd_capacity)")
	case static > 0:
		c.lds = max(ds.LogicalDevices, 1)
		if static%int64(c.lds) != 0 {
			return cxlSpec{}, b.errf(ds.pos, "logical_devices", path, "%d logical devices do not divide the static capacity of %d bytes", c.lds, static)
		}
	}
	return c, nil
}

func (b *builder) addBlocks(dev *inventory.Device) {
	if dev.Fabric.Kind == inventory.CXLMemory {
		b.addCXLBlocks(dev)
		return
	}
	if dev.Kind != inventory.Memory {
		blk := &inventory.Block{ID: dev.ID, Kind: dev.Kind, Model: dev.Model, CapacityBytes: dev.CapacityBytes,
			MaxCompositions: dev.MaxCompositions, Device: dev, Attrs: dev.Attrs}
		dev.Blocks = []*inventory.Block{blk}
		b.inv.Blocks = append(b.inv.Blocks, blk)
		return
	}
	n := int(dev.CapacityBytes / dev.BlockBytes)
	for i := 1; i <= n; i++ {
		blk := &inventory.Block{ID: fmt.Sprintf("%s-b%02d", dev.ID, i), Kind: inventory.Memory, Model: dev.Model,
			CapacityBytes: dev.BlockBytes, MaxCompositions: 1, Device: dev, Attrs: dev.Attrs}
		dev.Blocks = append(dev.Blocks, blk)
		b.inv.Blocks = append(b.inv.Blocks, blk)
	}
}

// addCXLBlocks makes a CXL memory device's blocks: its logical devices
// ("dev-ld1".."dev-ldN", from offset 0), then the extents of its
// dynamic-capacity region ("dev-x01"..., after them).
func (b *builder) addCXLBlocks(dev *inventory.Device) {
	static := dev.CapacityBytes - dev.DCDBytes
	add := func(id string, region inventory.CXLRegion, ld int, off, size int64) {
		blk := &inventory.Block{ID: id, Kind: inventory.Memory, Model: dev.Model, CapacityBytes: size, MaxCompositions: 1,
			Device: dev, Attrs: dev.Attrs, Region: region, OffsetBytes: off, LD: ld}
		dev.Blocks = append(dev.Blocks, blk)
		b.inv.Blocks = append(b.inv.Blocks, blk)
	}
	for i := 1; i <= dev.LogicalDevices; i++ {
		size := static / int64(dev.LogicalDevices)
		add(fmt.Sprintf("%s-ld%d", dev.ID, i), inventory.LogicalDevice, i, int64(i-1)*size, size)
	}
	if dev.ExtentBytes > 0 {
		for i := int64(1); i <= dev.DCDBytes/dev.ExtentBytes; i++ {
			add(fmt.Sprintf("%s-x%02d", dev.ID, i), inventory.DynamicExtent, 0, static+(i-1)*dev.ExtentBytes, dev.ExtentBytes)
		}
	}
}

func (b *builder) buildHosts(rack string, hs *HostSpec, path string, fabByID map[string]*inventory.Fabric, hostByID map[string]*inventory.Host) error {
	count := hs.Count
	if count == 0 {
		count = 1
	}
	if count < 0 {
		return b.errf(hs.pos, "count", path, "must not be negative")
	}
	if count > 1 && !strings.Contains(hs.ID, "{") {
		return b.errf(hs.pos, "id", path, "count %d needs {n} in the id", count)
	}
	if hs.Cores < 1 {
		return b.errf(hs.pos, "cores", path, "a host needs at least 1 core, got %d", hs.Cores)
	}
	if hs.Memory == "" {
		return b.errf(hs.pos, "memory", path, "a host needs local memory (e.g. 256GiB)")
	}
	mem, err := units.ParseBytes(hs.Memory)
	if err != nil || mem < units.GiB {
		if err == nil {
			err = fmt.Errorf("at least 1GiB, got %s", hs.Memory)
		}
		return b.errf(hs.pos, "memory", path, "%v", err)
	}
	powerOn, err := parseDuration(hs.PowerOn, b.powerOn)
	if err != nil {
		return b.errf(hs.pos, "power_on", path, "%v", err)
	}
	shutdown, err := parseDuration(hs.Shutdown, b.shutdown)
	if err != nil {
		return b.errf(hs.pos, "shutdown", path, "%v", err)
	}
	if count > 1 && hs.BMC != nil && !strings.Contains(hs.BMC.URL+hs.BMC.System, "{") {
		return b.errf(hs.BMC.pos, "url", path+".bmc", "count %d needs {n} in the BMC's url or system: each host has its own", count)
	}
	for n := 1; n <= count; n++ {
		id := expand(hs.ID, n, hs.Per)
		if id == "" {
			return b.errf(hs.pos, "id", path, "missing host id")
		}
		if hostByID[id] != nil {
			return b.errf(hs.pos, "id", path, "duplicate host id %q", id)
		}
		h := &inventory.Host{ID: id, Rack: rack, Cores: hs.Cores, MemoryGiB: int(mem / units.GiB), PowerOn: powerOn, Shutdown: shutdown}
		if hs.BMC != nil {
			if h.BMC, err = b.buildBMC(hs.BMC, n, hs.Per, path+".bmc"); err != nil {
				return err
			}
		}
		for pi, ps := range hs.Ports {
			ppath := fmt.Sprintf("%s.ports[%d]", path, pi)
			if ps == nil {
				return b.emptyf(hs.pos, "ports", ppath, "empty host port")
			}
			f := fabByID[ps.Fabric]
			if f == nil {
				return b.errf(ps.pos, "fabric", ppath, "unknown fabric %q", ps.Fabric)
			}
			sw := b.findSwitch(f, expand(ps.Switch, n, hs.Per))
			if sw == nil {
				return b.errf(ps.pos, "switch", ppath, "unknown switch %q in fabric %s (name one when the fabric has several)", expand(ps.Switch, n, hs.Per), f.ID)
			}
			port := expand(ps.Port, n, hs.Per)
			if count > 1 && !strings.Contains(ps.Port, "{") {
				if v, err := strconv.Atoi(port); err == nil {
					port = strconv.Itoa(v + n - 1)
				}
			}
			if port == "" {
				return b.errf(ps.pos, "port", ppath, "a host port needs a switch port")
			}
			if err := b.claimPort(sw, port, "host "+id); err != nil {
				return b.errf(ps.pos, "port", ppath, "%v", err)
			}
			if ps.Metres < 0 {
				return b.errf(ps.pos, "metres", ppath, "must not be negative")
			}
			pid := ps.ID
			if pid == "" {
				pid = f.ID
			}
			for _, prev := range h.Ports {
				if prev.ID == pid {
					return b.errf(ps.pos, "id", ppath, "duplicate port id %q on host %s", pid, id)
				}
			}
			hp := &inventory.HostPort{ID: pid, Host: h, Fabric: f, Switch: sw, Port: port, Metres: ps.Metres}
			h.Ports = append(h.Ports, hp)
			f.Ports = append(f.Ports, hp)
		}
		blk := &inventory.Block{ID: id, Kind: inventory.Compute, MaxCompositions: 1, Host: h,
			CapacityBytes: mem, Model: fmt.Sprintf("%d cores", hs.Cores)}
		h.Block = blk
		hostByID[id] = h
		b.inv.Hosts = append(b.inv.Hosts, h)
		b.inv.Blocks = append(b.inv.Blocks, blk)
	}
	return nil
}

// Fabric drivers a topology may name (docs/southbound.md).
const (
	DriverEmulated = "emulated"
	DriverRedfish  = "redfish"
	DriverNetns    = "netns"
)

// buildBMC checks a host's BMC and expands its templates for copy n.
func (b *builder) buildBMC(m *BMCSpec, n, per int, path string) (*inventory.BMC, error) {
	raw := expand(m.URL, n, per)
	u, err := url.Parse(raw)
	switch {
	case m.URL == "":
		return nil, b.errf(m.pos, "url", path, "missing the BMC's URL")
	case err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || (u.Path != "" && u.Path != "/"):
		return nil, b.errf(m.pos, "url", path, "want https://HOST[:PORT] (the service root is URL/redfish/v1), got %q", raw)
	case u.User != nil:
		return nil, b.errf(m.pos, "url", path, "credentials do not belong in the URL: use user and password_env")
	case m.User == "" || m.PasswordEnv == "":
		return nil, b.errf(m.pos, "user", path, "a BMC needs user and password_env (the variable holding its password)")
	}
	return &inventory.BMC{URL: strings.TrimSuffix(raw, "/"), System: expand(m.System, n, per), CAFile: m.CAFile, User: m.User, PasswordEnv: m.PasswordEnv}, nil
}

// buildDriver checks and records how fabric f is driven.
func (b *builder) buildDriver(f *inventory.Fabric, fs *FabricSpec, path string) error {
	f.Driver = fs.Driver
	if f.Driver == "" {
		f.Driver = DriverEmulated
	}
	switch f.Driver {
	case DriverEmulated:
	case DriverRedfish:
		m := fs.Manager
		if m == nil {
			return b.errf(fs.pos, "manager", path, "a redfish-driven fabric needs manager: {url, user, password_env}")
		}
		mpath := path + ".manager"
		u, err := url.Parse(m.URL)
		switch {
		case m.URL == "":
			return b.errf(m.pos, "url", mpath, "missing the fabric manager's URL")
		case err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || (u.Path != "" && u.Path != "/"):
			return b.errf(m.pos, "url", mpath, "want https://HOST[:PORT] (the service root is URL/redfish/v1), got %q", m.URL)
		case u.User != nil:
			return b.errf(m.pos, "url", mpath, "credentials do not belong in the URL: use user and password_env")
		case m.User == "" || m.PasswordEnv == "":
			return b.errf(m.pos, "user", mpath, "a fabric manager needs user and password_env (the variable holding its password)")
		}
		fabricID := m.Fabric
		switch m.API {
		case "", inventory.ManagerFabricAPI:
			if fabricID == "" {
				fabricID = f.ID
			}
		case inventory.ManagerCompositionAPI:
			if m.Fabric != "" {
				return b.errf(m.pos, "fabric", mpath, "a composition manager has no Fabric to name: it composes its resource blocks (leave fabric out)")
			}
		default:
			return b.errf(m.pos, "api", mpath, "unknown api %q (valid: fabric, composition)", m.API)
		}
		f.Manager = &inventory.FabricManager{API: cmp.Or(m.API, inventory.ManagerFabricAPI), URL: strings.TrimSuffix(m.URL, "/"), Fabric: fabricID,
			CAFile: m.CAFile, User: m.User, PasswordEnv: m.PasswordEnv}
		return nil
	case DriverNetns:
		if f.Kind != inventory.EthernetVLAN {
			return b.errf(fs.pos, "driver", path, "the netns driver builds ethernet-vlan fabrics only, not %s", f.Kind)
		}
	default:
		return b.errf(fs.pos, "driver", path, "unknown driver %q (valid: emulated, redfish, netns)", fs.Driver)
	}
	if fs.Manager != nil {
		return b.errf(fs.pos, "manager", path, "only redfish-driven fabrics have a manager")
	}
	return nil
}
