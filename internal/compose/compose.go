// Package compose runs composition workflows: it asks the scheduler for a
// plan, commits the intent, drives the fabrics, and commits the outcome. It
// is the single plan applier of DESIGN rule 2 and enforces rule 3:
//
//	Compose:   schedule → reserve in memory (Place) → store Composing →
//	           attach every device → store Composed (Realize).  Any attach
//	           failure detaches everything attached and deletes the record:
//	           all or nothing.  A caller that must see the placement before
//	           committing to it (the API's choice of answering 202) calls
//	           Place and Realize itself: the request is scheduled once.
//	Update:    schedule the additions → store Updating (Adding, Removing) →
//	           attach additions → detach removals → store Composed.  Any
//	           failure restores the previous block set.
//	Decompose: store Decomposing → detach every device → delete the record.
//
// The store is written before the fabric is touched, so a crash at any
// point leaves a record that names what may be attached. At start-up New
// recovers: Composing and Decomposing records are rolled back (detach,
// delete), Updating records return to their previous block set, Composed
// records are restored into the drivers, and any attachment the fabrics
// report that no record holds is detached. Nothing is left in transition.
//
// Durability: the first record of a workflow (the intent) is a
// store.Plan.Intent: it survives the process's crash but may reach stable
// storage only with the next durable commit, because losing it in a power
// failure costs nothing acknowledged — start-up detaches what it had
// attached. The last record (the outcome) is durable before the workflow
// returns, and carries the audit entry of the API request that asked for it
// (store.PendingAudit): one fsync per composition, shared with concurrent
// workflows by the store's group commit.
//
// Workflows run to completion even when the caller's context is cancelled
// (a client that disconnects must not leave half a composition); the
// context's values are kept.
package compose

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"rackpool/internal/clock"
	"rackpool/internal/fabric"
	"rackpool/internal/inventory"
	"rackpool/internal/schedule"
	"rackpool/internal/store"
	"rackpool/internal/topology"
)

// Errors.
var (
	// ErrNotFound: no composition with that ID.
	ErrNotFound = errors.New("composition not found")
	// ErrBusy: the composition is in transition (composing, updating or
	// decomposing); retry when it settles.
	ErrBusy = errors.New("composition is in transition")
	// ErrAttach: a fabric refused an attach; the workflow was rolled back.
	ErrAttach = errors.New("fabric attach failed")
	// ErrDetach: a fabric refused a detach; the record stays Decomposing and
	// the next Decompose (or a restart) retries.
	ErrDetach = errors.New("fabric detach failed")
	// ErrBadRequest: the request is malformed (e.g. removing a block the
	// composition does not hold).
	ErrBadRequest = errors.New("invalid request")
	// ErrVersion: the caller's expected version is stale.
	ErrVersion = errors.New("composition changed since it was read")
	// ErrQuota: the tenant's quota for a kind of block would be exceeded.
	ErrQuota = errors.New("tenant quota exceeded")
	// ErrBlockBusy: a block asked for by HoldBlocks is in use.
	ErrBlockBusy = errors.New("block is in use")
	// ErrUnfinished: a decompose was recorded but could not be finished
	// (the database became unreachable); it will be, by a retry or by the
	// recovery of the replica that serves next.
	ErrUnfinished = errors.New("decompose recorded but not finished")
)

// Options configure a Manager. Topology, Store and Drivers are required.
type Options struct {
	Topology *topology.Topology
	Store    store.Store
	// Drivers by fabric ID; every fabric of the topology needs one.
	Drivers map[string]fabric.Driver
	Clock   clock.Clock  // default: the real clock
	Logger  *slog.Logger // default: discard
	// OnChange, when set, is called after every committed change of a
	// composition or reservation (events, metrics), and after every change
	// another active replica committed that Sync took in (Change.Remote).
	// It must not block.
	OnChange func(Change)
	// OnFabricOp, when set, is called after every attach or detach with the
	// fabric's kind, the operation ("attach", "detach"), its duration and
	// its error.
	OnFabricOp func(kind inventory.FabricKind, op string, took time.Duration, err error)
	// OnSchedule, when set, is called after every scheduler decision with
	// its duration and outcome.
	OnSchedule func(took time.Duration, err error)
	// Host, when set, adds the host agents' steps to workflows on the hosts
	// it manages (saga.go); HostTimeout bounds each (default
	// DefaultHostTimeout).
	Host        Host
	HostTimeout time.Duration
	// CatchUp, when set, brings the snapshot up to date with the database
	// (several replicas: it reads the change log and calls Sync). A
	// compose that conflicts with another replica's commit calls it and
	// places again, at most three more times.
	CatchUp func(ctx context.Context) error
	// Epoch, when set, returns this control plane's leadership epoch
	// (docs/ha.md), which every attach, detach and restore carries to the
	// fabrics: a fabric refuses a change whose epoch is lower than one it
	// has seen (fabric.ErrFenced).
	Epoch func() fabric.Epoch
	// Spread starts the scheduler's search at a random host: replicas
	// placing at once then rarely choose the same blocks (Scheduler.Start).
	Spread bool
	// Replica, when set, is this active replica's membership (docs/ha.md):
	// every record the manager writes names it as its Owner, and start-up
	// neither settles records in transition (they may be other replicas'
	// workflows under way: the leader settles a dead replica's with
	// SettleOwner) nor restores or sweeps the fabrics, which the replicas
	// share and change under way.
	Replica string
	// Power, when set, returns the power driver of a host (its BMC's);
	// nil, or a nil driver, means the model (ModelPower on Clock).
	Power func(*inventory.Host) PowerDriver
}

// Change describes a committed change: Old is nil for a new composition,
// New is nil for one that is gone. Reason says why ("composed",
// "updated", "decomposed", "reserved", "released", "expired",
// "failed", "power"). A free host's power change ("power") comes as a
// composition with the host's ID and no state.
type Change struct {
	Old, New *inventory.Composition
	Reason   string
	Err      error // for "failed"
	// Remote marks a change another replica committed, learnt from the
	// change log (Sync).
	Remote bool
}

// Quota limits how many blocks of each kind one tenant may hold across its
// compositions and reservations. A kind not listed is unlimited.
type Quota map[inventory.Kind]int

// Request asks for a new composition.
type Request struct {
	Name        string
	Description string
	// Tenant owns the composition ("" for none); Quota is that tenant's
	// quota, checked atomically with the placement.
	Tenant string
	Quota  Quota
	// Check lists the records the request was decided on (the tenant
	// record Quota was read from): the plan that takes the blocks commits
	// only if each is still at its version, or fails with store.ErrConflict.
	Check []store.ObjectRef
	// Group, for a reservation, names the request it belongs to.
	Group string

	// What to place, and where: the scheduler's request (schedule.Request
	// documents each field) without the fields that only updates use.
	Host         string
	Blocks       []string
	Needs        []schedule.Need
	Affinity     schedule.Affinity
	Zone         string
	MinCores     int
	MinMemoryGiB int
	Share        schedule.Share

	// What the request asks of the composition policy (ApplyPolicy):
	// Overprovision, that Needs may be met with more than they count;
	// ZoneAffinity, when not nil, the resource zone to place in (a host's
	// ID, or "zone-" and a topology zone's).
	Overprovision bool
	ZoneAffinity  *string
}

// placement is req as the scheduler takes it.
func (req Request) placement() schedule.Request {
	return schedule.Request{Host: req.Host, Blocks: req.Blocks, Needs: req.Needs, Affinity: req.Affinity, Zone: req.Zone,
		MinCores: req.MinCores, MinMemoryGiB: req.MinMemoryGiB, Share: req.Share}
}

// UpdateRequest changes the blocks of a composed system: the additions
// (Blocks, Needs) are placed by the scheduler near the system's host, the
// removals are detached; all or nothing.
type UpdateRequest struct {
	// Version, when not 0, is the version the caller read (If-Match): a
	// composition at another version is refused with ErrVersion.
	Version int64
	// Blocks are specific blocks to add; Needs are constrained additions,
	// kept together per Affinity.
	Blocks   []string
	Needs    []schedule.Need
	Affinity schedule.Affinity
	// Remove lists blocks to take away; the compute block cannot be.
	Remove []string
	// Set, when not nil, is the exact set of blocks the system ends with
	// (the Redfish PATCH of Links.ResourceBlocks); the difference is
	// computed under the manager's lock. Blocks, Needs and Remove must then
	// be empty.
	Set []string
	// Quota is the owning tenant's quota, checked atomically with the
	// placement of the additions; Check, as in Request, the records it was
	// read from.
	Quota Quota
	Check []store.ObjectRef
}

// Manager owns the composition state of one control plane.
type Manager struct {
	top     *topology.Topology
	sched   *schedule.Scheduler
	store   store.Store
	drivers map[string]fabric.Driver
	clk     clock.Clock
	log     *slog.Logger

	mu    sync.Mutex
	st    *schedule.State
	comps map[string]*inventory.Composition
	// compsGen counts changes to comps (putComp, dropComp); systemIDs is
	// the ordered list of systems as of generation systemIDsGen.
	compsGen, systemIDsGen uint64
	// stepping lists, by host, the compositions waiting on a host step
	// (StepOwner); kept by putComp and dropComp.
	stepping  map[string][]string
	systemIDs []string
	// owners counts, per block, compositions holding or acquiring it.
	owners map[string][]string
	// running marks Decomposing compositions whose decompose is under way
	// (one left Decomposing by a failed detach may be retried).
	running map[string]bool
	// powering marks hosts whose reset or boot change is under way;
	// hostPow is the free hosts' power objects as last read or written
	// (power.go).
	powering map[string]bool
	// stoppable are the resets under way that a ForceOff may stop, by
	// host (power.go, Reset).
	stoppable map[string]*powerRun
	hostPow   map[string]hostPow
	power     func(*inventory.Host) PowerDriver
	// replica is this active replica's membership (Options.Replica).
	replica string
	limits  map[string]int // shareable blocks' limits, for the store

	onChange   func(Change)
	onFabricOp func(inventory.FabricKind, string, time.Duration, error)
	onSchedule func(time.Duration, error)

	host        Host
	hostTimeout time.Duration
	// resume holds compositions recover found waiting on a host step, for
	// Resume.
	resume []*inventory.Composition

	// Replicas (replica.go): the versions this manager committed, the
	// compositions Sync installed from other replicas, and conflicts.
	committed *committed
	remote    map[string]bool
	catchUp   func(ctx context.Context) error
	epoch     func() fabric.Epoch
	// stuck marks compositions whose rollback failed (RetryStuck).
	stuck     map[string]bool
	conflicts atomic.Int64
	replans   atomic.Int64

	// policy is the composition policy record (policy.go).
	policy policyState
}

// New builds a Manager, loads the stored compositions and recovers any that
// a crash left in transition, and reads the composition policy.
func New(ctx context.Context, o Options) (*Manager, error) {
	if o.Topology == nil || o.Store == nil {
		return nil, errors.New("compose: topology and store are required")
	}
	for _, f := range o.Topology.Fabrics {
		if o.Drivers[f.ID] == nil {
			return nil, fmt.Errorf("compose: no driver for fabric %s", f.ID)
		}
	}
	if o.Clock == nil {
		o.Clock = clock.Real{}
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.HostTimeout <= 0 {
		o.HostTimeout = DefaultHostTimeout
	}
	cm := &committed{v: map[string]int64{}}
	st := o.Store
	if o.CatchUp != nil || o.Replica != "" { // one replica of several: note its own commits for Sync
		st = recordingStore{Store: o.Store, c: cm, owner: o.Replica}
	}
	m := &Manager{host: o.Host, hostTimeout: o.HostTimeout, committed: cm, remote: map[string]bool{}, catchUp: o.CatchUp, epoch: o.Epoch, stuck: map[string]bool{},
		top: o.Topology, sched: schedule.New(o.Topology), store: st, drivers: o.Drivers,
		clk: o.Clock, log: o.Logger, st: schedule.NewState(o.Topology),
		comps: map[string]*inventory.Composition{}, owners: map[string][]string{}, limits: map[string]int{},
		running: map[string]bool{}, powering: map[string]bool{}, stoppable: map[string]*powerRun{}, hostPow: map[string]hostPow{}, power: o.Power, replica: o.Replica, onChange: o.OnChange, onFabricOp: o.OnFabricOp, onSchedule: o.OnSchedule,
	}
	if o.Spread && len(o.Topology.Hosts) > 0 {
		var r [4]byte
		_, _ = rand.Read(r[:])
		m.sched.Start = int(uint32(r[0])|uint32(r[1])<<8|uint32(r[2])<<16|uint32(r[3])<<24) % len(o.Topology.Hosts)
	}
	for _, b := range o.Topology.Blocks {
		if b.MaxCompositions > 1 {
			m.limits[b.ID] = b.MaxCompositions
		}
	}
	if err := m.recover(ctx); err != nil {
		return nil, err
	}
	if err := m.ReloadPolicy(ctx); err != nil {
		return nil, err
	}
	return m, nil
}

// Topology returns the manager's topology.
func (m *Manager) Topology() *topology.Topology { return m.top }

// Drivers returns the fabric drivers by fabric ID.
func (m *Manager) Drivers() map[string]fabric.Driver { return m.drivers }

func newID(prefix string) string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return prefix + hex.EncodeToString(b[:])
}

// hold records c's blocks in the scheduler state and the owner index.
// m.mu must be held.
func (m *Manager) hold(c *inventory.Composition, blocks []string) {
	m.st.Acquire(m.top.Host(c.Host), m.st.Assignments(c, blocks))
	for _, b := range blocks {
		m.owners[b] = append(m.owners[b], c.ID)
	}
}

// drop undoes hold. m.mu must be held.
func (m *Manager) drop(c *inventory.Composition, blocks []string) {
	m.st.Release(m.top.Host(c.Host), m.st.Assignments(c, blocks))
	for _, b := range blocks {
		list := m.owners[b]
		if i := slices.Index(list, c.ID); i >= 0 {
			list = slices.Delete(list, i, i+1)
		}
		if len(list) == 0 {
			delete(m.owners, b)
		} else {
			m.owners[b] = list
		}
	}
}

// Plan schedules req, with the composition policy applied, against the
// current state without committing anything: the "explain" verb.
func (m *Manager) Plan(req Request) (*schedule.Plan, error) {
	req, err := m.ApplyPolicy(req)
	if err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.schedule(req.placement())
}

// Compose places and composes a new system, all or nothing: Place, then
// Realize.
func (m *Manager) Compose(ctx context.Context, req Request) (*inventory.Composition, error) {
	p, err := m.Place(ctx, req)
	if err != nil {
		return nil, err
	}
	return p.Realize(ctx)
}

// Placement is a composition placed but not yet made: its blocks are
// taken in the manager's state (a composition Composing that nothing is
// recorded or attached for yet), so no other request gets them. Exactly one
// of Realize or Cancel must follow, soon: until then the blocks are held.
// A Placement is not safe for concurrent use.
type Placement struct {
	m     *Manager
	req   Request // as asked, to place again after a conflict
	c     *inventory.Composition
	check []store.ObjectRef
	objs  []store.ObjectChange
	done  bool
}

// Place is the first half of Compose: it applies the composition policy
// to req, schedules it once, checks the tenant's quota and the host's
// power, and takes the blocks in memory. Nothing is written to the store
// or the fabrics.
func (m *Manager) Place(ctx context.Context, req Request) (*Placement, error) {
	m.Expire(context.WithoutCancel(ctx))
	m.mu.Lock()
	defer m.mu.Unlock()
	c, err := m.place(req, inventory.Composing, "sys-")
	var refused *schedule.Unsatisfiable
	if errors.As(err, &refused) && !refused.Never && m.catchUp != nil {
		// One of several replicas: what another released (a system
		// decomposed there a moment ago) may not be in this snapshot
		// yet. Catch up once and place again before refusing.
		m.mu.Unlock()
		caught := m.CatchUp(ctx)
		m.mu.Lock()
		if caught == nil {
			c, err = m.place(req, inventory.Composing, "sys-")
		}
	}
	if err != nil {
		return nil, err
	}
	// The host's power comes with it (power.go): the record takes it, and
	// its free-host object goes in the same commit, which checks that
	// object is as this snapshot knows it.
	hp := m.hostPow[c.Host]
	if m.powering[c.Host] {
		return nil, fmt.Errorf("%w: a reset of host %s is under way", ErrBusy, c.Host)
	}
	if err := m.checkHotPlug(c.Host, hp.power, c.Blocks); err != nil {
		return nil, err
	}
	c.Power = hp.power
	m.putComp(c.ID, c)
	m.hold(c, c.Blocks)
	p := &Placement{m: m, req: req, c: c,
		check: append(slices.Clone(req.Check), store.ObjectRef{Kind: HostPowerKind, ID: c.Host, Version: hp.version})}
	if hp.version != 0 {
		p.objs = append(p.objs, store.ObjectChange{Kind: HostPowerKind, Object: store.Object{ID: c.Host, Version: hp.version}, Delete: true})
	}
	return p, nil
}

// Blocks are the blocks the placement takes, the compute block first.
func (p *Placement) Blocks() []string { return slices.Clone(p.c.Blocks) }

// EstimateFabricTime is the modelled time the fabrics need to attach the
// placement's blocks (Manager.EstimateFabricTime).
func (p *Placement) EstimateFabricTime() time.Duration { return p.m.EstimateFabricTime(p.c.Blocks) }

// Realize is the second half of Compose: it records the intent, attaches
// every device, runs the host agent's step and records the outcome (with
// the audit entry ctx carries), all or nothing. When the intent conflicts
// with another replica's commit, it catches up and places again, as
// Compose always has. It runs to completion even when ctx is cancelled.
func (p *Placement) Realize(ctx context.Context) (*inventory.Composition, error) {
	if p.done {
		return nil, errors.New("compose: placement already realized or cancelled")
	}
	p.done = true
	ctx = context.WithoutCancel(ctx)
	first := true
	return p.m.retryConflicts(ctx, func() (*inventory.Composition, error) {
		if first {
			first = false
			return p.m.realize(ctx, p.c, p.check, p.objs)
		}
		again, err := p.m.Place(ctx, p.req)
		if err != nil {
			return nil, err
		}
		again.done = true
		return p.m.realize(ctx, again.c, again.check, again.objs)
	})
}

// Cancel gives the placement's blocks back; after Realize it does nothing.
func (p *Placement) Cancel() {
	if p.done {
		return
	}
	p.done = true
	p.m.mu.Lock()
	defer p.m.mu.Unlock()
	p.m.drop(p.c, p.c.Blocks)
	delete(p.m.comps, p.c.ID)
}

// place applies the composition policy to req, schedules it and returns
// the composition it would make, checking the tenant's quota. m.mu must be
// held.
func (m *Manager) place(req Request, state inventory.State, prefix string) (*inventory.Composition, error) {
	req, err := m.ApplyPolicy(req)
	if err != nil {
		return nil, err
	}
	plan, err := m.schedule(req.placement())
	if err != nil {
		return nil, err
	}
	now := m.clk.Now().UTC()
	c := &inventory.Composition{ID: newID(prefix), Name: req.Name, Description: req.Description, Host: plan.Host.ID,
		State: state, Version: 1, CreatedAt: now, UpdatedAt: now, Ports: map[string]string{}, Tenant: req.Tenant, Group: req.Group}
	if c.Name == "" {
		c.Name = c.ID
	}
	for _, a := range plan.Assignments {
		c.Blocks = append(c.Blocks, a.Block.ID)
		if a.Port != nil {
			c.Ports[a.Block.ID] = a.Port.ID
		}
	}
	if err := m.checkQuota(req.Tenant, req.Quota, c.Blocks); err != nil {
		return nil, err
	}
	return c, nil
}

// realize records c (held in memory, state Composing), attaches its
// devices and records it Composed; on any failure it rolls back.
func (m *Manager) realize(ctx context.Context, c *inventory.Composition, check []store.ObjectRef, objs []store.ObjectChange) (*inventory.Composition, error) {
	abandon := func() {
		m.mu.Lock()
		m.drop(c, c.Blocks)
		m.dropComp(c.ID)
		m.mu.Unlock()
	}
	if err := m.store.Apply(ctx, store.Plan{Put: []*inventory.Composition{c}, Limits: m.limits, Check: check, Objects: objs, Intent: true}); err != nil {
		abandon()
		if errors.Is(err, store.ErrConflict) {
			m.loadHostPower(ctx) // the free host's power may be what changed
			err = fmt.Errorf("%w: %w", errIntentConflict, err)
		}
		return nil, fmt.Errorf("record composition: %w", err)
	}
	start := time.Now()
	fail := func(err error) (*inventory.Composition, error) {
		if m.rollbackCompose(ctx, c) {
			abandon()
		}
		m.notify(Change{Old: c, Reason: "failed", Err: err})
		return nil, err
	}
	if err := m.attach(ctx, c, c.Blocks); err != nil {
		return fail(&StepError{Step: StepFabricAttach, Composition: c.ID, Err: err})
	}
	if m.managed(c) && len(m.deviceBlocks(c.Blocks)) > 0 {
		at, err := m.atStep(ctx, c, StepHostAttach)
		if err != nil {
			return fail(err)
		}
		c = at
		if err := m.hostStep(ctx, c, "attach", c.Blocks, m.hostTimeout); err != nil {
			_ = m.hostStep(ctx, c, "detach", c.Blocks, m.compensationTimeout())
			return fail(err)
		}
	}
	done := c.Clone()
	done.State, done.Step, done.Version, done.UpdatedAt = inventory.Composed, "", c.Version+1, m.clk.Now().UTC()
	if err := m.commitOutcome(ctx, store.Plan{Put: []*inventory.Composition{done}, Limits: m.limits}, "composed "+c.ID); err != nil {
		if m.rollbackCompose(ctx, c) {
			abandon()
		}
		m.notify(Change{Old: c, Reason: "failed", Err: err})
		return nil, fmt.Errorf("record composed state: %w", err)
	}
	m.mu.Lock()
	m.putComp(c.ID, done)
	m.mu.Unlock()
	m.log.Info("composed", "id", c.ID, "host", c.Host, "blocks", len(c.Blocks), "tenant", c.Tenant, "took", time.Since(start))
	m.notify(Change{New: done.Clone(), Reason: "composed"})
	return done.Clone(), nil
}

// schedule runs the scheduler and reports its decision time. m.mu must be
// held.
func (m *Manager) schedule(req schedule.Request) (*schedule.Plan, error) {
	start := time.Now()
	p, err := m.sched.Schedule(m.st, req)
	if m.onSchedule != nil {
		m.onSchedule(time.Since(start), err)
	}
	return p, err
}

// commitOutcome applies p, the plan that ends a workflow. When ctx carries
// the audit entry of the request that asked for the workflow
// (store.PendingAudit), the entry is committed in the same plan, with
// detail, so that the outcome and its audit record cost one durable commit
// and are kept or lost together.
func (m *Manager) commitOutcome(ctx context.Context, p store.Plan, detail string) error {
	pending := store.PendingAuditFrom(ctx)
	e, ok := pending.Take(detail)
	if !ok {
		return m.store.Apply(ctx, p)
	}
	p.Audit = append(p.Audit, e)
	err := m.store.Apply(ctx, p)
	pending.Done(err)
	return err
}

// notify reports a committed change to the OnChange hook.
func (m *Manager) notify(ch Change) {
	if m.onChange != nil {
		m.onChange(ch)
	}
}

// rollbackCompose detaches what a failed compose may have attached and
// deletes its record, and reports whether it did. A failure here is left
// for recovery at start-up; until then the composition stays Composing and
// keeps its blocks, which may still be attached and are still recorded.
func (m *Manager) rollbackCompose(ctx context.Context, c *inventory.Composition) bool {
	if err := m.detach(ctx, c, c.Blocks); err != nil {
		m.log.Error("rollback detach failed; retrying every second (RetryStuck) and at start-up", "id", c.ID, "err", err)
		m.markStuck(c.ID)
		return false
	}
	oc, hp := freePower(c)
	if err := m.store.Apply(ctx, store.Plan{Delete: []store.Deletion{{ID: c.ID, Version: c.Version}}, Objects: []store.ObjectChange{oc}}); err != nil {
		m.log.Error("rollback delete failed; retrying every second (RetryStuck) and at start-up", "id", c.ID, "err", err)
		m.markStuck(c.ID)
		return false
	}
	m.mu.Lock()
	m.freed(c, hp)
	m.mu.Unlock()
	return true
}

// markStuck notes a composition whose rollback failed (a fabric or the
// database was unreachable), for RetryStuck.
func (m *Manager) markStuck(id string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.stuck[id] = true
}

// RetryStuck rolls back again the compositions whose rollback failed, and
// finishes the decomposes recorded but not finished: a control plane that
// rides out an outage of its database or of a fabric (docs/ha.md) must not
// keep their blocks until its next restart. ExpireLoop calls it.
func (m *Manager) RetryStuck(ctx context.Context) {
	m.mu.Lock()
	var stuck, decomposing []*inventory.Composition
	for id := range m.stuck {
		switch c := m.comps[id]; {
		case c != nil && c.State == inventory.Composing:
			stuck = append(stuck, c)
		case c != nil && c.State == inventory.Decomposing && !m.running[id]:
			decomposing = append(decomposing, c)
		default:
			delete(m.stuck, id)
		}
	}
	m.mu.Unlock()
	for _, c := range decomposing {
		m.mu.Lock()
		delete(m.stuck, c.ID) // marked again if it fails again
		m.mu.Unlock()
		if err := m.decomposeOnce(ctx, c.ID, 0); err == nil {
			m.log.Info("finished a decompose the database's outage had interrupted", "id", c.ID)
		}
	}
	for _, c := range stuck {
		if err := m.detach(ctx, c, c.Blocks); err != nil {
			continue
		}
		oc, hp := freePower(c)
		if err := m.store.Apply(ctx, store.Plan{Delete: []store.Deletion{{ID: c.ID, Version: c.Version}}, Objects: []store.ObjectChange{oc}}); err != nil {
			continue
		}
		m.mu.Lock()
		if m.comps[c.ID] == c {
			m.drop(c, c.Blocks)
			m.dropComp(c.ID)
		}
		m.freed(c, hp)
		delete(m.stuck, c.ID)
		m.mu.Unlock()
		m.log.Info("rolled back a composition whose rollback had failed", "id", c.ID)
	}
}

// attachments turns blocks of c into fabric attachments grouped by fabric.
func (m *Manager) attachments(c *inventory.Composition, blocks []string) map[string][]fabric.Attachment {
	out := map[string][]fabric.Attachment{}
	for _, a := range m.st.Assignments(c, blocks) {
		if a.Block.Device == nil || a.Port == nil {
			continue
		}
		f := a.Block.Device.Fabric.ID
		out[f] = append(out[f], fabric.Attachment{Block: a.Block.ID, Device: a.Block.Device.ID, Host: c.Host, HostPort: a.Port.ID})
	}
	return out
}

// forEachFabric runs fn for each fabric's attachments, fabrics in
// parallel, attachments of one fabric in order (a switch controller
// applies one reconfiguration at a time). It returns the first error.
func (m *Manager) forEachFabric(byFabric map[string][]fabric.Attachment, fn func(fabric.Driver, fabric.Attachment) error) error {
	var wg sync.WaitGroup
	errs := make(chan error, len(byFabric))
	for fid, as := range byFabric {
		d := m.drivers[fid]
		wg.Add(1)
		go func() {
			defer wg.Done()
			for _, a := range as {
				if err := fn(d, a); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	var all []error
	for err := range errs {
		all = append(all, err)
	}
	return errors.Join(all...)
}

func (m *Manager) attach(ctx context.Context, c *inventory.Composition, blocks []string) error {
	err := m.forEachFabric(m.attachments(c, blocks), func(d fabric.Driver, a fabric.Attachment) error {
		start := time.Now()
		_, err := d.Attach(m.fenced(ctx), a)
		m.fabricOp(a, "attach", start, err)
		if err != nil {
			return fmt.Errorf("attach %s to %s/%s: %w", a.Block, a.Host, a.HostPort, err)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("%w: %w", ErrAttach, err)
	}
	return nil
}

func (m *Manager) detach(ctx context.Context, c *inventory.Composition, blocks []string) error {
	err := m.forEachFabric(m.attachments(c, blocks), func(d fabric.Driver, a fabric.Attachment) error {
		start := time.Now()
		_, err := d.Detach(m.fenced(ctx), a)
		m.fabricOp(a, "detach", start, err)
		if err != nil {
			return fmt.Errorf("detach %s from %s/%s: %w", a.Block, a.Host, a.HostPort, err)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("%w: %w", ErrDetach, err)
	}
	return nil
}

// Decompose tears a composition down. A composition stuck Decomposing
// after a failed detach may be decomposed again.
func (m *Manager) Decompose(ctx context.Context, id string, expectVersion int64) error {
	ctx = context.WithoutCancel(ctx)
	ctx, expectVersion, err := m.offBeforeDecompose(ctx, id, expectVersion)
	if err != nil {
		return err
	}
	err = m.decomposeOnce(ctx, id, expectVersion)
	if m.behind(ctx, &err) {
		err = m.decomposeOnce(ctx, id, expectVersion)
	}
	return err
}

// decomposeOnce is one attempt of Decompose.
func (m *Manager) decomposeOnce(ctx context.Context, id string, expectVersion int64) error {
	m.mu.Lock()
	c := m.comps[id]
	switch {
	case !system(c):
		m.mu.Unlock()
		return fmt.Errorf("%w: %s", ErrNotFound, id)
	case expectVersion != 0 && c.Version != expectVersion:
		m.mu.Unlock()
		return fmt.Errorf("%w: %s is at version %d", ErrVersion, id, c.Version)
	case c.State != inventory.Composed && c.State != inventory.Decomposing:
		m.mu.Unlock()
		return fmt.Errorf("%w: %s is %s", ErrBusy, id, c.State)
	case m.running[id]:
		m.mu.Unlock()
		return fmt.Errorf("%w: %s is already being decomposed", ErrBusy, id)
	case c.State == inventory.Composed && (m.powering[c.Host] || !c.Power.IsOff()):
		// offBeforeDecompose powered it off, or a reset began since.
		m.mu.Unlock()
		return fmt.Errorf("%w: %s is %s; a reset is under way", ErrBusy, id, c.Power.State)
	case c.State == inventory.Decomposing && m.remote[id]:
		// Another replica's decompose, under way or to be settled by
		// the leader if that replica died: taking it over would run two
		// workflows on one record.
		m.mu.Unlock()
		return fmt.Errorf("%w: %s is being decomposed by another replica; a 404 will say it is done", ErrBusy, id)
	}
	d := c.Clone()
	d.State, d.Version, d.UpdatedAt = inventory.Decomposing, c.Version+1, m.clk.Now().UTC()
	if m.managed(c) && len(m.deviceBlocks(c.Blocks)) > 0 {
		d.Step = StepHostDrain
	}
	m.putComp(id, d)
	m.running[id] = true
	delete(m.remote, id) // this replica's workflow now
	m.mu.Unlock()

	if c.State == inventory.Composed {
		if err := m.store.Apply(ctx, store.Plan{Put: []*inventory.Composition{d}, Limits: m.limits, Intent: true}); err != nil {
			m.restore(c)
			return fmt.Errorf("record decomposing: %w", err)
		}
	} else {
		d = c // already Decomposing in the store
	}
	err := m.decompose(ctx, d)
	if errors.Is(err, store.ErrUnavailable) {
		// The decompose is recorded: it will be finished (RetryStuck,
		// a retry, or the recovery of whichever replica serves next). Not
		// "nothing was changed", which the store's error would say.
		m.markStuck(id)
		return fmt.Errorf("%w: %s", ErrUnfinished, err.Error())
	}
	return err
}

// restore puts to back as the composition's record in memory and ends its
// decompose.
func (m *Manager) restore(to *inventory.Composition) {
	m.mu.Lock()
	m.putComp(to.ID, to)
	delete(m.running, to.ID)
	m.mu.Unlock()
}

// decompose finishes the decompose of d, stored Decomposing and marked
// running: the host drains (when d waits on that step), the fabrics
// detach, the record goes. A drain that fails puts back what it drained
// and returns the system to Composed; a detach that fails leaves it
// Decomposing for a retry.
func (m *Manager) decompose(ctx context.Context, d *inventory.Composition) error {
	id := d.ID
	if d.Step == StepHostDrain {
		if err := m.hostStep(ctx, d, "detach", d.Blocks, m.hostTimeout); err != nil {
			_ = m.hostStep(ctx, d, "attach", d.Blocks, m.compensationTimeout())
			back := d.Clone()
			back.State, back.Step, back.Version, back.UpdatedAt = inventory.Composed, "", d.Version+1, m.clk.Now().UTC()
			if serr := m.store.Apply(ctx, store.Plan{Put: []*inventory.Composition{back}, Limits: m.limits}); serr != nil {
				m.log.Error("return to Composed after a failed drain; recovery will finish it at start-up", "id", id, "err", serr)
				back = d
			}
			m.restore(back)
			m.notify(Change{Old: d, New: back.Clone(), Reason: "failed", Err: err})
			return err
		}
	}
	if err := m.detach(ctx, d, d.Blocks); err != nil {
		m.restore(d)
		return &StepError{Step: StepFabricDetach, Composition: id, Err: err}
	}
	oc, hp := freePower(d)
	if err := m.commitOutcome(ctx, store.Plan{Delete: []store.Deletion{{ID: id, Version: d.Version}}, Objects: []store.ObjectChange{oc}}, strings.TrimSpace("decomposed "+id+" "+poweredOff(ctx))); err != nil {
		m.restore(d)
		if errors.Is(err, store.ErrConflict) {
			// Another replica moved the record (the leader settled it):
			// the snapshot takes the stored one from the log.
			m.mu.Lock()
			m.remote[id] = true
			m.mu.Unlock()
		}
		return fmt.Errorf("delete composition: %w", err)
	}
	m.mu.Lock()
	m.drop(d, d.Blocks)
	m.dropComp(id)
	delete(m.running, id)
	m.freed(d, hp)
	m.mu.Unlock()
	m.log.Info("decomposed", "id", id)
	m.notify(Change{Old: d, Reason: "decomposed"})
	return nil
}

// Update adds and removes blocks of a composed system, all or nothing
// (see UpdateRequest).
func (m *Manager) Update(ctx context.Context, id string, ur UpdateRequest) (*inventory.Composition, error) {
	ctx = context.WithoutCancel(ctx)
	c, err := m.updateOnce(ctx, id, ur)
	if m.behind(ctx, &err) {
		c, err = m.updateOnce(ctx, id, ur)
	}
	return c, err
}

// updateOnce is one attempt of Update.
func (m *Manager) updateOnce(ctx context.Context, id string, ur UpdateRequest) (*inventory.Composition, error) {
	if ur.Set != nil && len(ur.Blocks)+len(ur.Needs)+len(ur.Remove) > 0 {
		return nil, fmt.Errorf("%w: an update sets the block list or adds and removes, not both", ErrBadRequest)
	}
	m.mu.Lock()
	c := m.comps[id]
	if !system(c) {
		m.mu.Unlock()
		return nil, fmt.Errorf("%w: %s", ErrNotFound, id)
	}
	if ur.Version != 0 && c.Version != ur.Version {
		m.mu.Unlock()
		return nil, fmt.Errorf("%w: %s is at version %d", ErrVersion, id, c.Version)
	}
	if c.State != inventory.Composed {
		m.mu.Unlock()
		return nil, fmt.Errorf("%w: %s is %s", ErrBusy, id, c.State)
	}
	if m.powering[c.Host] || !c.Power.IsOff() && c.Power.State != inventory.PowerOn {
		m.mu.Unlock()
		return nil, fmt.Errorf("%w: %s is resetting", ErrBusy, id)
	}
	remove := ur.Remove
	add := schedule.Request{Blocks: ur.Blocks, Needs: ur.Needs, Affinity: ur.Affinity}
	if ur.Set != nil {
		add.Blocks, remove = nil, nil
		for _, b := range ur.Set {
			if !slices.Contains(c.Blocks, b) {
				add.Blocks = append(add.Blocks, b)
			}
		}
		for _, b := range c.Blocks {
			if !slices.Contains(ur.Set, b) {
				remove = append(remove, b)
			}
		}
	}
	for _, r := range remove {
		if r == c.Host {
			m.mu.Unlock()
			return nil, fmt.Errorf("%w: the compute block %s cannot be removed; decompose instead", ErrBadRequest, r)
		}
		if !slices.Contains(c.Blocks, r) {
			m.mu.Unlock()
			return nil, fmt.Errorf("%w: %s does not hold %s", ErrBadRequest, id, r)
		}
	}
	if len(slices.Compact(slices.Sorted(slices.Values(remove)))) != len(remove) {
		m.mu.Unlock()
		return nil, fmt.Errorf("%w: a block is listed twice", ErrBadRequest)
	}
	u := c.Clone()
	if u.Ports == nil {
		u.Ports = map[string]string{} // a stored composition without device blocks may have none
	}
	u.State, u.Version, u.UpdatedAt = inventory.Updating, c.Version+1, m.clk.Now().UTC()
	u.Removing = append([]string(nil), remove...)
	if len(add.Blocks)+len(add.Needs) > 0 {
		add.Host, add.Expand = c.Host, true
		add.Held = slices.DeleteFunc(slices.Clone(c.Blocks), func(b string) bool { return slices.Contains(remove, b) })
		add.Exclude = append(add.Exclude, remove...)
		for _, b := range add.Blocks {
			if slices.Contains(remove, b) {
				// Attaching first and detaching second would leave the
				// block recorded but detached.
				m.mu.Unlock()
				return nil, fmt.Errorf("%w: %s is both added and removed", ErrBadRequest, b)
			}
			if slices.Contains(c.Blocks, b) {
				m.mu.Unlock()
				return nil, fmt.Errorf("%w: %s already holds %s", ErrBadRequest, id, b)
			}
		}
		plan, err := m.schedule(add)
		if err != nil {
			m.mu.Unlock()
			return nil, err
		}
		for _, a := range plan.Assignments {
			u.Adding = append(u.Adding, a.Block.ID)
			if a.Port != nil {
				u.Ports[a.Block.ID] = a.Port.ID
			}
		}
		if err := m.checkQuota(c.Tenant, ur.Quota, u.Adding); err != nil {
			m.mu.Unlock()
			return nil, err
		}
	}
	if len(u.Adding)+len(u.Removing) == 0 {
		m.mu.Unlock()
		return c.Clone(), nil
	}
	if err := m.checkHotPlug(id, c.Power, slices.Concat(u.Adding, u.Removing)); err != nil {
		m.mu.Unlock()
		return nil, err
	}
	m.putComp(id, u)
	delete(m.remote, id) // this replica's workflow now
	m.hold(u, u.Adding)
	m.mu.Unlock()

	revert := func() (*inventory.Composition, error) {
		back := c.Clone()
		back.Version, back.UpdatedAt = u.Version+1, m.clk.Now().UTC()
		if err := m.store.Apply(ctx, store.Plan{Put: []*inventory.Composition{back}, Limits: m.limits}); err != nil {
			m.log.Error("revert update failed; recovery will finish it at start-up", "id", id, "err", err)
			back = u
		}
		m.mu.Lock()
		m.drop(u, u.Adding)
		m.putComp(id, back)
		m.mu.Unlock()
		return back, nil
	}
	if err := m.store.Apply(ctx, store.Plan{Put: []*inventory.Composition{u}, Limits: m.limits, Check: ur.Check, Intent: true}); err != nil {
		m.mu.Lock()
		m.drop(u, u.Adding)
		m.putComp(id, c)
		m.mu.Unlock()
		return nil, fmt.Errorf("record update: %w", err)
	}
	// A rollback that cannot put the fabrics back leaves the composition
	// Updating, holding every block it names, for recovery at start-up.
	if err := m.attach(ctx, u, u.Adding); err != nil {
		if derr := m.detach(ctx, u, u.Adding); derr != nil {
			m.log.Error("rollback detach failed; recovery will finish it at start-up", "id", id, "err", derr)
			return nil, err
		}
		_, _ = revert()
		return nil, err
	}
	if err := m.updateHostSteps(ctx, &u, revert); err != nil {
		return nil, err
	}
	if err := m.detach(ctx, u, u.Removing); err != nil {
		if rerr := errors.Join(m.detach(ctx, u, u.Adding), m.attach(ctx, u, u.Removing)); rerr != nil {
			m.log.Error("rollback failed; recovery will finish it at start-up", "id", id, "err", rerr)
			return nil, err
		}
		_, _ = revert()
		return nil, err
	}
	done := u.Clone()
	done.Blocks = append(slices.DeleteFunc(done.Blocks, func(b string) bool { return slices.Contains(u.Removing, b) }), u.Adding...)
	for _, r := range u.Removing {
		delete(done.Ports, r)
	}
	done.Adding, done.Removing, done.Step = nil, nil, ""
	done.State, done.Version, done.UpdatedAt = inventory.Composed, u.Version+1, m.clk.Now().UTC()
	if err := m.commitOutcome(ctx, store.Plan{Put: []*inventory.Composition{done}, Limits: m.limits}, "updated "+id); err != nil {
		_ = m.detach(ctx, u, u.Adding)
		_ = m.attach(ctx, u, u.Removing)
		_, _ = revert()
		return nil, fmt.Errorf("record updated composition: %w", err)
	}
	m.mu.Lock()
	m.drop(u, u.Removing)
	m.putComp(id, done)
	m.mu.Unlock()
	m.log.Info("updated", "id", id, "added", len(u.Adding), "removed", len(u.Removing))
	m.notify(Change{Old: c, New: done.Clone(), Reason: "updated"})
	return done.Clone(), nil
}

// Get returns a copy of one composition. With several replicas, one this
// replica has not yet seen is looked for in the change log first: a client
// that composed at another replica finds its system here at once.
// CatchUp brings the snapshot up to date with the database when this is
// one of several active replicas (Options.CatchUp), so that a read after
// it sees every change another replica acknowledged before it began; a
// no-op otherwise. It costs one query when nothing changed.
func (m *Manager) CatchUp(ctx context.Context) error {
	if m.catchUp == nil {
		return nil
	}
	if err := m.catchUp(ctx); err != nil {
		return fmt.Errorf("%w: catching up with the other replicas: %v", store.ErrUnavailable, err)
	}
	return nil
}

func (m *Manager) Get(id string) (*inventory.Composition, error) {
	c, err := m.get(id)
	if errors.Is(err, ErrNotFound) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if m.behind(ctx, &err) {
			c, err = m.get(id)
		}
	}
	return c, err
}

func (m *Manager) get(id string) (*inventory.Composition, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	c := m.comps[id]
	if !system(c) {
		return nil, fmt.Errorf("%w: %s", ErrNotFound, id)
	}
	return c.Clone(), nil
}

// List returns copies of all systems (not reservations or holders'
// records), ordered by creation then ID.
func (m *Manager) List() []*inventory.Composition {
	return m.list(system)
}

// system reports whether c is a system, composed or in transition: not
// absent, a reservation or a holder's record.
func system(c *inventory.Composition) bool {
	return c != nil && c.State != inventory.Reserved && c.State != inventory.Held
}

// putComp records c as composition id; m.mu is held.
func (m *Manager) putComp(id string, c *inventory.Composition) {
	m.noteStep(id, m.comps[id], c)
	m.comps[id] = c
	m.compsGen++
}

// dropComp forgets composition id; m.mu is held.
func (m *Manager) dropComp(id string) {
	m.noteStep(id, m.comps[id], nil)
	delete(m.comps, id)
	m.compsGen++
}

// SystemIDs returns the IDs of the systems List returns, in its order
// (created first, then by ID), without copying the compositions: the
// ordered index the Systems collection is paged on. The list is built
// again only after compositions changed; callers must not modify it.
func (m *Manager) SystemIDs() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.systemIDs != nil && m.systemIDsGen == m.compsGen {
		return m.systemIDs
	}
	out := make([]*inventory.Composition, 0, len(m.comps))
	for _, c := range m.comps {
		if system(c) {
			out = append(out, c)
		}
	}
	sortCompositions(out)
	ids := make([]string, len(out))
	for i, c := range out {
		ids[i] = c.ID
	}
	m.systemIDs, m.systemIDsGen = ids, m.compsGen
	return ids
}

// sortCompositions orders compositions as List returns them.
func sortCompositions(out []*inventory.Composition) {
	sort.Slice(out, func(i, j int) bool {
		if !out[i].CreatedAt.Equal(out[j].CreatedAt) {
			return out[i].CreatedAt.Before(out[j].CreatedAt)
		}
		return out[i].ID < out[j].ID
	})
}

func (m *Manager) list(keep func(*inventory.Composition) bool) []*inventory.Composition {
	m.mu.Lock()
	out := make([]*inventory.Composition, 0, len(m.comps))
	for _, c := range m.comps {
		if keep(c) {
			out = append(out, c.Clone())
		}
	}
	m.mu.Unlock()
	sortCompositions(out)
	return out
}

// BlockStatus is a block's composition status, as Redfish reports it.
type BlockStatus struct {
	State        string   // Unused, Composing, ComposedAndAvailable, Composed, Failed, Unavailable (held)
	HeldBy       string   // Unavailable: the owner holding it outside compositions (HoldBlocks)
	Compositions []string // IDs of compositions holding it (not reservations)
	Reservations []string // IDs of reservations holding it
	// Tenants owning each holder: Compositions first, then Reservations.
	Tenants []string
}

// InComposition reports whether a composition or reservation holds block
// id (a holder's record does not count).
func (m *Manager) InComposition(id string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, o := range m.owners[id] {
		if c := m.comps[o]; c != nil && c.State != inventory.Held {
			return true
		}
	}
	return false
}

// BlockStatus returns the status of block id.
func (m *Manager) BlockStatus(id string) BlockStatus {
	m.mu.Lock()
	defer m.mu.Unlock()
	b := m.top.Block(id)
	var owners []string
	st := BlockStatus{State: "Unused"}
	for _, o := range m.owners[id] {
		if c := m.comps[o]; c != nil && c.State == inventory.Held {
			st.State, st.HeldBy = "Unavailable", c.Name
			return st
		}
	}
	for _, o := range m.owners[id] {
		if c := m.comps[o]; c != nil && c.State == inventory.Reserved {
			st.Reservations = append(st.Reservations, o)
		} else {
			owners = append(owners, o)
		}
	}
	st.Compositions = owners
	for _, o := range append(append([]string(nil), owners...), st.Reservations...) {
		if c := m.comps[o]; c != nil {
			st.Tenants = append(st.Tenants, c.Tenant)
		}
	}
	if b == nil {
		return st
	}
	settled := 0
	for _, o := range owners {
		c := m.comps[o]
		if c == nil {
			continue
		}
		if c.State == inventory.Composed || (c.State == inventory.Updating && !slices.Contains(c.Adding, id) && !slices.Contains(c.Removing, id)) {
			settled++
		}
	}
	switch {
	case len(owners) == 0:
	case settled < len(owners):
		st.State = "Composing"
	case len(owners)+len(st.Reservations) < b.MaxCompositions:
		st.State = "ComposedAndAvailable"
	default:
		st.State = "Composed"
	}
	return st
}

// recover loads the store and settles every composition left in
// transition by a crash.
func (m *Manager) recover(ctx context.Context) error {
	comps, err := m.store.Compositions(ctx)
	if err != nil {
		return fmt.Errorf("load compositions: %w", err)
	}
	restore := map[string][]fabric.Attachment{}
	var settle []*inventory.Composition
	for _, c := range comps {
		if m.top.Host(c.Host) == nil && (c.State != inventory.Held || c.Host != "") {
			return fmt.Errorf("stored composition %s is on host %s, which the topology no longer has", c.ID, c.Host)
		}
		for _, b := range c.AllBlocks() {
			if m.top.Block(b) == nil {
				return fmt.Errorf("stored composition %s holds block %s, which the topology no longer has", c.ID, b)
			}
		}
		m.putComp(c.ID, c)
		m.hold(c, c.AllBlocks())
		if m.replica != "" {
			m.remote[c.ID] = true // the workflows of others, or of the dead the leader settles
			continue
		}
		if c.State == inventory.Composed || c.State == inventory.Held && c.Host != "" {
			for f, as := range m.attachments(c, c.Blocks) {
				restore[f] = append(restore[f], as...)
			}
		} else if system(c) && c.Step != "" && m.managed(c) {
			m.resume = append(m.resume, c) // its host agent must be reachable: Resume
		} else if system(c) { // reservations and holders attach nothing
			settle = append(settle, c)
		}
	}
	for fid, as := range restore {
		d := m.drivers[fid]
		if r, ok := d.(fabric.Restorer); ok {
			if err := r.Restore(m.fenced(ctx), as); err != nil {
				return fmt.Errorf("restore fabric %s: %w", fid, err)
			}
			continue
		}
		for _, a := range as {
			if _, err := d.Attach(m.fenced(ctx), a); err != nil {
				m.log.Warn("restore attachment", "block", a.Block, "host", a.Host, "err", err)
			}
		}
	}
	m.loadHostPower(ctx)
	if m.replica != "" {
		m.log.Info("loaded compositions", "total", len(comps))
		return nil
	}
	for _, c := range comps {
		if c.State == inventory.Composed && inTransition(c.Power) {
			if err := m.settlePower(ctx, c); err != nil {
				return err
			}
		}
	}
	if _, err := m.settleHostPowers(ctx, true, ""); err != nil {
		return err
	}
	for _, c := range settle {
		if err := m.settle(ctx, c, func(f func()) { f() }); err != nil {
			return fmt.Errorf("recover %s (%s): %w", c.ID, c.State, err)
		}
	}
	if err := m.reconcile(ctx); err != nil {
		return err
	}
	if len(comps) > 0 {
		m.log.Info("recovered compositions", "total", len(comps), "settled", len(settle), "to resume", len(m.resume))
	}
	return nil
}

// reconcile detaches every attachment the fabrics report that no
// composition holds. Intent records (Composing, Decomposing, Updating) are
// acknowledged before they reach stable storage (store.Plan.Intent), so a
// power failure or an operating-system crash can lose one whose workflow
// had already attached devices: its store record is gone, its attachments
// are not, and they are found here. (A lost Decomposing or Updating record
// leaves the previous Composed one, which recover has already restored.)
func (m *Manager) reconcile(ctx context.Context) error {
	held := map[fabric.Attachment]bool{}
	for _, c := range m.comps {
		for _, as := range m.attachments(c, c.AllBlocks()) {
			for _, a := range as {
				held[a] = true
			}
		}
	}
	for fid, d := range m.drivers {
		st, err := d.Discover(ctx)
		if err != nil {
			return fmt.Errorf("discover fabric %s: %w", fid, err)
		}
		for _, a := range st.Attachments {
			if held[a] {
				continue
			}
			if _, err := d.Detach(m.fenced(ctx), a); err != nil {
				return fmt.Errorf("detach %s from %s/%s, which no composition holds: %w", a.Block, a.Host, a.HostPort, err)
			}
			m.log.Warn("detached an attachment no composition holds", "fabric", fid, "block", a.Block, "host", a.Host, "port", a.HostPort)
		}
	}
	return nil
}

// settle finishes or rolls back one composition found in transition. It
// changes the snapshot through mut: at start-up at once, at run time under
// the manager's lock (SettleOwner).
func (m *Manager) settle(ctx context.Context, c *inventory.Composition, mut func(func())) error {
	if c.State == inventory.Decomposing && strings.HasPrefix(c.Group, manifestPrefix) {
		// Part of a manifest that did not finish: the manifest is rolled
		// back as a whole, so this system stays composed.
		if err := m.attach(ctx, c, c.Blocks); err != nil {
			return err
		}
		back := c.Clone()
		back.State, back.Version, back.UpdatedAt, back.Group = inventory.Composed, c.Version+1, m.clk.Now().UTC(), ""
		if err := m.store.Apply(ctx, store.Plan{Put: []*inventory.Composition{back}, Limits: m.limits}); err != nil {
			return err
		}
		mut(func() { m.putComp(c.ID, back) })
		m.log.Info("kept a system an unfinished manifest was decomposing", "id", c.ID, "manifest", c.Group)
		return nil
	}
	switch c.State {
	case inventory.Composing, inventory.Decomposing:
		// Attachments may be partial: detach everything (idempotent).
		if err := m.detach(ctx, c, c.Blocks); err != nil {
			return err
		}
		oc, hp := freePower(c)
		if err := m.store.Apply(ctx, store.Plan{Delete: []store.Deletion{{ID: c.ID, Version: c.Version}}, Objects: []store.ObjectChange{oc}}); err != nil {
			return err
		}
		mut(func() {
			m.drop(c, c.Blocks)
			m.dropComp(c.ID)
			m.freed(c, hp)
		})
		m.log.Info("rolled back composition left in transition", "id", c.ID, "state", c.State)
	case inventory.Updating:
		if err := m.detach(ctx, c, c.Adding); err != nil {
			return err
		}
		if err := m.attach(ctx, c, c.Blocks); err != nil {
			m.log.Warn("re-attach after interrupted update", "id", c.ID, "err", err)
		}
		back := c.Clone()
		for _, a := range c.Adding {
			delete(back.Ports, a)
		}
		back.Adding, back.Removing = nil, nil
		back.State, back.Version, back.UpdatedAt = inventory.Composed, c.Version+1, m.clk.Now().UTC()
		if err := m.store.Apply(ctx, store.Plan{Put: []*inventory.Composition{back}, Limits: m.limits}); err != nil {
			return err
		}
		mut(func() {
			m.drop(c, c.Adding)
			m.putComp(c.ID, back)
		})
		m.log.Info("rolled back interrupted update", "id", c.ID)
	default:
		return fmt.Errorf("unknown state %q", c.State)
	}
	return nil
}

// Describe renders a composition as one line, for logs and the CLI.
func Describe(c *inventory.Composition) string {
	return fmt.Sprintf("%s %s on %s: %s", c.ID, c.State, c.Host, strings.Join(c.Blocks, ","))
}
