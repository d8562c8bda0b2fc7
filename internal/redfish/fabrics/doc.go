// Package fabrics is the northbound Redfish service's Fabrics family:
// /redfish/v1/Fabrics with their Switches, Ports, Endpoints, Zones and
// Connections, and rackpool's fault injection (Rackpool.InjectFault,
// Rackpool.ClearFaults). Fabrics show the same attachments as
// compositions, from the fabric's side: Zones and Connections are views of
// the live compositions (one truth, two views), and a Connection's POST or
// DELETE changes a composition through the composition manager, with the
// same tenancy and quotas as the ComputerSystem API.
//
// Its routes (Routes) are literal patterns beside their privileges; the
// core service (package redfish) admits each request and gathers the table
// into its own. A Service depends on the small interfaces it declares
// (Compositions, Quotas), on what the core reads for it (Deps.Health,
// Deps.MemoryChunks), and on the core only through package service.
package fabrics
