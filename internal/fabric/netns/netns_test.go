package netns

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vishvananda/netlink"

	"rackpool/internal/fabric"
	"rackpool/internal/fabric/fabrictest"
	"rackpool/internal/topology"
)

// dialTimeout bounds every connection attempt the tests make: a refused
// one must fail well within it.
const dialTimeout = 300 * time.Millisecond

// shared is a small fabric with a device two hosts may share and an
// exclusive one, and three hosts.
const shared = `
name: shared
racks:
  - id: r1
    hosts:
      - id: "h{n}"
        count: 3
        cores: 8
        memory: 64GiB
        ports:
          - {id: eth, fabric: eth, port: "{n}"}
fabrics:
  - id: eth
    kind: ethernet-vlan
    switches: [{id: sw, ports: 16}]
    devices:
      - {id: nicE, kind: nic, switch: sw, port: "10", max_compositions: 2}
      - {id: ssdE, kind: ssd, switch: sw, port: "11"}
`

// skipUnlessRoot skips t where namespaces cannot be made.
func skipUnlessRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("netns driver tests need root (CAP_SYS_ADMIN and CAP_NET_ADMIN to create network namespaces)")
	}
}

// newDriver returns a driver for fabric fabricID of top, closed and
// checked for leftovers when t ends, whatever happened.
func newDriver(t *testing.T, top *topology.Topology, fabricID string, o Options) *Driver {
	t.Helper()
	skipUnlessRoot(t)
	if o.Logger == nil && testing.Verbose() {
		o.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	}
	d, err := New(top, top.Fabric(fabricID), o)
	if errors.Is(err, ErrUnsupported) {
		t.Skipf("network namespaces unavailable: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := d.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
		if left, err := Namespaces(d.Prefix()); err != nil || len(left) > 0 {
			t.Errorf("after Close: namespaces %v left (%v)", left, err)
		}
	})
	return d
}

func parse(t *testing.T, name, data string) *topology.Topology {
	t.Helper()
	top, err := topology.Parse(name+".yaml", []byte(data))
	if err != nil {
		t.Fatal(err)
	}
	return top
}

func TestConformance(t *testing.T) {
	skipUnlessRoot(t)
	for _, c := range []struct {
		name, fabric string
		top          *topology.Topology
	}{
		{"rack", "vlan1", topology.LoadDefault()},
		{"shared", "eth", parse(t, "shared", shared)},
	} {
		t.Run(c.name, func(t *testing.T) {
			start := time.Now()
			fabrictest.Run(t, c.top, c.fabric, func(t *testing.T) fabric.Driver {
				return newDriver(t, c.top, c.fabric, Options{})
			})
			t.Logf("conformance suite on %s/%s: %v", c.name, c.fabric, time.Since(start))
		})
	}
}

// echoServer listens on every address of device's namespace and echoes
// each line back; it stops when t ends.
func echoServer(t *testing.T, d *Driver, device string) int {
	t.Helper()
	ns, err := d.DeviceNS(device)
	if err != nil {
		t.Fatal(err)
	}
	var ln net.Listener
	if err := RunIn(ns, func() (err error) {
		ln, err = net.Listen("tcp4", "0.0.0.0:0")
		return err
	}); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	t.Cleanup(func() { ln.Close(); wg.Wait() })
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer c.Close()
				_ = c.SetDeadline(time.Now().Add(10 * time.Second))
				_, _ = io.Copy(c, c)
			}()
		}
	}()
	return ln.Addr().(*net.TCPAddr).Port
}

// echo connects from host's port namespace to addr:port and checks that a
// line comes back, all within a bound.
func echo(d *Driver, host string, addr netip.Addr, port int, msg string) error {
	ns, err := d.HostNS(host, "eth")
	if err != nil {
		return err
	}
	var c net.Conn
	if err := RunIn(ns, func() (err error) {
		c, err = net.DialTimeout("tcp4", netip.AddrPortFrom(addr, uint16(port)).String(), dialTimeout)
		return err
	}); err != nil {
		return err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(2 * time.Second))
	if _, err := fmt.Fprintln(c, msg); err != nil {
		return err
	}
	got, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return err
	}
	if strings.TrimSpace(got) != msg {
		return fmt.Errorf("echo of %q = %q", msg, got)
	}
	return nil
}

func addr(t *testing.T, d *Driver, host, device string) netip.Addr {
	t.Helper()
	a, err := d.Addr(host, "eth", device)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// wantEcho fails t unless host reaches device's echo server.
func wantEcho(t *testing.T, d *Driver, host, device string, port int) {
	t.Helper()
	if err := echo(d, host, addr(t, d, host, device), port, "hello "+device); err != nil {
		t.Fatalf("%s to %s: %v, want an echo", host, device, err)
	}
}

// wantSilence fails t unless host's connection to device at a (one of the
// device's addresses) fails within the bound.
func wantSilence(t *testing.T, d *Driver, host, device string, a netip.Addr, port int) {
	t.Helper()
	start := time.Now()
	err := echo(d, host, a, port, "hello")
	took := time.Since(start)
	if err == nil {
		t.Fatalf("%s reached %s at %s, want no answer", host, device, a)
	}
	if took > dialTimeout+200*time.Millisecond {
		t.Fatalf("%s to %s at %s failed after %v, want within %v", host, device, a, took, dialTimeout)
	}
	t.Logf("%s to %s at %s: %v after %v", host, device, a, err, took.Round(time.Microsecond))
}

func attachment(d *Driver, host, device string) fabric.Attachment {
	return fabric.Attachment{Block: device, Device: device, Host: host, HostPort: "eth"}
}

func TestTraffic(t *testing.T) {
	top := topology.LoadDefault()
	d := newDriver(t, top, "vlan1", Options{})
	ctx := context.Background()
	t.Logf("mode %s, prefix %s", d.Mode(), d.Prefix())
	p1, p2 := echoServer(t, d, "essd1"), echoServer(t, d, "essd2")

	wantSilence(t, d, "host1", "essd1", addr(t, d, "host1", "essd1"), p1)
	if _, err := d.Attach(ctx, attachment(d, "host1", "essd1")); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Attach(ctx, attachment(d, "host2", "essd2")); err != nil {
		t.Fatal(err)
	}
	wantEcho(t, d, "host1", "essd1", p1)
	wantEcho(t, d, "host2", "essd2", p2)

	t.Run("load", func(t *testing.T) {
		const n = 200
		deadline := time.Now().Add(10 * time.Second)
		for k := range n {
			if time.Now().After(deadline) {
				t.Fatalf("only %d of %d round trips in 10s", k, n)
			}
			if err := echo(d, "host1", addr(t, d, "host1", "essd1"), p1, fmt.Sprintf("msg %d", k)); err != nil {
				t.Fatalf("round trip %d: %v", k, err)
			}
		}
	})
	t.Run("other tenant's device", func(t *testing.T) {
		// essd2 is in host2's group: host1 reaches neither its address
		// towards host2 nor the one it would have towards host1.
		wantSilence(t, d, "host1", "essd2", addr(t, d, "host2", "essd2"), p2)
		wantSilence(t, d, "host1", "essd2", addr(t, d, "host1", "essd2"), p2)
		wantSilence(t, d, "host2", "essd1", addr(t, d, "host1", "essd1"), p1)
		wantSilence(t, d, "host3", "essd1", addr(t, d, "host1", "essd1"), p1)
	})
	t.Run("device fails", func(t *testing.T) {
		if err := d.InjectFault(fabric.Fault{Kind: fabric.DeviceFails, Target: "essd2"}); err != nil {
			t.Fatal(err)
		}
		wantSilence(t, d, "host2", "essd2", addr(t, d, "host2", "essd2"), p2)
		wantEcho(t, d, "host1", "essd1", p1)
		d.ClearFaults()
		wantEcho(t, d, "host2", "essd2", p2)
	})
	t.Run("host fails", func(t *testing.T) {
		if err := d.InjectFault(fabric.Fault{Kind: fabric.HostFails, Target: "host1"}); err != nil {
			t.Fatal(err)
		}
		wantSilence(t, d, "host1", "essd1", addr(t, d, "host1", "essd1"), p1)
		wantEcho(t, d, "host2", "essd2", p2)
		d.ClearFaults()
		wantEcho(t, d, "host1", "essd1", p1)
	})
	t.Run("detach", func(t *testing.T) {
		if _, err := d.Detach(ctx, attachment(d, "host1", "essd1")); err != nil {
			t.Fatal(err)
		}
		wantSilence(t, d, "host1", "essd1", addr(t, d, "host1", "essd1"), p1)
		wantEcho(t, d, "host2", "essd2", p2)
	})
	t.Run("move to another host", func(t *testing.T) {
		if _, err := d.Attach(ctx, attachment(d, "host3", "essd1")); err != nil {
			t.Fatal(err)
		}
		wantEcho(t, d, "host3", "essd1", p1)
		wantSilence(t, d, "host1", "essd1", addr(t, d, "host1", "essd1"), p1)
		wantSilence(t, d, "host1", "essd1", addr(t, d, "host3", "essd1"), p1)
	})
}

// TestSharedDeviceDoesNotBridge checks a device shared by two hosts: both
// reach it, and neither reaches the other through it, even when a host
// routes the other's subnet via the device (device namespaces do not
// forward).
func TestSharedDeviceDoesNotBridge(t *testing.T) {
	top := parse(t, "shared", shared)
	d := newDriver(t, top, "eth", Options{})
	ctx := context.Background()
	port := echoServer(t, d, "nicE")
	for _, h := range []string{"h1", "h2"} {
		if _, err := d.Attach(ctx, attachment(d, h, "nicE")); err != nil {
			t.Fatal(err)
		}
		wantEcho(t, d, h, "nicE", port)
	}
	if _, err := d.Attach(ctx, attachment(d, "h3", "nicE")); !errors.Is(err, fabric.ErrInUse) {
		t.Fatalf("third host on a device shared by at most 2 = %v, want ErrInUse", err)
	}
	// h2 serves on its own address; h1 routes h2's /30 via nicE and h2
	// routes h1's back: only the device's refusal to forward separates
	// them.
	h2ns, _ := d.HostNS("h2", "eth")
	var ln net.Listener
	if err := RunIn(h2ns, func() (err error) {
		ln, err = net.Listen("tcp4", "0.0.0.0:0")
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			_, _ = io.Copy(c, c)
			c.Close()
		}
	}()
	route(t, d, "h1", "nicE", "h2")
	route(t, d, "h2", "nicE", "h1")
	h2addr, _ := d.HostAddr("h2", "eth", "nicE")
	port2 := ln.Addr().(*net.TCPAddr).Port
	wantSilence(t, d, "h1", "h2 via nicE", h2addr, port2)

	// Control: the same path carries traffic once the device forwards.
	nicNS, _ := d.DeviceNS("nicE")
	forwarding(t, nicNS, "1")
	if err := echo(d, "h1", h2addr, port2, "via nicE"); err != nil {
		t.Fatalf("with forwarding on in nicE, h1 to h2: %v; the test's routes are wrong", err)
	}
	forwarding(t, nicNS, "0")
	wantSilence(t, d, "h1", "h2 via nicE", h2addr, port2)
}

// route adds, in from's namespace, a route to other's address on device
// via the device's address towards from.
func route(t *testing.T, d *Driver, from, device, other string) {
	t.Helper()
	ns, _ := d.HostNS(from, "eth")
	dst, _ := d.HostAddr(other, "eth", device)
	gw := addr(t, d, from, device)
	if err := RunIn(ns, func() error {
		l, err := netlink.LinkByName(devLink(d.devIdx[device]))
		if err != nil {
			return err
		}
		return netlink.RouteAdd(&netlink.Route{
			LinkIndex: l.Attrs().Index,
			Dst:       &net.IPNet{IP: net.IP(dst.AsSlice()), Mask: net.CIDRMask(32, 32)},
			Gw:        net.IP(gw.AsSlice()),
		})
	}); err != nil {
		t.Fatalf("route in %s to %s via %s: %v", from, dst, gw, err)
	}
}

func forwarding(t *testing.T, ns, on string) {
	t.Helper()
	if err := RunIn(ns, func() error {
		return os.WriteFile("/proc/sys/net/ipv4/conf/all/forwarding", []byte(on), 0)
	}); err != nil {
		t.Fatal(err)
	}
}

func TestCloseRemovesEverything(t *testing.T) {
	skipUnlessRoot(t)
	top := topology.LoadDefault()
	prefix := fmt.Sprintf("rpt%d", os.Getpid()%100000)
	// A namespace left by a crashed run with the same prefix.
	stale, err := createSpace(prefix + "-h0")
	if errors.Is(err, ErrUnsupported) {
		t.Skipf("network namespaces unavailable: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	stale.nl.Close()
	stale.fd.Close()
	t.Cleanup(func() {
		for _, n := range must(Namespaces(prefix)) {
			_ = deleteNamed(n)
		}
	})
	d, err := New(top, top.Fabric("vlan1"), Options{Prefix: prefix})
	if err != nil {
		t.Fatalf("New over a stale namespace: %v", err)
	}
	names := must(Namespaces(prefix))
	if want := len(top.Fabric("vlan1").Ports) + len(top.Fabric("vlan1").Devices); len(names) != want {
		t.Errorf("namespaces %v, want %d", names, want)
	}
	for _, h := range []string{"host1", "host2"} {
		if _, err := d.Attach(context.Background(), attachment(d, h, "essd"+h[4:])); err != nil {
			t.Fatal(err)
		}
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	if left := must(Namespaces(prefix)); len(left) > 0 {
		t.Fatalf("after Close: %v", left)
	}
	if err := d.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if _, err := d.Attach(context.Background(), attachment(d, "host1", "essd1")); err == nil {
		t.Fatal("Attach after Close succeeded")
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

func TestNewRefuses(t *testing.T) {
	top := topology.LoadDefault()
	for _, c := range []struct {
		name   string
		fabric string
		o      Options
	}{
		{"not ethernet", "sas1", Options{}},
		{"bad prefix", "vlan1", Options{Prefix: "a/b"}},
		{"bad mode", "vlan1", Options{Mode: "token-ring"}},
		{"ipv6 subnet", "vlan1", Options{Subnet: netip.MustParsePrefix("fd00::/64")}},
		{"subnet too small", "vlan1", Options{Subnet: netip.MustParsePrefix("10.1.0.0/28")}},
	} {
		t.Run(c.name, func(t *testing.T) {
			d, err := New(top, top.Fabric(c.fabric), c.o)
			if err == nil {
				d.Close()
				t.Fatal("New succeeded")
			}
			t.Log(err)
		})
	}
	if _, err := New(top, topology.LoadDefault().Fabric("vlan1"), Options{}); err == nil {
		t.Error("New accepted a fabric of another topology")
	}
}

func TestAddressesAreDeterministic(t *testing.T) {
	top := topology.LoadDefault()
	d := &Driver{subnet: DefaultSubnet, ports: top.Fabric("vlan1").Ports, devs: top.Fabric("vlan1").Devices,
		portIdx: map[string]int{}, devIdx: map[string]int{}}
	for i, p := range d.ports {
		d.portIdx[fabric.PortName(p.Host.ID, p.ID)] = i
	}
	for j, dev := range d.devs {
		d.devIdx[dev.ID] = j
	}
	seen := map[netip.Addr]bool{}
	for _, p := range d.ports {
		for _, dev := range d.devs {
			h, err1 := d.HostAddr(p.Host.ID, p.ID, dev.ID)
			a, err2 := d.Addr(p.Host.ID, p.ID, dev.ID)
			if err := errors.Join(err1, err2); err != nil {
				t.Fatal(err)
			}
			if seen[h] || seen[a] || !DefaultSubnet.Contains(h) || !DefaultSubnet.Contains(a) || h.Next() != a {
				t.Fatalf("%s/%s to %s: host %s, device %s", p.Host.ID, p.ID, dev.ID, h, a)
			}
			seen[h], seen[a] = true, true
		}
	}
	if a, _ := d.Addr("host1", "eth", "essd1"); a != netip.MustParseAddr("10.77.0.2") {
		t.Errorf("Addr(host1, eth, essd1) = %s, want 10.77.0.2", a)
	}
	if a, _ := d.Addr("host2", "eth", "essd3"); a != netip.MustParseAddr("10.77.0.26") {
		t.Errorf("Addr(host2, eth, essd3) = %s, want 10.77.0.26", a)
	}
	if _, err := d.Addr("host1", "eth", "gpu1"); !errors.Is(err, fabric.ErrUnknown) {
		t.Errorf("Addr of a device of another fabric = %v, want ErrUnknown", err)
	}
}

// TestBridgeMode runs the suite and a traffic check on the bridge path
// where the kernel has bridge VLAN filtering and 802.1Q links; elsewhere
// it checks that asking for it fails cleanly.
func TestBridgeMode(t *testing.T) {
	skipUnlessRoot(t)
	top := topology.LoadDefault()
	prefix := fmt.Sprintf("rpb%d", os.Getpid()%100000)
	d, err := New(top, top.Fabric("vlan1"), Options{Prefix: prefix, Mode: ModeBridge})
	if err != nil {
		if left := must(Namespaces(prefix)); len(left) > 0 {
			t.Errorf("a failed New left namespaces %v", left)
		}
		if errors.Is(err, ErrUnsupported) {
			t.Skipf("network namespaces unavailable: %v", err)
		}
		t.Skipf("kernel without bridge VLAN filtering or 802.1Q, bridge path not run: %v", err)
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	fabrictest.Run(t, top, "vlan1", func(t *testing.T) fabric.Driver {
		return newDriver(t, top, "vlan1", Options{Mode: ModeBridge})
	})
	t.Run("traffic", func(t *testing.T) {
		d := newDriver(t, top, "vlan1", Options{Mode: ModeBridge})
		ctx := context.Background()
		p1 := echoServer(t, d, "essd1")
		if _, err := d.Attach(ctx, attachment(d, "host1", "essd1")); err != nil {
			t.Fatal(err)
		}
		wantEcho(t, d, "host1", "essd1", p1)
		wantSilence(t, d, "host2", "essd1", addr(t, d, "host1", "essd1"), p1)
		if err := d.InjectFault(fabric.Fault{Kind: fabric.DeviceFails, Target: "essd1"}); err != nil {
			t.Fatal(err)
		}
		wantSilence(t, d, "host1", "essd1", addr(t, d, "host1", "essd1"), p1)
		d.ClearFaults()
		wantEcho(t, d, "host1", "essd1", p1)
		if _, err := d.Detach(ctx, attachment(d, "host1", "essd1")); err != nil {
			t.Fatal(err)
		}
		wantSilence(t, d, "host1", "essd1", addr(t, d, "host1", "essd1"), p1)
	})
}

// BenchmarkAttachDetach measures one attach and one detach of a device
// through the kernel (a veth pair made, addressed, up, then deleted).
func BenchmarkAttachDetach(b *testing.B) {
	if os.Geteuid() != 0 {
		b.Skip("needs root")
	}
	top := topology.LoadDefault()
	d, err := New(top, top.Fabric("vlan1"), Options{})
	if err != nil {
		b.Skip(err)
	}
	defer d.Close()
	a := fabric.Attachment{Block: "essd1", Device: "essd1", Host: "host1", HostPort: "eth"}
	ctx := context.Background()
	for b.Loop() {
		if _, err := d.Attach(ctx, a); err != nil {
			b.Fatal(err)
		}
		if _, err := d.Detach(ctx, a); err != nil {
			b.Fatal(err)
		}
	}
}
