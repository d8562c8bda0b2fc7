// Package netns is a fabric.Driver for an ethernet-vlan fabric (P3's
// ExpEther: devices grouped with hosts by VLAN) built from real Linux
// network namespaces and veth pairs, configured through netlink.
//
// # Model
//
// Every host port of the fabric and every device is a named network
// namespace, named from the driver's prefix: "<prefix>-h<i>" for the i-th
// host port of the fabric (fabric order) and "<prefix>-d<j>" for the j-th
// device. An attachment of device j to host port i is a layer-2 path
// between the two namespaces carrying one /30 of Options.Subnet: pair
// (i, j) owns the /30 at offset 4*(i*len(devices)+j), the host end holds
// its first address and the device end its second (Driver.Addr,
// Driver.HostAddr). A host namespace therefore has a route only to the
// devices attached to it; a detached or foreign device's address is
// unreachable (ENETUNREACH at once, no timeout). Device namespaces never
// forward (IPv4 forwarding is switched off in them), so a device shared by
// several hosts (max_compositions > 1) does not join their groups.
//
// The physics and errors are the emulated vlan driver's: ErrUnknown for
// names outside the fabric, ErrUnreachable when the topology says so,
// ErrFailed for a failed device, port or host, ErrInjected for armed
// attach faults, ErrInUse when a device is attached to as many host ports
// as it may. Attach and Detach are idempotent; the kernel is the record of
// what is attached: Discover and the "already attached?" check read the
// device namespaces' links, and a link counts only once its last
// configuration step (an interface alias naming the attachment) is done,
// so a half-made link left by a crash is neither reported nor trusted but
// replaced by the next Attach. Result.Took is the measured time of the
// netlink changes.
//
// # Two ways to build the layer-2 path
//
// New probes the kernel in a scratch namespace ("<prefix>-probe"): a
// bridge with VLAN filtering, a veth port on it with a bridge VLAN, and an
// 802.1Q link. When all of that works (ModeBridge) the fabric is a real
// VLAN switch: a switch namespace "<prefix>-sw" holds bridge "rpbr" with
// VLAN filtering; each host port has a veth uplink "rpup" into the switch,
// an untagged access port in the host port's VLAN (100+i, as the emulated
// driver numbers them); each device has a veth uplink "rpup" that is a
// trunk. Attach adds the host's VLAN to the device's trunk port, creates
// the 802.1Q link "rph<i>" for that VLAN in the device namespace with the
// pair's device address, and adds the pair's host address to the host's
// uplink. Detach removes the three.
//
// Without those kernel features (ModeDirect) Attach creates a veth pair
// straight between the host port's namespace ("rpd<j>") and the device's
// ("rph<i>") with the pair's addresses, and Detach deletes it. The
// isolation and the addresses are the same; there is no switch.
//
// The direct path is exercised by this package's tests (conformance suite
// and real TCP traffic). The bridge path is written to the same contract
// but was not run where this package was developed (that kernel had no
// bridge, 802.1Q, macvlan, vxlan or tc modules); Options.Mode forces one
// path, and the tests run whichever the kernel offers.
//
// # Faults
//
// The driver implements fabric.FaultInjector with real effects:
// DeviceFails sets the device's links down (both ends of its veth pairs,
// or its uplink), PortFails and HostFails the host port's links; traffic
// over them stops at once and comes back on ClearFaults. AttachFails is a
// control-plane fault and only refuses attaches.
//
// Measured with the direct path on a 2-core VM: an attach (veth pair made,
// addressed, up on both ends) takes under 1 ms; a detach about 25 ms, the
// kernel's RCU grace periods for deleting a veth across namespaces.
//
// # Restart
//
// The driver does not implement fabric.Restorer: a new driver starts with
// fresh namespaces (a new driver with the same prefix first removes the old
// ones), so after a restart the control plane re-attaches what its store
// holds with Attach, which is idempotent.
//
// # Namespaces and cleanup
//
// Namespaces are bind-mounted under /var/run/netns like iproute2's, so
// "ip netns" sees them. New removes stale namespaces of the names it is
// about to create (a crashed earlier run with the same prefix) and, when
// it fails part way, everything it created. Close removes every namespace
// the driver created, which removes every link in them. Tests use RunIn to
// open sockets inside a namespace.
//
// The driver needs root (CAP_SYS_ADMIN to create and mount namespaces,
// CAP_NET_ADMIN for netlink); New fails with an error wrapping
// ErrUnsupported otherwise.
package netns
