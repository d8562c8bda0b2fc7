package redfish_test

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
)

const rb = "/redfish/v1/CompositionService/ResourceBlocks/"

// uris returns the @odata.id of every link in a list.
func uris(t *testing.T, v any) []string {
	t.Helper()
	var out []string
	for _, l := range list(t, v) {
		out = append(out, l.(map[string]any)["@odata.id"].(string))
	}
	return out
}

// TestSystemInventory: a composed system shows what it is made of in DMTF
// form, read from its composition record: its host's CPU and memory and
// one member per GPU, FPGA, memory block, drive and NIC it holds, each the
// member of its resource block (one part, one resource); a shrink removes
// a member at once; the summaries agree with the members; a physical host
// shows only its own parts.
func TestSystemInventory(t *testing.T) {
	s := newService(t)
	id := s.compose(specificBody("host1", "gpu1", "fpga1", "nvme1", "hdd1", "nic1"))
	base := "/redfish/v1/Systems/" + id
	s.must(http.StatusOK, "POST", base+"/Actions/Oem/Rackpool.Expand",
		map[string]any{"Needs": []map[string]any{{"Kind": "memory", "Count": 1, "Capacity": "8GiB"}}}, admin)

	sys := s.get(base)
	for _, c := range []string{"Processors", "Memory", "Storage", "EthernetInterfaces"} {
		if got := dig(t, sys, c, "@odata.id"); got != base+"/"+c {
			t.Errorf("%s link %v", c, got)
		}
	}
	if got := links(t, dig(t, sys, "Links", "Chassis")); !slices.Equal(got, []string{"rack1", "falcon1-drawer1"}) {
		t.Errorf("Links.Chassis %v", got)
	}
	// Its PCIe devices and functions, as their drawer lists them: the GPU,
	// the FPGA, the NVMe drive and the NIC (the SAS drive is not PCIe).
	devs := uris(t, sys["PCIeDevices"])
	if len(devs) != 4 || len(uris(t, sys["PCIeFunctions"])) != 4 {
		t.Errorf("PCIeDevices %v, PCIeFunctions %v", devs, sys["PCIeFunctions"])
	}
	for _, d := range devs {
		if !strings.HasPrefix(d, "/redfish/v1/Chassis/falcon1-drawer") {
			t.Errorf("PCIe device %s is not in a drawer", d)
		}
		s.get(d)
	}

	procs := uris(t, s.get(base + "/Processors")["Members"])
	if want := []string{rb + "host1/Processors/CPU", rb + "gpu1/Processors/gpu1", rb + "fpga1/Processors/fpga1"}; !slices.Equal(procs, want) {
		t.Fatalf("processors %v, want %v", procs, want)
	}
	if n := dig(t, sys, "ProcessorSummary", "Count").(float64); int(n) != len(procs) {
		t.Errorf("ProcessorSummary.Count %v, %d members", n, len(procs))
	}
	gpu := s.get(procs[1])
	if gpu["ProcessorType"] != "GPU" || gpu["Model"] != "V100" || gpu["Manufacturer"] != "NVIDIA" ||
		dig(t, gpu, "Oem", "Rackpool", "VendorId") != "0x10de" || dig(t, gpu, "Oem", "Rackpool", "ResourceBlock", "@odata.id") != rb+"gpu1" ||
		dig(t, gpu, "Links", "Chassis", "@odata.id") != "/redfish/v1/Chassis/falcon1-drawer1" {
		t.Errorf("gpu1: %v", gpu)
	}
	cpu := s.get(procs[0])
	if cpu["ProcessorType"] != "CPU" || cpu["TotalCores"] != dig(t, sys, "ProcessorSummary", "CoreCount") ||
		dig(t, cpu, "Links", "Chassis", "@odata.id") != "/redfish/v1/Chassis/rack1" {
		t.Errorf("CPU: %v", cpu)
	}

	mems := uris(t, s.get(base + "/Memory")["Members"])
	if len(mems) != 2 || mems[0] != rb+"host1/Memory/Local" {
		t.Fatalf("memory %v", mems)
	}
	var mib float64
	for _, m := range mems {
		mib += s.get(m)["CapacityMiB"].(float64)
	}
	if pooled := s.get(mems[1]); dig(t, pooled, "Oem", "Rackpool", "Pooled") != true || pooled["CapacityMiB"] != float64(8192) ||
		!strings.HasPrefix(dig(t, pooled, "Links", "Chassis", "@odata.id").(string), "/redfish/v1/Chassis/memnode") {
		t.Errorf("pooled memory: %v", pooled)
	}
	if total := dig(t, sys, "MemorySummary", "TotalSystemMemoryGiB").(float64); total*1024 != mib {
		t.Errorf("TotalSystemMemoryGiB %v, members %v MiB", total, mib)
	}

	if st := links(t, s.get(base + "/Storage")["Members"]); !slices.Equal(st, []string{"Pooled"}) {
		t.Fatalf("storage %v", st)
	}
	drives := uris(t, s.get(base + "/Storage/Pooled")["Drives"])
	if want := []string{"/redfish/v1/Chassis/falcon1-drawer1/Drives/nvme1", "/redfish/v1/Chassis/sas1/Drives/hdd1"}; !slices.Equal(drives, want) {
		t.Fatalf("drives %v, want %v", drives, want)
	}
	if hdd := s.get(drives[1]); hdd["Protocol"] != "SAS" || hdd["MediaType"] != "HDD" || hdd["CapacityBytes"] != float64(10e12) {
		t.Errorf("hdd1: %v", hdd)
	}
	if nvme := s.get(drives[0]); nvme["Protocol"] != "NVMe" || nvme["MediaType"] != "SSD" ||
		dig(t, nvme, "Links", "Chassis", "@odata.id") != "/redfish/v1/Chassis/falcon1-drawer1" {
		t.Errorf("nvme1: %v", nvme)
	}
	// A controller per protocol the drives are reached by.
	var protos []string
	for _, c := range uris(t, s.get(dig(t, s.get(base+"/Storage/Pooled"), "Controllers", "@odata.id").(string))["Members"]) {
		ctrl := s.get(c)
		protos = append(protos, fmt.Sprint(ctrl["SupportedDeviceProtocols"], ctrl["SupportedControllerProtocols"]))
	}
	if want := []string{"[NVMe] [PCIe]", "[SAS] [SAS]"}; !slices.Equal(protos, want) {
		t.Errorf("storage controllers %v, want %v", protos, want)
	}

	nics := uris(t, s.get(base + "/EthernetInterfaces")["Members"])
	if !slices.Equal(nics, []string{rb + "nic1/EthernetInterfaces/nic1"}) {
		t.Fatalf("ethernet interfaces %v", nics)
	}
	if nic := s.get(nics[0]); !strings.Contains(nic["Description"].(string), "ConnectX-6") {
		t.Errorf("nic1: %v", nic)
	}

	// Each block carries the DMTF array of what it is.
	for block, want := range map[string][2]string{"gpu1": {"Processors", procs[1]}, "host1": {"Memory", mems[0]},
		"hdd1": {"Drives", drives[1]}, "nic1": {"EthernetInterfaces", nics[0]}} {
		if got := uris(t, s.get(rb + block)[want[0]]); !slices.Equal(got, []string{want[1]}) {
			t.Errorf("block %s %s %v, want %s", block, want[0], got, want[1])
		}
	}
	if got := links(t, dig(t, s.get("/redfish/v1/Chassis/rack1"), "Links", "ComputerSystems")); !slices.Contains(got, id) {
		t.Errorf("rack1 systems %v", got)
	}

	// A shrink takes the members away with the blocks.
	s.must(http.StatusOK, "POST", base+"/Actions/Oem/Rackpool.Shrink", map[string]any{"Blocks": []string{"gpu1", "hdd1"}}, admin)
	if got := uris(t, s.get(base + "/Processors")["Members"]); !slices.Equal(got, []string{procs[0], procs[2]}) {
		t.Errorf("processors after shrink %v", got)
	}
	if got := uris(t, s.get(base + "/Storage/Pooled")["Drives"]); !slices.Equal(got, drives[:1]) {
		t.Errorf("drives after shrink %v", got)
	}
	// Members of another kind, and of nothing, are not found.
	s.must(http.StatusNotFound, "GET", rb+"nvme1/Processors/nvme1", nil, admin)
	s.must(http.StatusNotFound, "GET", rb+"gpu1/Processors/gpu2", nil, admin)
	s.must(http.StatusNotFound, "GET", rb+"host1/Memory/host1", nil, admin)
	s.must(http.StatusNotFound, "GET", base+"/Storage/Other", nil, admin)
	s.must(http.StatusNotFound, "GET", "/redfish/v1/Systems/sys-nope/Processors", nil, admin)

	// The chassis list their drives.
	if got := links(t, s.get("/redfish/v1/Chassis/sas1/Drives")["Members"]); len(got) != 24 || got[0] != "hdd1" {
		t.Errorf("sas1 drives %v", got)
	}
	if got := dig(t, s.get("/redfish/v1/Chassis/sas1"), "Drives", "@odata.id"); got != "/redfish/v1/Chassis/sas1/Drives" {
		t.Errorf("sas1 Drives link %v", got)
	}
	if got := links(t, dig(t, s.get(rb+"memnode1-b01"), "Links", "Chassis")); !slices.Equal(got, []string{"memnode1"}) {
		t.Errorf("memnode1-b01 chassis %v", got)
	}

	// A drawer lists its cards; a card's function carries its PCI IDs and
	// links what it is.
	pcie := "/redfish/v1/Chassis/falcon1-drawer1/PCIeDevices"
	if got := links(t, s.get(pcie)["Members"]); !slices.Equal(got, []string{"gpu1", "gpu2", "gpu3", "gpu4", "nvme1", "nvme2", "nic1", "fpga1"}) {
		t.Errorf("drawer1 PCIe devices %v", got)
	}
	if dev := s.get(pcie + "/gpu1"); dev["Manufacturer"] != "NVIDIA" || dig(t, dev, "PCIeInterface", "PCIeType") != "Gen4" ||
		dig(t, dev, "PCIeInterface", "LanesInUse") != float64(16) {
		t.Errorf("gpu1 PCIe device: %v", dev)
	}
	fn := s.get(pcie + "/gpu1/PCIeFunctions/1")
	if fn["VendorId"] != "0x10de" || fn["DeviceId"] != "0x1db4" || fn["DeviceClass"] != "DisplayController" {
		t.Errorf("gpu1 function: %v", fn)
	}
	if got := uris(t, dig(t, s.get(rb+"gpu1/Processors/gpu1"), "Links", "PCIeFunctions")); !slices.Equal(got, []string{pcie + "/gpu1/PCIeFunctions/1"}) {
		t.Errorf("gpu1 processor's function %v", got)
	}
	if fn := s.get(pcie + "/nvme1/PCIeFunctions/1"); !slices.Equal(uris(t, dig(t, fn, "Links", "Drives")), drives[:1]) {
		t.Errorf("nvme1 function: %v", fn)
	}

	// A physical host is its own CPU and memory, with no pooled drives.
	host := "/redfish/v1/Systems/host2"
	if got := uris(t, s.get(host + "/Processors")["Members"]); !slices.Equal(got, []string{rb + "host2/Processors/CPU"}) {
		t.Errorf("host processors %v", got)
	}
	// Its Pooled storage is there, empty: no drive, no controller.
	if st := uris(t, s.get(host + "/Storage")["Members"]); !slices.Equal(st, []string{host + "/Storage/Pooled"}) {
		t.Errorf("host storage %v", st)
	}
	if d := list(t, s.get(host + "/Storage/Pooled")["Drives"]); len(d) != 0 {
		t.Errorf("host drives %v", d)
	}
	if c := list(t, s.get(host + "/Storage/Pooled/Controllers")["Members"]); len(c) != 0 {
		t.Errorf("host storage controllers %v", c)
	}
}

// TestInventoryTenancy: another tenant's system's inventory, and the parts
// it holds, are hidden as if they did not exist; its own are shown.
func TestInventoryTenancy(t *testing.T) {
	s := newService(t)
	blue, red, _ := s.tenants()
	r := s.must(http.StatusCreated, "POST", "/redfish/v1/Systems", specificBody("host1", "gpu1", "hdd1"), blue)
	id := r.json(t)["Id"].(string)
	base := "/redfish/v1/Systems/" + id
	for _, p := range []string{base + "/Processors", base + "/Memory", base + "/Storage/Pooled", rb + "gpu1/Processors/gpu1",
		rb + "host1/Processors/CPU", "/redfish/v1/Chassis/sas1/Drives/hdd1", "/redfish/v1/Chassis/falcon1-drawer1/PCIeDevices/gpu1",
		"/redfish/v1/Chassis/falcon1-drawer1/PCIeDevices/gpu1/PCIeFunctions/1"} {
		s.must(http.StatusOK, "GET", p, nil, blue)
		s.must(http.StatusNotFound, "GET", p, nil, red)
	}
	if !s.auditHas("mallory", "denied", base+"/Processors") {
		t.Error("the hidden read is not audited")
	}
	rack := func(c cred) []string {
		return links(t, dig(t, s.must(http.StatusOK, "GET", "/redfish/v1/Chassis/rack1", nil, c).json(t), "Links", "ComputerSystems"))
	}
	if !slices.Contains(rack(blue), id) || slices.Contains(rack(red), id) {
		t.Errorf("rack1 systems: blue %v, red %v", rack(blue), rack(red))
	}
	for _, m := range list(t, s.must(http.StatusOK, "GET", "/redfish/v1/Chassis/sas1/Drives", nil, red).json(t)["Members"]) {
		if strings.HasSuffix(m.(map[string]any)["@odata.id"].(string), "/hdd1") {
			t.Error("red lists blue's drive")
		}
	}
}
