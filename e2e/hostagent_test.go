package e2e

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"rackpool/api"
)

// fakeKernel plays the kernel for a sysfs tree the agent works on: a "1"
// written to bus/pci/rescan makes the next PCI function appear (a GPU of
// the example rack's gpu1 model), a "1" written to a function's remove
// file makes it disappear. It polls, as the files are plain files.
type fakeKernel struct {
	root string
	stop chan struct{}
	done chan struct{}

	mu      sync.Mutex
	present bool // whether the "hardware" is attached (a rescan finds it)
}

const gpuBDF = "0000:03:00.0"

func startKernel(t *testing.T) *fakeKernel {
	root := t.TempDir()
	for _, d := range []string{"bus/pci/devices", "class/scsi_host", "devices/system/memory"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	write(t, filepath.Join(root, "bus/pci/rescan"), "")
	write(t, filepath.Join(root, "devices/system/memory/block_size_bytes"), "8000000\n")
	k := &fakeKernel{root: root, stop: make(chan struct{}), done: make(chan struct{}), present: true}
	go k.run()
	t.Cleanup(func() { close(k.stop); <-k.done })
	return k
}

func write(t *testing.T, path, s string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
}

func (k *fakeKernel) run() {
	defer close(k.done)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-k.stop:
			return
		case <-tick.C:
		}
		rescan := filepath.Join(k.root, "bus/pci/rescan")
		if b, _ := os.ReadFile(rescan); strings.TrimSpace(string(b)) == "1" {
			_ = os.WriteFile(rescan, nil, 0o644)
			k.mu.Lock()
			present := k.present
			k.mu.Unlock()
			dev := filepath.Join(k.root, "bus/pci/devices", gpuBDF)
			if _, err := os.Stat(dev); present && err != nil {
				_ = os.MkdirAll(dev, 0o755)
				for name, v := range map[string]string{"vendor": "0x10de\n", "device": "0x1db4\n", "current_link_width": "16\n",
					"current_link_speed": "16.0 GT/s PCIe\n", "enable": "1\n", "remove": ""} {
					_ = os.WriteFile(filepath.Join(dev, name), []byte(v), 0o644)
				}
			}
		}
		remove := filepath.Join(k.root, "bus/pci/devices", gpuBDF, "remove")
		if b, _ := os.ReadFile(remove); strings.TrimSpace(string(b)) == "1" {
			_ = os.RemoveAll(filepath.Dir(remove))
		}
	}
}

func (k *fakeKernel) visible() bool {
	_, err := os.Stat(filepath.Join(k.root, "bus/pci/devices", gpuBDF))
	return err == nil
}

// TestHostAgentSaga runs serve with host1 managed by its agent, the agent
// (`rackpool agent --host host1`) on a sysfs tree this test plays kernel
// for: a composition is Composed only once the device is visible on the
// host, a decomposition removes it from the host before the fabric; with
// the agent gone a composition rolls back after the host timeout, naming
// the step; a serve killed while a step is pending resumes it after its
// restart and the agent finishes it.
func TestHostAgentSaga(t *testing.T) {
	skipShort(t)
	s := startDefault(t, "--fabric-time", "instant", "--host-agents", "host1", "--host-agent-timeout", "3s")
	c := s.client()
	ctx := context.Background()
	agentPass := hostAgentAccount(t, c, "host1")
	k := startKernel(t)
	var agentLog *syncBuffer
	agent := func(srv *server) *exec.Cmd {
		cmd := runAgentCmd(srv, [2]string{"agent-host1", agentPass}, "--host", "host1", "--sysfs-root", k.root, "--proc-root", k.root)
		agentLog = &syncBuffer{}
		cmd.Stderr = agentLog
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
		return cmd
	}
	a := agent(s)

	sys, err := c.Compose(ctx, api.ComposeRequest{Host: "host1", Blocks: []string{"gpu1"}})
	if err != nil {
		t.Fatalf("compose on host1: %v\nagent: %s", err, agentLog)
	}
	if !k.visible() || sys.Oem.Rackpool.CompositionState != "Composed" {
		t.Fatalf("composed %s (%s) but the device is visible on the host: %v", sys.ID, sys.Oem.Rackpool.CompositionState, k.visible())
	}
	if err := c.Decompose(ctx, sys.ID); err != nil {
		t.Fatalf("decompose: %v\nagent: %s", err, agentLog)
	}
	if k.visible() {
		t.Fatalf("decomposed, but the device is still on the host")
	}

	// The hardware never shows up: the agent says so, the compose rolls
	// back with the agent's reason and the step's name.
	k.mu.Lock()
	k.present = false
	k.mu.Unlock()
	_, err = c.Compose(ctx, api.ComposeRequest{Host: "host1", Blocks: []string{"gpu1"}})
	if err == nil || !strings.Contains(err.Error(), "host-attach") {
		t.Fatalf("compose of a device the host never sees = %v, want an error naming host-attach", err)
	}
	k.mu.Lock()
	k.present = true
	k.mu.Unlock()
	if systems, _ := c.Systems(ctx); countComposed(systems) != 0 {
		t.Fatalf("after the rolled-back compose: %d compositions", countComposed(systems))
	}

	// The agent is gone: a compose waits, the server is killed meanwhile;
	// after the restart the agent comes back and the composition finishes.
	_ = a.Process.Kill()
	_ = a.Wait()
	errc := make(chan error, 1)
	go func() {
		_, err := c.Compose(ctx, api.ComposeRequest{Host: "host1", Blocks: []string{"gpu1"}})
		errc <- err
	}()
	waiting := false
	for deadline := time.Now().Add(2 * time.Second); !waiting && time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		systems, _ := c.Systems(ctx)
		for _, x := range systems {
			waiting = waiting || x.Oem.Rackpool.CompositionState == "Composing"
		}
	}
	if !waiting {
		t.Fatal("no composition waits for the agent")
	}
	s.kill()
	if err := <-errc; err == nil {
		t.Fatal("the compose answered although serve was killed before the agent confirmed")
	}
	s2 := startAt(t, s.addr, s.data, []string{"RACKPOOL_ADMIN_PASSWORD=" + password}, "--fabric-time", "instant",
		"--host-agents", "host1", "--host-agent-timeout", "10s")
	agent(s2)
	c2 := s2.client()
	var state string
	for deadline := time.Now().Add(15 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		systems, err := c2.Systems(ctx)
		if err != nil {
			continue
		}
		state = ""
		for _, x := range systems {
			if x.SystemType == "Composed" {
				state = x.Oem.Rackpool.CompositionState
			}
		}
		if state == "Composed" {
			break
		}
	}
	if state != "Composed" || !k.visible() {
		t.Fatalf("after the restart the composition is %q, device visible %v\nserve: %s\nagent: %s", state, k.visible(), s2.stderr, agentLog)
	}
}

// hostAgentAccount creates the HostAgent account agent-HOST of host and
// returns its password.
func hostAgentAccount(t *testing.T, c *api.Client, host string) string {
	t.Helper()
	pass := "Agent-Pass-7-" + host
	if _, err := c.Do(context.Background(), "POST", "/redfish/v1/AccountService/Accounts", map[string]any{"UserName": "agent-" + host,
		"Password": pass, "RoleId": "HostAgent", "Oem": map[string]any{"Rackpool": map[string]any{"Host": host}}}, nil); err != nil {
		t.Fatalf("create the agent's account: %v", err)
	}
	return pass
}

func countComposed(systems []api.System) int {
	n := 0
	for _, s := range systems {
		if s.SystemType == "Composed" {
			n++
		}
	}
	return n
}
