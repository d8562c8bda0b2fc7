// Package discover turns a Redfish service's fabrics into a rackpool
// topology: `rackpool discover --redfish URL` is its command.
//
// # The walk
//
// Walk reads the service through a Getter (one GET of one path; NewHTTPGetter
// is the one over HTTP, tests use maps and files), so it is independent of
// transport and only ever reads:
//
//	/redfish/v1 ─ Fabrics ─┬─ Switches/{s} ─ Ports/{p}          (cabling, links between switches)
//	                       ├─ Endpoints/{e} ─ ConnectedEntities  (Systems, Processors, Drives, Volumes,
//	                       │                                     Memory, CXLLogicalDevices, PCIeDevices,
//	                       │                                     MemoryChunks)
//	                       ├─ Zones/{z}, EndpointGroups/{g}
//	                       └─ Connections/{c} ─ MemoryChunkInfo, VolumeInfo
//
// Every resource is read at most once and counted against a limit
// (Options.MaxResources, 20,000); bodies are limited to 4 MiB. Decoding is
// strict where it matters and tolerant elsewhere: unknown properties are
// ignored, but a property of the wrong type, a link object without
// @odata.id, a link outside /redfish/v1, a resource whose @odata.type is
// not what its link promised, a collection that lists itself or a resource
// above it, or a page chain that loops is an error naming the path. A link
// followed only to learn more (a drive's media, a system's cores) that
// leads to 404 is a note in the Result; so are endpoints that zones,
// connections or ports link to but the Endpoints collection does not list
// (Walk reads them too: DMTF's own mockups have such endpoints).
//
// # From Redfish to a topology
//
// Result.Topology makes a Draft: a topology.Spec that topology.Compile
// accepts, with notes. The rules follow docs/southbound.md, so the
// `redfish` driver can then drive the same fabric by the same names:
//
//   - Fabric kind from FabricType: PCIe → pcie-switch, SAS → sas-circuit,
//     Ethernet and NVMeOverFabrics → ethernet-vlan, CXL → cxl-memory; other
//     types are left out with a note.
//   - Hosts from initiator endpoints. The host is the ComputerSystem the
//     EntityLink is in (/redfish/v1/Systems/{host}[/...]) and the host port
//     is the endpoint Id (less a "{host}-" prefix), so the endpoint Id is
//     the port Id or "{host}-{port}". Without a system link an Id
//     "{host}-{port}" is split; any other Id becomes the host, with the
//     fabric Id as its port and a note that the driver cannot find it by
//     name. Cores and memory come from the system; when it does not say,
//     DefaultHostCores and DefaultHostMemory with a note.
//   - Devices from target endpoints; the device Id is the endpoint Id (made
//     unique with the fabric Id when two fabrics share one). The kind comes
//     from the most specific entity: Processor → gpu (fpga when the
//     processor type, link or model says FPGA), AccelerationFunction →
//     fpga, Drive/StorageSubsystem/Volume → nvme (NVMe protocol), ssd or hdd
//     by MediaType (DefaultDriveKind when neither says), NetworkController →
//     nic, MemoryChunk/Memory/CXLDevice → memory. Capacity from the linked
//     resource: a memory device's is the sum of its memory chunks (on a CXL
//     fabric, equal chunks become its logical devices, block {device}-ldN
//     for the Nth chunk), else the logical device's or memory's size, else
//     DefaultMemoryCapacity with a note. Endpoints that are no device (a
//     switch's own endpoint, an expander, a tape drive) and devices a
//     fabric kind cannot carry (a GPU on cxl-memory) are left out with a
//     note.
//   - Switches from Switches, one topology port per Redfish port: the
//     Redfish Ids when they are all numbers, else 1..n in the order the
//     service lists them (the file's header has the map). An endpoint's
//     switch port is the one it names, else the one whose ConnectedPorts
//     names its own port, else the one that lists it in
//     AssociatedEndpoints. A topology port holds one cable, so a second
//     endpoint on the same Redfish port (a CXL MLD's logical devices, an
//     expander and its drives) gets an extra port past the physical ones,
//     noted; a host port takes its first cable only, noted. A fabric with
//     no switches gets one default switch with a port per endpoint.
//     Switch ports whose ConnectedPorts name another switch's port are the
//     topology's links. Cable metres and latency_ns are not in Redfish and
//     stay 0.
//   - Zones and connections are allocations, not hardware: they become
//     Attachments (device or memory-chunk block or volume, host, port),
//     written as comments after the topology, not topology zones.
//
// Draft.YAML writes the file: a header listing every default and omission
// and the port map, the topology (topology.Marshal) with a "default"
// comment on each host and device holding one, and the attachments.
package discover
