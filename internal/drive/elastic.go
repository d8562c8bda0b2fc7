package drive

import (
	"context"
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"
	"time"

	"rackpool/internal/compose"
	"rackpool/internal/store"
)

// Dynamic elastic disaggregation (P1 §4): when the blocknodes' measured
// load would fit in one node fewer, below Low of their capacity, the
// least-loaded node hands its drives to the others and is parked — its
// host returns to the compute pool and can be composed for other work,
// while the process keeps heartbeating; when the load rises above High of
// the active nodes' capacity, a parked node comes back and takes drives
// from the busiest ones. Decisions are at least Hold apart (hysteresis on
// top of the Low/High gap), each one is audited and published with its
// numbers, and DryRun only says what it would do.
//
// Load is each node's operations per second, averaged over Window (an
// exponentially weighted mean of the counters its heartbeats carry).
// Capacity is NodeOps per node, an operator's figure for what one
// blocknode serves (measure it with bench/drives).

// ElasticMode says whether the elastic policy acts.
type ElasticMode string

// Elastic modes.
const (
	ElasticOff    ElasticMode = "off"
	ElasticDryRun ElasticMode = "dry-run"
	ElasticOn     ElasticMode = "on"
)

// ParseElasticMode parses "off", "dry-run" or "on".
func ParseElasticMode(s string) (ElasticMode, error) {
	switch m := ElasticMode(s); m {
	case ElasticOff, ElasticDryRun, ElasticOn:
		return m, nil
	}
	return "", fmt.Errorf("elastic mode %q: want off, dry-run or on", s)
}

// Elastic configures the policy.
type Elastic struct {
	Mode      ElasticMode
	NodeOps   float64       // one blocknode's capacity, operations per second (default 20000)
	Low, High float64       // fractions of capacity (defaults 0.3 and 0.7)
	Hold      time.Duration // least time between two decisions (default 5m)
	Window    time.Duration // load averaging time constant (default 1m)
}

func (e *Elastic) defaults() {
	if e.Mode == "" {
		e.Mode = ElasticOff
	}
	if e.NodeOps <= 0 {
		e.NodeOps = 20000
	}
	if e.Low <= 0 {
		e.Low = 0.3
	}
	if e.High <= 0 {
		e.High = 0.7
	}
	if e.Hold <= 0 {
		e.Hold = 5 * time.Minute
	}
	if e.Window <= 0 {
		e.Window = time.Minute
	}
}

// Decision is one elastic decision, as audited.
type Decision struct {
	Time    time.Time
	Action  string // "park" or "unpark"
	Node    string
	Moves   map[string]string // drive -> new owner
	LoadOps float64
	Active  int
	Applied bool // false in dry-run
	Why     string
}

// noteLoad folds a heartbeat's counters into n's load. m.mu held.
func (m *Manager) noteLoad(n *Node, l Load, now time.Time) {
	if n.loadAt.IsZero() || l.Ops < n.Load.Ops {
		n.loadAt, n.Load = now, l
		return
	}
	dt := now.Sub(n.loadAt)
	if dt <= 0 {
		return
	}
	inst := float64(l.Ops-n.Load.Ops) / dt.Seconds()
	alpha := 1 - math.Exp(-dt.Seconds()/m.o.Elastic.Window.Seconds())
	n.Rate += alpha * (inst - n.Rate)
	n.loadAt, n.Load = now, l
}

// Decisions returns the elastic decisions taken (or, in dry-run, that
// would have been), oldest first.
func (m *Manager) Decisions() []Decision {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.decisions)
}

// NodeLoad is a blocknode as the elastic policy sees it.
type NodeLoad struct {
	ID     string
	Ops    float64 // operations per second, averaged
	Drives int
	Parked bool
	// Available: a parked node that can come back (its host is not
	// composed meanwhile).
	Available bool
}

// Decide is the policy's decision on nodes, with no side effects: "park"
// (the least-loaded active node, then fewest drives, then ID), "unpark"
// (the first available parked node by ID) or "" for none, and why. The
// live control plane and `rackpool sim storage` both call it.
func (e Elastic) Decide(nodes []NodeLoad) (action, node, why string) {
	e.defaults()
	var active, parked []NodeLoad
	load := 0.0
	for _, n := range nodes {
		if n.Parked {
			if n.Available {
				parked = append(parked, n)
			}
			continue
		}
		active = append(active, n)
		load += n.Ops
	}
	sort.Slice(active, func(i, j int) bool {
		a, b := active[i], active[j]
		if a.Ops != b.Ops {
			return a.Ops < b.Ops
		}
		if a.Drives != b.Drives {
			return a.Drives < b.Drives
		}
		return a.ID < b.ID
	})
	sort.Slice(parked, func(i, j int) bool { return parked[i].ID < parked[j].ID })
	k := float64(len(active))
	switch {
	case len(active) > 1 && load < e.Low*e.NodeOps*(k-1):
		return "park", active[0].ID, fmt.Sprintf("load %.0f ops/s fits in %d blocknodes under %.0f%% of their capacity (%.0f ops/s each)",
			load, len(active)-1, e.Low*100, e.NodeOps)
	case len(parked) > 0 && load > e.High*e.NodeOps*k:
		return "unpark", parked[0].ID, fmt.Sprintf("load %.0f ops/s is over %.0f%% of %d blocknodes' capacity (%.0f ops/s each)",
			load, e.High*100, len(active), e.NodeOps)
	}
	return "", "", ""
}

// elastic runs one round of the policy. m.ops held.
func (m *Manager) elastic(ctx context.Context) {
	e := m.o.Elastic
	now := m.o.Clock.Now()
	if e.Mode == ElasticOff || (!m.lastDecision.IsZero() && now.Sub(m.lastDecision) < e.Hold) {
		return
	}
	m.mu.Lock()
	count := map[string]int{}
	for _, d := range m.drives {
		if d.Node != "" && d.State != Failed {
			count[d.Node]++
		}
	}
	var nodes []NodeLoad
	var active []*Node
	load := 0.0
	for _, n := range m.nodes {
		if !n.Online || now.Before(n.HoldUntil) {
			continue
		}
		if !n.Parked && now.Sub(n.since) < e.Window {
			m.mu.Unlock()
			return // not measured long enough to decide on
		}
		nodes = append(nodes, NodeLoad{ID: n.ID, Ops: n.Rate, Drives: count[n.ID], Parked: n.Parked})
		if !n.Parked {
			active = append(active, n)
			load += n.Rate
		}
	}
	m.mu.Unlock()
	for i := range nodes {
		if nodes[i].Parked {
			nodes[i].Available = !m.o.Holders.InComposition(nodes[i].ID)
		}
	}
	switch action, node, why := e.Decide(nodes); action {
	case "park":
		m.park(ctx, node, load, len(active), why)
	case "unpark":
		m.unpark(ctx, node, active, load, why)
	}
}

// park moves every drive of node to the others and returns its host to the
// compute pool. m.ops held.
func (m *Manager) park(ctx context.Context, node string, load float64, active int, why string) {
	m.mu.Lock()
	var ds []string
	for _, d := range m.drives {
		if d.Node == node && d.State != Failed {
			ds = append(ds, d.ID)
		}
	}
	m.mu.Unlock()
	slices.Sort(ds)
	dec := Decision{Time: m.o.Clock.Now(), Action: "park", Node: node, Moves: map[string]string{}, LoadOps: load, Active: active,
		Applied: m.o.Elastic.Mode == ElasticOn, Why: why}
	// Plan every move first: park only if all the drives have a home.
	plan := map[string]string{}
	room := m.room(node)
	for _, id := range ds {
		to := ""
		for _, n := range sortedByRoom(room) {
			if room[n] > 0 && m.reaches(n, id) {
				to = n
				break
			}
		}
		if to == "" {
			return // nowhere to put it: stay as we are
		}
		room[to]--
		plan[id] = to
	}
	dec.Moves = plan
	if dec.Applied {
		for _, id := range ds {
			if err := m.move(ctx, id, plan[id], "elastic: consolidating off "+node+": "+why); err != nil {
				dec.Applied, dec.Why = false, dec.Why+"; stopped: "+err.Error()
				break
			}
		}
		if dec.Applied {
			m.setParked(ctx, node, true)
		}
	}
	m.decide(ctx, dec)
}

// unpark brings node back and gives it drives from the busiest nodes until
// the counts are even. m.ops held.
func (m *Manager) unpark(ctx context.Context, node string, active []*Node, load float64, why string) {
	dec := Decision{Time: m.o.Clock.Now(), Action: "unpark", Node: node, Moves: map[string]string{}, LoadOps: load, Active: len(active),
		Applied: m.o.Elastic.Mode == ElasticOn, Why: why}
	m.mu.Lock()
	byNode := map[string][]string{}
	for _, d := range m.drives {
		if d.Node != "" && d.State == Online && d.Node != node {
			byNode[d.Node] = append(byNode[d.Node], d.ID)
		}
	}
	maxDrives := DefaultMaxDrives
	if n := m.nodes[node]; n != nil {
		maxDrives = n.MaxDrives
	}
	m.mu.Unlock()
	total := 0
	for _, ds := range byNode {
		slices.Sort(ds)
		total += len(ds)
	}
	target := min(total/(len(active)+1), maxDrives)
	for moved := 0; moved < target; moved++ {
		busiest := ""
		for n, ds := range byNode {
			if busiest == "" || len(ds) > len(byNode[busiest]) || len(ds) == len(byNode[busiest]) && n < busiest {
				busiest = n
			}
		}
		if busiest == "" || len(byNode[busiest]) == 0 {
			break
		}
		ds := byNode[busiest]
		id := ds[len(ds)-1]
		byNode[busiest] = ds[:len(ds)-1]
		if m.reaches(node, id) {
			dec.Moves[id] = node
		}
	}
	if dec.Applied {
		m.setParked(ctx, node, false)
		for _, id := range slices.Sorted(mapsKeys(dec.Moves)) {
			if err := m.move(ctx, id, node, "elastic: spreading onto "+node+": "+why); err != nil {
				dec.Why += "; stopped: " + err.Error()
				break
			}
		}
	}
	m.decide(ctx, dec)
}

func mapsKeys(m map[string]string) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// room returns, for every active node but skip, how many more drives it
// takes.
func (m *Manager) room(skip string) map[string]int {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := map[string]int{}
	for _, n := range m.nodes {
		if n.Online && !n.Parked && n.ID != skip {
			out[n.ID] = n.MaxDrives
		}
	}
	for _, d := range m.drives {
		if _, ok := out[d.Node]; ok && d.State != Failed {
			out[d.Node]--
		}
	}
	return out
}

func sortedByRoom(room map[string]int) []string {
	out := slices.Sorted(mapsKeys2(room))
	sort.SliceStable(out, func(i, j int) bool { return room[out[i]] > room[out[j]] })
	return out
}

func mapsKeys2(m map[string]int) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// reaches reports whether node's SAS port reaches drive.
func (m *Manager) reaches(node, drive string) bool {
	p, err := m.sasPort(node)
	dev := m.o.Topology.Device(drive)
	return err == nil && dev != nil && p.Fabric == dev.Fabric && m.o.Topology.Reaches(p, dev)
}

// setParked records node parked (its host back in the compute pool) or
// active again (its host held). m.ops held.
func (m *Manager) setParked(ctx context.Context, node string, parked bool) {
	m.mu.Lock()
	n := m.nodes[node]
	if n == nil {
		m.mu.Unlock()
		return
	}
	next := *n
	next.Parked = parked
	h := m.holding(node, nil, nil)
	m.mu.Unlock()
	if parked {
		h.Blocks = nil
	}
	objs := []store.ObjectChange{{Kind: kindNode, Object: object(node, next)}}
	if err := m.o.Holders.SetHolders(ctx, []compose.Holding{h}, objs); err != nil {
		m.o.Logger.Error("elastic: record blocknode", "node", node, "parked", parked, "err", err)
		return
	}
	m.mu.Lock()
	n.Parked = parked
	m.mu.Unlock()
}

// decide records a decision: the list, the audit log and an event.
func (m *Manager) decide(ctx context.Context, d Decision) {
	m.lastDecision = d.Time
	m.mu.Lock()
	m.decisions = append(m.decisions, d)
	if len(m.decisions) > 1000 {
		m.decisions = m.decisions[len(m.decisions)-1000:]
	}
	m.mu.Unlock()
	var moves []string
	for _, id := range slices.Sorted(mapsKeys(d.Moves)) {
		moves = append(moves, id+"→"+d.Moves[id])
	}
	verb := map[string]string{"park": "park blocknode %s and return its host to the compute pool",
		"unpark": "bring blocknode %s back from the compute pool"}[d.Action]
	msg := fmt.Sprintf("elastic: "+verb+" (%s); moves: %s", d.Node, d.Why, strings.Join(moves, ", "))
	if !d.Applied {
		msg = "elastic (" + string(m.o.Elastic.Mode) + ", not applied): would " + strings.TrimPrefix(msg, "elastic: ")
	}
	m.event(Event{Severity: "OK", Node: d.Node, Message: msg})
	if _, err := m.o.Store.AppendAudit(context.WithoutCancel(ctx), store.AuditEntry{Time: d.Time.UTC(), User: "rackpool",
		Action: "ElasticDisaggregation", Outcome: store.AuditSuccess, Status: 200, Target: "/redfish/v1/Oem/Rackpool/BlockNodes/" + d.Node,
		Detail: msg, MessageID: store.AuditMessage(store.AuditSuccess, 200)}); err != nil {
		m.o.Logger.Error("elastic: audit", "err", err)
	}
}
