package discover

// The Redfish properties Walk reads, decoded strictly: a property of the
// wrong type is an error naming it; properties not listed here are ignored.
// Numbers are float64 because Redfish allows 1e12 where an integer is
// meant. Links are odataLink so that a link without @odata.id is caught
// (links) with the property's name.

type odataLink struct {
	ID *string `json:"@odata.id"`
}

type resource struct {
	ODataID   string `json:"@odata.id"`
	ODataType string `json:"@odata.type"`
	ID        string `json:"Id"`
	Name      string `json:"Name"`
}

type statusBody struct {
	State  string `json:"State"`
	Health string `json:"Health"`
}

type collectionBody struct {
	resource
	Members  []odataLink `json:"Members"`
	Count    *float64    `json:"Members@odata.count"`
	NextLink string      `json:"Members@odata.nextLink"`
}

type serviceRootBody struct {
	resource
	Vendor             string     `json:"Vendor"`
	Product            string     `json:"Product"`
	RedfishVersion     string     `json:"RedfishVersion"`
	Fabrics            *odataLink `json:"Fabrics"`
	ResourceBlocks     *odataLink `json:"ResourceBlocks"`
	CompositionService *odataLink `json:"CompositionService"`
	Systems            *odataLink `json:"Systems"`
}

type compositionServiceBody struct {
	resource
	ResourceBlocks *odataLink `json:"ResourceBlocks"`
}

type resourceBlockBody struct {
	resource
	ResourceBlockType  []string    `json:"ResourceBlockType"`
	Status             statusBody  `json:"Status"`
	Processors         []odataLink `json:"Processors"`
	Memory             []odataLink `json:"Memory"`
	Drives             []odataLink `json:"Drives"`
	Storage            []odataLink `json:"Storage"`
	EthernetInterfaces []odataLink `json:"EthernetInterfaces"`
	NetworkInterfaces  []odataLink `json:"NetworkInterfaces"`
	ComputerSystems    []odataLink `json:"ComputerSystems"`
}

type storageBody struct {
	resource
	Drives []odataLink `json:"Drives"`
}

type composedSystemBody struct {
	resource
	SystemType string `json:"SystemType"`
	Links      struct {
		ResourceBlocks []odataLink `json:"ResourceBlocks"`
	} `json:"Links"`
}

type fabricBody struct {
	resource
	FabricType     string     `json:"FabricType"`
	Status         statusBody `json:"Status"`
	Switches       *odataLink `json:"Switches"`
	Endpoints      *odataLink `json:"Endpoints"`
	Zones          *odataLink `json:"Zones"`
	Connections    *odataLink `json:"Connections"`
	EndpointGroups *odataLink `json:"EndpointGroups"`
}

type switchBody struct {
	resource
	SwitchType string     `json:"SwitchType"`
	Ports      *odataLink `json:"Ports"`
}

type portBody struct {
	resource
	PortID           string   `json:"PortId"`
	PortType         string   `json:"PortType"`
	PortProtocol     string   `json:"PortProtocol"`
	Width            *float64 `json:"Width"`
	CurrentSpeedGbps *float64 `json:"CurrentSpeedGbps"`
	Links            struct {
		AssociatedEndpoints  []odataLink `json:"AssociatedEndpoints"`
		ConnectedPorts       []odataLink `json:"ConnectedPorts"`
		ConnectedSwitchPorts []odataLink `json:"ConnectedSwitchPorts"`
		ConnectedSwitches    []odataLink `json:"ConnectedSwitches"`
	} `json:"Links"`
}

type entityBody struct {
	EntityType string     `json:"EntityType"`
	EntityRole string     `json:"EntityRole"`
	EntityLink *odataLink `json:"EntityLink"`
}

type endpointBody struct {
	resource
	EndpointProtocol  string       `json:"EndpointProtocol"`
	Status            statusBody   `json:"Status"`
	ConnectedEntities []entityBody `json:"ConnectedEntities"`
	Links             struct {
		Ports          []odataLink `json:"Ports"`
		ConnectedPorts []odataLink `json:"ConnectedPorts"`
		Zones          []odataLink `json:"Zones"`
		Connections    []odataLink `json:"Connections"`
	} `json:"Links"`
}

type zoneBody struct {
	resource
	ZoneType string `json:"ZoneType"`
	Links    struct {
		Endpoints []odataLink `json:"Endpoints"`
	} `json:"Links"`
}

type endpointGroupBody struct {
	resource
	Links struct {
		Endpoints []odataLink `json:"Endpoints"`
	} `json:"Links"`
}

type connectionBody struct {
	resource
	ConnectionType  string `json:"ConnectionType"`
	MemoryChunkInfo []struct {
		AccessCapabilities []string   `json:"AccessCapabilities"`
		MemoryChunk        *odataLink `json:"MemoryChunk"`
	} `json:"MemoryChunkInfo"`
	VolumeInfo []struct {
		AccessCapabilities []string   `json:"AccessCapabilities"`
		Volume             *odataLink `json:"Volume"`
	} `json:"VolumeInfo"`
	Links struct {
		InitiatorEndpoints      []odataLink `json:"InitiatorEndpoints"`
		TargetEndpoints         []odataLink `json:"TargetEndpoints"`
		InitiatorEndpointGroups []odataLink `json:"InitiatorEndpointGroups"`
		TargetEndpointGroups    []odataLink `json:"TargetEndpointGroups"`
	} `json:"Links"`
}

// Resources an endpoint's ConnectedEntities link to, read for what they
// say about the device (kind, size, model) or the host (cores, memory).

type systemBody struct {
	resource
	Manufacturer     string `json:"Manufacturer"`
	Model            string `json:"Model"`
	ProcessorSummary struct {
		CoreCount *float64 `json:"CoreCount"`
	} `json:"ProcessorSummary"`
	MemorySummary struct {
		TotalSystemMemoryGiB *float64 `json:"TotalSystemMemoryGiB"`
	} `json:"MemorySummary"`
	Processors *odataLink `json:"Processors"`
}

type processorBody struct {
	resource
	ProcessorType string   `json:"ProcessorType"`
	Manufacturer  string   `json:"Manufacturer"`
	Model         string   `json:"Model"`
	TotalCores    *float64 `json:"TotalCores"`
	MemorySummary struct {
		TotalMemorySizeMiB *float64 `json:"TotalMemorySizeMiB"`
	} `json:"MemorySummary"`
}

type driveBody struct {
	resource
	MediaType     string   `json:"MediaType"`
	Protocol      string   `json:"Protocol"`
	CapacityBytes *float64 `json:"CapacityBytes"`
	Manufacturer  string   `json:"Manufacturer"`
	Model         string   `json:"Model"`
}

type volumeBody struct {
	resource
	CapacityBytes *float64 `json:"CapacityBytes"`
}

type memoryChunkBody struct {
	resource
	MemoryChunkSizeMiB    *float64 `json:"MemoryChunkSizeMiB"`
	AddressRangeOffsetMiB *float64 `json:"AddressRangeOffsetMiB"`
	AddressRangeType      string   `json:"AddressRangeType"`
}

type memoryBody struct {
	resource
	CapacityMiB  *float64 `json:"CapacityMiB"`
	Manufacturer string   `json:"Manufacturer"`
	Model        string   `json:"Model"`
}

type cxlLogicalDeviceBody struct {
	resource
	MemorySizeMiB *float64 `json:"MemorySizeMiB"`
	Links         struct {
		MemoryChunks []odataLink `json:"MemoryChunks"`
	} `json:"Links"`
}

type pcieDeviceBody struct {
	resource
	Manufacturer  string `json:"Manufacturer"`
	Model         string `json:"Model"`
	PCIeInterface struct {
		LanesInUse *float64 `json:"LanesInUse"`
		PCIeType   string   `json:"PCIeType"`
	} `json:"PCIeInterface"`
}

type productBody struct { // NetworkAdapter, NetworkDeviceFunction, Storage, ...
	resource
	Manufacturer string `json:"Manufacturer"`
	Model        string `json:"Model"`
}
