// Package fmserver serves one emulated fabric of a topology as a Redfish
// fabric manager (`rackpool fabric-emulator`): the southbound contract of
// docs/southbound.md, spoken by a real manager, backed by the emulated
// driver (internal/fabric/emulated) with its own physics, timings and
// faults. The redfish client driver and generic Redfish clients (the DMTF
// validators, the python redfish library) are tested against it.
//
// # Resources
//
//	/redfish/v1                                  service root (public), $metadata, odata
//	  SessionService/Sessions/{id}               login (POST: 201, X-Auth-Token, Location), logout (DELETE)
//	  TaskService/Tasks/{id}                     TaskState, PercentComplete, Messages
//	  TaskService/TaskMonitors/{id}              202 while running, then the final answer
//	  Fabrics/{fabric}                           FabricType PCIe | SAS | Ethernet | CXL | OEM (optical)
//	    Switches/{sw}/Ports/{port}
//	    Endpoints/{device}                       target: Id = device ID
//	    Endpoints/{host}-{port}                  initiator: EntityLink /redfish/v1/Systems/{host}
//	    Zones/{host}-{port}                      ZoneOfEndpoints: the port's initiator + attached devices
//	    Connections/{host}-{port}.{block}        Memory connection of one block (CXL, memory nodes)
//	    Actions/Oem/Rackpool.InjectFault | ClearFaults | InjectTransportFault
//	  Systems/{host}                             minimal, so links resolve
//	  Chassis/{device}/MemoryDomains/{dom}/MemoryChunks/{block}   memory devices only
//
// Everything but the service root, $metadata, odata and the OEM schema
// needs a session token or Basic credentials of the one account. Plain
// HTTP is served when the caller asks for it (the CLI allows it on
// loopback addresses only), and credentials are then accepted over it:
// this is a test emulator.
//
// The request pipeline is internal/rf's server side, as in the northbound
// service: routes as literal patterns with their privilege (rf.Mux,
// rf.Privilege), each wrapped by rf.Policy (admit, the body limit, the
// handler, fail), 404 and 405 with Allow, panic recovery, the Redfish
// error body and task monitors (rf.TaskList). The one account, the epoch
// header (admit) and the transport faults are this package's.
//
// # Changes
//
// A change is a zone's POST, PATCH (Links.Endpoints replaces the
// membership: the difference becomes detaches, then attaches) or DELETE, or
// a connection's POST or DELETE. Each is checked whole before anything
// happens (strict JSON, every link resolved; 400 and nothing changed
// otherwise), runs under its host port's lock (so If-Match is checked and
// the change made atomically: 428 without If-Match, 412 when stale; a
// change that waits for the port's lock longer than 10 seconds, or whose
// client goes away meanwhile, answers 503 with Retry-After: 1 and changes
// nothing), and
// is all or nothing: when one step fails, the steps already done are
// undone and the failure answered. A fabric refusal answers 409 (400 for
// ErrUnknown) with a Rackpool registry MessageId (rf.FabricMessageID).
//
// The steps run in the background on the driver's clock. On the wall
// clock the handler waits Options.TaskThreshold; on any other clock
// (clock.Instant, clock.Manual) modelled time costs no wall time, so it
// waits for the change. A change that finished within the threshold (with
// threshold 0: that changed nothing) gets its answer at once; any other
// answers 202 Accepted, Location: the task monitor, Retry-After (0 when
// the change already finished). Task monitors answer the final response on
// every GET until 10 minutes after the change ended (on the server's
// clock); after that, or after a restart, 404.
//
// # Transport faults
//
// InjectTransportFault (or the OEM action of the same name) arms
// Unavailable (the next Count requests answer 503, Retry-After: 1),
// LoseResponse (the next Count changes are made, then their connection is
// closed with no answer) or Restart (every session and task monitor is
// forgotten now; the hardware state stays, a change in flight finishes).
// Options.Chaos seeds a deterministic random mix: 10% of requests start a
// burst of 1-3 503 answers, 5% of changes lose their answer and 4% of
// changes (one in 25) are followed by a restart. The fault-injection
// actions are never subject to transport faults.
package fmserver
