package netns

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// plumbing is the layer-2 part of the driver: ModeDirect's veth pairs or
// ModeBridge's VLAN switch. The driver calls it with its mutex held, after
// its own checks. Both keep the same record in the kernel: the device
// namespace holds a link "rph<i>" carrying the pair's device address and,
// once finished, the pair's marker alias.
type plumbing interface {
	// attachedTo lists the host ports (indexes, ascending) device j is
	// attached to: its finished links.
	attachedTo(j int) ([]int, error)
	// attach connects host port i and device j, which are not attached.
	// On error it leaves nothing behind that attachedTo would report.
	attach(i, j int) error
	// detach disconnects host port i and device j, which are attached.
	detach(i, j int) error
	// applyFaults sets every link up or down as the driver's faults say.
	applyFaults() error
}

// Interface names, all within the kernel's 15 characters.
const (
	bridgeName = "rpbr" // the switch's bridge (ModeBridge)
	uplinkName = "rpup" // a host port's or device's link to the switch (ModeBridge)
)

// hostLink names host port i's link in a device namespace (and its port on
// the switch in ModeBridge).
func hostLink(i int) string { return "rph" + strconv.Itoa(i) }

// devLink names device j's link in a host namespace in ModeDirect (and its
// port on the switch in ModeBridge).
func devLink(j int) string { return "rpd" + strconv.Itoa(j) }

// ipNet converts an address with its prefix length to netlink's form.
func ipNet(p netip.Prefix) *netlink.Addr {
	return &netlink.Addr{IPNet: &net.IPNet{IP: net.IP(p.Addr().AsSlice()), Mask: net.CIDRMask(p.Bits(), 32)}}
}

// finished lists the host ports whose finished link is in device j's
// namespace: a link "rph<i>" whose alias is the pair's marker.
func finished(d *Driver, j int) ([]int, error) {
	ls, err := d.devNS[j].linkList()
	if err != nil {
		return nil, err
	}
	var out []int
	for _, l := range ls {
		a := l.Attrs()
		rest, ok := strings.CutPrefix(a.Name, "rph")
		if !ok {
			continue
		}
		i, err := strconv.Atoi(rest)
		if err != nil || i < 0 || i >= len(d.ports) || a.Alias != d.marker(i, j) {
			continue
		}
		out = append(out, i)
	}
	slices.Sort(out)
	return out, nil
}

// delLink deletes link name of s if it exists.
func delLink(s *space, name string) error {
	l, err := s.linkByName(name)
	if err != nil || l == nil {
		return err
	}
	if err := s.nl.LinkDel(l); err != nil {
		return fmt.Errorf("delete %s in %s: %w", name, s.name, err)
	}
	return nil
}

// configure gives link name of s its address, sets it up and, when alias
// is not empty, sets its alias (the last step of an attach).
func configure(s *space, name string, addr netip.Prefix, alias string) error {
	l, err := s.linkByName(name)
	if err == nil && l == nil {
		err = fmt.Errorf("link %s in %s vanished", name, s.name)
	}
	if err != nil {
		return err
	}
	if err := s.nl.AddrReplace(l, ipNet(addr)); err != nil {
		return fmt.Errorf("address %s on %s in %s: %w", addr, name, s.name, err)
	}
	if err := s.nl.LinkSetUp(l); err != nil {
		return fmt.Errorf("set %s in %s up: %w", name, s.name, err)
	}
	if alias != "" {
		if err := s.nl.LinkSetAlias(l, alias); err != nil {
			return fmt.Errorf("alias of %s in %s: %w", name, s.name, err)
		}
	}
	return nil
}

// fixedIndex is the smallest interface index the driver asks for, for the
// end of a veth it creates (ModeDirect: the host end, fixedIndex+j;
// ModeBridge: each uplink's inner end). The other end takes the next free
// index of its namespace, counting up from 2, so the two ends' indexes
// differ. The kernel treats a carrier change of a link whose index equals
// its peer's (two fresh namespaces both number their first veth 2) as not
// urgent and applies it up to a second later, and until then the end
// opened first drops every packet.
const fixedIndex = 1 << 24

// linkUpTimeout bounds how long an attach waits for its links to be
// operationally up (the kernel applies carrier changes asynchronously).
const linkUpTimeout = 2 * time.Second

// waitUp waits until link name of s is operationally up.
func waitUp(s *space, name string) error {
	deadline := time.Now().Add(linkUpTimeout)
	for delay := 50 * time.Microsecond; ; delay = min(2*delay, 20*time.Millisecond) {
		l, err := s.linkByName(name)
		if err != nil {
			return err
		}
		if l != nil && l.Attrs().OperState == netlink.OperUp {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s in %s not up after %v", name, s.name, linkUpTimeout)
		}
		time.Sleep(delay)
	}
}

// direct joins host port i and device j by a veth pair: "rpd<j>" in the
// host namespace, "rph<i>" in the device namespace.
type direct struct{ d *Driver }

func (c *direct) attachedTo(j int) ([]int, error) { return finished(c.d, j) }

func (c *direct) attach(i, j int) error {
	hs, ds := c.d.hostNS[i], c.d.devNS[j]
	// Leftovers of an attach that did not finish (a crash, a failed step).
	if err := errors.Join(delLink(hs, devLink(j)), delLink(ds, hostLink(i))); err != nil {
		return err
	}
	veth := &netlink.Veth{
		LinkAttrs:     netlink.LinkAttrs{Name: devLink(j), Index: fixedIndex + j},
		PeerName:      hostLink(i),
		PeerNamespace: netlink.NsFd(ds.fd),
	}
	if err := hs.nl.LinkAdd(veth); err != nil {
		return fmt.Errorf("veth %s in %s to %s in %s: %w", devLink(j), hs.name, hostLink(i), ds.name, err)
	}
	hostEnd := c.d.pairPrefix(i, j)
	devEnd := netip.PrefixFrom(hostEnd.Addr().Next(), hostEnd.Bits())
	err := configure(hs, devLink(j), hostEnd, "")
	if err == nil {
		err = configure(ds, hostLink(i), devEnd, "")
	}
	if err == nil {
		err = errors.Join(waitUp(hs, devLink(j)), waitUp(ds, hostLink(i)))
	}
	if err == nil {
		err = configure(ds, hostLink(i), devEnd, c.d.marker(i, j))
	}
	if err != nil {
		// Deleting one end deletes the pair.
		return errors.Join(err, delLink(hs, devLink(j)))
	}
	return nil
}

func (c *direct) detach(i, j int) error {
	return errors.Join(delLink(c.d.hostNS[i], devLink(j)), delLink(c.d.devNS[j], hostLink(i)))
}

func (c *direct) applyFaults() error {
	var errs []error
	for j := range c.d.devs {
		hosts, err := finished(c.d, j)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		for _, i := range hosts {
			up := !c.d.devDown(j) && !c.d.portDown(i)
			errs = append(errs, c.d.devNS[j].setUp(hostLink(i), up), c.d.hostNS[i].setUp(devLink(j), up))
			if up {
				errs = append(errs, waitUp(c.d.devNS[j], hostLink(i)), waitUp(c.d.hostNS[i], devLink(j)))
			}
		}
	}
	return errors.Join(errs...)
}

// bridge is the fabric as a VLAN switch: bridge "rpbr" with VLAN filtering
// in the switch namespace. Host port i's uplink is an untagged access port
// "rph<i>" in VLAN FirstVLAN+i; device j's uplink "rpd<j>" is a trunk that
// carries the VLANs of the host ports it is attached to, each ending in an
// 802.1Q link "rph<i>" in the device namespace.
//
// Untested where this package was developed: that kernel had no bridge or
// 802.1Q support, so New chose ModeDirect there.
type bridge struct{ d *Driver }

func vlanOf(i int) uint16 { return uint16(FirstVLAN + i) }

// setup builds the switch and every uplink.
func (c *bridge) setup() error {
	sw := c.d.swNS
	on, pvid := true, uint16(0) // no default VLAN 1 on new ports
	br := &netlink.Bridge{LinkAttrs: netlink.LinkAttrs{Name: bridgeName}, VlanFiltering: &on, VlanDefaultPVID: &pvid}
	if err := sw.nl.LinkAdd(br); err != nil {
		return fmt.Errorf("bridge in %s: %w", sw.name, err)
	}
	if err := sw.setUp(bridgeName, true); err != nil {
		return err
	}
	for i, hs := range c.d.hostNS {
		if err := c.uplink(hs, hostLink(i)); err != nil {
			return err
		}
		port, err := sw.linkByName(hostLink(i))
		if err != nil {
			return err
		}
		if err := sw.nl.BridgeVlanAdd(port, vlanOf(i), true, true, false, true); err != nil {
			return fmt.Errorf("VLAN %d on %s: %w", vlanOf(i), hostLink(i), err)
		}
	}
	for j, ds := range c.d.devNS {
		if err := c.uplink(ds, devLink(j)); err != nil {
			return err
		}
	}
	return nil
}

// uplink creates a veth from s ("rpup") to a switch port named port on the
// bridge, both up.
func (c *bridge) uplink(s *space, port string) error {
	sw := c.d.swNS
	veth := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: uplinkName, Index: fixedIndex}, PeerName: port, PeerNamespace: netlink.NsFd(sw.fd)}
	if err := s.nl.LinkAdd(veth); err != nil {
		return fmt.Errorf("uplink of %s: %w", s.name, err)
	}
	br, err := sw.linkByName(bridgeName)
	if err != nil {
		return err
	}
	p, err := sw.linkByName(port)
	if err != nil {
		return err
	}
	if err := sw.nl.LinkSetMaster(p, br); err != nil {
		return fmt.Errorf("%s onto %s: %w", port, bridgeName, err)
	}
	return errors.Join(sw.setUp(port, true), s.setUp(uplinkName, true))
}

func (c *bridge) attachedTo(j int) ([]int, error) { return finished(c.d, j) }

func (c *bridge) attach(i, j int) error {
	sw, hs, ds := c.d.swNS, c.d.hostNS[i], c.d.devNS[j]
	if err := delLink(ds, hostLink(i)); err != nil {
		return err
	}
	trunk, err := sw.linkByName(devLink(j))
	if err == nil && trunk == nil {
		err = fmt.Errorf("switch port %s missing", devLink(j))
	}
	if err != nil {
		return err
	}
	if err := sw.nl.BridgeVlanAdd(trunk, vlanOf(i), false, false, false, true); err != nil {
		return fmt.Errorf("VLAN %d on %s: %w", vlanOf(i), devLink(j), err)
	}
	up, err := ds.linkByName(uplinkName)
	if err == nil && up == nil {
		err = fmt.Errorf("uplink of %s missing", ds.name)
	}
	if err == nil {
		vl := &netlink.Vlan{LinkAttrs: netlink.LinkAttrs{Name: hostLink(i), ParentIndex: up.Attrs().Index}, VlanId: int(vlanOf(i))}
		if err = ds.nl.LinkAdd(vl); err != nil {
			err = fmt.Errorf("VLAN link %s in %s: %w", hostLink(i), ds.name, err)
		}
	}
	hostEnd := c.d.pairPrefix(i, j)
	devEnd := netip.PrefixFrom(hostEnd.Addr().Next(), hostEnd.Bits())
	if err == nil {
		err = configure(hs, uplinkName, hostEnd, "")
	}
	if err == nil {
		err = waitUp(ds, hostLink(i))
	}
	if err == nil {
		err = configure(ds, hostLink(i), devEnd, c.d.marker(i, j))
	}
	if err != nil {
		return errors.Join(err, c.detach(i, j))
	}
	return nil
}

func (c *bridge) detach(i, j int) error {
	sw, hs, ds := c.d.swNS, c.d.hostNS[i], c.d.devNS[j]
	errs := []error{delLink(ds, hostLink(i))}
	if up, err := hs.linkByName(uplinkName); err != nil {
		errs = append(errs, err)
	} else if up != nil {
		err := hs.nl.AddrDel(up, ipNet(c.d.pairPrefix(i, j)))
		if err != nil && !errors.Is(err, unix.EADDRNOTAVAIL) {
			errs = append(errs, fmt.Errorf("address of %s in %s: %w", uplinkName, hs.name, err))
		}
	}
	if trunk, err := sw.linkByName(devLink(j)); err != nil {
		errs = append(errs, err)
	} else if trunk != nil {
		err := sw.nl.BridgeVlanDel(trunk, vlanOf(i), false, false, false, true)
		if err != nil && !errors.Is(err, unix.ENOENT) && !errors.Is(err, unix.EINVAL) {
			errs = append(errs, fmt.Errorf("VLAN %d off %s: %w", vlanOf(i), devLink(j), err))
		}
	}
	return errors.Join(errs...)
}

func (c *bridge) applyFaults() error {
	var errs []error
	for i, hs := range c.d.hostNS {
		errs = append(errs, hs.setUp(uplinkName, !c.d.portDown(i)))
	}
	for j, ds := range c.d.devNS {
		errs = append(errs, ds.setUp(uplinkName, !c.d.devDown(j)))
	}
	for i, hs := range c.d.hostNS {
		if !c.d.portDown(i) {
			errs = append(errs, waitUp(hs, uplinkName))
		}
	}
	for j, ds := range c.d.devNS {
		if !c.d.devDown(j) {
			errs = append(errs, waitUp(ds, uplinkName))
		}
	}
	return errors.Join(errs...)
}

// probeBridge reports whether the kernel offers what ModeBridge uses, by
// building it in a scratch namespace name: a bridge with VLAN filtering,
// a veth port on it with a bridge VLAN, and an 802.1Q link. It returns nil
// when all of it works; an error wrapping ErrUnsupported when no namespace
// can be made at all.
func probeBridge(name string, log *slog.Logger) error {
	s, err := createSpace(name)
	if err != nil {
		return err
	}
	defer func() {
		if err := s.close(); err != nil {
			log.Warn("probe namespace not removed", "err", err)
		}
	}()
	on := true
	if err := s.nl.LinkAdd(&netlink.Bridge{LinkAttrs: netlink.LinkAttrs{Name: bridgeName}, VlanFiltering: &on}); err != nil {
		return fmt.Errorf("bridge: %w", err)
	}
	if err := s.nl.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "rpa"}, PeerName: "rpb"}); err != nil {
		return fmt.Errorf("veth: %w", err)
	}
	br, err := s.linkByName(bridgeName)
	if err != nil {
		return err
	}
	a, err := s.linkByName("rpa")
	if err != nil {
		return err
	}
	b, err := s.linkByName("rpb")
	if err != nil {
		return err
	}
	if br == nil || a == nil || b == nil {
		return errors.New("probe links vanished")
	}
	if err := s.nl.LinkSetMaster(a, br); err != nil {
		return fmt.Errorf("bridge port: %w", err)
	}
	if err := s.nl.BridgeVlanAdd(a, FirstVLAN, false, false, false, true); err != nil {
		return fmt.Errorf("bridge VLAN: %w", err)
	}
	if err := s.nl.LinkAdd(&netlink.Vlan{LinkAttrs: netlink.LinkAttrs{Name: "rpv", ParentIndex: b.Attrs().Index}, VlanId: FirstVLAN}); err != nil {
		return fmt.Errorf("802.1Q link: %w", err)
	}
	return nil
}
