package emulated

import (
	"cmp"
	"context"
	"fmt"
	"hash/fnv"
	"slices"
	"sync"
	"time"

	"rackpool/internal/clock"
	"rackpool/internal/fabric"
	"rackpool/internal/inventory"
	"rackpool/internal/topology"
)

// model is the fabric-specific part of a driver: the physics one kind of
// hardware enforces. The engine calls it with its mutex held, after the
// generic checks (the block, host and port exist, the port reaches the
// device, nothing has failed, no injected fault fired) and only when the
// pair is not attached yet.
type model interface {
	// attach admits l and updates the model's own state, returning the
	// modelled time. On error it must change nothing.
	attach(l *link) (time.Duration, error)
	// detach forgets l, which is attached, and returns the modelled time.
	detach(l *link) time.Duration
}

// faultModel is implemented by models that accept fault kinds beyond the
// engine's own (cxl-memory's ReleaseStalls). The engine calls it with its
// mutex held.
type faultModel interface {
	// inject arms f, whose kind the engine does not know, or fails.
	inject(f fabric.Fault) error
	// clearFaults disarms what inject armed.
	clearFaults()
}

// key identifies an attachment: one block on one host port. Host port IDs
// are per host ("pcie" on every host), so the host is part of the key.
type key struct{ block, host, port string }

// link is one attachment with the inventory objects it joins.
type link struct {
	fabric.Attachment
	blk   *inventory.Block
	dev   *inventory.Device
	hp    *inventory.HostPort
	since time.Time // when the attachment was established
	gen   uint64    // engine generation that established it
}

func (l *link) key() key { return key{l.Block, l.Host, l.HostPort} }

// Mapping is an established attachment together with when it was
// established. An attachment that is never detached keeps its Since and
// Generation for as long as it exists, which is how tests prove that
// reconfiguring one attachment did not interrupt another.
type Mapping struct {
	fabric.Attachment
	Since      time.Time
	Generation uint64
}

// linkDefaults is what Stats reports for a device that does not name its
// own link width or speed.
type linkDefaults struct {
	width func(d *inventory.Device) int
	speed string
}

// engine is the part every emulated driver shares: validation, the
// attachment table, idempotency, faults, timing and telemetry. The
// fabric-specific physics live in model.
type engine struct {
	top   *topology.Topology
	fab   *inventory.Fabric
	clk   clock.Clock
	model model
	links linkDefaults

	mu     sync.Mutex
	att    map[key]*link
	gen    uint64
	faults fabric.Faults
	errs   map[string]*errCounters // by device ID
	fence  fabric.Fence            // the highest leadership epoch seen
}

type errCounters struct{ correctable, uncorrectable uint64 }

func newEngine(top *topology.Topology, f *inventory.Fabric, clk clock.Clock, want inventory.FabricKind) (*engine, error) {
	if top == nil || f == nil {
		return nil, fmt.Errorf("emulated %s driver: nil topology or fabric", want)
	}
	if top.Fabric(f.ID) != f {
		return nil, fmt.Errorf("emulated %s driver: fabric %s is not part of topology %s", want, f.ID, top.Name)
	}
	if f.Kind != want {
		return nil, fmt.Errorf("emulated %s driver: fabric %s is %s", want, f.ID, f.Kind)
	}
	if clk == nil {
		clk = clock.Real{}
	}
	return &engine{
		top:  top,
		fab:  f,
		clk:  clk,
		att:  map[key]*link{},
		errs: map[string]*errCounters{},
	}, nil
}

// resolve checks that a names a block of this fabric, its device, a host
// and that host's port into this fabric, and returns the link it would be.
func (e *engine) resolve(a fabric.Attachment) (*link, error) {
	blk := e.top.Block(a.Block)
	if blk == nil || blk.Device == nil || blk.Device.Fabric != e.fab {
		return nil, fmt.Errorf("block %q: %w", a.Block, fabric.ErrUnknown)
	}
	dev := blk.Device
	if a.Device != "" && a.Device != dev.ID {
		return nil, fmt.Errorf("block %s belongs to device %s, not %q: %w", blk.ID, dev.ID, a.Device, fabric.ErrUnknown)
	}
	h := e.top.Host(a.Host)
	if h == nil {
		return nil, fmt.Errorf("host %q: %w", a.Host, fabric.ErrUnknown)
	}
	var hp *inventory.HostPort
	for _, p := range h.Ports {
		if p.ID == a.HostPort && p.Fabric == e.fab {
			hp = p
			break
		}
	}
	if hp == nil {
		return nil, fmt.Errorf("host %s has no port %q into fabric %s: %w", h.ID, a.HostPort, e.fab.ID, fabric.ErrUnknown)
	}
	a.Device = dev.ID
	return &link{Attachment: a, blk: blk, dev: dev, hp: hp}, nil
}

// Attach connects a.Block to a.HostPort; see fabric.Driver. The checks run
// in this order: the names exist (ErrUnknown), the port reaches the device
// (ErrUnreachable), nothing involved has failed (ErrFailed), no injected
// fault fires (ErrInjected), the pair is not already attached (idempotent
// success), the fabric's physics allow it. The modelled time is slept on
// the driver's clock after the change is recorded and the lock released,
// so Discover and other attachments proceed meanwhile.
func (e *engine) Attach(ctx context.Context, a fabric.Attachment) (fabric.Result, error) {
	if err := ctx.Err(); err != nil {
		return fabric.Result{}, fmt.Errorf("attach %s to %s/%s: %w", a.Block, a.Host, a.HostPort, err)
	}
	took, changed, err := e.attach(ctx, a)
	if err != nil {
		return fabric.Result{}, fmt.Errorf("attach %s to %s/%s: %w", a.Block, a.Host, a.HostPort, err)
	}
	if !changed {
		return fabric.Result{}, nil
	}
	e.clk.Sleep(took)
	return fabric.Result{Took: took, Changed: true}, nil
}

func (e *engine) attach(ctx context.Context, a fabric.Attachment) (time.Duration, bool, error) {
	l, err := e.resolve(a)
	if err != nil {
		return 0, false, err
	}
	if !e.top.Reaches(l.hp, l.dev) {
		return 0, false, fmt.Errorf("%s cannot reach %s: %w", fabric.PortName(l.Host, l.HostPort), l.dev.ID, fabric.ErrUnreachable)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if err := e.fence.Admit(ctx); err != nil {
		return 0, false, err
	}
	if err := e.faults.Failed(l.dev.ID, l.Host, l.HostPort); err != nil {
		return 0, false, err
	}
	if e.faults.FireAttach(l.dev.ID) {
		return 0, false, fmt.Errorf("attach of %s: %w", l.dev.ID, fabric.ErrInjected)
	}
	if _, ok := e.att[l.key()]; ok {
		return 0, false, nil
	}
	took, err := e.model.attach(l)
	if err != nil {
		return 0, false, err
	}
	e.gen++
	l.gen, l.since = e.gen, e.clk.Now()
	e.att[l.key()] = l
	return took, true, nil
}

// Detach disconnects a.Block from a.HostPort; see fabric.Driver. Failed
// devices, ports and hosts never stop a detach.
func (e *engine) Detach(ctx context.Context, a fabric.Attachment) (fabric.Result, error) {
	if err := ctx.Err(); err != nil {
		return fabric.Result{}, fmt.Errorf("detach %s from %s/%s: %w", a.Block, a.Host, a.HostPort, err)
	}
	l, err := e.resolve(a)
	if err != nil {
		return fabric.Result{}, fmt.Errorf("detach %s from %s/%s: %w", a.Block, a.Host, a.HostPort, err)
	}
	e.mu.Lock()
	if err := e.fence.Admit(ctx); err != nil {
		e.mu.Unlock()
		return fabric.Result{}, fmt.Errorf("detach %s from %s/%s: %w", a.Block, a.Host, a.HostPort, err)
	}
	cur, ok := e.att[l.key()]
	var took time.Duration
	if ok {
		took = e.model.detach(cur)
		delete(e.att, l.key())
		e.gen++
	}
	e.mu.Unlock()
	if !ok {
		return fabric.Result{}, nil
	}
	e.clk.Sleep(took)
	return fabric.Result{Took: took, Changed: true}, nil
}

// Discover returns the attachments, sorted by block (in inventory order),
// host and port, and the health of every device, host port ("host/port")
// and host of the fabric.
func (e *engine) Discover(ctx context.Context) (fabric.State, error) {
	if err := ctx.Err(); err != nil {
		return fabric.State{}, fmt.Errorf("discover %s: %w", e.fab.ID, err)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	st := fabric.State{Health: map[string]fabric.Health{}}
	for _, l := range e.sortedLinks() {
		st.Attachments = append(st.Attachments, l.Attachment)
	}
	for _, d := range e.fab.Devices {
		st.Health[d.ID] = e.deviceHealth(d)
	}
	for _, p := range e.fab.Ports {
		h := fabric.OK
		if e.faults.HostFailed(p.Host.ID) {
			st.Health[p.Host.ID] = fabric.Critical
			h = fabric.Critical
		} else if _, ok := st.Health[p.Host.ID]; !ok {
			st.Health[p.Host.ID] = fabric.OK
		}
		if e.faults.PortFailed(p.Host.ID, p.ID) {
			h = fabric.Critical
		}
		st.Health[fabric.PortName(p.Host.ID, p.ID)] = h
	}
	return st, nil
}

// sortedLinks returns the attachments in a deterministic order. Call with
// e.mu held.
func (e *engine) sortedLinks() []*link {
	out := make([]*link, 0, len(e.att))
	for _, l := range e.att {
		out = append(out, l)
	}
	slices.SortFunc(out, func(a, b *link) int {
		return cmp.Or(cmp.Compare(a.blk.Index, b.blk.Index), cmp.Compare(a.Host, b.Host), cmp.Compare(a.HostPort, b.HostPort))
	})
	return out
}

// blockLinks returns how many host ports block is attached to. Call with
// e.mu held.
func (e *engine) blockLinks(block string) int {
	n := 0
	for k := range e.att {
		if k.block == block {
			n++
		}
	}
	return n
}

// checkInUse fails with ErrInUse when l's block already has as many
// attachments as it may. Call with e.mu held.
func (e *engine) checkInUse(l *link) error {
	limit := max(l.blk.MaxCompositions, 1)
	if n := e.blockLinks(l.Block); n >= limit {
		return fmt.Errorf("%s is attached to %d of at most %d host ports: %w", l.Block, n, limit, fabric.ErrInUse)
	}
	return nil
}

// mappings returns every attachment with its establishment time.
func (e *engine) mappings() []Mapping {
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []Mapping
	for _, l := range e.sortedLinks() {
		out = append(out, Mapping{Attachment: l.Attachment, Since: l.since, Generation: l.gen})
	}
	return out
}

// deviceHealth is Critical for a failed device, Warning when one of its
// attachments runs through a failed port or host, else OK. Call with e.mu
// held.
func (e *engine) deviceHealth(d *inventory.Device) fabric.Health {
	if e.faults.DeviceFailed(d.ID) {
		return fabric.Critical
	}
	if e.degraded(d) {
		return fabric.Warning
	}
	return fabric.OK
}

// degraded reports whether an attachment of d runs through a failed port or
// host. Call with e.mu held.
func (e *engine) degraded(d *inventory.Device) bool {
	for _, l := range e.att {
		if l.dev == d && e.faults.PortDown(l.Host, l.HostPort) {
			return true
		}
	}
	return false
}

// Telemetry model constants.
const (
	idleTempC      = 35.0 // an unattached device
	tempPerUtilC   = 30.0 // extra degrees at 100% utilisation
	failedTempC    = 85.0 // a failed device runs hot
	baseUtil       = 50.0 // an attached device's utilisation before its per-device offset
	utilPerExtra   = 10.0 // each further host sharing a device
	corrPerPoll    = 8    // correctable errors a failed device logs per Stats poll
	uncorrPerPoll  = 1    // uncorrectable errors a failed device logs per Stats poll
	corrPerBadPoll = 4    // correctable errors per poll over a failed port or host
)

// Stats reports each device's telemetry from a deterministic model.
//
// Utilisation is 0 for an unattached device; a memory node reports the
// share of its blocks that are attached; any other attached device reports
// 50% plus a fixed per-device offset (0..29, from a hash of its ID) plus 10%
// per further host sharing it, capped at 100%. Temperature is 35 °C plus
// 30 °C at full utilisation; a failed device reads 85 °C, 0 lanes and 0%.
// Error counters accumulate per poll: a failed device logs 8 correctable
// and 1 uncorrectable error per Stats call, a device attached over a failed
// port or host 4 correctable ones. Counters survive ClearFaults, as a
// switch's accumulated error counts do.
func (e *engine) Stats(ctx context.Context) ([]fabric.DeviceStats, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("stats %s: %w", e.fab.ID, err)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	out := make([]fabric.DeviceStats, 0, len(e.fab.Devices))
	for _, d := range e.fab.Devices {
		ec := e.errs[d.ID]
		if ec == nil {
			ec = &errCounters{}
			e.errs[d.ID] = ec
		}
		failed := e.faults.DeviceFailed(d.ID)
		if failed {
			ec.correctable += corrPerPoll
			ec.uncorrectable += uncorrPerPoll
		} else if e.degraded(d) {
			ec.correctable += corrPerBadPoll
		}
		s := fabric.DeviceStats{
			Device:            d.ID,
			LinkWidth:         d.LinkWidth,
			LinkSpeed:         d.LinkSpeed,
			CorrectableErrors: ec.correctable,
			UncorrectableErrs: ec.uncorrectable,
			Health:            e.deviceHealth(d),
		}
		if s.LinkWidth == 0 && e.links.width != nil {
			s.LinkWidth = e.links.width(d)
		}
		if s.LinkSpeed == "" {
			s.LinkSpeed = e.links.speed
		}
		if failed {
			s.LinkWidth, s.TemperatureC = 0, failedTempC
		} else {
			s.UtilisationPercent = e.utilisation(d)
			s.TemperatureC = idleTempC + tempPerUtilC*s.UtilisationPercent/100
		}
		out = append(out, s)
	}
	return out, nil
}

// utilisation is the modelled utilisation of d in percent. Call with e.mu
// held.
func (e *engine) utilisation(d *inventory.Device) float64 {
	n := 0
	blocks := map[string]bool{}
	for _, l := range e.att {
		if l.dev == d {
			n++
			blocks[l.Block] = true
		}
	}
	switch {
	case n == 0:
		return 0
	case d.Kind == inventory.Memory && len(d.Blocks) > 0:
		return 100 * float64(len(blocks)) / float64(len(d.Blocks))
	}
	h := fnv.New32a()
	h.Write([]byte(d.ID))
	return min(100, baseUtil+float64(h.Sum32()%30)+utilPerExtra*float64(n-1))
}

// InjectFault arms f; see fabric.FaultInjector. The target must be part of
// this fabric (a device, a "host/port" port or a host with a port into it),
// else the error wraps fabric.ErrUnknown. AttachFails with Count 0 fails
// one attach.
func (e *engine) InjectFault(f fabric.Fault) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	took, err := e.faults.Arm(f, fabric.Targets{Device: e.hasDevice, Port: e.hasPort, Host: e.hasHost})
	if took {
		return err
	}
	if fm, ok := e.model.(faultModel); ok {
		return fm.inject(f)
	}
	return fmt.Errorf("inject fault: kind %q is not one a %s fabric takes", f.Kind, e.fab.Kind)
}

// ClearFaults clears every injected fault; see fabric.FaultInjector.
func (e *engine) ClearFaults() {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.faults.Clear()
	if fm, ok := e.model.(faultModel); ok {
		fm.clearFaults()
	}
}

// Latency reports an attached pair's path as the topology's latency model
// computes it for that host port (see fabric.LatencyReporter): what the
// host would measure once the attach is done.
func (e *engine) Latency(ctx context.Context, a fabric.Attachment) (fabric.Latency, error) {
	if err := ctx.Err(); err != nil {
		return fabric.Latency{}, err
	}
	l, err := e.resolve(a)
	if err != nil {
		return fabric.Latency{}, fmt.Errorf("latency of %s on %s/%s: %w", a.Block, a.Host, a.HostPort, err)
	}
	e.mu.Lock()
	_, ok := e.att[l.key()]
	e.mu.Unlock()
	if !ok {
		return fabric.Latency{}, fmt.Errorf("latency of %s on %s/%s: not attached: %w", a.Block, a.Host, a.HostPort, fabric.ErrUnknown)
	}
	p, ok := e.top.PortPath(l.hp, l.dev)
	if !ok {
		return fabric.Latency{}, fmt.Errorf("latency of %s on %s/%s: %w", a.Block, a.Host, a.HostPort, fabric.ErrUnreachable)
	}
	return fabric.Latency{Hops: p.Hops, RTTNS: p.RTTNS}, nil
}

func (e *engine) hasDevice(id string) bool {
	d := e.top.Device(id)
	return d != nil && d.Fabric == e.fab
}

func (e *engine) hasPort(name string) bool {
	for _, p := range e.fab.Ports {
		if fabric.PortName(p.Host.ID, p.ID) == name {
			return true
		}
	}
	return false
}

func (e *engine) hasHost(id string) bool {
	for _, p := range e.fab.Ports {
		if p.Host.ID == id {
			return true
		}
	}
	return false
}

// Restore takes back attachments the hardware kept while the control plane
// was down (see fabric.Restorer): each goes through the same checks and
// physics as Attach but takes no modelled time and ignores injected attach
// faults. Already-present attachments are left alone.
func (e *engine) Restore(ctx context.Context, as []fabric.Attachment) error {
	for _, a := range as {
		if err := ctx.Err(); err != nil {
			return err
		}
		l, err := e.resolve(a)
		if err != nil {
			return fmt.Errorf("restore %s on %s/%s: %w", a.Block, a.Host, a.HostPort, err)
		}
		if !e.top.Reaches(l.hp, l.dev) {
			return fmt.Errorf("restore %s on %s/%s: %w", a.Block, a.Host, a.HostPort, fabric.ErrUnreachable)
		}
		e.mu.Lock()
		if _, ok := e.att[l.key()]; !ok {
			if _, err := e.model.attach(l); err != nil {
				e.mu.Unlock()
				return fmt.Errorf("restore %s on %s/%s: %w", a.Block, a.Host, a.HostPort, err)
			}
			e.gen++
			l.gen, l.since = e.gen, e.clk.Now()
			e.att[l.key()] = l
		}
		e.mu.Unlock()
	}
	return nil
}
