package composition

// A physical host's ComputerSystem, written as JSON directly: hosts are
// the Systems collection's bulk (49,152 of the P4 pod's 49,352), and an
// expanded page of them cost a map each and its encoding. Its power and
// boot parts are written by appendBoot and appendReset, which composed
// systems' maps carry too. A GET of a host and a page write the same
// bytes (appendHost), in encoding/json's key order.

import (
	"net/http"
	"strconv"

	"rackpool/internal/inventory"
	"rackpool/internal/odata"
	"rackpool/internal/redfish/service"
)

// appendHost appends host h's system as r's client sees it.
func (s *Service) appendHost(w []byte, r *http.Request, h *inventory.Host) []byte {
	st := s.mgr.BlockStatus(h.ID)
	ps, powered := s.powerOf(r.Context(), h.ID)

	w = append(w, `{"@odata.id":`...)
	w = odata.AppendJoined(w, "/redfish/v1/Systems/", h.ID)
	w = append(w, `,"@odata.type":"#ComputerSystem.v1_22_0.ComputerSystem"`...)
	if powered {
		w = append(w, `,"Actions":{"#ComputerSystem.Reset":`...)
		w = appendReset(w, h.ID, ps)
		w = append(w, `},"Boot":`...)
		w = appendBoot(w, h.ID, ps)
	}
	w = append(w, `,"EthernetInterfaces":{"@odata.id":`...)
	w = odata.AppendJoined(w, "/redfish/v1/Systems/", h.ID, "/EthernetInterfaces")
	w = append(w, `},"Id":`...)
	w = odata.AppendString(w, h.ID)
	w = append(w, `,"Links":{"Chassis":[{"@odata.id":`...)
	w = odata.AppendJoined(w, "/redfish/v1/Chassis/", h.Rack)
	w = append(w, `}],"ResourceBlocks":[{"@odata.id":`...)
	w = odata.AppendJoined(w, service.BlocksPath, h.ID)
	w = append(w, `}]},"Memory":{"@odata.id":`...)
	w = odata.AppendJoined(w, "/redfish/v1/Systems/", h.ID, "/Memory")
	w = append(w, `},"MemorySummary":{"TotalSystemMemoryGiB":`...)
	w = strconv.AppendInt(w, int64(h.MemoryGiB), 10)
	w = append(w, `},"Name":`...)
	w = odata.AppendJoined(w, "Host ", h.ID)
	w = append(w, `,"Oem":{"Rackpool":{"@odata.type":`...)
	w = odata.AppendJoined(w, "#", service.OemNamespace, ".ComputerSystem")
	w = append(w, `,"ComposedInto":`...)
	w = odata.AppendStrings(w, service.NonNil(s.visibleSystems(service.Principal(r), st.Compositions)))
	w = append(w, `}}`...)
	if powered {
		w = append(w, `,"PowerState":`...)
		w = odata.AppendString(w, powerState(ps))
	}
	w = append(w, `,"ProcessorSummary":{"CoreCount":`...)
	w = strconv.AppendInt(w, int64(h.Cores), 10)
	w = append(w, `,"Count":1},"Processors":{"@odata.id":`...)
	w = odata.AppendJoined(w, "/redfish/v1/Systems/", h.ID, "/Processors")
	w = append(w, `},"Status":{"Health":"OK","State":"Enabled"},"Storage":{"@odata.id":`...)
	w = odata.AppendJoined(w, "/redfish/v1/Systems/", h.ID, "/Storage")
	return append(w, `},"SystemType":"Physical"}`...)
}
