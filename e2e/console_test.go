package e2e

// The web console in a real browser: e2e/console_test.mjs drives headless
// Chromium (Debian's chromium) with playwright-core (ui/node_modules, from
// make ui) against the serve these tests start. Screenshots go to
// build/console (CI keeps build/; the ones in docs/console.md come from
// there); axe-core (ui/node_modules too) checks every view's
// accessibility.

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"rackpool/internal/childproc"
	"rackpool/internal/topology"
)

// consoleRun runs console_test.mjs in mode against s and returns its
// output. The runner is in a process group of its own, killed in the
// test's cleanup; it closes its browsers on SIGTERM, which it is sent
// should this process die (Linux's parent-death signal), and when its
// stdin, a pipe only this process holds, ends.
func consoleRun(t *testing.T, s *server, args ...string) string {
	t.Helper()
	browser := ""
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			browser = p
			break
		}
	}
	node, _ := exec.LookPath("node")
	modules, _ := filepath.Abs(filepath.Join("..", "ui", "node_modules"))
	shots, _ := filepath.Abs(filepath.Join("..", "build", "console"))
	for _, need := range []struct{ what, path, fix string }{
		{"chromium (Debian's, on PATH)", browser, "install it: apt-get install chromium"},
		{"node (Node.js 20 or later, on PATH)", node, "install it: apt-get install nodejs npm"},
		{"ui/node_modules/playwright-core", filepath.Join(modules, "playwright-core", "package.json"), "run make ui"},
		{"ui/node_modules/axe-core", filepath.Join(modules, "axe-core", "axe.min.js"), "run make ui"},
	} {
		if _, err := os.Stat(need.path); need.path == "" || err != nil {
			if os.Getenv("RACKPOOL_E2E") != "" {
				t.Fatalf("the console's browser test needs %s, which is missing: %s", need.what, need.fix)
			}
			t.Skipf("%s is missing (%s)", need.what, need.fix)
		}
	}
	cmd := childproc.Bind(exec.Command(node, append([]string{"console_test.mjs"}, args...)...))
	cmd.SysProcAttr.Pdeathsig = syscall.SIGTERM // so that it can close its browsers
	cmd.Env = append(s.env(), "CHROMIUM="+browser, "SHOTS="+shots, "CONSOLE_TEST_PARENT=stdin")
	var out syncBuffer
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.WaitDelay = time.Minute // a grandchild holding the output pipe open
	if _, err := cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start the console's browser test: %v", err)
	}
	t.Cleanup(func() {
		childproc.Stop(cmd)
		_ = cmd.Wait()
	})
	if err := cmd.Wait(); err != nil {
		t.Fatalf("console_test.mjs %v: %v\n%s", args, err, out.String())
	}
	return out.String()
}

// TestConsole: every view and its empty states, the topology fitted to the
// window, the dashboard's counts, compose (refused with its explanation,
// bad input beside its field, then applied), live updates, decompose,
// export and re-import, an expired session, tenant isolation and the
// read-only role, in Chromium (console_test.mjs says how each is checked).
func TestConsole(t *testing.T) {
	skipShort(t)
	s := startDefault(t, "--fabric-time", "instant")
	out := consoleRun(t, s, "console")
	t.Log(out)
}

// rangesTopology has a rack of 70 hosts and a fabric of 70 switches: more
// than the topology view draws one by one.
const rangesTopology = `name: ranges
racks:
  - id: rackA
    hosts:
      - {id: "a{n}", count: 70, cores: 8, memory: 16GiB, ports: [{id: eth, fabric: vlan1, port: "{n}", metres: 2}]}
  - id: rackB
    hosts:
      - id: "b{n}"
        count: 2
        cores: 8
        memory: 16GiB
        ports:
          - {id: eth, fabric: vlan1, port: "10{n}", metres: 2}
          - {id: ocs, fabric: ocsB, port: "{n}", metres: 2}
fabrics:
  - id: vlan1
    kind: ethernet-vlan
    switches: [{id: sw, ports: 256, latency_ns: 500}]
    devices:
      - {id: "nic{n}", count: 4, kind: nic, model: CX6, port: "200", metres: 1}
  - id: ocsB
    kind: optical-circuit
    switches: [{id: osw, ports: 48, latency_ns: 25}]
    devices:
      - {id: memB, kind: memory, capacity: 64GiB, block_size: 8GiB, ports: ["21"], metres: 2}
  - id: lonely
    kind: sas-circuit
    switches: [{id: "s{n}", count: 70, ports: 16, latency_ns: 100}]
    devices:
      - {id: "hdd{n}", count: 3, kind: hdd, model: H, capacity: 1TB, switch: s2, port: "5", metres: 1}
`

// TestConsoleRanges: a rack of more hosts, and a fabric of more switches,
// than the topology draws one by one show them as ranges that open and
// close, and that search opens (console_test.mjs, mode ranges).
func TestConsoleRanges(t *testing.T) {
	skipShort(t)
	file := filepath.Join(t.TempDir(), "ranges.yaml")
	if err := os.WriteFile(file, []byte(rangesTopology), 0o644); err != nil {
		t.Fatal(err)
	}
	s := startDefault(t, "--topology", file, "--fabric-time", "instant")
	t.Log(consoleRun(t, s, "ranges"))
}

// TestConsolePaint measures the first meaningful paint of the topology at
// 10^4 and 10^5 blocks and on the P4 pod, and of the blocks list at 10^5
// rows and on the pod (docs/benchmarks.md):
// measured, never asserted on time. The results are written to
// build/console/paint.json.
func TestConsolePaint(t *testing.T) {
	skipShort(t)
	if os.Getenv("RACKPOOL_CONSOLE_PAINT") == "" {
		t.Skip("set RACKPOOL_CONSOLE_PAINT=1 (make bench-console) to measure the console's first paint at scale")
	}
	var results []json.RawMessage
	for _, c := range []struct {
		racks        int // 0: the P4 pod (245,760 blocks)
		route, ready string
	}{
		{100, "/topology", "[data-testid=topology-svg][data-ready='1']"},
		{1000, "/blocks", "[data-testid=blocks-table] [data-row]"},
		{1000, "/topology", "[data-testid=topology-svg][data-ready='1']"},
		{0, "/blocks", "[data-testid=blocks-table] [data-row]"},
		{0, "/topology", "[data-testid=topology-svg][data-ready='1']"},
	} {
		dir := t.TempDir()
		file := filepath.Join(dir, "racks.yaml")
		blocks := c.racks * 100
		if c.racks == 0 {
			blocks = 245_760
			if out, err := childproc.Command(binary, "sim", "--scenario", filepath.Join("..", "examples", "sim", "monet-p4-scale.yaml"),
				"--write-topology", file).CombinedOutput(); err != nil {
				t.Fatalf("write the P4 pod: %v\n%s", err, out)
			}
		} else if err := os.WriteFile(file, topology.GenerateRacks(c.racks), 0o644); err != nil {
			t.Fatal(err)
		}
		old := startTimeout
		startTimeout *= 10
		s := startDefault(t, "--topology", file, "--fabric-time", "instant")
		startTimeout = old
		out := consoleRun(t, s, "perf", c.route, c.ready)
		for _, l := range strings.Split(out, "\n") {
			if strings.HasPrefix(l, "{") {
				t.Logf("%d blocks: %s", blocks, l)
				results = append(results, json.RawMessage(strings.Replace(l, "{", `{"blocks": `+strconv.Itoa(blocks)+", ", 1)))
			}
		}
		s.kill()
	}
	b, _ := json.MarshalIndent(results, "", "  ")
	_ = os.MkdirAll(filepath.Join("..", "build", "console"), 0o755)
	if err := os.WriteFile(filepath.Join("..", "build", "console", "paint.json"), b, 0o644); err != nil {
		t.Fatal(err)
	}
}
