// Package events is the event bus behind the Redfish EventService: every
// part of the control plane publishes Events to one Bus, which keeps a ring
// of recent ones and hands them to two kinds of consumer.
//
//	publishers ──Publish──▶ Bus ──▶ ring (History, for replay and Recent)
//	(compose, Monitor,              ├──▶ subscribers: bounded channels (SSE streams)
//	 redfish handlers)              └──▶ destinations: one deliverer goroutine each,
//	                                     POSTing Redfish Event payloads (push)
//
// # Never blocking the publisher
//
// Publish assigns the next ID (IDs only grow, so they order events and
// serve as the SSE id), stores the event and offers it to every consumer
// without waiting. A subscriber whose channel is full is dropped: its
// channel is closed and the drop counted (Stats). An SSE client that was
// dropped reconnects with Last-Event-ID and Subscribe replays what it
// missed from the ring, so a slow reader loses nothing the ring still
// holds. A destination whose queue is full loses the event (also counted);
// push delivery is best effort, as Redfish allows.
//
// # Several replicas: a relay
//
// Active replicas (docs/ha.md) share one event stream. Their buses have a
// Relay (Options.Relay: replica.EventLog): Publish stamps an event and
// hands it to the relay instead of numbering it, and the relay writes it
// to the store's event log, which numbers every replica's events in one
// sequence. Each replica reads the log and hands every event, its own
// included, to its bus's Deliver with the log's number as its ID. So
// every replica's bus holds the same events, in the same order, under the
// same IDs, and a Last-Event-ID from one replica resumes at another (a
// bus that starts is seeded with the log's newest events, Options.Seed).
// Deliver drops an event whose ID is not past the last one, so nothing
// reaches a consumer twice, and it never relays, so nothing loops.
//
// # Push delivery
//
// Each destination has a deliverer goroutine that batches whatever is
// queued into one Event payload (Payload) and POSTs it with a 5 s timeout,
// trying up to 3 times with a doubling backoff. RemoveDestination and Close
// stop the goroutines and wait for them.
//
// # Visibility
//
// An Event's Tenant scopes it: "" means only unscoped accounts (the
// operators) see it; a tenant's accounts see their tenant's events only.
// Visible and Match apply that rule, so an SSE stream or a destination
// owned by a tenant never carries another tenant's events.
//
// # Health and telemetry events
//
// Monitor polls fabric drivers and publishes ResourceEvent registry
// messages when a device, host port or host changes health, and when a
// device's temperature or link error rate crosses a threshold. Active
// replicas share their fabric managers and each polls them; only the
// leader's monitor publishes (MonitorOptions.Publishes), so that a change
// is one event, not one per replica.
package events
