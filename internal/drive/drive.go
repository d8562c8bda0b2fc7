// Package drive is the control plane's side of pooled drives (P1, Flexible
// Fabric): the registry of blocknodes (storage servers on a SAS circuit
// switch), which drive each one serves, the capability tokens clients
// present to them, and failure disaggregation — when a blocknode dies its
// drives are remapped to the survivors instead of being rebuilt.
//
// # Model
//
// A blocknode runs on a topology host with a port into a sas-circuit
// fabric. While it is registered it holds that host and the drives mapped
// to it through one holder record ("blocknode-<host>",
// compose.Manager.SetHolders): the host is not composable, the drives are
// in no composition, and the store checks the record like any other, so a
// drive is never both a blocknode's and a composed system's. The drive's
// mapping is a real attachment of the emulated SAS switch (drive block to
// the blocknode's host port), made after the holder record commits and
// restored by the composition manager at start-up.
//
// The pool is every drive of a SAS fabric a blocknode reaches that no
// composition or reservation holds. Drives are handed to blocknodes with
// the fewest drives first, up to each node's MaxDrives, keeping Spares of
// them unassigned as rack-wide hot spares (P1 §5: n servers with k ports
// and nk/2+δ drives keep δ spares). As blocknodes register and come back,
// idle drives move from the busiest to the least busy until the counts are
// within one (balance.go); a drive in use — a client connected, or a token
// granted that has not expired — stays where it is.
//
// # Ownership epochs and node leases (fencing)
//
// Every change of a drive's owner increments its epoch. A blocknode serves
// a drive only at the epoch the control plane last told it, and only while
// its node lease holds: each heartbeat answer grants the drives for
// LeaseTTL from the moment the node sent the heartbeat (by its own
// monotonic clock), so a node that stops hearing from the control plane —
// cut off, paused by SIGSTOP, or its heartbeats lost — stops serving by
// itself before anyone else may take its drives. The control plane fails a
// node over only when LeaseTTL plus a grace has passed since the last
// heartbeat it answered, and after a restart it waits that long before
// failing anything over. Tokens carry the epoch, so a token issued before
// a move is refused by every blocknode after it. docs/storage.md discusses
// the one window leases cannot close.
//
// # One writer per drive
//
// Each drive has a write reservation (reserve.go): one holder may write it,
// any number of clients may read it. A second writer is refused with the
// holder's name, or takes the reservation over with an explicit preempt,
// which raises the reservation's generation; blocknodes refuse the writes
// of tokens of an older generation, as they refuse a stale epoch.
//
// # Failure disaggregation
//
// Run checks the nodes every LeaseTTL/8. A node whose lease lapsed is
// marked offline and its drives are remapped, in one store plan (both
// holder records and the drive records), to the online nodes with the
// fewest drives that reach them: a partial remap that leaves every other
// mapping alone. The SAS switch detaches each drive from the dead node and
// attaches it to the new one, taking the modelled remap and drive-online
// time. A drive the fabric reports failed is taken out of service and a
// spare is given to its node; its data is the caller's to rebuild.
package drive

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sort"
	"sync"
	"time"

	"rackpool/internal/blocknode"
	"rackpool/internal/clock"
	"rackpool/internal/compose"
	"rackpool/internal/fabric"
	"rackpool/internal/inventory"
	"rackpool/internal/store"
	"rackpool/internal/topology"
)

// Store kinds, the token key (store.TokenKey: an object of kind
// store.SecretKind with ID keySetting, a setting of that name in stores
// written before) and the holder records.
const (
	kindNode     = "blocknode"
	kindDrive    = "drive"
	kindGrant    = "drive-grant"
	keySetting   = "drive.token-key"
	holdOwner    = "pooled-drives"
	holderPrefix = "blocknode-"
)

// Defaults.
const (
	DefaultLeaseTTL  = 400 * time.Millisecond
	DefaultTokenTTL  = 10 * time.Minute
	DefaultMaxDrives = 64
)

// Errors.
var (
	ErrNotFound    = errors.New("drive or blocknode not found")
	ErrBadInput    = errors.New("invalid request")
	ErrConflict    = errors.New("conflicts with the current state")
	ErrUnavailable = errors.New("drive is not being served")
	// ErrReserved: another holder has the drive's write reservation
	// (ReservedError says who; reserve.go).
	ErrReserved = errors.New("drive is reserved for writing by another holder")
)

// DriveState is a pooled drive's state.
type DriveState string

// Drive states.
const (
	// Unassigned: in the pool (a spare, or no blocknode has room).
	Unassigned DriveState = "Unassigned"
	// Mapping: recorded for its new owner, the switch remap in progress.
	Mapping DriveState = "Mapping"
	// Online: mapped to its owner, which serves it.
	Online DriveState = "Online"
	// Failed: the drive failed; it is out of service.
	Failed DriveState = "Failed"
)

// Node is a registered blocknode.
type Node struct {
	ID         string    `json:"id"` // the topology host it runs on
	Port       string    `json:"port"`
	Fabric     string    `json:"fabric"`
	Endpoint   string    `json:"endpoint"`
	Epoch      uint64    `json:"epoch"`
	MaxDrives  int       `json:"maxDrives"`
	Registered time.Time `json:"registered"`
	// Parked: the elastic policy took its drives away and returned its
	// host to the compute pool; the process keeps heartbeating.
	Parked bool `json:"parked,omitempty"`
	// In memory only: a restarted control plane waits for heartbeats.
	LastSeen time.Time `json:"-"`
	Online   bool      `json:"-"`
	Load     Load      `json:"-"`
	Rate     float64   `json:"-"` // operations per second, averaged (elastic)
	loadAt   time.Time
	since    time.Time // first load sample of this process
	beats    uint64
	inUse    map[string]bool // drives with a client connected, as last heard
	// HoldUntil: a process that replaced another on the same host while
	// the other's node lease could still run gets its drives only after
	// it, so the two never serve a drive at once.
	HoldUntil time.Time `json:"-"`
}

// Load is what a blocknode reports having served, cumulative since it
// started.
type Load struct {
	ReadBytes, WriteBytes, Ops uint64
}

// Drive is a pooled drive's record.
type Drive struct {
	ID    string     `json:"id"`
	Node  string     `json:"node,omitempty"` // owner ("" for none)
	Epoch uint64     `json:"epoch"`
	State DriveState `json:"state"`
	Since time.Time  `json:"since"`
	// Reason says why it is in its state (failed over from, failed, ...).
	Reason string `json:"reason,omitempty"`
}

// DriveInfo is a drive as the API shows it.
type DriveInfo struct {
	Drive
	Kind      inventory.Kind
	Model     string
	Capacity  int64
	Fabric    string
	Endpoint  string // owner's NBD endpoint
	InService bool   // Online and its owner online
	Writer    Writer // the write reservation (reserve.go)
}

// NodeInfo is a node as the API shows it.
type NodeInfo struct {
	Node
	Drives []string
}

// Grant is what a client needs to reach a drive: where, under which export
// name, with which token.
type Grant struct {
	Drive    string
	Node     string
	Endpoint string
	Export   string // NBD export name: drive@token
	Token    string
	Epoch    uint64
	Rights   blocknode.Rights
	Expiry   time.Time
	Size     int64
	// Holder and Generation: the write reservation a token with write
	// rights was issued under ("" and 0 for a read-only one).
	Holder     string
	Generation uint64
}

// ConnectRequest asks Connect for a grant.
type ConnectRequest struct {
	Drive  string
	Rights blocknode.Rights
	// TTL is the token's lifetime (0: Options.TokenTTL). A negative one is
	// refused, not read as the default.
	TTL time.Duration
	// Holder names the writer: required with write rights, which need
	// the drive's write reservation (reserve.go).
	Holder string
	// Preempt takes the write reservation over from another holder,
	// fencing its writes.
	Preempt bool
}

// Heartbeat is what a blocknode sends when it starts and then every
// heartbeat interval.
type Heartbeat struct {
	Host      string // topology host the node runs on
	Endpoint  string // NBD address clients dial
	Epoch     uint64 // random per process start
	MaxDrives int    // 0: DefaultMaxDrives
	Load      Load
	// InUse lists the drives a client has a connection open to on the
	// node now; such a drive is not moved to balance the load.
	InUse []string
}

// Assignment answers a heartbeat: the drives the node serves now, at which
// epoch, for how long.
type Assignment struct {
	Node     string
	Drives   []Assigned
	LeaseTTL time.Duration
	Key      blocknode.Key
	// Registered: this heartbeat recorded the node (new, restarted or
	// changed), as opposed to refreshing it.
	Registered bool
}

// Assigned is one drive of an Assignment. Generation is its write
// reservation's (reserve.go): the node refuses writes of older ones.
type Assigned struct {
	ID         string
	Epoch      uint64
	Size       int64
	Generation uint64
}

// Event is something operators should hear about (a failover, a failed
// drive), for the event bus.
type Event struct {
	Severity string // OK, Warning, Critical
	Drive    string // "" for a node event
	Node     string
	Message  string
}

// Holders is what the manager needs of the composition manager
// (compose.Manager implements it).
type Holders interface {
	SetHolders(ctx context.Context, hs []compose.Holding, objs []store.ObjectChange) error
	Held(id string) []string
	InComposition(id string) bool
	Drivers() map[string]fabric.Driver
}

// Options configure a Manager.
type Options struct {
	Store    store.Store
	Topology *topology.Topology
	Holders  Holders
	Clock    clock.Clock
	Logger   *slog.Logger
	// Epoch, when set, returns the control plane's leadership epoch, which
	// every mapping change on the SAS switch carries (fabric.WithEpoch).
	Epoch func() fabric.Epoch
	// LeaseTTL is how long a heartbeat answer lets a node serve its drives
	// (DefaultLeaseTTL); Grace is added before failing a node over
	// (LeaseTTL/4 by default).
	LeaseTTL, Grace time.Duration
	TokenTTL        time.Duration
	// Spares is how many pool drives stay unassigned as hot spares.
	Spares int
	// OnEvent receives failovers and failures (may be nil).
	OnEvent func(Event)
	// Elastic is the dynamic elastic disaggregation policy (off by
	// default).
	Elastic Elastic
}

// Manager tracks blocknodes and pooled drives. Safe for concurrent use.
type Manager struct {
	o     Options
	key   blocknode.Key
	start time.Time

	ops sync.Mutex // serialises changes of ownership (store + fabric)

	mu     sync.Mutex
	nodes  map[string]*Node
	drives map[string]*Drive
	ready  map[string]bool // drive ID -> its mapping is in place
	kick   chan struct{}
	// handovers are planned moves waiting for the old owner to let go.
	handovers map[string]handover

	lastDecision time.Time // m.ops
	decisions    []Decision

	// grants is, per drive, when the last token granted for it expires;
	// stored is what its kindGrant record says (grantMu held).
	grants  map[string]time.Time
	grantMu sync.Mutex
	stored  map[string]time.Time

	res writers // the write reservations (reserve.go)
}

// grantRecord is a drive's kindGrant record: the latest expiry of the
// tokens granted for it, kept so that a restarted control plane (or a new
// leader) knows which drives have live tokens.
type grantRecord struct {
	Drive string    `json:"drive"`
	Until time.Time `json:"until"`
}

// handover is a drive moving from a live blocknode: the new owner gets it
// once the old one has heard it is gone (two heartbeats answered since)
// or its lease has lapsed, so the two never serve it at once.
type handover struct {
	from, to string
	since    time.Time
	beats    uint64 // the old owner's heartbeats when the move was recorded
}

// New loads the nodes, drives and token key from the store.
func New(ctx context.Context, o Options) (*Manager, error) {
	if o.Store == nil || o.Topology == nil || o.Holders == nil {
		return nil, errors.New("drive: store, topology and holders are required")
	}
	if o.Clock == nil {
		o.Clock = clock.Real{}
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.LeaseTTL <= 0 {
		o.LeaseTTL = DefaultLeaseTTL
	}
	if o.Grace <= 0 {
		o.Grace = o.LeaseTTL / 4
	}
	if o.TokenTTL <= 0 {
		o.TokenTTL = DefaultTokenTTL
	}
	o.Elastic.defaults()
	m := &Manager{o: o, start: o.Clock.Now(), nodes: map[string]*Node{}, drives: map[string]*Drive{},
		ready: map[string]bool{}, kick: make(chan struct{}, 1), handovers: map[string]handover{}, grants: map[string]time.Time{},
		stored: map[string]time.Time{}}
	if err := m.Reload(ctx); err != nil {
		return nil, err
	}
	return m, nil
}

// Reload loads the token key, the blocknodes and the drives from the store
// again: what New does, and what a replica does when it becomes the leader
// of several (docs/ha.md), since the previous leader changed them
// meanwhile. Blocknodes are judged from now on: each has a lease to send
// its next heartbeat before it is failed over.
func (m *Manager) Reload(ctx context.Context) error {
	if err := m.loadKey(ctx); err != nil {
		return err
	}
	start := m.o.Clock.Now()
	nodes, drives, ready, handovers := map[string]*Node{}, map[string]*Drive{}, map[string]bool{}, map[string]handover{}
	err := store.Decode(ctx, m.o.Store, kindNode, func(_ store.Object, n *Node) error { nodes[n.ID] = n; return nil })
	if err != nil {
		return fmt.Errorf("drive: load blocknodes: %w", err)
	}
	err = store.Decode(ctx, m.o.Store, kindDrive, func(_ store.Object, d *Drive) error {
		if m.o.Topology.Device(d.ID) == nil {
			return fmt.Errorf("drive: stored drive %s is not in the topology", d.ID)
		}
		drives[d.ID] = d
		// The composition manager restored the holder's attachments at
		// start-up: a drive recorded for a node is mapped to it. One
		// caught mid-handover waits out a lease first: its old owner may
		// still be serving it.
		ready[d.ID] = d.Node != "" && d.State == Online
		if d.Node != "" && d.State == Mapping {
			handovers[d.ID] = handover{to: d.Node, since: start}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("drive: load drives: %w", err)
	}
	grants := map[string]time.Time{}
	err = store.Decode(ctx, m.o.Store, kindGrant, func(ob store.Object, g *grantRecord) error { grants[ob.ID] = g.Until; return nil })
	if err != nil {
		return fmt.Errorf("drive: load token grants: %w", err)
	}
	ws, err := loadWriters(ctx, m.o.Store)
	if err != nil {
		return err
	}
	m.res.replace(ws)
	m.grantMu.Lock()
	defer m.grantMu.Unlock()
	m.mu.Lock()
	defer m.mu.Unlock()
	m.start, m.nodes, m.drives, m.ready, m.handovers, m.stored = start, nodes, drives, ready, handovers, grants
	for id, until := range grants {
		if until.After(m.grants[id]) {
			m.grants[id] = until
		}
	}
	return nil
}

func (m *Manager) loadKey(ctx context.Context) error {
	k, err := store.TokenKey(ctx, m.o.Store, keySetting, blocknode.KeySize, func() ([]byte, error) { return blocknode.NewKey() })
	if err != nil {
		return fmt.Errorf("drive: %w", err)
	}
	m.key = k
	return nil
}

// NewEpoch returns a random process epoch for a blocknode.
func NewEpoch() uint64 {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return binary.BigEndian.Uint64(b[:]) | 1
}

func object(id string, v any) store.Object {
	data, _ := json.Marshal(v)
	return store.Object{ID: id, Data: data}
}

func (m *Manager) event(e Event) {
	lvl := slog.LevelInfo
	if e.Severity != "OK" {
		lvl = slog.LevelWarn
	}
	m.o.Logger.Log(context.Background(), lvl, e.Message, "drive", e.Drive, "node", e.Node)
	if m.o.OnEvent != nil {
		m.o.OnEvent(e)
	}
}

// sasPort returns host's first port into a sas-circuit fabric.
func (m *Manager) sasPort(host string) (*inventory.HostPort, error) {
	h := m.o.Topology.Host(host)
	if h == nil {
		return nil, fmt.Errorf("%w: the topology has no host %q", ErrBadInput, host)
	}
	for _, p := range h.Ports {
		if p.Fabric.Kind == inventory.SASCircuit {
			return p, nil
		}
	}
	return nil, fmt.Errorf("%w: host %s has no port into a SAS circuit switch", ErrBadInput, host)
}

// Heartbeat registers a blocknode or refreshes it, and answers with the
// drives it serves. A node that restarts (new Epoch) keeps its drives: the
// drive images outlive the process.
func (m *Manager) Heartbeat(ctx context.Context, hb Heartbeat) (Assignment, error) {
	if hb.Endpoint == "" || hb.Epoch == 0 {
		return Assignment{}, fmt.Errorf("%w: Endpoint and Epoch are required", ErrBadInput)
	}
	if hb.MaxDrives < 0 {
		return Assignment{}, fmt.Errorf("%w: MaxDrives must not be negative", ErrBadInput)
	}
	if hb.MaxDrives == 0 {
		hb.MaxDrives = DefaultMaxDrives
	}
	port, err := m.sasPort(hb.Host)
	if err != nil {
		return Assignment{}, err
	}
	now := m.o.Clock.Now()
	m.mu.Lock()
	n := m.nodes[hb.Host]
	fresh := n != nil && n.Online && n.Epoch == hb.Epoch && n.Endpoint == hb.Endpoint && n.MaxDrives == hb.MaxDrives
	if fresh {
		n.LastSeen = now
		n.beats++
		n.inUse = inUseSet(hb.InUse)
		m.noteLoad(n, hb.Load, now)
		a := m.assignment(n)
		m.mu.Unlock()
		return a, nil
	}
	m.mu.Unlock()
	// A new, restarted or changed node: record it and hold its host.
	m.ops.Lock()
	defer m.ops.Unlock()
	m.mu.Lock()
	n = m.nodes[hb.Host]
	next := Node{ID: hb.Host, Port: port.ID, Fabric: port.Fabric.ID, Endpoint: hb.Endpoint, Epoch: hb.Epoch,
		MaxDrives: hb.MaxDrives, Registered: now}
	if n != nil {
		next.Registered, next.HoldUntil, next.Parked = n.Registered, n.HoldUntil, n.Parked
		if n.Epoch != hb.Epoch && n.Online {
			// Another process (restarted, or a second one by mistake)
			// takes the host over: the old one may serve until its
			// lease lapses, so the new one waits that long.
			next.HoldUntil = n.LastSeen.Add(m.o.LeaseTTL + m.o.Grace)
			m.o.Logger.Warn("blocknode process replaced", "host", hb.Host, "old", n.Endpoint, "new", hb.Endpoint,
				"drives_after", next.HoldUntil.Sub(now).Round(time.Millisecond))
		}
	}
	holding := m.holding(hb.Host, nil, nil)
	m.mu.Unlock()
	if next.Parked {
		holding.Blocks = nil // its host is in the compute pool
	} else if m.o.Holders.InComposition(hb.Host) {
		return Assignment{}, fmt.Errorf("%w: host %s is composed; decompose it before running a blocknode there", ErrConflict, hb.Host)
	}
	objs := []store.ObjectChange{{Kind: kindNode, Object: object(next.ID, next)}}
	if err := m.o.Holders.SetHolders(ctx, []compose.Holding{holding}, objs); err != nil {
		return Assignment{}, fmt.Errorf("register blocknode %s: %w", hb.Host, err)
	}
	m.mu.Lock()
	next.LastSeen, next.Online, next.Load, next.loadAt, next.since = now, true, hb.Load, now, now
	next.inUse = inUseSet(hb.InUse)
	if n != nil {
		next.beats = n.beats + 1
	}
	m.nodes[next.ID] = &next
	a := m.assignment(&next)
	a.Registered = true
	m.mu.Unlock()
	if n == nil || !n.Online {
		m.event(Event{Severity: "OK", Node: next.ID, Message: fmt.Sprintf("blocknode %s online at %s", next.ID, next.Endpoint)})
	}
	m.Kick()
	return a, nil
}

func inUseSet(ids []string) map[string]bool {
	if len(ids) == 0 {
		return nil
	}
	out := make(map[string]bool, len(ids))
	for _, id := range ids {
		out[id] = true
	}
	return out
}

// assignment is n's answer. m.mu held.
func (m *Manager) assignment(n *Node) Assignment {
	a := Assignment{Node: n.ID, LeaseTTL: m.o.LeaseTTL, Key: m.key, Drives: []Assigned{}}
	if m.o.Clock.Now().Before(n.HoldUntil) {
		return a
	}
	for _, d := range m.drives {
		if d.Node == n.ID && d.State == Online && m.ready[d.ID] {
			a.Drives = append(a.Drives, Assigned{ID: d.ID, Epoch: d.Epoch, Size: m.o.Topology.Device(d.ID).CapacityBytes,
				Generation: m.res.get(d.ID).w.Generation})
		}
	}
	slices.SortFunc(a.Drives, func(x, y Assigned) int { return cmpString(x.ID, y.ID) })
	return a
}

func cmpString(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// holding is node's holder record with drives added and removed (as the
// drive records say, plus the change). m.mu held.
func (m *Manager) holding(node string, add, remove []string) compose.Holding {
	h := compose.Holding{ID: holderPrefix + node, Owner: holdOwner, Host: node, Blocks: []string{node}, Ports: map[string]string{}}
	port, _ := m.sasPort(node)
	for _, d := range m.drives {
		if d.Node == node && d.State != Failed && !slices.Contains(remove, d.ID) {
			h.Blocks = append(h.Blocks, d.ID)
		}
	}
	h.Blocks = append(h.Blocks, add...)
	for _, b := range h.Blocks[1:] {
		if port != nil {
			h.Ports[b] = port.ID
		}
	}
	return h
}

// Kick asks Run to look at the pool now.
func (m *Manager) Kick() {
	select {
	case m.kick <- struct{}{}:
	default:
	}
}

// Run detects dead blocknodes and hands pool drives out until ctx ends.
func (m *Manager) Run(ctx context.Context) {
	t := clock.NewTicker(m.o.Clock, max(m.o.LeaseTTL/8, time.Millisecond))
	defer t.Stop()
	for {
		m.Step(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C():
		case <-m.kick:
		}
	}
}

// Step runs one round of Run: fail over lapsed nodes, take failed drives
// out of service, hand pool drives to nodes with room.
func (m *Manager) Step(ctx context.Context) {
	m.ops.Lock()
	defer m.ops.Unlock()
	m.failOver(ctx)
	m.finishHandovers(ctx)
	m.replaceFailed(ctx)
	m.fill(ctx)
	m.balance(ctx)
	m.elastic(ctx)
}

// failOver marks nodes whose lease lapsed offline and moves their drives.
// m.ops held.
func (m *Manager) failOver(ctx context.Context) {
	now := m.o.Clock.Now()
	if now.Sub(m.start) < m.o.LeaseTTL+m.o.Grace {
		return // nodes that were serving before a restart may still be
	}
	m.mu.Lock()
	var dead []*Node
	for _, n := range m.nodes {
		if n.Online && now.Sub(n.LastSeen) > m.o.LeaseTTL+m.o.Grace {
			n.Online = false
			dead = append(dead, n)
		} else if !n.Online && n.LastSeen.IsZero() && now.Sub(m.start) > m.o.LeaseTTL+m.o.Grace {
			// Known from the store, never heard from since the restart.
			dead = append(dead, n)
		}
	}
	m.mu.Unlock()
	sort.Slice(dead, func(i, j int) bool { return dead[i].ID < dead[j].ID })
	for _, n := range dead {
		moved := m.evacuate(ctx, n.ID, "blocknode "+n.ID+" stopped heartbeating")
		if n.LastSeen.IsZero() && moved == 0 {
			continue
		}
		m.event(Event{Severity: "Warning", Node: n.ID, Message: fmt.Sprintf("blocknode %s offline (no heartbeat for %v); %d drives remapped",
			n.ID, m.o.LeaseTTL+m.o.Grace, moved)})
	}
}

// evacuate moves every drive of node to the online nodes with the fewest
// drives, returning how many moved. m.ops held.
func (m *Manager) evacuate(ctx context.Context, node, why string) int {
	m.mu.Lock()
	var ds []string
	for _, d := range m.drives {
		if d.Node == node && d.State != Failed {
			ds = append(ds, d.ID)
		}
	}
	m.mu.Unlock()
	slices.Sort(ds)
	moved := 0
	for _, id := range ds {
		to := m.pickNode(id, node)
		if err := m.move(ctx, id, to, "failed over from "+node+": "+why); err != nil {
			m.o.Logger.Error("fail over drive", "drive", id, "from", node, "to", to, "err", err)
			continue
		}
		moved++
	}
	m.releaseHost(ctx, node)
	return moved
}

// releaseHost gives an offline node's host back to the compute pool once
// it serves no drive: its holder record goes. The node record stays; if it
// comes back it registers again. m.ops held.
func (m *Manager) releaseHost(ctx context.Context, node string) {
	m.mu.Lock()
	n := m.nodes[node]
	h := m.holding(node, nil, nil)
	m.mu.Unlock()
	if n == nil || n.Online || len(h.Blocks) > 1 || m.o.Holders.Held(h.ID) == nil {
		return
	}
	h.Blocks = nil
	if err := m.o.Holders.SetHolders(ctx, []compose.Holding{h}, nil); err != nil {
		m.o.Logger.Warn("release a blocknode's host", "node", node, "err", err)
		return
	}
	m.event(Event{Severity: "OK", Node: node, Message: fmt.Sprintf("host %s returned to the compute pool: its blocknode is offline and serves no drive", node)})
}

// pickNode returns the online node with room and the fewest drives that
// reaches drive (not exclude), or "" to return the drive to the pool.
func (m *Manager) pickNode(drive, exclude string) string {
	m.mu.Lock()
	defer m.mu.Unlock()
	dev := m.o.Topology.Device(drive)
	count := map[string]int{}
	for _, d := range m.drives {
		if d.Node != "" && d.State != Failed {
			count[d.Node]++
		}
	}
	best := ""
	for _, n := range m.nodes {
		if !n.Online || n.Parked || n.ID == exclude || count[n.ID] >= n.MaxDrives {
			continue
		}
		port, err := m.sasPort(n.ID)
		if err != nil || port.Fabric != dev.Fabric || !m.o.Topology.Reaches(port, dev) {
			continue
		}
		if best == "" || count[n.ID] < count[best] || count[n.ID] == count[best] && m.nodes[n.ID].Load.Ops < m.nodes[best].Load.Ops ||
			count[n.ID] == count[best] && m.nodes[n.ID].Load.Ops == m.nodes[best].Load.Ops && n.ID < best {
			best = n.ID
		}
	}
	return best
}

// move gives drive to node to ("" returns it to the pool): one store plan
// for the drive record and both holders, then the switch remap. m.ops
// held.
func (m *Manager) move(ctx context.Context, id, to, reason string) error {
	now := m.o.Clock.Now().UTC()
	m.mu.Lock()
	cur := m.drives[id]
	if cur == nil {
		cur = &Drive{ID: id, State: Unassigned}
	}
	from := cur.Node
	next := *cur
	next.Node, next.Epoch, next.Since, next.Reason = to, cur.Epoch+1, now, reason
	next.State = Unassigned
	if to != "" {
		next.State = Mapping
	}
	var hs []compose.Holding
	if from != "" {
		hs = append(hs, m.holding(from, nil, []string{id}))
	}
	if to != "" {
		hs = append(hs, m.holding(to, []string{id}, nil))
	}
	m.ready[id] = false
	m.mu.Unlock()
	objs := []store.ObjectChange{{Kind: kindDrive, Object: object(id, next)}}
	if err := m.o.Holders.SetHolders(ctx, hs, objs); err != nil {
		m.mu.Lock()
		m.ready[id] = cur.State == Online
		m.mu.Unlock()
		return err
	}
	m.mu.Lock()
	m.drives[id] = &next
	old := m.nodes[from]
	live := old != nil && old.Online
	if live && to != "" {
		m.handovers[id] = handover{from: from, to: to, since: m.o.Clock.Now(), beats: old.beats}
	}
	m.mu.Unlock()
	m.unmap(ctx, id, from)
	if to == "" {
		m.event(Event{Severity: "OK", Drive: id, Node: from, Message: fmt.Sprintf("drive %s returned to the pool: %s", id, reason)})
		return nil
	}
	if live {
		return nil // finishHandovers maps it once from has let go
	}
	return m.attachTo(ctx, id, from, to, reason)
}

// finishHandovers maps each drive moving off a live node to its new owner
// once the old one has let go. m.ops held.
func (m *Manager) finishHandovers(ctx context.Context) {
	now := m.o.Clock.Now()
	m.mu.Lock()
	var due []string
	for id, h := range m.handovers {
		old := m.nodes[h.from]
		if now.Sub(h.since) > m.o.LeaseTTL+m.o.Grace || old != nil && (!old.Online || old.beats >= h.beats+2) {
			due = append(due, id)
		}
	}
	m.mu.Unlock()
	slices.Sort(due)
	for _, id := range due {
		m.mu.Lock()
		h := m.handovers[id]
		delete(m.handovers, id)
		d := m.drives[id]
		m.mu.Unlock()
		if d == nil || d.Node != h.to || d.State != Mapping {
			continue
		}
		if err := m.attachTo(ctx, id, h.from, h.to, d.Reason); err != nil {
			m.o.Logger.Error("hand a drive over", "drive", id, "from", h.from, "to", h.to, "err", err)
		}
	}
}

// attachTo maps drive id (recorded for node to) on the switch and puts it
// in service, or returns it to the pool if the switch refuses. m.ops held.
func (m *Manager) attachTo(ctx context.Context, id, from, to, reason string) error {
	m.mu.Lock()
	next := *m.drives[id]
	m.mu.Unlock()
	drv := m.o.Holders.Drivers()[m.o.Topology.Device(id).Fabric.ID]
	p, _ := m.sasPort(to)
	res, err := drv.Attach(m.fenced(ctx), fabric.Attachment{Block: id, Device: id, Host: to, HostPort: p.ID})
	if err != nil {
		// The switch refused: back to the pool, and say so.
		back := next
		back.Node, back.State, back.Epoch, back.Reason = "", Unassigned, next.Epoch+1, "remap to "+to+" failed: "+err.Error()
		m.mu.Lock()
		h := m.holding(to, nil, []string{id})
		m.mu.Unlock()
		if serr := m.o.Holders.SetHolders(ctx, []compose.Holding{h}, []store.ObjectChange{{Kind: kindDrive, Object: object(id, back)}}); serr == nil {
			m.mu.Lock()
			m.drives[id] = &back
			m.mu.Unlock()
		}
		m.event(Event{Severity: "Critical", Drive: id, Node: to, Message: fmt.Sprintf("drive %s could not be mapped to %s: %v", id, to, err)})
		return err
	}
	m.mu.Lock()
	next.State = Online
	m.drives[id] = &next
	m.ready[id] = true
	m.mu.Unlock()
	// Recorded without waiting for the disk: lost, the drive is found
	// Mapping at start-up and waits out one lease before it is served.
	if err := m.o.Store.Apply(ctx, store.Plan{Objects: []store.ObjectChange{{Kind: kindDrive, Object: object(id, next)}}, Intent: true}); err != nil {
		m.o.Logger.Warn("record drive online", "drive", id, "err", err)
	}
	// A failover is a warning; a planned move (balancing, the elastic
	// policy) off a node that is still online is routine.
	sev := "OK"
	m.mu.Lock()
	if old := m.nodes[from]; from != "" && (old == nil || !old.Online) {
		sev = "Warning"
	}
	m.mu.Unlock()
	m.event(Event{Severity: sev, Drive: id, Node: to, Message: fmt.Sprintf("drive %s mapped to %s at epoch %d in %v: %s", id, to, next.Epoch, res.Took, reason)})
	return nil
}

// unmap takes drive id off node's port on the switch (nothing when node
// is ""). Detach never fails for a failed element; any other failure is
// logged and left for the start-up reconciliation.
func (m *Manager) unmap(ctx context.Context, id, node string) {
	if node == "" {
		return
	}
	p, err := m.sasPort(node)
	if err != nil {
		return
	}
	drv := m.o.Holders.Drivers()[m.o.Topology.Device(id).Fabric.ID]
	if _, err := drv.Detach(m.fenced(ctx), fabric.Attachment{Block: id, Device: id, Host: node, HostPort: p.ID}); err != nil {
		m.o.Logger.Warn("unmap drive", "drive", id, "node", node, "err", err)
	}
}

// pool returns the pool drives, sorted: drives of SAS fabrics some node's
// port is on, held by no composition, not failed.
func (m *Manager) pool() []string {
	m.mu.Lock()
	fabrics := map[string]bool{}
	for _, n := range m.nodes {
		fabrics[n.Fabric] = true
	}
	m.mu.Unlock()
	if len(fabrics) == 0 {
		return nil // no blocknode: no pool (and no walk of a pod's devices each step)
	}
	var out []string
	for _, dev := range m.o.Topology.Devices {
		if dev.Fabric == nil || dev.Fabric.Kind != inventory.SASCircuit || !fabrics[dev.Fabric.ID] {
			continue
		}
		if m.o.Holders.InComposition(dev.ID) {
			continue
		}
		out = append(out, dev.ID)
	}
	slices.Sort(out)
	return out
}

// fill hands unassigned pool drives to online nodes with room, keeping
// Spares unassigned. m.ops held.
func (m *Manager) fill(ctx context.Context) {
	pool := m.pool()
	m.mu.Lock()
	var free []string
	for _, id := range pool {
		d := m.drives[id]
		if d == nil || d.Node == "" && d.State == Unassigned {
			free = append(free, id)
		}
	}
	m.mu.Unlock()
	for len(free) > m.o.Spares {
		id := free[0]
		to := m.pickNode(id, "")
		if to == "" {
			return
		}
		if err := m.move(ctx, id, to, "assigned from the pool"); err != nil {
			m.o.Logger.Warn("assign drive", "drive", id, "node", to, "err", err)
			return
		}
		free = free[1:]
	}
}

// replaceFailed takes drives the fabric reports Critical out of service
// and gives their node a spare. m.ops held.
func (m *Manager) replaceFailed(ctx context.Context) {
	// Only the fabrics of drives in service are read: a fabric's Discover
	// lists everything on it, which on a pod's optical planes (98,304
	// cards) costs more than the rest of an idle service together.
	fabrics := map[string]bool{}
	m.mu.Lock()
	for _, d := range m.drives {
		if d.Node == "" || d.State == Failed {
			continue
		}
		if dev := m.o.Topology.Device(d.ID); dev != nil {
			fabrics[dev.Fabric.ID] = true
		}
	}
	m.mu.Unlock()
	health := map[string]fabric.Health{}
	for id, drv := range m.o.Holders.Drivers() {
		if !fabrics[id] {
			continue
		}
		st, err := drv.Discover(ctx)
		if err != nil {
			continue
		}
		for k, v := range st.Health {
			health[k] = v
		}
	}
	m.mu.Lock()
	var failed []*Drive
	for _, d := range m.drives {
		if d.Node != "" && d.State != Failed && health[d.ID] == fabric.Critical {
			failed = append(failed, d)
		}
	}
	m.mu.Unlock()
	for _, d := range failed {
		node := d.Node
		next := *d
		next.State, next.Epoch, next.Since = Failed, d.Epoch+1, m.o.Clock.Now().UTC()
		next.Reason = "the drive failed on " + node + "; its data is the caller's to rebuild"
		m.mu.Lock()
		h := m.holding(node, nil, []string{d.ID})
		m.mu.Unlock()
		next.Node = ""
		if err := m.o.Holders.SetHolders(ctx, []compose.Holding{h}, []store.ObjectChange{{Kind: kindDrive, Object: object(d.ID, next)}}); err != nil {
			m.o.Logger.Error("take failed drive out of service", "drive", d.ID, "err", err)
			continue
		}
		m.mu.Lock()
		m.drives[d.ID] = &next
		m.ready[d.ID] = false
		m.mu.Unlock()
		m.unmap(ctx, d.ID, node)
		spare := m.spareFor(d.ID)
		msg := fmt.Sprintf("drive %s failed on %s and is out of service; its data is the caller's to rebuild", d.ID, node)
		if spare != "" {
			if err := m.move(ctx, spare, node, "hot spare replacing failed drive "+d.ID); err == nil {
				msg += "; hot spare " + spare + " mapped to " + node
			}
		} else {
			msg += "; no hot spare left"
		}
		m.event(Event{Severity: "Critical", Drive: d.ID, Node: node, Message: msg})
	}
}

// spareFor returns an unassigned pool drive on failed's fabric, preferring
// the same kind.
func (m *Manager) spareFor(failed string) string {
	fd := m.o.Topology.Device(failed)
	best := ""
	for _, id := range m.pool() {
		m.mu.Lock()
		d := m.drives[id]
		m.mu.Unlock()
		if d != nil && (d.Node != "" || d.State == Failed) {
			continue
		}
		dev := m.o.Topology.Device(id)
		if dev.Fabric != fd.Fabric {
			continue
		}
		if dev.Kind == fd.Kind {
			return id
		}
		if best == "" {
			best = id
		}
	}
	return best
}

// Connect returns a grant for a drive: its owner's endpoint, the export
// name and a token with the rights asked for until now+TTL. Write rights
// need the drive's write reservation (reserve.go): the holder's, a new
// one, or one preempted; anyone else is refused with a ReservedError. The
// reservation and the token's expiry are recorded before the grant is
// returned: until the expiry the drive is in use and is not moved to
// balance the load.
func (m *Manager) Connect(ctx context.Context, req ConnectRequest) (Grant, error) {
	id, ttl, rights := req.Drive, req.TTL, req.Rights
	switch {
	case ttl < 0:
		return Grant{}, fmt.Errorf("%w: token lifetime %v: it must be positive", ErrBadInput, ttl)
	case ttl == 0:
		ttl = m.o.TokenTTL
	}
	if ttl > 24*time.Hour {
		return Grant{}, fmt.Errorf("%w: a token lasts at most 24h", ErrBadInput)
	}
	dev := m.o.Topology.Device(id)
	if !pooled(dev) {
		return Grant{}, fmt.Errorf("%w: no pooled drive %q", ErrNotFound, id)
	}
	var w Writer
	if rights&blocknode.RightWrite != 0 {
		var err error
		if w, err = m.reserve(ctx, id, req.Holder, req.Preempt); err != nil {
			return Grant{}, err
		}
	} else if req.Preempt {
		return Grant{}, fmt.Errorf("%w: Preempt takes a write reservation over; a read-only connection needs none", ErrBadInput)
	}
	g, err := m.grant(id, dev.CapacityBytes, rights, ttl, w)
	if err != nil {
		return Grant{}, err
	}
	if err := m.recordGrant(ctx, id, g.Expiry); err != nil {
		return Grant{}, fmt.Errorf("%w: drive %s: record the token's expiry: %v", ErrUnavailable, id, err)
	}
	return g, nil
}

// grant signs a token for drive id if it is in service, and notes its
// expiry in m.grants in the same critical section, so that balance, which
// checks m.grants and takes the drive out of service under m.mu too, never
// moves a drive whose token it has not seen. A token with write rights is
// signed only while w is still the drive's reservation.
func (m *Manager) grant(id string, size int64, rights blocknode.Rights, ttl time.Duration, w Writer) (Grant, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	d := m.drives[id]
	if d == nil || d.Node == "" || d.State != Online || !m.ready[id] {
		state := Unassigned
		if d != nil {
			state = d.State
		}
		return Grant{}, fmt.Errorf("%w: drive %s is %s", ErrUnavailable, id, state)
	}
	n := m.nodes[d.Node]
	if n == nil || !n.Online {
		return Grant{}, fmt.Errorf("%w: drive %s's blocknode %s is offline; it is being failed over", ErrUnavailable, id, d.Node)
	}
	if rights&blocknode.RightWrite != 0 {
		if cur := m.res.get(id).w; cur != w {
			return Grant{}, &ReservedError{Drive: id, Writer: cur} // preempted or released meanwhile
		}
	}
	exp := m.o.Clock.Now().Add(ttl)
	tok, err := m.key.Sign(blocknode.Claims{Drive: id, Epoch: d.Epoch, Rights: rights, Expiry: exp, Generation: w.Generation})
	if err != nil {
		return Grant{}, fmt.Errorf("%w: %w", ErrBadInput, err)
	}
	if exp.After(m.grants[id]) {
		m.grants[id] = exp
	}
	return Grant{Drive: id, Node: n.ID, Endpoint: n.Endpoint, Export: blocknode.ExportName(id, tok), Token: tok,
		Epoch: d.Epoch, Rights: rights, Expiry: exp, Size: size, Holder: w.Holder, Generation: w.Generation}, nil
}

// recordGrant stores until as drive id's latest token expiry unless a
// later one is stored already.
func (m *Manager) recordGrant(ctx context.Context, id string, until time.Time) error {
	m.grantMu.Lock()
	defer m.grantMu.Unlock()
	if !until.After(m.stored[id]) {
		return nil
	}
	if err := m.o.Store.PutObject(ctx, kindGrant, object(id, grantRecord{Drive: id, Until: until.UTC()})); err != nil {
		return err
	}
	m.stored[id] = until
	return nil
}

// Drives lists every pooled drive (pool drives and recorded ones).
func (m *Manager) Drives() []DriveInfo {
	ids := m.pool()
	m.mu.Lock()
	defer m.mu.Unlock()
	for id := range m.drives {
		if !slices.Contains(ids, id) {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	out := make([]DriveInfo, 0, len(ids))
	for _, id := range ids {
		out = append(out, m.info(id))
	}
	return out
}

// Drive returns one drive.
func (m *Manager) Drive(id string) (DriveInfo, error) {
	dev := m.o.Topology.Device(id)
	if dev == nil || dev.Fabric == nil || dev.Fabric.Kind != inventory.SASCircuit {
		return DriveInfo{}, fmt.Errorf("%w: no pooled drive %q", ErrNotFound, id)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.info(id), nil
}

// info describes drive id. m.mu held.
func (m *Manager) info(id string) DriveInfo {
	dev := m.o.Topology.Device(id)
	d := Drive{ID: id, State: Unassigned}
	if r := m.drives[id]; r != nil {
		d = *r
	}
	out := DriveInfo{Drive: d, Kind: dev.Kind, Model: dev.Model, Capacity: dev.CapacityBytes, Fabric: dev.Fabric.ID,
		Writer: m.res.get(id).w}
	if n := m.nodes[d.Node]; n != nil {
		out.Endpoint = n.Endpoint
		out.InService = n.Online && d.State == Online && m.ready[id]
	}
	return out
}

// Nodes lists the blocknodes.
func (m *Manager) Nodes() []NodeInfo {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]NodeInfo, 0, len(m.nodes))
	for _, n := range m.nodes {
		out = append(out, m.nodeInfo(n))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// Node returns one blocknode.
func (m *Manager) Node(id string) (NodeInfo, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := m.nodes[id]
	if n == nil {
		return NodeInfo{}, fmt.Errorf("%w: no blocknode %q", ErrNotFound, id)
	}
	return m.nodeInfo(n), nil
}

func (m *Manager) nodeInfo(n *Node) NodeInfo {
	out := NodeInfo{Node: *n, Drives: []string{}}
	for _, d := range m.drives {
		if d.Node == n.ID && d.State != Failed {
			out.Drives = append(out.Drives, d.ID)
		}
	}
	slices.Sort(out.Drives)
	return out
}

// fenced returns ctx carrying the leadership epoch (Options.Epoch).
func (m *Manager) fenced(ctx context.Context) context.Context {
	if m.o.Epoch == nil {
		return ctx
	}
	return fabric.WithEpoch(ctx, m.o.Epoch())
}
