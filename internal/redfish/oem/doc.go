// Package oem is the northbound Redfish service's families under
// Oem/Rackpool that have a package of their own: pooled memory (Memory:
// memory nodes' registrations and heartbeats, GetMemory's leases), pooled
// drives (PooledDrives: blocknodes' heartbeats, the drives, Connect and
// Release with the write reservation), predictive provisioning's
// subscriptions (Provisioning) and the host agents' routes
// (HostAgents), through which each agent long-polls its host's
// composition saga steps and answers them.
//
// Its routes are literal patterns beside their privileges; the core
// service (package redfish) admits each request and gathers the tables
// into its own. Each service depends on the small interfaces it declares
// (Leases, UsageRecorder, Drives, Provisioner, HostSteps, Hosts) and on
// the core only through package service.
package oem
