package redfish

import (
	"net/http"
	"strings"

	"rackpool/internal/inventory"
	"rackpool/internal/redfish/service"
)

// The PCIe devices of a drawer chassis (falcon1-drawer1/PCIeDevices/gpu1):
// every device in its slots, as inventory tools list a chassis' cards, with
// its one physical function (PCIeFunctions/1) carrying the PCI vendor and
// device IDs and linking what the device is in DMTF form (the Drive or
// EthernetInterface; a GPU's or FPGA's Processor links the function). A CXL memory device's
// chassis has its own (cxl.go). A device whose block is hidden from the
// client (another tenant holds it) is hidden here too.

// drawerOf returns the fabric and drawer of drawer chassis id, nil if id
// is none.
func (s *Server) drawerOf(id string) (*inventory.Fabric, *inventory.Drawer) {
	for _, f := range s.top.Fabrics {
		for _, d := range f.Drawers {
			if id == f.ID+"-"+d.ID {
				return f, d
			}
		}
	}
	return nil, nil
}

// drawerDevices are the devices in drawer chassis id that r's principal may
// see, and whether id is a drawer chassis.
func (s *Server) drawerDevices(r *http.Request, id string) ([]*inventory.Device, bool) {
	f, d := s.drawerOf(id)
	if d == nil {
		return nil, false
	}
	var out []*inventory.Device
	for _, dev := range f.Devices {
		if dev.Drawer == d && s.deviceVisible(r, dev) {
			out = append(out, dev)
		}
	}
	return out, true
}

// deviceVisible reports whether r's principal may see one of d's blocks.
func (s *Server) deviceVisible(r *http.Request, d *inventory.Device) bool {
	p := principal(r)
	for _, b := range d.Blocks {
		if service.VisibleBlock(p, b, s.mgr) {
			return true
		}
	}
	return false
}

// drawerDevice returns the device r names in the drawer chassis r names.
func (s *Server) drawerDevice(r *http.Request) (*inventory.Device, error) {
	id, dev := r.PathValue("id"), r.PathValue("dev")
	devices, ok := s.drawerDevices(r, id)
	if !ok {
		return nil, errNotFound("Chassis", id)
	}
	for _, d := range devices {
		if d.ID == dev {
			return d, nil
		}
	}
	return nil, errNotFound("PCIeDevice", dev)
}

func (s *Server) getPCIeDevices(w http.ResponseWriter, r *http.Request) error {
	if s.cxlDevice(r.PathValue("id")) != nil {
		return s.getCXLPCIeDevices(w, r)
	}
	id := r.PathValue("id")
	devices, ok := s.drawerDevices(r, id)
	if !ok {
		return errNotFound("Chassis", id)
	}
	base := "/redfish/v1/Chassis/" + id + "/PCIeDevices"
	members := []odataID{}
	for _, d := range devices {
		members = append(members, ref(base+"/"+d.ID))
	}
	writeJSON(w, http.StatusOK, collection(base, "PCIeDeviceCollection", "PCIe Device Collection", members))
	return nil
}

func (s *Server) getPCIeDevice(w http.ResponseWriter, r *http.Request) error {
	if s.cxlDevice(r.PathValue("id")) != nil {
		return s.getCXLPCIeDevice(w, r)
	}
	d, err := s.drawerDevice(r)
	if err != nil {
		return err
	}
	chassis := "/redfish/v1/Chassis/" + r.PathValue("id")
	base := chassis + "/PCIeDevices/" + d.ID
	body := map[string]any{
		"@odata.id":     base,
		"@odata.type":   "#PCIeDevice.v1_21_0.PCIeDevice",
		"Id":            d.ID,
		"Name":          strings.ToUpper(string(d.Kind)) + " " + d.ID,
		"DeviceType":    "SingleFunction",
		"Status":        map[string]string{"State": "Enabled", "Health": string(s.health(r.Context(), d))},
		"PCIeFunctions": ref(base + "/PCIeFunctions"),
		"Links":         map[string]any{"Chassis": []odataID{ref(chassis)}},
	}
	if d.LinkWidth > 0 || d.LinkSpeed != "" {
		iface := map[string]any{}
		if d.LinkWidth > 0 {
			iface["LanesInUse"], iface["MaxLanes"] = d.LinkWidth, d.LinkWidth
		}
		if gen := pcieTypes[d.LinkSpeed]; gen != "" {
			iface["PCIeType"], iface["MaxPCIeType"] = gen, gen
		}
		body["PCIeInterface"] = iface
	}
	setProduct(body, d)
	writeJSON(w, http.StatusOK, body)
	return nil
}

func (s *Server) getPCIeFunctions(w http.ResponseWriter, r *http.Request) error {
	d, err := s.drawerDevice(r)
	if err != nil {
		return err
	}
	base := "/redfish/v1/Chassis/" + r.PathValue("id") + "/PCIeDevices/" + d.ID + "/PCIeFunctions"
	writeJSON(w, http.StatusOK, collection(base, "PCIeFunctionCollection", "PCIe Function Collection", []odataID{ref(base + "/1")}))
	return nil
}

// deviceClasses are the PCI device classes of the kinds of devices.
var deviceClasses = map[inventory.Kind]string{inventory.GPU: "DisplayController", inventory.FPGA: "ProcessingAccelerators",
	inventory.NVMe: "MassStorageController", inventory.SSD: "MassStorageController", inventory.HDD: "MassStorageController",
	inventory.NIC: "NetworkController", inventory.Memory: "MemoryController"}

func (s *Server) getPCIeFunction(w http.ResponseWriter, r *http.Request) error {
	d, err := s.drawerDevice(r)
	if err != nil {
		return err
	}
	if r.PathValue("fn") != "1" {
		return errNotFound("PCIeFunction", r.PathValue("fn"))
	}
	device := strings.TrimSuffix(service.PCIeFunctionPath(d), "/PCIeFunctions/1")
	links := map[string]any{"PCIeDevice": ref(device)}
	if len(d.Blocks) == 1 {
		b := d.Blocks[0]
		switch { // a Processor links its function instead (Links.PCIeFunctions)
		case service.IsDrive(b.Kind):
			links["Drives"] = []odataID{ref(service.DrivePath(b))}
		case b.Kind == inventory.NIC:
			links["EthernetInterfaces"] = []odataID{ref(service.BlocksPath + b.ID + "/EthernetInterfaces/" + b.ID)}
		}
	}
	body := map[string]any{
		"@odata.id":    device + "/PCIeFunctions/1",
		"@odata.type":  "#PCIeFunction.v1_7_0.PCIeFunction",
		"Id":           "1",
		"Name":         "Function 1 of " + d.ID,
		"FunctionId":   0,
		"FunctionType": "Physical",
		"Status":       map[string]string{"State": "Enabled", "Health": string(s.health(r.Context(), d))},
		"Links":        links,
	}
	if c := deviceClasses[d.Kind]; c != "" {
		body["DeviceClass"] = c
	}
	if d.VendorID != "" {
		body["VendorId"], body["DeviceId"] = d.VendorID, d.DeviceID
	}
	writeJSON(w, http.StatusOK, body)
	return nil
}

// setProduct adds device d's Model and Manufacturer to body, each when the
// topology gives it (Redfish: omit what is unknown rather than send "").
func setProduct(body map[string]any, d *inventory.Device) {
	if d.Model != "" {
		body["Model"] = d.Model
	}
	if d.Vendor != "" {
		body["Manufacturer"] = d.Vendor
	}
}
