// Package eventservice is the northbound Redfish service's EventService:
// the Server-Sent Events stream (resumable with Last-Event-ID, filtered by
// EventTypes, MessageIds, RegistryPrefixes and OriginResources, scoped to
// the principal's tenant), which also carries the fabric telemetry reports
// (EventFormatType=MetricReport), and the push subscriptions
// (EventDestination), which the event bus delivers and the store keeps.
//
// Its routes (Routes) are literal patterns beside their privileges; the
// core service (package redfish) admits each request and gathers the table
// into its own. A Service depends on the small interfaces it declares (Bus,
// Settings) and on the core only through package service.
package eventservice
