package dra

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/dynamic-resource-allocation/kubeletplugin"
	cdispec "tags.cncf.io/container-device-interface/specs-go"

	"rackpool/api"
	"rackpool/internal/hostagent/hoststep"
)

// nodeTree is a host's /sys, /proc and /dev with an NVMe drive at
// 0000:05:00.0 (nvme1, namespace nvme1n1) and an NVIDIA GPU at
// 0000:83:00.0 (minor 0).
func nodeTree(t *testing.T) (sys, proc, dev string) {
	root := t.TempDir()
	sys, proc, dev = filepath.Join(root, "sys"), filepath.Join(root, "proc"), filepath.Join(root, "dev")
	file := func(p, s string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for bdf, ids := range map[string][2]string{"0000:05:00.0": {"0x144d", "0xa824"}, "0000:83:00.0": {"0x10de", "0x20b0"}} {
		file(filepath.Join(sys, "bus/pci/devices", bdf, "vendor"), ids[0]+"\n")
		file(filepath.Join(sys, "bus/pci/devices", bdf, "device"), ids[1]+"\n")
		file(filepath.Join(sys, "bus/pci/devices", bdf, "current_link_width"), "16\n")
	}
	file(filepath.Join(sys, "bus/pci/rescan"), "")
	file(filepath.Join(sys, "bus/pci/devices/0000:05:00.0/nvme/nvme1/nvme1n1/size"), "0\n")
	file(filepath.Join(proc, "driver/nvidia/gpus/0000:83:00.0/information"), "Model: A100\nDevice Minor: 0\n")
	for _, n := range []string{"nvme1", "nvme1n1", "nvidia0", "nvidiactl"} {
		file(filepath.Join(dev, n), "")
	}
	return sys, proc, dev
}

var (
	nodeGPU  = api.HostDevice{Block: "gpu-1", Device: "gpu1", Kind: "gpu", Fabric: "pcie-switch", VendorID: "0x10de", DeviceID: "0x20b0"}
	nodeNVMe = api.HostDevice{Block: "nvme-1", Device: "nvme1", Kind: "nvme", Fabric: "pcie-switch", VendorID: "0x144d", DeviceID: "0xa824", Bytes: 1 << 40}
)

// attachedClaim is a claim allocated devs (pool falcon1), each with
// ConditionAttached and its description, as the controller leaves it.
func attachedClaim(uid string, devs ...api.HostDevice) *resourceapi.ResourceClaim {
	c := &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "claim-" + uid, UID: types.UID(uid)},
		Status: resourceapi.ResourceClaimStatus{Allocation: &resourceapi.AllocationResult{}}}
	for _, d := range devs {
		c.Status.Allocation.Devices.Results = append(c.Status.Allocation.Devices.Results, resourceapi.DeviceRequestAllocationResult{
			Request: "req", Driver: DriverName, Pool: "falcon1", Device: deviceName(d.Block), BindingConditions: []string{ConditionAttached}})
		raw, _ := json.Marshal(d)
		c.Status.Devices = append(c.Status.Devices, resourceapi.AllocatedDeviceStatus{Driver: DriverName, Pool: "falcon1",
			Device: deviceName(d.Block), Data: &runtime.RawExtension{Raw: raw},
			Conditions: []metav1.Condition{{Type: ConditionAttached, Status: metav1.ConditionTrue, Reason: "Composed"}}})
	}
	return c
}

func readSpec(t *testing.T, dir string, uid types.UID) *cdispec.Spec {
	t.Helper()
	b, err := os.ReadFile(cdiFile(dir, uid))
	if err != nil {
		t.Fatal(err)
	}
	var s cdispec.Spec
	if err := json.Unmarshal(b, &s); err != nil {
		t.Fatalf("spec %s: %v", b, err)
	}
	return &s
}

// TestNodePlugin prepares claims as the kubelet asks: a GPU and an NVMe
// drive get a CDI spec with their device nodes and variables and the CDI
// IDs the kubelet passes on; a device prepared for another claim, one not
// attached, and one the host never shows fail their claim alone; a
// plugin restarted over the same CDI directory still refuses the double
// use and unprepares what the first prepared, twice without error.
func TestNodePlugin(t *testing.T) {
	sys, proc, dev := nodeTree(t)
	host, err := hoststep.New(hoststep.Options{SysfsRoot: sys, ProcRoot: proc, DevRoot: dev, Poll: 5 * time.Millisecond, Rescan: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	cdiDir := t.TempDir()
	p := &NodePlugin{Host: host, CDIDir: cdiDir, Wait: 300 * time.Millisecond}
	ctx := context.Background()
	one := attachedClaim("uid-1", nodeGPU, nodeNVMe)
	res, err := p.PrepareResourceClaims(ctx, []*resourceapi.ResourceClaim{one})
	if err != nil || res["uid-1"].Err != nil {
		t.Fatalf("prepare: %v, %v", err, res["uid-1"].Err)
	}
	got := res["uid-1"].Devices
	if len(got) != 2 || got[0].DeviceName != "gpu-1" || got[0].PoolName != "falcon1" || !slices.Equal(got[0].Requests, []string{"req"}) ||
		!slices.Equal(got[0].CDIDeviceIDs, []string{"rackpool.io/device=uid-1-gpu-1"}) || got[1].CDIDeviceIDs[0] != "rackpool.io/device=uid-1-nvme-1" {
		t.Errorf("prepared devices %+v", got)
	}
	spec := readSpec(t, cdiDir, "uid-1")
	if spec.Kind != CDIKind || spec.Version == "" || len(spec.Devices) != 2 {
		t.Fatalf("spec %+v", spec)
	}
	nodes := func(d cdispec.Device) string {
		var s []string
		for _, n := range d.ContainerEdits.DeviceNodes {
			s = append(s, n.Path+"="+strings.TrimPrefix(n.HostPath, dev))
		}
		return strings.Join(s, " ")
	}
	if d := spec.Devices[0]; d.Name != "uid-1-gpu-1" || nodes(d) != "/dev/nvidia0=/nvidia0 /dev/nvidiactl=/nvidiactl" ||
		!slices.Contains(d.ContainerEdits.Env, "RACKPOOL_OS_NAMES_GPU_1=0000:83:00.0") || !slices.Contains(d.ContainerEdits.Env, "RACKPOOL_DEVICE_GPU_1=gpu-1") {
		t.Errorf("GPU's CDI device %+v (nodes %s)", d, nodes(d))
	}
	if d := spec.Devices[1]; nodes(d) != "/dev/nvme1=/nvme1 /dev/nvme1n1=/nvme1n1" || !slices.Contains(d.ContainerEdits.Env, "RACKPOOL_KIND_NVME_1=nvme") {
		t.Errorf("NVMe's CDI device %+v (nodes %s)", d, nodes(d))
	}
	// Asked again (a kubelet restart): the same answer.
	if again, err := p.PrepareResourceClaims(ctx, []*resourceapi.ResourceClaim{one}); err != nil || again["uid-1"].Err != nil || len(again["uid-1"].Devices) != 2 {
		t.Errorf("prepare again: %v %+v", err, again["uid-1"])
	}

	// Three claims at once, each failing for its own reason, and one that
	// is fine: each gets its own answer.
	twice := attachedClaim("uid-2", nodeGPU)
	unattached := attachedClaim("uid-3", nodeNVMe)
	unattached.Status.Devices = nil
	absent := attachedClaim("uid-4", api.HostDevice{Block: "gpu-9", Device: "gpu9", Kind: "gpu", VendorID: "0x10de", DeviceID: "0x2330"})
	empty := attachedClaim("uid-5")
	res, err = p.PrepareResourceClaims(ctx, []*resourceapi.ResourceClaim{twice, unattached, absent, empty})
	if err != nil {
		t.Fatal(err)
	}
	if e := res["uid-2"].Err; !errors.Is(e, ErrInUse) || !strings.Contains(e.Error(), "uid-1") {
		t.Errorf("a device prepared for another claim: %v", e)
	}
	if e := res["uid-3"].Err; e == nil || !strings.Contains(e.Error(), "not attached") {
		t.Errorf("a device not attached: %v", e)
	}
	if e := res["uid-4"].Err; e == nil || !strings.Contains(e.Error(), "gpu9") {
		t.Errorf("a device the host never shows: %v", e)
	}
	if r := res["uid-5"]; r.Err != nil || len(r.Devices) != 0 {
		t.Errorf("a claim with none of this driver's devices: %+v", r)
	}
	for _, uid := range []types.UID{"uid-2", "uid-3", "uid-4"} {
		if _, err := os.Stat(cdiFile(cdiDir, uid)); err == nil {
			t.Errorf("claim %s failed but has a CDI spec", uid)
		}
	}

	// A restarted plugin knows what the specs say.
	p2 := &NodePlugin{Host: host, CDIDir: cdiDir, Wait: 300 * time.Millisecond}
	if res, _ := p2.PrepareResourceClaims(ctx, []*resourceapi.ResourceClaim{twice}); !errors.Is(res["uid-2"].Err, ErrInUse) {
		t.Errorf("after a restart, a device prepared for another claim: %v", res["uid-2"].Err)
	}
	objs := []kubeletplugin.NamespacedObject{{UID: "uid-1", NamespacedName: types.NamespacedName{Namespace: "ns", Name: "claim-uid-1"}}, {UID: "uid-7"}}
	for i := range 2 {
		un, err := p2.UnprepareResourceClaims(ctx, objs)
		if err != nil || un["uid-1"] != nil || un["uid-7"] != nil || len(un) != 2 {
			t.Errorf("unprepare #%d: %v %v", i+1, err, un)
		}
	}
	if _, err := os.Stat(cdiFile(cdiDir, "uid-1")); err == nil {
		t.Error("the unprepared claim's CDI spec is still there")
	}
	if res, _ := p2.PrepareResourceClaims(ctx, []*resourceapi.ResourceClaim{twice}); res["uid-2"].Err != nil {
		t.Errorf("the GPU once unprepared: %v", res["uid-2"].Err)
	}
}
