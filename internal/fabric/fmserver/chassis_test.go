package fmserver

import (
	"net/http"
	"testing"
)

// TestDrawerChassis: a PCIe fabric's chassis and drawers are Chassis
// resources carrying each drawer's mode and how many hosts it serves, as
// the northbound API shows them; other fabrics have none.
func TestDrawerChassis(t *testing.T) {
	f := newFM(t, rackTopology(t), "falcon1", Options{})
	f.login()
	list := f.must(f.get("/redfish/v1/Chassis"), http.StatusOK, "Chassis")
	if n := list.json["Members@odata.count"]; n != float64(3) {
		t.Fatalf("Chassis of falcon1: %v members, want the chassis and 2 drawers", n)
	}
	for _, c := range []struct {
		id, mode string
		hosts    float64
	}{{"falcon1-drawer1", "advanced", 3}, {"falcon1-drawer2", "standard-two-hosts", 2}} {
		res := f.must(f.get("/redfish/v1/Chassis/"+c.id), http.StatusOK, c.id)
		oem := res.json["Oem"].(map[string]any)["Rackpool"].(map[string]any)
		if res.json["ChassisType"] != "Drawer" || oem["Mode"] != c.mode || oem["MaxHosts"] != c.hosts {
			t.Errorf("%s: type %v, Oem %v; want a Drawer in %s mode for %v hosts", c.id, res.json["ChassisType"], oem, c.mode, c.hosts)
		}
	}
	if res := f.get("/redfish/v1/Chassis/falcon1-drawer9"); res.status != http.StatusNotFound {
		t.Errorf("an unknown drawer: %d", res.status)
	}
	sas := newFM(t, rackTopology(t), "sas1", Options{})
	sas.login()
	if n := sas.must(sas.get("/redfish/v1/Chassis"), http.StatusOK, "Chassis").json["Members@odata.count"]; n != float64(0) {
		t.Errorf("Chassis of sas1: %v members, want none", n)
	}
}
