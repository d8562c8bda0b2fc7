package fmserver

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"

	"rackpool/internal/rf"
)

// baseRegistry is the prefix of the Base registry's MessageIds; a fabric's
// refusals use the Rackpool registry (rf.MsgUnknown and the rest).
const baseRegistry = rf.Registry

// apiError is an error with its HTTP status and Redfish messages (the
// first is error.code and error.message): the one shape every error
// leaves the server in.
type apiError struct {
	status int
	msgs   []*rf.Problem
	header map[string]string
}

func (e *apiError) Error() string { return e.msgs[0].Text }

// fromProblem is the emulator's error of a Base registry problem.
func fromProblem(p *rf.Problem) *apiError {
	// The emulator names no RelatedProperties.
	return &apiError{status: p.Status, msgs: []*rf.Problem{{ID: p.ID, Text: p.Text, Severity: p.Severity, Args: p.Args, Resolution: p.Resolution}}}
}

func newError(status int, id, text string, args ...string) *apiError {
	return fromProblem(rf.New(status, id, text, args...))
}

// resolve sets the first message's resolution and returns e.
func (e *apiError) resolve(r string) *apiError {
	e.msgs[0].Resolution = r
	return e
}

func errNotFound(kind, name string) *apiError { return fromProblem(rf.NotFound(kind, name)) }

func errMalformed(detail string) *apiError { return fromProblem(rf.Malformed(detail)) }

func errPropertyMissing(prop string) *apiError { return fromProblem(rf.PropertyMissing(prop)) }

func errPropertyValue(prop, value, why string) *apiError {
	return fromProblem(rf.PropertyValue(prop, value, why))
}

// errUnknownLink refuses a link to something that is not part of this
// fabric: the Base message for the property, and the Rackpool one a client
// maps to fabric.ErrUnknown.
func errUnknownLink(prop, value, why string) *apiError {
	e := errPropertyValue(prop, value, why)
	e.msgs = append(e.msgs, &rf.Problem{ID: rf.MsgUnknown, Severity: "Warning", Args: []string{value},
		Text: fmt.Sprintf("'%s' is not part of this fabric.", value)})
	return e
}

func errNoSession() *apiError {
	return newError(http.StatusUnauthorized, baseRegistry+"NoValidSession",
		"There is no valid session established with the implementation.")
}

func errPreconditionRequired() *apiError {
	return newError(http.StatusPreconditionRequired, baseRegistry+"PreconditionRequired",
		"A precondition header or annotation is required to change this resource.").
		resolve("GET the resource and send its ETag in If-Match.")
}

func errPreconditionFailed(cur string) *apiError {
	return newError(http.StatusPreconditionFailed, baseRegistry+"PreconditionFailed",
		"The ETag supplied did not match the ETag required to change this resource.").
		resolve("The resource's current ETag is " + cur + "; GET it again and retry with that ETag in If-Match.")
}

func errTooLarge(limit int64) *apiError { return fromProblem(rf.TooLarge(limit)) }

func errUnavailable(retryAfter int) *apiError {
	e := newError(http.StatusServiceUnavailable, baseRegistry+"ServiceTemporarilyUnavailable",
		fmt.Sprintf("The service is temporarily unavailable.  Retry in %d seconds.", retryAfter), strconv.Itoa(retryAfter))
	e.header = map[string]string{"Retry-After": strconv.Itoa(retryAfter)}
	return e
}

// errPortLocked answers a change that stopped waiting for the change in
// progress on its host port (why says why): 503 with Retry-After, nothing
// changed.
func errPortLocked(port string, why error) *apiError {
	return errUnavailable(1).resolve(fmt.Sprintf("Nothing was changed: the change waited for the change in progress on host port %s, and %v. Retry.", port, why))
}

func errAlreadyExists(prop, value string) *apiError {
	return newError(http.StatusConflict, baseRegistry+"ResourceAlreadyExists",
		fmt.Sprintf("The requested resource of type Zone with the property %s with the value '%s' already exists.", prop, value),
		"Zone", prop, value).resolve("PATCH the existing zone's Links.Endpoints instead.")
}

func errInternal(err error) *apiError {
	return newError(http.StatusInternalServerError, baseRegistry+"InternalError",
		"The request failed due to an internal service error.  The service is still operational.").
		resolve(err.Error())
}

// fabricError turns a driver error into the Redfish error: a Rackpool
// registry message (409 Conflict for a refusal, 400 for something not
// part of the fabric), or 500 for anything else.
func fabricError(err error) *apiError {
	var ae *apiError
	if errors.As(err, &ae) {
		return ae
	}
	id := rf.FabricMessageID(err)
	if id == "" {
		return errInternal(err)
	}
	status := http.StatusConflict
	if id == rf.MsgUnknown {
		status = http.StatusBadRequest
	}
	e := newError(status, id, "The fabric refused the change: "+err.Error()+".", err.Error())
	e.msgs[0].Resolution = "Nothing was changed. " + resolutions[id]
	return e
}

var resolutions = map[string]string{
	rf.MsgUnknown:     "Name elements of this fabric.",
	rf.MsgUnreachable: "Use a host port that reaches the device.",
	rf.MsgDrawerHosts: "Detach another host's devices from the drawer first.",
	rf.MsgPortBusy:    "Free the port first, or use another one.",
	rf.MsgInUse:       "Detach the block from the host ports holding it first.",
	rf.MsgFailed:      "Repair the element (or clear the injected fault) and retry.",
	rf.MsgInjected:    "Retry, or clear the injected faults.",
	rf.MsgFenced:      "This control plane no longer leads; the one that does drives the fabric now.",
}

// errorBody is the Redfish error body of e.
func errorBody(e *apiError) map[string]any { return rf.ErrorDocument(e.msgs[0], e.msgs[1:]...) }

// writeError renders e as a Redfish error body.
func writeError(w http.ResponseWriter, e *apiError) {
	for k, v := range e.header {
		w.Header().Set(k, v)
	}
	if e.status == http.StatusUnauthorized {
		w.Header().Set("WWW-Authenticate", `Basic realm="rackpool fabric manager"`)
	}
	rf.WriteJSON(w, e.status, errorBody(e))
}
