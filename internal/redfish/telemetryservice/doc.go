// Package telemetryservice is the northbound Redfish service's
// TelemetryService family: usage telemetry (what composed systems, memory
// leases and caches use, pushed with SubmitUsage and by memnodes'
// heartbeats, read back as one MetricReport per source kind, one series at
// a time and as the rackpool_usage gauges) and the fabric telemetry report
// (the fabric monitor's polls as condensed by fabricreport.Condenser).
//
// Its routes (Routes) are literal patterns beside their privileges; the
// core service (package redfish) admits each request and gathers the table
// into its own. A Service depends on the small interfaces it declares
// (UsageStore, FabricReports, Hosts, Systems, Leases) and on the core only
// through package service. docs/telemetry.md describes the resources.
package telemetryservice
