// Package rf is the Redfish protocol as rackpool speaks it, on both sides of
// the wire, apart from any resource: the control plane's northbound service
// (internal/redfish), the fabric managers of `rackpool fabric-emulator`
// (internal/fabric/fmserver), and the clients of other Redfish services (the
// fabric driver internal/fabric/rfdriver, the BMC client internal/bmc, the
// discovery walk internal/fabric/discover) all use it.
//
// The server side is the DMTF Base registry's messages for the errors every
// Redfish service answers (Problem), the strict decoding of request bodies
// that produces them (Decode), OData references and collections, and the
// framework both services run their routes in (server.go): routes as
// literal "METHOD /path" patterns each with its Privilege, registered on a
// Mux that answers 404 and 405 with Allow; each route's pipeline
// (Policy.Wrap: admission, the body limit and the drain before a 413,
// the handler, the error answer); panic recovery that logs and shows
// nothing (Recover); the Redfish error body of one or more messages
// (ErrorDocument, WriteError); the Recorder that keeps an answer for
// later; task monitors (Task, TaskList, tasks.go); If-Match comparison
// and the per-key lock a conditional change holds (ETagMatches, Locks). Each service keeps its own policy in its Policy:
// authentication and authorisation (Admit), its error type and the OEM
// detail of its errors (Fail: a Problem is wrapped into the service's
// error and rendered back through ErrorDocument); the northbound service
// adds its audit around the handler. The Rackpool registry (fabric_registry.go) is how a
// Redfish fabric manager's refusals name fabric errors, read back by the
// redfish driver.
//
// The client side is what every southbound client shares of HTTP: resolving
// the service's links, the request headers, sending a request and reading
// its answer whole under a size limit (Send), following redirects only
// within the service (SameHost), logging in with a session (SessionsPath,
// LoginBody, Reply.Session), the statuses that say it is busy, telling an
// untrusted certificate from other transport failures, and reading a
// Redfish error body (its MessageId and message, Headline) into an error's
// text. Each
// client keeps its own policy: authentication, retries and backoff, its
// error types and the words its errors use for the service ("the BMC", "the
// manager").
package rf
