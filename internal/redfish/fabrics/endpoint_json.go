package fabrics

// A host port's endpoint, written as JSON directly: a fabric's endpoints
// are mostly its host ports (49,152 on each plane of the P4 pod), and an
// expanded page of them cost a map and its encoding each (the cable's
// length a float, encoded by reflection). A GET of one and a page write
// the same bytes (appendPortEndpoint), in encoding/json's key order.

import (
	"strings"

	"rackpool/internal/inventory"
	"rackpool/internal/odata"
	"rackpool/internal/redfish/service"
)

// appendPortEndpoint appends the endpoint of host port hp on fabric f. err
// is json.Marshal's for a cable length it cannot encode (NaN); w is then
// unusable.
func appendPortEndpoint(w []byte, f *inventory.Fabric, hp *inventory.HostPort) ([]byte, error) {
	w = append(w, `{"@odata.id":`...)
	w = odata.AppendJoined(w, "/redfish/v1/Fabrics/", f.ID, "/Endpoints/", hp.Host.ID, "-", hp.ID)
	w = append(w, `,"@odata.type":"#Endpoint.v1_8_0.Endpoint","ConnectedEntities":[{"EntityLink":{"@odata.id":`...)
	w = odata.AppendJoined(w, "/redfish/v1/Systems/", hp.Host.ID)
	w = append(w, `},"EntityRole":"Initiator","EntityType":"RootComplex"}],"EndpointProtocol":`...)
	w = odata.AppendString(w, fabricTypes[f.Kind])
	w = append(w, `,"Id":`...)
	w = odata.AppendJoined(w, hp.Host.ID, "-", hp.ID)
	w = append(w, `,"Links":{"ConnectedPorts":[{"@odata.id":`...)
	w = odata.AppendJoined(w, "/redfish/v1/Fabrics/", f.ID, "/Switches/", hp.Switch.ID, "/Ports/", strings.ReplaceAll(hp.Port, "/", "-"))
	w = append(w, `}]},"Name":`...)
	w = odata.AppendJoined(w, "Host port ", hp.ID, " of ", hp.Host.ID)
	w = append(w, `,"Oem":{"Rackpool":{"@odata.type":`...)
	w = odata.AppendJoined(w, "#", service.OemNamespace, ".Endpoint")
	w = append(w, `,"CableMetres":`...)
	w, err := odata.AppendFloat(w, hp.Metres)
	w = append(w, `,"Host":`...)
	w = odata.AppendString(w, hp.Host.ID)
	return append(w, `}},"Status":{"Health":"OK","State":"Enabled"}}`...), err
}
