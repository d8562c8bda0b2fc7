package topology

import (
	"strings"
	"testing"

	"rackpool/examples"
	"rackpool/internal/inventory"
)

// TestFabricDrivers: a fabric names its driver and, for redfish, its
// manager; bad choices are refused with the field, and the password never
// comes from the file.
func TestFabricDrivers(t *testing.T) {
	base := string(examples.CXLRack)
	const at = "kind: optical-circuit"
	good := at + "\n    driver: redfish\n    manager: {url: \"https://fm.example:8443/\", user: rackpool, password_env: OCS_PASSWORD, ca_file: fm.pem}"
	top, err := Parse("cxl-rack.yaml", []byte(strings.Replace(base, at, good, 1)))
	if err != nil {
		t.Fatalf("redfish fabric: %v", err)
	}
	var f *inventory.Fabric
	for _, x := range top.Fabrics {
		if x.Kind == inventory.OpticalCircuit {
			f = x
		}
	}
	if f.Driver != DriverRedfish || f.Manager == nil || f.Manager.URL != "https://fm.example:8443" || f.Manager.Fabric != f.ID ||
		f.Manager.PasswordEnv != "OCS_PASSWORD" || f.Manager.CAFile != "fm.pem" {
		t.Errorf("fabric %s: driver %q, manager %+v", f.ID, f.Driver, f.Manager)
	}
	if d := top.Fabrics[0].Driver; d != DriverEmulated {
		t.Errorf("a fabric without driver: %q, want emulated", d)
	}
	for _, tc := range []struct{ name, new, want string }{
		{"unknown driver", at + "\n    driver: magic", `fabrics[1].driver: unknown driver "magic"`},
		{"no manager", at + "\n    driver: redfish", "fabrics[1].manager: a redfish-driven fabric needs manager"},
		{"no url", at + "\n    driver: redfish\n    manager: {user: u, password_env: P}", "missing the fabric manager's URL"},
		{"bad scheme", at + "\n    driver: redfish\n    manager: {url: \"ftp://fm\", user: u, password_env: P}", "want https://HOST[:PORT]"},
		{"a path", at + "\n    driver: redfish\n    manager: {url: \"https://fm/redfish/v1\", user: u, password_env: P}", "want https://HOST[:PORT]"},
		{"password in URL", at + "\n    driver: redfish\n    manager: {url: \"https://u:pw@fm\", user: u, password_env: P}", "credentials do not belong in the URL"},
		{"no password_env", at + "\n    driver: redfish\n    manager: {url: \"https://fm\", user: u}", "needs user and password_env"},
		{"netns on optical", at + "\n    driver: netns", "the netns driver builds ethernet-vlan fabrics only"},
		{"manager without redfish", at + "\n    manager: {url: \"https://fm\", user: u, password_env: P}", "only redfish-driven fabrics have a manager"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse("cxl-rack.yaml", []byte(strings.Replace(base, at, tc.new, 1)))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one containing %q", err, tc.want)
			}
			if strings.Contains(err.Error(), "pw@") {
				t.Errorf("the error repeats the password: %v", err)
			}
		})
	}
}
