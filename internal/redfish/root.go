package redfish

import (
	"net/http"

	"rackpool/internal/odata"
	"rackpool/internal/redfish/telemetryservice"
	"rackpool/internal/rf"
)

// serviceRoutes are the routes of the service root and the OData
// documents (routes.go).
var serviceRoutes = []route{
	{"GET /redfish", public, (*Server).getVersions},
	{"GET /redfish/v1", public, (*Server).getServiceRoot},
	{"GET /redfish/v1/{$}", public, (*Server).getServiceRoot},
	{"GET /redfish/v1/$metadata", public, (*Server).getMetadata},
	{"GET /redfish/v1/odata", public, (*Server).getOData},
}

func (s *Server) getVersions(w http.ResponseWriter, r *http.Request) error {
	writeJSON(w, http.StatusOK, map[string]string{"v1": "/redfish/v1/"})
	return nil
}

func (s *Server) getServiceRoot(w http.ResponseWriter, r *http.Request) error {
	root := map[string]any{
		"@odata.id":          "/redfish/v1",
		"@odata.type":        "#ServiceRoot.v1_17_0.ServiceRoot",
		"Id":                 "RootService",
		"Name":               "rackpool Root Service",
		"RedfishVersion":     "1.21.0",
		"UUID":               s.uuid,
		"Product":            "rackpool",
		"Vendor":             "rackpool",
		"Systems":            ref("/redfish/v1/Systems"),
		"Chassis":            ref("/redfish/v1/Chassis"),
		"Fabrics":            ref("/redfish/v1/Fabrics"),
		"CompositionService": ref("/redfish/v1/CompositionService"),
		"SessionService":     ref("/redfish/v1/SessionService"),
		"AccountService":     ref("/redfish/v1/AccountService"),
		"EventService":       ref("/redfish/v1/EventService"),
		"Tasks":              ref("/redfish/v1/TaskService"), // ServiceRoot's name for the TaskService link
		"Managers":           ref("/redfish/v1/Managers"),
		"Links":              map[string]any{"Sessions": ref("/redfish/v1/SessionService/Sessions")},
		"ProtocolFeaturesSupported": map[string]any{
			// What package odata implements.
			"ExcerptQuery": false, "OnlyMemberQuery": true, "SelectQuery": true,
			"ExpandQuery": map[string]any{"ExpandAll": true, "Levels": true, "Links": true, "NoLinks": true,
				"MaxLevels": odata.MaxExpandLevels},
			"FilterQuery": true, "FilterQueryComparisonOperations": true, "FilterQueryCompoundOperations": true, "TopSkipQuery": true,
		},
		"Oem": rackpoolOem("ServiceRoot", map[string]any{"Topology": ref("/redfish/v1/Oem/Rackpool/Topology")}),
	}
	if s.tel != nil {
		root["TelemetryService"] = ref(telemetryservice.Path)
	}
	writeJSON(w, http.StatusOK, root)
	return nil
}

// metadataNamespaces lists the schemas the service uses, for $metadata.
var metadataNamespaces = []rf.SchemaRef{
	{Namespace: "ServiceRoot", Version: "v1_17_0"},
	{Namespace: "ComputerSystemCollection"},
	{Namespace: "ComputerSystem", Version: "v1_22_0"},
	{Namespace: "BootOptionCollection"},
	{Namespace: "BootOption", Version: "v1_0_6"},
	{Namespace: "ProcessorCollection"},
	{Namespace: "Processor", Version: "v1_22_0"},
	{Namespace: "MemoryCollection"},
	{Namespace: "Memory", Version: "v1_23_0"},
	{Namespace: "StorageCollection"},
	{Namespace: "StorageControllerCollection"},
	{Namespace: "StorageController", Version: "v1_11_0"},
	{Namespace: "Storage", Version: "v1_21_0"},
	{Namespace: "EthernetInterfaceCollection"},
	{Namespace: "EthernetInterface", Version: "v1_12_0"},
	{Namespace: "DriveCollection"},
	{Namespace: "Drive", Version: "v1_22_0"},
	{Namespace: "ChassisCollection"},
	{Namespace: "Chassis", Version: "v1_25_0"},
	{Namespace: "CompositionService", Version: "v1_2_0"},
	{Namespace: "ResourceBlockCollection"},
	{Namespace: "ResourceBlock", Version: "v1_4_0"},
	{Namespace: "ZoneCollection"},
	{Namespace: "Zone", Version: "v1_6_0"},
	{Namespace: "FabricCollection"},
	{Namespace: "Fabric", Version: "v1_3_0"},
	{Namespace: "SwitchCollection"},
	{Namespace: "Switch", Version: "v1_9_0"},
	{Namespace: "PortCollection"},
	{Namespace: "Port", Version: "v1_11_0"},
	{Namespace: "EndpointCollection"},
	{Namespace: "Endpoint", Version: "v1_8_0"},
	{Namespace: "SessionService", Version: "v1_1_8"},
	{Namespace: "SessionCollection"},
	{Namespace: "Session", Version: "v1_7_0"},
	{Namespace: "CollectionCapabilities", Version: "v1_4_0"},
	{Namespace: "Message", Version: "v1_1_1"},
	{Namespace: "Resource", Version: "v1_19_0"},
	{Namespace: "AccountService", Version: "v1_15_0"},
	{Namespace: "ManagerAccountCollection"},
	{Namespace: "ManagerAccount", Version: "v1_12_0"},
	{Namespace: "RoleCollection"},
	{Namespace: "Role", Version: "v1_3_0"},
	{Namespace: "CompositionReservationCollection"},
	{Namespace: "CompositionReservation", Version: "v1_0_0"},
	{Namespace: "ActionInfo", Version: "v1_3_0"},
	{Namespace: "Manifest", Version: "v1_1_0"},
	{Namespace: "TaskService", Version: "v1_2_0"},
	{Namespace: "TaskCollection"},
	{Namespace: "Task", Version: "v1_7_0"},
	{Namespace: "EventService", Version: "v1_10_0"},
	{Namespace: "EventDestinationCollection"},
	{Namespace: "EventDestination", Version: "v1_14_0"},
	{Namespace: "Event", Version: "v1_9_0"},
	{Namespace: "ManagerCollection"},
	{Namespace: "Manager", Version: "v1_19_0"},
	{Namespace: "LogServiceCollection"},
	{Namespace: "LogService", Version: "v1_5_0"},
	{Namespace: "LogEntryCollection"},
	{Namespace: "LogEntry", Version: "v1_15_0"},
	{Namespace: "EthernetInterfaceCollection"},
	{Namespace: "EthernetInterface", Version: "v1_12_4"},
	{Namespace: "IPAddresses", Version: "v1_1_5"},
	{Namespace: "ManagerNetworkProtocol", Version: "v1_12_0"},
	{Namespace: "ConnectionCollection"},
	{Namespace: "PCIeDeviceCollection"},
	{Namespace: "PCIeDevice", Version: "v1_21_0"},
	{Namespace: "PCIeFunctionCollection"},
	{Namespace: "PCIeFunction", Version: "v1_7_0"},
	{Namespace: "CXLLogicalDeviceCollection"},
	{Namespace: "CXLLogicalDevice", Version: "v1_3_0"},
	{Namespace: "MemoryDomainCollection"},
	{Namespace: "MemoryDomain", Version: "v1_5_1"},
	{Namespace: "MemoryChunksCollection"},
	{Namespace: "MemoryChunks", Version: "v1_6_2"},
	{Namespace: "Connection", Version: "v1_3_0"},
	{Namespace: "TelemetryService", Version: "v1_4_1"},
	{Namespace: "MetricDefinitionCollection"},
	{Namespace: "MetricDefinition", Version: "v1_3_5"},
	{Namespace: "MetricReportDefinitionCollection"},
	{Namespace: "MetricReportDefinition", Version: "v1_4_7"},
	{Namespace: "MetricReportCollection"},
	{Namespace: "MetricReport", Version: "v1_5_2"},
}

func (s *Server) getMetadata(w http.ResponseWriter, r *http.Request) error {
	// The OEM schema (oem_schema.go) is served by the service itself.
	return rf.WriteMetadata(w, metadataNamespaces, rackpoolSchemaURI, []string{"Rackpool", rackpoolOemNamespace, "RackpoolTopology", "RackpoolTopology.v1_0_0",
		"RackpoolTenantCollection", "RackpoolTenant", "RackpoolTenant.v1_0_0"})
}

func (s *Server) getOData(w http.ResponseWriter, r *http.Request) error {
	var value []map[string]string
	for _, n := range []string{"Systems", "Chassis", "Fabrics", "CompositionService", "SessionService", "AccountService",
		"EventService", "TaskService", "Managers"} {
		value = append(value, map[string]string{"name": n, "kind": "Singleton", "url": "/redfish/v1/" + n})
	}
	if s.tel != nil {
		value = append(value, map[string]string{"name": "TelemetryService", "kind": "Singleton", "url": telemetryservice.Path})
	}
	value = append([]map[string]string{{"name": "Service", "kind": "Singleton", "url": "/redfish/v1/"}}, value...)
	writeJSON(w, http.StatusOK, map[string]any{"@odata.context": "/redfish/v1/$metadata", "value": value})
	return nil
}
