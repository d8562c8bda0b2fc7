package composition

// A physical host's ComputerSystem, written as JSON directly: hosts are
// the Systems collection's bulk (49,152 of the P4 pod's 49,352), and an
// expanded page of them cost a map each and its encoding. Its power and
// boot parts are addPower's, shared with composed systems, encoded as
// they are. A GET of a host and a page write the same bytes (appendHost),
// in encoding/json's key order.

import (
	"errors"
	"net/http"
	"strconv"

	"rackpool/internal/inventory"
	"rackpool/internal/odata"
	"rackpool/internal/redfish/service"
)

// appendHost appends host h's system as r's client sees it. err is an
// encoding error of its power state's parts.
func (s *Service) appendHost(w []byte, r *http.Request, h *inventory.Host) ([]byte, error) {
	st := s.mgr.BlockStatus(h.ID)
	power := map[string]any{}
	if ps, ok := s.powerOf(r.Context(), h.ID); ok {
		addPower(power, h.ID, ps)
	}
	part := func(w []byte, key string) ([]byte, error) {
		v, ok := power[key]
		if !ok {
			return w, nil
		}
		w = append(w, `,"`...)
		w = append(w, key...)
		w = append(w, `":`...)
		raw, err := odata.Marshal(v)
		return append(w, raw...), err
	}
	var err, e error

	w = append(w, `{"@odata.id":`...)
	w = odata.AppendJoined(w, "/redfish/v1/Systems/", h.ID)
	w = append(w, `,"@odata.type":"#ComputerSystem.v1_22_0.ComputerSystem"`...)
	w, e = part(w, "Actions")
	err = errors.Join(err, e)
	w, e = part(w, "Boot")
	err = errors.Join(err, e)
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
	w = appendStrings(w, service.NonNil(s.visibleSystems(service.Principal(r), st.Compositions)))
	w = append(w, `}}`...)
	w, e = part(w, "PowerState")
	err = errors.Join(err, e)
	w = append(w, `,"ProcessorSummary":{"CoreCount":`...)
	w = strconv.AppendInt(w, int64(h.Cores), 10)
	w = append(w, `,"Count":1},"Processors":{"@odata.id":`...)
	w = odata.AppendJoined(w, "/redfish/v1/Systems/", h.ID, "/Processors")
	w = append(w, `},"Status":{"Health":"OK","State":"Enabled"},"Storage":{"@odata.id":`...)
	w = odata.AppendJoined(w, "/redfish/v1/Systems/", h.ID, "/Storage")
	return append(w, `},"SystemType":"Physical"}`...), err
}
