package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	drapb "k8s.io/kubelet/pkg/apis/dra/v1"
	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"

	"rackpool/internal/childproc"
	"rackpool/internal/dra"
)

// kubeAPI serves what the kubelet plugin reads of the API server, a
// ResourceClaim by namespace and name, from kube's object tracker, on
// loopback; it returns a kubeconfig file for it.
func kubeAPI(t *testing.T, kube *fake.Clientset) string {
	t.Helper()
	mux := http.NewServeMux()
	mux.HandleFunc("GET /apis/resource.k8s.io/v1/namespaces/{ns}/resourceclaims/{name}", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		claim, err := kube.ResourceV1().ResourceClaims(r.PathValue("ns")).Get(r.Context(), r.PathValue("name"), metav1.GetOptions{})
		if err != nil {
			st := apierrors.NewNotFound(resourceapi.Resource("resourceclaims"), r.PathValue("name")).ErrStatus
			st.APIVersion, st.Kind = "v1", "Status"
			w.WriteHeader(http.StatusNotFound)
			_ = json.NewEncoder(w).Encode(st)
			return
		}
		claim.APIVersion, claim.Kind = "resource.k8s.io/v1", "ResourceClaim"
		_ = json.NewEncoder(w).Encode(claim)
	})
	// The helper's converting client asks the older versions for what v1
	// does not have.
	mux.HandleFunc("GET /apis/resource.k8s.io/{version}/namespaces/{ns}/resourceclaims/{name}", func(w http.ResponseWriter, r *http.Request) {
		http.NotFound(w, r)
	})
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		t.Errorf("the kubelet plugin asked the API server for %s %s", r.Method, r.URL.Path)
		http.NotFound(w, r)
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	cfg := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters: [{name: test, cluster: {server: %q}}]
users: [{name: test, user: {}}]
contexts: [{name: test, context: {cluster: test, user: test}}]
current-context: test
`, srv.URL)
	path := filepath.Join(t.TempDir(), "kubeconfig")
	write(t, path, cfg)
	return path
}

// waitFile waits until path exists (a socket the agent creates), or the
// agent has exited.
func waitFile(t *testing.T, path string, exited <-chan struct{}, logs *syncBuffer) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		if _, err := os.Stat(path); err == nil {
			return
		}
		select {
		case <-exited:
			t.Fatalf("the agent exited before %s appeared\nagent: %s", path, logs)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s did not appear in 30 s\nagent: %s", path, logs)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestDRAKubeletPlugin plays the kubelet against `rackpool agent --host
// host1 --dra-node worker-1`, the host agent on a sysfs tree this test
// plays kernel for, with a real serve: the plugin registers over its
// registration socket; the scheduler's allocator gives a claim gpu1 on
// worker-1, the controller composes it (the agent's attach step makes the
// host see it) and sets the binding condition; NodePrepareResources over
// the plugin's socket answers the claim's CDI device and writes its spec
// (the GPU's PCI address, NVIDIA's device nodes); a claim the API server
// does not have is refused; NodeUnprepareResources removes the spec;
// the controller's release takes the GPU off the host and the fabric.
func TestDRAKubeletPlugin(t *testing.T) {
	skipShort(t)
	s := startDefault(t, "--fabric-time", "instant", "--host-agents", "host1", "--host-agent-timeout", "20s")
	c := s.client()
	ctx := context.Background()
	agentPass := hostAgentAccount(t, c, "host1")
	k := startKernel(t)
	for _, d := range []string{"driver/nvidia/gpus/" + gpuBDF, "dev"} {
		if err := os.MkdirAll(filepath.Join(k.root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	write(t, filepath.Join(k.root, "driver/nvidia/gpus", gpuBDF, "information"), "Model: Tesla V100\nDevice Minor: 2\n")
	for _, n := range []string{"nvidia2", "nvidiactl"} {
		write(t, filepath.Join(k.root, "dev", n), "")
	}

	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "worker-1", Labels: map[string]string{dra.HostLabel: "host1"}}}
	kube := fake.NewClientset(node)
	kubeconfig := kubeAPI(t, kube)
	dirs := t.TempDir()
	registry, plugins, cdiDir := filepath.Join(dirs, "registry"), filepath.Join(dirs, "plugins"), filepath.Join(dirs, "cdi")
	if err := os.Mkdir(registry, 0o755); err != nil { // the kubelet's
		t.Fatal(err)
	}
	// Bad set-ups stop at once with the reason, before anything is served.
	for _, bad := range []struct {
		args []string
		want string
	}{
		{[]string{"--dra-node", "worker-1", "--kubeconfig", kubeconfig, "--kubelet-registry-dir", filepath.Join(dirs, "none")}, "--kubelet-registry-dir"},
		{[]string{"--dra-node", "worker-1", "--kubeconfig", filepath.Join(dirs, "none")}, "the cluster's configuration"},
		{[]string{"--interval", "1ms", "--dra-node", "worker-1"}, "--interval"},
	} {
		cmd := childproc.Command(binary, append([]string{"agent"}, bad.args...)...)
		if out, err := cmd.CombinedOutput(); err == nil || !strings.Contains(string(out), bad.want) {
			t.Errorf("agent %v: %v, %s; want an error naming %s", bad.args, err, out, bad.want)
		}
	}
	if out, err := childproc.Command(binary, "dra", "--grace", "0s", "--kubeconfig", kubeconfig).CombinedOutput(); err == nil || !strings.Contains(string(out), "--grace") {
		t.Errorf("dra --grace 0s: %v, %s", err, out)
	}

	agentLog := &syncBuffer{}
	agent := runAgentCmd(s, [2]string{"agent-host1", agentPass}, "--host", "host1", "--sysfs-root", k.root, "--proc-root", k.root,
		"--dev-root", filepath.Join(k.root, "dev"), "--dra-node", "worker-1", "--kubeconfig", kubeconfig, "--cdi-dir", cdiDir,
		"--kubelet-registry-dir", registry, "--kubelet-plugin-dir", plugins)
	agent.Stderr = agentLog
	if err := agent.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = agent.Wait(); close(exited) }()
	t.Cleanup(func() { _ = agent.Process.Kill(); <-exited })

	// Registration, as the kubelet's plugin watcher does it.
	regSock := filepath.Join(registry, dra.DriverName+"-reg.sock")
	waitFile(t, regSock, exited, agentLog)
	dial := func(path string) *grpc.ClientConn {
		conn, err := grpc.NewClient("unix://"+path, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close() })
		return conn
	}
	info, err := registerapi.NewRegistrationClient(dial(regSock)).GetInfo(ctx, &registerapi.InfoRequest{})
	if err != nil {
		t.Fatalf("GetInfo: %v\nagent: %s", err, agentLog)
	}
	if info.Type != registerapi.DRAPlugin || info.Name != dra.DriverName || !strings.HasPrefix(info.Endpoint, plugins) {
		t.Fatalf("registration info %+v", info)
	}
	if _, err := registerapi.NewRegistrationClient(dial(regSock)).NotifyRegistrationStatus(ctx,
		&registerapi.RegistrationStatus{PluginRegistered: true}); err != nil {
		t.Fatal(err)
	}
	waitFile(t, info.Endpoint, exited, agentLog)
	plugin := drapb.NewDRAPluginClient(dial(info.Endpoint))

	// The scheduler allocates gpu1 to a claim on worker-1; the controller
	// attaches it.
	rack := newDRARack(draClasses{"gpu1": celClass("gpu1",
		fmt.Sprintf(`device.driver == %q && device.attributes[%q].block == "gpu1"`, dra.DriverName, dra.DriverName))})
	claim := rack.allocate(t, kube, node, "train", "gpu1")
	a := rack.attacher(kube, c)
	if err := a.Reconcile(ctx, claim); err != nil {
		t.Fatal(err)
	}
	claim, _ = kube.ResourceV1().ResourceClaims("default").Get(ctx, "train", metav1.GetOptions{})
	if len(claim.Status.Devices) != 1 || claim.Status.Devices[0].Conditions[0].Type != dra.ConditionAttached {
		t.Fatalf("after the attach the claim's status is %+v\nagent: %s", claim.Status.Devices, agentLog)
	}
	if !k.visible() {
		t.Fatalf("gpu1 is attached but the host does not see it\nagent: %s", agentLog)
	}
	device := claim.Status.Allocation.Devices.Results[0]

	// A claim the API server does not have is refused; then the kubelet
	// prepares the pod's claim.
	if _, err := plugin.NodePrepareResources(ctx, &drapb.NodePrepareResourcesRequest{Claims: []*drapb.Claim{
		{Namespace: "default", Name: "gone", Uid: "uid-gone"}}}); err == nil || !strings.Contains(err.Error(), "gone") {
		t.Errorf("prepare of a claim the API server does not have: %v", err)
	}
	prep, err := plugin.NodePrepareResources(ctx, &drapb.NodePrepareResourcesRequest{Claims: []*drapb.Claim{
		{Namespace: "default", Name: "train", Uid: "uid-train"}}})
	if err != nil {
		t.Fatalf("NodePrepareResources: %v\nagent: %s", err, agentLog)
	}
	got := prep.Claims["uid-train"]
	wantID := dra.CDIDeviceID("uid-train", device.Device)
	if got == nil || got.Error != "" || len(got.Devices) != 1 || got.Devices[0].DeviceName != device.Device || got.Devices[0].PoolName != device.Pool ||
		!slices.Equal(got.Devices[0].CdiDeviceIds, []string{wantID}) || !slices.Equal(got.Devices[0].RequestNames, []string{"gpu1"}) {
		t.Fatalf("prepared %+v, want CDI device %s\nagent: %s", got, wantID, agentLog)
	}
	specFile := filepath.Join(cdiDir, dra.DriverName+"-uid-train.json")
	b, err := os.ReadFile(specFile)
	if err != nil {
		t.Fatal(err)
	}
	var spec struct {
		Kind    string
		Devices []struct {
			Name           string
			ContainerEdits struct {
				Env         []string
				DeviceNodes []struct{ Path, HostPath string }
			}
		}
	}
	if err := json.Unmarshal(b, &spec); err != nil {
		t.Fatal(err)
	}
	if spec.Kind != dra.CDIKind || len(spec.Devices) != 1 || spec.Kind+"="+spec.Devices[0].Name != wantID {
		t.Fatalf("CDI spec %s", b)
	}
	edits := spec.Devices[0].ContainerEdits
	var paths []string
	for _, n := range edits.DeviceNodes {
		paths = append(paths, n.Path)
	}
	if !slices.Contains(edits.Env, "RACKPOOL_OS_NAMES_GPU1="+gpuBDF) || !slices.Equal(paths, []string{"/dev/nvidia2", "/dev/nvidiactl"}) {
		t.Errorf("CDI edits %+v", edits)
	}

	// Unprepare (twice: the kubelet may repeat it), then release.
	for range 2 {
		un, err := plugin.NodeUnprepareResources(ctx, &drapb.NodeUnprepareResourcesRequest{Claims: []*drapb.Claim{
			{Namespace: "default", Name: "train", Uid: "uid-train"}}})
		if err != nil || un.Claims["uid-train"] == nil || un.Claims["uid-train"].Error != "" {
			t.Fatalf("NodeUnprepareResources: %v %+v", err, un)
		}
	}
	if _, err := os.Stat(specFile); err == nil {
		t.Error("the CDI spec is still there after the unprepare")
	}
	if err := a.Release(ctx, claim); err != nil {
		t.Fatalf("release: %v\nagent: %s", err, agentLog)
	}
	if k.visible() {
		t.Error("released, but the GPU is still on the host")
	}
	if systems, _ := c.Systems(ctx); countComposed(systems) != 0 {
		t.Errorf("after the release: %d compositions", countComposed(systems))
	}
}
