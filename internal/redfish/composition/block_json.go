package composition

// A resource block's body, written as JSON directly.
//
// Blocks are the largest collection (245,760 on the P4 pod) and the one
// clients expand: the console's lists, inventory tools. Building each
// body as a map[string]any and encoding it cost about 16 µs a block, most
// of an expanded page; writing the same object field by field in the
// order encoding/json sorts a map's keys costs a small part of that
// (docs/benchmarks.md, "Collections at scale"). A GET of one block and a
// page of them write the same bytes (appendBlock), so they cannot drift
// apart.

import (
	"net/http"
	"slices"
	"strconv"
	"strings"

	"rackpool/internal/compose"
	"rackpool/internal/fabric"
	"rackpool/internal/inventory"
	"rackpool/internal/odata"
	"rackpool/internal/redfish/service"
)

// appendBlock appends block b's body in status st as compact JSON with
// each object's keys in sorted order (as encoding/json writes a map).
func (s *Service) appendBlock(w []byte, r *http.Request, b *inventory.Block, st compose.BlockStatus) []byte {
	zones := s.zonesJSON(b)
	health := s.blockHealth(r.Context(), b)
	state := st.State
	if health == fabric.Critical {
		state = "Failed"
	}
	d := b.Device

	w = append(w, `{"@odata.id":`...)
	w = odata.AppendJoined(w, service.BlocksPath, b.ID)
	w = append(w, `,"@odata.type":"#ResourceBlock.v1_4_0.ResourceBlock","CompositionStatus":{"CompositionState":`...)
	w = odata.AppendString(w, state)
	w = append(w, `,"MaxCompositions":`...)
	w = strconv.AppendInt(w, int64(b.MaxCompositions), 10)
	w = append(w, `,"NumberOfCompositions":`...)
	w = strconv.AppendInt(w, int64(len(st.Compositions)), 10)
	w = append(w, `,"Reserved":`...)
	w = strconv.AppendBool(w, len(st.Reservations) > 0)
	w = append(w, `,"SharingCapable":`...)
	w = strconv.AppendBool(w, b.MaxCompositions > 1)
	w = append(w, '}')
	if d != nil && service.IsDrive(b.Kind) {
		w = appendMember(w, "Drives", "/redfish/v1/Chassis/", service.ChassisOf(d), "/Drives/", b.ID)
	}
	w = appendBlockMember(w, b, nicMember)
	w = append(w, `,"Id":`...)
	w = odata.AppendString(w, b.ID)

	w = append(w, `,"Links":{"Chassis":[{"@odata.id":`...)
	if d != nil {
		w = odata.AppendJoined(w, "/redfish/v1/Chassis/", service.ChassisOf(d))
	} else {
		w = odata.AppendJoined(w, "/redfish/v1/Chassis/", b.Host.Rack)
	}
	w = append(w, `}],"ComputerSystems":[`...)
	for i, c := range s.visibleSystems(service.Principal(r), st.Compositions) {
		if i > 0 {
			w = append(w, ',')
		}
		w = append(w, `{"@odata.id":`...)
		w = odata.AppendJoined(w, "/redfish/v1/Systems/", c)
		w = append(w, '}')
	}
	w = append(w, `],"Zones":`...)
	w = append(w, zones.raw...)
	w = append(w, '}')

	w = appendBlockMember(w, b, memoryMember)
	w = append(w, `,"Name":`...)
	kind := string(b.Kind)
	w = odata.AppendJoined(w, strings.ToUpper(kind[:1]), kind[1:], " ", b.ID)
	w = appendBlockOem(w, b, st, zones.omitted)
	w = appendBlockMember(w, b, processorMember)
	w = append(w, `,"ResourceBlockType":[`...)
	w = odata.AppendString(w, b.Kind.BlockType())
	w = append(w, `],"Status":{"Health":`...)
	w = odata.AppendString(w, string(health))
	return append(w, `,"State":"Enabled"}}`...)
}

// blockZones is a block's Links.Zones as written, and whether its hosts'
// zones were left out (zonesOf).
type blockZones struct {
	raw     []byte
	omitted bool
}

// zonesJSON returns block b's zones. They are the same for every block of
// a device and for the life of the topology (drawer modes and cabling are
// the topology file's), so each device's (each compute block's) are
// written once and kept: on the P4 pod finding them (the hosts whose ports
// reach the device) cost more than the rest of the body.
func (s *Service) zonesJSON(b *inventory.Block) blockZones {
	key := any(b.Device)
	if b.Device == nil {
		key = b
	}
	if z, ok := s.zones.Load(key); ok {
		return z.(blockZones)
	}
	zones, omitted := s.zonesOf(b)
	z := blockZones{raw: odata.AppendRefs(nil, zones), omitted: omitted}
	s.zones.Store(key, z)
	return z
}

// appendBlockOem appends a block's Oem.Rackpool: what the DMTF schema has
// no property for (its kind, device, fabric, switch ports, drawer; a
// compute block's cores and local memory; who holds it outside
// compositions).
func appendBlockOem(w []byte, b *inventory.Block, st compose.BlockStatus, omitted bool) []byte {
	d := b.Device
	w = append(w, `,"Oem":{"Rackpool":{"@odata.type":`...)
	w = odata.AppendString(w, "#"+service.OemNamespace+".ResourceBlock")
	if d != nil && len(b.Attrs) > 0 {
		w = append(w, `,"Attributes":{`...)
		keys := make([]string, 0, len(b.Attrs))
		for k := range b.Attrs {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for i, k := range keys {
			if i > 0 {
				w = append(w, ',')
			}
			w = odata.AppendString(w, k)
			w = append(w, ':')
			w = odata.AppendString(w, b.Attrs[k])
		}
		w = append(w, '}')
	}
	if b.CapacityBytes > 0 {
		w = append(w, `,"CapacityBytes":`...)
		w = strconv.AppendInt(w, b.CapacityBytes, 10)
	}
	if d == nil {
		w = append(w, `,"Cores":`...)
		w = strconv.AppendInt(w, int64(b.Host.Cores), 10)
	} else {
		w = append(w, `,"Device":`...)
		w = odata.AppendString(w, d.ID)
		if d.VendorID != "" {
			w = append(w, `,"DeviceId":`...)
			w = odata.AppendString(w, d.DeviceID)
		}
		if d.Drawer != nil {
			w = append(w, `,"Drawer":`...)
			w = odata.AppendString(w, d.Drawer.ID)
			w = append(w, `,"DrawerMode":`...)
			w = odata.AppendString(w, string(d.Drawer.Mode))
		}
		w = append(w, `,"Fabric":`...)
		w = odata.AppendString(w, d.Fabric.ID)
	}
	if st.HeldBy != "" {
		w = append(w, `,"HeldBy":`...) // e.g. leases-memnode1: memory leased outside compositions
		w = odata.AppendString(w, st.HeldBy)
	}
	if omitted {
		w = append(w, `,"HostZonesOmitted":true`...)
	}
	w = append(w, `,"Kind":`...)
	w = odata.AppendString(w, string(b.Kind))
	if d != nil && d.LinkWidth > 0 {
		w = append(w, `,"LinkSpeed":`...)
		w = odata.AppendString(w, d.LinkSpeed)
		w = append(w, `,"LinkWidth":`...)
		w = strconv.AppendInt(w, int64(d.LinkWidth), 10)
	}
	if d == nil {
		w = append(w, `,"LocalMemoryGiB":`...)
		w = strconv.AppendInt(w, int64(b.Host.MemoryGiB), 10)
	}
	w = append(w, `,"Model":`...)
	w = odata.AppendString(w, b.Model)
	if d != nil {
		if d.Drawer != nil {
			w = append(w, `,"Slot":`...)
			w = strconv.AppendInt(w, int64(d.Slot), 10)
		}
		w = append(w, `,"Switch":`...)
		w = odata.AppendString(w, d.Switch.ID)
		w = append(w, `,"SwitchPorts":`...)
		w = odata.AppendStrings(w, d.Ports)
		if d.Vendor != "" {
			w = append(w, `,"Vendor":`...)
			w = odata.AppendString(w, d.Vendor)
		}
		if d.VendorID != "" {
			w = append(w, `,"VendorId":`...)
			w = odata.AppendString(w, d.VendorID)
		}
	}
	return append(w, `}}`...)
}

// appendBlockMember appends the DMTF array of block b's member of one
// kind (Processors, Memory, EthernetInterfaces), if it has one.
func appendBlockMember(w []byte, b *inventory.Block, of memberOf) []byte {
	coll, id, ok := of(b)
	if !ok {
		return w
	}
	return appendMember(w, coll, service.BlocksPath, b.ID, "/", coll, "/", id)
}

// appendMember appends ,"name":[{"@odata.id":uri}], the DMTF array of
// what a block holds, uri in parts.
func appendMember(w []byte, name string, uri ...string) []byte {
	w = append(w, `,"`...)
	w = append(w, name...)
	w = append(w, `":[{"@odata.id":`...)
	w = odata.AppendJoined(w, uri...)
	return append(w, `}]`...)
}
