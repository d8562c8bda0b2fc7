package fmserver

import (
	"fmt"
	"net/http"

	"rackpool/internal/fabric"
	"rackpool/internal/inventory"
	"rackpool/internal/rf"
)

// chassisRoutes are the routes of the hosts (Systems) and memory devices
// (Chassis with MemoryDomains of MemoryChunks) the fabric's endpoints and
// connections link to.
var chassisRoutes = []route{
	{"GET /redfish/v1/Systems", login, (*Server).getSystems},
	{"GET /redfish/v1/Systems/{host}", login, (*Server).getSystem},
	{"GET /redfish/v1/Chassis", login, (*Server).getChassisCollection},
	{"GET /redfish/v1/Chassis/{dev}", login, (*Server).getChassis},
	{"GET /redfish/v1/Chassis/{dev}/MemoryDomains", login, (*Server).getMemoryDomains},
	{"GET /redfish/v1/Chassis/{dev}/MemoryDomains/{dom}", login, (*Server).getMemoryDomain},
	{"GET /redfish/v1/Chassis/{dev}/MemoryDomains/{dom}/MemoryChunks", login, (*Server).getMemoryChunks},
	{"GET /redfish/v1/Chassis/{dev}/MemoryDomains/{dom}/MemoryChunks/{chunk}", login, (*Server).getMemoryChunk},
}

// Memory domains: a CXL device's logical devices are MemoryDomains/Static
// and its dynamic-capacity extents MemoryDomains/Dynamic (as the
// northbound API names them); a memory node's blocks are
// MemoryDomains/Memory. A chunk's Id is its block's ID.
const (
	staticDomain  = "Static"
	dynamicDomain = "Dynamic"
	memoryDomain  = "Memory"
)

const mib = 1 << 20

// blockDomain is the memory domain of a memory block.
func blockDomain(b *inventory.Block) string {
	switch b.Region {
	case inventory.LogicalDevice:
		return staticDomain
	case inventory.DynamicExtent:
		return dynamicDomain
	}
	return memoryDomain
}

// MemoryChunkPath is the URI of memory block b's MemoryChunk:
// /redfish/v1/Chassis/{device}/MemoryDomains/{domain}/MemoryChunks/{block}.
func MemoryChunkPath(b *inventory.Block) string {
	return "/redfish/v1/Chassis/" + b.Device.ID + "/MemoryDomains/" + blockDomain(b) + "/MemoryChunks/" + b.ID
}

// memoryDevices are the fabric's devices served as Chassis.
func (s *Server) memoryDevices() []*inventory.Device {
	var out []*inventory.Device
	for _, d := range s.fab.Devices {
		if d.Kind == inventory.Memory {
			out = append(out, d)
		}
	}
	return out
}

func (s *Server) hosts() []*inventory.Host {
	var out []*inventory.Host
	for _, hp := range s.fab.Ports {
		if len(out) == 0 || out[len(out)-1] != hp.Host {
			out = append(out, hp.Host)
		}
	}
	return out
}

func (s *Server) getSystems(w http.ResponseWriter, r *http.Request) error {
	var members []odataID
	seen := map[string]bool{}
	for _, h := range s.hosts() {
		if !seen[h.ID] {
			seen[h.ID] = true
			members = append(members, ref("/redfish/v1/Systems/"+h.ID))
		}
	}
	rf.WriteJSON(w, http.StatusOK, collection("/redfish/v1/Systems", "ComputerSystemCollection", "Computer System Collection", members))
	return nil
}

func (s *Server) getSystem(w http.ResponseWriter, r *http.Request) error {
	h := s.top.Host(r.PathValue("host"))
	if h == nil || len(h.PortsOn(s.fab)) == 0 {
		return errNotFound("ComputerSystem", r.PathValue("host"))
	}
	st, err := s.state(r.Context())
	if err != nil {
		return err
	}
	rf.WriteJSON(w, http.StatusOK, map[string]any{
		"@odata.id":   "/redfish/v1/Systems/" + h.ID,
		"@odata.type": "#ComputerSystem.v1_22_0.ComputerSystem",
		"Id":          h.ID,
		"Name":        "Host " + h.ID,
		"SystemType":  "Physical",
		"Status":      statusOK(st.Health[h.ID]),
	})
	return nil
}

func (s *Server) getChassisCollection(w http.ResponseWriter, r *http.Request) error {
	var members []odataID
	if len(s.fab.Drawers) > 0 {
		members = append(members, ref("/redfish/v1/Chassis/"+s.fab.ID))
		for _, d := range s.fab.Drawers {
			members = append(members, ref("/redfish/v1/Chassis/"+s.fab.ID+"-"+d.ID))
		}
	}
	for _, d := range s.memoryDevices() {
		members = append(members, ref("/redfish/v1/Chassis/"+d.ID))
	}
	rf.WriteJSON(w, http.StatusOK, collection("/redfish/v1/Chassis", "ChassisCollection", "Chassis Collection", members))
	return nil
}

func (s *Server) memoryDevice(r *http.Request) (*inventory.Device, error) {
	d := s.device(r.PathValue("dev"))
	if d == nil || d.Kind != inventory.Memory {
		return nil, errNotFound("Chassis", r.PathValue("dev"))
	}
	return d, nil
}

func (s *Server) getChassis(w http.ResponseWriter, r *http.Request) error {
	if body := s.drawerChassis(r.PathValue("dev")); body != nil {
		rf.WriteJSON(w, http.StatusOK, body)
		return nil
	}
	d, err := s.memoryDevice(r)
	if err != nil {
		return err
	}
	st, err := s.state(r.Context())
	if err != nil {
		return err
	}
	body := map[string]any{
		"@odata.id":     "/redfish/v1/Chassis/" + d.ID,
		"@odata.type":   "#Chassis.v1_25_0.Chassis",
		"Id":            d.ID,
		"Name":          "Memory device " + d.ID,
		"ChassisType":   "Module",
		"Status":        statusOK(st.Health[d.ID]),
		"MemoryDomains": ref("/redfish/v1/Chassis/" + d.ID + "/MemoryDomains"),
	}
	if d.Model != "" {
		body["Model"] = d.Model
	}
	if d.Vendor != "" {
		body["Manufacturer"] = d.Vendor
	}
	rf.WriteJSON(w, http.StatusOK, body)
	return nil
}

// domains lists d's memory domains, in a fixed order.
func domains(d *inventory.Device) []string {
	var out []string
	for _, dom := range []string{staticDomain, dynamicDomain, memoryDomain} {
		for _, b := range d.Blocks {
			if blockDomain(b) == dom {
				out = append(out, dom)
				break
			}
		}
	}
	return out
}

func (s *Server) memoryDomain(r *http.Request) (*inventory.Device, string, error) {
	d, err := s.memoryDevice(r)
	if err != nil {
		return nil, "", err
	}
	for _, dom := range domains(d) {
		if dom == r.PathValue("dom") {
			return d, dom, nil
		}
	}
	return nil, "", errNotFound("MemoryDomain", r.PathValue("dom"))
}

func (s *Server) getMemoryDomains(w http.ResponseWriter, r *http.Request) error {
	d, err := s.memoryDevice(r)
	if err != nil {
		return err
	}
	base := "/redfish/v1/Chassis/" + d.ID + "/MemoryDomains"
	var members []odataID
	for _, dom := range domains(d) {
		members = append(members, ref(base+"/"+dom))
	}
	rf.WriteJSON(w, http.StatusOK, collection(base, "MemoryDomainCollection", "Memory Domain Collection", members))
	return nil
}

func (s *Server) getMemoryDomain(w http.ResponseWriter, r *http.Request) error {
	d, dom, err := s.memoryDomain(r)
	if err != nil {
		return err
	}
	base := "/redfish/v1/Chassis/" + d.ID + "/MemoryDomains/" + dom
	var size int64
	n := 0
	for _, b := range d.Blocks {
		if blockDomain(b) == dom {
			size += b.CapacityBytes
			n++
		}
	}
	rf.WriteJSON(w, http.StatusOK, map[string]any{
		"@odata.id":                 base,
		"@odata.type":               "#MemoryDomain.v1_5_1.MemoryDomain",
		"Id":                        dom,
		"Name":                      fmt.Sprintf("%s: %d %s chunks", d.ID, n, dom),
		"AllowsMemoryChunkCreation": false,
		"MemorySizeMiB":             size / mib,
		"Status":                    statusOK(""),
		"MemoryChunks":              ref(base + "/MemoryChunks"),
	})
	return nil
}

func (s *Server) getMemoryChunks(w http.ResponseWriter, r *http.Request) error {
	d, dom, err := s.memoryDomain(r)
	if err != nil {
		return err
	}
	base := "/redfish/v1/Chassis/" + d.ID + "/MemoryDomains/" + dom + "/MemoryChunks"
	var members []odataID
	for _, b := range d.Blocks {
		if blockDomain(b) == dom {
			members = append(members, ref(base+"/"+b.ID))
		}
	}
	rf.WriteJSON(w, http.StatusOK, collection(base, "MemoryChunksCollection", "Memory Chunks Collection", members))
	return nil
}

func (s *Server) getMemoryChunk(w http.ResponseWriter, r *http.Request) error {
	d, dom, err := s.memoryDomain(r)
	if err != nil {
		return err
	}
	b := s.top.Block(r.PathValue("chunk"))
	if b == nil || b.Device != d || blockDomain(b) != dom {
		return errNotFound("MemoryChunks", r.PathValue("chunk"))
	}
	st, err := s.state(r.Context())
	if err != nil {
		return err
	}
	offset := b.OffsetBytes
	if b.Region == inventory.NotCXL {
		for i, x := range d.Blocks {
			if x == b {
				offset = int64(i) * d.BlockBytes
			}
		}
	}
	rf.WriteJSON(w, http.StatusOK, map[string]any{
		"@odata.id":             MemoryChunkPath(b),
		"@odata.type":           "#MemoryChunks.v1_6_2.MemoryChunks",
		"Id":                    b.ID,
		"Name":                  "Memory chunk " + b.ID,
		"MemoryChunkSizeMiB":    b.CapacityBytes / mib,
		"AddressRangeType":      "Volatile",
		"AddressRangeOffsetMiB": offset / mib,
		"Status":                statusOK(st.Health[d.ID]),
		"Links":                 map[string]any{"Endpoints": []odataID{ref(s.endpointPath(d.ID))}},
	})
	return nil
}

// drawerChassis is the body of a PCIe chassis (Id: the fabric's) or of one
// of its drawers (Id: "{fabric}-{drawer}"), with the drawer's mode, as the
// northbound API shows them; nil for any other Id.
func (s *Server) drawerChassis(id string) map[string]any {
	f := s.fab
	if len(f.Drawers) == 0 {
		return nil
	}
	body := func(typ, name string, oem map[string]any) map[string]any {
		oem["@odata.type"] = "#Rackpool.v1_0_0.Chassis"
		return map[string]any{
			"@odata.id":   "/redfish/v1/Chassis/" + id,
			"@odata.type": "#Chassis.v1_25_0.Chassis",
			"Id":          id,
			"Name":        name,
			"ChassisType": typ,
			"Status":      statusOK(fabric.OK),
			"Oem":         map[string]any{"Rackpool": oem},
		}
	}
	if id == f.ID {
		var ports []string
		for _, hp := range f.Ports {
			ports = append(ports, hp.Port)
		}
		b := body("Enclosure", "PCIe chassis "+f.ID, map[string]any{"Fabric": f.ID, "HostPorts": nonNilStrings(ports)})
		var links []odataID
		for _, d := range f.Drawers {
			links = append(links, ref("/redfish/v1/Chassis/"+f.ID+"-"+d.ID))
		}
		b["Links"] = map[string]any{"Contains": links}
		return b
	}
	for _, d := range f.Drawers {
		if id == f.ID+"-"+d.ID {
			return body("Drawer", "Drawer "+d.ID+" of "+f.ID, map[string]any{"Fabric": f.ID, "Mode": d.Mode,
				"Slots": d.Slots, "HostPorts": nonNilStrings(d.HostPorts), "MaxHosts": d.Mode.MaxHosts()})
		}
	}
	return nil
}

func nonNilStrings(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}
