package compose_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"rackpool/examples"
	"rackpool/internal/clock"
	"rackpool/internal/compose"
	"rackpool/internal/fabric"
	"rackpool/internal/fabric/emulated"
	"rackpool/internal/fabric/faulty"
	"rackpool/internal/inventory"
	"rackpool/internal/store"
	"rackpool/internal/store/sqlite"
	"rackpool/internal/topology"
)

// The example rack (examples/rack.yaml), as these tests rely on it:
//
//	host1..host4, each with ports pcie, sas, ocs-a, ocs-b, eth
//	falcon1 (pcie-switch): drawer1 (advanced, H1-H3): gpu1-4, nvme1-2, nic1
//	  (max 4 compositions), fpga1; drawer2 (two hosts): slots 1-4 (gpu5-8,
//	  A100) reach only host2, slots 5-8 (nvme3-4, nic2, fpga2) only host4
//	sas1: hdd1-16, ssd1-8          vlan1: essd1-4
//	ocs1: memnode1, memnode2 (64 × 8 GiB blocks each, 2 optical ports each)

var ctx = context.Background()

// loadRack parses examples/rack.yaml.
func loadRack(t testing.TB) *topology.Topology {
	t.Helper()
	top, err := topology.Parse("examples/rack.yaml", examples.Rack)
	if err != nil {
		t.Fatalf("parse example rack: %v", err)
	}
	return top
}

// env is one control plane over real emulated drivers, each wrapped in a
// fault decorator that injects nothing until told to, and a real SQLite
// store in a temporary directory. The manual clock makes modelled fabric
// delays instant.
type env struct {
	t       testing.TB
	top     *topology.Topology
	clk     *clock.Manual
	store   *sqlite.Store
	faulty  map[string]*faulty.Driver // by fabric ID
	drivers map[string]fabric.Driver  // the same decorators, as the manager sees them
	m       *compose.Manager
}

func newEnv(t testing.TB, top *topology.Topology) *env {
	t.Helper()
	st, err := sqlite.Open(t.TempDir())
	if err != nil {
		t.Fatalf("open store: %v", err)
	}
	t.Cleanup(func() { _ = st.Close() })
	e := &env{t: t, top: top, clk: clock.NewManual(time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)), store: st}
	e.faulty, e.drivers = e.freshDrivers()
	e.m = e.manager(e.drivers)
	return e
}

// freshDrivers returns new emulated drivers, with no attachments, wrapped
// in fault decorators.
func (e *env) freshDrivers() (map[string]*faulty.Driver, map[string]fabric.Driver) {
	e.t.Helper()
	raw, err := emulated.NewAll(e.top, e.clk)
	if err != nil {
		e.t.Fatalf("emulated drivers: %v", err)
	}
	fd := map[string]*faulty.Driver{}
	drivers := map[string]fabric.Driver{}
	for id, d := range raw {
		f := faulty.Wrap(d)
		fd[id], drivers[id] = f, f
	}
	return fd, drivers
}

// manager starts a manager (recovering whatever the store holds) over
// drivers.
func (e *env) manager(drivers map[string]fabric.Driver) *compose.Manager {
	e.t.Helper()
	m, err := compose.New(ctx, compose.Options{Topology: e.top, Store: e.store, Drivers: drivers, Clock: e.clk})
	if err != nil {
		e.t.Fatalf("compose.New: %v", err)
	}
	return m
}

// compose composes req and fails the test on error.
func (e *env) compose(req compose.Request) *inventory.Composition {
	e.t.Helper()
	c, err := e.m.Compose(ctx, req)
	if err != nil {
		e.t.Fatalf("compose %+v: %v", req, err)
	}
	return c
}

// specific is a request for host with the given device blocks.
func specific(host string, blocks ...string) compose.Request {
	return compose.Request{Host: host, Blocks: blocks}
}

// stored returns the store's compositions.
func (e *env) stored() []*inventory.Composition {
	e.t.Helper()
	cs, err := e.store.Compositions(ctx)
	if err != nil {
		e.t.Fatalf("store compositions: %v", err)
	}
	return cs
}

// discovered returns every attachment the drivers report, one
// "fabric: block -> host/port" line each, sorted.
func discovered(t testing.TB, drivers map[string]fabric.Driver) []string {
	t.Helper()
	var out []string
	for fid, d := range drivers {
		st, err := d.Discover(ctx)
		if err != nil {
			t.Fatalf("discover %s: %v", fid, err)
		}
		for _, a := range st.Attachments {
			out = append(out, fmt.Sprintf("%s: %s -> %s/%s", fid, a.Block, a.Host, a.HostPort))
		}
	}
	slices.Sort(out)
	return out
}

// expectedAttachments returns, in the form discovered uses, the
// attachments that compositions cs should have: every device block of
// Blocks on the composition's host, through the port in Ports.
func expectedAttachments(t testing.TB, top *topology.Topology, cs []*inventory.Composition) []string {
	t.Helper()
	var out []string
	for _, c := range cs {
		for _, id := range c.Blocks {
			b := top.Block(id)
			if b == nil {
				t.Errorf("composition %s holds unknown block %s", c.ID, id)
				continue
			}
			if b.Device == nil {
				continue
			}
			port := c.Ports[id]
			if port == "" {
				t.Errorf("composition %s has no host port for %s (ports %v)", c.ID, id, c.Ports)
			}
			out = append(out, fmt.Sprintf("%s: %s -> %s/%s", b.Device.Fabric.ID, id, c.Host, port))
		}
	}
	slices.Sort(out)
	return out
}

// checkFabrics fails the test unless the drivers hold exactly the
// attachments of cs.
func checkFabrics(t testing.TB, top *topology.Topology, drivers map[string]fabric.Driver, cs []*inventory.Composition) {
	t.Helper()
	got, want := discovered(t, drivers), expectedAttachments(t, top, cs)
	if !slices.Equal(got, want) {
		t.Errorf("fabric attachments differ from the compositions\n got: %q\nwant: %q", got, want)
	}
}

// summary renders what the store must keep of a composition (everything
// but the timestamps) as one comparable line.
func summary(c *inventory.Composition) string {
	return fmt.Sprintf("%s %q %s v%d host=%s blocks=%v ports=%v adding=%v removing=%v desc=%q",
		c.ID, c.Name, c.State, c.Version, c.Host, c.Blocks, c.Ports, c.Adding, c.Removing, c.Description)
}

func summaries(cs []*inventory.Composition) []string {
	out := make([]string, 0, len(cs))
	for _, c := range cs {
		out = append(out, summary(c))
	}
	slices.Sort(out)
	return out
}

// checkStore fails the test unless the store holds exactly what the
// manager lists, and the holder records (memory leases' blocks) the
// manager's holders hold.
func (e *env) checkStore() {
	e.t.Helper()
	var stored []*inventory.Composition
	for _, c := range e.stored() {
		if c.State != inventory.Held {
			stored = append(stored, c)
			continue
		}
		if got := e.m.Held(c.ID); !slices.Equal(got, c.Blocks) {
			e.t.Errorf("holder %s: the store has %v, the manager %v", c.ID, c.Blocks, got)
		}
	}
	got, want := summaries(stored), summaries(e.m.List())
	if !slices.Equal(got, want) {
		e.t.Errorf("store differs from the manager\nstore:   %q\nmanager: %q", got, want)
	}
}

// checkConsistent checks the store and the fabrics against the manager's
// compositions, all of which must be Composed.
func (e *env) checkConsistent() {
	e.t.Helper()
	list := e.m.List()
	for _, c := range list {
		if c.State != inventory.Composed {
			e.t.Errorf("%s is %s, want Composed", c.ID, c.State)
		}
	}
	e.checkStore()
	checkFabrics(e.t, e.top, e.drivers, list)
}

// checkEmpty fails the test unless nothing is composed anywhere: no
// composition in the manager or the store, no attachment in any fabric,
// every block Unused.
func (e *env) checkEmpty() {
	e.t.Helper()
	if l := e.m.List(); len(l) != 0 {
		e.t.Errorf("manager lists %q, want none", summaries(l))
	}
	if s := e.stored(); len(s) != 0 {
		e.t.Errorf("store holds %q, want none", summaries(s))
	}
	if a := discovered(e.t, e.drivers); len(a) != 0 {
		e.t.Errorf("fabrics still have attachments %q", a)
	}
	for _, b := range e.top.Blocks {
		if st := e.m.BlockStatus(b.ID); st.State != "Unused" || len(st.Compositions) != 0 {
			e.t.Errorf("block %s is %s in %v, want Unused", b.ID, st.State, st.Compositions)
		}
	}
}

// put writes compositions straight into the store, as a crashed control
// plane would have left them.
func (e *env) put(cs ...*inventory.Composition) {
	e.t.Helper()
	limits := map[string]int{}
	for _, b := range e.top.Blocks {
		if b.MaxCompositions > 1 {
			limits[b.ID] = b.MaxCompositions
		}
	}
	if err := e.store.Apply(ctx, store.Plan{Put: cs, Limits: limits}); err != nil {
		e.t.Fatalf("store apply: %v", err)
	}
}

// attach attaches blocks of c through the drivers directly, as a crashed
// control plane may have done before it died.
func (e *env) attach(drivers map[string]fabric.Driver, c *inventory.Composition, blocks ...string) {
	e.t.Helper()
	for _, id := range blocks {
		b := e.top.Block(id)
		a := fabric.Attachment{Block: id, Device: b.Device.ID, Host: c.Host, HostPort: c.Ports[id]}
		if _, err := drivers[b.Device.Fabric.ID].Attach(ctx, a); err != nil {
			e.t.Fatalf("attach %s: %v", id, err)
		}
	}
}

// blocksOfKind counts c's blocks by kind.
func blocksOfKind(top *topology.Topology, c *inventory.Composition) map[inventory.Kind]int {
	out := map[inventory.Kind]int{}
	for _, id := range c.Blocks {
		out[top.Block(id).Kind]++
	}
	return out
}
