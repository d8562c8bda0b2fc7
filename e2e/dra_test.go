package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
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
	"k8s.io/dynamic-resource-allocation/resourceslice"
	"k8s.io/dynamic-resource-allocation/structured"

	"rackpool/api"
	"rackpool/internal/dra"
	"rackpool/internal/inventory"
	"rackpool/internal/topology"
)

type draClasses map[string]*resourceapi.DeviceClass

func (c draClasses) List() ([]*resourceapi.DeviceClass, error) {
	var out []*resourceapi.DeviceClass
	for _, dc := range c {
		out = append(out, dc)
	}
	return out, nil
}

func (c draClasses) Get(name string) (*resourceapi.DeviceClass, error) {
	if dc := c[name]; dc != nil {
		return dc, nil
	}
	return nil, fmt.Errorf("no device class %s", name)
}

// draRack is the example rack as the driver publishes it with every device
// free, and the scheduler's allocator over those slices.
type draRack struct {
	top       *topology.Topology
	pools     map[string][]resourceapi.Device
	slices    []*resourceapi.ResourceSlice
	classes   draClasses
	allocated sets.Set[structured.DeviceID]
}

// kindClasses are DeviceClasses named by kind, each selecting the driver's
// devices of that kind.
func kindClasses(kinds ...string) draClasses {
	out := draClasses{}
	for _, k := range kinds {
		out[k] = celClass(k, fmt.Sprintf(`device.driver == %q && device.attributes[%q].kind == %q`, dra.DriverName, dra.DriverName, k))
	}
	return out
}

func celClass(name, expr string) *resourceapi.DeviceClass {
	return &resourceapi.DeviceClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: resourceapi.DeviceClassSpec{
		Selectors: []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{Expression: expr}}}}}
}

func newDRARack(classes draClasses) *draRack {
	r := &draRack{top: topology.LoadDefault(), classes: classes, allocated: sets.New[structured.DeviceID]()}
	r.pools = dra.Devices(r.top, func(*inventory.Block) bool { return true })
	for pool, devs := range r.pools {
		r.slices = append(r.slices, &resourceapi.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: pool},
			Spec: resourceapi.ResourceSliceSpec{Driver: dra.DriverName, Pool: resourceapi.ResourcePool{Name: pool, Generation: 1, ResourceSliceCount: 1},
				PerDeviceNodeSelection: ptrTo(true), Devices: devs}})
	}
	return r
}

// blockOf is the block of a published device.
func (r *draRack) blockOf(pool, device string) (string, bool) {
	for _, d := range r.pools[pool] {
		if d.Name == device {
			return *d.Attributes["block"].StringValue, true
		}
	}
	return "", false
}

// attacher is the controller's Attacher for this rack.
func (r *draRack) attacher(kube *fake.Clientset, c *api.Client) *dra.Attacher {
	return &dra.Attacher{Kube: kube, Rackpool: c, BlockOf: r.blockOf,
		Describe: func(id string) (api.HostDevice, bool) { return dra.HostDevice(r.top.Block(id)) }}
}

// allocate has the scheduler's allocator give claim name one device of
// class on node, and stores the claim, allocated, as the scheduler would.
func (r *draRack) allocate(t *testing.T, kube *fake.Clientset, node *corev1.Node, name, class string) *resourceapi.ResourceClaim {
	t.Helper()
	ctx := context.Background()
	alloc, err := structured.NewAllocator(ctx, structured.Features{PartitionableDevices: true, DeviceBindingAndStatus: true},
		structured.AllocatedState{AllocatedDevices: r.allocated}, r.classes, r.slices, cel.NewCache(10, cel.Features{}))
	if err != nil {
		t.Fatal(err)
	}
	claim := &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID("uid-" + name)},
		Spec: resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{Requests: []resourceapi.DeviceRequest{{Name: class,
			Exactly: &resourceapi.ExactDeviceRequest{DeviceClassName: class, AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: 1}}}}}}
	results, err := alloc.Allocate(ctx, node, []*resourceapi.ResourceClaim{claim})
	if err != nil || len(results) != 1 {
		t.Fatalf("allocate %s: %v, %d results", name, err, len(results))
	}
	claim.Status.Allocation = &results[0]
	for _, res := range results[0].Devices.Results {
		r.allocated.Insert(structured.MakeDeviceID(res.Driver, res.Pool, res.Device))
	}
	got, err := kube.ResourceV1().ResourceClaims("default").Create(ctx, claim, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// composedBlocks lists the blocks of host's composed system (nil: none).
func composedBlocks(t *testing.T, c *api.Client, host string) []string {
	t.Helper()
	systems, err := c.Systems(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, sys := range systems {
		if sys.SystemType == "Composed" && sys.Oem.Rackpool.Host == host {
			var out []string
			for _, b := range sys.Oem.Rackpool.Blocks {
				out = append(out, b.ID)
			}
			return out
		}
	}
	return nil
}

// TestDRAAttach: Kubernetes' allocator places claims on the devices the
// driver publishes for a serve of the example rack; the Attacher composes
// each onto the node's rackpool system (a real serve) and sets the binding
// condition in the claim's status (client-go's fake clientset); a second
// reconcile changes nothing; a device the pool gave away meanwhile gets the
// failure condition and the system stays as it was.
func TestDRAAttach(t *testing.T) {
	skipShort(t)
	ctx := context.Background()
	s := startDefault(t, "--fabric-time", "instant")
	c := s.client()
	rack := newDRARack(kindClasses("gpu"))
	blockOf := rack.blockOf
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "worker-1", Labels: map[string]string{dra.HostLabel: "host1"}}}
	kube := fake.NewClientset(node)
	allocate := func(name string) *resourceapi.ResourceClaim { return rack.allocate(t, kube, node, name, "gpu") }
	condition := func(name string) (string, string) {
		t.Helper()
		claim, err := kube.ResourceV1().ResourceClaims("default").Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range claim.Status.Devices {
			for _, cond := range d.Conditions {
				if cond.Status == metav1.ConditionTrue {
					return cond.Type, cond.Message
				}
			}
		}
		return "", ""
	}
	hostSystem := func() []string { return composedBlocks(t, c, "host1") }
	a := &dra.Attacher{Kube: kube, Rackpool: c, BlockOf: blockOf}

	first := allocate("first")
	gpuA, _ := blockOf(first.Status.Allocation.Devices.Results[0].Pool, first.Status.Allocation.Devices.Results[0].Device)
	if err := a.Reconcile(ctx, first); err != nil {
		t.Fatal(err)
	}
	if typ, msg := condition("first"); typ != dra.ConditionAttached {
		t.Fatalf("first claim: condition %s (%s), want %s", typ, msg, dra.ConditionAttached)
	}
	if got := hostSystem(); !slices.Contains(got, gpuA) {
		t.Fatalf("host1's system holds %v, want %s", got, gpuA)
	}
	// Reconciled again (a restarted controller): nothing changes.
	again, _ := kube.ResourceV1().ResourceClaims("default").Get(ctx, "first", metav1.GetOptions{})
	if err := a.Reconcile(ctx, again); err != nil {
		t.Fatal(err)
	}
	if got := hostSystem(); len(got) != 2 {
		t.Fatalf("after a second reconcile host1's system holds %v", got)
	}

	// The second GPU is taken in rackpool before the attach (another
	// client composed it): the claim fails, host1's system is unchanged.
	second := allocate("second")
	gpuB, _ := blockOf(second.Status.Allocation.Devices.Results[0].Pool, second.Status.Allocation.Devices.Results[0].Device)
	if _, err := c.Compose(ctx, api.ComposeRequest{Name: "someone else", Blocks: []string{"host2", gpuB}}); err != nil {
		t.Fatal(err)
	}
	if err := a.Reconcile(ctx, second); err != nil {
		t.Fatal(err)
	}
	if typ, msg := condition("second"); typ != dra.ConditionAttachFailed {
		t.Fatalf("second claim: condition %s (%s), want %s", typ, msg, dra.ConditionAttachFailed)
	} else {
		t.Logf("second claim failed as it should: %s", msg)
	}
	if got := hostSystem(); slices.Contains(got, gpuB) || len(got) != 2 {
		t.Fatalf("after the failed attach host1's system holds %v", got)
	}

	// The controller: a claim allocated (stored with its allocation, as
	// the scheduler does) is attached without being asked.
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); dra.RunAttacher(runCtx, a, time.Second, slog.New(slog.DiscardHandler)) }()
	defer func() { cancel(); <-done }()
	start := time.Now()
	third := allocate("third")
	for {
		if typ, msg := condition("third"); typ == dra.ConditionAttached {
			t.Logf("allocation to binding condition True: %v", time.Since(start).Round(time.Millisecond))
			break
		} else if typ != "" || time.Since(start) > 20*time.Second {
			t.Fatalf("third claim: condition %q (%s) after %v", typ, msg, time.Since(start))
		}
		time.Sleep(5 * time.Millisecond)
	}
	gpuC, _ := blockOf(third.Status.Allocation.Devices.Results[0].Pool, third.Status.Allocation.Devices.Results[0].Device)
	if got := hostSystem(); !slices.Contains(got, gpuC) || len(got) != 3 {
		t.Fatalf("after the controller's attach host1's system holds %v", got)
	}
}

func ptrTo[T any](v T) *T { return &v }

// TestDRAFollowsThePool: the slices the driver publishes follow
// rackpool's pool from its event stream: a compose takes the block out, a
// decompose puts it back, each within a second; a device the fabric
// reports failed is published tainted (or left out where the cluster takes
// no taints) once serve's health monitor has seen it.
func TestDRAFollowsThePool(t *testing.T) {
	skipShort(t)
	// A failure is seen by serve's health monitor, every --monitor-interval.
	s := startDefault(t, "--fabric-time", "instant", "--monitor-interval", "250ms")
	c := s.client()
	var mu sync.Mutex
	var latest *resourceslice.DriverResources
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	var taints atomic.Bool
	taints.Store(true)
	again := make(chan struct{}, 1)
	go func() {
		defer close(done)
		dra.Follow(ctx, c, topology.LoadDefault(), func(r *resourceslice.DriverResources) {
			mu.Lock()
			latest = r
			mu.Unlock()
		}, &taints, again, slog.New(slog.DiscardHandler))
	}()
	defer func() { cancel(); <-done }()
	// offered says how device is published: "" not at all, "free", or
	// its taints' keys.
	offered := func(device string) (string, bool) {
		mu.Lock()
		defer mu.Unlock()
		if latest == nil {
			return "", false
		}
		for _, sl := range latest.Pools["falcon1"].Slices {
			for _, d := range sl.Devices {
				if d.Name == device {
					if len(d.Taints) == 0 {
						return "free", true
					}
					var keys []string
					for _, tn := range d.Taints {
						keys = append(keys, tn.Key+":"+string(tn.Effect))
					}
					return strings.Join(keys, ","), true
				}
			}
		}
		return "", true
	}
	until := func(what, device, want string) time.Duration {
		t.Helper()
		start := time.Now()
		for {
			got, ok := offered(device)
			if ok && got == want {
				return time.Since(start)
			}
			if time.Since(start) > 10*time.Second {
				t.Fatalf("%s: %s published as %q after 10 s, want %q", what, device, got, want)
			}
			time.Sleep(2 * time.Millisecond)
		}
	}
	until("the first publication", "gpu1", "free")
	sys, err := c.Compose(context.Background(), api.ComposeRequest{Name: "k", Blocks: []string{"host1", "gpu1"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("compose to gpu1 out of the slices: %v", until("after the compose", "gpu1", "").Round(time.Millisecond))
	if err := c.Decompose(context.Background(), sys.ID); err != nil {
		t.Fatal(err)
	}
	t.Logf("decompose to gpu1 back in the slices: %v", until("after the decompose", "gpu1", "free").Round(time.Millisecond))

	if _, err := c.Do(ctx, "POST", "/redfish/v1/Fabrics/falcon1/Actions/Oem/Rackpool.InjectFault",
		map[string]any{"Kind": "device-fails", "Target": "gpu2"}, nil); err != nil {
		t.Fatal(err)
	}
	t.Logf("gpu2 failed to tainted in the slices: %v",
		until("after gpu2 failed", "gpu2", dra.TaintUnhealthy+":"+string(resourceapi.DeviceTaintEffectNoSchedule)).Round(time.Millisecond))
	taints.Store(false) // the API server dropped the taints
	again <- struct{}{}
	until("once taints are off", "gpu2", "")
	if _, err := c.Do(ctx, "POST", "/redfish/v1/Fabrics/falcon1/Actions/Oem/Rackpool.ClearFaults", map[string]any{}, nil); err != nil {
		t.Fatal(err)
	}
	until("after the fault is cleared", "gpu2", "free")
}

// TestDRARun runs the whole controller (dra.Run) against a real serve and
// client-go's fake clientset: the slices appear in the API, the
// scheduler's allocator places a claim for two GPUs on one drawer from
// them, the controller composes both onto the node's system and sets their
// binding conditions, and the slices stop offering them.
func TestDRARun(t *testing.T) {
	skipShort(t)
	s := startDefault(t, "--fabric-time", "instant")
	c := s.client()
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "worker-3", Labels: map[string]string{dra.HostLabel: "host3"}}}
	kube := fake.NewClientset(node)
	var n atomic.Int64
	kube.PrependReactor("create", "resourceslices", func(a k8stesting.Action) (bool, runtime.Object, error) {
		sl := a.(k8stesting.CreateAction).GetObject().(*resourceapi.ResourceSlice)
		if sl.Name == "" {
			sl.Name = fmt.Sprintf("%s%d", sl.GenerateName, n.Add(1))
		}
		return false, nil, nil
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- dra.Run(ctx, dra.Options{Kube: kube, Rackpool: c, Topology: topology.LoadDefault(), Grace: 200 * time.Millisecond,
			Logger: slog.New(slog.DiscardHandler)})
	}()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()
	published := func() []*resourceapi.ResourceSlice {
		list, err := kube.ResourceV1().ResourceSlices().List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		var out []*resourceapi.ResourceSlice
		for i := range list.Items {
			out = append(out, &list.Items[i])
		}
		return out
	}
	offers := func(device string) bool {
		for _, sl := range published() {
			for _, d := range sl.Spec.Devices {
				if d.Name == device {
					return true
				}
			}
		}
		return false
	}
	waitFor := func(what string, ok func() bool) time.Duration {
		t.Helper()
		start := time.Now()
		for !ok() {
			if time.Since(start) > 20*time.Second {
				t.Fatalf("%s: not after 20 s", what)
			}
			time.Sleep(5 * time.Millisecond)
		}
		return time.Since(start)
	}
	waitFor("the slices published", func() bool { return offers("gpu5") })

	drawer := resourceapi.FullyQualifiedName(dra.DriverName + "/drawer")
	classes := draClasses{"gpu": &resourceapi.DeviceClass{ObjectMeta: metav1.ObjectMeta{Name: "gpu"}, Spec: resourceapi.DeviceClassSpec{
		Selectors: []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{
			Expression: fmt.Sprintf(`device.driver == %q && device.attributes[%q].kind == "gpu"`, dra.DriverName, dra.DriverName)}}}}}}
	alloc, err := structured.NewAllocator(ctx, structured.Features{PartitionableDevices: true, DeviceBindingAndStatus: true},
		structured.AllocatedState{AllocatedDevices: sets.New[structured.DeviceID]()}, classes, published(), cel.NewCache(10, cel.Features{}))
	if err != nil {
		t.Fatal(err)
	}
	claim := &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: "train", Namespace: "default", UID: "uid-train"},
		Spec: resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{
			Requests: []resourceapi.DeviceRequest{{Name: "gpus", Exactly: &resourceapi.ExactDeviceRequest{DeviceClassName: "gpu",
				AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: 2}}},
			Constraints: []resourceapi.DeviceConstraint{{Requests: []string{"gpus"}, MatchAttribute: &drawer}}}}}
	results, err := alloc.Allocate(ctx, node, []*resourceapi.ResourceClaim{claim})
	if err != nil || len(results) != 1 {
		t.Fatalf("allocate: %v, %d results", err, len(results))
	}
	claim.Status.Allocation = &results[0]
	start := time.Now()
	if _, err := kube.ResourceV1().ResourceClaims("default").Create(ctx, claim, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var devices []string
	for _, r := range results[0].Devices.Results {
		devices = append(devices, r.Device)
	}
	waitFor("both binding conditions True", func() bool {
		got, err := kube.ResourceV1().ResourceClaims("default").Get(ctx, "train", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		attached := 0
		for _, d := range got.Status.Devices {
			for _, cond := range d.Conditions {
				if cond.Type == dra.ConditionAttached && cond.Status == metav1.ConditionTrue {
					attached++
				} else if cond.Status == metav1.ConditionTrue {
					t.Fatalf("%s: %s %s", d.Device, cond.Type, cond.Message)
				}
			}
		}
		return attached == 2
	})
	t.Logf("allocation of two GPUs to both binding conditions True: %v", time.Since(start).Round(time.Millisecond))
	systems, err := c.Systems(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var held []string
	for _, sys := range systems {
		if sys.SystemType == "Composed" && sys.Oem.Rackpool.Host == "host3" {
			for _, b := range sys.Oem.Rackpool.Blocks {
				held = append(held, b.ID)
			}
		}
	}
	for _, d := range devices {
		if !slices.Contains(held, d) {
			t.Errorf("host3's system holds %v, not %s", held, d)
		}
	}
	waitFor("the slices stop offering the attached GPUs", func() bool { return !offers(devices[0]) && !offers(devices[1]) })

	// The claim goes (its pod ended): after the grace the GPUs leave
	// host3's system, which goes with them, and the slices offer them again.
	if err := kube.ResourceV1().ResourceClaims("default").Delete(ctx, "train", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	took := waitFor("the GPUs released", func() bool { return offers(devices[0]) && offers(devices[1]) })
	t.Logf("claim deleted to the GPUs offered again: %v (grace 200ms)", took.Round(time.Millisecond))
	systems, err = c.Systems(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, sys := range systems {
		if sys.SystemType == "Composed" {
			t.Errorf("system %s (%v) left after the release", sys.ID, sys.Oem.Rackpool.Blocks)
		}
	}
}

// TestDRARace: two clusters (two controllers, each with its own API) are
// given the same GPU for nodes of different hosts at once: exactly one
// composes it, the other's claim fails cleanly, and rackpool holds it once.
func TestDRARace(t *testing.T) {
	skipShort(t)
	ctx := context.Background()
	s := startDefault(t, "--fabric-time", "instant")
	c := s.client()
	top := topology.LoadDefault()
	pools := dra.Devices(top, func(*inventory.Block) bool { return true })
	blockOf := func(pool, device string) (string, bool) {
		for _, d := range pools[pool] {
			if d.Name == device {
				return *d.Attributes["block"].StringValue, true
			}
		}
		return "", false
	}
	type cluster struct {
		kube  *fake.Clientset
		a     *dra.Attacher
		claim *resourceapi.ResourceClaim
	}
	var clusters []*cluster
	for i, host := range []string{"host1", "host2"} {
		nodeName := fmt.Sprintf("worker-%d", i)
		kube := fake.NewClientset(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: nodeName, Labels: map[string]string{dra.HostLabel: host}}})
		claim := &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: "race", Namespace: "default", UID: types.UID(fmt.Sprintf("uid-%d", i))},
			Status: resourceapi.ResourceClaimStatus{Allocation: &resourceapi.AllocationResult{
				Devices: resourceapi.DeviceAllocationResult{Results: []resourceapi.DeviceRequestAllocationResult{{Request: "gpu", Driver: dra.DriverName,
					Pool: "falcon1", Device: "gpu1", BindingConditions: []string{dra.ConditionAttached}, BindingFailureConditions: []string{dra.ConditionAttachFailed}}}},
				NodeSelector: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchFields: []corev1.NodeSelectorRequirement{
					{Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: []string{nodeName}}}}}}}}}
		created, err := kube.ResourceV1().ResourceClaims("default").Create(ctx, claim, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		clusters = append(clusters, &cluster{kube: kube, a: &dra.Attacher{Kube: kube, Rackpool: c, BlockOf: blockOf}, claim: created})
	}
	var wg sync.WaitGroup
	for _, cl := range clusters {
		wg.Go(func() {
			if err := cl.a.Reconcile(ctx, cl.claim); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	won := 0
	for i, cl := range clusters {
		got, err := cl.kube.ResourceV1().ResourceClaims("default").Get(ctx, "race", metav1.GetOptions{})
		if err != nil || len(got.Status.Devices) != 1 || len(got.Status.Devices[0].Conditions) != 1 {
			t.Fatalf("cluster %d: claim status %+v, %v", i, got.Status.Devices, err)
		}
		cond := got.Status.Devices[0].Conditions[0]
		t.Logf("cluster %d: %s %s", i, cond.Type, cond.Message)
		if cond.Type == dra.ConditionAttached {
			won++
		}
	}
	if won != 1 {
		t.Fatalf("%d clusters attached gpu1, want exactly 1", won)
	}
	systems, err := c.Systems(ctx)
	if err != nil {
		t.Fatal(err)
	}
	holders := 0
	for _, sys := range systems {
		if sys.SystemType != "Composed" {
			continue
		}
		for _, b := range sys.Oem.Rackpool.Blocks {
			if b.ID == "gpu1" {
				holders++
			}
		}
		if len(sys.Oem.Rackpool.Blocks) < 2 {
			t.Errorf("system %s is left with %v: a failed attach leaked a system", sys.ID, sys.Oem.Rackpool.Blocks)
		}
	}
	if holders != 1 {
		t.Errorf("gpu1 is in %d systems", holders)
	}
}

// TestDRARestartMidAttach: a controller that composed a device and died
// before it wrote the condition is followed by one that finds the device
// already on the node's system: it reports it attached without composing
// it again, and nothing is left over.
func TestDRARestartMidAttach(t *testing.T) {
	skipShort(t)
	ctx := context.Background()
	s := startDefault(t, "--fabric-time", "instant")
	c := s.client()
	// What the first controller did before it died: the node's system.
	if _, err := c.Compose(ctx, api.ComposeRequest{Name: "k8s host1", Blocks: []string{"host1", "gpu1"}}); err != nil {
		t.Fatal(err)
	}
	kube := fake.NewClientset(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "worker", Labels: map[string]string{dra.HostLabel: "host1"}}})
	claim, err := kube.ResourceV1().ResourceClaims("default").Create(ctx, &resourceapi.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: "default", UID: "uid-c"},
		Status: resourceapi.ResourceClaimStatus{Allocation: &resourceapi.AllocationResult{
			Devices: resourceapi.DeviceAllocationResult{Results: []resourceapi.DeviceRequestAllocationResult{{Request: "gpu", Driver: dra.DriverName,
				Pool: "falcon1", Device: "gpu1", BindingConditions: []string{dra.ConditionAttached}, BindingFailureConditions: []string{dra.ConditionAttachFailed}}}},
			NodeSelector: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchFields: []corev1.NodeSelectorRequirement{
				{Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: []string{"worker"}}}}}}}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	a := &dra.Attacher{Kube: kube, Rackpool: c, BlockOf: func(pool, device string) (string, bool) { return device, pool == "falcon1" }}
	if err := a.Reconcile(ctx, claim); err != nil {
		t.Fatal(err)
	}
	got, _ := kube.ResourceV1().ResourceClaims("default").Get(ctx, "c", metav1.GetOptions{})
	if len(got.Status.Devices) != 1 || got.Status.Devices[0].Conditions[0].Type != dra.ConditionAttached {
		t.Fatalf("the restarted controller's condition: %+v", got.Status.Devices)
	}
	systems, err := c.Systems(ctx)
	if err != nil {
		t.Fatal(err)
	}
	composed := 0
	for _, sys := range systems {
		if sys.SystemType == "Composed" {
			composed++
			if sys.Oem.Rackpool.Version != 2 || len(sys.Oem.Rackpool.Blocks) != 2 {
				t.Errorf("system %s: version %d, blocks %v: the restart changed it", sys.ID, sys.Oem.Rackpool.Version, sys.Oem.Rackpool.Blocks)
			}
		}
	}
	if composed != 1 {
		t.Errorf("%d composed systems after the restart, want 1", composed)
	}
}

// TestDRAKindsAndFaults: claims for an NVMe drive and for pooled memory are
// placed by the scheduler's allocator and composed onto the node's system
// with their descriptions in the claim's status; an attach the fabric
// fails (an injected fault) gives the claim the failure condition with the
// fabric's reason and leaves the node's system as it was; the next claim
// attaches; releasing every claim leaves nothing composed, except pooled
// memory while the provisioning loop sizes the node's system.
func TestDRAKindsAndFaults(t *testing.T) {
	skipShort(t)
	ctx := context.Background()
	// The provisioning loop is on but does not step during the test.
	s := startDefault(t, "--fabric-time", "instant", "--provisioning", "on", "--provisioning-interval", "1h")
	c := s.client()
	rack := newDRARack(kindClasses("gpu", "nvme", "memory"))
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "worker-1", Labels: map[string]string{dra.HostLabel: "host1"}}}
	kube := fake.NewClientset(node)
	a := rack.attacher(kube, c)
	// attach reconciles a new claim for class and returns it with the
	// block it was given, its condition and its recorded description.
	attach := func(name, class string) (*resourceapi.ResourceClaim, string, metav1.Condition, api.HostDevice) {
		t.Helper()
		claim := rack.allocate(t, kube, node, name, class)
		if err := a.Reconcile(ctx, claim); err != nil {
			t.Fatal(err)
		}
		claim, _ = kube.ResourceV1().ResourceClaims("default").Get(ctx, name, metav1.GetOptions{})
		r := claim.Status.Allocation.Devices.Results[0]
		if len(claim.Status.Devices) != 1 || len(claim.Status.Devices[0].Conditions) != 1 {
			t.Fatalf("%s: status %+v", name, claim.Status.Devices)
		}
		var hd api.HostDevice
		if d := claim.Status.Devices[0].Data; d != nil {
			if err := json.Unmarshal(d.Raw, &hd); err != nil {
				t.Fatal(err)
			}
		}
		block, _ := rack.blockOf(r.Pool, r.Device)
		return claim, block, claim.Status.Devices[0].Conditions[0], hd
	}
	hostBlocks := func() []string { return composedBlocks(t, c, "host1") }
	var claims []*resourceapi.ResourceClaim
	for _, kind := range []string{"nvme", "memory"} {
		claim, block, cond, hd := attach("want-"+kind, kind)
		if cond.Type != dra.ConditionAttached || hd.Block != block || hd.Kind != kind || hd.Bytes <= 0 {
			t.Fatalf("%s claim: block %s, condition %s (%s), description %+v", kind, block, cond.Type, cond.Message, hd)
		}
		if !slices.Contains(hostBlocks(), block) {
			t.Fatalf("%s claim: host1's system holds %v, not %s", kind, hostBlocks(), block)
		}
		claims = append(claims, claim)
	}

	// The fabric fails the next attach of a GPU.
	fabricOf := func(class string) string {
		for pool, devs := range rack.pools {
			for _, d := range devs {
				if *d.Attributes["kind"].StringValue == class && slices.Contains(d.NodeSelector.NodeSelectorTerms[0].MatchExpressions[0].Values, "host1") {
					return pool
				}
			}
		}
		t.Fatalf("no %s reaches host1", class)
		return ""
	}
	if _, err := c.Do(ctx, "POST", "/redfish/v1/Fabrics/"+fabricOf("gpu")+"/Actions/Oem/Rackpool.InjectFault",
		map[string]any{"Kind": "attach-fails", "Count": 1}, nil); err != nil {
		t.Fatal(err)
	}
	before := hostBlocks()
	_, block, cond, hd := attach("want-gpu", "gpu")
	if cond.Type != dra.ConditionAttachFailed || cond.Message == "" || hd.Block != "" {
		t.Fatalf("a failed attach of %s: condition %s (%s), description %+v", block, cond.Type, cond.Message, hd)
	}
	t.Logf("failed attach: %s", cond.Message)
	if got := hostBlocks(); !slices.Equal(got, before) {
		t.Fatalf("after the failed attach host1's system holds %v, before %v", got, before)
	}
	claim, block, cond, _ := attach("want-gpu-again", "gpu")
	if cond.Type != dra.ConditionAttached || !slices.Contains(hostBlocks(), block) {
		t.Fatalf("the next GPU claim: %s (%s)", cond.Type, cond.Message)
	}
	claims = append(claims, claim)

	// The provisioning loop sizes host1's system: its memory is kept
	// warm on release, the rest goes.
	systems, err := c.Systems(ctx)
	if err != nil {
		t.Fatal(err)
	}
	sysID := ""
	for _, sys := range systems {
		if sys.SystemType == "Composed" && sys.Oem.Rackpool.Host == "host1" {
			sysID = sys.ID
		}
	}
	if _, err := c.Subscribe(ctx, sysID, "On", 0, 0); err != nil {
		t.Fatal(err)
	}
	memResult := claims[1].Status.Allocation.Devices.Results[0]
	memBlock, _ := rack.blockOf(memResult.Pool, memResult.Device)
	for _, claim := range claims {
		if err := a.Release(ctx, claim); err != nil {
			t.Fatalf("release %s: %v", claim.Name, err)
		}
	}
	if got := hostBlocks(); !slices.Equal(got, []string{"host1", memBlock}) {
		t.Fatalf("released with the provisioning loop On: host1's system holds %v, want host1 and the memory %s", got, memBlock)
	}
	// Once the loop no longer sizes it, the memory goes too.
	if err := c.Unsubscribe(ctx, sysID); err != nil {
		t.Fatal(err)
	}
	if err := a.Release(ctx, claims[1]); err != nil {
		t.Fatal(err)
	}
	if systems, _ := c.Systems(ctx); countComposed(systems) != 0 {
		t.Fatalf("after releasing every claim: %d compositions, host1 holds %v", countComposed(systems), hostBlocks())
	}
}
