package e2e

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/vishvananda/netns"

	"rackpool/api"
	"rackpool/internal/childproc"
)

// fabricEmulator is one running `rackpool fabric-emulator`.
type fabricEmulator struct {
	fabric  string // the fabric it serves
	url, ca string
	http    *http.Client
	stderr  *syncBuffer
	cmd     *exec.Cmd
}

const fmPassword = "Fm-Secret-4-Tests"

func startFabricEmulator(t *testing.T, fabricID string, flags ...string) *fabricEmulator {
	t.Helper()
	data := t.TempDir()
	for try := 1; ; try++ {
		addr := freeAddr(t)
		args := append([]string{"fabric-emulator", "--fabric", fabricID, "--addr", addr, "--data", data}, flags...)
		e := &fabricEmulator{fabric: fabricID, url: "https://" + addr, ca: filepath.Join(data, "tls", "ca.pem"), stderr: &syncBuffer{}}
		e.cmd = childproc.Command(binary, args...)
		e.cmd.Env = append(os.Environ(), "RACKPOOL_FM_PASSWORD="+fmPassword)
		e.cmd.Stderr = e.stderr
		if err := e.cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = e.cmd.Process.Kill(); _ = e.cmd.Wait() })
		for deadline := time.Now().Add(15 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
			if strings.Contains(e.stderr.String(), "serving") {
				cfg, err := api.TLSConfig(e.ca)
				if err != nil {
					t.Fatal(err)
				}
				e.http = &http.Client{Transport: &http.Transport{TLSClientConfig: cfg}, Timeout: 10 * time.Second}
				return e
			}
			if strings.Contains(e.stderr.String(), "address already in use") {
				break
			}
		}
		if try == 3 {
			t.Fatalf("fabric-emulator did not come up:\n%s", e.stderr)
		}
	}
}

// redfishRack writes the example rack with the fabric of each fm (by
// default only its PCIe fabric, falcon1) driven through the redfish driver
// by that emulator, and returns the file's path; serve needs fmEnv(fms...)
// (FALCON1_PASSWORD=fmPassword, …) in its environment.
func redfishRack(t *testing.T, fms ...*fabricEmulator) string {
	t.Helper()
	rack, err := os.ReadFile(filepath.Join("..", "examples", "rack.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	driven := string(rack)
	for _, fm := range fms {
		at := regexp.MustCompile(`(?m)^  - id: ` + regexp.QuoteMeta(fm.fabric) + `\n    kind: [a-z-]+\n`).FindString(driven)
		if at == "" {
			t.Fatalf("examples/rack.yaml no longer has fabric %s", fm.fabric)
		}
		driven = strings.Replace(driven, at, at+"    driver: redfish\n    manager: {url: \""+fm.url+"\", user: Administrator, password_env: "+
			strings.ToUpper(fm.fabric)+"_PASSWORD, ca_file: \""+fm.ca+"\"}\n", 1)
	}
	topo := filepath.Join(t.TempDir(), "rack.yaml")
	if err := os.WriteFile(topo, []byte(driven), 0o600); err != nil {
		t.Fatal(err)
	}
	return topo
}

// fmEnv is the environment serve needs for the fabric managers of fms.
func fmEnv(fms ...*fabricEmulator) []string {
	var env []string
	for _, fm := range fms {
		env = append(env, strings.ToUpper(fm.fabric)+"_PASSWORD="+fmPassword)
	}
	return env
}

// get reads a resource of the emulator as its administrator.
func (e *fabricEmulator) get(t *testing.T, path string) map[string]any {
	t.Helper()
	req, _ := http.NewRequest("GET", e.url+path, nil)
	req.SetBasicAuth("Administrator", fmPassword)
	resp, err := e.http.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d %s", path, resp.StatusCode, body)
	}
	var out map[string]any
	if err := json.Unmarshal(body, &out); err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	return out
}

// zoneMembers lists the endpoint Ids of the emulator's zone of the host
// port's initiator (nil when it has none).
func (e *fabricEmulator) zoneMembers(t *testing.T, fabricID, zone string) []string {
	t.Helper()
	zones := e.get(t, "/redfish/v1/Fabrics/"+fabricID+"/Zones")
	var out []string
	for _, m := range zones["Members"].([]any) {
		id := m.(map[string]any)["@odata.id"].(string)
		if !strings.HasSuffix(id, "/"+zone) {
			continue
		}
		z := e.get(t, id)
		links, _ := z["Links"].(map[string]any)
		eps, _ := links["Endpoints"].([]any)
		for _, ep := range eps {
			out = append(out, filepath.Base(ep.(map[string]any)["@odata.id"].(string)))
		}
	}
	slices.Sort(out)
	return out
}

// TestServeDrivesRedfishManager: serve drives the example rack's PCIe
// fabric through the redfish driver, on a fabric-emulator serving that
// fabric over HTTPS with its own CA: a composition is a zone on the
// manager, a decomposition takes it out, a 503 storm is ridden out, and a
// password missing from the environment stops serve with a clear error.
func TestServeDrivesRedfishManager(t *testing.T) {
	skipShort(t)
	fm := startFabricEmulator(t, "falcon1", "--fabric-time", "instant")
	topo := redfishRack(t, fm)

	// Without the password serve refuses to start, naming the variable.
	cmd := childproc.Command(binary, "serve", "--addr", freeAddr(t), "--data", t.TempDir(), "--topology", topo)
	cmd.Env = append(os.Environ(), "RACKPOOL_ADMIN_PASSWORD="+password, "FALCON1_PASSWORD=")
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "FALCON1_PASSWORD") || strings.Contains(string(out), fmPassword) {
		t.Fatalf("serve without the manager's password: %v\n%s", err, out)
	}

	s := start(t, t.TempDir(), []string{"RACKPOOL_ADMIN_PASSWORD=" + password, "FALCON1_PASSWORD=" + fmPassword},
		"--topology", topo, "--fabric-time", "instant")
	if strings.Contains(s.stderr.String(), fmPassword) {
		t.Errorf("serve logged the manager's password")
	}
	ctx := context.Background()
	c := s.client()
	sys, err := c.Compose(ctx, api.ComposeRequest{Host: "host1", Blocks: []string{"gpu1", "hdd1"}})
	if err != nil {
		t.Fatalf("compose through the redfish driver: %v\n%s", err, s.stderr)
	}
	if got := fm.zoneMembers(t, "falcon1", "host1-pcie"); !slices.Equal(got, []string{"gpu1", "host1-pcie"}) {
		t.Fatalf("the manager's zone of host1-pcie holds %v, want gpu1 and the initiator", got)
	}
	// A 503 storm on the manager: the driver retries through it.
	req, _ := http.NewRequest("POST", fm.url+"/redfish/v1/Fabrics/falcon1/Actions/Oem/Rackpool.InjectTransportFault",
		strings.NewReader(`{"Kind": "unavailable", "Count": 4}`))
	req.SetBasicAuth("Administrator", fmPassword)
	req.Header.Set("Content-Type", "application/json")
	if resp, err := fm.http.Do(req); err != nil || resp.StatusCode/100 != 2 {
		t.Fatalf("inject a 503 storm: %v %v", resp, err)
	}
	if _, err := c.Expand(ctx, sys.ID, []string{"nic1"}, nil, nil); err != nil {
		t.Fatalf("expand through a 503 storm: %v", err)
	}
	if got := fm.zoneMembers(t, "falcon1", "host1-pcie"); !slices.Equal(got, []string{"gpu1", "host1-pcie", "nic1"}) {
		t.Fatalf("after the expand the zone holds %v", got)
	}
	if err := c.Decompose(ctx, sys.ID); err != nil {
		t.Fatalf("decompose: %v", err)
	}
	if got := fm.zoneMembers(t, "falcon1", "host1-pcie"); slices.Contains(got, "gpu1") || slices.Contains(got, "nic1") {
		t.Fatalf("after the decompose the zone holds %v", got)
	}
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	_ = s.cmd.Wait()
}

// netnsNames lists the named network namespaces starting with "rp-".
func netnsNames(t *testing.T) []string {
	t.Helper()
	entries, err := os.ReadDir("/var/run/netns")
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), "rp-") {
			out = append(out, e.Name())
		}
	}
	return out
}

// TestServeDrivesNetns: serve builds the example rack's Ethernet fabric
// from network namespaces (driver: netns); a composition on it succeeds,
// a restart after kill -9 takes the same namespaces back, and a graceful
// stop removes every one.
func TestServeDrivesNetns(t *testing.T) {
	skipShort(t)
	if os.Geteuid() != 0 {
		t.Skip("the netns driver needs root")
	}
	rack, err := os.ReadFile(filepath.Join("..", "examples", "rack.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	const at = "  - id: vlan1\n    kind: ethernet-vlan\n"
	if !strings.Contains(string(rack), at) {
		t.Fatalf("examples/rack.yaml no longer has %q", at)
	}
	topo := filepath.Join(t.TempDir(), "rack.yaml")
	if err := os.WriteFile(topo, []byte(strings.Replace(string(rack), at, at+"    driver: netns\n", 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	before := netnsNames(t)
	t.Cleanup(func() { // whatever a failure left behind
		for _, n := range netnsNames(t) {
			if !slices.Contains(before, n) {
				_ = netns.DeleteNamed(n)
			}
		}
	})
	s := startDefault(t, "--topology", topo, "--fabric-time", "instant")
	made := slices.DeleteFunc(netnsNames(t), func(n string) bool { return slices.Contains(before, n) })
	if len(made) != 4+4 { // 4 host ports, 4 ExpEther SSDs
		t.Fatalf("serve made namespaces %v, want 8", made)
	}
	ctx := context.Background()
	sys, err := s.client().Compose(ctx, api.ComposeRequest{Host: "host2", Blocks: []string{"essd1", "essd2"}})
	if err != nil {
		t.Fatalf("compose on the netns fabric: %v", err)
	}
	s.kill()
	s2 := startAt(t, s.addr, s.data, []string{"RACKPOOL_ADMIN_PASSWORD=" + password}, "--topology", topo, "--fabric-time", "instant")
	if again := slices.DeleteFunc(netnsNames(t), func(n string) bool { return slices.Contains(before, n) }); !slices.Equal(again, made) {
		t.Fatalf("after kill -9 and restart: namespaces %v, want the same %v", again, made)
	}
	if got, err := s2.client().System(ctx, sys.ID); err != nil || got.Oem.Rackpool.CompositionState != "Composed" {
		t.Fatalf("after the restart: %v %v", got, err)
	}
	if err := s2.client().Decompose(ctx, sys.ID); err != nil {
		t.Fatalf("decompose: %v", err)
	}
	_ = s2.cmd.Process.Signal(syscall.SIGTERM)
	_ = s2.cmd.Wait()
	if left := slices.DeleteFunc(netnsNames(t), func(n string) bool { return slices.Contains(before, n) }); len(left) != 0 {
		t.Fatalf("after a graceful stop namespaces %v remain", left)
	}
}
