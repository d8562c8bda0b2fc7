package schedule

import (
	"cmp"
	"fmt"
	"slices"

	"rackpool/internal/inventory"
	"rackpool/internal/topology"
)

// MemoryChoice is a memory device that byte-addressed memory for a host
// (a memory lease, P0's GetMemory) may come from, with the path to it.
type MemoryChoice struct {
	Device *inventory.Device
	Path   topology.Path // zero when no host was named
	Free   uint64        // the caller's free bytes on the device
}

// RankMemory orders memory devices for memory wanted by host (nil: any
// host) within a round trip of maxRTTNS (0: no bound), the way placement
// ranks memory: the shortest round trip first, then the fewest hops, then
// the least free (best fit keeps large ranges whole), then the device ID.
// free[i] is what the caller has free on devices[i] for this request; a
// device with none is rejected as too small. Devices the host cannot reach,
// or only over the bound, come back as rejections with the reasons a
// composition gets (Unreachable, TooFar, TooSmall), so a refused request
// explains itself the same way.
func (s *Scheduler) RankMemory(host *inventory.Host, maxRTTNS float64, devices []*inventory.Device, free []uint64) ([]MemoryChoice, []Rejection) {
	var (
		out []MemoryChoice
		rej []Rejection
	)
	hostID := ""
	if host != nil {
		hostID = host.ID
	}
	for i, d := range devices {
		c := MemoryChoice{Device: d, Free: free[i]}
		if host != nil && len(d.Blocks) > 0 {
			p, ok := s.top.Path(host, d.Blocks[0])
			if !ok {
				rej = append(rej, Rejection{Host: hostID, Need: -1, Block: d.ID, Reason: Unreachable,
					Detail: fmt.Sprintf("%s cannot reach memory device %s", hostID, d.ID)})
				continue
			}
			if maxRTTNS > 0 && p.RTTNS > maxRTTNS {
				rej = append(rej, Rejection{Host: hostID, Need: -1, Block: d.ID, Reason: TooFar,
					Detail: fmt.Sprintf("round trip %.1f ns to %s is over the bound %.1f ns", p.RTTNS, d.ID, maxRTTNS)})
				continue
			}
			c.Path = p
		}
		if c.Free == 0 {
			rej = append(rej, Rejection{Host: hostID, Need: -1, Block: d.ID, Reason: TooSmall,
				Detail: fmt.Sprintf("no free range on %s large enough", d.ID)})
			continue
		}
		out = append(out, c)
	}
	slices.SortFunc(out, func(a, b MemoryChoice) int {
		return cmp.Or(cmp.Compare(a.Path.RTTNS, b.Path.RTTNS), cmp.Compare(a.Path.Hops, b.Path.Hops),
			cmp.Compare(a.Free, b.Free), cmp.Compare(a.Device.ID, b.Device.ID))
	})
	return out, rej
}
