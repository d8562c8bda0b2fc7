// Package rfdriver is the redfish fabric.Driver: it operates any DSP0266
// Redfish fabric manager (a real one, or rackpool's own fabric-emulator)
// through Endpoints, Zones and Connections, as docs/southbound.md states
// the contract.
//
// # Mapping
//
// At New the driver logs in, checks that the manager has the fabric and
// maps its Endpoints onto the topology: a target endpoint whose Id is a
// device ID is that device; an initiator endpoint whose Id is
// "{host}-{port}", or whose Id is the port ID and whose first connected
// entity links /redfish/v1/Systems/{host}, is that host port. For devices
// with several blocks (memory nodes, CXL memory devices) it also maps each
// block to its memory chunk, whose Id is the block ID, from the device's
// Chassis/{device}/MemoryDomains.
//
// A device with one block is attached by zone membership: the ZoneOfEndpoints
// holding the host port's initiator is PATCHed (If-Match its ETag) to add the
// device's target, or a new zone is POSTed when the port has none. A block of
// a device with several blocks is attached by a memory Connection naming its
// chunk; detach DELETEs that connection (If-Match).
//
// # Never a double attach
//
// Every Attach and Detach is a loop that decides from the manager's state,
// never from an answer it may not have received:
//
//	read state ──present/absent as asked──▶ done (Changed only if this call sent a change)
//	    │
//	    ▼ not yet
//	send change ──2xx / task done──▶ done (Changed, Took measured)
//	    │  4xx with a message ──▶ refusal mapped to a fabric error, nothing changed
//	    │  412 / 409 ──▶ someone else changed it: read again
//	    ▼  lost answer, reset, 5xx, 503, task monitor gone
//	back off (exponential, jittered) and read again
//
// The whole loop, retries and task polling included, runs under
// Options.Timeout; every single request under Options.RequestTimeout.
//
// # Distrust
//
// Answers are capped at 4 MiB and decoded into the few typed properties the
// driver needs: a wrong type, a missing Id, an unknown Health, a redirect to
// another scheme, host or port, a task monitor that never finishes or a body
// that trickles in beyond the request deadline fail the operation with an
// error naming the URL and what was wrong. The password never appears in an
// error or a log line.
package rfdriver
