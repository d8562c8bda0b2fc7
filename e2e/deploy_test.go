package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"rackpool/examples"
	"rackpool/internal/bmc/bmctest"
	"rackpool/internal/childproc"
)

// TestDeployWithSushy drives Ironic's deploy flow with sushy, Ironic's
// Redfish library, against rackpool serve (testdata/deploy_sushy.py):
// compose, a one-time PXE boot, reset On, PowerState, power off,
// decompose, and the decompose of a running system. First on the example
// rack, whose hosts are modelled; then with every host managed by a BMC,
// sushy-emulator's fake driver, whose own state the script checks after
// each step.
func TestDeployWithSushy(t *testing.T) {
	py := pythonWithRedfish(t)
	if out, err := childproc.Command(py, "-c", "import sushy").CombinedOutput(); err != nil {
		t.Fatalf("no sushy in %s (run scripts/pyenv.sh): %v\n%s", py, err, out)
	}
	script, err := filepath.Abs(filepath.Join("testdata", "deploy_sushy.py"))
	if err != nil {
		t.Fatal(err)
	}
	run := func(t *testing.T, s *server, args ...string) {
		t.Helper()
		cmd := childproc.Command(py, append([]string{script}, args...)...)
		cmd.Env = s.env()
		out, err := cmd.CombinedOutput()
		t.Logf("deploy_sushy.py %s:\n%s", strings.Join(args, " "), out)
		if err != nil || !strings.Contains(string(out), `{"step": "ok"}`) {
			t.Fatalf("the deploy flow failed: %v\nserve's log:\n%s", err, s.stderr)
		}
	}

	t.Run("model", func(t *testing.T) {
		s := startDefault(t, "--fabric-time", "instant")
		run(t, s, "host1", "nvme1")
	})

	t.Run("bmc", func(t *testing.T) {
		var systems []bmctest.System
		for i, name := range []string{"host1", "host2", "host3", "host4"} {
			systems = append(systems, bmctest.System{UUID: "6a1c0a3e-0000-4000-8000-00000000000" + string(rune('1'+i)), Name: name, Power: "Off"})
		}
		emu := bmctest.Start(t, systems, "")
		// The example rack, with a BMC for each host: the emulator's
		// system of the same name.
		bmcSpec := "        bmc: {url: \"" + emu.URL + "\", system: \"host{n}\", user: " + bmctest.User + ", password_env: RACKPOOL_BMC_PASSWORD}\n" +
			"        power_on: 1s\n        shutdown: 2s\n"
		rack := strings.Replace(string(examples.Rack), "        memory: 256GiB\n", "        memory: 256GiB\n"+bmcSpec, 1)
		if rack == string(examples.Rack) {
			t.Fatal("the example rack no longer has the host entry this test extends")
		}
		file := filepath.Join(t.TempDir(), "rack.yaml")
		if err := os.WriteFile(file, []byte(rack), 0o600); err != nil {
			t.Fatal(err)
		}
		s := start(t, t.TempDir(), []string{"RACKPOOL_ADMIN_PASSWORD=" + password, "RACKPOOL_BMC_PASSWORD=" + bmctest.Password},
			"--topology", file, "--fabric-time", "instant")
		run(t, s, "host1", "nvme1", emu.URL, systems[0].Path())
		// Nothing the BMC was asked for is left undone.
		if got := emu.System(t, systems[0]).PowerState; got != "Off" {
			t.Errorf("host1's BMC ends %s, want Off", got)
		}
		if strings.Contains(s.stderr.String(), bmctest.Password) {
			t.Errorf("serve logged the BMC's password")
		}
	})
}
