package topology

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
)

// Digest is a fingerprint of what placement and the fabrics depend on:
// hosts (cores, memory, ports and where they are cabled), fabrics
// (switches, links, devices and where they are cabled), and blocks (kind,
// capacity, sharing). It leaves out how a fabric is driven (a fabric
// manager's URL and credentials), which may differ between machines
// running replicas of one control plane. Two files that describe the same
// datacenter have the same digest.
func Digest(t *Topology) string {
	h := sha256.New()
	for _, host := range t.Hosts {
		fmt.Fprintf(h, "host %q %q %d %d\n", host.ID, host.Rack, host.Cores, host.MemoryGiB)
		for _, p := range host.Ports {
			sw := ""
			if p.Switch != nil {
				sw = p.Switch.ID
			}
			fmt.Fprintf(h, " port %q %q %q %q %g\n", p.ID, p.Fabric.ID, sw, p.Port, p.Metres)
		}
	}
	for _, f := range t.Fabrics {
		fmt.Fprintf(h, "fabric %q %q %d\n", f.ID, f.Kind, len(f.Drawers))
		for _, s := range f.Switches {
			fmt.Fprintf(h, " switch %q\n", s.ID)
		}
		for _, l := range f.Links {
			fmt.Fprintf(h, " link %q %q %g\n", l.A.ID, l.B.ID, l.Metres)
		}
		for _, d := range f.Devices {
			sw := ""
			if d.Switch != nil {
				sw = d.Switch.ID
			}
			fmt.Fprintf(h, " device %q %q %d %d %q %v\n", d.ID, d.Kind, d.CapacityBytes, d.BlockBytes, sw, d.Ports)
		}
	}
	for _, b := range t.Blocks {
		fmt.Fprintf(h, "block %q %q %d %d\n", b.ID, b.Kind, b.CapacityBytes, b.MaxCompositions)
	}
	return hex.EncodeToString(h.Sum(nil))[:16]
}
