// Package emulated models the hardware of rackpool's five fabric kinds
// closely enough that the control plane above it meets the same refusals,
// delays and failures it would meet on real equipment. Each model is a
// fabric.Driver, a fabric.StatsReporter and a fabric.FaultInjector; New
// picks one by fabric kind from the Builders registry and NewAll builds one
// per fabric of a topology.
//
// # What every model shares
//
// An attachment joins one resource block to one host port and is keyed by
// (block, host, host port). Attach checks, in order: the block belongs to
// a device of this fabric (and to the named device), the host exists and
// has the named port into this fabric (else fabric.ErrUnknown); the port
// reaches the device per topology.Reaches (else fabric.ErrUnreachable);
// neither the device, the host nor the port has failed (fabric.ErrFailed);
// no injected AttachFails fault fires (fabric.ErrInjected). Only then is
// an attachment already in place answered as an idempotent repeat,
// Result{} with nothing slept, and only then do the physics below decide.
// A refused attach changes nothing. Detach never fails because something
// failed: a dead device must always be removable.
//
// A change is recorded under the driver's mutex, then the modelled time is
// slept on the driver's clock with the mutex released, and the call
// returns Result{Took: t, Changed: true}. With clock.Manual the models run
// instantly while the clock still accounts for every hot-plug and circuit.
//
// Every block may hold at most MaxCompositions attachments (ErrInUse);
// devices are exclusive unless the topology shares them (a NIC with
// max_compositions: 4).
//
// # pcie-switch: a Falcon-4016-like chassis (P2)
//
// Drawers of PCIe slots sit behind chassis host ports H1..Hn. The drawer's
// mode decides which host ports reach which slot: standard-one-host gives
// all slots to one port, standard-two-hosts splits the slots between two
// ports (the first half to the first port), advanced lets up to three
// ports reach every slot and move devices between hosts on the fly. The
// topology's Reaches encodes that map; this model adds the mode's host
// limit (at most Mode.MaxHosts distinct hosts with attachments in one
// drawer, else ErrDrawerHosts). Attach and detach each cost one PCIe
// hot-plug, the fabric's Reconfig (100 ms by default).
//
// With a validated topology the drawer host limit never binds on its own:
// a mode cables at most MaxHosts ports to a drawer, so reachability
// already caps the hosts. The check is kept as the model of the chassis'
// own rule, for drawers whose cabling changes under the control plane.
//
// # sas-circuit: a SAS/SATA circuit switch (P1)
//
// Any drive port can be mapped to any host port; a host port carries many
// drives (a wide port behind an expander) while a drive maps to one host
// port (or MaxCompositions of them). Remaps are partial: mapping or
// unmapping one drive never touches another mapping, which keeps the time
// and generation it was established at (Mapping, Mappings). Attach costs
// the remap plus the drive coming online (Reconfig + DriveOnline, 1 ms +
// 1 ms by default: the COMRESET figure; a vanilla HBA driver needs
// ~200 ms); detach costs one remap.
//
// # optical-circuit: an optical circuit switch before memory nodes (P4)
//
// A circuit joins exactly one host-side switch port to one device-side
// port, and a port is in at most one circuit. Memory nodes have several
// switch ports, hosts one or more. Attaching a memory block to a host port
// reuses the circuit between that port and the block's node if there is
// one (no time); otherwise the host port must be free and the node must
// have a free port, else ErrPortBusy, and setting the circuit up costs one
// OCS reconfiguration (Reconfig, 25 ms by default; P4 measures 20-25 ms).
// Circuits are counted by the blocks they carry and torn down, again at
// Reconfig, when the last block detaches. Circuits lists them.
//
// # ethernet-vlan: ExpEther-style PCIe over Ethernet (P3)
//
// Devices are assigned to hosts by VLAN grouping. Every host port owns one
// VLAN (FirstVLAN + its index among the fabric's host ports); attaching a
// device puts its switch port into that VLAN, and an exclusive device's
// port is in at most one VLAN. Attach and detach cost one VLAN change with
// PCIe hot-plug (Reconfig, 5 ms by default). VLANs lists the membership.
//
// # cxl-memory: CXL type-3 memory behind CXL switches (issue 17)
//
// Memory devices hang off one or more CXL switches (linked switches add
// hops and latency through the topology's one path model). A device's
// blocks are its logical devices (an MLD splits its static capacity into
// up to 16 LDs; each is bound to one host whole) and the extents of its
// dynamic-capacity region (DCD; each added to one host's view). Attach
// binds an LD or adds an extent: one fabric-manager operation (Reconfig,
// 10 ms by default, an assumption). A device serves at most 16 hosts at
// once, one LD-ID each: a 17th host is ErrPortBusy until one lets go.
// Detach is host-cooperative: the fabric manager asks the host to release
// and the host acknowledges (Reconfig). A host that does not (an injected
// ReleaseStalls fault, or a failed host or port, which cannot answer) is
// waited for the fabric's ReleaseTimeout (5 s by default) on the driver's
// clock, and then the release is forced (Reconfig more); the detach still
// succeeds. Releases lists what was released and whether it was forced.
// As with the drawer limit, the scheduler does not model the 16 LD-IDs:
// with at most 16 hosts cabled to a fabric it never binds.
//
// # Latency
//
// Every model is a fabric.LatencyReporter: Latency reports an attached
// pair's hops and round trip on its host port, from the topology's model
// (switch latencies + 5 ns/m, both ways, + the device's overhead; P4
// Eq. 1), so CXL and optical memory are measured by one formula.
//
// # Faults and telemetry
//
// InjectFault arms AttachFails (the next Count attaches of a device, or of
// any device), DeviceFails, PortFails ("host/port") and HostFails (every
// port of a host) and, on cxl-memory fabrics, ReleaseStalls (a host,
// "host/port" or every host); ClearFaults disarms them all. Discover reports Critical
// for a failed device, port or host and Warning for a device attached over
// a failed port or host. Stats is a deterministic model, described on the
// method: utilisation from what is attached, temperature from utilisation,
// the device's own link width and speed (0 lanes when failed), and error
// counters that grow on every poll while something is failed.
package emulated
