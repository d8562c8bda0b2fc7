// Package inventory is rackpool's domain model: the static shape of a rack or
// datacenter (hosts, fabrics, switches, devices and the resource blocks they
// become) and the dynamic records the control plane keeps about it
// (compositions and their states).
//
// An Inventory is built once from a topology file by package topology and is
// immutable afterwards; everything that changes lives in compositions, which
// the store persists and the compose package mutates.
package inventory

import (
	"time"
)

// FabricKind names one of the kinds of fabric rackpool drives.
type FabricKind string

// The fabric kinds.
const (
	PCIeSwitch     FabricKind = "pcie-switch"
	SASCircuit     FabricKind = "sas-circuit"
	EthernetVLAN   FabricKind = "ethernet-vlan"
	OpticalCircuit FabricKind = "optical-circuit"
	// CXLMemory is CXL type-3 memory devices behind CXL switches: each
	// device split into logical devices (MLD) and a dynamic-capacity (DCD)
	// region handed out in extents.
	CXLMemory FabricKind = "cxl-memory"
)

// FabricKinds lists the valid fabric kinds.
var FabricKinds = []FabricKind{PCIeSwitch, SASCircuit, EthernetVLAN, OpticalCircuit, CXLMemory}

// MaxLogicalDevices is the most logical devices (LD-IDs) one CXL
// multi-logical device has (CXL 2.0 §2.4: up to 16).
const MaxLogicalDevices = 16

// CXLRegion says which part of a CXL memory device a block is.
type CXLRegion string

// The CXL regions a memory block can be.
const (
	// NotCXL: a block of any other device.
	NotCXL CXLRegion = ""
	// LogicalDevice: one LD of a multi-logical device, bound to one host
	// whole (FM API Bind vPPB).
	LogicalDevice CXLRegion = "logical-device"
	// DynamicExtent: one extent of the device's dynamic-capacity region,
	// added to a host's view and released from it (FM API Initiate Dynamic
	// Capacity Add / Release).
	DynamicExtent CXLRegion = "dcd-extent"
)

// Kind is the kind of a resource: a pooled device kind or compute.
type Kind string

// The resource kinds.
const (
	Compute Kind = "compute"
	GPU     Kind = "gpu"
	FPGA    Kind = "fpga"
	NVMe    Kind = "nvme"
	SSD     Kind = "ssd"
	HDD     Kind = "hdd"
	NIC     Kind = "nic"
	Memory  Kind = "memory"
)

// DeviceKinds lists the kinds a device in a topology file may have.
var DeviceKinds = []Kind{GPU, FPGA, NVMe, SSD, HDD, NIC, Memory}

// BlockType is the Redfish ResourceBlockType a kind maps to.
func (k Kind) BlockType() string {
	switch k {
	case Compute:
		return "Compute"
	case GPU, FPGA:
		return "Processor"
	case NVMe, SSD, HDD:
		return "Storage"
	case NIC:
		return "Network"
	case Memory:
		return "Memory"
	}
	return "Expansion"
}

// DrawerMode is a Falcon-style PCIe chassis drawer mode.
type DrawerMode string

// The drawer modes (P2): one host sees all 8 slots; two hosts see 4 slots
// each; up to three hosts share the drawer and devices move between them.
const (
	StandardOneHost  DrawerMode = "standard-one-host"
	StandardTwoHosts DrawerMode = "standard-two-hosts"
	Advanced         DrawerMode = "advanced"
)

// MaxHosts is how many hosts may share a drawer in mode m.
func (m DrawerMode) MaxHosts() int {
	switch m {
	case StandardOneHost:
		return 1
	case StandardTwoHosts:
		return 2
	case Advanced:
		return 3
	}
	return 0
}

// Inventory is the immutable description of everything rackpool manages.
type Inventory struct {
	Name     string
	Hosts    []*Host
	Fabrics  []*Fabric
	Devices  []*Device
	Blocks   []*Block
	Zones    []*Zone
	hostByID map[string]*Host
	fabByID  map[string]*Fabric
	devByID  map[string]*Device
	blkByID  map[string]*Block
	zoneByID map[string]*Zone
}

// Host is a compute node: CPU cores and local DRAM, with ports into fabrics.
type Host struct {
	Index     int // position in Inventory.Hosts
	ID        string
	Rack      string
	Cores     int
	MemoryGiB int
	Ports     []*HostPort
	Block     *Block // the host's Compute resource block
	// PowerOn and Shutdown are the modelled times of an emulated host
	// (docs/redfish.md, "Power and boot"): from power applied to
	// PowerState On, and of an operating system's graceful shutdown.
	PowerOn, Shutdown time.Duration
	// BMC, when set, is the host's baseboard management controller: power
	// and boot go to it (internal/bmc) instead of the model.
	BMC *BMC
}

// BMC is where a host's BMC serves Redfish and how to log in; the
// password comes from the environment variable PasswordEnv.
type BMC struct {
	URL         string // base URL; the service root is URL/redfish/v1
	System      string // the ComputerSystem's path or Id ("": the BMC's only one)
	CAFile      string // PEM trust for its certificate ("": the system's)
	User        string
	PasswordEnv string
}

// HostPort is a host adapter cabled to a fabric switch port.
type HostPort struct {
	Index  int // position among all hosts' ports, in host order
	ID     string
	Host   *Host
	Fabric *Fabric
	Switch *Switch
	Port   string
	Metres float64
}

// Fabric is one interconnect: a PCIe switch chassis, a SAS circuit switch,
// an Ethernet VLAN switch or an optical circuit switch.
type Fabric struct {
	ID       string
	Kind     FabricKind
	Switches []*Switch
	Links    []*Link
	Drawers  []*Drawer // pcie-switch chassis only
	Devices  []*Device
	Ports    []*HostPort
	// Reconfig is the modelled time of one reconfiguration (PCIe hot-plug,
	// SAS remap, VLAN change, OCS circuit set-up).
	Reconfig time.Duration
	// DriveOnline is the extra time a SAS drive takes to come online after a
	// remap (P1: 1 ms COMRESET, 10 ms warm port, 90 ms no timeouts, 200 ms
	// vanilla).
	DriveOnline time.Duration
	// ReleaseTimeout (cxl-memory) is how long a host has to acknowledge the
	// release of an extent or logical device before the fabric manager
	// forces it.
	ReleaseTimeout time.Duration
	// Driver is how the control plane drives the fabric: "emulated" (the
	// default), "redfish" (through Manager) or "netns".
	Driver     string
	Manager    *FabricManager
	switchByID map[string]*Switch
}

// FabricManager is the Redfish fabric manager of a redfish-driven fabric.
type FabricManager struct {
	API         string // ManagerFabricAPI or ManagerCompositionAPI
	URL         string // base URL; the service root is URL/redfish/v1
	Fabric      string // the manager's Fabric Id ("" for a composition manager)
	CAFile      string // PEM trust for its certificate ("" : the system's)
	User        string
	PasswordEnv string // environment variable holding the password
}

// What a fabric's manager offers (FabricManager.API).
const (
	// ManagerFabricAPI: a Redfish Fabric with Endpoints and Zones or
	// Connections.
	ManagerFabricAPI = "fabric"
	// ManagerCompositionAPI: a vendor's composer, whose resource blocks
	// are composed into ComputerSystems.
	ManagerCompositionAPI = "composition"
)

// Switch is a switch element inside a fabric.
type Switch struct {
	Index     int // position in Fabric.Switches
	ID        string
	Fabric    *Fabric
	Ports     int
	LatencyNS float64 // port-to-port latency
	// PortNames are named ports beyond 1..Ports (a chassis' host ports and
	// drawer slots).
	PortNames []string
}

// Link joins two switches of one fabric.
type Link struct {
	A, B   *Switch
	Metres float64
}

// Drawer is a Falcon-style chassis drawer of PCIe slots.
type Drawer struct {
	ID        string
	Mode      DrawerMode
	Slots     int
	HostPorts []string // chassis host ports cabled to this drawer, in order
}

// SlotHostPorts says which of the drawer's host ports reach slot (1-based) in
// the drawer's mode.
func (d *Drawer) SlotHostPorts(slot int) []string {
	switch d.Mode {
	case StandardTwoHosts:
		half := (d.Slots + 1) / 2
		if len(d.HostPorts) < 2 {
			return d.HostPorts
		}
		if slot <= half {
			return d.HostPorts[:1]
		}
		return d.HostPorts[1:2]
	default:
		return d.HostPorts
	}
}

// Device is a pooled device in a fabric. A memory node is one device that is
// split into several Memory blocks.
type Device struct {
	Index           int // position in Inventory.Devices
	ID              string
	Kind            Kind
	Model           string
	Vendor          string
	VendorID        string
	DeviceID        string
	CapacityBytes   int64
	BlockBytes      int64 // memory nodes: size of one block
	LinkWidth       int
	LinkSpeed       string
	Fabric          *Fabric
	Switch          *Switch
	Ports           []string // switch ports the device is cabled to
	Metres          float64
	Drawer          *Drawer // pcie chassis only
	Slot            int
	MaxCompositions int
	OverheadNS      float64
	Attrs           map[string]string
	Blocks          []*Block
	// LogicalDevices (cxl-memory) is how many LDs the statically
	// partitioned part of the device is split into (1 is a single-logical
	// device; 0: the device is all dynamic capacity).
	LogicalDevices int
	// DCDBytes (cxl-memory) is the size of the dynamic-capacity region
	// (the device's last bytes), ExtentBytes the size of one of its
	// extents; both 0 without one.
	DCDBytes    int64
	ExtentBytes int64
}

// Block is a composable resource block: a host's compute, one device, or one
// slice of a memory node.
type Block struct {
	Index           int // position in Inventory.Blocks
	ID              string
	Kind            Kind
	Model           string
	CapacityBytes   int64
	MaxCompositions int
	Host            *Host   // compute blocks
	Device          *Device // device blocks
	Attrs           map[string]string
	// Region and OffsetBytes place a block of a CXL memory device: a
	// logical device or an extent of the dynamic-capacity region, at
	// OffsetBytes into the device's capacity. LD is the logical device's
	// number (1-based; 0 for an extent).
	Region      CXLRegion
	OffsetBytes int64
	LD          int
}

// Exclusive reports whether the block may be in at most one composition.
func (b *Block) Exclusive() bool { return b.MaxCompositions <= 1 }

// Fabric returns the fabric of a device block, or nil.
func (b *Block) Fabric() *Fabric {
	if b.Device == nil {
		return nil
	}
	return b.Device.Fabric
}

// Zone is a named set of hosts and devices from the topology file; a request
// may confine its placement to one zone.
type Zone struct {
	ID      string
	Hosts   map[string]bool
	Devices map[string]bool
}

// Contains reports whether block b is in the zone.
func (z *Zone) Contains(b *Block) bool {
	if b.Host != nil {
		return z.Hosts[b.Host.ID]
	}
	return b.Device != nil && z.Devices[b.Device.ID]
}

// Index builds the lookup tables. Package topology calls it once.
func (inv *Inventory) Index() {
	inv.hostByID = map[string]*Host{}
	inv.fabByID = map[string]*Fabric{}
	inv.devByID = map[string]*Device{}
	inv.blkByID = map[string]*Block{}
	inv.zoneByID = map[string]*Zone{}
	for _, h := range inv.Hosts {
		inv.hostByID[h.ID] = h
	}
	for _, f := range inv.Fabrics {
		inv.fabByID[f.ID] = f
		f.switchByID = map[string]*Switch{}
		for i, s := range f.Switches {
			s.Index = i
			f.switchByID[s.ID] = s
		}
	}
	for _, d := range inv.Devices {
		inv.devByID[d.ID] = d
	}
	for i, b := range inv.Blocks {
		b.Index = i
		inv.blkByID[b.ID] = b
	}
	for _, z := range inv.Zones {
		inv.zoneByID[z.ID] = z
	}
}

// Host returns the host with id, or nil.
func (inv *Inventory) Host(id string) *Host { return inv.hostByID[id] }

// Fabric returns the fabric with id, or nil.
func (inv *Inventory) Fabric(id string) *Fabric { return inv.fabByID[id] }

// Device returns the device with id, or nil.
func (inv *Inventory) Device(id string) *Device { return inv.devByID[id] }

// Block returns the block with id, or nil.
func (inv *Inventory) Block(id string) *Block { return inv.blkByID[id] }

// Zone returns the zone with id, or nil.
func (inv *Inventory) Zone(id string) *Zone { return inv.zoneByID[id] }

// Switch returns the switch with id in fabric f, or nil.
func (f *Fabric) Switch(id string) *Switch { return f.switchByID[id] }

// PortOn returns the host's port into fabric f, or nil.
func (h *Host) PortOn(f *Fabric) *HostPort {
	for _, p := range h.Ports {
		if p.Fabric == f {
			return p
		}
	}
	return nil
}

// PortsOn returns all of the host's ports into fabric f.
func (h *Host) PortsOn(f *Fabric) []*HostPort {
	var out []*HostPort
	for _, p := range h.Ports {
		if p.Fabric == f {
			out = append(out, p)
		}
	}
	return out
}

// State is the lifecycle state of a composition.
type State string

// Composition states. A composition is Composing while its devices are being
// attached, Composed when every attach succeeded, Updating while blocks are
// added or removed, and Decomposing while it is being torn down.
const (
	Composing   State = "Composing"
	Composed    State = "Composed"
	Updating    State = "Updating"
	Decomposing State = "Decomposing"
	// Reserved: the blocks are held for a later composition (a Redfish
	// CompositionReservation) but nothing is attached. A reservation ends at
	// ExpiresAt unless it is composed or released first.
	Reserved State = "Reserved"
	// Held: the blocks are held by a holder outside composition: the memory
	// lease manager's pool of one memory node (no host, attached to
	// nothing) or a blocknode, which holds its host and the drives the SAS
	// switch maps to it. Its owner sets its blocks (compose.Manager.SetHeld,
	// SetHolders).
	Held State = "Held"
)

// Composition is a logical system composed from a compute block and device
// blocks.
type Composition struct {
	ID     string
	Name   string
	Host   string   // host ID (its compute block is part of Blocks)
	Blocks []string // block IDs, compute block first
	// Ports maps each device block to the host port ID it is attached
	// through (the scheduler's choice; an optical circuit depends on it).
	Ports       map[string]string
	State       State
	Adding      []string // Updating: blocks being added
	Removing    []string // Updating: blocks being removed
	Version     int64    // optimistic concurrency version, bumped on every change
	CreatedAt   time.Time
	UpdatedAt   time.Time
	Description string
	// Tenant owns the composition; "" is the operators' own (no tenant).
	Tenant string
	// ExpiresAt ends a Reserved composition; zero for the other states.
	ExpiresAt time.Time
	// Group ties together the reservations one request made (a Redfish
	// CompositionReservation may hold several systems).
	Group string
	// Step is the saga step a workflow in transition waits on
	// (compose.StepHostAttach, compose.StepHostDrain); "" otherwise.
	Step string
	// Owner is the active replica whose workflow last wrote the record
	// (its membership, docs/ha.md); "" for a replica serving alone. The
	// leader settles a record left in transition by a replica that died.
	Owner string
	// Power is the system's power state and boot override.
	Power Power
}

// Power states (Redfish ComputerSystem PowerState).
const (
	PowerOff         = "Off"
	PowerOn          = "On"
	PowerPoweringOn  = "PoweringOn"
	PowerPoweringOff = "PoweringOff"
)

// Power is a system's power state and boot override: part of its record,
// so it survives a restart. The zero value is a system that is Off with no
// override.
type Power struct {
	// State is PowerOff (also ""), PowerOn, or PoweringOn or PoweringOff
	// while a reset runs.
	State string
	// Reset is the ResetType under way while State is in transition.
	Reset string
	// Since is when the transition began.
	Since time.Time
	Boot  Boot
}

// IsOff reports whether the system is Off (the zero state).
func (p Power) IsOff() bool { return p.State == "" || p.State == PowerOff }

// Boot is a boot source override (Redfish ComputerSystem Boot).
type Boot struct {
	Enabled    string // Disabled (also ""), Once, Continuous
	Target     string // None (also ""), Pxe, Hdd, Cd, UefiHttp, UefiTarget, UefiBootNext, BiosSetup
	Mode       string // UEFI (also ""), Legacy
	UefiTarget string // the UEFI device path when Target is UefiTarget
	BootNext   string // the BootOptionReference when Target is UefiBootNext
}

// Clone returns a deep copy.
func (c *Composition) Clone() *Composition {
	n := *c
	n.Blocks = append([]string(nil), c.Blocks...)
	n.Adding = append([]string(nil), c.Adding...)
	n.Removing = append([]string(nil), c.Removing...)
	if c.Ports != nil {
		n.Ports = make(map[string]string, len(c.Ports))
		for k, v := range c.Ports {
			n.Ports[k] = v
		}
	}
	return &n
}

// AllBlocks returns the blocks the composition holds or is acquiring.
func (c *Composition) AllBlocks() []string {
	out := append([]string(nil), c.Blocks...)
	return append(out, c.Adding...)
}
