// Package fabrics is the northbound Redfish service's Fabrics family:
// /redfish/v1/Fabrics with their Switches, Ports, Endpoints and Zones, and
// rackpool's fault injection (Rackpool.InjectFault, Rackpool.ClearFaults).
// Fabrics show the same attachments as compositions, from the fabric's
// side: Zones are computed from the live compositions (one truth, two
// views).
//
// Its routes (Routes) are literal patterns beside their privileges; the
// core service (package redfish) admits each request and gathers the table
// into its own. A Service depends on the small interface it declares
// (Compositions), on the core's health reading (Deps.Health), and on the
// core only through package service.
package fabrics
