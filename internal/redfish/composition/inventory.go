package composition

// The inventory of a system in DMTF form, as Redfish clients that know no
// composability read it (Ansible's redfish_info, DMTF's rf_sys_inventory,
// Ironic): Processors, Memory, Storage and EthernetInterfaces under
// /redfish/v1/Systems/{id},
// and the Drives of the chassis the pool's drives sit in (a system's
// Storage links its drives there). A composed system's members are its host's CPU
// and local memory and one member per device block it holds, read from the
// composition record on every request: a shrink removes a member and an
// expand adds one at once. A physical host's are its own CPU and local
// memory. docs/redfish.md, "Inventory", has the shapes.

import (
	"net/http"
	"strings"

	"rackpool/internal/inventory"
	"rackpool/internal/redfish/service"
	"rackpool/internal/rf"
	"rackpool/internal/units"
)

// inventoryRoutes are the routes of a system's inventory.
var inventoryRoutes = []service.Route[*Service]{
	{Pattern: "GET /redfish/v1/Systems/{id}/Processors", Priv: service.Login, Handler: (*Service).getProcessors},
	{Pattern: "GET /redfish/v1/Systems/{id}/Processors/{member}", Priv: service.Login, Handler: (*Service).getProcessor},
	{Pattern: "GET /redfish/v1/Systems/{id}/Memory", Priv: service.Login, Handler: (*Service).getMemories},
	{Pattern: "GET /redfish/v1/Systems/{id}/Memory/{member}", Priv: service.Login, Handler: (*Service).getMemory},
	{Pattern: "GET /redfish/v1/Systems/{id}/Storage", Priv: service.Login, Handler: (*Service).getStorages},
	{Pattern: "GET /redfish/v1/Systems/{id}/Storage/{storage}", Priv: service.Login, Handler: (*Service).getStorage},
	{Pattern: "GET /redfish/v1/Systems/{id}/EthernetInterfaces", Priv: service.Login, Handler: (*Service).getEthernetInterfaces},
	{Pattern: "GET /redfish/v1/Systems/{id}/EthernetInterfaces/{member}", Priv: service.Login, Handler: (*Service).getEthernetInterface},
	{Pattern: "GET /redfish/v1/Chassis/{id}/Drives", Priv: service.Login, Handler: (*Service).getDrives},
	{Pattern: "GET /redfish/v1/Chassis/{id}/Drives/{member}", Priv: service.Login, Handler: (*Service).getDrive},
}

// The fixed members: the host's CPU, its local memory, and the one
// Storage that holds a composed system's pooled drives.
const (
	cpuMember     = "CPU"
	localMember   = "Local"
	pooledStorage = "Pooled"
)

// systemParts is what a system is made of, as its inventory shows it.
type systemParts struct {
	base    string // /redfish/v1/Systems/{id}
	host    *inventory.Host
	devices []*inventory.Block // device blocks, in the composition's order
}

// parts returns the parts of system id if r's principal may see it: a
// physical host is its own CPU and memory; a composed system adds its
// device blocks.
func (s *Service) parts(r *http.Request, id string) (systemParts, error) {
	if h := s.top.Host(id); h != nil {
		if !s.visibleBlock(service.Principal(r), h.Block) {
			return systemParts{}, s.core.Hide(r, "ComputerSystem", id)
		}
		return systemParts{base: "/redfish/v1/Systems/" + id, host: h}, nil
	}
	c, err := s.systemVisible(r, id)
	if err != nil {
		return systemParts{}, err
	}
	p := systemParts{base: "/redfish/v1/Systems/" + id, host: s.top.Host(c.Host)}
	if p.host == nil {
		return systemParts{}, rf.NotFound("ComputerSystem", id)
	}
	for _, bid := range c.Blocks {
		if b := s.top.Block(bid); b != nil && b.Device != nil {
			p.devices = append(p.devices, b)
		}
	}
	return p, nil
}

// of returns the device blocks of p whose kind is one of kinds.
func (p systemParts) of(kinds ...inventory.Kind) []*inventory.Block {
	var out []*inventory.Block
	for _, b := range p.devices {
		for _, k := range kinds {
			if b.Kind == k {
				out = append(out, b)
			}
		}
	}
	return out
}

// device returns p's device block id if its kind is one of kinds.
func (p systemParts) device(id string, kinds ...inventory.Kind) *inventory.Block {
	for _, b := range p.of(kinds...) {
		if b.ID == id {
			return b
		}
	}
	return nil
}

var (
	processorKinds = []inventory.Kind{inventory.GPU, inventory.FPGA}
	driveKinds     = []inventory.Kind{inventory.NVMe, inventory.SSD, inventory.HDD}
)

// deviceOem is what rackpool adds to a member that is a pooled device:
// where it sits and, for a system's member (h, its host), what reaching it
// costs from the host.
func (s *Service) deviceOem(h *inventory.Host, b *inventory.Block) map[string]any {
	d := b.Device
	oem := map[string]any{"Pooled": true, "ResourceBlock": rf.Ref(service.BlocksPath + b.ID), "Fabric": d.Fabric.ID,
		"Device": d.ID}
	if h != nil {
		if p, ok := s.top.Path(h, b); ok {
			oem["RoundTripNs"] = p.RTTNS
			oem["Hops"] = p.Hops
		}
	}
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

// hostPath is the URI of host h as a system: its CPU and local memory are
// members there, whichever system they are part of.
func hostPath(h *inventory.Host) string { return "/redfish/v1/Systems/" + h.ID }

// rackLinks are the Links of a part of host h: its rack's chassis.
func rackLinks(h *inventory.Host) map[string]any {
	return map[string]any{"Chassis": rf.Ref("/redfish/v1/Chassis/" + h.Rack)}
}

// chassisLinks are the Links of a member that is device block b: the
// chassis the device sits in.
func chassisLinks(b *inventory.Block) map[string]any {
	return map[string]any{"Chassis": rf.Ref("/redfish/v1/Chassis/" + service.ChassisOf(b.Device))}
}

// status is a member's Status: its device's health as the core reads it
// (the host's own parts are OK).
func (s *Service) status(r *http.Request, b *inventory.Block) map[string]string {
	health := "OK"
	if b != nil && s.health != nil {
		health = string(s.health(r.Context(), b.Device))
	}
	return map[string]string{"State": "Enabled", "Health": health}
}

func (s *Service) getProcessors(w http.ResponseWriter, r *http.Request) error {
	p, err := s.parts(r, r.PathValue("id"))
	if err != nil {
		return err
	}
	members := []rf.ODataID{rf.Ref(hostPath(p.host) + "/Processors/" + cpuMember)}
	for _, b := range p.of(processorKinds...) {
		members = append(members, rf.Ref(p.base+"/Processors/"+b.ID))
	}
	service.WriteJSON(w, http.StatusOK, rf.Collection(p.base+"/Processors", "ProcessorCollection", "Processor Collection", members))
	return nil
}

func (s *Service) getProcessor(w http.ResponseWriter, r *http.Request) error {
	p, err := s.parts(r, r.PathValue("id"))
	if err != nil {
		return err
	}
	id := r.PathValue("member")
	uri := p.base + "/Processors/" + id
	body := map[string]any{"@odata.id": uri, "@odata.type": "#Processor.v1_22_0.Processor", "Id": id}
	if id == cpuMember && p.base == hostPath(p.host) {
		body["Name"] = "Host " + p.host.ID + " CPU"
		body["Links"] = rackLinks(p.host)
		body["ProcessorType"] = "CPU"
		body["TotalCores"] = p.host.Cores
		body["Status"] = s.status(r, nil)
		service.WriteJSON(w, http.StatusOK, body)
		return nil
	}
	b := p.device(id, processorKinds...)
	if b == nil {
		return rf.NotFound("Processor", id)
	}
	body["Name"] = strings.ToUpper(string(b.Kind)) + " " + b.ID
	body["ProcessorType"] = strings.ToUpper(string(b.Kind))
	body["Model"] = b.Model
	if b.Device.Vendor != "" {
		body["Manufacturer"] = b.Device.Vendor
	}
	body["Status"] = s.status(r, b)
	body["Links"] = chassisLinks(b)
	body["Oem"] = s.deviceOem(p.host, b)
	service.WriteJSON(w, http.StatusOK, body)
	return nil
}

func (s *Service) getMemories(w http.ResponseWriter, r *http.Request) error {
	p, err := s.parts(r, r.PathValue("id"))
	if err != nil {
		return err
	}
	members := []rf.ODataID{rf.Ref(hostPath(p.host) + "/Memory/" + localMember)}
	for _, b := range p.of(inventory.Memory) {
		members = append(members, rf.Ref(p.base+"/Memory/"+b.ID))
	}
	service.WriteJSON(w, http.StatusOK, rf.Collection(p.base+"/Memory", "MemoryCollection", "Memory Collection", members))
	return nil
}

func (s *Service) getMemory(w http.ResponseWriter, r *http.Request) error {
	p, err := s.parts(r, r.PathValue("id"))
	if err != nil {
		return err
	}
	id := r.PathValue("member")
	uri := p.base + "/Memory/" + id
	body := map[string]any{"@odata.id": uri, "@odata.type": "#Memory.v1_23_0.Memory", "Id": id, "MemoryType": "DRAM",
		"MemoryMedia": []string{"DRAM"}}
	if id == localMember && p.base == hostPath(p.host) {
		body["Name"] = "Host " + p.host.ID + " local memory"
		body["Links"] = rackLinks(p.host)
		body["CapacityMiB"] = p.host.MemoryGiB * 1024
		body["Status"] = s.status(r, nil)
		service.WriteJSON(w, http.StatusOK, body)
		return nil
	}
	b := p.device(id, inventory.Memory)
	if b == nil {
		return rf.NotFound("Memory", id)
	}
	body["Name"] = "Pooled memory " + b.ID
	body["CapacityMiB"] = b.CapacityBytes / units.MiB
	if b.Model != "" {
		body["Model"] = b.Model
	}
	if b.Device.Vendor != "" {
		body["Manufacturer"] = b.Device.Vendor
	}
	body["Status"] = s.status(r, b)
	body["Links"] = chassisLinks(b)
	body["Oem"] = s.deviceOem(p.host, b)
	service.WriteJSON(w, http.StatusOK, body)
	return nil
}

func (s *Service) getEthernetInterfaces(w http.ResponseWriter, r *http.Request) error {
	p, err := s.parts(r, r.PathValue("id"))
	if err != nil {
		return err
	}
	members := []rf.ODataID{}
	for _, b := range p.of(inventory.NIC) {
		members = append(members, rf.Ref(p.base+"/EthernetInterfaces/"+b.ID))
	}
	service.WriteJSON(w, http.StatusOK, rf.Collection(p.base+"/EthernetInterfaces", "EthernetInterfaceCollection",
		"Ethernet Interface Collection", members))
	return nil
}

// getEthernetInterface answers a pooled NIC as the system sees it. The
// topology knows its model, not its addresses: those are the host's to
// configure, so they are left out rather than invented.
func (s *Service) getEthernetInterface(w http.ResponseWriter, r *http.Request) error {
	p, err := s.parts(r, r.PathValue("id"))
	if err != nil {
		return err
	}
	id := r.PathValue("member")
	b := p.device(id, inventory.NIC)
	if b == nil {
		return rf.NotFound("EthernetInterface", id)
	}
	desc := "Pooled NIC"
	if b.Model != "" {
		desc += " " + strings.TrimSpace(b.Device.Vendor+" "+b.Model)
	}
	service.WriteJSON(w, http.StatusOK, map[string]any{
		"@odata.id":        p.base + "/EthernetInterfaces/" + id,
		"@odata.type":      "#EthernetInterface.v1_12_0.EthernetInterface",
		"Id":               id,
		"Name":             "NIC " + id,
		"Description":      desc,
		"InterfaceEnabled": true,
		"Status":           s.status(r, b),
		"Links":            chassisLinks(b),
		"Oem":              s.deviceOem(p.host, b),
	})
	return nil
}

// storageIDs are the Storage members of p: Pooled when it holds drives.
func (p systemParts) storageIDs() []string {
	if len(p.of(driveKinds...)) == 0 {
		return nil
	}
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

// storage returns p's Storage member named in r, or the 404 for it.
func storage(r *http.Request, p systemParts) (string, error) {
	id := r.PathValue("storage")
	for _, sid := range p.storageIDs() {
		if sid == id {
			return id, nil
		}
	}
	return "", rf.NotFound("Storage", id)
}

func (s *Service) getStorage(w http.ResponseWriter, r *http.Request) error {
	p, err := s.parts(r, r.PathValue("id"))
	if err != nil {
		return err
	}
	id, err := storage(r, p)
	if err != nil {
		return err
	}
	uri := p.base + "/Storage/" + id
	drives := []rf.ODataID{}
	for _, b := range p.of(driveKinds...) {
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
		"Links":              map[string]any{"Enclosures": []rf.ODataID{}},
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
	body := map[string]any{
		"@odata.id":     service.DrivePath(b),
		"@odata.type":   "#Drive.v1_22_0.Drive",
		"Id":            id,
		"Name":          strings.ToUpper(string(b.Kind)) + " drive " + b.ID,
		"CapacityBytes": b.CapacityBytes,
		"MediaType":     media,
		"Protocol":      driveProtocol(b),
		"Status":        s.status(r, b),
		"Links":         chassisLinks(b),
		"Oem":           s.deviceOem(nil, b),
	}
	if b.Model != "" {
		body["Model"] = b.Model
	}
	if b.Device.Vendor != "" {
		body["Manufacturer"] = b.Device.Vendor
	}
	service.WriteJSON(w, http.StatusOK, body)
	return nil
}
