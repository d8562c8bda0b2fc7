package discover

import (
	"fmt"
	"sort"
	"strings"
)

// Result is what Walk found: the service, its fabrics with everything in
// them, and the notes Walk made about what it tolerated. Paths are
// service paths ("/redfish/v1/Fabrics/CXL/Endpoints/T1"), trailing
// slashes removed.
type Result struct {
	// Service names the service: Vendor and Product of the service root,
	// and its Redfish version.
	Service string
	// Fabrics, in the order the service lists them.
	Fabrics []*Fabric
	// Systems are the ComputerSystems initiators link to, by path.
	Systems map[string]*System
	// ResourceBlocks counts the resource blocks of a composer (composer.go),
	// read when the service has no Fabrics or Options.Composition asks.
	ResourceBlocks int
	// Composer is the service as a vendor composer, when it was read so;
	// its blocks are then the endpoints of one fabric in Fabrics.
	Composer *Composer
	// Resources is how many resources Walk read.
	Resources int
	// Notes are what Walk tolerated: links to resources that do not
	// exist, endpoints linked but not listed, Ids that disagree with
	// their URL.
	Notes []string
}

// Fabric is one Redfish Fabric.
type Fabric struct {
	ID, Path, Name string
	// Composer is set on the fabric Walk makes of a vendor composer's
	// resource blocks (composer.go); nil for a Redfish Fabric.
	Composer *Composer
	// Type is the FabricType (PCIe, CXL, SAS, NVMeOverFabrics, Ethernet,
	// ...).
	Type           string
	Health         string
	Switches       []*Switch
	Endpoints      []*Endpoint
	Zones          []*Zone
	Connections    []*Connection
	EndpointGroups []*EndpointGroup
	// MemoryChunks are the chunks the fabric's endpoints and connections
	// link to, by path.
	MemoryChunks map[string]*MemoryChunk
	// Volumes are the volumes connections link to, by path.
	Volumes map[string]*Volume
}

// Switch is a fabric switch and its ports.
type Switch struct {
	ID, Path, Type string
	Ports          []*Port
}

// Port is a switch port.
type Port struct {
	ID, Path            string
	Type, Protocol      string
	Width               int
	SpeedGbps           float64
	AssociatedEndpoints []string
	// ConnectedPorts are the ports at the other end of its cable: a host
	// or device port, or another switch's port (a link between switches).
	ConnectedPorts []string
	// ConnectedSwitches are switches named without a port.
	ConnectedSwitches []string
}

// Role is an endpoint's role, from its ConnectedEntities' EntityRole.
type Role string

// The roles. An endpoint whose entities disagree is RoleBoth; one whose
// entities name no role is RoleUnknown.
const (
	RoleInitiator Role = "Initiator"
	RoleTarget    Role = "Target"
	RoleBoth      Role = "Both"
	RoleUnknown   Role = ""
)

// Endpoint is a fabric endpoint.
type Endpoint struct {
	// ID is the endpoint's Id; Path's last segment may differ (a mockup
	// bug Walk notes).
	ID, Path string
	Protocol string
	Health   string
	Role     Role
	Entities []*Entity
	// Ports are its Links.Ports and Links.ConnectedPorts: its own port
	// (on a host or device) or the switch port it is cabled to.
	Ports       []string
	Zones       []string
	Connections []string
	// Listed is false for an endpoint that zones, connections or ports
	// link to but the Endpoints collection does not list.
	Listed bool
}

// Entity is one of an endpoint's ConnectedEntities, with what Walk read
// from the resource its EntityLink names.
type Entity struct {
	Type, Role, Link string
	// From the linked resource, when it was read.
	ResourceType  string // its @odata.type's schema: Processor, Drive, ...
	ProcessorType string // Processor
	MediaType     string // Drive: HDD, SSD
	Protocol      string // Drive: SAS, SATA, NVMe
	CapacityBytes int64  // Drive, Volume, Memory, CXLLogicalDevice, Processor memory
	Manufacturer  string
	Model         string
	LinkWidth     int
	LinkSpeed     string
	// MemoryChunks the linked resource names (a CXL logical device's
	// Links.MemoryChunks, or the chunk itself).
	MemoryChunks []string
}

// Zone is a ZoneOfEndpoints (or another zone type) and its endpoints.
type Zone struct {
	ID, Path, Type string
	Endpoints      []string
}

// EndpointGroup is a named set of endpoints connections may name.
type EndpointGroup struct {
	ID, Path  string
	Endpoints []string
}

// Connection is a Connection: initiators given access to targets, memory
// chunks or volumes.
type Connection struct {
	ID, Path, Type string
	// Initiators and Targets are endpoint paths, with the members of the
	// endpoint groups the connection names added.
	Initiators, Targets []string
	MemoryChunks        []string
	Volumes             []string
}

// MemoryChunk is a memory chunk a fabric links to.
type MemoryChunk struct {
	ID, Path  string
	SizeBytes int64
	OffsetMiB int64
	RangeType string
	Endpoints []string // target endpoints that name it
	Missing   bool     // linked but not found (404)
}

// Volume is a volume a connection links to.
type Volume struct {
	ID, Path      string
	CapacityBytes int64
	Missing       bool
}

// System is a ComputerSystem an initiator links to.
type System struct {
	ID, Path     string
	Cores        int // 0: not reported
	MemoryGiB    int // 0: not reported
	Manufacturer string
	Model        string
	Missing      bool
}

// Endpoint returns the fabric's endpoint at path, or nil.
func (f *Fabric) Endpoint(path string) *Endpoint {
	for _, e := range f.Endpoints {
		if e.Path == path {
			return e
		}
	}
	return nil
}

func (f *Fabric) zone(path string) *Zone {
	for _, z := range f.Zones {
		if z.Path == path {
			return z
		}
	}
	return nil
}

func (f *Fabric) connection(path string) *Connection {
	for _, c := range f.Connections {
		if c.Path == path {
			return c
		}
	}
	return nil
}

// Links returns the cables between switches of f: each pair of switch
// ports joined by ConnectedPorts once, as "switchA/portA-switchB/portB"
// with A before B, sorted; switches joined by ConnectedSwitches without a
// port pair count once per pair as "switchA-switchB".
func (f *Fabric) Links() []string {
	portOwner := map[string][2]string{}
	swByPath := map[string]string{}
	for _, s := range f.Switches {
		swByPath[s.Path] = s.ID
		for _, p := range s.Ports {
			portOwner[p.Path] = [2]string{s.ID, p.ID}
		}
	}
	seen := map[string]bool{}
	paired := map[string]bool{}
	var out []string
	for _, s := range f.Switches {
		for _, p := range s.Ports {
			for _, c := range p.ConnectedPorts {
				o, ok := portOwner[c]
				if !ok || o[0] == s.ID {
					continue
				}
				a, b := s.ID+"/"+p.ID, o[0]+"/"+o[1]
				if b < a {
					a, b = b, a
				}
				if !seen[a+"-"+b] {
					seen[a+"-"+b] = true
					out = append(out, a+"-"+b)
					paired[pairKey(s.ID, o[0])] = true
				}
			}
		}
	}
	for _, s := range f.Switches {
		for _, p := range s.Ports {
			for _, c := range p.ConnectedSwitches {
				o, ok := swByPath[c]
				if !ok || o == s.ID || paired[pairKey(s.ID, o)] {
					continue
				}
				paired[pairKey(s.ID, o)] = true
				out = append(out, pairKey(s.ID, o))
			}
		}
	}
	sort.Strings(out)
	return out
}

func pairKey(a, b string) string {
	if b < a {
		a, b = b, a
	}
	return a + "-" + b
}

// Summary is one line per fabric: what Walk found in it.
func (r *Result) Summary() string {
	var b strings.Builder
	if r.Service != "" {
		fmt.Fprintf(&b, "service: %s\n", r.Service)
	}
	if len(r.Fabrics) == 0 {
		fmt.Fprintf(&b, "no fabrics")
		if r.ResourceBlocks > 0 {
			fmt.Fprintf(&b, " (%d resource blocks, composed without a fabric)", r.ResourceBlocks)
		}
		b.WriteString("\n")
	}
	for _, f := range r.Fabrics {
		var ini, tgt, other, ports int
		for _, e := range f.Endpoints {
			switch e.Role {
			case RoleInitiator:
				ini++
			case RoleTarget:
				tgt++
			default:
				other++
			}
		}
		for _, s := range f.Switches {
			ports += len(s.Ports)
		}
		fmt.Fprintf(&b, "fabric %s (%s): %d switches, %d ports, %d links between switches, %d endpoints (%d initiators, %d targets, %d other), %d zones, %d connections, %d memory chunks, %d volumes\n",
			f.ID, f.Type, len(f.Switches), ports, len(f.Links()), len(f.Endpoints), ini, tgt, other,
			len(f.Zones), len(f.Connections), len(f.MemoryChunks), len(f.Volumes))
	}
	fmt.Fprintf(&b, "%d resources read, %d notes\n", r.Resources, len(r.Notes))
	return b.String()
}
