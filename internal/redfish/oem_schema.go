package redfish

import (
	_ "embed"
	"net/http"

	"rackpool/internal/redfish/service"
)

// schemaRoutes are the routes of the Oem schema file (routes.go).
var schemaRoutes = []route{
	{"GET /redfish/v1/Schemas/Rackpool_v1.xml", public, (*Server).getRackpoolSchema},
}

// The OEM schema: every object under Oem.Rackpool carries an @odata.type
// naming a complex type of schemas/Rackpool_v1.xml, which the service
// serves (public, like $metadata) and references from $metadata, so
// generic Redfish clients and the DMTF validators can check OEM properties
// as they check standard ones. A property added under Oem.Rackpool must be
// declared there too (scripts/conformance.sh fails undeclared ones).

//go:embed schemas/Rackpool_v1.xml
var rackpoolSchema []byte

const (
	// rackpoolSchemaURI is where the OEM CSDL is served.
	rackpoolSchemaURI = "/redfish/v1/Schemas/Rackpool_v1.xml"
	// rackpoolOemNamespace is the versioned namespace of the OEM types.
	rackpoolOemNamespace = service.OemNamespace
)

// rackpoolOem returns the Oem property {"Rackpool": props} with props typed
// as the OEM complex type typ (ResourceBlock, Chassis, ...).
func rackpoolOem(typ string, props map[string]any) map[string]any {
	return service.RackpoolOem(typ, props)
}

func (s *Server) getRackpoolSchema(w http.ResponseWriter, r *http.Request) error {
	w.Header().Set("Content-Type", "application/xml")
	w.Header().Set("OData-Version", "4.0")
	_, err := w.Write(rackpoolSchema)
	return err
}
