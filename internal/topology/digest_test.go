package topology_test

import (
	"strings"
	"testing"

	"rackpool/internal/topology"
)

// TestDigest: the same datacenter gives the same digest whatever drives
// its fabrics; another datacenter gives another.
func TestDigest(t *testing.T) {
	rack := topology.LoadDefault()
	again := topology.LoadDefault()
	if topology.Digest(rack) != topology.Digest(again) {
		t.Fatal("the same file gives two digests")
	}
	const at = "  - id: falcon1\n    kind: pcie-switch\n"
	driven := strings.Replace(string(topology.ExampleRack), at,
		at+"    driver: redfish\n    manager: {url: \"https://fm.example:8443\", user: u, password_env: P}\n", 1)
	d, err := topology.Parse("driven.yaml", []byte(driven))
	if err != nil {
		t.Fatal(err)
	}
	if topology.Digest(d) != topology.Digest(rack) {
		t.Error("driving a fabric through a manager changed the digest")
	}
	other, err := topology.Parse("racks", topology.GenerateRacks(2))
	if err != nil {
		t.Fatal(err)
	}
	if topology.Digest(other) == topology.Digest(rack) {
		t.Error("two datacenters share a digest")
	}
	more := strings.Replace(string(topology.ExampleRack), `capacity: 32GiB`, `capacity: 16GiB`, 1)
	if more == string(topology.ExampleRack) {
		t.Fatal("the example rack changed; update the test")
	}
	m, err := topology.Parse("fewer.yaml", []byte(more))
	if err != nil {
		t.Fatal(err)
	}
	if topology.Digest(m) == topology.Digest(rack) {
		t.Error("smaller GPUs left the digest unchanged")
	}
}
