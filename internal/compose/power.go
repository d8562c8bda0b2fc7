package compose

// Power and boot of systems (docs/redfish.md, "Power and boot").
//
// A composed system's power state and boot override are part of its record:
// a reset writes the transition (PoweringOn, PoweringOff) as an intent,
// runs it on the host (PowerDriver: the model, or the host's BMC), and
// commits the outcome with the request's audit entry. A host that no
// composition holds keeps its power in a store object of kind
// HostPowerKind (absent: Off, no override); a compose takes it into the
// new record and removes the object in the same commit, and a decompose
// leaves the host Off.
//
// Rules that keep hardware safe: a reset waits for nothing else on the
// system (a system in transition answers ErrBusy); a decompose of a system
// that is not Off shuts it down first (GracefulShutdown, then ForceOff
// when the host is not Off after its shutdown time); blocks are added to
// or removed from a running system only when their fabric hot-plugs them
// (ErrPowered otherwise).

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"rackpool/internal/clock"
	"rackpool/internal/inventory"
	"rackpool/internal/store"
)

// HostPowerKind is the store object kind of a free host's power state.
const HostPowerKind = "host-power"

// Reset types (Redfish ResetType) the model implements.
const (
	ResetOn               = "On"
	ResetForceOn          = "ForceOn"
	ResetForceOff         = "ForceOff"
	ResetGracefulShutdown = "GracefulShutdown"
	ResetGracefulRestart  = "GracefulRestart"
	ResetForceRestart     = "ForceRestart"
	ResetPowerCycle       = "PowerCycle"
	ResetNmi              = "Nmi"
)

// ModelResetTypes are the reset types of an emulated host.
var ModelResetTypes = []string{ResetOn, ResetForceOn, ResetForceOff, ResetGracefulShutdown, ResetGracefulRestart, ResetForceRestart, ResetPowerCycle, ResetNmi}

// Boot override values (Redfish Boot).
var (
	BootEnabledValues = []string{"Disabled", "Once", "Continuous"}
	ModelBootTargets  = []string{"None", "Pxe", "Hdd", "Cd", "UefiHttp", "UefiTarget", "UefiBootNext", "BiosSetup"}
	BootModeValues    = []string{"UEFI", "Legacy"}
)

// Errors of power and boot.
var (
	// ErrPowerState: the reset does not apply in the system's power state
	// (GracefulRestart of a system that is Off).
	ErrPowerState = errors.New("reset does not apply in this power state")
	// ErrPowered: blocks that the fabric cannot hot-plug would be added to
	// or removed from a system that is not Off.
	ErrPowered = errors.New("system is powered on")
	// ErrPowerValue: a reset type or boot value the host does not offer.
	ErrPowerValue = errors.New("value not supported by the host")
	// ErrPowerHost: the host's BMC failed or could not be reached; its
	// state is then unknown (read the system again).
	ErrPowerHost = errors.New("the host's BMC failed")
)

// ResetTypeError is a reset type the host does not offer; it wraps
// ErrPowerValue.
type ResetTypeError struct {
	Type    string
	Allowed []string
}

func (e *ResetTypeError) Error() string {
	return fmt.Sprintf("%v: reset type %q (the host offers %v)", ErrPowerValue, e.Type, e.Allowed)
}

func (e *ResetTypeError) Unwrap() error { return ErrPowerValue }

// ValueError is a boot property whose value the host does not offer
// (Allowed), or, with no Allowed, a property the target needs and lacks
// (UefiTargetBootSourceOverride for UefiTarget, BootNext for UefiBootNext);
// it wraps ErrPowerValue.
type ValueError struct {
	Property, Value string
	Allowed         []string
}

func (e *ValueError) Error() string {
	if e.Allowed == nil {
		target := "UefiTarget"
		if e.Property == "BootNext" {
			target = "UefiBootNext"
		}
		return fmt.Sprintf("%v: BootSourceOverrideTarget %s needs %s", ErrPowerValue, target, e.Property)
	}
	return fmt.Sprintf("%v: %s %q (allowed: %v)", ErrPowerValue, e.Property, e.Value, e.Allowed)
}

func (e *ValueError) Unwrap() error { return ErrPowerValue }

// PowerCaps are what a host offers.
type PowerCaps struct {
	ResetTypes  []string
	BootTargets []string
}

// PowerDriver runs power and boot on hosts: the model (the default), or a
// host's BMC.
type PowerDriver interface {
	// Caps returns what host offers.
	Caps(ctx context.Context, host *inventory.Host) (PowerCaps, error)
	// Reset runs reset t on host, whose recorded state is cur, and returns
	// the state after it. A graceful shutdown that the host does not
	// finish in its shutdown time returns the state it is in (On).
	Reset(ctx context.Context, host *inventory.Host, cur inventory.Power, t string) (inventory.Power, error)
	// SetBoot sets the boot override and returns the state after it.
	SetBoot(ctx context.Context, host *inventory.Host, cur inventory.Power, b inventory.Boot) (inventory.Power, error)
	// State returns the host's state, for a record a crash left in
	// transition (cur, with the reset under way in cur.Reset).
	State(ctx context.Context, host *inventory.Host, cur inventory.Power) (inventory.Power, error)
}

// transition is what a reset does from a power state.
type transition struct {
	via   string // the state while it runs ("": no transition)
	final string
	boots bool          // the host boots (a Once override is then used up)
	took  time.Duration // the model's time
}

// plan returns what reset t does to a host in state cur.
func plan(h *inventory.Host, cur inventory.Power, t string) (transition, error) {
	on := cur.State == inventory.PowerOn
	off := cur.IsOff()
	state := cur.State
	if off {
		state = inventory.PowerOff
	}
	if !on && !off {
		return transition{}, fmt.Errorf("%w: the system is %s", ErrBusy, cur.State)
	}
	needsOn := func() (transition, error) {
		return transition{}, fmt.Errorf("%w: %s needs the system On and it is Off; use On", ErrPowerState, t)
	}
	switch t {
	case ResetOn, ResetForceOn: // the model has no power-on delay to skip
		if on {
			return transition{final: state}, nil
		}
		return transition{via: inventory.PowerPoweringOn, final: inventory.PowerOn, boots: true, took: h.PowerOn}, nil
	case ResetForceOff:
		if off {
			return transition{final: state}, nil
		}
		return transition{via: inventory.PowerPoweringOff, final: inventory.PowerOff}, nil
	case ResetGracefulShutdown:
		if off {
			return transition{final: state}, nil
		}
		return transition{via: inventory.PowerPoweringOff, final: inventory.PowerOff, took: h.Shutdown}, nil
	case ResetGracefulRestart, ResetForceRestart:
		// A restart of a system that is Off starts it, as BMCs do and as
		// DMTF's Use Case Checkers expect (PowerCycle already did).
		took := h.PowerOn
		if t == ResetGracefulRestart && on {
			took += h.Shutdown
		}
		return transition{via: inventory.PowerPoweringOn, final: inventory.PowerOn, boots: true, took: took}, nil
	case ResetPowerCycle:
		return transition{via: inventory.PowerPoweringOn, final: inventory.PowerOn, boots: true, took: h.PowerOn}, nil
	case ResetNmi:
		if off {
			return needsOn()
		}
		return transition{final: state}, nil
	}
	return transition{}, fmt.Errorf("%w: reset type %q", ErrPowerValue, t)
}

// booted returns p after a boot: a Once override is used up, and so is
// BootNext, which UEFI firmware clears when it boots it.
func booted(p inventory.Power) inventory.Power {
	if p.Boot.Enabled == "Once" {
		p.Boot.Enabled, p.Boot.Target, p.Boot.UefiTarget = "Disabled", "None", ""
	}
	if p.Boot.Target != "UefiBootNext" || p.Boot.Enabled == "Disabled" {
		p.Boot.BootNext = ""
	}
	return p
}

// BootOption is one thing an emulated system can boot from (Redfish
// BootOption): the host's own network, or a drive or NIC composed into it.
type BootOption struct {
	// Ref is its BootOptionReference, what BootNext names: "Pxe" for the
	// host's own network, else the block's ID (stable while the block is
	// composed, unlike a Boot#### number).
	Ref   string
	Name  string
	Alias string // the BootSourceOverrideTarget it is (Pxe, Hdd)
	Block string // the composed block; "" for the host's own network
}

// bootOptions are what the emulated system pt can boot from, in boot
// order: the host's network, then its composed drives and NICs in block
// order.
func (m *Manager) bootOptions(pt *powerTarget) []BootOption {
	opts := []BootOption{{Ref: "Pxe", Name: "Network boot (PXE) of host " + pt.host.ID, Alias: "Pxe"}}
	if pt.comp == nil {
		return opts
	}
	for _, id := range pt.comp.Blocks {
		b := m.top.Block(id)
		if b == nil {
			continue
		}
		switch b.Kind {
		case inventory.NVMe, inventory.SSD, inventory.HDD:
			opts = append(opts, BootOption{Ref: id, Name: "Pooled " + strings.ToUpper(string(b.Kind)) + " drive " + id, Alias: "Hdd", Block: id})
		case inventory.NIC:
			opts = append(opts, BootOption{Ref: id, Name: "Network boot (PXE) over pooled NIC " + id, Alias: "Pxe", Block: id})
		}
	}
	return opts
}

// ModelPower is the PowerDriver of emulated hosts: a reset takes the
// host's modelled time on clk (PowerOn, Shutdown), and the host always
// does what it is asked.
type ModelPower struct{ Clock clock.Clock }

// Caps implements PowerDriver.
func (ModelPower) Caps(context.Context, *inventory.Host) (PowerCaps, error) {
	return PowerCaps{ResetTypes: ModelResetTypes, BootTargets: ModelBootTargets}, nil
}

// Reset implements PowerDriver.
func (mp ModelPower) Reset(ctx context.Context, h *inventory.Host, cur inventory.Power, t string) (inventory.Power, error) {
	tr, err := plan(h, cur, t)
	if err != nil {
		return cur, err
	}
	if err := clock.SleepContext(ctx, mp.Clock, tr.took); err != nil {
		return cur, err // stopped (a ForceOff): the host is as it was
	}
	next := cur
	next.State, next.Reset, next.Since = tr.final, "", time.Time{}
	if tr.boots {
		next = booted(next)
	}
	return next, nil
}

// State implements PowerDriver: a reset left in transition is done.
func (ModelPower) State(_ context.Context, _ *inventory.Host, cur inventory.Power) (inventory.Power, error) {
	switch cur.State {
	case inventory.PowerPoweringOn:
		cur.State = inventory.PowerOn
		cur = booted(cur)
	case inventory.PowerPoweringOff:
		cur.State = inventory.PowerOff
	}
	cur.Reset, cur.Since = "", time.Time{}
	return cur, nil
}

// SetBoot implements PowerDriver.
func (ModelPower) SetBoot(_ context.Context, _ *inventory.Host, cur inventory.Power, b inventory.Boot) (inventory.Power, error) {
	cur.Boot = b
	return cur, nil
}

// powerTarget is the system a power operation acts on: a composition, or
// a host no composition holds.
type powerTarget struct {
	host *inventory.Host
	comp *inventory.Composition // nil for a free host
	// power and version of a free host's object (0: absent).
	power   inventory.Power
	version int64
	// run, when set, lets a ForceOff stop the reset runPower runs.
	run *powerRun
}

// versionOf is the composition's version, or the free host's object's.
func (t *powerTarget) versionOf() int64 {
	if t.comp != nil {
		return t.comp.Version
	}
	return t.version
}

// current returns the target's power state.
func (t *powerTarget) current() inventory.Power {
	if t.comp != nil {
		return t.comp.Power
	}
	return t.power
}

// powerDriver returns the driver of host h.
func (m *Manager) powerDriver(h *inventory.Host) PowerDriver {
	if m.power != nil {
		if d := m.power(h); d != nil {
			return d
		}
	}
	return ModelPower{Clock: m.clk}
}

// PowerState is a system's power as Power returns it.
type PowerState struct {
	inventory.Power
	Caps PowerCaps
	// Version is the composition's version, or the free host's power
	// object's.
	Version int64
	// BootOptions are what an emulated system boots from (see
	// bootOptions); nil for a host a BMC manages, whose BMC has its own.
	BootOptions []BootOption
}

// Power returns the power state of system id: a composition (as its
// record holds it) or a free host. A host that a composition holds answers
// with that composition's state.
func (m *Manager) Power(ctx context.Context, id string) (PowerState, error) {
	t, err := m.powerTarget(ctx, id)
	if err != nil {
		return PowerState{}, err
	}
	d := m.powerDriver(t.host)
	caps, err := d.Caps(ctx, t.host)
	if err != nil {
		m.log.Warn("power capabilities", "host", t.host.ID, "err", err)
	}
	m.live(ctx, d, t)
	ps := PowerState{Power: t.current(), Caps: caps, Version: t.versionOf()}
	if _, model := d.(ModelPower); model {
		ps.BootOptions = m.bootOptions(t)
	}
	return ps, nil
}

// powerTarget finds system id.
func (m *Manager) powerTarget(ctx context.Context, id string) (*powerTarget, error) {
	m.mu.Lock()
	c := m.comps[id]
	if h := m.top.Host(id); h != nil {
		c = m.holderOf(h)
	}
	if c != nil && system(c) {
		defer m.mu.Unlock()
		return &powerTarget{host: m.top.Host(c.Host), comp: c.Clone()}, nil
	}
	m.mu.Unlock()
	h := m.top.Host(id)
	if h == nil {
		return nil, fmt.Errorf("%w: %s", ErrNotFound, id)
	}
	p, v, err := m.hostPower(ctx, h.ID)
	if err != nil {
		return nil, err
	}
	return &powerTarget{host: h, power: p, version: v}, nil
}

// live replaces the target's recorded power state and boot override with
// what its host reports (a BMC may have been used directly; the model
// reports what is recorded). A transition under way, and a host that
// cannot be read, keep the record's.
func (m *Manager) live(ctx context.Context, d PowerDriver, t *powerTarget) {
	cur := t.current()
	if inTransition(cur) {
		return
	}
	p, err := d.State(ctx, t.host, cur)
	if err != nil {
		m.log.Warn("power state of host", "host", t.host.ID, "err", err)
		return
	}
	if t.comp != nil {
		t.comp.Power.State, t.comp.Power.Boot = p.State, p.Boot
	} else {
		t.power.State, t.power.Boot = p.State, p.Boot
	}
}

// holderOf returns the composition holding host h's compute block, nil
// when none does. m.mu must be held.
func (m *Manager) holderOf(h *inventory.Host) *inventory.Composition {
	if h.Block == nil {
		return nil
	}
	for _, id := range m.owners[h.Block.ID] {
		if c := m.comps[id]; c != nil && system(c) {
			return c
		}
	}
	return nil
}

// hostPowerRecord is the JSON of a free host's power object.
type hostPowerRecord struct {
	State string         `json:"state,omitempty"`
	Reset string         `json:"reset,omitempty"`
	Since time.Time      `json:"since,omitzero"`
	Boot  inventory.Boot `json:"boot"`
	// Owner is the active replica that wrote the object (a reset it runs
	// leaves it in transition), "" for a replica serving alone.
	Owner string `json:"owner,omitempty"`
}

// hostPower reads free host id's power object.
func (m *Manager) hostPower(ctx context.Context, id string) (inventory.Power, int64, error) {
	var objs []store.Object
	var err error
	if c, ok := ctx.Value(hostPowersKey{}).(*hostPowers); ok {
		c.once.Do(func() { c.objs, c.err = m.store.Objects(ctx, HostPowerKind) })
		objs, err = c.objs, c.err
	} else {
		objs, err = m.store.Objects(ctx, HostPowerKind)
	}
	if err != nil {
		return inventory.Power{}, 0, fmt.Errorf("read host power: %w", err)
	}
	for _, o := range objs {
		if o.ID != id {
			continue
		}
		var r hostPowerRecord
		if err := json.Unmarshal(o.Data, &r); err != nil {
			return inventory.Power{}, 0, fmt.Errorf("host power %s: %w", id, err)
		}
		return inventory.Power{State: r.State, Reset: r.Reset, Since: r.Since, Boot: r.Boot}, o.Version, nil
	}
	return inventory.Power{}, 0, nil
}

type hostPowersKey struct{}

// hostPowers is what WithHostPowers puts in a context: the free hosts'
// power records, read once.
type hostPowers struct {
	once sync.Once
	objs []store.Object
	err  error
}

// WithHostPowers returns ctx under which the free hosts' power records
// are read from the store once, for everything done with it (a page of
// systems, each showing its power state), instead of once per host.
func WithHostPowers(ctx context.Context) context.Context {
	return context.WithValue(ctx, hostPowersKey{}, &hostPowers{})
}

// hostPowerChange is the object change that stores p for free host id at
// version v+1 (a delete when p is the zero state).
func hostPowerChange(id string, p inventory.Power, v int64, owner string) store.ObjectChange {
	if p == (inventory.Power{}) || p.IsOff() && p.Boot == (inventory.Boot{}) {
		return store.ObjectChange{Kind: HostPowerKind, Object: store.Object{ID: id, Version: v}, Delete: true}
	}
	data, _ := json.Marshal(hostPowerRecord{State: p.State, Reset: p.Reset, Since: p.Since, Boot: p.Boot, Owner: owner})
	return store.ObjectChange{Kind: HostPowerKind, Object: store.Object{ID: id, Data: data, Version: v + 1}}
}

// EstimateReset returns the modelled time of reset t of system id (0 when
// it is unknown or instant), for choosing whether to answer at once.
func (m *Manager) EstimateReset(ctx context.Context, id, t string) time.Duration {
	pt, err := m.powerTarget(ctx, id)
	if err != nil {
		return 0
	}
	if mp, ok := m.powerDriver(pt.host).(ModelPower); ok {
		if _, instant := mp.Clock.(clock.Instant); instant {
			return 0 // the model on --fabric-time instant takes no time
		}
	}
	tr, err := plan(pt.host, pt.current(), t)
	if err != nil {
		return 0
	}
	return tr.took
}

// prepare finds system id, its host's driver and what the host offers,
// with the host's live state (live).
func (m *Manager) prepare(ctx context.Context, id string) (*powerTarget, PowerDriver, PowerCaps, error) {
	pt, err := m.powerTarget(ctx, id)
	if err != nil {
		return nil, nil, PowerCaps{}, err
	}
	d := m.powerDriver(pt.host)
	caps, err := d.Caps(ctx, pt.host)
	if err != nil {
		return nil, nil, PowerCaps{}, err
	}
	m.live(ctx, d, pt)
	return pt, d, caps, nil
}

// Reset runs reset t on system id (a composition or a host); want, when
// not 0, is the version the caller read. It returns the power state after
// it. A reset that changes nothing (On of a system that is On) returns at
// once and writes nothing.
func (m *Manager) Reset(ctx context.Context, id, t string, want int64) (PowerState, error) {
	ctx = context.WithoutCancel(ctx)
	pt, d, caps, err := m.prepare(ctx, id)
	if err != nil {
		return PowerState{}, err
	}
	if !slices.Contains(caps.ResetTypes, t) {
		return PowerState{}, &ResetTypeError{Type: t, Allowed: caps.ResetTypes}
	}
	cur := pt.current()
	if (t == ResetOn || t == ResetForceOn) && cur.State == inventory.PowerPoweringOn {
		// A reset that ends On is under way: On is what it does.
		return PowerState{Power: cur, Caps: caps, Version: pt.versionOf()}, nil
	}
	if t == ResetForceOff && cur.State != inventory.PowerOn && !cur.IsOff() {
		// ForceOff wins over a reset under way (a hung GracefulShutdown
		// can be forced), as a BMC's does.
		if version := pt.versionOf(); want != 0 && want != version {
			return PowerState{}, fmt.Errorf("%w: %s is at version %d", ErrVersion, id, version)
		}
		if m.stop(pt.host.ID) {
			if pt, d, caps, err = m.prepare(ctx, id); err != nil {
				return PowerState{}, err
			}
			cur, want = pt.current(), 0
		}
	}
	tr, err := plan(pt.host, cur, t)
	if err != nil {
		return PowerState{}, err
	}
	version := pt.versionOf()
	if want != 0 && want != version {
		return PowerState{}, fmt.Errorf("%w: %s is at version %d", ErrVersion, id, version)
	}
	if tr.via == "" && t != ResetNmi {
		return PowerState{Power: cur, Caps: caps, Version: version}, nil // nothing to do
	}
	run := &powerRun{done: make(chan struct{})}
	if t != ResetForceOff {
		pt.run = run // a ForceOff may stop it
	}
	next, v, err := m.runPower(ctx, pt, fmt.Sprintf("reset %s %s", id, t), func(ctx context.Context, cur inventory.Power) (inventory.Power, error) {
		return d.Reset(ctx, pt.host, cur, t)
	}, tr.via, t)
	if err != nil && run.stopped.Load() {
		err = fmt.Errorf("%w: %s of %s was overridden by a ForceOff", ErrBusy, t, id)
	}
	return PowerState{Power: next, Caps: caps, Version: v}, err
}

// powerRun is a reset under way that a ForceOff may stop: cancel ends its
// driver's wait, done is closed when its outcome is recorded.
type powerRun struct {
	cancel  context.CancelFunc
	done    chan struct{}
	stopped atomic.Bool
}

// stop stops the reset under way on host, if one may be stopped, and waits
// until its outcome is recorded; it reports whether it stopped one.
func (m *Manager) stop(host string) bool {
	m.mu.Lock()
	run := m.stoppable[host]
	m.mu.Unlock()
	if run == nil {
		return false
	}
	run.stopped.Store(true)
	run.cancel()
	<-run.done
	return true
}

// SetBoot sets system id's boot override; want, when not 0, is the version
// the caller read. Empty fields of b keep their value.
func (m *Manager) SetBoot(ctx context.Context, id string, b inventory.Boot, want int64) (PowerState, error) {
	ctx = context.WithoutCancel(ctx)
	pt, d, caps, err := m.prepare(ctx, id)
	if err != nil {
		return PowerState{}, err
	}
	cur := pt.current()
	if !cur.IsOff() && cur.State != inventory.PowerOn {
		return PowerState{}, fmt.Errorf("%w: the system is %s", ErrBusy, cur.State)
	}
	nb := cur.Boot
	for _, f := range []struct {
		name    string
		v       string
		allowed []string
		dst     *string
	}{{"BootSourceOverrideEnabled", b.Enabled, BootEnabledValues, &nb.Enabled},
		{"BootSourceOverrideTarget", b.Target, caps.BootTargets, &nb.Target},
		{"BootSourceOverrideMode", b.Mode, BootModeValues, &nb.Mode}} {
		if f.v == "" {
			continue
		}
		if !slices.Contains(f.allowed, f.v) {
			return PowerState{}, &ValueError{Property: f.name, Value: f.v, Allowed: f.allowed}
		}
		*f.dst = f.v
	}
	if b.UefiTarget != "" {
		nb.UefiTarget = b.UefiTarget
	}
	if nb.Target == "UefiTarget" && nb.UefiTarget == "" {
		return PowerState{}, &ValueError{Property: "UefiTargetBootSourceOverride"}
	}
	if b.BootNext != "" {
		if _, model := d.(ModelPower); model {
			var refs []string
			for _, o := range m.bootOptions(pt) {
				refs = append(refs, o.Ref)
			}
			if !slices.Contains(refs, b.BootNext) {
				return PowerState{}, &ValueError{Property: "BootNext", Value: b.BootNext, Allowed: refs}
			}
		}
		nb.BootNext = b.BootNext
	}
	if nb.Target == "UefiBootNext" && nb.BootNext == "" {
		return PowerState{}, &ValueError{Property: "BootNext"}
	}
	version := pt.versionOf()
	if want != 0 && want != version {
		return PowerState{}, fmt.Errorf("%w: %s is at version %d", ErrVersion, id, version)
	}
	if nb == cur.Boot {
		return PowerState{Power: cur, Caps: caps, Version: version}, nil
	}
	next, v, err := m.runPower(ctx, pt, fmt.Sprintf("boot override of %s: %s %s", id, nb.Enabled, nb.Target), func(ctx context.Context, cur inventory.Power) (inventory.Power, error) {
		return d.SetBoot(ctx, pt.host, cur, nb)
	}, "", "")
	return PowerState{Power: next, Caps: caps, Version: v}, err
}

// runPower runs op on target pt: with via set, it first records the
// transition (an intent), then commits op's outcome with the request's
// audit entry and detail. While it runs, the system answers ErrBusy to
// every other workflow. It returns the state and version committed.
func (m *Manager) runPower(ctx context.Context, pt *powerTarget, detail string, op func(context.Context, inventory.Power) (inventory.Power, error), via, reset string) (inventory.Power, int64, error) {
	key := pt.host.ID
	m.mu.Lock()
	if m.powering[key] {
		m.mu.Unlock()
		return inventory.Power{}, 0, fmt.Errorf("%w: a reset of %s is under way", ErrBusy, key)
	}
	if pt.comp != nil {
		c := m.comps[pt.comp.ID]
		switch {
		case c == nil:
			m.mu.Unlock()
			return inventory.Power{}, 0, fmt.Errorf("%w: %s", ErrNotFound, pt.comp.ID)
		case c.Version != pt.comp.Version:
			m.mu.Unlock()
			return inventory.Power{}, 0, fmt.Errorf("%w: %s is at version %d", ErrVersion, c.ID, c.Version)
		case c.State != inventory.Composed || m.running[c.ID]:
			m.mu.Unlock()
			return inventory.Power{}, 0, fmt.Errorf("%w: %s is %s", ErrBusy, c.ID, c.State)
		}
	} else if holder := m.holderOf(pt.host); holder != nil {
		m.mu.Unlock()
		return inventory.Power{}, 0, fmt.Errorf("%w: %s was composed into %s meanwhile; retry", ErrVersion, key, holder.ID)
	}
	m.powering[key] = true
	opCtx := ctx
	if run := pt.run; run != nil {
		var cancel context.CancelFunc
		opCtx, cancel = context.WithCancel(ctx)
		run.cancel = cancel
		m.stoppable[key] = run
		defer close(run.done)
		defer cancel()
	}
	m.mu.Unlock()
	defer func() {
		m.mu.Lock()
		delete(m.powering, key)
		delete(m.stoppable, key)
		m.mu.Unlock()
	}()

	cur := pt.current()
	// commit applies an intent, or the outcome with the request's audit
	// entry.
	commit := func(p store.Plan, intent bool, detail string) error {
		if intent {
			p.Intent = true
			return m.store.Apply(ctx, p)
		}
		return m.commitOutcome(ctx, p, detail)
	}
	// save commits p: the composition's next version, or the host's
	// object.
	save := func(ctx context.Context, p inventory.Power, intent bool, detail string) error {
		if pt.comp != nil {
			n := pt.comp.Clone()
			n.Power, n.Version, n.UpdatedAt = p, pt.comp.Version+1, m.clk.Now().UTC()
			if err := commit(store.Plan{Put: []*inventory.Composition{n}, Limits: m.limits}, intent, detail); err != nil {
				return err
			}
			m.mu.Lock()
			m.putComp(n.ID, n)
			m.mu.Unlock()
			old := pt.comp
			pt.comp = n
			m.notify(Change{Old: old, New: n.Clone(), Reason: "power"})
			return nil
		}
		plan := store.Plan{Objects: []store.ObjectChange{hostPowerChange(key, p, pt.version, m.replica)}}
		if err := commit(plan, intent, detail); err != nil {
			return err
		}
		old := &inventory.Composition{ID: key, Host: key, Power: pt.power}
		if plan.Objects[0].Delete {
			pt.version = 0
		} else {
			pt.version++
		}
		pt.power = p
		m.mu.Lock()
		if pt.version == 0 {
			delete(m.hostPow, key)
		} else {
			m.hostPow[key] = hostPow{power: p, version: pt.version}
		}
		m.mu.Unlock()
		// A free host's change is reported as a composition named after
		// the host, in no state.
		m.notify(Change{Old: old, New: &inventory.Composition{ID: key, Host: key, Power: p}, Reason: "power"})
		return nil
	}
	if via != "" {
		mid := cur
		mid.State, mid.Reset, mid.Since = via, reset, m.clk.Now().UTC()
		if err := save(ctx, mid, true, ""); err != nil {
			return cur, 0, fmt.Errorf("record %s: %w", via, err)
		}
	}
	next, err := op(opCtx, cur)
	if err != nil {
		// The host refused or could not be reached: its state is what it
		// was (a BMC that answered nothing may have acted; reading it
		// again is the operator's next step).
		next = cur
		detail += " failed"
	}
	next.Reset, next.Since = "", time.Time{}
	if serr := save(ctx, next, false, detail); serr != nil {
		m.log.Error("record power outcome; start-up settles it", "system", key, "err", serr)
		return next, 0, errors.Join(err, fmt.Errorf("record power state: %w", serr))
	}
	v := pt.versionOf()
	if err == nil {
		m.log.Info("power", "system", key, "op", detail, "state", next.State)
	}
	return next, v, err
}

// powerOff shuts composition c down before a decompose: GracefulShutdown,
// then ForceOff when the host is still not Off. It returns what it did for
// the audit record ("" when c was Off) and c as stored after it.
func (m *Manager) powerOff(ctx context.Context, c *inventory.Composition) (string, *inventory.Composition, error) {
	if c.Power.IsOff() {
		return "", c, nil
	}
	h := m.top.Host(c.Host)
	d := m.powerDriver(h)
	pt := &powerTarget{host: h, comp: c.Clone()}
	// The request's audit entry goes with the decompose's outcome, which
	// names this shutdown.
	ctx = store.WithPendingAudit(ctx, nil)
	how := "GracefulShutdown"
	next, _, err := m.runPower(ctx, pt, "shutdown of "+c.ID+" before its decompose", func(ctx context.Context, cur inventory.Power) (inventory.Power, error) {
		return d.Reset(ctx, h, cur, ResetGracefulShutdown)
	}, inventory.PowerPoweringOff, ResetGracefulShutdown)
	if err != nil || !next.IsOff() {
		how = "GracefulShutdown, then ForceOff"
		next, _, err = m.runPower(ctx, pt, "forced power-off of "+c.ID+" before its decompose", func(ctx context.Context, cur inventory.Power) (inventory.Power, error) {
			return d.Reset(ctx, h, cur, ResetForceOff)
		}, inventory.PowerPoweringOff, ResetForceOff)
		if err == nil && !next.IsOff() {
			err = fmt.Errorf("%w: %s is still %s after ForceOff", ErrPowered, c.ID, next.State)
		}
	}
	if err != nil {
		return "", pt.comp, fmt.Errorf("power off before decompose: %w", err)
	}
	return "powered off first (" + how + ")", pt.comp, nil
}

// hotPluggable reports whether block b may be added to or removed from a
// running system: drives (NVMe, SAS and SATA hot-plug), network interfaces
// on a VLAN or optical fabric (the host sees a link change), and memory on
// a CXL fabric (dynamic capacity, P1). GPUs, FPGAs and PCIe memory need
// the host Off.
func (m *Manager) hotPluggable(id string) (bool, string) {
	b := m.top.Block(id)
	if b == nil {
		return true, ""
	}
	switch b.Kind {
	case inventory.NVMe, inventory.SSD, inventory.HDD:
		return true, ""
	case inventory.NIC:
		return true, ""
	case inventory.Memory:
		if b.Device != nil && b.Device.Fabric.Kind == inventory.CXLMemory {
			return true, ""
		}
	}
	if b.Device == nil {
		return true, "" // the host's own block
	}
	return false, fmt.Sprintf("%s (%s on %s) cannot be hot-plugged", id, b.Kind, b.Device.Fabric.Kind)
}

// hostOff refuses a manifest's composition on a host that is not Off or
// is being reset: a manifest does not carry a host's power into its
// records. m.mu must be held.
func (m *Manager) hostOff(host string) error {
	if m.powering[host] {
		return fmt.Errorf("%w: a reset of host %s is under way", ErrBusy, host)
	}
	if p := m.hostPow[host].power; !p.IsOff() {
		return fmt.Errorf("%w: host %s is %s; power it off (ComputerSystem.Reset ForceOff) or compose it with POST /redfish/v1/Systems", ErrPowered, host, p.State)
	}
	return nil
}

// checkHotPlug refuses a change of blocks on a system that is not Off
// unless every block hot-plugs.
func (m *Manager) checkHotPlug(id string, p inventory.Power, blocks []string) error {
	if p.IsOff() {
		return nil
	}
	for _, b := range blocks {
		if ok, why := m.hotPluggable(b); !ok {
			return fmt.Errorf("%w: %s is %s and %s; power it off (ComputerSystem.Reset ForceOff or GracefulShutdown) and retry", ErrPowered, id, p.State, why)
		}
	}
	return nil
}

// hostPow is a free host's power object as this manager knows it.
type hostPow struct {
	power   inventory.Power
	version int64 // 0: absent
	owner   string
}

// loadHostPower reads every free host's power object into the snapshot.
func (m *Manager) loadHostPower(ctx context.Context) {
	objs, err := m.store.Objects(ctx, HostPowerKind)
	if err != nil {
		m.log.Warn("read host power", "err", err)
		return
	}
	all := map[string]hostPow{}
	for _, o := range objs {
		var r hostPowerRecord
		if err := json.Unmarshal(o.Data, &r); err != nil {
			m.log.Warn("host power object", "host", o.ID, "err", err)
			continue
		}
		all[o.ID] = hostPow{power: inventory.Power{State: r.State, Reset: r.Reset, Since: r.Since, Boot: r.Boot}, version: o.Version, owner: r.Owner}
	}
	m.mu.Lock()
	m.hostPow = all
	m.mu.Unlock()
}

// freePower returns the object change that gives c's host its power back
// when c's record is deleted in the same commit (the object is absent
// while a composition holds the host, so the put makes version 1), and
// what the snapshot should then know.
func freePower(c *inventory.Composition) (store.ObjectChange, hostPow) {
	p := c.Power
	p.Reset, p.Since = "", time.Time{}
	if p.IsOff() {
		p.State = ""
	}
	if p == (inventory.Power{}) {
		return store.ObjectChange{Kind: HostPowerKind, Object: store.Object{ID: c.Host}, Delete: true}, hostPow{}
	}
	data, _ := json.Marshal(hostPowerRecord{State: p.State, Boot: p.Boot})
	return store.ObjectChange{Kind: HostPowerKind, Object: store.Object{ID: c.Host, Data: data}}, hostPow{power: p, version: 1}
}

// freed notes in the snapshot that c's host is free again with hp. m.mu
// must be held.
func (m *Manager) freed(c *inventory.Composition, hp hostPow) {
	if hp.version == 0 {
		delete(m.hostPow, c.Host)
		return
	}
	m.hostPow[c.Host] = hp
}

type powerNoteKey struct{}

// offBeforeDecompose powers composition id off when it is Composed and not
// Off (powerOff), and returns ctx carrying what it did for the decompose's
// audit record, and the version the decompose then expects (0 stays 0).
func (m *Manager) offBeforeDecompose(ctx context.Context, id string, want int64) (context.Context, int64, error) {
	m.mu.Lock()
	c := m.comps[id]
	if !system(c) || c.State != inventory.Composed || c.Power.IsOff() || m.running[id] {
		m.mu.Unlock()
		return ctx, want, nil // decomposeOnce answers for these
	}
	if want != 0 && c.Version != want {
		m.mu.Unlock()
		return ctx, want, fmt.Errorf("%w: %s is at version %d", ErrVersion, id, c.Version)
	}
	c = c.Clone()
	m.mu.Unlock()
	note, after, err := m.powerOff(ctx, c)
	if err != nil {
		return ctx, want, err
	}
	if want != 0 {
		want = after.Version
	}
	return context.WithValue(ctx, powerNoteKey{}, note), want, nil
}

// poweredOff is the note offBeforeDecompose left in ctx, "" if none.
func poweredOff(ctx context.Context) string {
	s, _ := ctx.Value(powerNoteKey{}).(string)
	return s
}

// inTransition reports whether p is PoweringOn or PoweringOff.
func inTransition(p inventory.Power) bool {
	return p.State == inventory.PowerPoweringOn || p.State == inventory.PowerPoweringOff
}

// settlePower finishes the power transition a crash left in composition
// c's record, with the state its host reports.
func (m *Manager) settlePower(ctx context.Context, c *inventory.Composition) error {
	h := m.top.Host(c.Host)
	p, err := m.powerDriver(h).State(ctx, h, c.Power)
	if err != nil {
		return fmt.Errorf("power state of %s: %w", c.ID, err)
	}
	p.Reset, p.Since = "", time.Time{}
	n := c.Clone()
	n.Power, n.Version, n.UpdatedAt = p, c.Version+1, m.clk.Now().UTC()
	if err := m.store.Apply(ctx, store.Plan{Put: []*inventory.Composition{n}, Limits: m.limits}); err != nil {
		return fmt.Errorf("record power state of %s: %w", c.ID, err)
	}
	m.mu.Lock()
	if cur := m.comps[c.ID]; cur != nil && cur.Version == c.Version {
		m.putComp(c.ID, n)
	}
	m.mu.Unlock()
	m.log.Info("settled a reset left in transition", "id", c.ID, "was", c.Power.State, "now", p.State)
	m.notify(Change{Old: c, New: n.Clone(), Reason: "power"})
	return nil
}

// settleHostPowers finishes the power transitions a crash left in free
// hosts' objects: every one (start-up of a replica serving alone), or
// those of one owner (the leader, for a dead replica). It returns how many
// it settled.
func (m *Manager) settleHostPowers(ctx context.Context, all bool, owner string) (int, error) {
	m.mu.Lock()
	var left []string
	for id, hp := range m.hostPow {
		if inTransition(hp.power) && (all || hp.owner == owner) {
			left = append(left, id)
		}
	}
	m.mu.Unlock()
	for _, id := range left {
		h := m.top.Host(id)
		if h == nil {
			continue
		}
		m.mu.Lock()
		hp := m.hostPow[id]
		m.mu.Unlock()
		p, err := m.powerDriver(h).State(ctx, h, hp.power)
		if err != nil {
			return len(left), fmt.Errorf("power state of host %s: %w", id, err)
		}
		p.Reset, p.Since = "", time.Time{}
		oc := hostPowerChange(id, p, hp.version, m.replica)
		if err := m.store.Apply(ctx, store.Plan{Objects: []store.ObjectChange{oc}}); err != nil {
			return len(left), fmt.Errorf("record power state of host %s: %w", id, err)
		}
		m.mu.Lock()
		if oc.Delete {
			delete(m.hostPow, id)
		} else {
			m.hostPow[id] = hostPow{power: p, version: oc.Object.Version}
		}
		m.mu.Unlock()
	}
	return len(left), nil
}
