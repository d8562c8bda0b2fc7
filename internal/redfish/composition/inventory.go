package composition

// The inventory of the pool and of each system in DMTF form, as Redfish
// clients that know no composability read it (Ansible's redfish_info,
// DMTF's rf_sys_inventory, Ironic), in the shape of DMTF's composability
// mockups: each resource block holds what it is (a compute block its
// host's Processors/CPU and Memory/Local; a GPU or FPGA block a Processor;
// a memory block a Memory; a NIC block an EthernetInterface; a drive block
// a Drive, kept in its chassis), and a system's Processors, Memory,
// Storage and EthernetInterfaces collections link its blocks' members:
// one part, one resource, listed once by the tools that walk every system.
// A system's collections are read from its composition record on every
// request: a shrink removes a member and an expand adds one at once.
// docs/redfish.md, "Inventory", has the shapes.

import (
	"net/http"
	"slices"
	"strings"

	"rackpool/internal/inventory"
	"rackpool/internal/redfish/service"
	"rackpool/internal/rf"
	"rackpool/internal/units"
)

// inventoryRoutes are the routes of the inventory.
var inventoryRoutes = []service.Route[*Service]{
	{Pattern: "GET /redfish/v1/Systems/{id}/Processors", Priv: service.Login, Handler: (*Service).getProcessors},
	{Pattern: "GET /redfish/v1/Systems/{id}/Memory", Priv: service.Login, Handler: (*Service).getMemories},
	{Pattern: "GET /redfish/v1/Systems/{id}/Storage", Priv: service.Login, Handler: (*Service).getStorages},
	{Pattern: "GET /redfish/v1/Systems/{id}/Storage/{storage}", Priv: service.Login, Handler: (*Service).getStorage},
	{Pattern: "GET /redfish/v1/Systems/{id}/Storage/{storage}/Controllers", Priv: service.Login, Handler: (*Service).getControllers},
	{Pattern: "GET /redfish/v1/Systems/{id}/Storage/{storage}/Controllers/{ctrl}", Priv: service.Login, Handler: (*Service).getController},
	{Pattern: "GET /redfish/v1/Systems/{id}/EthernetInterfaces", Priv: service.Login, Handler: (*Service).getEthernetInterfaces},
	{Pattern: "GET /redfish/v1/CompositionService/ResourceBlocks/{id}/Processors/{member}", Priv: service.Login, Handler: (*Service).getProcessor},
	{Pattern: "GET /redfish/v1/CompositionService/ResourceBlocks/{id}/Memory/{member}", Priv: service.Login, Handler: (*Service).getMemory},
	{Pattern: "GET /redfish/v1/CompositionService/ResourceBlocks/{id}/EthernetInterfaces/{member}", Priv: service.Login, Handler: (*Service).getEthernetInterface},
	{Pattern: "GET /redfish/v1/Chassis/{id}/Drives", Priv: service.Login, Handler: (*Service).getDrives},
	{Pattern: "GET /redfish/v1/Chassis/{id}/Drives/{member}", Priv: service.Login, Handler: (*Service).getDrive},
}

// The fixed members: a compute block's CPU and local memory, and the one
// Storage that holds a composed system's pooled drives. A device block's
// member is named as the block is.
const (
	cpuMember     = "CPU"
	localMember   = "Local"
	pooledStorage = "Pooled"
)

// processorPath, memoryPath and nicPath are the URIs of block b's member
// in its resource block; "" when b has none of that kind.
func processorPath(b *inventory.Block) string { return memberPath(b, processorMember) }
func memoryPath(b *inventory.Block) string    { return memberPath(b, memoryMember) }
func nicPath(b *inventory.Block) string       { return memberPath(b, nicMember) }

// A memberOf names block b's member of one kind: its collection in the
// resource block and its Id; ok is false when b has none.
type memberOf func(b *inventory.Block) (coll, id string, ok bool)

func processorMember(b *inventory.Block) (string, string, bool) {
	switch b.Kind {
	case inventory.Compute:
		return "Processors", cpuMember, true
	case inventory.GPU, inventory.FPGA:
		return "Processors", b.ID, true
	}
	return "", "", false
}

func memoryMember(b *inventory.Block) (string, string, bool) {
	switch b.Kind {
	case inventory.Compute:
		return "Memory", localMember, true
	case inventory.Memory:
		return "Memory", b.ID, true
	}
	return "", "", false
}

func nicMember(b *inventory.Block) (string, string, bool) {
	return "EthernetInterfaces", b.ID, b.Kind == inventory.NIC
}

func memberPath(b *inventory.Block, of memberOf) string {
	coll, id, ok := of(b)
	if !ok {
		return ""
	}
	return service.BlocksPath + b.ID + "/" + coll + "/" + id
}

// systemParts is what a system is made of, as its inventory shows it.
type systemParts struct {
	base   string             // /redfish/v1/Systems/{id}
	host   *inventory.Host    // its host: the compute block's
	blocks []*inventory.Block // the host's compute block, then its device blocks in the composition's order
}

// parts returns the parts of system id if r's principal may see it: a
// physical host is its compute block; a composed system adds its device
// blocks.
func (s *Service) parts(r *http.Request, id string) (systemParts, error) {
	if h := s.top.Host(id); h != nil {
		if !s.visibleBlock(service.Principal(r), h.Block) {
			return systemParts{}, s.core.Hide(r, "ComputerSystem", id)
		}
		return systemParts{base: "/redfish/v1/Systems/" + id, host: h, blocks: []*inventory.Block{h.Block}}, nil
	}
	c, err := s.systemVisible(r, id)
	if err != nil {
		return systemParts{}, err
	}
	h := s.top.Host(c.Host)
	if h == nil {
		return systemParts{}, rf.NotFound("ComputerSystem", id)
	}
	p := systemParts{base: "/redfish/v1/Systems/" + id, host: h, blocks: []*inventory.Block{h.Block}}
	for _, bid := range c.Blocks {
		if b := s.top.Block(bid); b != nil && b.Device != nil {
			p.blocks = append(p.blocks, b)
		}
	}
	return p, nil
}

// links returns the links path gives p's blocks, in order, leaving out
// blocks it gives none.
func (p systemParts) links(path func(*inventory.Block) string) []rf.ODataID {
	out := []rf.ODataID{}
	for _, b := range p.blocks {
		if uri := path(b); uri != "" {
			out = append(out, rf.Ref(uri))
		}
	}
	return out
}

// drives are p's drive blocks.
func (p systemParts) drives() []*inventory.Block {
	var out []*inventory.Block
	for _, b := range p.blocks {
		if b.Device != nil && service.IsDrive(b.Kind) {
			out = append(out, b)
		}
	}
	return out
}

// member returns resource block r names if r's principal may see it and
// member is what path names in it: the block's member to answer.
func (s *Service) member(r *http.Request, kind string, path func(*inventory.Block) string) (*inventory.Block, error) {
	id, member := r.PathValue("id"), r.PathValue("member")
	b := s.top.Block(id)
	if b == nil || path(b) != service.BlocksPath+id+"/"+kind+"/"+member {
		return nil, rf.NotFound(strings.TrimSuffix(kind, "s"), member)
	}
	if !service.BlockVisible(service.Principal(r), b, s.mgr.BlockStatus(b.ID)) {
		return nil, s.core.Hide(r, "ResourceBlock", id)
	}
	return b, nil
}

// deviceOem is what rackpool adds to a member that is a pooled device:
// where it sits.
func (s *Service) deviceOem(b *inventory.Block) map[string]any {
	d := b.Device
	oem := map[string]any{"Pooled": true, "ResourceBlock": rf.Ref(service.BlocksPath + b.ID), "Fabric": d.Fabric.ID,
		"Device": d.ID}
	if d.VendorID != "" {
		oem["VendorId"] = d.VendorID
		oem["DeviceId"] = d.DeviceID
	}
	if d.Drawer != nil {
		oem["Drawer"] = d.Drawer.ID
		oem["Slot"] = d.Slot
	}
	return service.RackpoolOem("PooledDevice", oem)
}

// chassisLinks are the Links of block b's member: the chassis it sits in
// (the host's rack for a compute block's).
func chassisLinks(b *inventory.Block) map[string]any {
	if b.Host != nil {
		return map[string]any{"Chassis": rf.Ref("/redfish/v1/Chassis/" + b.Host.Rack)}
	}
	return map[string]any{"Chassis": rf.Ref("/redfish/v1/Chassis/" + service.ChassisOf(b.Device))}
}

// status is a member's Status: its device's health as the core reads it
// (a host's own parts are OK).
func (s *Service) status(r *http.Request, b *inventory.Block) map[string]string {
	health := "OK"
	if b.Device != nil && s.health != nil {
		health = string(s.health(r.Context(), b.Device))
	}
	return map[string]string{"State": "Enabled", "Health": health}
}

// memberBody is the start of block b's member at uri of OData type typ.
func (s *Service) memberBody(r *http.Request, b *inventory.Block, uri, typ, name string) map[string]any {
	body := map[string]any{"@odata.id": uri, "@odata.type": typ, "Id": uri[strings.LastIndexByte(uri, '/')+1:], "Name": name,
		"Status": s.status(r, b), "Links": chassisLinks(b)}
	if b.Device != nil {
		body["Oem"] = s.deviceOem(b)
		if b.Device.Vendor != "" {
			body["Manufacturer"] = b.Device.Vendor
		}
	}
	return body
}

func (s *Service) getProcessors(w http.ResponseWriter, r *http.Request) error {
	p, err := s.parts(r, r.PathValue("id"))
	if err != nil {
		return err
	}
	service.WriteJSON(w, http.StatusOK, rf.Collection(p.base+"/Processors", "ProcessorCollection", "Processor Collection", p.links(processorPath)))
	return nil
}

func (s *Service) getProcessor(w http.ResponseWriter, r *http.Request) error {
	b, err := s.member(r, "Processors", processorPath)
	if err != nil {
		return err
	}
	if b.Host != nil {
		body := s.memberBody(r, b, processorPath(b), "#Processor.v1_22_0.Processor", "Host "+b.Host.ID+" CPU")
		body["ProcessorType"] = "CPU"
		body["TotalCores"] = b.Host.Cores
		service.WriteJSON(w, http.StatusOK, body)
		return nil
	}
	body := s.memberBody(r, b, processorPath(b), "#Processor.v1_22_0.Processor", strings.ToUpper(string(b.Kind))+" "+b.ID)
	if fn := service.PCIeFunctionPath(b.Device); fn != "" {
		body["Links"].(map[string]any)["PCIeFunctions"] = []rf.ODataID{rf.Ref(fn)}
	}
	body["ProcessorType"] = strings.ToUpper(string(b.Kind))
	body["Model"] = b.Model
	service.WriteJSON(w, http.StatusOK, body)
	return nil
}

func (s *Service) getMemories(w http.ResponseWriter, r *http.Request) error {
	p, err := s.parts(r, r.PathValue("id"))
	if err != nil {
		return err
	}
	service.WriteJSON(w, http.StatusOK, rf.Collection(p.base+"/Memory", "MemoryCollection", "Memory Collection", p.links(memoryPath)))
	return nil
}

func (s *Service) getMemory(w http.ResponseWriter, r *http.Request) error {
	b, err := s.member(r, "Memory", memoryPath)
	if err != nil {
		return err
	}
	var body map[string]any
	if b.Host != nil {
		body = s.memberBody(r, b, memoryPath(b), "#Memory.v1_23_0.Memory", "Host "+b.Host.ID+" local memory")
		body["CapacityMiB"] = b.Host.MemoryGiB * 1024
	} else {
		body = s.memberBody(r, b, memoryPath(b), "#Memory.v1_23_0.Memory", "Pooled memory "+b.ID)
		body["CapacityMiB"] = b.CapacityBytes / units.MiB
		if b.Model != "" {
			body["Model"] = b.Model
		}
	}
	body["MemoryType"] = "DRAM"
	body["MemoryMedia"] = []string{"DRAM"}
	service.WriteJSON(w, http.StatusOK, body)
	return nil
}

func (s *Service) getEthernetInterfaces(w http.ResponseWriter, r *http.Request) error {
	p, err := s.parts(r, r.PathValue("id"))
	if err != nil {
		return err
	}
	service.WriteJSON(w, http.StatusOK, rf.Collection(p.base+"/EthernetInterfaces", "EthernetInterfaceCollection",
		"Ethernet Interface Collection", p.links(nicPath)))
	return nil
}

// getEthernetInterface answers a pooled NIC. The topology knows its model,
// not its addresses: those are the host's to configure, so they are left
// out rather than invented.
func (s *Service) getEthernetInterface(w http.ResponseWriter, r *http.Request) error {
	b, err := s.member(r, "EthernetInterfaces", nicPath)
	if err != nil {
		return err
	}
	body := s.memberBody(r, b, nicPath(b), "#EthernetInterface.v1_12_0.EthernetInterface", "NIC "+b.ID)
	delete(body, "Manufacturer") // not an EthernetInterface property
	body["Description"] = strings.TrimSpace("Pooled NIC " + b.Device.Vendor + " " + b.Model)
	body["InterfaceEnabled"] = true
	service.WriteJSON(w, http.StatusOK, body)
	return nil
}

// storageIDs are the Storage members of p: Pooled when it holds drives.
// storageIDs are the system's storage subsystems: Pooled, its path into
// the pool's drives, listed even when none is composed (tools that read
// storage controllers treat a system without storage as an error).
func (p systemParts) storageIDs() []string {
	return []string{pooledStorage}
}

func (s *Service) getStorages(w http.ResponseWriter, r *http.Request) error {
	p, err := s.parts(r, r.PathValue("id"))
	if err != nil {
		return err
	}
	members := []rf.ODataID{}
	for _, id := range p.storageIDs() {
		members = append(members, rf.Ref(p.base+"/Storage/"+id))
	}
	service.WriteJSON(w, http.StatusOK, rf.Collection(p.base+"/Storage", "StorageCollection", "Storage Collection", members))
	return nil
}

// storageOf returns the parts of the system r names and the URI of its
// Storage member r names, or the error for either (404 for a Storage it
// has not).
func (s *Service) storageOf(r *http.Request) (systemParts, string, string, error) {
	p, err := s.parts(r, r.PathValue("id"))
	if err != nil {
		return p, "", "", err
	}
	id := r.PathValue("storage")
	if !slices.Contains(p.storageIDs(), id) {
		return p, "", "", rf.NotFound("Storage", id)
	}
	return p, id, p.base + "/Storage/" + id, nil
}

func (s *Service) getStorage(w http.ResponseWriter, r *http.Request) error {
	p, id, uri, err := s.storageOf(r)
	if err != nil {
		return err
	}
	drives := []rf.ODataID{}
	for _, b := range p.drives() {
		drives = append(drives, rf.Ref(service.DrivePath(b)))
	}
	service.WriteJSON(w, http.StatusOK, map[string]any{
		"@odata.id":          uri,
		"@odata.type":        "#Storage.v1_21_0.Storage",
		"Id":                 id,
		"Name":               "Pooled drives",
		"Description":        "The drives composed into this system from the pool",
		"Status":             map[string]string{"State": "Enabled", "Health": "OK"},
		"Drives":             drives,
		"Drives@odata.count": len(drives),
		"Controllers":        rf.Ref(uri + "/Controllers"),
		"Links":              map[string]any{"Enclosures": []rf.ODataID{}},
	})
	return nil
}

// The storage controllers of a system's pooled drives: one per protocol
// its drives are reached by. An NVMe drive is its own controller, reached
// over the PCIe fabric; SAS drives sit behind the host's SAS port into the
// SAS switch.
var controllerProtocols = map[string][2]string{ // drive protocol → controller protocol, what it is
	"NVMe": {"PCIe", "The NVMe controllers of the pooled NVMe drives, reached over the PCIe fabric"},
	"SAS":  {"SAS", "The host's SAS port into the SAS switch its pooled drives sit behind"},
	"SATA": {"SATA", "The host's path to its pooled SATA drives"},
}

// controllers returns the protocols of p's drives, in first-seen order,
// with the drives of each.
func (p systemParts) controllers() ([]string, map[string][]*inventory.Block) {
	var order []string
	by := map[string][]*inventory.Block{}
	for _, b := range p.drives() {
		proto := driveProtocol(b)
		if by[proto] == nil {
			order = append(order, proto)
		}
		by[proto] = append(by[proto], b)
	}
	return order, by
}

func (s *Service) getControllers(w http.ResponseWriter, r *http.Request) error {
	p, _, storage, err := s.storageOf(r)
	if err != nil {
		return err
	}
	uri := storage + "/Controllers"
	order, _ := p.controllers()
	members := []rf.ODataID{}
	for _, proto := range order {
		members = append(members, rf.Ref(uri+"/"+proto))
	}
	service.WriteJSON(w, http.StatusOK, rf.Collection(uri, "StorageControllerCollection", "Storage Controller Collection", members))
	return nil
}

func (s *Service) getController(w http.ResponseWriter, r *http.Request) error {
	p, _, storage, err := s.storageOf(r)
	if err != nil {
		return err
	}
	proto := r.PathValue("ctrl")
	_, by := p.controllers()
	if by[proto] == nil {
		return rf.NotFound("StorageController", proto)
	}
	c := controllerProtocols[proto]
	service.WriteJSON(w, http.StatusOK, map[string]any{
		"@odata.id":                    storage + "/Controllers/" + proto,
		"@odata.type":                  "#StorageController.v1_11_0.StorageController",
		"Id":                           proto,
		"Name":                         proto + " controller of the pooled drives",
		"Description":                  c[1],
		"Status":                       map[string]string{"State": "Enabled", "Health": "OK"},
		"SupportedControllerProtocols": []string{c[0]},
		"SupportedDeviceProtocols":     []string{proto},
	})
	return nil
}

// driveProtocol is the protocol a drive is reached by: NVMe drives by
// NVMe, the others by the fabric they sit on (SAS behind a SAS switch).
func driveProtocol(b *inventory.Block) string {
	switch {
	case b.Kind == inventory.NVMe:
		return "NVMe"
	case b.Device.Fabric.Kind == inventory.SASCircuit:
		return "SAS"
	}
	return "SATA"
}

// chassisDrives are the drive blocks of chassis id that r's principal may
// see, and whether id is a chassis with drives at all.
func (s *Service) chassisDrives(r *http.Request, id string) ([]*inventory.Block, bool) {
	var out []*inventory.Block
	found := false
	p := service.Principal(r)
	for _, b := range s.top.Blocks {
		if b.Device == nil || !service.IsDrive(b.Kind) || service.ChassisOf(b.Device) != id {
			continue
		}
		found = true
		if s.visibleBlock(p, b) {
			out = append(out, b)
		}
	}
	return out, found
}

func (s *Service) getDrives(w http.ResponseWriter, r *http.Request) error {
	id := r.PathValue("id")
	drives, ok := s.chassisDrives(r, id)
	if !ok {
		return rf.NotFound("Chassis", id)
	}
	members := []rf.ODataID{}
	for _, b := range drives {
		members = append(members, rf.Ref(service.DrivePath(b)))
	}
	service.WriteJSON(w, http.StatusOK, rf.Collection("/redfish/v1/Chassis/"+id+"/Drives", "DriveCollection", "Drive Collection", members))
	return nil
}

func (s *Service) getDrive(w http.ResponseWriter, r *http.Request) error {
	cid, id := r.PathValue("id"), r.PathValue("member")
	b := s.top.Block(id)
	if b == nil || b.Device == nil || !service.IsDrive(b.Kind) || service.ChassisOf(b.Device) != cid {
		return rf.NotFound("Drive", id)
	}
	if !s.visibleBlock(service.Principal(r), b) {
		return s.core.Hide(r, "Drive", id)
	}
	media := "SSD"
	if b.Kind == inventory.HDD {
		media = "HDD"
	}
	body := s.memberBody(r, b, service.DrivePath(b), "#Drive.v1_22_0.Drive", strings.ToUpper(string(b.Kind))+" drive "+b.ID)
	body["CapacityBytes"] = b.CapacityBytes
	body["MediaType"] = media
	body["Protocol"] = driveProtocol(b)
	if b.Model != "" {
		body["Model"] = b.Model
	}
	service.WriteJSON(w, http.StatusOK, body)
	return nil
}
