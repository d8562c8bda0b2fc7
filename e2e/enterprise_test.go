package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"rackpool/internal/childproc"
)

// TestExportImportAcrossStarts: export the allocation of one service with
// the CLI and start another on fresh state with --import: the same systems
// come back. A document that does not fit stops the start with an error
// and changes nothing.
func TestExportImportAcrossStarts(t *testing.T) {
	skipShort(t)
	src := startDefault(t, "--fabric-time", "instant")
	for _, args := range [][]string{{"compose", "--host", "host1", "gpu1", "hdd1"}, {"compose", "--host", "host3", "--need", "64GiB memory"}} {
		if out, err := src.cli(args...); err != nil {
			t.Fatalf("%v: %v\n%s", args, err, out)
		}
	}
	file := filepath.Join(t.TempDir(), "alloc.json")
	if out, err := src.cli("export", "-o", file); err != nil {
		t.Fatalf("export: %v\n%s", err, out)
	}
	dst := startDefault(t, "--fabric-time", "instant", "--import", file)
	if got, want := hostBlocks(t, dst), hostBlocks(t, src); got != want {
		t.Fatalf("imported allocation differs\n got %s\nwant %s", got, want)
	}
	// Importing into the same state again cannot fit: the start fails.
	dst.kill()
	cmd := childproc.Command(binary, "serve", "--addr", freeAddr(t), "--data", dst.data, "--import", file)
	cmd.Env = append(os.Environ(), "RACKPOOL_ADMIN_PASSWORD="+password)
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "--import") {
		t.Fatalf("a second import started: %v\n%s", err, out)
	}
	again := start(t, dst.data, []string{"RACKPOOL_ADMIN_PASSWORD=" + password}, "--fabric-time", "instant")
	if got, want := hostBlocks(t, again), hostBlocks(t, src); got != want {
		t.Fatalf("failed import changed state\n got %s\nwant %s", got, want)
	}
}

// hostBlocks renders the systems as "host:blocks" lines, sorted.
func hostBlocks(t *testing.T, s *server) string {
	t.Helper()
	out, err := s.cli("systems", "--json")
	if err != nil {
		t.Fatalf("systems: %v\n%s", err, out)
	}
	var systems []struct {
		Links struct {
			ResourceBlocks []struct {
				ID string `json:"@odata.id"`
			}
		}
	}
	if err := json.Unmarshal([]byte(out), &systems); err != nil {
		t.Fatalf("systems --json: %v\n%s", err, out)
	}
	var lines []string
	for _, sys := range systems {
		var ids []string
		for _, l := range sys.Links.ResourceBlocks {
			ids = append(ids, filepath.Base(l.ID))
		}
		lines = append(lines, strings.Join(ids, ","))
	}
	sort.Strings(lines)
	return strings.Join(lines, " | ")
}

// TestSlowComposeRunsAsTask: with real fabric time, four PCIe hot-plugs
// (400 ms modelled) exceed a 100 ms threshold, so the API answers 202 and
// the CLI follows the task monitor to the composed system.
func TestSlowComposeRunsAsTask(t *testing.T) {
	skipShort(t)
	srv := startDefault(t, "--async-threshold", "100ms")
	status, body := srv.request("POST", "/redfish/v1/Systems", `{"Links":{"ResourceBlocks":[`+
		`{"@odata.id":"/redfish/v1/CompositionService/ResourceBlocks/host1"},`+
		`{"@odata.id":"/redfish/v1/CompositionService/ResourceBlocks/gpu1"},{"@odata.id":"/redfish/v1/CompositionService/ResourceBlocks/gpu2"}]}}`, true)
	if status != 202 || !strings.Contains(body, "TaskMonitor") {
		t.Fatalf("slow compose: %d %s", status, body)
	}
	out, err := srv.cli("compose", "--host", "host3", "gpu3", "gpu4", "nvme1")
	if err != nil || !strings.Contains(out, "Composed on host3") {
		t.Fatalf("CLI through a task: %v\n%s", err, out)
	}
}

// TestPythonRedfishClient drives compose and decompose with the DMTF
// `redfish` library from PyPI, a real third-party client, installed in the
// virtual environment the conformance setup makes (scripts/pyenv.sh).
func TestPythonRedfishClient(t *testing.T) {
	skipShort(t)
	py := pythonWithRedfish(t)
	srv := startDefault(t, "--fabric-time", "instant")
	cmd := childproc.Command(py, "testdata/redfish_client.py", srv.url, "Administrator", password)
	cmd.Env = srv.env() // the library's requests trust the service's CA through REQUESTS_CA_BUNDLE
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("redfish_client.py: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "OK") {
		t.Fatalf("redfish_client.py did not finish:\n%s", out)
	}
	if systems := hostBlocks(t, srv); systems != "" {
		t.Fatalf("the script left systems: %s", systems)
	}
}

// pythonWithRedfish finds a Python that can import the redfish library:
// $RACKPOOL_PYTHON, else the repository's .venv-rf. make test creates the
// environment first, so a missing one fails the test rather than skipping.
func pythonWithRedfish(t *testing.T) string {
	t.Helper()
	py := os.Getenv("RACKPOOL_PYTHON")
	if py == "" {
		py = filepath.Join("..", ".venv-rf", "bin", "python")
	}
	if out, err := childproc.Command(py, "-c", "import redfish").CombinedOutput(); err != nil {
		t.Fatalf("no Python with the redfish library at %s (run scripts/pyenv.sh): %v\n%s", py, err, out)
	}
	return py
}
