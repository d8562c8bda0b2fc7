package topology

import (
	"fmt"
	"strings"
)

// GenerateRacks writes a topology file of n identical racks, 100 resource
// blocks each, for benchmarks and the simulator: 4 hosts; a 64-port PCIe
// switch with 16 GPUs, 8 NVMe drives and 4 shareable NICs; a 160-port SAS
// circuit switch with 52 HDDs; a 128 GiB memory node in 8 GiB blocks
// behind a 48-port optical circuit switch. Hosts reach only their own rack.
func GenerateRacks(n int) []byte {
	var b strings.Builder
	fmt.Fprintf(&b, "name: generated-%d-racks\nracks:\n", n)
	for r := 1; r <= n; r++ {
		fmt.Fprintf(&b, `  - id: rack%[1]d
    hosts:
      - id: "r%[1]d-h{n}"
        count: 4
        cores: 64
        memory: 256GiB
        ports:
          - {id: pcie, fabric: pcie-r%[1]d, port: "{n}", metres: 2}
          - {id: sas, fabric: sas-r%[1]d, port: "{n}", metres: 2}
          - {id: ocs, fabric: ocs-r%[1]d, port: "{n}", metres: 2}
`, r)
	}
	b.WriteString("fabrics:\n")
	for r := 1; r <= n; r++ {
		fmt.Fprintf(&b, `  - id: pcie-r%[1]d
    kind: pcie-switch
    switches: [{id: sw, ports: 64, latency_ns: 150}]
    devices:
      - {id: "r%[1]d-gpu{n}", count: 16, kind: gpu, model: %[2]s, capacity: 32GiB, port: "11", metres: 1}
      - {id: "r%[1]d-nvme{n}", count: 8, kind: nvme, model: PM1733, capacity: 3.84TB, port: "31", metres: 1}
      - {id: "r%[1]d-nic{n}", count: 4, kind: nic, model: ConnectX-6, port: "41", metres: 1, max_compositions: 4}
  - id: sas-r%[1]d
    kind: sas-circuit
    switches: [{id: sw, ports: 160, latency_ns: 100}]
    devices:
      - {id: "r%[1]d-hdd{n}", count: 52, kind: hdd, model: HUH721010, capacity: 10TB, port: "11", metres: 1}
  - id: ocs-r%[1]d
    kind: optical-circuit
    switches: [{id: sw, ports: 48, latency_ns: 25}]
    devices:
      - {id: "r%[1]d-mem", kind: memory, capacity: 128GiB, block_size: 8GiB, ports: ["21", "22", "23", "24"], metres: 2}
`, r, []string{"V100", "A100"}[r%2])
	}
	return []byte(b.String())
}
