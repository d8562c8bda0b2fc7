package discover

import (
	"bytes"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"rackpool/internal/inventory"
	"rackpool/internal/topology"
	"rackpool/internal/units"
)

// Defaults for what a topology needs and a service may not say.
const (
	// DefaultName is the topology's name.
	DefaultName = "discovered"
	// DefaultRack is the rack every host is put in: Redfish does not say
	// which rack a ComputerSystem is in the way a topology needs.
	DefaultRack = "rack1"
	// DefaultHostCores and DefaultHostMemory are a host's when its
	// initiator links to no ComputerSystem, or the system does not report
	// them: the least a topology accepts, so that nothing is promised that
	// the hardware may not have.
	DefaultHostCores  = 1
	DefaultHostMemory = "1GiB"
	// DefaultMemoryCapacity is a memory device's when nothing linked to its
	// endpoint reports a size (a topology needs one).
	DefaultMemoryCapacity = "1GiB"
	// DefaultDriveKind is a drive's kind when neither its Drive resource
	// nor the endpoint's protocol says whether it is an HDD, an SSD or
	// NVMe.
	DefaultDriveKind = inventory.SSD
)

// fabricKinds maps a FabricType to rackpool's fabric kind.
var fabricKinds = map[string]inventory.FabricKind{
	"PCIe":            inventory.PCIeSwitch,
	"SAS":             inventory.SASCircuit,
	"Ethernet":        inventory.EthernetVLAN,
	"NVMeOverFabrics": inventory.EthernetVLAN,
	"CXL":             inventory.CXLMemory,
}

// TopologyOptions name what the service cannot: the topology's name and
// rack, and the defaults for what it does not report. The zero value uses
// the Default constants.
type TopologyOptions struct {
	Name           string // DefaultName
	Rack           string // DefaultRack
	HostCores      int    // DefaultHostCores
	HostMemory     string // DefaultHostMemory
	MemoryCapacity string // DefaultMemoryCapacity
	// Source names the service in the file's header (a URL without
	// credentials); empty leaves it out. A composer's fabric is driven
	// through it (manager url) when it is an http(s) URL.
	Source string
	// User is the account a composer's fabric logs in as (manager user;
	// DefaultComposerUser when empty); its password comes from
	// DefaultComposerPasswordEnv.
	User string
	// CAFile is the PEM file the composer's certificate is checked
	// against (manager ca_file; "" for the system's roots).
	CAFile string
}

// The manager settings of a composer's fabric that the service does not
// say.
const (
	DefaultComposerUser        = "rackpool"
	DefaultComposerPasswordEnv = "RACKPOOL_COMPOSER_PASSWORD"
)

// Validate reports options that cannot be used.
func (o TopologyOptions) Validate() error {
	if o.HostCores < 0 {
		return fmt.Errorf("discover: HostCores must not be negative, got %d", o.HostCores)
	}
	for _, s := range []struct{ name, v string }{{"HostMemory", o.HostMemory}, {"MemoryCapacity", o.MemoryCapacity}} {
		if s.v == "" {
			continue
		}
		if n, err := units.ParseBytes(s.v); err != nil || n <= 0 {
			return fmt.Errorf("discover: %s %q is not a positive size", s.name, s.v)
		}
	}
	return nil
}

// Attachment is one existing attachment on the service: a device (or one
// of its memory chunks or volumes) given to a host port, by a zone that
// holds both endpoints or by a connection. A topology describes hardware,
// so attachments are reported beside it, not in it.
type Attachment struct {
	Fabric string
	// Via is "zone ID" or "connection ID".
	Via string
	// Host and Port are the topology host and host port of the initiator
	// endpoint (its endpoint Id when it is not in the topology).
	Host, Port string
	// Device is the topology device of the target endpoint (its endpoint
	// Id when it is not in the topology; empty when the connection names
	// no target).
	Device string
	// Block is the topology block of the memory chunk the connection
	// names, or the chunk's or volume's path when it is no topology block;
	// empty for a whole device.
	Block string
	// InTopology is false when the host port or the device is not in the
	// topology (left out; see Draft.Notes).
	InTopology bool
}

// Draft is a topology made from a Result, with what a reader must know
// about it: the defaults chosen and what was left out (Notes), how Redfish
// switch ports were numbered (PortMap), and the attachments found.
type Draft struct {
	Spec        *topology.Spec
	Notes       []string
	PortMap     []string
	Attachments []Attachment

	service string
	source  string
	// defaults marks the spec values that are defaults, for comments:
	// "host/ID" and "device/ID" to the comment.
	defaults map[string]string
}

// portRef is a switch port in the plan: its topology switch and port.
type portRef struct{ sw, port string }

// switchPlan numbers one switch's ports for the topology.
type switchPlan struct {
	id       string
	byPath   map[string]string // Redfish port path -> topology port
	names    []string          // "1=D1" for the port map, when renumbered
	ports    int               // physical ports as numbered
	extras   []string          // notes on ports added past the physical ones
	numbered bool              // Redfish Ids used as they are
}

func (p *switchPlan) extra(why string) string {
	n := p.ports + len(p.extras) + 1
	p.extras = append(p.extras, fmt.Sprintf("%d: %s", n, why))
	return strconv.Itoa(n)
}

// Topology makes a topology from what Walk found. Hosts come from
// initiator endpoints, devices from target endpoints, switches and their
// links from Switches, Ports and the ports' ConnectedPorts. See the
// package documentation for the rules, and Draft.Notes for what was
// defaulted or left out. The spec compiles (topology.Compile) when the
// result has at least one host; otherwise Topology returns the Draft and
// an error saying why there is no topology.
func (r *Result) Topology(o TopologyOptions) (*Draft, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	b := &builder{r: r, o: o, d: &Draft{Spec: &topology.Spec{Name: or(o.Name, DefaultName)}, service: r.Service, source: o.Source,
		defaults: map[string]string{}},
		hosts: map[string]*topology.HostSpec{}, devices: map[string]bool{}, hostOf: map[string][2]string{}, devOf: map[string]string{}, blockOf: map[string]string{}}
	for _, n := range r.Notes {
		b.d.Notes = append(b.d.Notes, "walk: "+n)
	}
	for _, f := range r.Fabrics {
		b.fabric(f)
	}
	if len(b.hostOrder) > 0 {
		rack := &topology.RackSpec{ID: or(o.Rack, DefaultRack)}
		for _, id := range b.hostOrder {
			rack.Hosts = append(rack.Hosts, b.hosts[id])
		}
		b.d.Spec.Racks = []*topology.RackSpec{rack}
		if o.Rack == "" {
			b.notef("rack %s: default (Redfish does not say which rack a system is in)", DefaultRack)
		}
	}
	for _, f := range r.Fabrics {
		b.attachments(f)
	}
	if len(b.hostOrder) == 0 {
		why := "the service has no fabrics"
		switch {
		case r.Composer != nil:
			why = fmt.Sprintf("the service composes %d resource blocks and has no Compute block among them: name the hosts cabled to it (discover --host)", r.ResourceBlocks)
		case len(r.Fabrics) > 0:
			why = "no fabric rackpool drives has an initiator endpoint"
		}
		return b.d, fmt.Errorf("discover: no topology: %s, and a topology needs at least one host", why)
	}
	return b.d, nil
}

func or(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

type builder struct {
	r         *Result
	o         TopologyOptions
	d         *Draft
	hosts     map[string]*topology.HostSpec
	hostOrder []string
	devices   map[string]bool
	hostOf    map[string][2]string // endpoint path -> host, port
	devOf     map[string]string    // endpoint path -> device
	blockOf   map[string]string    // chunk path -> block
}

func (b *builder) notef(format string, args ...any) {
	n := fmt.Sprintf(format, args...)
	if !slices.Contains(b.d.Notes, n) {
		b.d.Notes = append(b.d.Notes, n)
	}
}

// fabricKind is the fabric's kind, from FabricType or, without one, its
// endpoints' protocol.
func fabricKind(f *Fabric) (inventory.FabricKind, string) {
	t := f.Type
	if t == "" {
		for _, e := range f.Endpoints {
			if e.Protocol != "" {
				t = e.Protocol
				break
			}
		}
	}
	return fabricKinds[t], t
}

func (b *builder) fabric(f *Fabric) {
	kind, typ := fabricKind(f)
	if kind == "" {
		b.notef("fabric %s left out: FabricType %q is none rackpool drives (PCIe, SAS, Ethernet, NVMeOverFabrics, CXL)", f.ID, typ)
		return
	}
	if f.Type == "" {
		b.notef("fabric %s: no FabricType; kind %s from its endpoints' protocol %s", f.ID, kind, typ)
	}
	fs := &topology.FabricSpec{ID: f.ID, Kind: string(kind)}

	// Number every switch's ports.
	plans := map[string]*switchPlan{}
	var order []*switchPlan
	owner := map[string]portRef{} // Redfish port path -> topology port
	swIDs := map[string]bool{}
	for _, s := range f.Switches {
		id := s.ID
		for n := 2; swIDs[id]; n++ {
			id = fmt.Sprintf("%s-%d", s.ID, n)
		}
		if id != s.ID {
			b.notef("fabric %s: a second switch with Id %s is switch %s", f.ID, s.ID, id)
		}
		swIDs[id] = true
		p := &switchPlan{id: id, byPath: map[string]string{}, numbered: true}
		seen := map[int]bool{}
		for _, port := range s.Ports {
			n, err := strconv.Atoi(port.ID)
			if err != nil || n < 1 || n > topology.MaxSwitchPorts || seen[n] || strconv.Itoa(n) != port.ID {
				p.numbered = false
				break
			}
			seen[n] = true
		}
		for i, port := range s.Ports {
			num := strconv.Itoa(i + 1)
			if p.numbered {
				num = port.ID
				p.ports = max(p.ports, mustAtoi(port.ID))
			} else {
				p.ports = i + 1
				p.names = append(p.names, num+"="+port.ID)
			}
			p.byPath[port.Path] = num
			owner[port.Path] = portRef{id, num}
		}
		plans[s.Path] = p
		order = append(order, p)
	}
	var dflt *switchPlan
	if len(order) == 0 {
		dflt = &switchPlan{id: f.ID + "-switch", byPath: map[string]string{}, numbered: true}
		order = append(order, dflt)
		b.notef("fabric %s has no switches: switch %s is a default joining all its endpoints, one port each", f.ID, dflt.id)
	}
	planOf := map[string]*switchPlan{}
	for _, p := range order {
		planOf[p.id] = p
	}
	claimed := map[portRef]string{}

	// candidates are the switch ports an endpoint is cabled to: the ones
	// it names, else those whose ConnectedPorts name its own port, else
	// those that list it as associated.
	candidates := func(e *Endpoint) []portRef {
		var out []portRef
		for _, p := range e.Ports {
			if ref, ok := owner[p]; ok && !slices.Contains(out, ref) {
				out = append(out, ref)
			}
		}
		if len(out) > 0 {
			return out
		}
		for _, s := range f.Switches {
			for _, sp := range s.Ports {
				for _, c := range sp.ConnectedPorts {
					if slices.Contains(e.Ports, c) && !slices.Contains(out, owner[sp.Path]) {
						out = append(out, owner[sp.Path])
					}
				}
			}
		}
		if len(out) > 0 {
			return out
		}
		for _, s := range f.Switches {
			for _, sp := range s.Ports {
				if slices.Contains(sp.AssociatedEndpoints, e.Path) && !slices.Contains(out, owner[sp.Path]) {
					out = append(out, owner[sp.Path])
				}
			}
		}
		return out
	}
	redfishName := func(ref portRef) string {
		for _, s := range f.Switches {
			for _, sp := range s.Ports {
				if owner[sp.Path] == ref {
					return s.ID + "/" + sp.ID
				}
			}
		}
		return ref.sw + "/" + ref.port
	}
	// place gives an endpoint its switch and ports (one for a host port,
	// all free ones on the first switch for a device).
	place := func(e *Endpoint, who string, many bool) (string, []string) {
		cands := candidates(e)
		if len(cands) == 0 {
			if dflt != nil {
				return dflt.id, []string{dflt.extra(who)}
			}
			p := order[0]
			b.notef("fabric %s: endpoint %s names no switch port; it is put on extra port %d of switch %s", f.ID, e.ID, p.ports+len(p.extras)+1, p.id)
			return p.id, []string{p.extra(fmt.Sprintf("%s (names no switch port)", who))}
		}
		sw := cands[0].sw
		var ports, others []string
		for _, c := range cands {
			if c.sw != sw {
				others = append(others, redfishName(c))
				continue
			}
			if prev, taken := claimed[c]; taken {
				if !many || len(ports) == 0 {
					others = append(others, redfishName(c)+" (used by "+prev+")")
				}
				continue
			}
			if len(ports) > 0 && !many {
				others = append(others, redfishName(c))
				continue
			}
			claimed[c] = who
			ports = append(ports, c.port)
		}
		if len(ports) == 0 {
			p := planOf[sw]
			first := redfishName(cands[0])
			ports = []string{p.extra(fmt.Sprintf("%s, which shares Redfish port %s with %s", who, first, claimed[cands[0]]))}
			b.notef("fabric %s: %s shares Redfish port %s with %s; a topology port holds one cable, so it gets extra port %s of switch %s",
				f.ID, who, first, claimed[cands[0]], ports[0], sw)
		} else if len(others) > 0 {
			b.notef("fabric %s: %s also reaches %s; only switch %s is used", f.ID, who, strings.Join(others, ", "), sw)
		}
		return sw, ports
	}

	// Endpoints, in the order the service lists them.
	for _, e := range f.Endpoints {
		switch e.Role {
		case RoleInitiator:
			host, port, ok := b.hostPort(f, e)
			if !ok {
				continue
			}
			sw, ports := place(e, "host "+host+" port "+port, false)
			hp := &topology.HostPortSpec{ID: port, Fabric: f.ID, Port: ports[0]}
			if len(order) > 1 || dflt == nil {
				hp.Switch = sw
			}
			b.hosts[host].Ports = append(b.hosts[host].Ports, hp)
			b.hostOf[e.Path] = [2]string{host, port}
		case RoleTarget:
			ds := b.device(f, kind, e)
			if ds == nil {
				continue
			}
			sw, ports := place(e, "device "+ds.ID, true)
			if len(order) > 1 || dflt == nil {
				ds.Switch = sw
			}
			ds.Port, ds.Ports = ports[0], ports[1:]
			fs.Devices = append(fs.Devices, ds)
		default:
			b.notef("fabric %s: endpoint %s left out: its entities name no single role (Initiator or Target)", f.ID, epName(e))
		}
	}

	for _, p := range order {
		n := max(p.ports+len(p.extras), 1)
		fs.Switches = append(fs.Switches, &topology.SwitchSpec{ID: p.id, Ports: n})
		var parts []string
		if len(p.names) > 0 {
			parts = append(parts, strings.Join(p.names, " "))
		} else if p != dflt && p.ports > 0 {
			parts = append(parts, fmt.Sprintf("1..%d as the Redfish port Ids", p.ports))
		}
		if len(p.extras) > 0 {
			what := "extra ports (not physical): "
			if p == dflt {
				what = "default switch: "
			}
			parts = append(parts, what+strings.Join(p.extras, "; "))
		}
		if len(p.names) > 0 || len(p.extras) > 0 {
			b.d.PortMap = append(b.d.PortMap, fmt.Sprintf("fabric %s switch %s: %s", f.ID, p.id, strings.Join(parts, "; ")))
		}
	}
	for _, l := range f.Links() {
		a, bb, _ := strings.Cut(l, "-")
		// "sw/port-sw/port" or "sw-sw": switch Ids may hold '-', so cut on the
		// port paths when there are any.
		if strings.Contains(l, "/") {
			a, bb = linkEnds(l)
		}
		sa, sb := switchIDOf(a, f, plans), switchIDOf(bb, f, plans)
		if sa == "" || sb == "" {
			continue
		}
		fs.Links = append(fs.Links, &topology.LinkSpec{A: sa, B: sb})
	}
	if f.Composer != nil {
		b.composerManager(f, fs)
	}
	b.d.Spec.Fabrics = append(b.d.Spec.Fabrics, fs)
}

// composerManager makes a composer's fabric driven through the composer
// (driver redfish, manager api composition) when rackpool can compose
// through it and Source says where it is; otherwise the fabric stays
// emulated, and a note says why.
func (b *builder) composerManager(f *Fabric, fs *topology.FabricSpec) {
	c := f.Composer
	if !c.CanCompose() {
		b.notef("fabric %s: emulated: the service composes nothing (it has no CompositionService or no Systems), so rackpool reads its resource blocks but cannot compose through it", f.ID)
		return
	}
	u, err := url.Parse(b.o.Source)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		b.notef("fabric %s: emulated: no service URL to compose through (set driver: redfish and manager: {api: composition, url, user, password_env})", f.ID)
		return
	}
	user := b.o.User
	if user == "" {
		user = DefaultComposerUser
		b.notef("fabric %s: manager user %s is a default", f.ID, user)
	}
	fs.Driver = topology.DriverRedfish
	fs.Manager = &topology.ManagerSpec{API: inventory.ManagerCompositionAPI, URL: u.Scheme + "://" + u.Host, User: user,
		PasswordEnv: DefaultComposerPasswordEnv, CAFile: b.o.CAFile}
	b.notef("fabric %s: composed through the service (manager api composition); the password is read from $%s", f.ID, DefaultComposerPasswordEnv)
}

// epName names an endpoint in notes: its Id, and its path when the Id is
// not the path's last segment.
func epName(e *Endpoint) string {
	if strings.HasSuffix(e.Path, "/"+e.ID) {
		return e.ID
	}
	return e.ID + " (" + e.Path + ")"
}

func mustAtoi(s string) int {
	n, _ := strconv.Atoi(s)
	return n
}

// linkEnds splits "swA/portA-swB/portB".
func linkEnds(l string) (string, string) {
	i := strings.IndexByte(l, '/')
	rest := l[i+1:]
	j := strings.IndexByte(rest, '/')
	// The '-' that separates the ends is the last one before the second '/'.
	k := strings.LastIndexByte(rest[:j], '-')
	return l[:i+1+k], rest[k+1:]
}

// switchIDOf returns the topology switch of "sw/port" or "sw".
func switchIDOf(end string, f *Fabric, plans map[string]*switchPlan) string {
	sw, _, _ := strings.Cut(end, "/")
	for _, s := range f.Switches {
		if s.ID == sw {
			return plans[s.Path].id
		}
	}
	return ""
}

// hostPort makes (or finds) the host of an initiator endpoint and names its
// port so that the southbound convention holds: the endpoint Id is
// "{host}-{port}", or it is the port Id when EntityLink names the host's
// ComputerSystem.
func (b *builder) hostPort(f *Fabric, e *Endpoint) (host, port string, ok bool) {
	var sys *System
	for _, en := range e.Entities {
		if sp := systemPath(en.Link); sp != "" {
			sys = b.r.Systems[sp]
			if sys == nil {
				sys = &System{ID: sp[strings.LastIndexByte(sp, '/')+1:], Path: sp, Missing: true}
			}
			break
		}
	}
	switch {
	case f.Composer != nil:
		// A composer's host is its Compute block (or a host named to
		// Walk); its port is the composer's fabric.
		host, port = strings.TrimSuffix(e.ID, "-"+f.ID), f.ID
		sys = b.r.Systems[e.Path]
	case sys != nil:
		host, port = sys.ID, e.ID
		if rest, ok := strings.CutPrefix(e.ID, sys.ID+"-"); ok && rest != "" {
			port = rest
		}
	case strings.LastIndexByte(e.ID, '-') > 0 && strings.LastIndexByte(e.ID, '-') < len(e.ID)-1:
		i := strings.LastIndexByte(e.ID, '-')
		host, port = e.ID[:i], e.ID[i+1:]
		b.notef("fabric %s: initiator %s links to no ComputerSystem: host %s, port %s from its Id ({host}-{port})", f.ID, e.ID, host, port)
	default:
		host, port = e.ID, f.ID
		b.notef("fabric %s: initiator %s links to no ComputerSystem and its Id is not {host}-{port}: host %s, port %s; the redfish driver will not find this host port by name (rename the endpoint {host}-{port} or link it to its system)",
			f.ID, e.ID, host, port)
	}
	h := b.hosts[host]
	if h == nil {
		h = &topology.HostSpec{ID: host}
		b.hosts[host] = h
		b.hostOrder = append(b.hostOrder, host)
		var defs []string
		h.Cores, h.Memory = b.o.HostCores, b.o.HostMemory
		if sys != nil && sys.Cores > 0 {
			h.Cores = sys.Cores
		}
		if h.Cores == 0 {
			h.Cores = DefaultHostCores
			defs = append(defs, "cores")
		} else if sys == nil || sys.Cores == 0 {
			defs = append(defs, "cores")
		}
		if sys != nil && sys.MemoryGiB > 0 {
			h.Memory = fmt.Sprintf("%dGiB", sys.MemoryGiB)
		} else {
			if h.Memory == "" {
				h.Memory = DefaultHostMemory
			}
			defs = append(defs, "memory")
		}
		if len(defs) > 0 {
			why := "no ComputerSystem is linked"
			switch {
			case f.Composer != nil && sys != nil:
				why = "its Compute block " + sys.Path + " does not report them"
			case f.Composer != nil:
				why = "the composer has no Compute block for it"
			case sys != nil && sys.Missing:
				why = "its ComputerSystem " + sys.Path + " does not exist"
			case sys != nil:
				why = "its ComputerSystem " + sys.Path + " does not report them"
			}
			what := strings.Join(defs, " and ")
			b.notef("host %s: %s: default (%s)", host, what, why)
			b.d.defaults["host/"+host] = what
		}
	}
	for _, p := range h.Ports {
		if p.ID == port {
			np := f.ID + "-" + port
			b.notef("fabric %s: host %s already has a port %s; initiator %s is port %s", f.ID, host, port, e.ID, np)
			port = np
		}
	}
	return host, port, true
}

// deviceKind decides a target endpoint's kind from its entities, most
// specific first: a processor (gpu, or fpga), an acceleration function
// (fpga), storage (nvme, ssd, hdd), a network controller (nic), memory.
func deviceKind(e *Endpoint) (inventory.Kind, *Entity, string) {
	best, rank := inventory.Kind(""), 99
	var chosen *Entity
	var why string
	nvme := strings.HasPrefix(e.Protocol, "NVMe")
	for _, en := range e.Entities {
		var k inventory.Kind
		var r int
		var w string
		switch en.Type {
		case "Processor":
			k, r = inventory.GPU, 1
			hint := strings.ToLower(en.ProcessorType + " " + en.Link + " " + en.Model)
			if strings.Contains(hint, "fpga") {
				k = inventory.FPGA
			}
		case "AccelerationFunction":
			k, r = inventory.FPGA, 1
		case "Drive", "StorageSubsystem", "Volume":
			r = 2
			switch {
			case en.Protocol == "NVMe" || nvme:
				k = inventory.NVMe
			case en.MediaType == "SSD":
				k = inventory.SSD
			case en.MediaType == "HDD":
				k = inventory.HDD
			default:
				k, w = DefaultDriveKind, "kind"
			}
		case "NetworkController":
			k, r = inventory.NIC, 3
		case "MemoryChunk", "Memory", "CXLDevice":
			k, r = inventory.Memory, 4
		default:
			continue
		}
		if r < rank {
			best, rank, chosen, why = k, r, en, w
		}
	}
	return best, chosen, why
}

// device makes the device of a target endpoint, or says why there is none.
func (b *builder) device(f *Fabric, fk inventory.FabricKind, e *Endpoint) *topology.DeviceSpec {
	kind, en, def := deviceKind(e)
	if kind == "" {
		var types []string
		for _, x := range e.Entities {
			types = append(types, or(x.Type, "(none)"))
		}
		b.notef("fabric %s: endpoint %s left out: no entity is a device rackpool pools (EntityType %s)", f.ID, epName(e), strings.Join(types, ", "))
		return nil
	}
	switch {
	case fk == inventory.SASCircuit && kind != inventory.HDD && kind != inventory.SSD,
		fk == inventory.CXLMemory && kind != inventory.Memory:
		b.notef("fabric %s: endpoint %s (%s) left out: a %s fabric does not carry %s devices", f.ID, epName(e), kind, fk, kind)
		return nil
	}
	id := e.ID
	if b.devices[id] {
		id = f.ID + "-" + e.ID
		for n := 2; b.devices[id]; n++ {
			id = fmt.Sprintf("%s-%s-%d", f.ID, e.ID, n)
		}
		b.notef("fabric %s: endpoint %s (%s) is device %s: another device already has Id %s", f.ID, e.ID, e.Path, id, e.ID)
	}
	b.devices[id] = true
	b.devOf[e.Path] = id
	ds := &topology.DeviceSpec{ID: id, Kind: string(kind)}
	var defs []string
	if def != "" {
		defs = append(defs, "kind")
		b.notef("device %s: kind %s is a default (neither its Drive nor its protocol says HDD, SSD or NVMe)", id, kind)
	}
	for _, x := range append([]*Entity{en}, e.Entities...) {
		if ds.Vendor == "" {
			ds.Vendor = x.Manufacturer
		}
		if ds.Model == "" {
			ds.Model = x.Model
		}
		if ds.LinkWidth == 0 {
			ds.LinkWidth = x.LinkWidth
		}
		if ds.LinkSpeed == "" {
			ds.LinkSpeed = x.LinkSpeed
		}
	}
	var capacity int64
	if kind == inventory.Memory {
		// The memory chunks its entities name, else the size a memory or
		// logical device reports.
		var chunks []*MemoryChunk
		for _, x := range e.Entities {
			for _, cp := range x.MemoryChunks {
				if ch := f.MemoryChunks[cp]; ch != nil && !ch.Missing && ch.SizeBytes > 0 && !slices.Contains(chunks, ch) {
					chunks = append(chunks, ch)
				}
			}
		}
		equal := len(chunks) > 0
		for _, ch := range chunks {
			capacity += ch.SizeBytes
			equal = equal && ch.SizeBytes == chunks[0].SizeBytes
		}
		if capacity == 0 {
			for _, x := range e.Entities {
				if capacity == 0 && x.CapacityBytes > 0 {
					capacity = x.CapacityBytes
				}
			}
		}
		if capacity == 0 {
			ds.Capacity = or(b.o.MemoryCapacity, DefaultMemoryCapacity)
			defs = append(defs, "capacity")
			b.notef("device %s: capacity %s is a default (nothing linked to endpoint %s reports a size)", id, ds.Capacity, e.ID)
		}
		if fk == inventory.CXLMemory && len(chunks) > 1 && len(chunks) <= inventory.MaxLogicalDevices && equal {
			ds.LogicalDevices = len(chunks)
		}
		if fk == inventory.CXLMemory && (ds.LogicalDevices > 1 || len(chunks) == 1) {
			// Each chunk is one logical device, in the order found.
			for i, ch := range chunks {
				b.blockOf[ch.Path] = fmt.Sprintf("%s-ld%d", id, i+1)
			}
		}
	} else if en != nil {
		capacity = en.CapacityBytes
		for _, x := range e.Entities {
			if capacity == 0 && x.Type == en.Type {
				capacity = x.CapacityBytes
			}
		}
	}
	if capacity > 0 {
		ds.Capacity = units.FormatBytes(capacity)
	}
	if len(defs) > 0 {
		b.d.defaults["device/"+id] = strings.Join(defs, " and ")
	}
	return ds
}

func (b *builder) attachments(f *Fabric) {
	hostOf := func(p string) (string, string, bool) {
		if hp, ok := b.hostOf[p]; ok {
			return hp[0], hp[1], true
		}
		if e := f.Endpoint(p); e != nil {
			return e.ID, "", false
		}
		return p, "", false
	}
	devOf := func(p string) (string, bool) {
		if d, ok := b.devOf[p]; ok {
			return d, true
		}
		if e := f.Endpoint(p); e != nil {
			return e.ID, false
		}
		return p, false
	}
	role := func(p string) Role {
		if e := f.Endpoint(p); e != nil {
			return e.Role
		}
		return RoleUnknown
	}
	add := func(via, ini, tgt, block string) {
		h, p, okH := hostOf(ini)
		a := Attachment{Fabric: f.ID, Via: via, Host: h, Port: p, Block: block, InTopology: okH}
		if tgt != "" {
			d, okD := devOf(tgt)
			a.Device, a.InTopology = d, okH && okD
		}
		b.d.Attachments = append(b.d.Attachments, a)
	}
	for _, z := range f.Zones {
		for _, i := range z.Endpoints {
			if role(i) != RoleInitiator {
				continue
			}
			for _, t := range z.Endpoints {
				if e := f.Endpoint(t); e != nil && e.Role == RoleTarget {
					if k, _, _ := deviceKind(e); k == "" {
						continue // the switch's own endpoint, an expander
					}
					add("zone "+z.ID, i, t, "")
				}
			}
		}
	}
	for _, c := range f.Connections {
		for _, i := range c.Initiators {
			for _, cp := range c.MemoryChunks {
				tgt := ""
				if ch := f.MemoryChunks[cp]; ch != nil {
					for _, t := range c.Targets {
						if slices.Contains(ch.Endpoints, t) {
							tgt = t
						}
					}
				}
				if tgt == "" && len(c.Targets) == 1 {
					tgt = c.Targets[0]
				}
				add("connection "+c.ID, i, tgt, or(b.blockOf[cp], cp))
			}
			for _, vp := range c.Volumes {
				tgt := ""
				if len(c.Targets) == 1 {
					tgt = c.Targets[0]
				}
				add("connection "+c.ID, i, tgt, vp)
			}
			if len(c.MemoryChunks) == 0 && len(c.Volumes) == 0 {
				for _, t := range c.Targets {
					add("connection "+c.ID, i, t, "")
				}
			}
		}
	}
}

// YAML writes the draft as a topology file: a header with the notes and
// the port map, the topology (topology.Marshal) with a comment on every
// host and device that holds a default, and the attachments as comments
// at the end. topology.Parse accepts it and compiles it to the same model
// as topology.Compile(d.Spec).
func (d *Draft) YAML() ([]byte, error) {
	body, err := topology.Marshal(d.Spec)
	if err != nil {
		return nil, err
	}
	if len(d.defaults) > 0 {
		if body, err = d.markDefaults(body); err != nil {
			return nil, err
		}
	}
	var out bytes.Buffer
	src := "a Redfish service"
	if d.source != "" {
		src = d.source
	}
	fmt.Fprintf(&out, "# Discovered by `rackpool discover` from %s", oneLine(src))
	if d.service != "" {
		fmt.Fprintf(&out, ",\n# %s", oneLine(d.service))
	}
	out.WriteString(".\n")
	out.WriteString("# It describes the hardware only: the attachments the service holds (zones and\n")
	out.WriteString("# connections) are listed as comments at the end and are not imported. What the\n")
	out.WriteString("# service does not report is a default, marked \"default\" below: check it.\n")
	out.WriteString("# Cable metres and switch latency_ns are not in Redfish and are left 0.\n")
	if len(d.Notes) > 0 {
		out.WriteString("#\n# Defaults and what was left out:\n")
		for _, n := range d.Notes {
			fmt.Fprintf(&out, "#   - %s\n", oneLine(n))
		}
	}
	if len(d.PortMap) > 0 {
		out.WriteString("#\n# Switch ports (topology port=Redfish port Id):\n")
		for _, n := range d.PortMap {
			fmt.Fprintf(&out, "#   - %s\n", oneLine(n))
		}
	}
	out.WriteString("#\n")
	out.Write(body)
	out.WriteString("\n# Attachments on the service when discovered (allocations, not imported):\n")
	if len(d.Attachments) == 0 {
		out.WriteString("#   none\n")
	}
	for _, a := range d.Attachments {
		fmt.Fprintf(&out, "#   - %s\n", oneLine(a.String()))
	}
	return out.Bytes(), nil
}

// String is the attachment as a YAML flow mapping.
func (a Attachment) String() string {
	s := fmt.Sprintf("{fabric: %s, via: %s, host: %s", q(a.Fabric), q(a.Via), q(a.Host))
	if a.Port != "" {
		s += ", port: " + q(a.Port)
	}
	if a.Device != "" {
		s += ", device: " + q(a.Device)
	}
	if a.Block != "" {
		s += ", block: " + q(a.Block)
	}
	if !a.InTopology {
		s += ", in_topology: false"
	}
	return s + "}"
}

// q quotes a YAML scalar when it needs it.
func q(s string) string {
	n := yaml.Node{Kind: yaml.ScalarNode, Value: s}
	b, err := yaml.Marshal(&n)
	if err != nil {
		return strconv.Quote(s)
	}
	return strings.TrimSpace(string(b))
}

func oneLine(s string) string {
	return strings.NewReplacer("\n", " ", "\r", " ").Replace(s)
}

// markDefaults re-reads the marshalled file and puts a line comment on
// every host and device that holds a default.
func (d *Draft) markDefaults(body []byte) ([]byte, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(body, &doc); err != nil {
		return nil, fmt.Errorf("discover: re-read topology: %w", err)
	}
	mark := func(n *yaml.Node, kind string) {
		id := ""
		for i := 0; i+1 < len(n.Content); i += 2 {
			if n.Content[i].Value == "id" {
				id = n.Content[i+1].Value
			}
		}
		what, ok := d.defaults[kind+"/"+id]
		if !ok {
			return
		}
		c := "default " + what + ": the service does not report it"
		if n.Style == yaml.FlowStyle {
			n.LineComment = c
			return
		}
		for i := 0; i+1 < len(n.Content); i += 2 {
			if k := n.Content[i].Value; strings.Contains(what, k) && (k == "cores" || k == "memory" || k == "capacity" || k == "kind") {
				n.Content[i+1].LineComment = "default: the service does not report it"
			}
		}
	}
	var walk func(n *yaml.Node, key string)
	walk = func(n *yaml.Node, key string) {
		switch n.Kind {
		case yaml.DocumentNode:
			for _, c := range n.Content {
				walk(c, "")
			}
		case yaml.MappingNode:
			switch key {
			case "hosts":
				mark(n, "host")
			case "devices":
				mark(n, "device")
			}
			for i := 0; i+1 < len(n.Content); i += 2 {
				walk(n.Content[i+1], n.Content[i].Value)
			}
		case yaml.SequenceNode:
			for _, c := range n.Content {
				walk(c, key)
			}
		}
	}
	walk(&doc, "")
	var out bytes.Buffer
	enc := yaml.NewEncoder(&out)
	enc.SetIndent(2)
	if err := enc.Encode(&doc); err != nil {
		return nil, fmt.Errorf("discover: write topology: %w", err)
	}
	if err := enc.Close(); err != nil {
		return nil, fmt.Errorf("discover: write topology: %w", err)
	}
	return out.Bytes(), nil
}
