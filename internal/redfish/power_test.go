package redfish_test

import (
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"rackpool/internal/store"
)

func reset(s *service, id, t string) reply {
	s.t.Helper()
	return s.do("POST", "/redfish/v1/Systems/"+id+"/Actions/ComputerSystem.Reset", map[string]any{"ResetType": t}, admin)
}

func powerState(s *service, id string) string {
	s.t.Helper()
	p, _ := s.get("/redfish/v1/Systems/" + id)["PowerState"].(string)
	return p
}

// TestResetComposedSystem walks a composed system through the reset types
// and checks the rules: each change is stored and audited, a reset that
// does not apply is refused and changes nothing.
func TestResetComposedSystem(t *testing.T) {
	s := newService(t)
	id := s.compose(specificBody("host1", "gpu1", "nvme1"))
	sys := s.get("/redfish/v1/Systems/" + id)
	if sys["PowerState"] != "Off" {
		t.Fatalf("a new composition is %v, want Off", sys["PowerState"])
	}
	act, _ := dig(t, sys, "Actions", "#ComputerSystem.Reset").(map[string]any)
	if act["target"] != "/redfish/v1/Systems/"+id+"/Actions/ComputerSystem.Reset" {
		t.Fatalf("Reset action: %v", act)
	}
	var types []string
	for _, v := range list(t, act["ResetType@Redfish.AllowableValues"]) {
		types = append(types, v.(string))
	}
	for _, want := range []string{"On", "ForceOn", "ForceOff", "GracefulShutdown", "GracefulRestart", "ForceRestart", "PowerCycle", "Nmi"} {
		if !slices.Contains(types, want) {
			t.Errorf("ResetType@Redfish.AllowableValues %v lacks %s", types, want)
		}
	}
	etag0 := s.must(http.StatusOK, "GET", "/redfish/v1/Systems/"+id, nil, admin).header.Get("ETag")

	// Bad input changes nothing.
	for _, c := range []struct {
		body any
		code string
	}{
		{map[string]any{"ResetType": "Explode"}, "ActionParameterValueNotInList"},
		{map[string]any{}, "ActionParameterMissing"},
		{map[string]any{"ResetType": 3}, "PropertyValueTypeError"},
		{map[string]any{"ResetType": "On", "Extra": 1}, "PropertyUnknown"},
		{`{"ResetType": "On", "ResetType": "ForceOff"}`, "PropertyDuplicate"},
	} {
		r := s.do("POST", "/redfish/v1/Systems/"+id+"/Actions/ComputerSystem.Reset", c.body, admin)
		if r.status != http.StatusBadRequest || !strings.HasSuffix(r.errorCode(t), c.code) {
			t.Errorf("reset with %v: %d %s, want 400 %s", c.body, r.status, r.errorCode(t), c.code)
		}
	}
	if r := reset(s, id, "Nmi"); r.status != http.StatusConflict || !strings.HasSuffix(r.errorCode(t), "ResourceInStandby") {
		t.Errorf("Nmi to a system that is Off: %d, want 409 ResourceInStandby: %s", r.status, r.body)
	}
	if got := s.must(http.StatusOK, "GET", "/redfish/v1/Systems/"+id, nil, admin).header.Get("ETag"); got != etag0 {
		t.Errorf("refused resets changed the ETag: %s → %s", etag0, got)
	}

	for _, step := range []struct{ reset, want string }{
		{"On", "On"}, {"On", "On"}, {"GracefulRestart", "On"}, {"ForceRestart", "On"}, {"Nmi", "On"},
		{"GracefulShutdown", "Off"}, {"ForceOff", "Off"}, {"PowerCycle", "On"}, {"ForceOff", "Off"},
		// A restart from Off starts the system, as BMCs do.
		{"GracefulRestart", "On"}, {"ForceOff", "Off"}, {"ForceRestart", "On"}, {"ForceOff", "Off"},
		{"ForceOn", "On"}, {"ForceOn", "On"}, {"ForceOff", "Off"},
	} {
		if r := reset(s, id, step.reset); r.status != http.StatusNoContent {
			t.Fatalf("reset %s: %d %s", step.reset, r.status, r.body)
		}
		if got := powerState(s, id); got != step.want {
			t.Fatalf("after %s: PowerState %s, want %s", step.reset, got, step.want)
		}
	}
	// The event log has the power changes, with the system as origin.
	events := string(s.must(http.StatusOK, "GET", "/redfish/v1/Managers/rackpool/LogServices/Events/Entries", nil, admin).body)
	for _, id := range []string{"ResourcePoweringOn", "ResourcePoweredOn", "ResourcePoweringOff", "ResourcePoweredOff"} {
		if !strings.Contains(events, "ResourceEvent.1.4."+id) {
			t.Errorf("no %s event", id)
		}
	}
	// Every reset that ran is in the audit log, with what it did.
	entries, err := s.store.Audit(t.Context(), store.AuditQuery{Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	resets := 0
	for _, e := range entries {
		if strings.HasSuffix(e.Target, "/Actions/ComputerSystem.Reset") && e.Outcome == store.AuditSuccess {
			resets++
			if !strings.HasPrefix(e.Detail, "reset "+id) {
				t.Errorf("audit detail %q", e.Detail)
			}
		}
	}
	if resets != 16 {
		t.Errorf("%d successful resets audited, want 16", resets)
	}
}

// TestResetHost resets a host that no composition holds, and checks that
// a composition takes the host's power with it and a decompose powers the
// system off first, saying so in the audit log.
func TestResetHost(t *testing.T) {
	s := newService(t)
	if got := powerState(s, "host2"); got != "Off" {
		t.Fatalf("a free host is %s, want Off", got)
	}
	if r := reset(s, "host2", "On"); r.status != http.StatusNoContent {
		t.Fatalf("reset host2 On: %d %s", r.status, r.body)
	}
	if got := powerState(s, "host2"); got != "On" {
		t.Fatalf("host2 after On: %s", got)
	}
	// A GPU cannot be hot-plugged into a running host.
	r := s.do("POST", "/redfish/v1/Systems", specificBody("host2", "gpu2"), admin)
	if r.status != http.StatusConflict || !strings.Contains(r.resolution(t), "hot-plug") {
		t.Fatalf("compose a GPU onto a running host: %d %s", r.status, r.body)
	}
	// A drive can; the system is On, as its host was.
	id := s.compose(specificBody("host2", "ssd1"))
	if got := powerState(s, id); got != "On" {
		t.Fatalf("composed onto a running host: %s, want On", got)
	}
	if got := powerState(s, "host2"); got != "On" {
		t.Fatalf("the host of a running system: %s, want On", got)
	}
	// Expanding a running system: drives yes, GPUs no.
	r = s.do("POST", "/redfish/v1/Systems/"+id+"/Actions/ComputerSystem.AddResourceBlock", map[string]any{"ResourceBlock": blockRef("gpu3")}, admin)
	if r.status != http.StatusConflict || !strings.Contains(r.resolution(t), "ForceOff") {
		t.Fatalf("add a GPU to a running system: %d %s", r.status, r.body)
	}
	s.must(http.StatusOK, "POST", "/redfish/v1/Systems/"+id+"/Actions/ComputerSystem.AddResourceBlock", map[string]any{"ResourceBlock": blockRef("ssd2")}, admin)

	// Resetting the host acts on the system that holds it.
	if r := reset(s, "host2", "ForceRestart"); r.status != http.StatusNoContent {
		t.Fatalf("reset a composed host: %d %s", r.status, r.body)
	}
	s.must(http.StatusNoContent, "DELETE", "/redfish/v1/Systems/"+id, nil, admin)
	if got := powerState(s, "host2"); got != "Off" {
		t.Errorf("host2 after the decompose of its running system: %s, want Off", got)
	}
	entries, err := s.store.Audit(t.Context(), store.AuditQuery{Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, e := range entries {
		if e.Method == "DELETE" && strings.Contains(e.Detail, "powered off first (GracefulShutdown)") {
			found = true
		}
	}
	if !found {
		t.Errorf("no audit entry says the decompose powered the system off first")
	}
}

// TestBootOverride sets a one-time PXE boot with If-Match, checks it is
// used up by the next boot, and that bad values change nothing.
func TestBootOverride(t *testing.T) {
	s := newService(t)
	id := s.compose(specificBody("host3", "nvme1"))
	sys := s.get("/redfish/v1/Systems/" + id)
	boot, _ := sys["Boot"].(map[string]any)
	if boot["BootSourceOverrideEnabled"] != "Disabled" || boot["BootSourceOverrideTarget"] != "None" {
		t.Fatalf("Boot of a new system: %v", boot)
	}
	for _, k := range []string{"BootSourceOverrideEnabled", "BootSourceOverrideTarget", "BootSourceOverrideMode"} {
		if len(list(t, boot[k+"@Redfish.AllowableValues"])) == 0 {
			t.Errorf("Boot lacks %s@Redfish.AllowableValues", k)
		}
	}
	// UefiTarget is offered, so the property it needs is there, null.
	if v, ok := boot["UefiTargetBootSourceOverride"]; !ok || v != nil ||
		!slices.Contains(list(t, boot["BootSourceOverrideTarget@Redfish.AllowableValues"]), any("UefiTarget")) {
		t.Errorf("UefiTargetBootSourceOverride %v (present %v) beside targets %v", v, ok, boot["BootSourceOverrideTarget@Redfish.AllowableValues"])
	}
	tag := s.must(http.StatusOK, "GET", "/redfish/v1/Systems/"+id, nil, admin).header.Get("ETag")
	pxe := map[string]any{"Boot": map[string]any{"BootSourceOverrideEnabled": "Once", "BootSourceOverrideTarget": "Pxe"}}
	for _, bad := range []struct {
		body any
		code string
	}{
		{map[string]any{"Boot": map[string]any{"BootSourceOverrideTarget": "Floppy"}}, "PropertyValueNotInList"},
		{map[string]any{"Boot": map[string]any{"BootSourceOverrideTarget": ""}}, "PropertyValueNotInList"},
		{map[string]any{"Boot": map[string]any{"BootSourceOverrideEnabled": "Sometimes"}}, "PropertyValueNotInList"},
		{map[string]any{"Boot": map[string]any{"BootSourceOverrideMode": "BIOS"}}, "PropertyValueNotInList"},
		{map[string]any{"Boot": map[string]any{"BootSourceOverrideTarget": "UefiTarget"}}, "PropertyValueConflict"},
		{map[string]any{"Boot": map[string]any{"BootSourceOverrideTarget": 7}}, "PropertyValueTypeError"},
		{map[string]any{"Boot": map[string]any{}}, "PropertyMissing"},
	} {
		if r := s.do("PATCH", "/redfish/v1/Systems/"+id, bad.body, admin); r.status != http.StatusBadRequest || !strings.HasSuffix(r.errorCode(t), bad.code) {
			t.Errorf("PATCH %v: %d %s, want 400 %s: %s", bad.body, r.status, r.errorCode(t), bad.code, r.body)
		}
	}
	if r := s.do("PATCH", "/redfish/v1/Systems/"+id, pxe, cred{basic: true, hdr: map[string]string{"If-Match": `W/"999"`}}); r.status != http.StatusPreconditionFailed {
		t.Fatalf("PATCH with a stale If-Match: %d %s", r.status, r.body)
	}
	if got := s.must(http.StatusOK, "GET", "/redfish/v1/Systems/"+id, nil, admin).header.Get("ETag"); got != tag {
		t.Fatalf("refused PATCHes changed the system: %s → %s", tag, got)
	}
	r := s.must(http.StatusOK, "PATCH", "/redfish/v1/Systems/"+id, pxe, cred{basic: true, hdr: map[string]string{"If-Match": tag}})
	boot, _ = r.json(t)["Boot"].(map[string]any)
	if boot["BootSourceOverrideEnabled"] != "Once" || boot["BootSourceOverrideTarget"] != "Pxe" {
		t.Fatalf("Boot after PATCH: %v", boot)
	}
	if r.header.Get("ETag") == tag {
		t.Errorf("the ETag did not change with the boot override")
	}
	if r := reset(s, id, "On"); r.status != http.StatusNoContent {
		t.Fatalf("reset On: %d %s", r.status, r.body)
	}
	boot, _ = s.get("/redfish/v1/Systems/" + id)["Boot"].(map[string]any)
	if boot["BootSourceOverrideEnabled"] != "Disabled" || boot["BootSourceOverrideTarget"] != "None" {
		t.Errorf("a Once override was not used up by the boot: %v", boot)
	}
	// Continuous stays.
	s.must(http.StatusOK, "PATCH", "/redfish/v1/Systems/"+id, map[string]any{"Boot": map[string]any{"BootSourceOverrideEnabled": "Continuous", "BootSourceOverrideTarget": "Hdd"}}, admin)
	if r := reset(s, id, "ForceRestart"); r.status != http.StatusNoContent {
		t.Fatalf("reset ForceRestart: %d %s", r.status, r.body)
	}
	boot, _ = s.get("/redfish/v1/Systems/" + id)["Boot"].(map[string]any)
	if boot["BootSourceOverrideEnabled"] != "Continuous" || boot["BootSourceOverrideTarget"] != "Hdd" {
		t.Errorf("a Continuous override did not stay: %v", boot)
	}
}

// TestBootNext: an emulated system's boot options are its host's network
// and its composed drives and NICs, each linked to its resource; BootNext
// names one of them for the target UefiBootNext, is used up by the next
// boot, and follows an expand.
func TestBootNext(t *testing.T) {
	s := newService(t)
	id := s.compose(specificBody("host3", "nvme1", "nic1"))
	boot := s.get("/redfish/v1/Systems/" + id)["Boot"].(map[string]any)
	if v, ok := boot["BootNext"]; !ok || v != nil ||
		!slices.Contains(list(t, boot["BootSourceOverrideTarget@Redfish.AllowableValues"]), any("UefiBootNext")) {
		t.Errorf("BootNext %v (present %v) beside targets %v", v, ok, boot["BootSourceOverrideTarget@Redfish.AllowableValues"])
	}
	options := func() []string {
		var refs []string
		for _, m := range list(t, s.get(dig(t, boot, "BootOptions", "@odata.id").(string))["Members"]) {
			o := s.get(m.(map[string]any)["@odata.id"].(string))
			refs = append(refs, o["BootOptionReference"].(string)+":"+o["Alias"].(string))
			related := list(t, o["RelatedItem"])
			if (o["Id"] == "Pxe") != (len(related) == 0) {
				t.Errorf("boot option %s relates to %v", o["Id"], related)
			}
			for _, r := range related {
				s.get(r.(map[string]any)["@odata.id"].(string)) // the drive or NIC is there
			}
		}
		return refs
	}
	if got := options(); !slices.Equal(got, []string{"Pxe:Pxe", "nvme1:Hdd", "nic1:Pxe"}) {
		t.Errorf("boot options %v", got)
	}
	for _, bad := range []struct {
		body any
		code string
	}{
		{map[string]any{"Boot": map[string]any{"BootSourceOverrideTarget": "UefiBootNext"}}, "PropertyValueConflict"},
		{map[string]any{"Boot": map[string]any{"BootNext": "nvme2"}}, "PropertyValueNotInList"},
		{map[string]any{"Boot": map[string]any{"BootNext": ""}}, "PropertyValueIncorrect"},
	} {
		if r := s.do("PATCH", "/redfish/v1/Systems/"+id, bad.body, admin); r.status != http.StatusBadRequest || !strings.HasSuffix(r.errorCode(t), bad.code) {
			t.Errorf("PATCH %v: %d %s, want 400 %s: %s", bad.body, r.status, r.errorCode(t), bad.code, r.body)
		}
	}
	next := map[string]any{"Boot": map[string]any{"BootSourceOverrideEnabled": "Once", "BootSourceOverrideTarget": "UefiBootNext", "BootNext": "nvme1"}}
	boot = s.must(http.StatusOK, "PATCH", "/redfish/v1/Systems/"+id, next, admin).json(t)["Boot"].(map[string]any)
	if boot["BootNext"] != "nvme1" || boot["BootSourceOverrideTarget"] != "UefiBootNext" {
		t.Fatalf("Boot after PATCH: %v", boot)
	}
	if r := reset(s, id, "On"); r.status != http.StatusNoContent {
		t.Fatalf("reset On: %d %s", r.status, r.body)
	}
	boot = s.get("/redfish/v1/Systems/" + id)["Boot"].(map[string]any)
	if boot["BootNext"] != nil || boot["BootSourceOverrideTarget"] != "None" {
		t.Errorf("BootNext was not used up by the boot: %v", boot)
	}
	// A drive expanded into the system is a boot option at once.
	reset(s, id, "ForceOff")
	s.must(http.StatusOK, "POST", "/redfish/v1/Systems/"+id+"/Actions/Oem/Rackpool.Expand", map[string]any{"Blocks": []string{"hdd1"}}, admin)
	if got := options(); !slices.Contains(got, "hdd1:Hdd") {
		t.Errorf("after expanding hdd1, boot options %v", got)
	}
}

// TestResetAsync: a reset whose modelled time exceeds the threshold
// answers 202 with a task monitor, and the system shows PoweringOn until
// it is done.
func TestResetAsync(t *testing.T) {
	s := newService(t)
	id := s.compose(specificBody("host4"))
	r := s.do("POST", "/redfish/v1/Systems/"+id+"/Actions/ComputerSystem.Reset", map[string]any{"ResetType": "On"},
		cred{basic: true, hdr: map[string]string{"Prefer": "respond-async"}})
	if r.status != http.StatusAccepted || r.header.Get("Location") == "" {
		t.Fatalf("async reset: %d %v %s", r.status, r.header, r.body)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		m := s.do("GET", r.header.Get("Location"), nil, admin)
		if m.status == http.StatusNoContent {
			break
		}
		if m.status != http.StatusAccepted || time.Now().After(deadline) {
			t.Fatalf("task monitor: %d %s", m.status, m.body)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if got := powerState(s, id); got != "On" {
		t.Errorf("after the task: %s, want On", got)
	}
}
