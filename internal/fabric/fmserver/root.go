package fmserver

import (
	_ "embed"
	"net/http"

	"rackpool/internal/rf"
)

// serviceRoutes are the routes of the service root and the OData
// documents, all public.
var serviceRoutes = []route{
	{"GET /redfish", public, (*Server).getVersions},
	{"GET /redfish/v1", public, (*Server).getServiceRoot},
	{"GET /redfish/v1/{$}", public, (*Server).getServiceRoot},
	{"GET /redfish/v1/$metadata", public, (*Server).getMetadata},
	{"GET /redfish/v1/odata", public, (*Server).getOData},
	{"GET /redfish/v1/Schemas/Rackpool_v1.xml", public, (*Server).getSchema},
}

// The OEM schema declares the fault-injection actions and the Fabric's
// Oem.Rackpool object, so the DMTF validator checks them like standard
// properties. It is served here and referenced from $metadata.
//
//go:embed schemas/Rackpool_v1.xml
var oemSchema []byte

const oemSchemaURI = "/redfish/v1/Schemas/Rackpool_v1.xml"

func (s *Server) getVersions(w http.ResponseWriter, r *http.Request) error {
	rf.WriteJSON(w, http.StatusOK, map[string]string{"v1": "/redfish/v1/"})
	return nil
}

func (s *Server) getServiceRoot(w http.ResponseWriter, r *http.Request) error {
	rf.WriteJSON(w, http.StatusOK, map[string]any{
		"@odata.id":      "/redfish/v1",
		"@odata.type":    "#ServiceRoot.v1_17_0.ServiceRoot",
		"Id":             "RootService",
		"Name":           "rackpool fabric manager (emulated " + string(s.fab.Kind) + " fabric " + s.fab.ID + ")",
		"RedfishVersion": "1.21.0",
		"UUID":           s.uuid,
		"Product":        "rackpool fabric-emulator",
		"Vendor":         "rackpool",
		"Fabrics":        ref("/redfish/v1/Fabrics"),
		"Systems":        ref("/redfish/v1/Systems"),
		"Chassis":        ref("/redfish/v1/Chassis"),
		"SessionService": ref("/redfish/v1/SessionService"),
		"Tasks":          ref("/redfish/v1/TaskService"),
		"Links":          map[string]any{"Sessions": ref("/redfish/v1/SessionService/Sessions")},
		"ProtocolFeaturesSupported": map[string]any{
			"ExcerptQuery": false, "OnlyMemberQuery": false, "SelectQuery": false, "FilterQuery": false,
			"ExpandQuery": map[string]any{"ExpandAll": false, "Levels": false, "Links": false, "NoLinks": false},
		},
	})
	return nil
}

// metadataNamespaces lists the schemas the server uses, for $metadata.
var metadataNamespaces = []rf.SchemaRef{
	{Namespace: "ServiceRoot", Version: "v1_17_0"},
	{Namespace: "SessionService", Version: "v1_1_8"},
	{Namespace: "SessionCollection"},
	{Namespace: "Session", Version: "v1_7_0"},
	{Namespace: "TaskService", Version: "v1_2_0"},
	{Namespace: "TaskCollection"},
	{Namespace: "Task", Version: "v1_7_0"},
	{Namespace: "FabricCollection"},
	{Namespace: "Fabric", Version: "v1_3_0"},
	{Namespace: "SwitchCollection"},
	{Namespace: "Switch", Version: "v1_9_0"},
	{Namespace: "PortCollection"},
	{Namespace: "Port", Version: "v1_11_0"},
	{Namespace: "EndpointCollection"},
	{Namespace: "Endpoint", Version: "v1_8_0"},
	{Namespace: "ZoneCollection"},
	{Namespace: "Zone", Version: "v1_6_0"},
	{Namespace: "ConnectionCollection"},
	{Namespace: "Connection", Version: "v1_3_0"},
	{Namespace: "ComputerSystemCollection"},
	{Namespace: "ComputerSystem", Version: "v1_22_0"},
	{Namespace: "ChassisCollection"},
	{Namespace: "Chassis", Version: "v1_25_0"},
	{Namespace: "MemoryDomainCollection"},
	{Namespace: "MemoryDomain", Version: "v1_5_1"},
	{Namespace: "MemoryChunksCollection"},
	{Namespace: "MemoryChunks", Version: "v1_6_2"},
	{Namespace: "Message", Version: "v1_1_1"},
	{Namespace: "Resource", Version: "v1_19_0"},
}

func (s *Server) getMetadata(w http.ResponseWriter, r *http.Request) error {
	return rf.WriteMetadata(w, metadataNamespaces, oemSchemaURI, []string{"Rackpool", "Rackpool.v1_0_0"})
}

func (s *Server) getOData(w http.ResponseWriter, r *http.Request) error {
	value := []map[string]string{{"name": "Service", "kind": "Singleton", "url": "/redfish/v1/"}}
	for _, n := range []string{"Fabrics", "Systems", "Chassis", "SessionService", "TaskService"} {
		value = append(value, map[string]string{"name": n, "kind": "Singleton", "url": "/redfish/v1/" + n})
	}
	rf.WriteJSON(w, http.StatusOK, map[string]any{"@odata.context": "/redfish/v1/$metadata", "value": value})
	return nil
}

func (s *Server) getSchema(w http.ResponseWriter, r *http.Request) error {
	w.Header().Set("Content-Type", "application/xml")
	w.Header().Set("OData-Version", "4.0")
	_, err := w.Write(oemSchema)
	return err
}
