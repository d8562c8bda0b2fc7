// Package rf is the Redfish protocol as rackpool speaks it, on both sides of
// the wire, apart from any resource: the control plane's northbound service
// (internal/redfish), the fabric managers of `rackpool fabric-emulator`
// (internal/fabric/fmserver), and the clients of other Redfish services (the
// fabric driver internal/fabric/rfdriver, the BMC client internal/bmc, the
// discovery walk internal/fabric/discover) all use it.
//
// The server side is the DMTF Base registry's messages for the errors every
// Redfish service answers (Problem), the strict decoding of request bodies
// that produces them (Decode), and OData references and collections. Each
// service wraps a Problem into its own error type and renders its own error
// body.
//
// The client side is what every southbound client shares of HTTP: resolving
// the service's links, the request headers, sending a request and reading
// its answer whole under a size limit (Send), following redirects only
// within the service (SameHost), the statuses that say it is busy, telling
// an untrusted certificate from other transport failures, and reading a
// Redfish error body (its MessageId and message) into an error's text. Each
// client keeps its own policy: authentication, retries and backoff, its
// error types and the words its errors use for the service ("the BMC", "the
// manager").
package rf
