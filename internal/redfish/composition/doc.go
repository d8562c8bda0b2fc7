// Package composition is the northbound Redfish service's composition
// family: Systems (physical hosts and composed systems, with their
// resource block actions, power and boot), the CompositionService (its
// ResourceBlocks, ResourceZones, free and active pools, composition policy,
// the Compose action with its reservations, and rackpool's Explain) and
// the allocation's export and import (Rackpool.ExportAllocation,
// Rackpool.ImportAllocation, serve --import).
//
// A compose request walks from here to the composition manager and no
// further: the handlers decode the body into a compose.Request, and
// compose places it (schedule) and attaches it (fabric). Policy, quotas
// and all-or-nothing are compose's; this package words their refusals.
//
// Its routes (Routes) are literal patterns beside their privileges; the
// core service (package redfish) admits each request and gathers the table
// into its own. A Service depends on the small interfaces it declares
// (Compositions, Tenants), on what it takes from the core (Core: tenant
// hiding, tasks, the audit entry a commit carries, the mapping of errors),
// and on the core only through package service.
package composition
