// Command dra measures the Kubernetes DRA driver (docs/kubernetes.md)
// against a real rackpool serve (the example rack, --fabric-time instant)
// and client-go's fake clientset as the API server:
//
//   - allocation to binding condition True: a claim for one GPU, allocated
//     by Kubernetes' own structured allocator from the published slices,
//     is stored; the time until the controller has composed the GPU onto
//     the node's system and set rackpool.io/Attached True;
//   - prepare: the kubelet plugin (dra.NodePlugin) prepares the claim
//     over a sysfs tree where the GPU is present, as the host agent's
//     attach step leaves it: locate it, write its CDI spec;
//   - release: the claim deleted, the time until the GPU is offered in the
//     slices again (the grace, -grace, included);
//   - pool change to slices: a GPU composed and decomposed through the
//     API, the time until the slices drop it and offer it again.
//
// The peer's figure is CoHDI's composable DRA driver, which learns of the
// fabric by polling it (every 30 s in its scaler's default, 1 min in its
// driver's): a change waits half an interval on average for the next poll.
//
//	go run ./bench/dra [-cycles 50] [-grace 100ms] [-bin FILE] [-out build/bench-dra]
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/dynamic-resource-allocation/cel"
	"k8s.io/dynamic-resource-allocation/kubeletplugin"
	"k8s.io/dynamic-resource-allocation/structured"

	"rackpool/api"
	"rackpool/bench/internal/harness"
	"rackpool/internal/childproc"
	"rackpool/internal/dra"
	"rackpool/internal/hostagent/hoststep"
	"rackpool/internal/topology"
)

const password = "bench-dra-Passw0rd"

type deviceClasses map[string]*resourceapi.DeviceClass

func (c deviceClasses) List() ([]*resourceapi.DeviceClass, error) {
	var out []*resourceapi.DeviceClass
	for _, dc := range c {
		out = append(out, dc)
	}
	return out, nil
}

func (c deviceClasses) Get(name string) (*resourceapi.DeviceClass, error) {
	if dc := c[name]; dc != nil {
		return dc, nil
	}
	return nil, fmt.Errorf("no device class %s", name)
}

func main() {
	defer childproc.RunAtExit()
	cycles := flag.Int("cycles", 50, "claims allocated, attached and released")
	grace := flag.Duration("grace", 100*time.Millisecond, "how long a released device stays on the node")
	bin := flag.String("bin", "", "rackpool binary (default: built from ./cmd/rackpool)")
	out := flag.String("out", "build/bench-dra", "report directory")
	flag.Parse()
	dir := harness.WorkDir("bench-dra-")
	binary := harness.Binary(*bin, dir)
	c, _ := harness.Serve(binary, dir, password, "--fabric-time", "instant")

	hosts := []string{"host1", "host2", "host3"} // host4 reaches no GPU: drawer2 gives it slots 5-8 only
	var nodes []runtime.Object
	for _, h := range hosts {
		nodes = append(nodes, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-" + h, Labels: map[string]string{dra.HostLabel: h}}})
	}
	kube := fake.NewClientset(nodes...)
	var n atomic.Int64
	kube.PrependReactor("create", "resourceslices", func(a k8stesting.Action) (bool, runtime.Object, error) {
		s := a.(k8stesting.CreateAction).GetObject().(*resourceapi.ResourceSlice)
		if s.Name == "" {
			s.Name = fmt.Sprintf("%s%d", s.GenerateName, n.Add(1))
		}
		return false, nil, nil
	})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		if err := dra.Run(ctx, dra.Options{Kube: kube, Rackpool: c, Topology: topology.LoadDefault(), Grace: *grace,
			Logger: slog.New(slog.DiscardHandler)}); err != nil {
			childproc.Fatal(err)
		}
	}()
	published := func() []*resourceapi.ResourceSlice {
		list, err := kube.ResourceV1().ResourceSlices().List(ctx, metav1.ListOptions{})
		if err != nil {
			childproc.Fatal(err)
		}
		var out []*resourceapi.ResourceSlice
		for i := range list.Items {
			out = append(out, &list.Items[i])
		}
		return out
	}
	offered := func(device string) bool {
		for _, s := range published() {
			for _, d := range s.Spec.Devices {
				if d.Name == device {
					return true
				}
			}
		}
		return false
	}
	waitFor := func(what string, ok func() bool) time.Duration {
		start := time.Now()
		for !ok() {
			if time.Since(start) > 30*time.Second {
				childproc.Fatalf("%s: not after 30 s", what)
			}
			time.Sleep(time.Millisecond)
		}
		return time.Since(start)
	}
	waitFor("the first publication", func() bool { return offered("gpu1") })
	classes := deviceClasses{"gpu": &resourceapi.DeviceClass{ObjectMeta: metav1.ObjectMeta{Name: "gpu"}, Spec: resourceapi.DeviceClassSpec{
		Selectors: []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{
			Expression: fmt.Sprintf(`device.driver == %q && device.attributes[%q].kind == "gpu"`, dra.DriverName, dra.DriverName)}}}}}}
	celCache := cel.NewCache(10, cel.Features{})

	// The node's side: a kubelet plugin over a sysfs tree where each
	// attached GPU is present, as the host agent's attach step leaves it.
	sysfs := filepath.Join(dir, "sys")
	if err := os.MkdirAll(filepath.Join(sysfs, "bus/pci/devices"), 0o755); err != nil {
		childproc.Fatal(err)
	}
	host, err := hoststep.New(hoststep.Options{SysfsRoot: sysfs, ProcRoot: filepath.Join(dir, "proc"), DevRoot: filepath.Join(dir, "dev")})
	if err != nil {
		childproc.Fatal(err)
	}
	plugin := &dra.NodePlugin{Host: host, CDIDir: filepath.Join(dir, "cdi")}

	var attach, prepare, release, drop, back []time.Duration
	for i := range *cycles {
		host := hosts[i%len(hosts)]
		node, err := kube.CoreV1().Nodes().Get(ctx, "node-"+host, metav1.GetOptions{})
		if err != nil {
			childproc.Fatal(err)
		}
		alloc, err := structured.NewAllocator(ctx, structured.Features{PartitionableDevices: true, DeviceBindingAndStatus: true},
			structured.AllocatedState{AllocatedDevices: sets.New[structured.DeviceID]()}, classes, published(), celCache)
		if err != nil {
			childproc.Fatal(err)
		}
		name := fmt.Sprintf("claim-%d", i)
		claim := &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID("uid-" + name)},
			Spec: resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{Requests: []resourceapi.DeviceRequest{{Name: "gpu",
				Exactly: &resourceapi.ExactDeviceRequest{DeviceClassName: "gpu", AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: 1}}}}}}
		results, err := alloc.Allocate(ctx, node, []*resourceapi.ResourceClaim{claim})
		if err != nil || len(results) != 1 {
			childproc.Fatalf("allocate claim %d for %s: %v, %d results", i, host, err, len(results))
		}
		claim.Status.Allocation = &results[0]
		device := results[0].Devices.Results[0].Device
		start := time.Now()
		if _, err := kube.ResourceV1().ResourceClaims("default").Create(ctx, claim, metav1.CreateOptions{}); err != nil {
			childproc.Fatal(err)
		}
		waitFor("the binding condition", func() bool {
			got, err := kube.ResourceV1().ResourceClaims("default").Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				childproc.Fatal(err)
			}
			for _, d := range got.Status.Devices {
				for _, cond := range d.Conditions {
					if cond.Status == metav1.ConditionTrue && cond.Type != dra.ConditionAttached {
						childproc.Fatalf("%s: %s %s", name, cond.Type, cond.Message)
					}
					if cond.Status == metav1.ConditionTrue {
						return true
					}
				}
			}
			return false
		})
		attach = append(attach, time.Since(start))
		got, err := kube.ResourceV1().ResourceClaims("default").Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			childproc.Fatal(err)
		}
		var hd api.HostDevice
		if err := json.Unmarshal(got.Status.Devices[0].Data.Raw, &hd); err != nil {
			childproc.Fatal(err)
		}
		fn := filepath.Join(sysfs, "bus/pci/devices", fmt.Sprintf("0000:%02x:00.0", i%256))
		if err := os.MkdirAll(fn, 0o755); err != nil {
			childproc.Fatal(err)
		}
		for attr, v := range map[string]string{"vendor": hd.VendorID, "device": hd.DeviceID, "current_link_width": "16"} {
			if err := os.WriteFile(filepath.Join(fn, attr), []byte(v+"\n"), 0o644); err != nil {
				childproc.Fatal(err)
			}
		}
		start = time.Now()
		res, err := plugin.PrepareResourceClaims(ctx, []*resourceapi.ResourceClaim{got})
		if err != nil || res[got.UID].Err != nil {
			childproc.Fatalf("prepare %s: %v %v", name, err, res[got.UID].Err)
		}
		prepare = append(prepare, time.Since(start))
		if _, err := plugin.UnprepareResourceClaims(ctx, []kubeletplugin.NamespacedObject{{UID: got.UID}}); err != nil {
			childproc.Fatal(err)
		}
		if err := os.RemoveAll(fn); err != nil {
			childproc.Fatal(err)
		}
		waitFor("the slices drop the attached GPU", func() bool { return !offered(device) })
		if err := kube.ResourceV1().ResourceClaims("default").Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
			childproc.Fatal(err)
		}
		release = append(release, waitFor("the GPU offered again", func() bool { return offered(device) }))
	}
	for range *cycles {
		sys, err := c.Compose(ctx, api.ComposeRequest{Name: "outside", Blocks: []string{"host2", "gpu7"}})
		if err != nil {
			childproc.Fatal(err)
		}
		drop = append(drop, waitFor("gpu7 out of the slices", func() bool { return !offered("gpu7") }))
		if err := c.Decompose(ctx, sys.ID); err != nil {
			childproc.Fatal(err)
		}
		back = append(back, waitFor("gpu7 back in the slices", func() bool { return offered("gpu7") }))
	}
	report(*out, *grace, attach, prepare, release, drop, back)
}

func report(out string, grace time.Duration, rows ...[]time.Duration) {
	names := []string{"allocation → binding condition True (compose included)", "NodePrepareResources: locate the GPU, write its CDI spec (kubelet plugin)", fmt.Sprintf("claim deleted → GPU offered again (grace %v)", grace),
		"GPU composed elsewhere → out of the slices (API answer to slice)", "GPU decomposed → back in the slices (API answer to slice)"}
	var b strings.Builder
	fmt.Fprintf(&b, "| what | n | p50 | p99 | max |\n|---|---|---|---|---|\n")
	for i, r := range rows {
		slices.Sort(r)
		fmt.Fprintf(&b, "| %s | %d | %v | %v | %v |\n", names[i], len(r), harness.Percentile(r, 50).Round(time.Microsecond),
			harness.Percentile(r, 99).Round(time.Microsecond), r[len(r)-1].Round(time.Microsecond))
	}
	fmt.Fprintf(&b, "\npeer: a driver that polls its fabric every 30 s (CoHDI's scaler; 1 min its driver's) sees a change 15 s later on average, 30 s at worst\n")
	fmt.Print(b.String())
	if err := os.MkdirAll(out, 0o755); err != nil {
		childproc.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(out, "dra.md"), []byte(b.String()), 0o644); err != nil {
		childproc.Fatal(err)
	}
}
