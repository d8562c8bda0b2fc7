// Package fabricreport condenses what the fabric monitor polls from the
// fabrics' devices (fabric.StatsReporter) into one report per poll that
// stays small however many devices there are: per fabric and device kind
// the device count, mean and maximum utilisation, maximum temperature,
// link errors since the previous poll and links down, plus the ten hottest
// devices (docs/telemetry.md).
//
// A Condenser keeps the newest reports (a ring of Options.History) and
// hands each new one to its subscribers, each with a small queue that
// drops its oldest report rather than hold up the monitor. The northbound
// service renders them as the Redfish FabricTelemetry MetricReport, its
// history and its SSE stream (internal/redfish/telemetryservice).
package fabricreport

import (
	"maps"
	"math"
	"slices"
	"strings"
	"sync"
	"time"

	"rackpool/internal/events"
	"rackpool/internal/fabric"
	"rackpool/internal/topology"
)

// DefaultHistory is how many reports are kept by default: ten minutes at
// the monitor's default interval of 2 s.
const DefaultHistory = 300

const (
	// HotDevices is the number of hottest devices in each report.
	HotDevices = 10
	// UnknownKind is the kind of a device the topology does not know.
	UnknownKind = "unknown"
	// subBuffer is how many reports are queued for one subscriber before
	// the oldest is dropped.
	subBuffer = 4
)

// Options configure a Condenser. The zero value means every default.
type Options struct {
	// Interval is the fabric monitor's polling period (default
	// events.DefaultMonitorInterval); reports count link errors over it.
	Interval time.Duration
	// History is how many reports are kept (default DefaultHistory).
	History int
	// Topology gives each device its kind; devices it does not know, and
	// every device when it is nil, are of kind UnknownKind.
	Topology *topology.Topology
}

// Condenser condenses the fabric monitor's polls into reports, keeps the
// newest of them and hands each new one to its subscribers. Create it
// before the monitor and pass its Record as events.MonitorOptions.Stats.
// It is safe for concurrent use.
type Condenser struct {
	interval time.Duration
	top      *topology.Topology

	mu       sync.Mutex
	counters map[string]map[string]linkCounters // fabric → device → counters as last polled
	ring     []*Report                          // the retained reports; oldest at head once full
	head, n  int
	seq      uint64
	subs     map[*subscriber]struct{}
}

// New returns an empty Condenser.
func New(o Options) *Condenser {
	if o.Interval <= 0 {
		o.Interval = events.DefaultMonitorInterval
	}
	if o.History <= 0 {
		o.History = DefaultHistory
	}
	return &Condenser{interval: o.Interval, top: o.Topology, counters: map[string]map[string]linkCounters{},
		ring: make([]*Report, o.History), subs: map[*subscriber]struct{}{}}
}

// Interval is the polling period the reports are made at.
func (c *Condenser) Interval() time.Duration { return c.interval }

// History is how many reports c keeps.
func (c *Condenser) History() int { return len(c.ring) }

// linkCounters are a device's cumulative link error counters.
type linkCounters struct{ correctable, uncorrectable uint64 }

// Group is one fabric's devices of one kind in one report.
type Group struct {
	Fabric, Kind string
	Devices      int
	UtilMean     float64 // NaN when no device had a utilisation
	UtilMax      float64 // NaN when no device had a utilisation
	TempMax      float64 // NaN when no device had a temperature
	LinkErrors   uint64  // correctable and uncorrectable, since the previous poll
	LinksDown    int     // devices whose negotiated link width is 0

	utilN   int // devices with a utilisation (not NaN)
	utilSum float64
}

// HotDevice is one of a report's hottest devices.
type HotDevice struct {
	Fabric, Device string
	TempC          float64
}

// Report is one poll's report. It is not changed once made.
type Report struct {
	Seq    uint64 // increasing; at least the poll's time in Unix microseconds
	At     time.Time
	Groups []Group     // by fabric, then kind
	Hot    []HotDevice // hottest first, at most HotDevices
}

// subscriber is one subscriber's queue.
type subscriber struct{ ch chan *Report }

// Record makes the report of one poll (events.MonitorOptions.Stats): at is
// the poll's time, stats each answering fabric's devices. Link errors are
// counted against the counters the device had at its previous poll. An
// answer older than the newest report (from a poll that overlapped a
// later one) is ignored.
func (c *Condenser) Record(at time.Time, stats map[string][]fabric.DeviceStats) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if last := c.latestLocked(); last != nil && at.Before(last.At) {
		return
	}
	rep := &Report{At: at}
	for _, fid := range slices.Sorted(maps.Keys(stats)) {
		prev := c.counters[fid]
		next := make(map[string]linkCounters, len(stats[fid]))
		byKind := map[string]*Group{}
		for _, d := range stats[fid] {
			kind := c.kind(d.Device)
			g := byKind[kind]
			if g == nil {
				g = &Group{Fabric: fid, Kind: kind, UtilMax: math.NaN(), TempMax: math.NaN()}
				byKind[kind] = g
			}
			g.add(d)
			lc := linkCounters{d.CorrectableErrors, d.UncorrectableErrs}
			if p, ok := prev[d.Device]; ok {
				g.LinkErrors += increase(p.correctable, lc.correctable) + increase(p.uncorrectable, lc.uncorrectable)
			}
			next[d.Device] = lc
			if !math.IsNaN(d.TemperatureC) {
				rep.Hot = addHot(rep.Hot, HotDevice{fid, d.Device, d.TemperatureC})
			}
		}
		c.counters[fid] = next
		for _, kind := range slices.Sorted(maps.Keys(byKind)) {
			g := byKind[kind]
			g.UtilMean = math.NaN()
			if g.utilN > 0 {
				g.UtilMean = g.utilSum / float64(g.utilN)
			}
			rep.Groups = append(rep.Groups, *g)
		}
	}
	c.seq = max(c.seq+1, uint64(max(at.UnixMicro(), 0)))
	rep.Seq = c.seq
	c.ring[(c.head+c.n)%len(c.ring)] = rep
	if c.n < len(c.ring) {
		c.n++
	} else {
		c.head = (c.head + 1) % len(c.ring)
	}
	for s := range c.subs {
		s.offer(rep)
	}
}

// add counts device d into g.
func (g *Group) add(d fabric.DeviceStats) {
	g.Devices++
	if d.LinkWidth == 0 {
		g.LinksDown++
	}
	if u := d.UtilisationPercent; !math.IsNaN(u) {
		g.utilN++
		g.utilSum += u
		if math.IsNaN(g.UtilMax) || u > g.UtilMax {
			g.UtilMax = u
		}
	}
	if t := d.TemperatureC; !math.IsNaN(t) && (math.IsNaN(g.TempMax) || t > g.TempMax) {
		g.TempMax = t
	}
}

// increase is how much a cumulative counter grew from prev to cur; a
// counter that went down was reset and counts from 0.
func increase(prev, cur uint64) uint64 {
	if cur < prev {
		return cur
	}
	return cur - prev
}

// addHot inserts h into hot (hottest first, then by fabric and device ID),
// keeping at most HotDevices.
func addHot(hot []HotDevice, h HotDevice) []HotDevice {
	i, _ := slices.BinarySearchFunc(hot, h, hotter)
	if i >= HotDevices {
		return hot
	}
	if len(hot) == HotDevices {
		hot = hot[:HotDevices-1]
	}
	return slices.Insert(hot, i, h)
}

// hotter orders hot devices hottest first.
func hotter(a, b HotDevice) int {
	if a.TempC != b.TempC {
		if a.TempC > b.TempC {
			return -1
		}
		return 1
	}
	if c := strings.Compare(a.Fabric, b.Fabric); c != 0 {
		return c
	}
	return strings.Compare(a.Device, b.Device)
}

// kind is device's kind as the topology has it.
func (c *Condenser) kind(device string) string {
	if c.top != nil {
		if d := c.top.Device(device); d != nil {
			return string(d.Kind)
		}
	}
	return UnknownKind
}

// offer queues rep for s without waiting: a subscriber that is subBuffer
// reports behind loses its oldest queued one (it sees the gap in the
// sequence numbers). Only Record offers, under the Condenser's lock.
func (s *subscriber) offer(rep *Report) {
	select {
	case s.ch <- rep:
		return
	default:
	}
	select {
	case <-s.ch:
	default:
	}
	select {
	case s.ch <- rep:
	default:
	}
}

// latestLocked returns the newest report, nil when there is none. Call
// with c.mu held.
func (c *Condenser) latestLocked() *Report {
	if c.n == 0 {
		return nil
	}
	return c.ring[(c.head+c.n-1)%len(c.ring)]
}

// Reports returns the retained reports, oldest first.
func (c *Condenser) Reports() []*Report {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]*Report, c.n)
	for i := range c.n {
		out[i] = c.ring[(c.head+i)%len(c.ring)]
	}
	return out
}

// Subscribe registers a subscriber: each new report arrives on the
// channel until cancel is called. With resume, it also returns the
// retained reports whose Seq is after lastID (an SSE Last-Event-ID),
// oldest first, for the subscriber to handle before what arrives on the
// channel.
func (c *Condenser) Subscribe(lastID uint64, resume bool) (replay []*Report, ch <-chan *Report, cancel func()) {
	s := &subscriber{ch: make(chan *Report, subBuffer)}
	c.mu.Lock()
	defer c.mu.Unlock()
	if resume {
		for i := range c.n {
			if rep := c.ring[(c.head+i)%len(c.ring)]; rep.Seq > lastID {
				replay = append(replay, rep)
			}
		}
	}
	c.subs[s] = struct{}{}
	return replay, s.ch, func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		delete(c.subs, s)
	}
}
