package drive_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"rackpool/internal/blocknode"
	"rackpool/internal/clock"
	"rackpool/internal/compose"
	"rackpool/internal/drive"
	"rackpool/internal/fabric"
	"rackpool/internal/fabric/emulated"
	"rackpool/internal/store"
	"rackpool/internal/store/sqlite"
	"rackpool/internal/topology"
)

var ctx = context.Background()

// env is the control plane's drive manager over a real store, composition
// manager and emulated SAS switch, on a manual clock.
type env struct {
	t       *testing.T
	dir     string
	top     *topology.Topology
	clk     *clock.Manual
	store   store.Store
	comp    *compose.Manager
	drivers map[string]fabric.Driver
	m       *drive.Manager
	events  []drive.Event
	spares  int
}

func newEnv(t *testing.T, spares int) *env {
	e := &env{t: t, dir: t.TempDir(), top: topology.LoadDefault(), clk: clock.NewManual(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)), spares: spares}
	e.open()
	return e
}

func (e *env) open() {
	e.t.Helper()
	st, err := sqlite.Open(e.dir)
	if err != nil {
		e.t.Fatal(err)
	}
	e.store = st
	e.t.Cleanup(func() { _ = st.Close() })
	raw, err := emulated.NewAll(e.top, e.clk)
	if err != nil {
		e.t.Fatal(err)
	}
	e.drivers = map[string]fabric.Driver{}
	for id, d := range raw {
		e.drivers[id] = d
	}
	if e.comp, err = compose.New(ctx, compose.Options{Topology: e.top, Store: st, Drivers: e.drivers, Clock: e.clk}); err != nil {
		e.t.Fatal(err)
	}
	if e.m, err = drive.New(ctx, drive.Options{Store: st, Topology: e.top, Holders: e.comp, Clock: e.clk, Spares: e.spares,
		OnEvent: func(ev drive.Event) { e.events = append(e.events, ev) }}); err != nil {
		e.t.Fatal(err)
	}
}

func (e *env) restart() {
	e.t.Helper()
	_ = e.store.Close()
	e.open()
}

func (e *env) beat(host string, epoch uint64, max int) drive.Assignment {
	e.t.Helper()
	a, err := e.m.Heartbeat(ctx, drive.Heartbeat{Host: host, Endpoint: "127.0.0.1:1" + host[len(host)-1:], Epoch: epoch, MaxDrives: max})
	if err != nil {
		e.t.Fatalf("heartbeat %s: %v", host, err)
	}
	return a
}

func ids(a drive.Assignment) []string {
	var out []string
	for _, d := range a.Drives {
		out = append(out, d.ID)
	}
	return out
}

// mapped returns the SAS switch's mappings as "drive->host".
func (e *env) mapped() map[string]string {
	e.t.Helper()
	st, err := e.drivers["sas1"].Discover(ctx)
	if err != nil {
		e.t.Fatal(err)
	}
	out := map[string]string{}
	for _, a := range st.Attachments {
		if _, dup := out[a.Block]; dup {
			e.t.Fatalf("drive %s mapped twice", a.Block)
		}
		out[a.Block] = a.Host
	}
	return out
}

// check compares the switch, the holders and the drive records.
func (e *env) check() {
	e.t.Helper()
	sw := e.mapped()
	for _, d := range e.m.Drives() {
		if d.Node == "" {
			if h, ok := sw[d.ID]; ok {
				e.t.Errorf("unassigned drive %s is mapped to %s", d.ID, h)
			}
			continue
		}
		if sw[d.ID] != d.Node {
			e.t.Errorf("drive %s belongs to %s but the switch maps it to %q", d.ID, d.Node, sw[d.ID])
		}
		if !slices.Contains(e.comp.Held("blocknode-"+d.Node), d.ID) {
			e.t.Errorf("drive %s belongs to %s but its holder holds %v", d.ID, d.Node, e.comp.Held("blocknode-"+d.Node))
		}
	}
}

// TestAssignFailOverAndFence: drives are spread over three blocknodes
// keeping the spares; a node whose heartbeats stop is failed over once its
// lease and the grace have passed, with a partial remap (other mappings
// keep their epoch); tokens issued before a move name a stale epoch; the
// dead node's host returns to the compute pool; a restart keeps it all.
func TestAssignFailOverAndFence(t *testing.T) {
	e := newEnv(t, 2)
	for i, h := range []string{"host1", "host2", "host3"} {
		e.beat(h, uint64(100+i), 12)
	}
	e.m.Step(ctx)
	a1, a2, a3 := e.beat("host1", 100, 12), e.beat("host2", 101, 12), e.beat("host3", 102, 12)
	if n := len(a1.Drives) + len(a2.Drives) + len(a3.Drives); n != 22 {
		t.Fatalf("24 drives with 2 spares: %d assigned (%v %v %v)", n, ids(a1), ids(a2), ids(a3))
	}
	for _, a := range []drive.Assignment{a1, a2, a3} {
		if len(a.Drives) < 7 || len(a.Drives) > 8 {
			t.Errorf("%s serves %d drives, want 7 or 8", a.Node, len(a.Drives))
		}
		if a.LeaseTTL != drive.DefaultLeaseTTL || len(a.Key) != blocknode.KeySize {
			t.Errorf("assignment lease %v key %d bytes", a.LeaseTTL, len(a.Key))
		}
	}
	e.check()
	if _, err := e.comp.Compose(ctx, compose.Request{Host: "host1"}); err == nil {
		t.Fatal("composed a blocknode's host")
	}
	victim := a1.Drives[0]
	g, err := e.m.Connect(ctx, drive.ConnectRequest{Drive: victim.ID, Rights: blocknode.RightRead | blocknode.RightWrite, Holder: "h1"})
	if err != nil {
		t.Fatal(err)
	}
	c, err := blocknode.Key(a1.Key).Verify(g.Token, e.clk.Now())
	if err != nil || c.Epoch != victim.Epoch || c.Drive != victim.ID || g.Endpoint != "127.0.0.1:11" {
		t.Fatalf("grant %+v claims %+v %v", g, c, err)
	}
	epochs := map[string]uint64{}
	for _, a := range []drive.Assignment{a2, a3} {
		for _, d := range a.Drives {
			epochs[d.ID] = d.Epoch
		}
	}
	// host1 stops heartbeating; the others go on. Nothing moves before the
	// lease and the grace have passed.
	for range 4 {
		e.clk.Advance(100 * time.Millisecond)
		e.beat("host2", 101, 12)
		e.beat("host3", 102, 12)
		e.m.Step(ctx)
	}
	if d, _ := e.m.Drive(victim.ID); d.Node != "host1" {
		t.Fatalf("drive moved after 400ms: %+v", d)
	}
	e.clk.Advance(150 * time.Millisecond)
	e.beat("host2", 101, 12)
	e.beat("host3", 102, 12)
	e.m.Step(ctx)
	d, _ := e.m.Drive(victim.ID)
	if d.Node == "host1" || d.Node == "" || d.Epoch <= victim.Epoch || !d.InService {
		t.Fatalf("after the lease lapsed: %+v", d)
	}
	a2, a3 = e.beat("host2", 101, 12), e.beat("host3", 102, 12)
	if n := len(a2.Drives) + len(a3.Drives); n != 22 {
		t.Fatalf("survivors serve %d drives, want 22", n)
	}
	for _, a := range []drive.Assignment{a2, a3} {
		for _, d := range a.Drives {
			if old, ok := epochs[d.ID]; ok && old != d.Epoch {
				t.Errorf("drive %s did not move but its epoch went %d -> %d", d.ID, old, d.Epoch)
			}
		}
	}
	if g2, err := e.m.Connect(ctx, drive.ConnectRequest{Drive: victim.ID, Rights: blocknode.RightRead, TTL: time.Minute}); err != nil || g2.Epoch == g.Epoch || g2.Node != d.Node {
		t.Fatalf("grant after failover %+v, %v", g2, err)
	}
	if e.comp.Held("blocknode-host1") != nil {
		t.Errorf("dead node's holder still holds %v", e.comp.Held("blocknode-host1"))
	}
	if _, err := e.comp.Compose(ctx, compose.Request{Host: "host1"}); err != nil {
		t.Errorf("host1 not composable after its blocknode died: %v", err)
	}
	e.check()
	var failover bool
	for _, ev := range e.events {
		if ev.Node == "host1" && ev.Severity == "Warning" {
			failover = true
		}
	}
	if !failover {
		t.Errorf("no failover event in %+v", e.events)
	}
	// A restart keeps every mapping and epoch; grants wait for heartbeats.
	before := e.m.Drives()
	e.restart()
	if got := e.m.Drives(); !slices.EqualFunc(got, before, func(a, b drive.DriveInfo) bool { return a.ID == b.ID && a.Node == b.Node && a.Epoch == b.Epoch }) {
		t.Fatalf("after a restart drives are\n%+v\nwant\n%+v", got, before)
	}
	if _, err := e.m.Connect(ctx, drive.ConnectRequest{Drive: victim.ID, Rights: blocknode.RightRead}); !errors.Is(err, drive.ErrUnavailable) {
		t.Errorf("grant before the owner's heartbeat = %v, want ErrUnavailable", err)
	}
	e.beat("host2", 101, 12)
	e.beat("host3", 102, 12)
	if _, err := e.m.Connect(ctx, drive.ConnectRequest{Drive: victim.ID, Rights: blocknode.RightRead}); err != nil {
		t.Errorf("grant after heartbeats: %v", err)
	}
	e.check()
}

// TestFailedDriveTakesASpare: a drive the switch reports failed leaves
// service and a hot spare of the same kind goes to its node.
func TestFailedDriveTakesASpare(t *testing.T) {
	e := newEnv(t, 2)
	e.beat("host1", 1, 30)
	e.m.Step(ctx)
	a := e.beat("host1", 1, 30)
	if len(a.Drives) != 22 {
		t.Fatalf("assigned %d", len(a.Drives))
	}
	sick := a.Drives[0].ID
	if err := e.drivers["sas1"].(fabric.FaultInjector).InjectFault(fabric.Fault{Kind: fabric.DeviceFails, Target: sick}); err != nil {
		t.Fatal(err)
	}
	e.m.Step(ctx)
	a = e.beat("host1", 1, 30)
	if slices.Contains(ids(a), sick) || len(a.Drives) != 22 {
		t.Fatalf("after %s failed host1 serves %v", sick, ids(a))
	}
	if d, _ := e.m.Drive(sick); d.State != drive.Failed {
		t.Errorf("failed drive is %+v", d)
	}
	if _, err := e.m.Connect(ctx, drive.ConnectRequest{Drive: sick, Rights: blocknode.RightRead}); !errors.Is(err, drive.ErrUnavailable) {
		t.Errorf("grant on a failed drive = %v", err)
	}
	e.check()
}

// TestBadHeartbeats: unknown hosts, hosts without a SAS port, composed
// hosts and a second process on a live node's host are refused and change
// nothing.
func TestBadHeartbeats(t *testing.T) {
	e := newEnv(t, 0)
	if _, err := e.comp.Compose(ctx, compose.Request{Host: "host4"}); err != nil {
		t.Fatal(err)
	}
	for _, hb := range []drive.Heartbeat{
		{Host: "nohost", Endpoint: "x:1", Epoch: 1},
		{Host: "host1", Endpoint: "", Epoch: 1},
		{Host: "host1", Endpoint: "x:1", Epoch: 0},
		{Host: "host1", Endpoint: "x:1", Epoch: 1, MaxDrives: -1},
		{Host: "host4", Endpoint: "x:1", Epoch: 1},
	} {
		if _, err := e.m.Heartbeat(ctx, hb); err == nil {
			t.Errorf("heartbeat %+v accepted", hb)
		}
	}
	if len(e.m.Nodes()) != 0 {
		t.Fatalf("refused heartbeats registered %+v", e.m.Nodes())
	}
	if _, err := e.m.Connect(ctx, drive.ConnectRequest{Drive: "gpu1", Rights: blocknode.RightRead}); !errors.Is(err, drive.ErrNotFound) {
		t.Errorf("grant on a GPU = %v", err)
	}
}

// TestReplacedProcessWaitsForTheOldLease: a new blocknode process on a
// host whose old process may still be serving (its lease has not lapsed)
// gets the drives only once it has, so the two never serve a drive at
// the same time; then it keeps the same drives at the same epochs.
func TestReplacedProcessWaitsForTheOldLease(t *testing.T) {
	e := newEnv(t, 0)
	e.beat("host1", 5, 4)
	e.m.Step(ctx)
	old := e.beat("host1", 5, 4)
	if len(old.Drives) != 4 {
		t.Fatalf("first process serves %v", ids(old))
	}
	e.clk.Advance(100 * time.Millisecond)
	a, err := e.m.Heartbeat(ctx, drive.Heartbeat{Host: "host1", Endpoint: "other:2", Epoch: 6, MaxDrives: 4})
	if err != nil {
		t.Fatal(err)
	}
	if len(a.Drives) != 0 {
		t.Fatalf("the new process got %v while the old one's lease runs", ids(a))
	}
	e.clk.Advance(450 * time.Millisecond)
	a, err = e.m.Heartbeat(ctx, drive.Heartbeat{Host: "host1", Endpoint: "other:2", Epoch: 6, MaxDrives: 4})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.EqualFunc(a.Drives, old.Drives, func(x, y drive.Assigned) bool { return x == y }) {
		t.Fatalf("after the old lease the new process serves %v, want %v", a.Drives, old.Drives)
	}
}

func TestConnectRefusesNonDrives(t *testing.T) {
	e := newEnv(t, 0)
	if _, err := e.m.Connect(ctx, drive.ConnectRequest{Drive: "gpu1", Rights: blocknode.RightRead}); !errors.Is(err, drive.ErrNotFound) {
		t.Errorf("grant on a GPU = %v", err)
	}
}

// TestConnectTTL: no TTL is the default ten minutes; a negative one is
// refused, not read as the default.
func TestConnectTTL(t *testing.T) {
	e := newEnv(t, 0)
	e.beat("host1", 1, 1)
	e.m.Step(ctx)
	a := e.beat("host1", 1, 1)
	if len(a.Drives) != 1 {
		t.Fatalf("host1 serves %v", ids(a))
	}
	id := a.Drives[0].ID
	g, err := e.m.Connect(ctx, drive.ConnectRequest{Drive: id, Rights: blocknode.RightRead})
	if err != nil || !g.Expiry.Equal(e.clk.Now().Add(drive.DefaultTokenTTL)) {
		t.Fatalf("default TTL: grant expires %v, %v; want now+%v", g.Expiry, err, drive.DefaultTokenTTL)
	}
	for _, ttl := range []time.Duration{-5 * time.Second, -time.Nanosecond, 25 * time.Hour} {
		if g, err := e.m.Connect(ctx, drive.ConnectRequest{Drive: id, Rights: blocknode.RightRead, TTL: ttl}); !errors.Is(err, drive.ErrBadInput) {
			t.Errorf("TTL %v: grant %+v, %v; want ErrBadInput", ttl, g, err)
		}
	}
}

// beatUsing is beat with the drives the node reports a client connected to.
func (e *env) beatUsing(host string, epoch uint64, max int, inUse []string) drive.Assignment {
	e.t.Helper()
	a, err := e.m.Heartbeat(ctx, drive.Heartbeat{Host: host, Endpoint: "127.0.0.1:1" + host[len(host)-1:], Epoch: epoch, MaxDrives: max,
		InUse: inUse})
	if err != nil {
		e.t.Fatalf("heartbeat %s: %v", host, err)
	}
	return a
}

// TestDrivesSpreadAsNodesRegister: the first blocknode to register takes
// every free drive; one that registers after it gets an even share of
// them, not none. A drive in use stays where it is: one a client is
// connected to (as its owner's heartbeats report) and one with a token
// still valid (recorded in the store, so a restarted control plane knows
// it). Once the clients are gone the rest is balanced too.
func TestDrivesSpreadAsNodesRegister(t *testing.T) {
	e := newEnv(t, 0)
	e.beat("host1", 1, 64)
	e.m.Step(ctx)
	a1 := e.beat("host1", 1, 64)
	if len(a1.Drives) != 24 {
		t.Fatalf("the first blocknode serves %d drives, want all 24", len(a1.Drives))
	}
	epochs := map[string]uint64{}
	for _, d := range a1.Drives {
		epochs[d.ID] = d.Epoch
	}
	// 19 drives have a client connected, one more has a live token. They
	// are the first by ID, the ones balancing would move first.
	var connected []string
	for _, d := range a1.Drives[:19] {
		connected = append(connected, d.ID)
	}
	granted := a1.Drives[19].ID
	if _, err := e.m.Connect(ctx, drive.ConnectRequest{Drive: granted, Rights: blocknode.RightRead, TTL: time.Hour}); err != nil {
		t.Fatal(err)
	}
	e.beatUsing("host1", 1, 64, connected)
	e.restart()
	e.beatUsing("host1", 1, 64, connected)

	// host2 registers: the idle drives are shared out, no drive in use moves.
	settle := func(inUse []string) (a1, a2 drive.Assignment) {
		e.beatUsing("host1", 1, 64, inUse)
		e.beat("host2", 2, 64)
		e.m.Step(ctx)
		for range 2 { // the old owner lets go: two heartbeats answered
			e.beatUsing("host1", 1, 64, inUse)
		}
		e.m.Step(ctx)
		return e.beatUsing("host1", 1, 64, inUse), e.beat("host2", 2, 64)
	}
	a1, a2 := settle(connected)
	if len(a1.Drives) != 20 || len(a2.Drives) != 4 {
		t.Fatalf("with 20 drives in use on host1: host1 serves %d, host2 %d; want 20 and 4", len(a1.Drives), len(a2.Drives))
	}
	pinned := append(slices.Clone(connected), granted)
	for _, d := range a1.Drives {
		if slices.Contains(pinned, d.ID) && d.Epoch != epochs[d.ID] {
			t.Errorf("drive %s in use stayed on host1 but its epoch went %d -> %d", d.ID, epochs[d.ID], d.Epoch)
		}
	}
	for _, id := range pinned {
		if !slices.Contains(ids(a1), id) {
			t.Errorf("drive %s, in use, moved off host1", id)
		}
	}
	e.check()

	// The clients disconnect; the token is still valid.
	a1, a2 = settle(nil)
	if n1, n2 := len(a1.Drives), len(a2.Drives); n1+n2 != 24 || n1-n2 > 1 || n2-n1 > 1 {
		t.Fatalf("once idle: host1 serves %d drives, host2 %d; want 12 and 12", n1, n2)
	}
	if !slices.Contains(ids(a1), granted) {
		t.Errorf("drive %s, with a valid token, moved off host1", granted)
	}
	e.check()
	// Balanced: nothing more moves.
	before := e.m.Drives()
	settle(nil)
	if got := e.m.Drives(); !slices.EqualFunc(got, before, func(a, b drive.DriveInfo) bool { return a.Node == b.Node && a.Epoch == b.Epoch }) {
		t.Errorf("a balanced pool changed:\n%+v\nwas\n%+v", got, before)
	}
}

// TestBalanceSharesKinds: balancing shares each kind of drive out, not
// only their number: the first node does not keep the SSDs and hand over
// the HDDs.
func TestBalanceSharesKinds(t *testing.T) {
	e := newEnv(t, 0)
	e.beat("host1", 1, 64)
	e.m.Step(ctx)
	e.beat("host2", 2, 64)
	e.m.Step(ctx)
	for range 2 {
		e.beat("host1", 1, 64)
	}
	e.m.Step(ctx)
	kinds := map[string]map[string]int{}
	for _, a := range []drive.Assignment{e.beat("host1", 1, 64), e.beat("host2", 2, 64)} {
		kinds[a.Node] = map[string]int{}
		for _, d := range a.Drives {
			kinds[a.Node][string(e.top.Device(d.ID).Kind)]++
		}
	}
	for _, k := range []string{"ssd", "hdd"} {
		if n1, n2 := kinds["host1"][k], kinds["host2"][k]; n1+n2 == 0 || n1-n2 > 1 || n2-n1 > 1 {
			t.Errorf("%s: host1 serves %d, host2 %d; want them within one (all: %v)", k, n1, n2, kinds)
		}
	}
	// Balancing is routine, not a failover: no warnings.
	for _, ev := range e.events {
		if ev.Severity != "OK" {
			t.Errorf("balancing raised %s: %s", ev.Severity, ev.Message)
		}
	}
}
