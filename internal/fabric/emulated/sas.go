package emulated

import (
	"time"

	"rackpool/internal/clock"
	"rackpool/internal/fabric"
	"rackpool/internal/inventory"
	"rackpool/internal/topology"
)

// SAS emulates a SAS/SATA circuit switch (P1): any drive port can be
// mapped to any host port, a host port carries many drives (a wide port
// behind an expander), and remapping one drive leaves every other mapping
// untouched.
type SAS struct {
	*engine
}

var (
	_ fabric.Driver          = (*SAS)(nil)
	_ fabric.StatsReporter   = (*SAS)(nil)
	_ fabric.FaultInjector   = (*SAS)(nil)
	_ fabric.Restorer        = (*SAS)(nil)
	_ fabric.LatencyReporter = (*SAS)(nil)
)

// NewSAS returns a driver for the sas-circuit fabric f of top. A nil clk
// means the wall clock.
func NewSAS(top *topology.Topology, f *inventory.Fabric, clk clock.Clock) (*SAS, error) {
	e, err := newEngine(top, f, clk, inventory.SASCircuit)
	if err != nil {
		return nil, err
	}
	s := &SAS{engine: e}
	e.model = s
	e.links = linkDefaults{speed: "12Gb/s", width: func(*inventory.Device) int { return 1 }}
	return s, nil
}

// attach maps the drive to the host port: a drive goes to at most
// MaxCompositions host ports (one, for an ordinary single-ported drive).
// The remap itself plus the drive coming online.
func (s *SAS) attach(l *link) (time.Duration, error) {
	if err := s.checkInUse(l); err != nil {
		return 0, err
	}
	return s.fab.Reconfig + s.fab.DriveOnline, nil
}

// detach unmaps the drive: one remap.
func (s *SAS) detach(*link) time.Duration { return s.fab.Reconfig }

// Mapping returns the host port ("host/port") drive block is mapped to and
// when that mapping was established. With several mappings (a drive with
// MaxCompositions > 1) it returns the first in host, port order.
func (s *SAS) Mapping(block string) (hostPort string, since time.Time, ok bool) {
	for _, m := range s.mappings() {
		if m.Block == block {
			return fabric.PortName(m.Host, m.HostPort), m.Since, true
		}
	}
	return "", time.Time{}, false
}

// Mappings returns every drive mapping with its establishment time and
// generation, in the order Discover lists them.
func (s *SAS) Mappings() []Mapping { return s.mappings() }
