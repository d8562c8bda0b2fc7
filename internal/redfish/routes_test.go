package redfish_test

import (
	"context"
	"encoding/json"
	"net/http"
	"rackpool/internal/redfish"
	"rackpool/internal/tenancy"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// route is one registered route, from the service's own table, so that a
// route added without a test here fails TestEveryGETRoute.
type route struct {
	method, pattern, privilege string
}

func routes(t *testing.T) []route {
	t.Helper()
	var out []route
	for _, r := range redfish.Routes() {
		method, pattern, ok := strings.Cut(r.Pattern, " ")
		if !ok {
			t.Fatalf("route %q has no method", r.Pattern)
		}
		out = append(out, route{method: method, pattern: pattern, privilege: r.Privilege})
	}
	return out
}

// concrete fills a pattern's wildcards with "x".
func concrete(pattern string) string {
	pattern = strings.ReplaceAll(pattern, "{$}", "")
	return regexp.MustCompile(`\{[^}]+\}`).ReplaceAllString(pattern, "x")
}

// resources are the GET routes that are not Redfish resources and so carry
// no @odata.id of their own: the version document, the OData service
// document and CSDL, and the Oem topology document (which has the shape
// of api.TopologyView).
var notResources = []string{"/redfish", "/redfish/v1/$metadata", "/redfish/v1/odata"}

// TestEveryGETRoute: each GET route answers 200 with its own @odata.id
// for real IDs and a Redfish 404 for unknown ones.
func TestEveryGETRoute(t *testing.T) {
	s := newService(t)
	_, session := s.login()
	sys := s.compose(specificBody("host1", "gpu1", "memnode2-b01", "hdd1", "nic1"))
	f := "/redfish/v1/Fabrics/"
	// One of everything a GET route can name.
	if _, err := s.auth.CreateTenant(context.Background(), tenancy.Tenant{ID: "blue"}); err != nil {
		t.Fatal(err)
	}
	s.startMemnode(16 << 20)
	s.must(http.StatusOK, "POST", "/redfish/v1/Oem/Rackpool/BlockNodes", map[string]any{"Host": "host4", "Endpoint": "127.0.0.1:10809", "Epoch": 1}, admin)
	s.drives.Step(context.Background())
	lease := s.must(http.StatusCreated, "POST", memoryLeases, map[string]any{"CapacityBytes": 8192, "Host": "host1"}, admin).json(t)["Id"].(string)
	s.must(http.StatusOK, "POST", composeAction, manifestBody("PreviewReserve", stanzaBody("r", specificBody("host2", "gpu2"))), admin)
	s.must(http.StatusAccepted, "POST", "/redfish/v1/Systems", specificBody("host3", "gpu3"), cred{basic: true, hdr: map[string]string{"Prefer": "respond-async"}})
	s.must(http.StatusCreated, "POST", "/redfish/v1/EventService/Subscriptions", map[string]any{"Destination": newSink(t, make(chan string, 256))}, admin)
	s.must(http.StatusCreated, "POST", "/redfish/v1/Oem/Rackpool/Provisioning", map[string]any{"System": sys, "Mode": "DryRun"}, admin)
	first := func(collection string) string {
		t.Helper()
		members := list(t, s.get(collection)["Members"])
		if len(members) == 0 {
			t.Fatalf("%s is empty", collection)
		}
		id := members[0].(map[string]any)["@odata.id"].(string)
		return id[strings.LastIndex(id, "/")+1:]
	}
	reservation := first("/redfish/v1/CompositionService/CompositionReservations")
	task := first("/redfish/v1/TaskService/Tasks")
	subscription := first("/redfish/v1/EventService/Subscriptions")
	logs := "/redfish/v1/Managers/rackpool/LogServices/"
	auditEntry := first(logs + "Audit/Entries")
	eventEntry := first(logs + "Events/Entries")
	type paths struct {
		valid, unknown []string
		// raw: the answer is no JSON resource (a schema file, metrics
		// text, a task monitor's result); only its status is checked.
		raw bool
		// elsewhere names the test that covers a route this one cannot
		// (a stream that does not end).
		elsewhere string
	}
	table := map[string]paths{
		"/redfish/v1/Schemas/Rackpool_v1.xml":             {valid: []string{"/redfish/v1/Schemas/Rackpool_v1.xml"}, raw: true},
		"/redfish/v1/AccountService":                      {valid: []string{"/redfish/v1/AccountService"}},
		"/redfish/v1/AccountService/Accounts":             {valid: []string{"/redfish/v1/AccountService/Accounts"}},
		"/redfish/v1/AccountService/Accounts/{id}":        {valid: []string{"/redfish/v1/AccountService/Accounts/Administrator"}, unknown: []string{"/redfish/v1/AccountService/Accounts/nobody"}},
		"/redfish/v1/AccountService/Roles":                {valid: []string{"/redfish/v1/AccountService/Roles"}},
		"/redfish/v1/AccountService/Roles/{id}":           {valid: []string{"/redfish/v1/AccountService/Roles/Operator"}, unknown: []string{"/redfish/v1/AccountService/Roles/Root"}},
		"/redfish/v1/AccountService/Oem/Rackpool/Tenants": {valid: []string{"/redfish/v1/AccountService/Oem/Rackpool/Tenants"}},
		"/redfish/v1/AccountService/Oem/Rackpool/Tenants/{id}": {
			valid: []string{"/redfish/v1/AccountService/Oem/Rackpool/Tenants/blue"}, unknown: []string{"/redfish/v1/AccountService/Oem/Rackpool/Tenants/nope"}},
		"/redfish/v1/CompositionService/FreePool":                {valid: []string{"/redfish/v1/CompositionService/FreePool"}},
		"/redfish/v1/CompositionService/ActivePool":              {valid: []string{"/redfish/v1/CompositionService/ActivePool"}},
		"/redfish/v1/CompositionService/CompositionReservations": {valid: []string{"/redfish/v1/CompositionService/CompositionReservations"}},
		"/redfish/v1/CompositionService/CompositionReservations/{id}": {
			valid:   []string{"/redfish/v1/CompositionService/CompositionReservations/" + reservation},
			unknown: []string{"/redfish/v1/CompositionService/CompositionReservations/res-000000000000", "/redfish/v1/CompositionService/CompositionReservations/" + sys}},
		"/redfish/v1/CompositionService/ComposeActionInfo": {valid: []string{"/redfish/v1/CompositionService/ComposeActionInfo"}},
		"/redfish/v1/Fabrics/{id}/Connections":             {valid: []string{f + "falcon1/Connections"}, unknown: []string{f + "nofab/Connections"}},
		"/redfish/v1/Fabrics/{id}/Connections/{conn}": {
			valid: []string{f + "falcon1/Connections/" + sys}, unknown: []string{f + "falcon1/Connections/sys-000000000000", f + "nofab/Connections/" + sys}},
		"/redfish/v1/Oem/Rackpool/MemoryNodes":       {valid: []string{memoryNodes}},
		"/redfish/v1/Oem/Rackpool/MemoryNodes/{id}":  {valid: []string{memoryNodes + "/memnode1"}, unknown: []string{memoryNodes + "/memnode9"}},
		"/redfish/v1/Oem/Rackpool/MemoryLeases":      {valid: []string{memoryLeases}},
		"/redfish/v1/Oem/Rackpool/MemoryLeases/{id}": {valid: []string{memoryLeases + "/" + lease}, unknown: []string{memoryLeases + "/nope"}},
		"/redfish/v1/Oem/Rackpool/BlockNodes":        {valid: []string{"/redfish/v1/Oem/Rackpool/BlockNodes"}},
		"/redfish/v1/Oem/Rackpool/BlockNodes/{id}":   {valid: []string{"/redfish/v1/Oem/Rackpool/BlockNodes/host4"}, unknown: []string{"/redfish/v1/Oem/Rackpool/BlockNodes/host1"}},
		"/redfish/v1/Oem/Rackpool/Provisioning":      {valid: []string{"/redfish/v1/Oem/Rackpool/Provisioning"}},
		"/redfish/v1/Oem/Rackpool/Provisioning/{id}": {valid: []string{"/redfish/v1/Oem/Rackpool/Provisioning/" + sys}, unknown: []string{"/redfish/v1/Oem/Rackpool/Provisioning/sys-000000000000"}},
		"/redfish/v1/Oem/Rackpool/Drives":            {valid: []string{"/redfish/v1/Oem/Rackpool/Drives"}},
		"/redfish/v1/Oem/Rackpool/Drives/{id}":       {valid: []string{"/redfish/v1/Oem/Rackpool/Drives/hdd1", "/redfish/v1/Oem/Rackpool/Drives/ssd8"}, unknown: []string{"/redfish/v1/Oem/Rackpool/Drives/gpu1", "/redfish/v1/Oem/Rackpool/Drives/hdd99"}},
		// CXL devices are not in the default rack: TestCXLRedfish serves
		// examples/cxl-rack.yaml and walks every one of these routes.
		"/redfish/v1/Chassis/{id}/PCIeDevices": {
			valid:   []string{"/redfish/v1/Chassis/falcon1-drawer1/PCIeDevices", "/redfish/v1/Chassis/falcon1-drawer2/PCIeDevices"},
			unknown: []string{"/redfish/v1/Chassis/rack1/PCIeDevices", "/redfish/v1/Chassis/sas1/PCIeDevices"}},
		"/redfish/v1/Oem/Rackpool/HostAgents/{host}/Steps": {elsewhere: "TestHostAgentSteps"},
		"/redfish/v1/Chassis/{id}/PCIeDevices/{dev}": {
			valid:   []string{"/redfish/v1/Chassis/falcon1-drawer1/PCIeDevices/gpu1", "/redfish/v1/Chassis/falcon1-drawer2/PCIeDevices/nvme3"},
			unknown: []string{"/redfish/v1/Chassis/falcon1-drawer1/PCIeDevices/gpu5", "/redfish/v1/Chassis/falcon1-drawer1/PCIeDevices/1"}},
		"/redfish/v1/Chassis/{id}/PCIeDevices/{dev}/CXLLogicalDevices":      {elsewhere: "TestCXLRedfish"},
		"/redfish/v1/Chassis/{id}/PCIeDevices/{dev}/CXLLogicalDevices/{ld}": {elsewhere: "TestCXLRedfish"},
		"/redfish/v1/Chassis/{id}/MemoryDomains":                            {elsewhere: "TestCXLRedfish"},
		"/redfish/v1/Chassis/{id}/MemoryDomains/{dom}":                      {elsewhere: "TestCXLRedfish"},
		"/redfish/v1/Chassis/{id}/MemoryDomains/{dom}/MemoryChunks":         {elsewhere: "TestCXLRedfish"},
		"/redfish/v1/Chassis/{id}/MemoryDomains/{dom}/MemoryChunks/{chunk}": {elsewhere: "TestCXLRedfish"},
		"/redfish/v1/TaskService":                                           {valid: []string{"/redfish/v1/TaskService"}},
		"/redfish/v1/TaskService/Tasks":                                     {valid: []string{"/redfish/v1/TaskService/Tasks"}},
		"/redfish/v1/TaskService/Tasks/{id}":                                {valid: []string{"/redfish/v1/TaskService/Tasks/" + task}, unknown: []string{"/redfish/v1/TaskService/Tasks/nope"}},
		"/redfish/v1/TaskService/TaskMonitors/{id}":                         {valid: []string{"/redfish/v1/TaskService/TaskMonitors/" + task}, unknown: []string{"/redfish/v1/TaskService/TaskMonitors/nope"}, raw: true},
		"/redfish/v1/EventService":                                          {valid: []string{"/redfish/v1/EventService"}},
		"/redfish/v1/EventService/SSE":                                      {elsewhere: "TestEventsSSEAndPush"},
		"/redfish/v1/EventService/Subscriptions":                            {valid: []string{"/redfish/v1/EventService/Subscriptions"}},
		"/redfish/v1/EventService/Subscriptions/{id}":                       {valid: []string{"/redfish/v1/EventService/Subscriptions/" + subscription}, unknown: []string{"/redfish/v1/EventService/Subscriptions/nope"}},
		"/metrics":                                                      {valid: []string{"/metrics"}, raw: true},
		"/redfish/v1/Managers":                                          {valid: []string{"/redfish/v1/Managers"}},
		"/redfish/v1/Managers/rackpool":                                 {valid: []string{"/redfish/v1/Managers/rackpool"}, unknown: []string{"/redfish/v1/Managers/bmc"}},
		"/redfish/v1/Managers/rackpool/LogServices":                     {valid: []string{logs[:len(logs)-1]}},
		"/redfish/v1/Managers/rackpool/LogServices/Audit":               {valid: []string{logs + "Audit"}},
		"/redfish/v1/Managers/rackpool/LogServices/Audit/Entries":       {valid: []string{logs + "Audit/Entries"}},
		"/redfish/v1/Managers/rackpool/LogServices/Audit/Entries/{id}":  {valid: []string{logs + "Audit/Entries/" + auditEntry}, unknown: []string{logs + "Audit/Entries/999999", logs + "Audit/Entries/x"}},
		"/redfish/v1/Managers/rackpool/LogServices/Events":              {valid: []string{logs + "Events"}},
		"/redfish/v1/Managers/rackpool/LogServices/Events/Entries":      {valid: []string{logs + "Events/Entries"}},
		"/redfish/v1/Managers/rackpool/LogServices/Events/Entries/{id}": {valid: []string{logs + "Events/Entries/" + eventEntry}, unknown: []string{logs + "Events/Entries/99999999999", logs + "Events/Entries/x"}},
		// The harness's server listens on 127.0.0.1: its interfaces are
		// loopback's alone (TestManagerNetwork).
		"/redfish/v1/Managers/rackpool/EthernetInterfaces":      {valid: []string{"/redfish/v1/Managers/rackpool/EthernetInterfaces"}},
		"/redfish/v1/Managers/rackpool/EthernetInterfaces/{id}": {valid: []string{"/redfish/v1/Managers/rackpool/EthernetInterfaces/" + loopbackName(t)}, unknown: []string{"/redfish/v1/Managers/rackpool/EthernetInterfaces/nope0"}},
		"/redfish/v1/Managers/rackpool/NetworkProtocol":         {valid: []string{"/redfish/v1/Managers/rackpool/NetworkProtocol"}},
		"/redfish":                            {valid: []string{"/redfish"}},
		"/redfish/v1":                         {valid: []string{"/redfish/v1"}},
		"/redfish/v1/{$}":                     {valid: []string{"/redfish/v1/"}},
		"/redfish/v1/$metadata":               {valid: []string{"/redfish/v1/$metadata"}},
		"/redfish/v1/odata":                   {valid: []string{"/redfish/v1/odata"}},
		"/redfish/v1/SessionService":          {valid: []string{"/redfish/v1/SessionService"}},
		"/redfish/v1/SessionService/Sessions": {valid: []string{"/redfish/v1/SessionService/Sessions"}},
		"/redfish/v1/SessionService/Sessions/{id}": {
			valid: []string{"/redfish/v1/SessionService/Sessions/" + session}, unknown: []string{"/redfish/v1/SessionService/Sessions/nope"}},
		"/redfish/v1/Systems": {valid: []string{"/redfish/v1/Systems", "/redfish/v1/Systems/"}},
		"/redfish/v1/Systems/{id}": {
			valid:   []string{"/redfish/v1/Systems/host1", "/redfish/v1/Systems/host4", "/redfish/v1/Systems/" + sys},
			unknown: []string{"/redfish/v1/Systems/host9", "/redfish/v1/Systems/sys-000000000000"}},
		"/redfish/v1/CompositionService":                {valid: []string{"/redfish/v1/CompositionService"}},
		"/redfish/v1/CompositionService/ResourceBlocks": {valid: []string{"/redfish/v1/CompositionService/ResourceBlocks"}},
		"/redfish/v1/CompositionService/ResourceBlocks/{id}": {
			valid:   []string{blocksPath + "host2", blocksPath + "gpu1", blocksPath + "memnode2-b64", blocksPath + "essd4"},
			unknown: []string{blocksPath + "gpu99", blocksPath + "memnode1-b00", blocksPath + "memnode1"}},
		"/redfish/v1/CompositionService/ResourceZones": {valid: []string{"/redfish/v1/CompositionService/ResourceZones"}},
		"/redfish/v1/CompositionService/ResourceZones/{id}": {
			valid:   []string{zonesPath + "host1", zonesPath + "zone-training"},
			unknown: []string{zonesPath + "host9", zonesPath + "training", zonesPath + "zone-nope", zonesPath + "zone-host1"}},
		"/redfish/v1/Chassis": {valid: []string{"/redfish/v1/Chassis"}},
		"/redfish/v1/Chassis/{id}": {
			valid: []string{"/redfish/v1/Chassis/rack1", "/redfish/v1/Chassis/falcon1", "/redfish/v1/Chassis/falcon1-drawer2",
				"/redfish/v1/Chassis/sas1", "/redfish/v1/Chassis/memnode1"},
			unknown: []string{"/redfish/v1/Chassis/rack9", "/redfish/v1/Chassis/ocs1", "/redfish/v1/Chassis/falcon1-drawer9"}},
		"/redfish/v1/Chassis/{id}/PCIeDevices/{dev}/PCIeFunctions": {
			valid:   []string{"/redfish/v1/Chassis/falcon1-drawer1/PCIeDevices/gpu1/PCIeFunctions"},
			unknown: []string{"/redfish/v1/Chassis/falcon1-drawer1/PCIeDevices/gpu5/PCIeFunctions", "/redfish/v1/Chassis/rack1/PCIeDevices/gpu1/PCIeFunctions"}},
		"/redfish/v1/Chassis/{id}/PCIeDevices/{dev}/PCIeFunctions/{fn}": {
			valid:   []string{"/redfish/v1/Chassis/falcon1-drawer1/PCIeDevices/nic1/PCIeFunctions/1"},
			unknown: []string{"/redfish/v1/Chassis/falcon1-drawer1/PCIeDevices/nic1/PCIeFunctions/2", "/redfish/v1/Chassis/falcon1-drawer2/PCIeDevices/nic1/PCIeFunctions/1"}},
		"/redfish/v1/Chassis/{id}/Drives": {
			valid:   []string{"/redfish/v1/Chassis/falcon1-drawer1/Drives", "/redfish/v1/Chassis/sas1/Drives", "/redfish/v1/Chassis/vlan1/Drives"},
			unknown: []string{"/redfish/v1/Chassis/rack1/Drives", "/redfish/v1/Chassis/memnode1/Drives", "/redfish/v1/Chassis/nope/Drives"}},
		"/redfish/v1/Chassis/{id}/Drives/{member}": {
			valid: []string{"/redfish/v1/Chassis/falcon1-drawer1/Drives/nvme1", "/redfish/v1/Chassis/sas1/Drives/hdd1"},
			unknown: []string{"/redfish/v1/Chassis/sas1/Drives/nvme1", "/redfish/v1/Chassis/falcon1-drawer1/Drives/gpu1",
				"/redfish/v1/Chassis/sas1/Drives/hdd99"}},
		"/redfish/v1/Systems/{id}/Processors": {
			valid:   []string{"/redfish/v1/Systems/" + sys + "/Processors", "/redfish/v1/Systems/host1/Processors"},
			unknown: []string{"/redfish/v1/Systems/sys-000000000000/Processors", "/redfish/v1/Systems/host9/Processors"}},
		"/redfish/v1/Systems/{id}/Memory": {
			valid:   []string{"/redfish/v1/Systems/" + sys + "/Memory", "/redfish/v1/Systems/host1/Memory"},
			unknown: []string{"/redfish/v1/Systems/sys-000000000000/Memory"}},
		"/redfish/v1/Systems/{id}/Storage/{storage}/Controllers": {
			valid:   []string{"/redfish/v1/Systems/" + sys + "/Storage/Pooled/Controllers"},
			unknown: []string{"/redfish/v1/Systems/" + sys + "/Storage/Local/Controllers", "/redfish/v1/Systems/sys-000000000000/Storage/Pooled/Controllers"}},
		"/redfish/v1/Systems/{id}/Storage/{storage}/Controllers/{ctrl}": {
			valid:   []string{"/redfish/v1/Systems/" + sys + "/Storage/Pooled/Controllers/SAS"},
			unknown: []string{"/redfish/v1/Systems/" + sys + "/Storage/Pooled/Controllers/NVMe", "/redfish/v1/Systems/sys-000000000000/Storage/Pooled/Controllers/SAS"}},
		"/redfish/v1/Systems/{id}/BootOptions": {
			valid:   []string{"/redfish/v1/Systems/" + sys + "/BootOptions", "/redfish/v1/Systems/host1/BootOptions"},
			unknown: []string{"/redfish/v1/Systems/sys-000000000000/BootOptions"}},
		"/redfish/v1/Systems/{id}/BootOptions/{ref}": {
			valid:   []string{"/redfish/v1/Systems/" + sys + "/BootOptions/Pxe", "/redfish/v1/Systems/host1/BootOptions/Pxe"},
			unknown: []string{"/redfish/v1/Systems/" + sys + "/BootOptions/nvme9", "/redfish/v1/Systems/sys-000000000000/BootOptions/Pxe"}},
		"/redfish/v1/Systems/{id}/EthernetInterfaces": {
			valid:   []string{"/redfish/v1/Systems/" + sys + "/EthernetInterfaces", "/redfish/v1/Systems/host1/EthernetInterfaces"},
			unknown: []string{"/redfish/v1/Systems/sys-000000000000/EthernetInterfaces"}},
		"/redfish/v1/CompositionService/ResourceBlocks/{id}/Processors/{member}": {
			valid:   []string{blocksPath + "gpu1/Processors/gpu1", blocksPath + "host1/Processors/CPU", blocksPath + "fpga2/Processors/fpga2"},
			unknown: []string{blocksPath + "gpu1/Processors/CPU", blocksPath + "nvme1/Processors/nvme1", blocksPath + "gpu99/Processors/gpu99"}},
		"/redfish/v1/CompositionService/ResourceBlocks/{id}/Memory/{member}": {
			valid:   []string{blocksPath + "host1/Memory/Local", blocksPath + "memnode2-b01/Memory/memnode2-b01"},
			unknown: []string{blocksPath + "gpu1/Memory/gpu1", blocksPath + "host1/Memory/host1", blocksPath + "memnode2-b01/Memory/Local"}},
		"/redfish/v1/CompositionService/ResourceBlocks/{id}/EthernetInterfaces/{member}": {
			valid:   []string{blocksPath + "nic1/EthernetInterfaces/nic1"},
			unknown: []string{blocksPath + "gpu1/EthernetInterfaces/gpu1", blocksPath + "nic1/EthernetInterfaces/nic2"}},
		"/redfish/v1/Systems/{id}/Storage": {
			valid:   []string{"/redfish/v1/Systems/" + sys + "/Storage", "/redfish/v1/Systems/host1/Storage"},
			unknown: []string{"/redfish/v1/Systems/sys-000000000000/Storage"}},
		"/redfish/v1/Systems/{id}/Storage/{storage}": {
			valid:   []string{"/redfish/v1/Systems/" + sys + "/Storage/Pooled", "/redfish/v1/Systems/host1/Storage/Pooled"},
			unknown: []string{"/redfish/v1/Systems/sys-000000000000/Storage/Pooled", "/redfish/v1/Systems/" + sys + "/Storage/Local"}},
		"/redfish/v1/Fabrics":               {valid: []string{"/redfish/v1/Fabrics"}},
		"/redfish/v1/Fabrics/{id}":          {valid: []string{f + "falcon1", f + "sas1", f + "ocs1", f + "vlan1"}, unknown: []string{f + "nofab"}},
		"/redfish/v1/Fabrics/{id}/Switches": {valid: []string{f + "falcon1/Switches"}, unknown: []string{f + "nofab/Switches"}},
		"/redfish/v1/Fabrics/{id}/Switches/{sw}": {
			valid:   []string{f + "falcon1/Switches/chassis", f + "sas1/Switches/sas-sw1"},
			unknown: []string{f + "falcon1/Switches/nosw", f + "nofab/Switches/chassis", f + "sas1/Switches/chassis"}},
		"/redfish/v1/Fabrics/{id}/Switches/{sw}/Ports": {
			valid: []string{f + "ocs1/Switches/ocs-sw1/Ports"}, unknown: []string{f + "ocs1/Switches/nosw/Ports", f + "nofab/Switches/ocs-sw1/Ports"}},
		"/redfish/v1/Fabrics/{id}/Switches/{sw}/Ports/{port}": {
			valid: []string{f + "falcon1/Switches/chassis/Ports/H1", f + "falcon1/Switches/chassis/Ports/drawer2-slot8",
				f + "sas1/Switches/sas-sw1/Ports/160", f + "sas1/Switches/sas-sw1/Ports/1"},
			unknown: []string{f + "sas1/Switches/sas-sw1/Ports/161", f + "sas1/Switches/sas-sw1/Ports/0",
				f + "sas1/Switches/sas-sw1/Ports/01", f + "falcon1/Switches/chassis/Ports/drawer3-slot1"}},
		"/redfish/v1/Fabrics/{id}/Endpoints": {valid: []string{f + "vlan1/Endpoints"}, unknown: []string{f + "nofab/Endpoints"}},
		"/redfish/v1/Fabrics/{id}/Endpoints/{ep}": {
			valid:   []string{f + "falcon1/Endpoints/host1-pcie", f + "falcon1/Endpoints/gpu1", f + "ocs1/Endpoints/memnode2"},
			unknown: []string{f + "falcon1/Endpoints/hdd1", f + "falcon1/Endpoints/host1-sas", f + "falcon1/Endpoints/host9-pcie"}},
		"/redfish/v1/Fabrics/{id}/Zones": {valid: []string{f + "falcon1/Zones"}, unknown: []string{f + "nofab/Zones"}},
		"/redfish/v1/Fabrics/{id}/Zones/{zone}": {
			valid:   []string{f + "falcon1/Zones/host1-pcie"},
			unknown: []string{f + "falcon1/Zones/host2-pcie", f + "sas1/Zones/host1-pcie", f + "nofab/Zones/host1-pcie"}},
		"/redfish/v1/Oem/Rackpool/Topology":                    {valid: []string{"/redfish/v1/Oem/Rackpool/Topology"}},
		"/redfish/v1/TelemetryService":                         {valid: []string{"/redfish/v1/TelemetryService"}},
		"/redfish/v1/TelemetryService/MetricDefinitions":       {valid: []string{"/redfish/v1/TelemetryService/MetricDefinitions"}},
		"/redfish/v1/TelemetryService/MetricReportDefinitions": {valid: []string{"/redfish/v1/TelemetryService/MetricReportDefinitions"}},
		"/redfish/v1/TelemetryService/MetricReports":           {valid: []string{"/redfish/v1/TelemetryService/MetricReports"}},
		"/redfish/v1/TelemetryService/MetricDefinitions/{id}": {
			valid:   []string{"/redfish/v1/TelemetryService/MetricDefinitions/memory_used_bytes", "/redfish/v1/TelemetryService/MetricDefinitions/remote_live_bytes"},
			unknown: []string{"/redfish/v1/TelemetryService/MetricDefinitions/cpu_magic"}},
		"/redfish/v1/TelemetryService/MetricReportDefinitions/{id}": {
			valid:   []string{"/redfish/v1/TelemetryService/MetricReportDefinitions/SystemUsage", "/redfish/v1/TelemetryService/MetricReportDefinitions/CacheUsage"},
			unknown: []string{"/redfish/v1/TelemetryService/MetricReportDefinitions/RackUsage"}},
		"/redfish/v1/TelemetryService/MetricReports/{id}": {
			valid:   []string{"/redfish/v1/TelemetryService/MetricReports/SystemUsage", "/redfish/v1/TelemetryService/MetricReports/MemoryLeaseUsage"},
			unknown: []string{"/redfish/v1/TelemetryService/MetricReports/Usage"}},
		"/redfish/v1/TelemetryService/Oem/Rackpool/Series/{kind}/{source}/{metric}": {
			valid: []string{usageSeries + "/System/" + sys + "/memory_used_bytes", usageSeries + "/System/host1/io_read_bytes_per_second",
				usageSeries + "/MemoryLease/" + lease + "/bytes_in_use"},
			unknown: []string{usageSeries + "/System/sys-000000000000/memory_used_bytes", usageSeries + "/System/" + sys + "/cpu_magic",
				usageSeries + "/Rack/" + sys + "/memory_used_bytes", usageSeries + "/Cache/nope/remote_items"}},
	}
	seen := map[string]bool{}
	for _, rt := range routes(t) {
		if rt.method != "GET" {
			continue
		}
		seen[rt.pattern] = true
		p, ok := table[rt.pattern]
		if !ok {
			t.Errorf("GET %s has no paths in this test's table", rt.pattern)
			continue
		}
		if p.elsewhere != "" {
			continue
		}
		t.Run(strings.TrimPrefix(rt.pattern, "/"), func(t *testing.T) {
			for _, path := range p.valid {
				if p.raw {
					if r := s.do("GET", path, nil, admin); r.status != http.StatusOK && r.status != http.StatusCreated {
						t.Errorf("GET %s: %d %s", path, r.status, r.body)
					}
					continue
				}
				r := s.must(http.StatusOK, "GET", path, nil, admin)
				if path == "/redfish/v1/$metadata" {
					if !strings.Contains(r.header.Get("Content-Type"), "xml") || !strings.Contains(string(r.body), "<edmx:Edmx") {
						t.Errorf("$metadata: %s %s", r.header.Get("Content-Type"), r.body)
					}
					continue
				}
				body := r.json(t)
				if slices.Contains(notResources, path) {
					continue
				}
				if want := strings.TrimSuffix(path, "/"); body["@odata.id"] != want {
					t.Errorf("GET %s: @odata.id %v", path, body["@odata.id"])
				}
				if typ, _ := body["@odata.type"].(string); !strings.HasPrefix(typ, "#") {
					t.Errorf("GET %s: @odata.type %q", path, typ)
				}
				if r.header.Get("OData-Version") != "4.0" {
					t.Errorf("GET %s: OData-Version %q", path, r.header.Get("OData-Version"))
				}
			}
			for _, path := range p.unknown {
				r := s.must(http.StatusNotFound, "GET", path, nil, admin)
				if code := r.errorCode(t); !strings.HasPrefix(code, "Base.1.22.Resource") {
					t.Errorf("GET %s: %s", path, code)
				}
			}
		})
	}
	for pattern := range table {
		if !seen[pattern] {
			t.Errorf("table names GET %s, which the service does not register", pattern)
		}
	}
}

const (
	blocksPath = "/redfish/v1/CompositionService/ResourceBlocks/"
	zonesPath  = "/redfish/v1/CompositionService/ResourceZones/"
)

// TestWalkService follows every @odata.id from the service root and checks
// each resolves to a 200 JSON resource naming itself, and that every
// action target is a route (POSTing an empty object to it gives neither 404
// nor 405). Dangling links fail here.
func TestWalkService(t *testing.T) {
	s := newService(t)
	s.login()
	s.compose(specificBody("host1", "gpu1", "memnode1-b01", "hdd3", "essd1"))
	s.compose(specificBody("host2", "nic1", "gpu6"))
	s.injectFault(http.StatusNoContent, "falcon1", map[string]any{"Kind": "device-fails", "Target": "gpu6"})
	token, _ := s.login()
	tok := cred{token: token}

	const maxGETs = 3000
	queue := []string{"/redfish/v1"}
	from := map[string]string{"/redfish/v1": "(start)"}
	targets := map[string]string{}
	gets := 0
	for len(queue) > 0 {
		path := queue[0]
		queue = queue[1:]
		if gets++; gets > maxGETs {
			t.Fatalf("more than %d resources; is some link generating new ones?", maxGETs)
		}
		r := s.do("GET", path, nil, tok)
		if r.status != http.StatusOK {
			t.Errorf("GET %s (linked from %s): %d %s", path, from[path], r.status, r.body)
			continue
		}
		var body any
		if err := json.Unmarshal(r.body, &body); err != nil {
			t.Errorf("GET %s (linked from %s): not JSON: %v", path, from[path], err)
			continue
		}
		if m, ok := body.(map[string]any); ok && !slices.Contains(notResources, path) {
			if m["@odata.id"] != path {
				t.Errorf("GET %s: @odata.id %v", path, m["@odata.id"])
			}
			if members, ok := m["Members"].([]any); ok && m["Members@odata.count"] != float64(len(members)) {
				t.Errorf("GET %s: Members@odata.count %v for %d members", path, m["Members@odata.count"], len(members))
			}
		}
		walkJSON(body, "", func(key, val string) {
			switch key {
			case "@odata.id":
				link, _, _ := strings.Cut(val, "#")
				if _, ok := from[link]; !ok {
					from[link] = path
					queue = append(queue, link)
				}
			case "target":
				targets[val] = path
			}
		})
	}
	if gets < 500 {
		t.Fatalf("walked only %d resources; the example rack has more", gets)
	}
	t.Logf("walked %d resources, %d action targets", gets, len(targets))
	for _, want := range []string{"/redfish/v1/Fabrics/falcon1/Zones/host2-pcie", "/redfish/v1/Fabrics/ocs1/Zones/host1-ocs-a",
		blocksPath + "memnode2-b64", "/redfish/v1/Fabrics/sas1/Switches/sas-sw1/Ports/160", "/redfish/v1/Oem/Rackpool/Topology"} {
		if _, ok := from[want]; !ok {
			t.Errorf("the walk never reached %s", want)
		}
	}
	if len(targets) < 8 {
		t.Errorf("only %d action targets: %v", len(targets), targets)
	}
	// With the faults cleared first, empty POSTs to the actions must change
	// nothing at all.
	for _, f := range []string{"falcon1", "sas1", "ocs1", "vlan1"} {
		s.must(http.StatusNoContent, "POST", "/redfish/v1/Fabrics/"+f+"/Actions/Oem/Rackpool.ClearFaults", `{}`, admin)
	}
	before := s.snapshot()
	for target, owner := range targets {
		r := s.do("POST", target, `{}`, admin)
		if r.status == http.StatusNotFound || r.status == http.StatusMethodNotAllowed || r.status >= 500 {
			t.Errorf("POST {} to action %s (of %s): %d %s", target, owner, r.status, r.body)
		}
	}
	if after := s.snapshot(); !slices.Equal(before, after) {
		t.Errorf("empty action POSTs changed state\nbefore %v\nafter  %v", before, after)
	}
}

// walkJSON calls fn for every string property, with its key.
func walkJSON(v any, key string, fn func(key, val string)) {
	switch v := v.(type) {
	case map[string]any:
		for k, x := range v {
			walkJSON(x, k, fn)
		}
	case []any:
		for _, x := range v {
			walkJSON(x, key, fn)
		}
	case string:
		fn(key, v)
	}
}

// TestUnauthenticatedRoutes: without credentials (or with bad ones) only
// the public routes answer; every other route, whatever its method, is a
// 401 before its handler runs, so it changes nothing.
func TestUnauthenticatedRoutes(t *testing.T) {
	s := newService(t)
	sys := s.compose(specificBody("host1", "gpu1"))
	before := s.snapshot()
	// A wrong Basic password costs an Argon2 check; try it on the routes
	// that change state.
	wrongBasic := cred{hdr: map[string]string{"Authorization": "Basic QWRtaW5pc3RyYXRvcjpndWVzcw=="}}
	// The public routes are exactly these: the service root and what a
	// client reads before it logs in, and the login itself.
	var public []string
	for _, rt := range routes(t) {
		if rt.privilege == "" {
			public = append(public, rt.method+" "+rt.pattern)
		}
	}
	wantPublic := []string{"GET /redfish", "GET /redfish/v1", "GET /redfish/v1/{$}", "GET /redfish/v1/$metadata", "GET /redfish/v1/odata",
		"POST /redfish/v1/SessionService/Sessions", "GET /redfish/v1/Schemas/Rackpool_v1.xml"}
	slices.Sort(public)
	slices.Sort(wantPublic)
	if !slices.Equal(public, wantPublic) {
		t.Errorf("public routes:\n%s\nwant:\n%s", strings.Join(public, "\n"), strings.Join(wantPublic, "\n"))
	}
	if n := len(routes(t)); n < 90 {
		t.Fatalf("the service lists only %d routes", n)
	}
	for _, rt := range routes(t) {
		path := strings.ReplaceAll(concrete(rt.pattern), "/Systems/x", "/Systems/"+sys)
		bad := []cred{{}, {token: "deadbeef"}}
		if rt.method != "GET" {
			bad = append(bad, wrongBasic)
		}
		t.Run(rt.method+" "+rt.pattern, func(t *testing.T) {
			for _, c := range bad {
				body := any(nil)
				if rt.method == "POST" || rt.method == "PATCH" {
					body = map[string]any{"ResourceBlock": blockRef("gpu2")}
				}
				r := s.do(rt.method, path, body, c)
				if rt.privilege == "" {
					if r.status == http.StatusUnauthorized {
						t.Fatalf("public route refused: %s", r.body)
					}
					continue
				}
				if r.status != http.StatusUnauthorized {
					t.Fatalf("%s %s with %+v: %d, want 401: %s", rt.method, path, c, r.status, r.body)
				}
				if code := r.errorCode(t); code != "Base.1.22.NoValidSession" {
					t.Fatalf("code %s", code)
				}
			}
		})
	}
	if after := s.snapshot(); !slices.Equal(before, after) {
		t.Fatalf("unauthenticated requests changed state\nbefore %v\nafter  %v", before, after)
	}
}
