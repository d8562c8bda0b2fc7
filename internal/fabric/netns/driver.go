package netns

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"regexp"
	"slices"
	"sync"
	"time"

	"rackpool/internal/fabric"
	"rackpool/internal/inventory"
	"rackpool/internal/topology"
)

// Mode is how the driver builds the layer-2 path of an attachment.
type Mode string

// Modes.
const (
	// ModeAuto (the zero value) uses ModeBridge when the kernel offers
	// it, ModeDirect otherwise.
	ModeAuto Mode = ""
	// ModeDirect joins a host port and a device by one veth pair.
	ModeDirect Mode = "direct"
	// ModeBridge runs a bridge with VLAN filtering as the fabric's switch.
	ModeBridge Mode = "bridge"
)

// FirstVLAN is the VLAN ID of the fabric's first host port in ModeBridge;
// the i-th host port (fabric order) owns FirstVLAN+i, as in the emulated
// vlan driver.
const FirstVLAN = 100

// DefaultSubnet is the IPv4 range attachments take their /30s from when
// Options.Subnet is unset. It is used only inside the driver's namespaces.
var DefaultSubnet = netip.MustParsePrefix("10.77.0.0/16")

// Options configure a Driver. The zero value means every default.
type Options struct {
	// Prefix starts the name of every namespace the driver creates
	// ("<Prefix>-h0", "<Prefix>-d3", ...). Default: "rp-" and 6 random
	// hex digits, so parallel drivers never collide. Letters, digits,
	// '.', '_' and '-', at most 40 characters.
	Prefix string
	// Logger receives what the driver does to the kernel. Default: discard.
	Logger *slog.Logger
	// Mode picks the layer-2 path; ModeAuto probes the kernel.
	Mode Mode
	// Subnet is the IPv4 range the attachments' /30s come from. Default:
	// DefaultSubnet. It must hold a /30 for every (host port, device) pair.
	Subnet netip.Prefix
}

var prefixRE = regexp.MustCompile(`^[A-Za-z0-9._-]{1,40}$`)

// Validate reports the first invalid option.
func (o Options) Validate() error {
	if o.Prefix != "" && !prefixRE.MatchString(o.Prefix) {
		return fmt.Errorf("prefix %q: want 1-40 letters, digits, '.', '_' or '-'", o.Prefix)
	}
	switch o.Mode {
	case ModeAuto, ModeDirect, ModeBridge:
	default:
		return fmt.Errorf("mode %q: want %q, %q or empty", o.Mode, ModeDirect, ModeBridge)
	}
	if o.Subnet.IsValid() && (!o.Subnet.Addr().Is4() || o.Subnet.Bits() > 30) {
		return fmt.Errorf("subnet %s: want an IPv4 prefix of /30 or larger", o.Subnet)
	}
	return nil
}

// Driver drives one ethernet-vlan fabric made of network namespaces; see
// the package documentation. It is safe for concurrent use; changes to the
// kernel are serialised.
type Driver struct {
	top    *topology.Topology
	fab    *inventory.Fabric
	log    *slog.Logger
	prefix string
	subnet netip.Prefix
	mode   Mode

	ports   []*inventory.HostPort
	devs    []*inventory.Device
	portIdx map[string]int // "host/port" -> index in ports
	devIdx  map[string]int // device ID -> index in devs

	hostNS []*space // by port index
	devNS  []*space // by device index
	swNS   *space   // ModeBridge only
	plumb  plumbing

	mu     sync.Mutex
	closed bool
	faults fabric.Faults
}

var (
	_ fabric.Driver        = (*Driver)(nil)
	_ fabric.FaultInjector = (*Driver)(nil)
)

// New creates the namespaces of fabric f of top (an ethernet-vlan fabric)
// and returns its driver, with nothing attached. It fails with an error
// wrapping ErrUnsupported when this process cannot create namespaces, and
// removes whatever it created when it fails. Call Close to remove them.
func New(top *topology.Topology, f *inventory.Fabric, o Options) (*Driver, error) {
	if err := o.Validate(); err != nil {
		return nil, fmt.Errorf("netns driver: %w", err)
	}
	if top == nil || f == nil {
		return nil, errors.New("netns driver: nil topology or fabric")
	}
	if top.Fabric(f.ID) != f {
		return nil, fmt.Errorf("netns driver: fabric %s is not part of topology %s", f.ID, top.Name)
	}
	if f.Kind != inventory.EthernetVLAN {
		return nil, fmt.Errorf("netns driver: fabric %s is %s, want %s", f.ID, f.Kind, inventory.EthernetVLAN)
	}
	d := &Driver{
		top:     top,
		fab:     f,
		log:     o.Logger,
		prefix:  o.Prefix,
		subnet:  o.Subnet,
		ports:   f.Ports,
		devs:    f.Devices,
		portIdx: map[string]int{},
		devIdx:  map[string]int{},
	}
	if d.log == nil {
		d.log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if d.prefix == "" {
		var b [3]byte
		_, _ = rand.Read(b[:])
		d.prefix = "rp-" + hex.EncodeToString(b[:])
	}
	if !d.subnet.IsValid() {
		d.subnet = DefaultSubnet
	}
	d.subnet = d.subnet.Masked()
	if len(d.ports) == 0 || len(d.devs) == 0 {
		return nil, fmt.Errorf("netns driver: fabric %s has no host ports or no devices", f.ID)
	}
	if len(d.ports) >= maxIndex || len(d.devs) >= maxIndex {
		return nil, fmt.Errorf("netns driver: fabric %s has %d host ports and %d devices, at most %d of each", f.ID, len(d.ports), len(d.devs), maxIndex-1)
	}
	if need := uint64(4 * len(d.ports) * len(d.devs)); need > uint64(1)<<(32-d.subnet.Bits()) {
		return nil, fmt.Errorf("netns driver: subnet %s has no room for %d /30s", d.subnet, len(d.ports)*len(d.devs))
	}
	for i, p := range d.ports {
		d.portIdx[fabric.PortName(p.Host.ID, p.ID)] = i
	}
	for j, dev := range d.devs {
		if len(dev.Blocks) != 1 || dev.Blocks[0].ID != dev.ID {
			return nil, fmt.Errorf("netns driver: device %s has %d blocks; an Ethernet device is one block named after it", dev.ID, len(dev.Blocks))
		}
		d.devIdx[dev.ID] = j
	}
	if err := d.build(o.Mode); err != nil {
		return nil, errors.Join(fmt.Errorf("netns driver for %s: %w", f.ID, err), d.Close())
	}
	d.log.Info("netns fabric ready", "fabric", f.ID, "prefix", d.prefix, "mode", d.mode,
		"host_ports", len(d.ports), "devices", len(d.devs), "subnet", d.subnet)
	return d, nil
}

// maxIndex bounds host ports and devices so that interface names
// ("rph9999") stay within the kernel's 15 characters and VLAN IDs within
// 4094.
const maxIndex = 3994

// build probes the kernel, creates every namespace and the path's fixed
// part. On error the caller closes d, which removes what was made.
func (d *Driver) build(want Mode) error {
	mode := want
	if mode != ModeDirect {
		err := probeBridge(d.prefix+"-probe", d.log)
		switch {
		case err == nil:
			mode = ModeBridge
		case want == ModeBridge || errors.Is(err, ErrUnsupported):
			return fmt.Errorf("bridge VLAN filtering: %w", err)
		default:
			d.log.Info("kernel has no bridge VLAN filtering; attachments are direct veth pairs", "reason", err)
			mode = ModeDirect
		}
	}
	d.mode = mode
	for i := range d.ports {
		s, err := createSpace(fmt.Sprintf("%s-h%d", d.prefix, i))
		if err != nil {
			return err
		}
		d.hostNS = append(d.hostNS, s)
	}
	for j := range d.devs {
		s, err := createSpace(fmt.Sprintf("%s-d%d", d.prefix, j))
		if err != nil {
			return err
		}
		d.devNS = append(d.devNS, s)
	}
	if mode == ModeBridge {
		s, err := createSpace(d.prefix + "-sw")
		if err != nil {
			return err
		}
		d.swNS = s
		b := &bridge{d: d}
		if err := b.setup(); err != nil {
			return err
		}
		d.plumb = b
	} else {
		d.plumb = &direct{d: d}
	}
	return nil
}

// Close removes every namespace the driver created and with them every
// link. It is idempotent; the driver refuses every call afterwards.
func (d *Driver) Close() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.closed = true
	var errs []error
	for _, s := range slices.Concat(d.hostNS, d.devNS, []*space{d.swNS}) {
		errs = append(errs, s.close())
	}
	d.hostNS, d.devNS, d.swNS = nil, nil, nil
	return errors.Join(errs...)
}

// Mode reports the layer-2 path the driver uses.
func (d *Driver) Mode() Mode { return d.mode }

// Prefix reports the prefix of the driver's namespace names.
func (d *Driver) Prefix() string { return d.prefix }

// HostNS returns the name of the namespace of host's port into the fabric.
func (d *Driver) HostNS(host, port string) (string, error) {
	i, ok := d.portIdx[fabric.PortName(host, port)]
	if !ok {
		return "", fmt.Errorf("host port %s: %w", fabric.PortName(host, port), fabric.ErrUnknown)
	}
	return fmt.Sprintf("%s-h%d", d.prefix, i), nil
}

// DeviceNS returns the name of device's namespace.
func (d *Driver) DeviceNS(device string) (string, error) {
	j, ok := d.devIdx[device]
	if !ok {
		return "", fmt.Errorf("device %q: %w", device, fabric.ErrUnknown)
	}
	return fmt.Sprintf("%s-d%d", d.prefix, j), nil
}

// Addr returns the device's address as seen from host's port: the device
// end of the pair's /30. It is fixed by the topology, attached or not; it
// answers only while the pair is attached.
func (d *Driver) Addr(host, port, device string) (netip.Addr, error) {
	_, dev, err := d.pairAddrs(host, port, device)
	return dev, err
}

// HostAddr returns host's port's own address on the pair's /30 (the
// source address of its traffic to the device).
func (d *Driver) HostAddr(host, port, device string) (netip.Addr, error) {
	h, _, err := d.pairAddrs(host, port, device)
	return h, err
}

func (d *Driver) pairAddrs(host, port, device string) (netip.Addr, netip.Addr, error) {
	i, ok := d.portIdx[fabric.PortName(host, port)]
	if !ok {
		return netip.Addr{}, netip.Addr{}, fmt.Errorf("host port %s: %w", fabric.PortName(host, port), fabric.ErrUnknown)
	}
	j, ok := d.devIdx[device]
	if !ok {
		return netip.Addr{}, netip.Addr{}, fmt.Errorf("device %q: %w", device, fabric.ErrUnknown)
	}
	h := d.pairPrefix(i, j)
	return h.Addr(), h.Addr().Next(), nil
}

// pairPrefix is the host end of pair (i, j)'s /30, as an address with its
// prefix length.
func (d *Driver) pairPrefix(i, j int) netip.Prefix {
	b := d.subnet.Addr().As4()
	v := uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3])
	v += uint32(4*(i*len(d.devs)+j) + 1)
	return netip.PrefixFrom(netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)}), 30)
}

// marker is the alias the device end of a finished attachment carries.
func (d *Driver) marker(i, j int) string {
	return "rackpool " + d.devs[j].ID + " " + fabric.PortName(d.ports[i].Host.ID, d.ports[i].ID)
}

// pair is one attachment by index: host port i, device j.
type pair struct{ i, j int }

// resolve checks that a names a block of this fabric, its device, a host
// and that host's port into this fabric, and returns it as a pair.
func (d *Driver) resolve(a fabric.Attachment) (pair, *inventory.HostPort, error) {
	blk := d.top.Block(a.Block)
	if blk == nil || blk.Device == nil || blk.Device.Fabric != d.fab {
		return pair{}, nil, fmt.Errorf("block %q: %w", a.Block, fabric.ErrUnknown)
	}
	if a.Device != "" && a.Device != blk.Device.ID {
		return pair{}, nil, fmt.Errorf("block %s belongs to device %s, not %q: %w", blk.ID, blk.Device.ID, a.Device, fabric.ErrUnknown)
	}
	if d.top.Host(a.Host) == nil {
		return pair{}, nil, fmt.Errorf("host %q: %w", a.Host, fabric.ErrUnknown)
	}
	i, ok := d.portIdx[fabric.PortName(a.Host, a.HostPort)]
	if !ok {
		return pair{}, nil, fmt.Errorf("host %s has no port %q into fabric %s: %w", a.Host, a.HostPort, d.fab.ID, fabric.ErrUnknown)
	}
	return pair{i, d.devIdx[blk.Device.ID]}, d.ports[i], nil
}

var errClosed = errors.New("netns driver closed")

// Attach connects a.Block to a.HostPort; see fabric.Driver. The checks run
// in the emulated driver's order: the names exist (ErrUnknown), the port
// reaches the device (ErrUnreachable), nothing involved has failed
// (ErrFailed), no injected fault fires (ErrInjected), the pair is not
// already attached in the kernel (idempotent success), the device is not
// attached to as many host ports as it may (ErrInUse). Took is the time
// the kernel changes took.
func (d *Driver) Attach(ctx context.Context, a fabric.Attachment) (fabric.Result, error) {
	r, err := d.attach(ctx, a)
	if err != nil {
		return fabric.Result{}, fmt.Errorf("attach %s to %s/%s: %w", a.Block, a.Host, a.HostPort, err)
	}
	return r, nil
}

func (d *Driver) attach(ctx context.Context, a fabric.Attachment) (fabric.Result, error) {
	if err := ctx.Err(); err != nil {
		return fabric.Result{}, err
	}
	p, hp, err := d.resolve(a)
	if err != nil {
		return fabric.Result{}, err
	}
	dev := d.devs[p.j]
	if !d.top.Reaches(hp, dev) {
		return fabric.Result{}, fmt.Errorf("%s cannot reach %s: %w", fabric.PortName(a.Host, a.HostPort), dev.ID, fabric.ErrUnreachable)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return fabric.Result{}, errClosed
	}
	if err := d.faults.Failed(dev.ID, a.Host, a.HostPort); err != nil {
		return fabric.Result{}, err
	}
	if d.faults.FireAttach(dev.ID) {
		return fabric.Result{}, fmt.Errorf("attach of %s: %w", dev.ID, fabric.ErrInjected)
	}
	hosts, err := d.plumb.attachedTo(p.j)
	if err != nil {
		return fabric.Result{}, err
	}
	if slices.Contains(hosts, p.i) {
		return fabric.Result{}, nil
	}
	if limit := max(dev.Blocks[0].MaxCompositions, 1); len(hosts) >= limit {
		return fabric.Result{}, fmt.Errorf("%s is attached to %d of at most %d host ports: %w", dev.ID, len(hosts), limit, fabric.ErrInUse)
	}
	start := time.Now()
	if err := d.plumb.attach(p.i, p.j); err != nil {
		return fabric.Result{}, err
	}
	took := max(time.Since(start), time.Nanosecond)
	d.log.Debug("attached", "device", dev.ID, "host_port", fabric.PortName(a.Host, a.HostPort), "took", took)
	return fabric.Result{Took: took, Changed: true}, nil
}

// Detach disconnects a.Block from a.HostPort; see fabric.Driver. Failed
// devices, ports and hosts never stop a detach.
func (d *Driver) Detach(ctx context.Context, a fabric.Attachment) (fabric.Result, error) {
	r, err := d.detach(ctx, a)
	if err != nil {
		return fabric.Result{}, fmt.Errorf("detach %s from %s/%s: %w", a.Block, a.Host, a.HostPort, err)
	}
	return r, nil
}

func (d *Driver) detach(ctx context.Context, a fabric.Attachment) (fabric.Result, error) {
	if err := ctx.Err(); err != nil {
		return fabric.Result{}, err
	}
	p, _, err := d.resolve(a)
	if err != nil {
		return fabric.Result{}, err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return fabric.Result{}, errClosed
	}
	hosts, err := d.plumb.attachedTo(p.j)
	if err != nil {
		return fabric.Result{}, err
	}
	if !slices.Contains(hosts, p.i) {
		return fabric.Result{}, nil
	}
	start := time.Now()
	if err := d.plumb.detach(p.i, p.j); err != nil {
		return fabric.Result{}, err
	}
	took := max(time.Since(start), time.Nanosecond)
	d.log.Debug("detached", "device", d.devs[p.j].ID, "host_port", fabric.PortName(a.Host, a.HostPort), "took", took)
	return fabric.Result{Took: took, Changed: true}, nil
}

// Discover reads the attachments from the kernel (the device namespaces'
// finished links), sorted by block in inventory order, host and port, and
// reports the health of every device, host port ("host/port") and host of
// the fabric from the injected faults, as the emulated driver does.
func (d *Driver) Discover(ctx context.Context) (fabric.State, error) {
	if err := ctx.Err(); err != nil {
		return fabric.State{}, fmt.Errorf("discover %s: %w", d.fab.ID, err)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return fabric.State{}, fmt.Errorf("discover %s: %w", d.fab.ID, errClosed)
	}
	st := fabric.State{Health: map[string]fabric.Health{}}
	for j, dev := range d.devs {
		hosts, err := d.plumb.attachedTo(j)
		if err != nil {
			return fabric.State{}, fmt.Errorf("discover %s: %w", d.fab.ID, err)
		}
		for _, i := range hosts {
			p := d.ports[i]
			st.Attachments = append(st.Attachments, fabric.Attachment{Block: dev.Blocks[0].ID, Device: dev.ID, Host: p.Host.ID, HostPort: p.ID})
		}
		st.Health[dev.ID] = d.deviceHealth(dev.ID, hosts)
	}
	slices.SortFunc(st.Attachments, func(a, b fabric.Attachment) int {
		return cmp.Or(cmp.Compare(d.top.Block(a.Block).Index, d.top.Block(b.Block).Index), cmp.Compare(a.Host, b.Host), cmp.Compare(a.HostPort, b.HostPort))
	})
	for _, p := range d.ports {
		h := fabric.OK
		if d.faults.HostFailed(p.Host.ID) {
			st.Health[p.Host.ID] = fabric.Critical
			h = fabric.Critical
		} else if _, ok := st.Health[p.Host.ID]; !ok {
			st.Health[p.Host.ID] = fabric.OK
		}
		if d.faults.PortFailed(p.Host.ID, p.ID) {
			h = fabric.Critical
		}
		st.Health[fabric.PortName(p.Host.ID, p.ID)] = h
	}
	return st, nil
}

// deviceHealth is Critical for a failed device, Warning when it is attached
// over a failed port or host, else OK. Call with d.mu held.
func (d *Driver) deviceHealth(dev string, hosts []int) fabric.Health {
	if d.faults.DeviceFailed(dev) {
		return fabric.Critical
	}
	for _, i := range hosts {
		p := d.ports[i]
		if d.faults.PortDown(p.Host.ID, p.ID) {
			return fabric.Warning
		}
	}
	return fabric.OK
}
