package redfish

import (
	"fmt"
	"net/http"

	"rackpool/internal/inventory"
	"rackpool/internal/redfish/service"
)

// cxlRoutes are the routes of CXL memory devices under their Chassis
// (routes.go), after the DMTF public-cxl mockups: each CXL type-3 device
// of a cxl-memory fabric is a Chassis (ChassisType Module) holding one
// PCIeDevice ("1") with its CXLLogicalDevices, and the device's memory as
// MemoryDomains of MemoryChunks.
var cxlRoutes = []route{
	{"GET /redfish/v1/Chassis/{id}/PCIeDevices", login, (*Server).getPCIeDevices},
	{"GET /redfish/v1/Chassis/{id}/PCIeDevices/{dev}", login, (*Server).getPCIeDevice},
	{"GET /redfish/v1/Chassis/{id}/PCIeDevices/{dev}/PCIeFunctions", login, (*Server).getPCIeFunctions},
	{"GET /redfish/v1/Chassis/{id}/PCIeDevices/{dev}/PCIeFunctions/{fn}", login, (*Server).getPCIeFunction},
	{"GET /redfish/v1/Chassis/{id}/PCIeDevices/{dev}/CXLLogicalDevices", login, (*Server).getCXLLogicalDevices},
	{"GET /redfish/v1/Chassis/{id}/PCIeDevices/{dev}/CXLLogicalDevices/{ld}", login, (*Server).getCXLLogicalDevice},
	{"GET /redfish/v1/Chassis/{id}/MemoryDomains", login, (*Server).getCXLMemoryDomains},
	{"GET /redfish/v1/Chassis/{id}/MemoryDomains/{dom}", login, (*Server).getCXLMemoryDomain},
	{"GET /redfish/v1/Chassis/{id}/MemoryDomains/{dom}/MemoryChunks", login, (*Server).getCXLMemoryChunks},
	{"GET /redfish/v1/Chassis/{id}/MemoryDomains/{dom}/MemoryChunks/{chunk}", login, (*Server).getCXLMemoryChunk},
}

// The CXL view of one device:
//
//	Chassis/{device}                                   ChassisType Module
//	  PCIeDevices/1                                    CXLDevice Type3
//	    CXLLogicalDevices/LD{n}                        one per logical device
//	  MemoryDomains/Static                             the logical devices' memory
//	  MemoryDomains/Dynamic                            the dynamic-capacity region
//	    MemoryChunks/{block}                           one per LD or extent
//
// A MemoryChunk is a resource block: a tenant sees the chunks (and logical
// devices) it may see as blocks, and its own Connections, whose
// MemoryChunkInfo links the chunks attached. The device's topology is
// visible to every account, as fabrics are.

// The memory domains of a CXL device.
const (
	staticDomain  = "Static"  // the logical devices
	dynamicDomain = "Dynamic" // the dynamic-capacity region
)

const mib = 1 << 20

// cxlDevice returns the CXL memory device whose Chassis is id, or nil.
func (s *Server) cxlDevice(id string) *inventory.Device {
	d := s.top.Device(id)
	if d == nil || d.Fabric.Kind != inventory.CXLMemory {
		return nil
	}
	return d
}

func (s *Server) cxlChassis(r *http.Request) (*inventory.Device, error) {
	d := s.cxlDevice(r.PathValue("id"))
	if d == nil {
		return nil, errNotFound("Chassis", r.PathValue("id"))
	}
	return d, nil
}

// cxlChassisBody is the Chassis of CXL memory device d (chassis.go).
func (s *Server) cxlChassisBody(r *http.Request, d *inventory.Device) map[string]any {
	base := "/redfish/v1/Chassis/" + d.ID
	body := chassisBody(d.ID, "Module", "CXL memory device "+d.ID, map[string]any{
		"PCIeDevices":   ref(base + "/PCIeDevices"),
		"MemoryDomains": ref(base + "/MemoryDomains"),
	})
	var blocks []odataID
	for _, region := range []inventory.CXLRegion{inventory.LogicalDevice, inventory.DynamicExtent} {
		for _, b := range s.visibleBlocks(r, d, region) {
			blocks = append(blocks, ref(service.BlocksPath+b.ID))
		}
	}
	body["Links"] = map[string]any{"ContainedBy": ref("/redfish/v1/Chassis/" + s.rackOf(d)), "ResourceBlocks": nonNilRefs(blocks)}
	setProduct(body, d)
	body["Status"] = map[string]string{"State": "Enabled", "Health": string(s.health(r.Context(), d))}
	return body
}

// rackOf names the rack chassis a device's hosts live in: the first host
// cabled to its fabric.
func (s *Server) rackOf(d *inventory.Device) string {
	if len(d.Fabric.Ports) > 0 {
		return d.Fabric.Ports[0].Host.Rack
	}
	return s.top.Hosts[0].Rack
}

func (s *Server) getCXLPCIeDevices(w http.ResponseWriter, r *http.Request) error {
	d, err := s.cxlChassis(r)
	if err != nil {
		return err
	}
	base := "/redfish/v1/Chassis/" + d.ID + "/PCIeDevices"
	writeJSON(w, http.StatusOK, collection(base, "PCIeDeviceCollection", "PCIe Device Collection", []odataID{ref(base + "/1")}))
	return nil
}

func (s *Server) cxlPCIe(r *http.Request) (*inventory.Device, error) {
	d, err := s.cxlChassis(r)
	if err != nil {
		return nil, err
	}
	if r.PathValue("dev") != "1" {
		return nil, errNotFound("PCIeDevice", r.PathValue("dev"))
	}
	return d, nil
}

// pcieTypes maps a link speed to its PCIe generation.
var pcieTypes = map[string]string{"8GT/s": "Gen3", "16GT/s": "Gen4", "32GT/s": "Gen5", "64GT/s": "Gen6"}

func (s *Server) getCXLPCIeDevice(w http.ResponseWriter, r *http.Request) error {
	d, err := s.cxlPCIe(r)
	if err != nil {
		return err
	}
	base := "/redfish/v1/Chassis/" + d.ID + "/PCIeDevices/1"
	lanes := d.LinkWidth
	if lanes == 0 {
		lanes = 16
	}
	gen := pcieTypes[d.LinkSpeed]
	if gen == "" {
		gen = "Gen5"
	}
	body := map[string]any{
		"@odata.id":   base,
		"@odata.type": "#PCIeDevice.v1_21_0.PCIeDevice",
		"Id":          "1",
		"Name":        "CXL memory device " + d.ID,
		"Status":      map[string]string{"State": "Enabled", "Health": string(s.health(r.Context(), d))},
		"PCIeInterface": map[string]any{
			"PCIeType": gen, "MaxPCIeType": gen, "LanesInUse": lanes, "MaxLanes": lanes,
		},
		"CXLDevice": map[string]any{
			"DeviceType":              "Type3",
			"CurrentProtocolVersion":  "CXL3_0", // dynamic capacity is a CXL 3.0 feature
			"CapableProtocolVersions": []string{"CXL2_0", "CXL3_0"},
			"MaxNumberLogicalDevices": inventory.MaxLogicalDevices,
		},
		"CXLLogicalDevices": ref(base + "/CXLLogicalDevices"),
		"Links":             map[string]any{"Chassis": []odataID{ref("/redfish/v1/Chassis/" + d.ID)}},
	}
	setProduct(body, d)
	writeJSON(w, http.StatusOK, body)
	return nil
}

// visibleBlocks returns d's blocks of region that r's principal may see.
func (s *Server) visibleBlocks(r *http.Request, d *inventory.Device, region inventory.CXLRegion) []*inventory.Block {
	p := principal(r)
	var out []*inventory.Block
	for _, b := range d.Blocks {
		if b.Region == region && service.BlockVisible(p, b, s.mgr.BlockStatus(b.ID)) {
			out = append(out, b)
		}
	}
	return out
}

func ldID(b *inventory.Block) string { return fmt.Sprintf("LD%d", b.LD) }

func (s *Server) getCXLLogicalDevices(w http.ResponseWriter, r *http.Request) error {
	d, err := s.cxlPCIe(r)
	if err != nil {
		return err
	}
	base := "/redfish/v1/Chassis/" + d.ID + "/PCIeDevices/1/CXLLogicalDevices"
	var members []odataID
	for _, b := range s.visibleBlocks(r, d, inventory.LogicalDevice) {
		members = append(members, ref(base+"/"+ldID(b)))
	}
	writeJSON(w, http.StatusOK, collection(base, "CXLLogicalDeviceCollection", "CXL Logical Device Collection", members))
	return nil
}

func (s *Server) getCXLLogicalDevice(w http.ResponseWriter, r *http.Request) error {
	d, err := s.cxlPCIe(r)
	if err != nil {
		return err
	}
	id := r.PathValue("ld")
	var blk *inventory.Block
	for _, b := range d.Blocks {
		if b.Region == inventory.LogicalDevice && ldID(b) == id {
			blk = b
		}
	}
	if blk == nil {
		return errNotFound("CXLLogicalDevice", id)
	}
	if !service.BlockVisible(principal(r), blk, s.mgr.BlockStatus(blk.ID)) {
		return s.hide(r, "CXLLogicalDevice", id)
	}
	chassis := "/redfish/v1/Chassis/" + d.ID
	writeJSON(w, http.StatusOK, map[string]any{
		"@odata.id":          chassis + "/PCIeDevices/1/CXLLogicalDevices/" + id,
		"@odata.type":        "#CXLLogicalDevice.v1_3_0.CXLLogicalDevice",
		"Id":                 id,
		"Name":               fmt.Sprintf("Logical device %d of %s", blk.LD, d.ID),
		"Status":             map[string]string{"State": "Enabled", "Health": string(s.health(r.Context(), d))},
		"SemanticsSupported": []string{"CXLio", "CXLmem"},
		"MemorySizeMiB":      blk.CapacityBytes / mib,
		"Links": map[string]any{
			"MemoryDomains": []odataID{ref(chassis + "/MemoryDomains/" + staticDomain)},
			"MemoryChunks":  []odataID{ref(chassis + "/MemoryDomains/" + staticDomain + "/MemoryChunks/" + blk.ID)},
		},
	})
	return nil
}

// domains lists d's memory domains: Static when it has logical devices,
// Dynamic when it has a dynamic-capacity region.
func domains(d *inventory.Device) []string {
	var out []string
	if d.LogicalDevices > 0 {
		out = append(out, staticDomain)
	}
	if d.ExtentBytes > 0 {
		out = append(out, dynamicDomain)
	}
	return out
}

func domainRegion(dom string) inventory.CXLRegion {
	if dom == staticDomain {
		return inventory.LogicalDevice
	}
	return inventory.DynamicExtent
}

func (s *Server) getCXLMemoryDomains(w http.ResponseWriter, r *http.Request) error {
	d, err := s.cxlChassis(r)
	if err != nil {
		return err
	}
	base := "/redfish/v1/Chassis/" + d.ID + "/MemoryDomains"
	var members []odataID
	for _, dom := range domains(d) {
		members = append(members, ref(base+"/"+dom))
	}
	writeJSON(w, http.StatusOK, collection(base, "MemoryDomainCollection", "Memory Domain Collection", members))
	return nil
}

func (s *Server) cxlDomain(r *http.Request) (*inventory.Device, string, error) {
	d, err := s.cxlChassis(r)
	if err != nil {
		return nil, "", err
	}
	dom := r.PathValue("dom")
	for _, x := range domains(d) {
		if x == dom {
			return d, dom, nil
		}
	}
	return nil, "", errNotFound("MemoryDomain", dom)
}

func (s *Server) getCXLMemoryDomain(w http.ResponseWriter, r *http.Request) error {
	d, dom, err := s.cxlDomain(r)
	if err != nil {
		return err
	}
	base := "/redfish/v1/Chassis/" + d.ID + "/MemoryDomains/" + dom
	body := map[string]any{
		"@odata.id":    base,
		"@odata.type":  "#MemoryDomain.v1_5_1.MemoryDomain",
		"Id":           dom,
		"Status":       map[string]string{"State": "Enabled", "Health": string(s.health(r.Context(), d))},
		"MemoryChunks": ref(base + "/MemoryChunks"),
	}
	var lds []odataID
	if dom == staticDomain {
		body["Name"] = fmt.Sprintf("%s: %d logical devices", d.ID, d.LogicalDevices)
		body["AllowsMemoryChunkCreation"] = false
		body["MemorySizeMiB"] = (d.CapacityBytes - d.DCDBytes) / mib
		for _, b := range s.visibleBlocks(r, d, inventory.LogicalDevice) {
			lds = append(lds, ref("/redfish/v1/Chassis/"+d.ID+"/PCIeDevices/1/CXLLogicalDevices/"+ldID(b)))
		}
	} else {
		body["Name"] = fmt.Sprintf("%s: dynamic capacity in %d MiB extents", d.ID, d.ExtentBytes/mib)
		// Extents are fixed slices a Connection hands out; chunks are not
		// created by a POST here.
		body["AllowsMemoryChunkCreation"] = false
		body["MemorySizeMiB"] = d.DCDBytes / mib
		body["MinMemoryChunkSizeMiB"] = d.ExtentBytes / mib
		body["MemoryChunkIncrementMiB"] = d.ExtentBytes / mib
	}
	if lds != nil {
		body["Links"] = map[string]any{"CXLLogicalDevices": lds}
	}
	writeJSON(w, http.StatusOK, body)
	return nil
}

func (s *Server) getCXLMemoryChunks(w http.ResponseWriter, r *http.Request) error {
	d, dom, err := s.cxlDomain(r)
	if err != nil {
		return err
	}
	base := "/redfish/v1/Chassis/" + d.ID + "/MemoryDomains/" + dom + "/MemoryChunks"
	var members []odataID
	for _, b := range s.visibleBlocks(r, d, domainRegion(dom)) {
		members = append(members, ref(base+"/"+b.ID))
	}
	writeJSON(w, http.StatusOK, collection(base, "MemoryChunksCollection", "Memory Chunks Collection", members))
	return nil
}

// memoryChunkPath is the MemoryChunk of CXL block b.
func memoryChunkPath(b *inventory.Block) string {
	dom := dynamicDomain
	if b.Region == inventory.LogicalDevice {
		dom = staticDomain
	}
	return "/redfish/v1/Chassis/" + b.Device.ID + "/MemoryDomains/" + dom + "/MemoryChunks/" + b.ID
}

func (s *Server) getCXLMemoryChunk(w http.ResponseWriter, r *http.Request) error {
	d, dom, err := s.cxlDomain(r)
	if err != nil {
		return err
	}
	id := r.PathValue("chunk")
	b := s.top.Block(id)
	if b == nil || b.Device != d || b.Region != domainRegion(dom) {
		return errNotFound("MemoryChunks", id)
	}
	if !service.BlockVisible(principal(r), b, s.mgr.BlockStatus(b.ID)) {
		return s.hide(r, "MemoryChunks", id)
	}
	links := map[string]any{"Endpoints": []odataID{reff("/redfish/v1/Fabrics/%s/Endpoints/%s", d.Fabric.ID, d.ID)}}
	name := fmt.Sprintf("Extent at %d MiB of %s", b.OffsetBytes/mib, d.ID)
	if b.Region == inventory.LogicalDevice {
		links["CXLLogicalDevices"] = []odataID{ref("/redfish/v1/Chassis/" + d.ID + "/PCIeDevices/1/CXLLogicalDevices/" + ldID(b))}
		name = fmt.Sprintf("Logical device %d of %s", b.LD, d.ID)
	}
	writeJSON(w, http.StatusOK, map[string]any{
		"@odata.id":             memoryChunkPath(b),
		"@odata.type":           "#MemoryChunks.v1_6_2.MemoryChunks",
		"Id":                    b.ID,
		"Name":                  name,
		"Status":                map[string]string{"State": "Enabled", "Health": string(s.health(r.Context(), d))},
		"MemoryChunkSizeMiB":    b.CapacityBytes / mib,
		"AddressRangeType":      "Volatile",
		"AddressRangeOffsetMiB": b.OffsetBytes / mib,
		"MediaLocation":         "Local",
		"Links":                 links,
	})
	return nil
}

// memoryChunkInfo is a Connection's MemoryChunkInfo for its blocks on a
// cxl-memory fabric (fabrics.Deps.MemoryChunks): each attached LD or
// extent, read and write.
func (s *Server) memoryChunkInfo(f *inventory.Fabric, blocks []string) []map[string]any {
	if f.Kind != inventory.CXLMemory {
		return nil
	}
	out := []map[string]any{}
	for _, id := range blocks {
		if b := s.top.Block(id); b != nil && b.Device != nil && b.Region != inventory.NotCXL {
			out = append(out, map[string]any{
				"AccessCapabilities": []string{"Read", "Write"},
				"MemoryChunk":        ref(memoryChunkPath(b)),
			})
		}
	}
	return out
}
