// Package managers is the northbound Redfish service's Manager family:
// the one Manager (the control plane itself, /redfish/v1/Managers/rackpool),
// its LogServices (the audit log and the event log) and its network
// (EthernetInterfaces, NetworkProtocol: where the service listens).
//
// Its routes (Routes) are literal patterns beside their privileges; the
// core service (package redfish) admits each request and gathers the table
// into its own. A Service depends on the small interfaces it declares
// (AuditLog, EventLog) and on the core only through package service.
package managers
