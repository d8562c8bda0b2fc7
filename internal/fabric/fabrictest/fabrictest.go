// Package fabrictest is the conformance suite every fabric.Driver passes.
//
// Run exercises one driver for one fabric of a topology: idempotent attach
// and detach, Discover agreeing with what was done, refusals that change
// nothing (unknown names, unreachable ports, injected faults, failed
// devices, ports and hosts) and concurrent use. It picks the blocks and
// host ports it needs from the topology itself, so it runs unchanged
// against any fabric kind. Subtests that need an optional capability
// (fabric.FaultInjector, fabric.StatsReporter, fabric.LatencyReporter, a
// fault kind such as fabric.ReleaseStalls) or a shape the fabric does not
// have (an unreachable pair) are skipped. Every call to the driver is
// bounded (CallTimeout): a driver that does not return fails the subtest,
// saying which call it was, rather than hanging the suite.
package fabrictest

import (
	"cmp"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"

	"rackpool/internal/fabric"
	"rackpool/internal/inventory"
	"rackpool/internal/topology"
)

// Concurrency bounds for the concurrent subtest: each goroutine also
// reads the fabric (Discover) after every DiscoverEvery-th change, so
// reads interleave with the others' changes. A Discover after every change
// made three quarters of the subtest's time against a remote manager (a
// Discover reads every endpoint, zone and connection), and this subtest
// most of the suite's.
const (
	Goroutines      = 8
	OpsPerGoroutine = 50
	DiscoverEvery   = 4
)

// Run runs the conformance suite against the driver newDriver returns for
// fabric fabricID of top. newDriver is called once per subtest and must
// return a driver with nothing attached and no faults armed.
func Run(t *testing.T, top *topology.Topology, fabricID string, newDriver func(t *testing.T) fabric.Driver) {
	t.Helper()
	f := top.Fabric(fabricID)
	if f == nil {
		t.Fatalf("fabric %q is not in topology %s", fabricID, top.Name)
	}
	s := &suite{top: top, fab: f, newDriver: newDriver}
	s.pairs = reachable(top, f)
	if len(s.pairs) == 0 {
		t.Fatalf("fabric %s: no host port reaches any device", f.ID)
	}
	s.first = s.pairs[0]

	t.Run("AttachIdempotent", s.attachIdempotent)
	t.Run("DetachIdempotent", s.detachIdempotent)
	t.Run("DiscoverReflectsAttachments", s.discoverReflects)
	t.Run("UnknownNamesChangeNothing", s.unknownNames)
	t.Run("Unreachable", s.unreachable)
	t.Run("InjectedAttachFault", s.injectedAttachFault)
	t.Run("DeviceFailure", s.deviceFailure)
	t.Run("PortAndHostFailure", s.portAndHostFailure)
	t.Run("Stats", s.stats)
	t.Run("Latency", s.latency)
	t.Run("ReleaseStalls", s.releaseStalls)
	t.Run("Concurrent", s.concurrent)
}

type suite struct {
	top       *topology.Topology
	fab       *inventory.Fabric
	newDriver func(t *testing.T) fabric.Driver
	pairs     []fabric.Attachment // every reachable (block, host port), in inventory order
	first     fabric.Attachment
}

// reachable lists every (block, host port) pair of f that the topology
// says can be connected, in block then host port order.
func reachable(top *topology.Topology, f *inventory.Fabric) []fabric.Attachment {
	var out []fabric.Attachment
	for _, d := range f.Devices {
		for _, b := range d.Blocks {
			for _, p := range f.Ports {
				if top.Reaches(p, d) {
					out = append(out, fabric.Attachment{Block: b.ID, Device: d.ID, Host: p.Host.ID, HostPort: p.ID})
				}
			}
		}
	}
	return out
}

func attach(t *testing.T, d fabric.Driver, a fabric.Attachment) fabric.Result {
	t.Helper()
	r, err := callAttach(d, a)
	if err != nil {
		t.Fatalf("Attach(%v): %v", a, err)
	}
	return r
}

func detach(t *testing.T, d fabric.Driver, a fabric.Attachment) fabric.Result {
	t.Helper()
	r, err := callDetach(d, a)
	if err != nil {
		t.Fatalf("Detach(%v): %v", a, err)
	}
	return r
}

func discover(t *testing.T, d fabric.Driver) fabric.State {
	t.Helper()
	st, err := callDiscover(d)
	if err != nil {
		t.Fatalf("Discover: %v", err)
	}
	return st
}

// sorted returns as in a canonical order for comparison.
func sorted(as []fabric.Attachment) []fabric.Attachment {
	out := slices.Clone(as)
	slices.SortFunc(out, func(a, b fabric.Attachment) int {
		return cmp.Or(cmp.Compare(a.Block, b.Block), cmp.Compare(a.Host, b.Host), cmp.Compare(a.HostPort, b.HostPort))
	})
	return out
}

// wantAttached fails t unless Discover lists exactly want (in any order)
// and lists no attachment twice.
func wantAttached(t *testing.T, d fabric.Driver, want ...fabric.Attachment) {
	t.Helper()
	got := sorted(discover(t, d).Attachments)
	if !slices.Equal(got, sorted(want)) {
		t.Fatalf("Discover attachments = %v, want %v", got, sorted(want))
	}
}

func (s *suite) attachIdempotent(t *testing.T) {
	d := s.newDriver(t)
	r := attach(t, d, s.first)
	if !r.Changed {
		t.Fatalf("first Attach(%v) = %+v, want Changed", s.first, r)
	}
	if r.Took < 0 {
		t.Fatalf("first Attach took %v", r.Took)
	}
	for i := range 2 {
		if r := attach(t, d, s.first); r != (fabric.Result{}) {
			t.Fatalf("repeat %d of Attach(%v) = %+v, want Changed false and Took 0", i+1, s.first, r)
		}
	}
	wantAttached(t, d, s.first)
}

func (s *suite) detachIdempotent(t *testing.T) {
	d := s.newDriver(t)
	if r := detach(t, d, s.first); r != (fabric.Result{}) {
		t.Fatalf("Detach of a pair never attached = %+v, want zero Result", r)
	}
	attach(t, d, s.first)
	if r := detach(t, d, s.first); !r.Changed {
		t.Fatalf("Detach(%v) = %+v, want Changed", s.first, r)
	}
	if r := detach(t, d, s.first); r != (fabric.Result{}) {
		t.Fatalf("second Detach(%v) = %+v, want zero Result", s.first, r)
	}
	wantAttached(t, d)
}

// compatible returns up to n pairs, starting with the first, that may all
// be attached together: distinct blocks, each attached once, chosen
// greedily and kept only if the driver accepts them.
func (s *suite) compatible(t *testing.T, d fabric.Driver, n int) []fabric.Attachment {
	t.Helper()
	var out []fabric.Attachment
	used := map[string]bool{}
	for _, p := range s.pairs {
		if len(out) == n {
			break
		}
		if used[p.Block] {
			continue
		}
		if _, err := callAttach(d, p); err != nil {
			if !physics(err) {
				t.Fatalf("Attach(%v): %v", p, err)
			}
			continue
		}
		used[p.Block] = true
		out = append(out, p)
	}
	return out
}

func (s *suite) discoverReflects(t *testing.T) {
	d := s.newDriver(t)
	wantAttached(t, d)
	got := s.compatible(t, d, 3)
	wantAttached(t, d, got...)
	st := discover(t, d)
	for _, a := range st.Attachments {
		if a.Device == "" || s.top.Block(a.Block).Device.ID != a.Device {
			t.Errorf("Discover lists %v: Device must name the block's device", a)
		}
	}
	for _, dev := range s.fab.Devices {
		if h, ok := st.Health[dev.ID]; !ok || h != fabric.OK {
			t.Errorf("Health[%s] = %q, %v; want OK", dev.ID, h, ok)
		}
	}
	if again := discover(t, d); !slices.Equal(again.Attachments, st.Attachments) {
		t.Errorf("Discover is not deterministic: %v then %v", st.Attachments, again.Attachments)
	}
	detach(t, d, got[0])
	wantAttached(t, d, got[1:]...)
}

func (s *suite) unknownNames(t *testing.T) {
	d := s.newDriver(t)
	attach(t, d, s.first)
	a := s.first
	cases := []struct {
		name string
		a    fabric.Attachment
	}{
		{"no such block", with(a, func(x *fabric.Attachment) { x.Block, x.Device = "no-such-block", "" })},
		{"no such host", with(a, func(x *fabric.Attachment) { x.Host = "no-such-host" })},
		{"no such port", with(a, func(x *fabric.Attachment) { x.HostPort = "no-such-port" })},
		{"wrong device", with(a, func(x *fabric.Attachment) { x.Device = "no-such-device" })},
	}
	if b := s.foreignBlock(); b != nil {
		cases = append(cases, struct {
			name string
			a    fabric.Attachment
		}{"block of another fabric", with(a, func(x *fabric.Attachment) { x.Block, x.Device = b.ID, b.Device.ID })})
	}
	if p := s.foreignPort(a.Host); p != nil {
		cases = append(cases, struct {
			name string
			a    fabric.Attachment
		}{"port into another fabric", with(a, func(x *fabric.Attachment) { x.HostPort = p.ID })})
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if _, err := callAttach(d, c.a); !errors.Is(err, fabric.ErrUnknown) {
				t.Errorf("Attach(%v) = %v, want ErrUnknown", c.a, err)
			}
			if _, err := callDetach(d, c.a); !errors.Is(err, fabric.ErrUnknown) {
				t.Errorf("Detach(%v) = %v, want ErrUnknown", c.a, err)
			}
			wantAttached(t, d, s.first)
		})
	}
}

func with(a fabric.Attachment, edit func(*fabric.Attachment)) fabric.Attachment {
	edit(&a)
	return a
}

// foreignBlock returns a device block of another fabric, or nil.
func (s *suite) foreignBlock() *inventory.Block {
	for _, b := range s.top.Blocks {
		if b.Device != nil && b.Device.Fabric != s.fab {
			return b
		}
	}
	return nil
}

// foreignPort returns host's port into another fabric, or nil.
func (s *suite) foreignPort(host string) *inventory.HostPort {
	for _, p := range s.top.Host(host).Ports {
		if p.Fabric != s.fab {
			return p
		}
	}
	return nil
}

func (s *suite) unreachable(t *testing.T) {
	var pair *fabric.Attachment
	for _, dev := range s.fab.Devices {
		for _, p := range s.fab.Ports {
			if !s.top.Reaches(p, dev) {
				pair = &fabric.Attachment{Block: dev.Blocks[0].ID, Device: dev.ID, Host: p.Host.ID, HostPort: p.ID}
				break
			}
		}
		if pair != nil {
			break
		}
	}
	if pair == nil {
		t.Skipf("every host port of %s reaches every device", s.fab.ID)
	}
	d := s.newDriver(t)
	if _, err := callAttach(d, *pair); !errors.Is(err, fabric.ErrUnreachable) {
		t.Fatalf("Attach(%v) = %v, want ErrUnreachable", *pair, err)
	}
	wantAttached(t, d)
}

func injector(t *testing.T, d fabric.Driver) fabric.FaultInjector {
	t.Helper()
	fi, ok := d.(fabric.FaultInjector)
	if !ok {
		t.Skip("driver does not implement fabric.FaultInjector")
	}
	return fi
}

func inject(t *testing.T, fi fabric.FaultInjector, f fabric.Fault) {
	t.Helper()
	if err := callInject(fi, f); err != nil {
		t.Fatalf("InjectFault(%+v): %v", f, err)
	}
}

func (s *suite) injectedAttachFault(t *testing.T) {
	for _, target := range []string{s.first.Device, ""} {
		t.Run(fmt.Sprintf("target=%q", target), func(t *testing.T) {
			d := s.newDriver(t)
			fi := injector(t, d)
			inject(t, fi, fabric.Fault{Kind: fabric.AttachFails, Target: target, Count: 2})
			for i := range 2 {
				if _, err := callAttach(d, s.first); !errors.Is(err, fabric.ErrInjected) {
					t.Fatalf("Attach %d under fault = %v, want ErrInjected", i+1, err)
				}
				wantAttached(t, d)
			}
			if r := attach(t, d, s.first); !r.Changed {
				t.Fatalf("Attach after the fault ran out = %+v, want Changed", r)
			}
			wantAttached(t, d, s.first)
			inject(t, fi, fabric.Fault{Kind: fabric.AttachFails, Target: target, Count: 5})
			clearFaults(t, fi)
			detach(t, d, s.first)
			attach(t, d, s.first)
			wantAttached(t, d, s.first)
		})
	}
	t.Run("unknown target", func(t *testing.T) {
		fi := injector(t, s.newDriver(t))
		if err := callInject(fi, fabric.Fault{Kind: fabric.DeviceFails, Target: "no-such-device"}); err == nil {
			t.Fatal("InjectFault on an unknown device succeeded")
		}
	})
}

func (s *suite) deviceFailure(t *testing.T) {
	d := s.newDriver(t)
	fi := injector(t, d)
	attach(t, d, s.first)
	inject(t, fi, fabric.Fault{Kind: fabric.DeviceFails, Target: s.first.Device})
	if h := discover(t, d).Health[s.first.Device]; h != fabric.Critical {
		t.Errorf("Health[%s] of a failed device = %q, want Critical", s.first.Device, h)
	}
	if r := detach(t, d, s.first); !r.Changed {
		t.Fatalf("Detach of a failed device = %+v, want Changed", r)
	}
	wantAttached(t, d)
	if _, err := callAttach(d, s.first); !errors.Is(err, fabric.ErrFailed) {
		t.Fatalf("Attach of a failed device = %v, want ErrFailed", err)
	}
	wantAttached(t, d)
	clearFaults(t, fi)
	if h := discover(t, d).Health[s.first.Device]; h != fabric.OK {
		t.Errorf("Health[%s] after ClearFaults = %q, want OK", s.first.Device, h)
	}
	attach(t, d, s.first)
	wantAttached(t, d, s.first)
}

func (s *suite) portAndHostFailure(t *testing.T) {
	for _, f := range []fabric.Fault{
		{Kind: fabric.PortFails, Target: s.first.Host + "/" + s.first.HostPort},
		{Kind: fabric.HostFails, Target: s.first.Host},
	} {
		t.Run(string(f.Kind), func(t *testing.T) {
			d := s.newDriver(t)
			fi := injector(t, d)
			inject(t, fi, f)
			if h := discover(t, d).Health[f.Target]; h != fabric.Critical {
				t.Errorf("Health[%s] = %q, want Critical", f.Target, h)
			}
			if _, err := callAttach(d, s.first); !errors.Is(err, fabric.ErrFailed) {
				t.Fatalf("Attach over a failed %s = %v, want ErrFailed", f.Kind, err)
			}
			wantAttached(t, d)
			clearFaults(t, fi)
			attach(t, d, s.first)
			inject(t, fi, f)
			if r := detach(t, d, s.first); !r.Changed {
				t.Fatalf("Detach over a failed %s = %+v, want Changed", f.Kind, r)
			}
			wantAttached(t, d)
		})
	}
}

func (s *suite) stats(t *testing.T) {
	d := s.newDriver(t)
	sr, ok := d.(fabric.StatsReporter)
	if !ok {
		t.Skip("driver does not implement fabric.StatsReporter")
	}
	attach(t, d, s.first)
	byDev := func() map[string]fabric.DeviceStats {
		t.Helper()
		st, err := call("Stats", sr.Stats)
		if err != nil {
			t.Fatalf("Stats: %v", err)
		}
		m := map[string]fabric.DeviceStats{}
		for _, x := range st {
			if _, dup := m[x.Device]; dup {
				t.Fatalf("Stats lists %s twice", x.Device)
			}
			m[x.Device] = x
		}
		return m
	}
	m := byDev()
	for _, dev := range s.fab.Devices {
		x, ok := m[dev.ID]
		if !ok {
			t.Errorf("Stats has no entry for %s", dev.ID)
			continue
		}
		if x.Health != fabric.OK {
			t.Errorf("Stats[%s].Health = %q, want OK", dev.ID, x.Health)
		}
	}
	fi, ok := d.(fabric.FaultInjector)
	if !ok {
		return
	}
	inject(t, fi, fabric.Fault{Kind: fabric.DeviceFails, Target: s.first.Device})
	x := byDev()[s.first.Device]
	if x.Health != fabric.Critical || x.LinkWidth != 0 {
		t.Errorf("Stats of a failed device = %+v, want Critical with link width 0", x)
	}
}

// latency checks a fabric.LatencyReporter against the topology's own
// model for the attached host port, and refuses pairs not attached.
func (s *suite) latency(t *testing.T) {
	d := s.newDriver(t)
	lr, ok := d.(fabric.LatencyReporter)
	if !ok {
		t.Skip("driver does not implement fabric.LatencyReporter")
	}
	if _, err := callLatency(lr, s.first); !errors.Is(err, fabric.ErrUnknown) {
		t.Fatalf("Latency of a pair not attached = %v, want ErrUnknown", err)
	}
	for _, a := range s.compatible(t, d, 3) {
		got, err := callLatency(lr, a)
		if err != nil {
			t.Fatalf("Latency(%v): %v", a, err)
		}
		var hp *inventory.HostPort
		for _, p := range s.top.Host(a.Host).Ports {
			if p.ID == a.HostPort {
				hp = p
			}
		}
		want, _ := s.top.PortPath(hp, s.top.Device(a.Device))
		if got.Hops != want.Hops || got.RTTNS != want.RTTNS || got.Hops < 1 || got.RTTNS <= 0 {
			t.Errorf("Latency(%v) = %+v, want %d hops, %.1f ns (the topology's path)", a, got, want.Hops, want.RTTNS)
		}
	}
}

// releaseStalls checks a driver that takes fabric.ReleaseStalls: a host
// that never acknowledges a release still loses the block on Detach
// (forced after the fabric's timeout), and the fault clears.
func (s *suite) releaseStalls(t *testing.T) {
	d := s.newDriver(t)
	fi := injector(t, d)
	attach(t, d, s.first)
	if err := callInject(fi, fabric.Fault{Kind: fabric.ReleaseStalls, Target: s.first.Host}); err != nil {
		t.Skipf("driver does not take %s: %v", fabric.ReleaseStalls, err)
	}
	if err := callInject(fi, fabric.Fault{Kind: fabric.ReleaseStalls, Target: "no-such-host"}); !errors.Is(err, fabric.ErrUnknown) {
		t.Errorf("InjectFault(%s, no-such-host) = %v, want ErrUnknown", fabric.ReleaseStalls, err)
	}
	r := detach(t, d, s.first)
	if !r.Changed {
		t.Fatalf("Detach from a host that stalls its release = %+v, want Changed", r)
	}
	wantAttached(t, d)
	clearFaults(t, fi)
	attach(t, d, s.first)
	if r2 := detach(t, d, s.first); !r2.Changed || r2.Took > r.Took {
		t.Errorf("cooperative Detach = %+v after a forced one of %+v: want Changed and no slower", r2, r)
	}
	wantAttached(t, d)
}

// physics reports whether err is a refusal the fabric's physics may give
// when unrelated attachments compete for shared resources.
func physics(err error) bool {
	return errors.Is(err, fabric.ErrInUse) || errors.Is(err, fabric.ErrPortBusy) || errors.Is(err, fabric.ErrDrawerHosts)
}

// concurrent runs Goroutines goroutines, each owning a disjoint set of
// blocks and attaching and detaching them at random (seeded) over every
// port that reaches them, and reading the fabric meanwhile. Each goroutine tracks what its successful calls
// did; physics refusals caused by the others are allowed and change
// nothing. Afterwards Discover must list exactly the union of what the
// goroutines believe is attached.
func (s *suite) concurrent(t *testing.T) {
	d := s.newDriver(t)
	own := make([][]fabric.Attachment, Goroutines)
	blockOwner := map[string]int{}
	for _, p := range s.pairs {
		g, ok := blockOwner[p.Block]
		if !ok {
			g = len(blockOwner) % Goroutines
			blockOwner[p.Block] = g
		}
		own[g] = append(own[g], p)
	}
	believed := make([]map[fabric.Attachment]bool, Goroutines)
	errs := make(chan error, Goroutines)
	var wg sync.WaitGroup
	for g := range Goroutines {
		believed[g] = map[fabric.Attachment]bool{}
		if len(own[g]) == 0 {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(g), 42))
			mine := believed[g]
			for op := range OpsPerGoroutine {
				p := own[g][rng.IntN(len(own[g]))]
				if rng.IntN(3) < 2 {
					r, err := callAttach(d, p)
					switch {
					case err == nil:
						if r.Changed == mine[p] {
							errs <- fmt.Errorf("Attach(%v) Changed=%v but attached=%v before", p, r.Changed, mine[p])
							return
						}
						mine[p] = true
					case !physics(err):
						errs <- fmt.Errorf("Attach(%v): %v", p, err)
						return
					}
				} else {
					r, err := callDetach(d, p)
					if err != nil {
						errs <- fmt.Errorf("Detach(%v): %v", p, err)
						return
					}
					if r.Changed != mine[p] {
						errs <- fmt.Errorf("Detach(%v) Changed=%v but attached=%v before", p, r.Changed, mine[p])
						return
					}
					delete(mine, p)
				}
				if op%DiscoverEvery != DiscoverEvery-1 {
					continue
				}
				if _, err := callDiscover(d); err != nil {
					errs <- fmt.Errorf("discover: %v", err)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	var want []fabric.Attachment
	for _, m := range believed {
		for a := range m {
			want = append(want, a)
		}
	}
	wantAttached(t, d, want...)
	for _, a := range want {
		detach(t, d, a)
	}
	wantAttached(t, d)
}
