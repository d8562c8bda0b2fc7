package emulated

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"rackpool/internal/clock"
	"rackpool/internal/fabric"
	"rackpool/internal/inventory"
	"rackpool/internal/topology"
)

// CXL emulates CXL type-3 memory devices behind one or more CXL switches,
// driven by a fabric manager (FM API). A block is a logical device of a
// multi-logical device (bound to a host whole) or an extent of a
// dynamic-capacity region (added to a host's view). A release needs the
// host's acknowledgement; a host that does not give it within the fabric's
// ReleaseTimeout has the capacity taken back by force.
type CXL struct {
	*engine
	hosts    map[*inventory.Device]map[string]int // device -> host -> attached blocks
	stalls   map[string]bool                      // ReleaseStalls targets: host, "host/port", "" (all)
	releases []Release
}

var (
	_ fabric.Driver          = (*CXL)(nil)
	_ fabric.StatsReporter   = (*CXL)(nil)
	_ fabric.FaultInjector   = (*CXL)(nil)
	_ fabric.Restorer        = (*CXL)(nil)
	_ fabric.LatencyReporter = (*CXL)(nil)
)

// MaxReleases is how many releases Releases remembers (the newest).
const MaxReleases = 1024

// Release is one released logical device or extent, as Releases reports
// it.
type Release struct {
	fabric.Attachment
	Region    inventory.CXLRegion
	Requested time.Time // when the fabric manager asked the host to release
	// Forced is true when the host did not acknowledge within the fabric's
	// ReleaseTimeout and the fabric manager took the capacity back.
	Forced bool
	Took   time.Duration
}

// NewCXL returns a driver for the cxl-memory fabric f of top. A nil clk
// means the wall clock.
func NewCXL(top *topology.Topology, f *inventory.Fabric, clk clock.Clock) (*CXL, error) {
	e, err := newEngine(top, f, clk, inventory.CXLMemory)
	if err != nil {
		return nil, err
	}
	c := &CXL{engine: e, hosts: map[*inventory.Device]map[string]int{}, stalls: map[string]bool{}}
	e.model = c
	e.links = linkDefaults{speed: "32GT/s", width: func(*inventory.Device) int { return 16 }}
	return c, nil
}

// attach binds a logical device or adds an extent: one fabric-manager
// operation (Reconfig). The block must be free (ErrInUse), and a device
// serves at most inventory.MaxLogicalDevices hosts at once, one LD-ID each
// (ErrPortBusy).
func (c *CXL) attach(l *link) (time.Duration, error) {
	if err := c.checkInUse(l); err != nil {
		return 0, err
	}
	served := c.hosts[l.dev]
	if served[l.Host] == 0 && len(served) >= inventory.MaxLogicalDevices {
		return 0, fmt.Errorf("%s serves %d hosts, all of its LD-IDs: %w", l.dev.ID, len(served), fabric.ErrPortBusy)
	}
	if served == nil {
		served = map[string]int{}
		c.hosts[l.dev] = served
	}
	served[l.Host]++
	return c.fab.Reconfig, nil
}

// detach asks the host to release the block. A host that acknowledges
// costs one operation (Reconfig); one that does not (ReleaseStalls, or a
// failed host or port, which cannot answer) is waited for ReleaseTimeout,
// then the fabric manager forces the release (Reconfig more). Either way
// the block is free afterwards: a detach never fails.
func (c *CXL) detach(l *link) time.Duration {
	if served := c.hosts[l.dev]; served != nil {
		served[l.Host]--
		if served[l.Host] <= 0 {
			delete(served, l.Host)
		}
		if len(served) == 0 {
			delete(c.hosts, l.dev)
		}
	}
	forced := c.stalled(l)
	took := c.fab.Reconfig
	if forced {
		took += c.fab.ReleaseTimeout
	}
	c.releases = append(c.releases, Release{Attachment: l.Attachment, Region: l.blk.Region, Requested: c.clk.Now(), Forced: forced, Took: took})
	if n := len(c.releases); n > MaxReleases {
		c.releases = slices.Delete(c.releases, 0, n-MaxReleases)
	}
	return took
}

// stalled reports whether l's host will not acknowledge a release. Call
// with c.mu held.
func (c *CXL) stalled(l *link) bool {
	pn := fabric.PortName(l.Host, l.HostPort)
	return c.stalls[""] || c.stalls[l.Host] || c.stalls[pn] || c.faults.PortDown(l.Host, l.HostPort)
}

// inject arms ReleaseStalls for a host of this fabric, one of its ports
// ("host/port"), or every host (""). Call with c.mu held.
func (c *CXL) inject(f fabric.Fault) error {
	if f.Kind != fabric.ReleaseStalls {
		return fmt.Errorf("inject fault: kind %q is not one a %s fabric takes", f.Kind, c.fab.Kind)
	}
	if f.Target != "" && !c.hasHost(f.Target) && !(strings.Contains(f.Target, "/") && c.hasPort(f.Target)) {
		return fmt.Errorf("inject %s: host or host port %q: %w", f.Kind, f.Target, fabric.ErrUnknown)
	}
	c.stalls[f.Target] = true
	return nil
}

// clearFaults disarms ReleaseStalls. Call with c.mu held.
func (c *CXL) clearFaults() { c.stalls = map[string]bool{} }

// Releases returns the newest releases (at most MaxReleases), oldest
// first.
func (c *CXL) Releases() []Release {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.releases)
}

// HostsServed returns the hosts device holds blocks for, sorted: one LD-ID
// each.
func (c *CXL) HostsServed(device string) []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []string
	for d, hs := range c.hosts {
		if d.ID == device {
			for h := range hs {
				out = append(out, h)
			}
		}
	}
	slices.Sort(out)
	return out
}
