package dra

import (
	"context"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/dynamic-resource-allocation/resourceslice"

	"rackpool/internal/inventory"
	"rackpool/internal/topology"
)

// TestPublish hands the pools to the resourceslice controller over
// client-go's fake clientset: the API then holds a slice set per fabric
// with every free device once, and a block taken from the pool leaves its
// slice when the controller is told.
func TestPublish(t *testing.T) {
	top := topology.LoadDefault()
	cs := fake.NewClientset()
	var n atomic.Int64 // the fake ignores GenerateName: name slices as the API server would
	cs.PrependReactor("create", "resourceslices", func(a k8stesting.Action) (bool, runtime.Object, error) {
		s := a.(k8stesting.CreateAction).GetObject().(*resourceapi.ResourceSlice)
		if s.Name == "" {
			s.Name = fmt.Sprintf("%s%d", s.GenerateName, n.Add(1))
		}
		return false, nil, nil
	})
	held := map[string]bool{}
	pools := func() map[string][]resourceapi.Device {
		return Devices(top, func(b *inventory.Block) bool { return !held[b.ID] })
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	delay := 10 * time.Millisecond
	c, err := resourceslice.StartController(ctx, resourceslice.Options{DriverName: DriverName, KubeClient: cs, Resources: Resources(pools()),
		SyncDelay: &delay, ErrorHandler: func(_ context.Context, err error, msg string) { t.Errorf("%s: %v", msg, err) }})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Stop()

	published := func() map[string]int { // device name → how many slices list it
		out := map[string]int{}
		list, err := cs.ResourceV1().ResourceSlices().List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range list.Items {
			if s.Spec.Driver != DriverName || s.Spec.PerDeviceNodeSelection == nil || !*s.Spec.PerDeviceNodeSelection {
				t.Fatalf("slice %s: driver %s, per-device node selection %v", s.Name, s.Spec.Driver, s.Spec.PerDeviceNodeSelection)
			}
			if len(s.Spec.Devices) > maxSliceDevices {
				t.Fatalf("slice %s holds %d devices", s.Name, len(s.Spec.Devices))
			}
			for _, d := range s.Spec.Devices {
				out[s.Spec.Pool.Name+"/"+d.Name]++
			}
		}
		return out
	}
	want := func() map[string]int {
		out := map[string]int{}
		for pool, devs := range pools() {
			for _, d := range devs {
				out[pool+"/"+d.Name] = 1
			}
		}
		return out
	}
	wait := func(what string) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for {
			got, w := published(), want()
			if len(got) == len(w) && func() bool {
				for k, v := range w {
					if got[k] != v {
						return false
					}
				}
				return true
			}() {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: published %d devices, want %d", what, len(got), len(w))
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	wait("the first publication")
	if got := published(); got["falcon1/gpu1"] != 1 || len(got) < 100 {
		t.Fatalf("published %d devices, gpu1 %d times", len(got), got["falcon1/gpu1"])
	}

	// gpu1 is composed: it leaves the pool.
	held["gpu1"] = true
	c.Update(Resources(pools()))
	wait("gpu1 composed")
	if published()["falcon1/gpu1"] != 0 {
		t.Error("gpu1 is still published after it was composed")
	}
	if !slices.ContainsFunc(pools()["falcon1"], func(d resourceapi.Device) bool { return d.Name == "gpu2" }) {
		t.Error("gpu2 left the pool with gpu1")
	}
}
