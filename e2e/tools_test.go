package e2e

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"rackpool/api"
	"rackpool/internal/childproc"
)

// The outside tools of scripts/tools-requirements.txt, run against serve:
// Ansible's community.general redfish modules and DMTF's Redfish Use Case
// Checkers. They live in .venv-tools (scripts/pyenv.sh), apart from
// .venv-rf because Ansible needs Python 3.12 or newer.

// toolsBin returns the path of a command of .venv-tools
// (RACKPOOL_TOOLS_VENV names another environment); a missing one fails the
// test.
func toolsBin(t *testing.T, name string) string {
	t.Helper()
	dir := os.Getenv("RACKPOOL_TOOLS_VENV")
	if dir == "" {
		dir = filepath.Join("..", ".venv-tools")
	}
	bin, err := filepath.Abs(filepath.Join(dir, "bin", name))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("no %s in %s (run scripts/pyenv.sh): %v", name, dir, err)
	}
	return bin
}

// ansible runs one community.general module against s with Ansible's
// ad-hoc command and returns the module's result. The module talks to s
// over HTTPS, checking its certificate against s's CA.
type ansible struct {
	s    *server
	bin  string
	home string
}

func newAnsible(t *testing.T, s *server) *ansible {
	return &ansible{s: s, bin: toolsBin(t, "ansible"), home: t.TempDir()}
}

// run calls module with args (baseuri, credentials and TLS settings added)
// and returns its result; failed says whether Ansible reported the module
// failed.
func (a *ansible) run(t *testing.T, module string, args map[string]any) (result map[string]any, failed bool) {
	t.Helper()
	full := map[string]any{"baseuri": a.s.addr, "username": "Administrator", "password": password,
		"validate_certs": true, "ca_path": a.s.ca, "timeout": 30}
	for k, v := range args {
		full[k] = v
		if v == nil {
			delete(full, k) // as with auth_token: no username and password
		}
	}
	js, err := json.Marshal(full)
	if err != nil {
		t.Fatal(err)
	}
	cmd := childproc.Command(a.bin, "localhost", "-m", "community.general."+module, "-a", string(js))
	cmd.Env = append(os.Environ(), "HOME="+a.home, "ANSIBLE_HOME="+filepath.Join(a.home, ".ansible"),
		"ANSIBLE_LOCAL_TEMP="+filepath.Join(a.home, "tmp"), "ANSIBLE_LOAD_CALLBACK_PLUGINS=1",
		"ANSIBLE_STDOUT_CALLBACK=json", "ANSIBLE_LOCALHOST_WARNING=False", "ANSIBLE_INVENTORY_UNPARSED_WARNING=False",
		"ANSIBLE_NOCOLOR=1")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	var doc struct {
		Plays []struct {
			Tasks []struct {
				Hosts map[string]map[string]any
			}
		}
	}
	if jerr := json.Unmarshal(out, &doc); jerr != nil || len(doc.Plays) != 1 || len(doc.Plays[0].Tasks) != 1 {
		t.Fatalf("ansible %s %s: %v; no result in its output (%v):\n%s\n%s", module, args["command"], err, jerr, out, stderr.String())
	}
	result = doc.Plays[0].Tasks[0].Hosts["localhost"]
	failed, _ = result["failed"].(bool)
	return result, failed
}

// must is run for a module that must succeed.
func (a *ansible) must(t *testing.T, module string, args map[string]any) map[string]any {
	t.Helper()
	r, failed := a.run(t, module, args)
	if failed {
		t.Fatalf("ansible %s %v failed: %v", module, args["command"], r["msg"])
	}
	return r
}

// facts returns redfish_info's entries of one fact (cpu, memory, disk,
// nic) for the system at uri.
func facts(t *testing.T, r map[string]any, fact, uri string) []map[string]any {
	t.Helper()
	f, _ := r["redfish_facts"].(map[string]any)[fact].(map[string]any)
	if f == nil || f["ret"] != true {
		t.Fatalf("redfish_info has no %s facts: %v", fact, r["redfish_facts"])
	}
	for _, e := range f["entries"].([]any) {
		pair := e.([]any)
		head := pair[0].(map[string]any)
		if head["system_uri"] == uri || head["resource_uri"] == uri {
			var out []map[string]any
			for _, x := range pair[1].([]any) {
				switch x := x.(type) {
				case map[string]any:
					out = append(out, x)
				}
			}
			return out
		}
	}
	t.Fatalf("redfish_info's %s facts have no entry for %s: %v", fact, uri, f)
	return nil
}

func ids(entries []map[string]any) []string {
	var out []string
	for _, e := range entries {
		id, _ := e["Id"].(string)
		out = append(out, id)
	}
	return out
}

// members returns a collection's members.
func members(t *testing.T, body map[string]any) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, m := range body["Members"].([]any) {
		out = append(out, m.(map[string]any))
	}
	return out
}

// redfishGet reads path with c.
func redfishGet(t *testing.T, c *api.Client, path string) map[string]any {
	t.Helper()
	var out map[string]any
	if _, err := c.Do(context.Background(), "GET", path, nil, &out); err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	return out
}

// TestAnsibleRedfish runs Ansible's community.general redfish_info and
// redfish_command against serve with one composed system, as a deployer
// would, and checks what each command reports and what it changed: the
// inventory commands return the composed system's real components (and
// follow a shrink), power and boot commands move the system, account and
// session commands change the accounts and sessions.
func TestAnsibleRedfish(t *testing.T) {
	skipShort(t)
	s := startDefault(t, "--fabric-time", "instant")
	c := s.client()
	ctx := context.Background()
	sys, err := c.Compose(ctx, api.ComposeRequest{Name: "ansible", Blocks: []string{"host1", "gpu1", "nvme1", "memnode1-b01", "nic1"}})
	if err != nil {
		t.Fatal(err)
	}
	uri := "/redfish/v1/Systems/" + sys.ID
	a := newAnsible(t, s)

	t.Run("inventory", func(t *testing.T) {
		r := a.must(t, "redfish_info", map[string]any{"category": "Systems",
			"command": []string{"GetSystemInventory", "GetCpuInventory", "GetMemoryInventory", "GetDiskInventory", "GetNicInventory",
				"GetStorageControllerInventory"}})
		cpus := facts(t, r, "cpu", uri)
		if !slices.Contains(ids(cpus), "CPU") || !slices.Contains(ids(cpus), "gpu1") {
			t.Errorf("GetCpuInventory of %s: %v, want the host's CPU and gpu1", sys.ID, cpus)
		}
		for _, p := range cpus {
			if p["Id"] == "gpu1" && (p["Model"] != "V100" || p["Manufacturer"] != "NVIDIA") {
				t.Errorf("gpu1 as Ansible sees it: %v", p)
			}
		}
		mem := facts(t, r, "memory", uri)
		if !slices.Contains(ids(mem), "Local") || !slices.Contains(ids(mem), "memnode1-b01") {
			t.Errorf("GetMemoryInventory of %s: %v, want Local and memnode1-b01", sys.ID, mem)
		}
		var drives []string
		for _, st := range facts(t, r, "disk", uri) {
			for _, d := range st["Drives"].([]any) {
				d := d.(map[string]any)
				if d["CapacityBytes"].(float64) <= 0 {
					t.Errorf("drive without capacity: %v", d)
				}
				drives = append(drives, d["Id"].(string))
			}
		}
		if !slices.Equal(drives, []string{"nvme1"}) {
			t.Errorf("GetDiskInventory of %s: drives %v, want [nvme1]", sys.ID, drives)
		}
		if nics := facts(t, r, "nic", uri); !slices.Equal(ids(nics), []string{"nic1"}) {
			t.Errorf("GetNicInventory of %s: %v, want nic1", sys.ID, nics)
		}
		if ctrls := facts(t, r, "storage_controller", uri); !slices.Equal(ids(ctrls), []string{"NVMe"}) {
			t.Errorf("GetStorageControllerInventory of %s: %v, want the NVMe controller", sys.ID, ctrls)
		}

		// A shrink takes the GPU out of what Ansible sees at once.
		if _, err := c.Expand(ctx, sys.ID, nil, nil, []string{"gpu1"}); err != nil {
			t.Fatal(err)
		}
		r = a.must(t, "redfish_info", map[string]any{"category": "Systems", "command": []string{"GetCpuInventory"}})
		if cpus := facts(t, r, "cpu", uri); !slices.Equal(ids(cpus), []string{"CPU"}) {
			t.Errorf("after the shrink, GetCpuInventory of %s: %v, want only the CPU", sys.ID, ids(cpus))
		}
	})

	t.Run("chassis and manager", func(t *testing.T) {
		facts := a.must(t, "redfish_info", map[string]any{"category": "Chassis", "command": []string{"GetChassisInventory"}})["redfish_facts"].(map[string]any)
		for k, v := range a.must(t, "redfish_info", map[string]any{"category": "Manager",
			"command": []string{"GetManagerNicInventory", "GetLogs"}})["redfish_facts"].(map[string]any) {
			facts[k] = v
		}
		chassis, _ := json.Marshal(facts["chassis"])
		for _, want := range []string{"falcon1-drawer1", "rack1"} {
			if !strings.Contains(string(chassis), `"Id": "`+want+`"`) && !strings.Contains(string(chassis), `"Id":"`+want+`"`) {
				t.Errorf("GetChassisInventory lacks %s: %s", want, chassis)
			}
		}
		nics, _ := json.Marshal(facts["manager_nics"])
		if !strings.Contains(string(nics), `"Address":"127.0.0.1"`) {
			t.Errorf("GetManagerNicInventory lacks the address serve listens on: %s", nics)
		}
		logs, _ := json.Marshal(facts["log"])
		if !strings.Contains(string(logs), `"MessageId":"Base.1.22.Created"`) {
			t.Errorf("GetLogs: the audit log lacks the composition's Created entry: %s", logs)
		}
	})

	t.Run("power", func(t *testing.T) {
		for _, step := range []struct{ command, want string }{
			{"PowerOn", "On"}, {"PowerGracefulRestart", "On"}, {"PowerForceOff", "Off"},
			{"PowerOn", "On"}, {"PowerGracefulShutdown", "Off"},
		} {
			r := a.must(t, "redfish_command", map[string]any{"category": "Systems", "command": []string{step.command}, "resource_id": sys.ID})
			if got := redfishGet(t, c, uri)["PowerState"]; got != step.want {
				t.Errorf("after %s (changed %v): PowerState %v, want %s", step.command, r["changed"], got, step.want)
			}
		}
		// Asked again, Ansible finds nothing to do: the state is read back.
		if r := a.must(t, "redfish_command", map[string]any{"category": "Systems", "command": []string{"PowerForceOff"}, "resource_id": sys.ID}); r["changed"] != false {
			t.Errorf("PowerForceOff of an Off system changed it: %v", r)
		}
	})

	t.Run("boot", func(t *testing.T) {
		boot := func() map[string]any { return redfishGet(t, c, uri)["Boot"].(map[string]any) }
		a.must(t, "redfish_command", map[string]any{"category": "Systems", "command": []string{"SetOneTimeBoot"}, "resource_id": sys.ID, "bootdevice": "Pxe"})
		if b := boot(); b["BootSourceOverrideTarget"] != "Pxe" || b["BootSourceOverrideEnabled"] != "Once" {
			t.Errorf("after SetOneTimeBoot Pxe: %v", b)
		}
		a.must(t, "redfish_command", map[string]any{"category": "Systems", "command": []string{"EnableContinuousBootOverride"}, "resource_id": sys.ID, "bootdevice": "Hdd"})
		if b := boot(); b["BootSourceOverrideTarget"] != "Hdd" || b["BootSourceOverrideEnabled"] != "Continuous" {
			t.Errorf("after EnableContinuousBootOverride Hdd: %v", b)
		}
		// The next boot from the composed drive, by its BootOptionReference.
		a.must(t, "redfish_command", map[string]any{"category": "Systems", "command": []string{"SetOneTimeBoot"}, "resource_id": sys.ID,
			"bootdevice": "UefiBootNext", "boot_next": "nvme1"})
		if b := boot(); b["BootSourceOverrideTarget"] != "UefiBootNext" || b["BootNext"] != "nvme1" || b["BootSourceOverrideEnabled"] != "Once" {
			t.Errorf("after SetOneTimeBoot UefiBootNext nvme1: %v", b)
		}
		if _, failed := a.run(t, "redfish_command", map[string]any{"category": "Systems", "command": []string{"SetOneTimeBoot"}, "resource_id": sys.ID,
			"bootdevice": "UefiBootNext", "boot_next": "nvme9"}); !failed {
			t.Error("SetOneTimeBoot to a boot option the system lacks did not fail")
		}
		a.must(t, "redfish_command", map[string]any{"category": "Systems", "command": []string{"DisableBootOverride"}, "resource_id": sys.ID})
		if b := boot(); b["BootSourceOverrideEnabled"] != "Disabled" {
			t.Errorf("after DisableBootOverride: %v", b)
		}
		// Ansible reads the override and the boot options back.
		r := a.must(t, "redfish_info", map[string]any{"category": "Systems", "command": []string{"GetBootOverride"}})
		js, _ := json.Marshal(r["redfish_facts"])
		if !strings.Contains(string(js), `"BootSourceOverrideEnabled":"Disabled"`) {
			t.Errorf("GetBootOverride: %s", js)
		}
	})

	t.Run("accounts", func(t *testing.T) {
		const user, pass = "ansible-op", "Ansible-0p-Passw0rd"
		account := func() map[string]any {
			r := a.must(t, "redfish_info", map[string]any{"category": "Accounts", "command": []string{"ListUsers"}})
			entries, _ := json.Marshal(r["redfish_facts"])
			var got map[string]any
			for _, m := range members(t, redfishGet(t, c, "/redfish/v1/AccountService/Accounts?$expand=.")) {
				if m["UserName"] == user {
					got = m
				}
			}
			if (got != nil) != strings.Contains(string(entries), `"`+user+`"`) {
				t.Errorf("ListUsers (%s) and the service (%v) disagree about %s", entries, got, user)
			}
			return got
		}
		a.must(t, "redfish_command", map[string]any{"category": "Accounts", "command": []string{"AddUser"},
			"new_username": user, "new_password": pass, "roleid": "Operator"})
		if got := account(); got == nil || got["RoleId"] != "Operator" || got["Enabled"] != true {
			t.Fatalf("after AddUser: %v", got)
		}
		// The new account works: it logs in with its password.
		if _, err := s.clientAs(user, pass).Systems(ctx); err != nil {
			t.Errorf("the added account cannot read Systems: %v", err)
		}
		a.must(t, "redfish_command", map[string]any{"category": "Accounts", "command": []string{"UpdateUserRole"}, "account_username": user, "roleid": "ReadOnly"})
		if got := account(); got["RoleId"] != "ReadOnly" {
			t.Errorf("after UpdateUserRole ReadOnly: %v", got["RoleId"])
		}
		const pass2 = "An0ther-Ansible-Pw"
		a.must(t, "redfish_command", map[string]any{"category": "Accounts", "command": []string{"UpdateUserPassword"}, "account_username": user, "account_password": pass2})
		if _, err := s.clientAs(user, pass2).Systems(ctx); err != nil {
			t.Errorf("the new password does not log in: %v", err)
		}
		a.must(t, "redfish_command", map[string]any{"category": "Accounts", "command": []string{"DisableUser"}, "account_username": user})
		if got := account(); got["Enabled"] != false {
			t.Errorf("after DisableUser: Enabled %v", got["Enabled"])
		}
		a.must(t, "redfish_command", map[string]any{"category": "Accounts", "command": []string{"EnableUser"}, "account_username": user})
		if got := account(); got["Enabled"] != true {
			t.Errorf("after EnableUser: Enabled %v", got["Enabled"])
		}
		// A rename is refused (PropertyNotWritable) with a message that says why.
		if r, failed := a.run(t, "redfish_command", map[string]any{"category": "Accounts", "command": []string{"UpdateUserName"},
			"account_username": user, "account_updatename": user + "-2"}); !failed || !strings.Contains(r["msg"].(string), "UserName is a read-only property") {
			t.Errorf("UpdateUserName: failed %v, %v; want a PropertyNotWritable refusal", failed, r["msg"])
		}
		a.must(t, "redfish_command", map[string]any{"category": "Accounts", "command": []string{"DeleteUser"}, "account_username": user})
		if got := account(); got != nil {
			t.Errorf("after DeleteUser: %v", got)
		}
	})

	t.Run("sessions", func(t *testing.T) {
		r := a.must(t, "redfish_command", map[string]any{"category": "Sessions", "command": []string{"CreateSession"}})
		token, _ := r["session"].(map[string]any)["token"].(string)
		if token == "" {
			t.Fatalf("CreateSession returned no token: %v", r)
		}
		// The session's token authenticates, as Ansible's auth_token.
		info := a.must(t, "redfish_info", map[string]any{"category": "Sessions", "command": []string{"GetSessions"},
			"username": nil, "password": nil, "auth_token": token})
		sessions, _ := json.Marshal(info["redfish_facts"])
		if !strings.Contains(string(sessions), "Administrator") {
			t.Errorf("GetSessions with the token: %s", sessions)
		}
		a.must(t, "redfish_command", map[string]any{"category": "Sessions", "command": []string{"ClearSessions"}})
		if n := len(members(t, redfishGet(t, c, "/redfish/v1/SessionService/Sessions"))); n != 0 {
			t.Errorf("after ClearSessions the service has %d sessions", n)
		}
		// redfish_info reports a refused read in its facts, not as a failure.
		r = a.must(t, "redfish_info", map[string]any{"category": "Sessions", "command": []string{"GetSessions"},
			"username": nil, "password": nil, "auth_token": token})
		if got := r["redfish_facts"].(map[string]any)["session"].(map[string]any); got["ret"] != false || got["status"] != 401.0 {
			t.Errorf("the cleared session's token: %v, want a 401", got)
		}
	})
}
