package events

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"rackpool/internal/clock"
	"rackpool/internal/fabric"
)

// Thresholds are the telemetry limits the Monitor watches. Zero fields
// mean their defaults.
type Thresholds struct {
	// TemperatureC: a device at or above it has exceeded (default 85).
	TemperatureC float64
	// LinkErrors: a device that logged at least this many link errors
	// (correctable plus uncorrectable) within LinkErrorWindow has exceeded
	// (default 100). Counters are cumulative, so the monitor watches their
	// increase, which falls back under the threshold once errors stop.
	LinkErrors uint64
	// LinkErrorWindow is the span LinkErrors counts over (default 1 min).
	LinkErrorWindow time.Duration
}

// Monitor defaults.
const (
	DefaultMonitorInterval = 2 * time.Second
	DefaultTemperatureC    = 85.0
	DefaultLinkErrors      = 100
	DefaultLinkErrorWindow = time.Minute
)

// Names the monitor's events use.
const (
	// Properties named by the threshold messages' first argument.
	propertyTemperature = "TemperatureCelsius"
	propertyLinkErrors  = "LinkErrors"

	systemsPath = "/redfish/v1/Systems/"
	fabricsPath = "/redfish/v1/Fabrics/"
	endpoints   = "/Endpoints/"
	oemVendor   = "Rackpool"
)

// MonitorOptions configure a Monitor. The zero value means every default.
type MonitorOptions struct {
	// Interval is Run's polling period (default DefaultMonitorInterval).
	Interval   time.Duration
	Thresholds Thresholds
	// Clock times the polls and the link error window (default the wall
	// clock).
	Clock clock.Clock
	// Logger receives polling errors (default: discard).
	Logger *slog.Logger
	// Stats, when set, receives every poll's device telemetry: at is the
	// time the poll began, stats the answer of each fabric whose Stats
	// answered (by fabric ID; the others are absent), sorted by device ID.
	// It is called once per poll in which at least one fabric answered,
	// after the poll's events are published and with no lock of the
	// monitor held (it may call Poll or DeviceHealth), from the goroutine
	// that polled: a slow sink delays the next poll. Polls that overlap
	// (Poll called while Run polls) may call it concurrently and out of
	// order. The map and slices are the sink's to keep.
	Stats func(at time.Time, stats map[string][]fabric.DeviceStats)
	// Publishes, when set, says whether the monitor publishes what it
	// sees: while it answers false the monitor keeps the devices' health
	// and the telemetry (DeviceHealth, Stats) and publishes nothing.
	// Active replicas poll the same fabric managers, and only the
	// leader's monitor publishes (docs/ha.md). Default: always.
	Publishes func() bool
}

// Monitor polls fabric drivers and publishes an event on the bus whenever
// something's health changes or a telemetry value crosses a threshold:
//
//   - a device's health (fabric.State.Health by device ID) →
//     ResourceStatusChanged{OK,Warning,Critical}, origin
//     /redfish/v1/Fabrics/{fabric}/Endpoints/{device};
//   - a host port's own failure ("host/port" Critical while its host is
//     not) → the same messages, origin the port's endpoint
//     /redfish/v1/Fabrics/{fabric}/Endpoints/{host}-{port};
//   - a host's health, the worst any fabric reports for it (a failed host
//     fails all its ports, which are then reported by this one event
//     rather than one per port) → origin /redfish/v1/Systems/{host};
//   - a device's temperature or link error rate reaching its threshold →
//     ResourceErrorThresholdExceeded once, and
//     ResourceErrorThresholdCleared when it is back under.
//
// Everything starts out presumed OK and under its thresholds, so the first
// poll reports whatever is already failed. A fabric whose Discover fails
// keeps its last known health, so a flaky driver does not make things
// flap. The events have no Tenant: only operators see them.
//
// A key of State.Health is a host port when it contains a slash, a host
// when it is the part before the slash of some port key, and a device
// otherwise.
type Monitor struct {
	bus       *Bus
	drivers   map[string]fabric.Driver
	fabrics   []string // driver IDs, sorted
	interval  time.Duration
	th        Thresholds
	clk       clock.Clock
	log       *slog.Logger
	sink      func(time.Time, map[string][]fabric.DeviceStats) // MonitorOptions.Stats
	publishes func() bool                                      // MonitorOptions.Publishes
	wall      func() time.Time                                 // what a pass costs is measured on (time.Now)

	mu        sync.Mutex // one poll at a time; guards the state below
	devices   map[elem]fabric.Health
	ports     map[elem]fabric.Health
	hostsSeen map[string]map[string]fabric.Health // fabric → host → last known health
	hosts     map[string]fabric.Health            // reported, by host
	hot       map[elem]bool                       // temperature threshold exceeded
	errWin    map[elem]*errorWindow
	erring    map[elem]bool // link error threshold exceeded

	// health is the devices' health as of the last poll (fabric → device),
	// replaced whole after each poll, so readers never wait for one.
	health    atomic.Pointer[map[string]map[string]fabric.Health]
	devHealth map[string]map[string]fabric.Health // by fabric: its last answer's devices
}

// DeviceHealth returns the health of device on fabric as of the last poll,
// and false when no poll has seen it. Reading it costs a map lookup: API
// requests use it instead of asking the fabric.
func (m *Monitor) DeviceHealth(fabricID, device string) (fabric.Health, bool) {
	snap := m.health.Load()
	if snap == nil {
		return "", false
	}
	h, ok := (*snap)[fabricID][device]
	return h, ok
}

// elem is one element of one fabric.
type elem struct{ fabric, id string }

// NewMonitor returns a monitor of drivers (keyed by fabric ID) that
// publishes on bus. Call Run, or Poll for one pass.
func NewMonitor(bus *Bus, drivers map[string]fabric.Driver, opts MonitorOptions) *Monitor {
	if opts.Interval <= 0 {
		opts.Interval = DefaultMonitorInterval
	}
	if opts.Thresholds.TemperatureC == 0 {
		opts.Thresholds.TemperatureC = DefaultTemperatureC
	}
	if opts.Thresholds.LinkErrors == 0 {
		opts.Thresholds.LinkErrors = DefaultLinkErrors
	}
	if opts.Thresholds.LinkErrorWindow <= 0 {
		opts.Thresholds.LinkErrorWindow = DefaultLinkErrorWindow
	}
	if opts.Clock == nil {
		opts.Clock = clock.Real{}
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	return &Monitor{
		bus:       bus,
		drivers:   maps.Clone(drivers),
		fabrics:   slices.Sorted(maps.Keys(drivers)),
		interval:  opts.Interval,
		th:        opts.Thresholds,
		clk:       opts.Clock,
		log:       opts.Logger,
		sink:      opts.Stats,
		publishes: opts.Publishes,
		wall:      time.Now,
		devices:   map[elem]fabric.Health{},
		ports:     map[elem]fabric.Health{},
		hostsSeen: map[string]map[string]fabric.Health{},
		devHealth: map[string]map[string]fabric.Health{},
		hosts:     map[string]fabric.Health{},
		hot:       map[elem]bool{},
		errWin:    map[elem]*errorWindow{},
		erring:    map[elem]bool{},
	}
}

// maxPollShare bounds the monitor's share of the time: when a pass takes
// longer than interval/maxPollShare (the planes of a pod: hundreds of
// thousands of devices and ports), Run skips ticks until maxPollShare
// times the pass has gone by, so the monitor keeps to about a tenth of a
// core whatever the fabrics' size, at the price of noticing later.
const maxPollShare = 10

// Run polls at once and then every interval of its clock until ctx ends,
// spacing its polls out when one takes more than a tenth of the interval
// (maxPollShare). Polling errors are logged; the next poll tries again.
func (m *Monitor) Run(ctx context.Context) {
	t := clock.NewTicker(m.clk, m.interval)
	defer t.Stop()
	var next time.Time // wall time before which ticks are skipped
	spaced := false
	for {
		if now := m.wall(); !now.Before(next) {
			if err := m.Poll(ctx); err != nil && ctx.Err() == nil {
				m.log.Warn("fabric monitor poll", "err", err)
			}
			next = time.Time{}
			if took := m.wall().Sub(now); took*maxPollShare > m.interval {
				next = now.Add(took * maxPollShare)
				if !spaced {
					m.log.Info("fabric monitor polls less often than --monitor-interval: a pass over the fabrics takes long",
						"pass", took.Round(time.Millisecond), "every", (took * maxPollShare).Round(time.Second), "interval", m.interval)
				}
			}
			spaced = !next.IsZero()
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C():
		}
	}
}

// Poll does one pass over every fabric, in fabric ID order, and publishes
// the events it finds, then hands the fabrics' telemetry to
// MonitorOptions.Stats. It returns the drivers' errors joined; the fabrics
// that answered are still checked.
func (m *Monitor) Poll(ctx context.Context) error {
	at, stats, err := m.poll(ctx)
	if len(stats) > 0 {
		m.sink(at, stats)
	}
	return err
}

// poll is Poll under the monitor's lock. It returns the time the pass
// began and, when there is a sink, the telemetry of the fabrics that
// answered.
func (m *Monitor) poll(ctx context.Context) (time.Time, map[string][]fabric.DeviceStats, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	at := m.clk.Now()
	var polled map[string][]fabric.DeviceStats
	var errs []error
	for _, fid := range m.fabrics {
		d := m.drivers[fid]
		st, err := d.Discover(ctx)
		if err != nil {
			errs = append(errs, fmt.Errorf("discover %s: %w", fid, err))
		} else {
			m.checkHealth(fid, st)
		}
		sr, ok := d.(fabric.StatsReporter)
		if !ok {
			continue
		}
		stats, err := sr.Stats(ctx)
		switch {
		case errors.Is(err, errors.ErrUnsupported):
		case err != nil:
			errs = append(errs, fmt.Errorf("stats %s: %w", fid, err))
		default:
			m.checkStats(fid, stats)
			if m.sink != nil {
				if polled == nil {
					polled = map[string][]fabric.DeviceStats{}
				}
				polled[fid] = stats // sorted by checkStats, and not kept by it
			}
		}
	}
	m.checkHosts()
	snap := maps.Clone(m.devHealth) // the per-fabric maps are never changed once made
	m.health.Store(&snap)
	return at, polled, errors.Join(errs...)
}

// checkHealth reports devices and host ports of fabric fid whose health
// changed, and records its hosts' health for checkHosts.
func (m *Monitor) checkHealth(fid string, st fabric.State) {
	hosts := map[string]bool{}
	for key := range st.Health {
		if host, _, ok := strings.Cut(key, "/"); ok {
			hosts[host] = true
		}
	}
	seen := map[string]fabric.Health{}
	devs := map[string]fabric.Health{}
	// Every key is compared with its last health; only the changes are
	// sorted and reported, in key order: a pod's planes hold hundreds of
	// thousands of ports and devices, and nearly all stay as they were.
	type change struct {
		key, name, origin string
		h                 fabric.Health
		oem               map[string]any
	}
	var changes []change
	for key, raw := range st.Health {
		h := normalHealth(raw)
		if host, port, ok := strings.Cut(key, "/"); ok {
			// Only the port's own failure: a failed host's ports are
			// reported by the host's event.
			if !worse(h, normalHealth(st.Health[host])) {
				h = fabric.OK
			}
			if m.changed(m.ports, elem{fid, key}, h) {
				id := host + "-" + port
				changes = append(changes, change{key, id, fabricsPath + fid + endpoints + id, h,
					map[string]any{"Fabric": fid, "Host": host, "Port": port}})
			}
			continue
		}
		if hosts[key] {
			seen[key] = h
			continue
		}
		devs[key] = h
		if m.changed(m.devices, elem{fid, key}, h) {
			changes = append(changes, change{key, key, fabricsPath + fid + endpoints + key, h,
				map[string]any{"Fabric": fid, "Device": key}})
		}
	}
	slices.SortFunc(changes, func(a, b change) int { return strings.Compare(a.key, b.key) })
	for _, c := range changes {
		m.publish(statusMessage(c.h).Event(TypeStatusChange, c.origin, c.name, string(c.h)), c.oem)
	}
	m.hostsSeen[fid] = seen
	m.devHealth[fid] = devs
}

// checkHosts reports hosts whose health, the worst any fabric last
// reported, changed.
func (m *Monitor) checkHosts() {
	worst := map[string]fabric.Health{}
	for _, seen := range m.hostsSeen {
		for host, h := range seen {
			if cur, ok := worst[host]; !ok || worse(h, cur) {
				worst[host] = h
			}
		}
	}
	for _, host := range slices.Sorted(maps.Keys(worst)) {
		h := worst[host]
		if prev, ok := m.hosts[host]; ok && prev == h || !ok && h == fabric.OK {
			m.hosts[host] = h
			continue
		}
		m.hosts[host] = h
		m.publish(statusMessage(h).Event(TypeStatusChange, systemsPath+host, host, string(h)),
			map[string]any{"Host": host})
	}
}

// changed records h as e's health in last and reports whether it differs
// from the health before (OK when none was recorded).
func (m *Monitor) changed(last map[elem]fabric.Health, e elem, h fabric.Health) bool {
	prev, ok := last[e]
	if !ok {
		prev = fabric.OK
	}
	if ok && prev == h {
		return false
	}
	last[e] = h
	return prev != h
}

// checkStats reports threshold crossings of fabric fid's devices.
func (m *Monitor) checkStats(fid string, stats []fabric.DeviceStats) {
	now := m.clk.Now()
	slices.SortFunc(stats, func(a, b fabric.DeviceStats) int { return strings.Compare(a.Device, b.Device) })
	for _, s := range stats {
		e := elem{fid, s.Device}
		origin := fabricsPath + fid + endpoints + s.Device
		temp := s.TemperatureC >= m.th.TemperatureC
		m.crossing(m.hot, e, temp, origin, propertyTemperature, strconv.FormatFloat(m.th.TemperatureC, 'f', -1, 64),
			map[string]any{"Fabric": fid, "Device": s.Device, "TemperatureCelsius": s.TemperatureC})

		w := m.errWin[e]
		if w == nil {
			w = &errorWindow{}
			m.errWin[e] = w
		}
		n := w.add(now, s.CorrectableErrors+s.UncorrectableErrs, m.th.LinkErrorWindow)
		m.crossing(m.erring, e, n >= m.th.LinkErrors, origin, propertyLinkErrors, strconv.FormatUint(m.th.LinkErrors, 10),
			map[string]any{"Fabric": fid, "Device": s.Device, "LinkErrors": n, "WindowSeconds": m.th.LinkErrorWindow.Seconds()})
	}
}

// crossing publishes Exceeded when over becomes true for e and Cleared
// when it becomes false.
func (m *Monitor) crossing(state map[elem]bool, e elem, over bool, origin, property, threshold string, oem map[string]any) {
	if state[e] == over {
		return
	}
	state[e] = over
	msg := ResourceErrorThresholdCleared
	if over {
		msg = ResourceErrorThresholdExceeded
	}
	m.publish(msg.Event(TypeAlert, origin, property, threshold), oem)
}

func (m *Monitor) publish(e Event, oem map[string]any) {
	if m.publishes != nil && !m.publishes() {
		return
	}
	e.Oem = map[string]any{oemVendor: oem}
	m.bus.Publish(e)
}

// errorWindow holds a device's cumulative error counts long enough to tell
// how many it logged within the window.
type errorWindow struct{ samples []errorSample } // oldest first

type errorSample struct {
	at    time.Time
	total uint64
}

// add records the cumulative count total at time at and returns how much
// it grew since the newest sample at least window old (or the oldest
// sample, while there is no such one). A count that went down (counters
// reset, device replaced) starts the window afresh.
func (w *errorWindow) add(at time.Time, total uint64, window time.Duration) uint64 {
	if n := len(w.samples); n > 0 && total < w.samples[n-1].total {
		w.samples = w.samples[:0]
	}
	w.samples = append(w.samples, errorSample{at, total})
	cut := at.Add(-window)
	i := 0
	for i+1 < len(w.samples) && !w.samples[i+1].at.After(cut) {
		i++
	}
	w.samples = slices.Delete(w.samples, 0, i)
	return total - w.samples[0].total
}

// statusMessage is the ResourceStatusChanged message for h.
func statusMessage(h fabric.Health) RegistryMessage {
	switch h {
	case fabric.OK:
		return ResourceStatusChangedOK
	case fabric.Critical:
		return ResourceStatusChangedCritical
	}
	return ResourceStatusChangedWarning
}

// normalHealth maps anything but OK, Warning and Critical to Warning: a
// driver reporting a health the monitor does not know is not healthy.
func normalHealth(h fabric.Health) fabric.Health {
	switch h {
	case fabric.OK, fabric.Warning, fabric.Critical:
		return h
	case "":
		return fabric.OK
	}
	return fabric.Warning
}

// worse reports whether a is a worse health than b.
func worse(a, b fabric.Health) bool { return rank(a) > rank(b) }

func rank(h fabric.Health) int {
	switch h {
	case fabric.OK, "":
		return 0
	case fabric.Warning:
		return 1
	}
	return 2
}
