// Package lease is the control plane's side of pooled memory as a service
// (P0 §4, "GetMemory"): it keeps the registry of memory nodes (rackpool
// memnode processes), carves leased regions out of their capacity, issues
// the HMAC capability tokens the memnodes verify on their own (P1's LWFS
// idea), renews and releases leases, and reclaims expired ones, zeroing
// their memory before it is leased again.
//
// # Model
//
// A memory node is bound to a memory device of the topology (memnode1 in
// the example rack): its registered capacity is served from the device's
// first bytes, so the device's memory resource blocks that the capacity
// covers are the node's. A lease is a byte range [Offset, Offset+Size) of
// one node. Leases are placements: the node is chosen by the placement
// engine (compose.Manager.RankMemory: the nearest reachable node within the
// lease's latency bound, best fit, with the reasons a composition gets when
// nothing fits), and the blocks the leases of a node lie in are held by one
// holder record per node ("leases-<node>", compose.Manager.SetHeld) that
// the store checks like any composition, committed in the same plan as the
// lease record itself. So no composition attaches memory a lease uses, a
// block a composition holds is never leased, and two replicas granting on
// the same node conflict on the holder's version instead of overlapping.
//
// # Lifecycle
//
//	Grant ──▶ Active ──Renew──▶ Active
//	             │ Release or expiry
//	             ▼
//	         Reclaiming ──ZERO on the memnode (admin token)──▶ deleted, range free
//
// A Reclaiming lease keeps its range until the memnode has zeroed it and
// revoked the lease's tokens; a node that cannot be reached is retried by
// Reclaim. A node that restarts (new epoch) has lost its memory, which is
// therefore zero: its Reclaiming leases are dropped at re-registration.
//
// Nodes and leases are store objects (a lease written with its node's
// holder record): a lease survives a control-plane restart with its range
// and expiry, and the token key is a stored setting, so tokens issued
// before the restart stay valid.
package lease

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"rackpool/internal/clock"
	"rackpool/internal/compose"
	"rackpool/internal/inventory"
	"rackpool/internal/memory"
	"rackpool/internal/schedule"
	"rackpool/internal/store"
	"rackpool/internal/topology"
)

// Store object kinds and the token key (store.TokenKey: an object of kind
// store.SecretKind with ID keySetting, a setting of that name in stores
// written before).
const (
	kindNode   = "memnode"
	kindLease  = "memlease"
	keySetting = "memory.token-key"
	holdOwner  = "memory-leases"
	// holderPrefix + node ID is the holder record of a node's leased blocks.
	holderPrefix = "leases-"
)

// Kinds are the store object kinds of the lease records: what a leader
// reloads when another replica changed one (a deposed leader that had not
// yet noticed).
var Kinds = []string{kindNode, kindLease}

// Defaults.
const (
	DefaultTTL         = 10 * time.Minute
	DefaultMaxTTL      = 24 * time.Hour
	DefaultNodeTimeout = 30 * time.Second
	// Alignment of every lease's offset and size.
	Alignment = 4096
)

// Errors.
var (
	ErrNotFound  = errors.New("lease or memory node not found")
	ErrBadInput  = errors.New("invalid request")
	ErrNoMemory  = errors.New("no memory node can hold the lease")
	ErrExpired   = errors.New("lease has expired")
	ErrConflict  = errors.New("memory node conflicts with a registered one")
	ErrReclaimed = errors.New("lease is being reclaimed")
)

// State of a lease.
type State string

// Lease states.
const (
	Active     State = "Active"
	Reclaiming State = "Reclaiming"
)

// Node is a registered memory node.
type Node struct {
	ID         string    `json:"id"` // the topology memory device it serves
	Endpoint   string    `json:"endpoint"`
	Capacity   uint64    `json:"capacity"`
	Epoch      uint64    `json:"epoch"`
	Registered time.Time `json:"registered"`
	// MapSocket is the node's local unix socket for mapped leases, and
	// MapHosts the topology hosts that reach it: the hosts that share the
	// node's machine, as CXL-attached hosts share a memory device. Empty:
	// the node serves TCP only.
	MapSocket string   `json:"map_socket,omitempty"`
	MapHosts  []string `json:"map_hosts,omitempty"`
	// LastSeen is the last registration or heartbeat (not stored: a
	// restarted control plane waits for the next heartbeat).
	LastSeen time.Time `json:"-"`
}

// Lease is a granted region of a node's memory.
type Lease struct {
	ID      string        `json:"id"`
	Node    string        `json:"node"`
	Offset  uint64        `json:"offset"`
	Size    uint64        `json:"size"`
	Rights  memory.Rights `json:"rights"`
	Tenant  string        `json:"tenant,omitempty"`
	Owner   string        `json:"owner,omitempty"` // the account that asked
	Host    string        `json:"host,omitempty"`  // the host it was placed for
	Created time.Time     `json:"created"`
	Expiry  time.Time     `json:"expiry"`
	State   State         `json:"state"`
	// Mapped: the lease was placed to be mapped from Host (Request.Mapped).
	Mapped bool `json:"mapped,omitempty"`
}

// Grant is what a client needs to use a lease: where, and the token.
type Grant struct {
	Lease
	Endpoint string
	Token    string
	// MapSocket is the node's local socket when the lease's host can map
	// it (the host is one of the node's MapHosts); empty otherwise, and the
	// lease is used over TCP at Endpoint.
	MapSocket string
	// RTTNS and Hops are the topology's round trip and hop count from the
	// lease's host to the node (0 when no host was named).
	RTTNS float64
	Hops  int
}

// Request asks for memory.
type Request struct {
	Size   uint64
	Host   string        // topology host the memory is for: nearest node first
	TTL    time.Duration // 0 means DefaultTTL
	Rights memory.Rights // 0 means read and write
	// MaxLatencyNS bounds the round trip from Host (0: no bound).
	MaxLatencyNS float64
	Node         string // pin to one node ("" lets the manager pick)
	// Mapped asks for memory Host can map (load/store): only nodes that
	// list Host among their MapHosts qualify. Needs Host.
	Mapped bool
	Tenant string
	Owner  string
}

// Registration is what a memnode sends when it starts and as heartbeat.
type Registration struct {
	Device   string // topology memory device; "" binds the first free one
	Endpoint string
	Capacity uint64
	Epoch    uint64
	// MapSocket and MapHosts: see Node.
	MapSocket string
	MapHosts  []string
	// Usage is the node's report of the bytes each of its leases has in
	// use (memory.Server.LeaseUsage), by lease ID.
	Usage map[string]uint64
}

// Registered is the answer to a registration.
type Registered struct {
	Node Node
	Key  memory.Key
	// Revoked lists leases of the node whose tokens the node must refuse
	// until the given time (leases released or reclaimed before it
	// restarted).
	Revoked map[string]time.Time
	// Usage is the part of Registration.Usage the control plane records:
	// the active leases of this node, each with no more bytes in use than
	// its size. Reports of other leases (released meanwhile, another
	// node's, or larger than the lease) are left out.
	Usage map[string]uint64
}

// Placement is the control plane's placement engine and single applier
// (compose.Manager implements it): it ranks memory nodes and holds the
// blocks leases use, in the store.
type Placement interface {
	// RankMemory orders memory devices for host within a round trip bound,
	// with free[i] the bytes free on devices[i] for the request.
	RankMemory(host *inventory.Host, maxRTTNS float64, devices []*inventory.Device, free []uint64) ([]schedule.MemoryChoice, []schedule.Rejection)
	// SetHeld makes holder id hold exactly blocks, committing objs in the
	// same store plan.
	SetHeld(ctx context.Context, id, owner string, blocks []string, objs []store.ObjectChange) error
	// Held returns the blocks holder id holds.
	Held(id string) []string
	// InComposition reports whether a composition or reservation holds id.
	InComposition(id string) bool
}

// Zeroer connects to a node with an admin token and zeroes the token's
// region (memory.Client implements Zero and Close).
type Zeroer interface {
	Zero(ctx context.Context, leaseExpiry time.Time) error
	Close() error
}

// Options configure a Manager.
type Options struct {
	Store     store.Store
	Topology  *topology.Topology
	Placement Placement
	Clock     clock.Clock
	Logger    *slog.Logger
	// DefaultTTL, MaxTTL: lease durations; zero means the package defaults.
	DefaultTTL, MaxTTL time.Duration
	// NodeTimeout: a node not heard from for this long gets no new leases.
	NodeTimeout time.Duration
	// Dial connects to a memnode for reclaiming; nil means memory.Dial.
	Dial func(ctx context.Context, addr, token string) (Zeroer, error)
}

// Manager grants and tracks memory leases. It is safe for concurrent use.
type Manager struct {
	o   Options
	key memory.Key

	mu      sync.Mutex
	nodes   map[string]*Node
	leases  map[string]*Lease
	revoked map[string]map[string]time.Time // node → lease → until
}

// New loads the nodes, leases and token key from the store (creating the
// key on first start) and holds the blocks the leases use.
func New(ctx context.Context, o Options) (*Manager, error) {
	if o.Store == nil || o.Topology == nil || o.Placement == nil {
		return nil, errors.New("lease: store, topology and placement are required")
	}
	if o.Clock == nil {
		o.Clock = clock.Real{}
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.DefaultTTL <= 0 {
		o.DefaultTTL = DefaultTTL
	}
	if o.MaxTTL <= 0 {
		o.MaxTTL = DefaultMaxTTL
	}
	if o.NodeTimeout <= 0 {
		o.NodeTimeout = DefaultNodeTimeout
	}
	if o.Dial == nil {
		o.Dial = func(ctx context.Context, addr, token string) (Zeroer, error) { return memory.Dial(ctx, addr, token) }
	}
	m := &Manager{o: o, nodes: map[string]*Node{}, leases: map[string]*Lease{}, revoked: map[string]map[string]time.Time{}}
	if err := m.Reload(ctx); err != nil {
		return nil, err
	}
	return m, nil
}

// Reload loads the token key, the memory nodes and the leases from the
// store again, and puts right the blocks the leases hold: what New does,
// and what a replica does when it becomes the leader of several
// (docs/ha.md), since the previous leader changed them meanwhile.
func (m *Manager) Reload(ctx context.Context) error {
	if err := m.loadKey(ctx); err != nil {
		return err
	}
	nodes, leases := map[string]*Node{}, map[string]*Lease{}
	if err := store.Decode(ctx, m.o.Store, kindNode, func(_ store.Object, n *Node) error { nodes[n.ID] = n; return nil }); err != nil {
		return fmt.Errorf("lease: load memory nodes: %w", err)
	}
	if err := store.Decode(ctx, m.o.Store, kindLease, func(_ store.Object, l *Lease) error { leases[l.ID] = l; return nil }); err != nil {
		return fmt.Errorf("lease: load leases: %w", err)
	}
	m.mu.Lock()
	m.nodes, m.leases, m.revoked = nodes, leases, map[string]map[string]time.Time{}
	m.mu.Unlock()
	// The holder records must hold what the leases use. They do, unless the
	// store predates holder records or a crash fell between a lease record
	// written by itself (PutObject) and its holder: put them right.
	for _, dev := range m.o.Topology.Devices {
		if dev.Kind != inventory.Memory {
			continue
		}
		want := m.blocksUsed(dev.ID, nil)
		if !slices.Equal(want, slices.Sorted(slices.Values(m.o.Placement.Held(holderPrefix+dev.ID)))) {
			if err := m.o.Placement.SetHeld(ctx, holderPrefix+dev.ID, holdOwner, want, nil); err != nil {
				return fmt.Errorf("lease: hold the blocks the leases of %s use: %w", dev.ID, err)
			}
		}
	}
	return nil
}

func (m *Manager) loadKey(ctx context.Context) error {
	k, err := store.TokenKey(ctx, m.o.Store, keySetting, memory.KeySize, func() ([]byte, error) { return memory.NewKey() })
	if err != nil {
		return fmt.Errorf("lease: %w", err)
	}
	m.key = k
	return nil
}

// blocksOf returns the IDs of the memory blocks [off, off+size) of node
// id's device touches.
func (m *Manager) blocksOf(node string, off, size uint64) []string {
	dev := m.device(node)
	if dev == nil || size == 0 {
		return nil
	}
	var out []string
	for i, b := range dev.Blocks {
		start := uint64(i) * uint64(dev.BlockBytes)
		end := start + uint64(dev.BlockBytes)
		if start < off+size && off < end {
			out = append(out, b.ID)
		}
	}
	return out
}

func (m *Manager) device(id string) *inventory.Device {
	if d := m.o.Topology.Device(id); d != nil && d.Kind == inventory.Memory {
		return d
	}
	return nil
}

// blocksUsed returns, sorted, the blocks of node's device that its leases
// lie in, with extra counted as one of them (nil: none) and the lease
// with ID skip left out. m.mu held.
func (m *Manager) blocksUsed(node string, extra *Lease, skip ...string) []string {
	var out []string
	for _, l := range m.leases {
		if l.Node == node && !slices.Contains(skip, l.ID) {
			out = append(out, m.blocksOf(node, l.Offset, l.Size)...)
		}
	}
	if extra != nil {
		out = append(out, m.blocksOf(node, extra.Offset, extra.Size)...)
	}
	return slices.Compact(slices.Sorted(slices.Values(out)))
}

// leaseObject is l as a store object.
func leaseObject(l *Lease) store.Object {
	data, _ := json.Marshal(l)
	return store.Object{ID: l.ID, Data: data}
}

// Register records a memnode (or refreshes it: the same endpoint or
// device registering again is the same node, restarted or heartbeating).
func (m *Manager) Register(ctx context.Context, r Registration) (Registered, error) {
	if r.Endpoint == "" || r.Capacity == 0 {
		return Registered{}, fmt.Errorf("%w: Endpoint and CapacityBytes are required", ErrBadInput)
	}
	if err := m.checkMapping(r.MapSocket, r.MapHosts); err != nil {
		return Registered{}, err
	}
	now := m.o.Clock.Now()
	m.mu.Lock()
	defer m.mu.Unlock()
	var n *Node
	if r.Device != "" {
		n = m.nodes[r.Device]
		if n != nil && n.Endpoint != r.Endpoint && now.Sub(n.LastSeen) < m.o.NodeTimeout {
			return Registered{}, fmt.Errorf("%w: device %s is served by %s", ErrConflict, r.Device, n.Endpoint)
		}
	} else {
		for _, x := range m.nodes {
			if x.Endpoint == r.Endpoint {
				n = x
			}
		}
	}
	if n == nil {
		dev, err := m.pickDevice(r.Device, now)
		if err != nil {
			return Registered{}, err
		}
		n = &Node{ID: dev.ID, Registered: now}
	}
	dev := m.device(n.ID)
	if r.Capacity > uint64(dev.CapacityBytes) {
		return Registered{}, fmt.Errorf("%w: capacity %d exceeds device %s's %d bytes", ErrBadInput, r.Capacity, dev.ID, dev.CapacityBytes)
	}
	for _, l := range m.leases {
		if l.Node == n.ID && l.Offset+l.Size > r.Capacity {
			return Registered{}, fmt.Errorf("%w: lease %s reaches byte %d of node %s, beyond the capacity %d", ErrConflict, l.ID, l.Offset+l.Size, n.ID, r.Capacity)
		}
	}
	restarted := n.Epoch != 0 && n.Epoch != r.Epoch
	changed := n.Endpoint != r.Endpoint || n.Capacity != r.Capacity || n.Epoch != r.Epoch ||
		n.MapSocket != r.MapSocket || !slices.Equal(n.MapHosts, r.MapHosts)
	n.Endpoint, n.Capacity, n.Epoch, n.LastSeen = r.Endpoint, r.Capacity, r.Epoch, now
	n.MapSocket, n.MapHosts = r.MapSocket, slices.Clone(r.MapHosts)
	if changed {
		if err := m.putNode(ctx, n); err != nil {
			return Registered{}, err
		}
	}
	m.nodes[n.ID] = n
	if restarted {
		// Its memory is gone, hence zero: finish reclaiming there.
		for _, l := range m.leases {
			if l.Node == n.ID && l.State == Reclaiming {
				if err := m.forget(ctx, l); err != nil {
					return Registered{}, err
				}
			}
		}
		m.o.Logger.Info("memory node restarted", "node", n.ID, "endpoint", n.Endpoint)
	}
	out := Registered{Node: *n, Key: m.key, Revoked: map[string]time.Time{}}
	for id, until := range m.revoked[n.ID] {
		if until.After(now) {
			out.Revoked[id] = until
		}
	}
	for _, l := range m.leases {
		if l.Node == n.ID && l.State == Reclaiming {
			out.Revoked[l.ID] = l.Expiry
		}
	}
	if len(r.Usage) > 0 {
		out.Usage = map[string]uint64{}
		for id, used := range r.Usage {
			if l := m.leases[id]; l != nil && l.Node == n.ID && l.State == Active && used <= l.Size {
				out.Usage[id] = used
			} else {
				m.o.Logger.Debug("lease usage report ignored", "node", n.ID, "lease", id, "bytes_in_use", used)
			}
		}
	}
	return out, nil
}

// maxSocketPath is the longest unix socket path Linux takes.
const maxSocketPath = 107

// checkMapping validates a registration's mapping socket and hosts.
func (m *Manager) checkMapping(sock string, hosts []string) error {
	switch {
	case sock == "" && len(hosts) > 0:
		return fmt.Errorf("%w: MapHosts needs MapSocket", ErrBadInput)
	case sock == "":
		return nil
	case !strings.HasPrefix(sock, "/") || len(sock) > maxSocketPath || strings.ContainsRune(sock, 0):
		return fmt.Errorf("%w: MapSocket must be an absolute path of at most %d bytes", ErrBadInput, maxSocketPath)
	case len(hosts) == 0:
		return fmt.Errorf("%w: MapSocket needs MapHosts, the topology hosts that reach it", ErrBadInput)
	}
	seen := map[string]bool{}
	for _, h := range hosts {
		if m.o.Topology.Host(h) == nil {
			return fmt.Errorf("%w: MapHosts names %q, which is not a host of the topology", ErrBadInput, h)
		}
		if seen[h] {
			return fmt.Errorf("%w: MapHosts names %q twice", ErrBadInput, h)
		}
		seen[h] = true
	}
	return nil
}

// pickDevice returns the memory device named, or the first memory device
// no live node serves. m.mu held.
func (m *Manager) pickDevice(name string, now time.Time) (*inventory.Device, error) {
	var names []string
	for _, d := range m.o.Topology.Devices {
		if d.Kind != inventory.Memory {
			continue
		}
		names = append(names, d.ID)
		if name != "" && d.ID == name {
			return d, nil
		}
		if n := m.nodes[d.ID]; name == "" && (n == nil || now.Sub(n.LastSeen) >= m.o.NodeTimeout) {
			return d, nil
		}
	}
	if name != "" {
		return nil, fmt.Errorf("%w: the topology has no memory device %q (memory devices: %s)", ErrBadInput, name, strings.Join(names, ", "))
	}
	return nil, fmt.Errorf("%w: every memory device of the topology is served (%s)", ErrConflict, strings.Join(names, ", "))
}

func (m *Manager) putNode(ctx context.Context, n *Node) error {
	data, _ := json.Marshal(n)
	if err := m.o.Store.PutObject(ctx, kindNode, store.Object{ID: n.ID, Data: data}); err != nil {
		return fmt.Errorf("store memory node %s: %w", n.ID, err)
	}
	return nil
}

// putLease records a change of l that uses no other blocks (renewal,
// reclaiming).
func (m *Manager) putLease(ctx context.Context, l *Lease) error {
	if err := m.o.Store.PutObject(ctx, kindLease, leaseObject(l)); err != nil {
		return fmt.Errorf("store lease %s: %w", l.ID, err)
	}
	return nil
}

// forget deletes l for good and frees its range. m.mu held.
func (m *Manager) forget(ctx context.Context, l *Lease) error {
	del := []store.ObjectChange{{Kind: kindLease, Object: store.Object{ID: l.ID}, Delete: true}}
	if err := m.o.Placement.SetHeld(ctx, holderPrefix+l.Node, holdOwner, m.blocksUsed(l.Node, nil, l.ID), del); err != nil {
		return fmt.Errorf("delete lease %s: %w", l.ID, err)
	}
	delete(m.leases, l.ID)
	if l.Expiry.After(m.o.Clock.Now()) {
		// Its tokens are still unexpired: a restarted node must learn to
		// refuse them.
		if m.revoked[l.Node] == nil {
			m.revoked[l.Node] = map[string]time.Time{}
		}
		m.revoked[l.Node][l.ID] = l.Expiry
	}
	return nil
}

// Nodes returns the registered nodes, ordered by ID, with their free bytes.
func (m *Manager) Nodes() []NodeInfo {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.o.Clock.Now()
	out := make([]NodeInfo, 0, len(m.nodes))
	for _, n := range m.nodes {
		info := NodeInfo{Node: *n, Online: now.Sub(n.LastSeen) < m.o.NodeTimeout}
		for _, l := range m.leases {
			if l.Node == n.ID {
				info.Leases++
				info.Leased += l.Size
			}
		}
		info.Blocks = m.blocksOf(n.ID, 0, n.Capacity)
		out = append(out, info)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// NodeInfo is a node with its use.
type NodeInfo struct {
	Node
	Online bool
	Leases int
	Leased uint64   // bytes in leases, Reclaiming ones included
	Blocks []string // the memory resource blocks its capacity covers
}

// Node returns node id.
func (m *Manager) Node(id string) (NodeInfo, error) {
	for _, n := range m.Nodes() {
		if n.ID == id {
			return n, nil
		}
	}
	return NodeInfo{}, fmt.Errorf("memory node %s: %w", id, ErrNotFound)
}

// Grant places and records a lease and returns it with its token.
func (m *Manager) Grant(ctx context.Context, req Request) (Grant, error) {
	if req.Size == 0 {
		return Grant{}, fmt.Errorf("%w: Size must be positive", ErrBadInput)
	}
	if req.Size > math.MaxUint64-Alignment {
		return Grant{}, fmt.Errorf("%w: Size is too large", ErrBadInput)
	}
	ttl, err := m.ttl(req.TTL)
	if err != nil {
		return Grant{}, err
	}
	if req.Rights == 0 {
		req.Rights = memory.RightRead | memory.RightWrite
	}
	if req.Rights&memory.RightAdmin != 0 || req.Rights&^(memory.RightRead|memory.RightWrite) != 0 {
		return Grant{}, fmt.Errorf("%w: Rights may be r, w or rw", ErrBadInput)
	}
	var host *inventory.Host
	if req.Host != "" {
		if host = m.o.Topology.Host(req.Host); host == nil {
			return Grant{}, fmt.Errorf("%w: unknown host %q", ErrBadInput, req.Host)
		}
	}
	if req.Mapped && host == nil {
		return Grant{}, fmt.Errorf("%w: a mapped lease needs Host, the host that maps it", ErrBadInput)
	}
	size := align(req.Size)
	now := m.o.Clock.Now()
	m.mu.Lock()
	defer m.mu.Unlock()
	if req.Node != "" && m.nodes[req.Node] == nil {
		return Grant{}, fmt.Errorf("memory node %s: %w", req.Node, ErrNotFound)
	}
	// The nodes that could hold it, with where it would go on each; the
	// placement engine ranks them and says why the others cannot.
	var (
		devs []*inventory.Device
		free []uint64
		offs = map[string]uint64{}
		why  []string
	)
	for _, id := range slices.Sorted(maps.Keys(m.nodes)) {
		n := m.nodes[id]
		if req.Node != "" && id != req.Node {
			continue
		}
		if now.Sub(n.LastSeen) >= m.o.NodeTimeout {
			why = append(why, id+": offline")
			continue
		}
		if req.Mapped && !slices.Contains(n.MapHosts, req.Host) {
			why = append(why, fmt.Sprintf("%s: host %s cannot map it (mapped from: %s)", id, req.Host, orNone(n.MapHosts)))
			continue
		}
		off, nfree, ok := m.fit(n, size)
		if !ok {
			nfree = 0 // the engine rejects it as too small
		}
		offs[id] = off
		devs = append(devs, m.device(id))
		free = append(free, nfree)
	}
	cands, rejected := m.o.Placement.RankMemory(host, req.MaxLatencyNS, devs, free)
	if len(cands) == 0 {
		for _, r := range rejected {
			why = append(why, fmt.Sprintf("%s: %s (%s)", r.Block, r.Detail, r.Reason))
		}
		if len(m.nodes) == 0 {
			why = append(why, "no memory node is registered")
		}
		sort.Strings(why)
		return Grant{}, fmt.Errorf("%w: %s", ErrNoMemory, strings.Join(why, "; "))
	}
	c := cands[0]
	node := c.Device.ID
	l := &Lease{ID: newID(), Node: node, Offset: offs[node], Size: size, Rights: req.Rights, Tenant: req.Tenant,
		Owner: req.Owner, Host: req.Host, Created: now, Expiry: now.Add(ttl), State: Active, Mapped: req.Mapped}
	// One store plan: the node's holder with the lease's blocks, and the
	// lease record.
	put := []store.ObjectChange{{Kind: kindLease, Object: leaseObject(l)}}
	if err := m.o.Placement.SetHeld(ctx, holderPrefix+node, holdOwner, m.blocksUsed(node, l), put); err != nil {
		if errors.Is(err, compose.ErrBlockBusy) {
			return Grant{}, fmt.Errorf("%w: %v", ErrNoMemory, err)
		}
		return Grant{}, fmt.Errorf("record lease: %w", err)
	}
	m.leases[l.ID] = l
	return m.grant(l, c.Path)
}

func (m *Manager) grant(l *Lease, p topology.Path) (Grant, error) {
	n := m.nodes[l.Node]
	tok, err := m.key.Sign(memory.Claims{Lease: l.ID, Node: l.Node, Offset: l.Offset, Length: l.Size, Rights: l.Rights, Expiry: l.Expiry})
	if err != nil {
		return Grant{}, err
	}
	g := Grant{Lease: *l, Endpoint: n.Endpoint, Token: tok, RTTNS: p.RTTNS, Hops: p.Hops}
	if l.Host != "" && slices.Contains(n.MapHosts, l.Host) {
		g.MapSocket = n.MapSocket
	}
	return g, nil
}

func orNone(hosts []string) string {
	if len(hosts) == 0 {
		return "none"
	}
	return strings.Join(hosts, ", ")
}

func (m *Manager) ttl(d time.Duration) (time.Duration, error) {
	switch {
	case d == 0:
		return m.o.DefaultTTL, nil
	case d < time.Second:
		return 0, fmt.Errorf("%w: a lease lasts at least 1s", ErrBadInput)
	case d > m.o.MaxTTL:
		return 0, fmt.Errorf("%w: a lease lasts at most %s", ErrBadInput, m.o.MaxTTL)
	}
	return d, nil
}

func newID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return "lease-" + hex.EncodeToString(b[:])
}

func align(n uint64) uint64 { return (n + Alignment - 1) / Alignment * Alignment }

// fit finds the lowest offset of n where size bytes are free and every
// block touched is unused by compositions. It returns the node's free
// bytes too. m.mu held.
func (m *Manager) fit(n *Node, size uint64) (uint64, uint64, bool) {
	type span struct{ off, end uint64 }
	var used []span
	var inUse uint64
	for _, l := range m.leases {
		if l.Node == n.ID {
			used = append(used, span{l.Offset, l.Offset + l.Size})
			inUse += l.Size
		}
	}
	free := n.Capacity - min(inUse, n.Capacity)
	if dev := m.device(n.ID); dev != nil {
		for i, b := range dev.Blocks {
			if m.o.Placement.InComposition(b.ID) {
				used = append(used, span{uint64(i) * uint64(dev.BlockBytes), uint64(i+1) * uint64(dev.BlockBytes)})
			}
		}
	}
	sort.Slice(used, func(i, j int) bool { return used[i].off < used[j].off })
	at := uint64(0)
	for _, u := range used {
		if u.off >= at+size && at+size <= n.Capacity {
			return at, free, true
		}
		at = max(at, u.end)
	}
	if at+size <= n.Capacity {
		return at, free, true
	}
	return 0, free, false
}

// Get returns lease id if tenant may see it ("" sees every lease).
func (m *Manager) Get(id, tenant string) (Lease, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	l := m.leases[id]
	if l == nil || (tenant != "" && l.Tenant != tenant) {
		return Lease{}, fmt.Errorf("lease %s: %w", id, ErrNotFound)
	}
	return *l, nil
}

// List returns the leases tenant may see ("" sees all), ordered by ID.
func (m *Manager) List(tenant string) []Lease {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []Lease
	for _, l := range m.leases {
		if tenant == "" || l.Tenant == tenant {
			out = append(out, *l)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// Renew extends lease id to ttl from now (0: the default) and returns a new
// token. An expired or reclaiming lease cannot be renewed.
func (m *Manager) Renew(ctx context.Context, id, tenant string, ttl time.Duration) (Grant, error) {
	ttl, err := m.ttl(ttl)
	if err != nil {
		return Grant{}, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	l := m.leases[id]
	if l == nil || (tenant != "" && l.Tenant != tenant) {
		return Grant{}, fmt.Errorf("lease %s: %w", id, ErrNotFound)
	}
	now := m.o.Clock.Now()
	switch {
	case l.State == Reclaiming:
		return Grant{}, fmt.Errorf("lease %s: %w", id, ErrReclaimed)
	case !now.Before(l.Expiry):
		return Grant{}, fmt.Errorf("lease %s: %w", id, ErrExpired)
	}
	next := *l
	next.Expiry = now.Add(ttl)
	if err := m.putLease(ctx, &next); err != nil {
		return Grant{}, err
	}
	*l = next
	var p topology.Path
	if h := m.o.Topology.Host(l.Host); h != nil {
		if dev := m.device(l.Node); dev != nil {
			p, _ = m.o.Topology.Path(h, dev.Blocks[0])
		}
	}
	return m.grant(l, p)
}

// Release ends lease id now: it is reclaimed (zeroed) before its range is
// leased again.
func (m *Manager) Release(ctx context.Context, id, tenant string) error {
	m.mu.Lock()
	l := m.leases[id]
	if l == nil || (tenant != "" && l.Tenant != tenant) {
		m.mu.Unlock()
		return fmt.Errorf("lease %s: %w", id, ErrNotFound)
	}
	if l.State != Reclaiming {
		next := *l
		next.State = Reclaiming
		if err := m.putLease(ctx, &next); err != nil {
			m.mu.Unlock()
			return err
		}
		*l = next
	}
	m.mu.Unlock()
	m.Reclaim(ctx)
	return nil
}

// Reclaim marks expired leases Reclaiming and zeroes every Reclaiming
// lease on its node; a lease whose node cannot be reached stays
// Reclaiming for the next call. It returns how many leases it finished.
func (m *Manager) Reclaim(ctx context.Context) int {
	now := m.o.Clock.Now()
	m.mu.Lock()
	var todo []Lease
	for _, l := range m.leases {
		if l.State == Active && !now.Before(l.Expiry) {
			next := *l
			next.State = Reclaiming
			if err := m.putLease(ctx, &next); err != nil {
				m.o.Logger.Warn("reclaim: cannot record an expired lease", "lease", l.ID, "err", err)
				continue
			}
			*l = next
			m.o.Logger.Info("lease expired", "lease", l.ID, "node", l.Node, "size", l.Size)
		}
		if l.State == Reclaiming {
			todo = append(todo, *l)
		}
	}
	m.mu.Unlock()
	done := 0
	for _, l := range todo {
		if err := m.zero(ctx, l); err != nil {
			m.o.Logger.Warn("reclaim: memory not zeroed yet", "lease", l.ID, "node", l.Node, "err", err)
			continue
		}
		m.mu.Lock()
		if cur := m.leases[l.ID]; cur != nil && cur.State == Reclaiming {
			if err := m.forget(ctx, cur); err != nil {
				m.o.Logger.Warn("reclaim: cannot delete a zeroed lease", "lease", l.ID, "err", err)
			} else {
				done++
			}
		}
		m.mu.Unlock()
	}
	return done
}

// zero connects to l's node with an admin token for l's region and zeroes
// it, revoking l's tokens until l's expiry.
func (m *Manager) zero(ctx context.Context, l Lease) error {
	m.mu.Lock()
	n := m.nodes[l.Node]
	m.mu.Unlock()
	if n == nil {
		return fmt.Errorf("memory node %s is not registered", l.Node)
	}
	tok, err := m.key.Sign(memory.Claims{Lease: l.ID, Node: l.Node, Offset: l.Offset, Length: l.Size,
		Rights: memory.RightAdmin, Expiry: m.o.Clock.Now().Add(time.Minute)})
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	c, err := m.o.Dial(ctx, n.Endpoint, tok)
	if err != nil {
		return err
	}
	defer c.Close()
	return c.Zero(ctx, l.Expiry)
}

// Run reclaims expired leases every interval of the manager's clock until
// ctx ends.
func (m *Manager) Run(ctx context.Context, every time.Duration) {
	t := clock.NewTicker(m.o.Clock, every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C():
			m.Reclaim(ctx)
			m.pruneRevoked()
		}
	}
}

func (m *Manager) pruneRevoked() {
	now := m.o.Clock.Now()
	m.mu.Lock()
	defer m.mu.Unlock()
	for node, r := range m.revoked {
		for id, until := range r {
			if !until.After(now) {
				delete(r, id)
			}
		}
		if len(r) == 0 {
			delete(m.revoked, node)
		}
	}
}
