package provision

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"strings"
	"sync"
	"time"

	"rackpool/internal/clock"
	"rackpool/internal/compose"
	"rackpool/internal/inventory"
	"rackpool/internal/schedule"
	"rackpool/internal/store"
	"rackpool/internal/telemetry"
	"rackpool/internal/units"
)

// The live loop (serve --provisioning). Every Interval it looks at every
// subscribed consumer: the memory its host agent measured over the
// observation window (internal/telemetry), the pooled memory it holds, and
// the rules; it grows the consumer ahead of its forecast peak through the
// composition manager (placed by the one engine, committed as one plan,
// within the tenant's quota), or shrinks it with hysteresis and a minimum
// hold, never below what it uses. A grow the pool or the quota cannot serve
// is an event the moment the forecast asks for it — before the demand
// arrives. Every grow and shrink, done or only proposed (dry-run), is
// explained (the window, the forecast, the interval, the action) in the
// audit log and the event stream; the last decision of each consumer is
// kept for reading.

// Mode says whether the loop acts.
type Mode string

// The modes. Off is the default: nothing is watched.
const (
	ModeOff    Mode = "off"
	ModeDryRun Mode = "dry-run"
	ModeOn     Mode = "on"
)

// ParseMode parses "off", "dry-run" or "on".
func ParseMode(s string) (Mode, error) {
	switch m := Mode(s); m {
	case ModeOff, ModeDryRun, ModeOn:
		return m, nil
	}
	return "", fmt.Errorf("provisioning mode %q: want off, dry-run or on", s)
}

// KindSubscription is the store kind of subscriptions.
const KindSubscription = "provisioning"

// Subscription opts a consumer into the loop. Only composed systems are
// provisioned today: their pooled memory follows the memory their host
// agent measures (telemetry System/<id>/memory_used_bytes).
type Subscription struct {
	// System is the composed system's ID, which is also the
	// subscription's.
	System string `json:"system"`
	Tenant string `json:"tenant,omitempty"`
	// Mode is DryRun (decide and explain, change nothing) or On; the
	// loop's own mode caps it (a loop in dry-run changes nothing).
	Mode Mode `json:"mode"`
	// MinBytes and MaxBytes bound the pooled memory the loop gives the
	// system (0: no bound but the quota and the pool).
	MinBytes int64     `json:"min_bytes,omitempty"`
	MaxBytes int64     `json:"max_bytes,omitempty"`
	Created  time.Time `json:"created"`
}

// Status is a subscription with what the loop last decided for it.
type Status struct {
	Subscription
	// Effective is the mode the loop applies (the stricter of the loop's
	// and the subscription's).
	Effective Mode `json:"effective"`
	// PooledBytes is the pooled memory the system holds; LocalBytes its
	// host's own.
	PooledBytes int64 `json:"pooled_bytes"`
	LocalBytes  int64 `json:"local_bytes"`
	// Last is the last step's decision (nil before the first step), and
	// Error why the last step could not decide or act ("" if it could).
	Last     *LiveDecision `json:"last,omitempty"`
	Error    string        `json:"error,omitempty"`
	HeldFrom time.Time     `json:"held_from"`
}

// LiveDecision is a decision of the loop, in bytes, with its explanation.
type LiveDecision struct {
	Time   time.Time `json:"time"`
	System string    `json:"system"`
	Decision
	// Applied says the change was made; Blocks are the memory blocks added
	// or removed.
	Applied bool     `json:"applied"`
	Blocks  []string `json:"blocks,omitempty"`
	// Explanation is the sentence audited and published.
	Explanation string `json:"explanation"`
}

// Event is what the loop publishes (serve turns it into a Redfish event).
type Event struct {
	Severity string // OK or Warning
	System   string
	Tenant   string
	Message  string
}

// LoopOptions configure the loop.
type LoopOptions struct {
	Mode      Mode
	Interval  time.Duration // a step (default 30 s)
	Rules     Rules         // Granule is taken from the memory blocks
	Store     store.Store
	Compose   *compose.Manager
	Telemetry *telemetry.Store
	// Quota returns a tenant's quota and the records it was read from
	// (nil: no quota).
	Quota   func(tenant string) (map[inventory.Kind]int, []store.ObjectRef)
	Clock   clock.Clock
	Logger  *slog.Logger
	OnEvent func(Event)
}

// Loop is the live provisioning loop. Safe for concurrent use.
type Loop struct {
	o     LoopOptions
	block int64 // bytes per pooled memory block

	// step serialises steps, which share dec and its buffers.
	step sync.Mutex
	dec  *Decider

	mu     sync.Mutex
	subs   map[string]*state
	events map[string]string // system -> the last shortfall message sent
}

type state struct {
	sub      Subscription
	version  int64
	last     *LiveDecision
	err      string
	held     int
	heldFrom time.Time
	pooled   int64
	local    int64
}

// Errors of the subscription API.
var (
	ErrNotFound = errors.New("no such system")
	ErrInvalid  = errors.New("invalid provisioning subscription")
)

// NewLoop loads the subscriptions from the store.
func NewLoop(ctx context.Context, o LoopOptions) (*Loop, error) {
	if o.Store == nil || o.Compose == nil || o.Telemetry == nil {
		return nil, errors.New("provision: store, composition manager and telemetry are required")
	}
	if o.Mode == "" {
		o.Mode = ModeOff
	}
	if _, err := ParseMode(string(o.Mode)); err != nil {
		return nil, err
	}
	if o.Interval <= 0 {
		o.Interval = 30 * time.Second
	}
	if o.Clock == nil {
		o.Clock = clock.Real{}
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	l := &Loop{o: o, subs: map[string]*state{}, events: map[string]string{}}
	for _, b := range o.Compose.Topology().Blocks {
		if b.Kind == inventory.Memory && b.CapacityBytes > 0 {
			l.block = b.CapacityBytes
			break
		}
	}
	l.o.Rules.Granule = 1 // decisions are in blocks
	var err error
	if l.o.Rules, err = l.o.Rules.WithDefaults(); err != nil {
		return nil, err
	}
	if l.dec, err = NewDecider(Predictive, l.o.Rules); err != nil {
		return nil, err
	}
	if err := l.Reload(ctx); err != nil {
		return nil, err
	}
	return l, nil
}

// Reload loads the subscriptions from the store again, forgetting the
// decisions made so far: what a replica does when it becomes the leader of
// several (docs/ha.md).
func (l *Loop) Reload(ctx context.Context) error {
	objs, err := l.o.Store.Objects(ctx, KindSubscription)
	if err != nil {
		return err
	}
	subs := map[string]*state{}
	for _, ob := range objs {
		var s Subscription
		if err := json.Unmarshal(ob.Data, &s); err != nil {
			return fmt.Errorf("provision: stored subscription %s: %w", ob.ID, err)
		}
		subs[s.System] = &state{sub: s, version: ob.Version, heldFrom: l.o.Clock.Now()}
	}
	l.step.Lock()
	defer l.step.Unlock()
	l.mu.Lock()
	defer l.mu.Unlock()
	l.subs = subs
	return nil
}

// Mode is the loop's mode.
func (l *Loop) Mode() Mode { return l.o.Mode }

// Rules are the loop's rules with defaults filled.
func (l *Loop) Rules() Rules { return l.o.Rules }

// Interval is the loop's step.
func (l *Loop) Interval() time.Duration { return l.o.Interval }

// Subscribe opts a system in (or changes its subscription). The caller has
// checked the system is the tenant's.
func (l *Loop) Subscribe(ctx context.Context, s Subscription) (Status, error) {
	c, err := l.o.Compose.Get(s.System)
	if err != nil || c.State == inventory.Reserved {
		return Status{}, fmt.Errorf("%w: %s", ErrNotFound, s.System)
	}
	switch {
	case s.Mode != ModeDryRun && s.Mode != ModeOn:
		return Status{}, fmt.Errorf("%w: mode %q: want dry-run or on (delete the subscription to stop)", ErrInvalid, s.Mode)
	case s.MinBytes < 0 || s.MaxBytes < 0:
		return Status{}, fmt.Errorf("%w: bounds must not be negative", ErrInvalid)
	case s.MaxBytes > 0 && s.MinBytes > s.MaxBytes:
		return Status{}, fmt.Errorf("%w: MinBytes %d is above MaxBytes %d", ErrInvalid, s.MinBytes, s.MaxBytes)
	case l.block == 0:
		return Status{}, fmt.Errorf("%w: the topology has no pooled memory", ErrInvalid)
	}
	s.Tenant = c.Tenant
	l.mu.Lock()
	old := l.subs[s.System]
	l.mu.Unlock()
	if old != nil {
		s.Created = old.sub.Created
	} else {
		s.Created = l.o.Clock.Now().UTC()
	}
	data, err := json.Marshal(s)
	if err != nil {
		return Status{}, err
	}
	if err := l.o.Store.PutObject(ctx, KindSubscription, store.Object{ID: s.System, Data: data}); err != nil {
		return Status{}, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	st := l.subs[s.System]
	if st == nil {
		st = &state{heldFrom: l.o.Clock.Now()}
		l.subs[s.System] = st
	}
	st.sub = s
	return l.status(st), nil
}

// Unsubscribe opts a system out; it keeps what it holds.
func (l *Loop) Unsubscribe(ctx context.Context, system string) error {
	l.mu.Lock()
	_, ok := l.subs[system]
	l.mu.Unlock()
	if !ok {
		return fmt.Errorf("%w: %s has no provisioning subscription", ErrNotFound, system)
	}
	if err := l.o.Store.DeleteObject(ctx, KindSubscription, system); err != nil {
		return err
	}
	l.mu.Lock()
	delete(l.subs, system)
	delete(l.events, system)
	l.mu.Unlock()
	return nil
}

// Get returns one subscription's status.
func (l *Loop) Get(system string) (Status, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	st, ok := l.subs[system]
	if !ok {
		return Status{}, false
	}
	return l.status(st), true
}

// List returns every subscription's status, by system.
func (l *Loop) List() []Status {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([]Status, 0, len(l.subs))
	for _, st := range l.subs {
		out = append(out, l.status(st))
	}
	slices.SortFunc(out, func(a, b Status) int { return strings.Compare(a.System, b.System) })
	return out
}

func (l *Loop) status(st *state) Status {
	s := Status{Subscription: st.sub, Effective: l.effective(st.sub), Last: st.last, Error: st.err,
		HeldFrom: st.heldFrom, PooledBytes: st.pooled, LocalBytes: st.local}
	return s
}

func (l *Loop) effective(s Subscription) Mode {
	if l.o.Mode == ModeOn && s.Mode == ModeOn {
		return ModeOn
	}
	if l.o.Mode == ModeOff {
		return ModeOff
	}
	return ModeDryRun
}

// Run steps every Interval until ctx ends. With the loop off it returns at
// once.
func (l *Loop) Run(ctx context.Context) {
	if l.o.Mode == ModeOff {
		return
	}
	t := clock.NewTicker(l.o.Clock, l.o.Interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C():
			l.Step(ctx)
		}
	}
}

// Step runs one round over every subscription.
func (l *Loop) Step(ctx context.Context) {
	l.mu.Lock()
	systems := make([]string, 0, len(l.subs))
	for id := range l.subs {
		systems = append(systems, id)
	}
	l.mu.Unlock()
	slices.Sort(systems)
	l.step.Lock()
	defer l.step.Unlock()
	for _, id := range systems {
		if ctx.Err() != nil {
			return
		}
		l.stepOne(ctx, l.dec, id)
	}
}

// stepOne decides for one system and acts.
func (l *Loop) stepOne(ctx context.Context, dec *Decider, id string) {
	l.mu.Lock()
	st := l.subs[id]
	if st == nil {
		l.mu.Unlock()
		return
	}
	sub, held := st.sub, st.held
	l.mu.Unlock()
	fail := func(msg string) {
		l.mu.Lock()
		if st := l.subs[id]; st != nil {
			st.err = msg
		}
		l.mu.Unlock()
	}
	c, err := l.o.Compose.Get(id)
	if err != nil {
		// Decomposed: the subscription goes with it.
		if err := l.Unsubscribe(ctx, id); err == nil {
			l.o.Logger.Info("provisioning: system gone, subscription removed", "system", id)
		}
		return
	}
	if c.State != inventory.Composed {
		fail(fmt.Sprintf("system is %s", c.State))
		return
	}
	top := l.o.Compose.Topology()
	host := top.Host(c.Host)
	if host == nil {
		fail("system has no host")
		return
	}
	local := int64(host.MemoryGiB) * units.GiB
	var mem []string
	for _, b := range c.Blocks {
		if blk := top.Block(b); blk != nil && blk.Kind == inventory.Memory {
			mem = append(mem, b)
		}
	}
	pooled := int64(len(mem)) * l.block
	now := l.o.Clock.Now()
	key := telemetry.Key{Kind: telemetry.System, Source: id, Metric: telemetry.MemoryUsed}
	window := time.Duration(l.o.Rules.Window) * l.o.Interval
	samples := l.o.Telemetry.Window(key, now.Add(-window))
	l.mu.Lock()
	st.pooled, st.local = pooled, local
	l.mu.Unlock()
	if len(samples) == 0 {
		fail(fmt.Sprintf("no usage reported in the last %v (run rackpool agent --system %s on its host)", window, id))
		return
	}
	if latest := samples[len(samples)-1].Time; now.Sub(latest) > 3*l.o.Interval {
		fail(fmt.Sprintf("the last usage sample is %v old", now.Sub(latest).Round(time.Second)))
		return
	}
	// Decide in blocks of pooled memory: the history is the use above the
	// host's own memory, in blocks.
	hist := make([]float64, len(samples))
	for i, s := range samples {
		hist[i] = math.Max(0, s.Value-float64(local)) / float64(l.block)
	}
	d, err := dec.Decide(float64(len(mem)), held, hist)
	if err != nil {
		fail(err.Error())
		return
	}
	// The subscription's bounds.
	lo, hi := float64(sub.MinBytes/l.block), math.Inf(1)
	if sub.MinBytes%l.block != 0 {
		lo++
	}
	if sub.MaxBytes > 0 {
		hi = float64(sub.MaxBytes / l.block)
	}
	capped := false
	if d.To > hi {
		d.To, capped = max(hi, float64(len(mem))), true
	}
	if d.To < lo {
		d.To = lo
	}
	switch {
	case d.To > float64(len(mem)):
		d.Action = Grow
	case d.To < float64(len(mem)):
		d.Action = Shrink
	default:
		d.Action = Hold
	}
	ld := &LiveDecision{Time: now.UTC(), System: id, Decision: d}
	ld.Explanation = l.explain(ld, local)
	mode := l.effective(sub)
	var actErr error
	switch d.Action {
	case Grow:
		n := int(d.To) - len(mem)
		if mode == ModeOn {
			ld.Blocks, actErr = l.grow(ctx, c, n)
			ld.Applied = actErr == nil
		}
	case Shrink:
		n := len(mem) - int(d.To)
		ld.Blocks = slices.Clone(mem[len(mem)-n:])
		if mode == ModeOn {
			_, actErr = l.o.Compose.Update(ctx, id, compose.UpdateRequest{Version: c.Version, Remove: ld.Blocks})
			ld.Applied = actErr == nil
		}
	}
	l.mu.Lock()
	// A proposal or a failure the same as the last one is not recorded
	// again: a dry run, or a pool that stays full, would repeat it every
	// step.
	repeat := !ld.Applied && st.last != nil && !st.last.Applied && st.last.Action == d.Action && st.last.To == d.To &&
		st.err == errString(actErr)
	if st := l.subs[id]; st != nil {
		st.last, st.err = ld, ""
		if ld.Applied || d.Action == Hold || mode != ModeOn {
			if ld.Applied {
				st.held, st.heldFrom = 0, now
				st.pooled = int64(d.To) * l.block
			} else {
				st.held++
			}
		}
		if actErr != nil {
			st.err = actErr.Error()
		}
	}
	l.mu.Unlock()
	if d.Action != Hold && !repeat {
		l.record(ctx, sub, ld, mode, actErr)
	}
	short := ""
	switch {
	case d.Action == Grow && actErr != nil:
		short = fmt.Sprintf("provisioning: the pool cannot serve the forecast for system %s: it needs %s of pooled memory within %v (%s) and holds %s: %v",
			id, units.FormatBytes(int64(d.To)*l.block), time.Duration(l.o.Rules.Horizon)*l.o.Interval, d.Reason, units.FormatBytes(pooled), actErr)
	case capped:
		short = fmt.Sprintf("provisioning: the forecast for system %s (%s of pooled memory within %v) is above its subscription's MaxBytes %s",
			id, units.FormatBytes(int64(math.Ceil(d.Target))*l.block), time.Duration(l.o.Rules.Horizon)*l.o.Interval, units.FormatBytes(sub.MaxBytes))
	}
	l.shortfall(sub, short)
}

// grow adds n memory blocks, placed by the engine near the system's host,
// within the tenant's quota.
func (l *Loop) grow(ctx context.Context, c *inventory.Composition, n int) ([]string, error) {
	ur := compose.UpdateRequest{Version: c.Version, Needs: []schedule.Need{{Kind: inventory.Memory, Count: n}}}
	if l.o.Quota != nil && c.Tenant != "" {
		ur.Quota, ur.Check = l.o.Quota(c.Tenant)
	}
	nc, err := l.o.Compose.Update(ctx, c.ID, ur)
	if err != nil {
		return nil, err
	}
	var added []string
	for _, b := range nc.Blocks {
		if !slices.Contains(c.Blocks, b) {
			added = append(added, b)
		}
	}
	return added, nil
}

// explain words a decision: the window, the forecast, its interval and the
// action.
func (l *Loop) explain(ld *LiveDecision, local int64) string {
	gib := func(blocks float64) string {
		return fmt.Sprintf("%.1f GiB", blocks*float64(l.block)/float64(units.GiB))
	}
	d := ld.Decision
	var b strings.Builder
	fmt.Fprintf(&b, "system %s: observed %d samples over %v, pooled use %s..%s (last %s) above %s local",
		ld.System, d.Observed, time.Duration(l.o.Rules.Window)*l.o.Interval, gib(d.ObservedMin), gib(d.ObservedMax), gib(d.LastUse),
		units.FormatBytes(local))
	if d.Model != "" {
		fmt.Fprintf(&b, "; %s forecasts a peak of %s within %v, %s at the %.2f quantile", d.Model, gib(d.ForecastPeak),
			time.Duration(l.o.Rules.Horizon)*l.o.Interval, gib(d.ForecastUpper), l.o.Rules.Forecast.Quantile)
	}
	if d.Fallback != "" {
		fmt.Fprintf(&b, " (fallback: %s)", d.Fallback)
	}
	if d.Warmup {
		b.WriteString(" (warming up: reactive headroom added)")
	}
	fmt.Fprintf(&b, "; %s pooled memory %s → %s: %s", d.Action, gib(d.From), gib(d.To), d.Reason)
	return b.String()
}

// record audits and publishes a grow or shrink, done, proposed or failed.
func (l *Loop) record(ctx context.Context, sub Subscription, ld *LiveDecision, mode Mode, actErr error) {
	msg := "provisioning: " + ld.Explanation
	outcome, status, sev := store.AuditSuccess, 200, "OK"
	switch {
	case mode != ModeOn:
		msg = "provisioning (" + string(mode) + ", not applied): " + ld.Explanation
	case actErr != nil:
		msg += "; failed: " + actErr.Error()
		outcome, status, sev = store.AuditFailure, 409, "Warning"
	}
	if l.o.OnEvent != nil {
		l.o.OnEvent(Event{Severity: sev, System: ld.System, Tenant: sub.Tenant, Message: msg})
	}
	if _, err := l.o.Store.AppendAudit(context.WithoutCancel(ctx), store.AuditEntry{Time: ld.Time, User: "rackpool",
		Tenant: sub.Tenant, Action: "Provisioning", Outcome: outcome, Status: status,
		Target: "/redfish/v1/Systems/" + ld.System, Detail: msg, MessageID: store.AuditMessage(outcome, status)}); err != nil {
		l.o.Logger.Error("provisioning: audit", "err", err)
	}
	l.o.Logger.Info(msg)
}

// shortfall publishes msg once per change (an empty msg clears it).
func (l *Loop) shortfall(sub Subscription, msg string) {
	l.mu.Lock()
	prev := l.events[sub.System]
	l.events[sub.System] = msg
	l.mu.Unlock()
	if msg == "" || msg == prev || l.o.OnEvent == nil {
		return
	}
	l.o.OnEvent(Event{Severity: "Warning", System: sub.System, Tenant: sub.Tenant, Message: msg})
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
