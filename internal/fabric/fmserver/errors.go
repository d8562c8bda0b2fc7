package fmserver

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"

	"rackpool/internal/fabric"
)

// Registry prefixes of the message IDs the server answers with.
const (
	baseRegistry = "Base.1.22."
	// Registry is the prefix of the Rackpool registry's message IDs: the
	// fabric refusals a client maps back to fabric errors (Errors).
	Registry = "Rackpool.1.0."
)

// The Rackpool registry: one MessageId per fabric error. A client driver
// looks the MessageId of every @Message.ExtendedInfo entry up in Errors.
const (
	MsgUnknown     = Registry + "UnknownElement"
	MsgUnreachable = Registry + "Unreachable"
	MsgDrawerHosts = Registry + "DrawerHostLimit"
	MsgPortBusy    = Registry + "PortBusy"
	MsgInUse       = Registry + "BlockInUse"
	MsgFailed      = Registry + "ElementFailed"
	MsgInjected    = Registry + "InjectedFault"
)

// Errors maps each Rackpool registry MessageId to the fabric error it
// stands for.
var Errors = map[string]error{
	MsgUnknown:     fabric.ErrUnknown,
	MsgUnreachable: fabric.ErrUnreachable,
	MsgDrawerHosts: fabric.ErrDrawerHosts,
	MsgPortBusy:    fabric.ErrPortBusy,
	MsgInUse:       fabric.ErrInUse,
	MsgFailed:      fabric.ErrFailed,
	MsgInjected:    fabric.ErrInjected,
}

// registryOrder is the order MessageID tests the errors in: the first
// that err wraps wins.
var registryOrder = []string{MsgInjected, MsgFailed, MsgUnreachable, MsgDrawerHosts, MsgPortBusy, MsgInUse, MsgUnknown}

// MessageID returns the Rackpool registry MessageId of a fabric error, or
// "" when err wraps none of them.
func MessageID(err error) string {
	for _, id := range registryOrder {
		if errors.Is(err, Errors[id]) {
			return id
		}
	}
	return ""
}

// message is one entry of @Message.ExtendedInfo.
type message struct {
	id, text, severity, resolution string
	args                           []string
}

// apiError is an error with its HTTP status and Redfish messages: the one
// shape every error leaves the server in.
type apiError struct {
	status int
	msgs   []message
	header map[string]string
}

func (e *apiError) Error() string { return e.msgs[0].text }

func newError(status int, id, text string, args ...string) *apiError {
	sev := "Critical"
	if status < 500 {
		sev = "Warning"
	}
	return &apiError{status: status, msgs: []message{{id: id, text: text, severity: sev, args: args}}}
}

// resolve sets the first message's resolution and returns e.
func (e *apiError) resolve(r string) *apiError {
	e.msgs[0].resolution = r
	return e
}

func errNotFound(kind, name string) *apiError {
	return newError(http.StatusNotFound, baseRegistry+"ResourceNotFound",
		fmt.Sprintf("The requested resource of type %s named '%s' was not found.", kind, name), kind, name)
}

func errMissingAtURI(uri string) *apiError {
	return newError(http.StatusNotFound, baseRegistry+"ResourceMissingAtURI",
		fmt.Sprintf("The resource at the URI '%s' was not found.", uri), uri)
}

func errMalformed(detail string) *apiError {
	return newError(http.StatusBadRequest, baseRegistry+"MalformedJSON",
		"The request body submitted was malformed JSON and could not be parsed by the receiving service.").
		resolve("Ensure that the request body is valid JSON and resubmit the request. " + detail)
}

func errPropertyType(prop, value string) *apiError {
	return newError(http.StatusBadRequest, baseRegistry+"PropertyValueTypeError",
		fmt.Sprintf("The value '%s' for the property %s is not a type that the property can accept.", value, prop), value, prop)
}

func errPropertyUnknown(prop string) *apiError {
	return newError(http.StatusBadRequest, baseRegistry+"PropertyUnknown",
		fmt.Sprintf("The property %s is not in the list of valid properties for the resource.", prop), prop)
}

func errPropertyMissing(prop string) *apiError {
	return newError(http.StatusBadRequest, baseRegistry+"PropertyMissing",
		fmt.Sprintf("The property %s is a required property and must be included in the request.", prop), prop)
}

func errPropertyValue(prop, value, why string) *apiError {
	return newError(http.StatusBadRequest, baseRegistry+"PropertyValueIncorrect",
		fmt.Sprintf("The property '%s' with the requested value of '%s' could not be written because the value is not acceptable for the property.", prop, value), prop, value).
		resolve(why)
}

// errUnknownLink refuses a link to something that is not part of this
// fabric: the Base message for the property, and the Rackpool one a client
// maps to fabric.ErrUnknown.
func errUnknownLink(prop, value, why string) *apiError {
	e := errPropertyValue(prop, value, why)
	e.msgs = append(e.msgs, message{id: MsgUnknown, severity: "Warning", args: []string{value},
		text: fmt.Sprintf("'%s' is not part of this fabric.", value)})
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

func errTooLarge(limit int64) *apiError {
	return newError(http.StatusRequestEntityTooLarge, baseRegistry+"PayloadTooLarge",
		"The supplied payload exceeds the maximum size supported by the service.").
		resolve(fmt.Sprintf("Send a request body of at most %d bytes.", limit))
}

func errUnavailable(retryAfter int) *apiError {
	e := newError(http.StatusServiceUnavailable, baseRegistry+"ServiceTemporarilyUnavailable",
		fmt.Sprintf("The service is temporarily unavailable.  Retry in %d seconds.", retryAfter), strconv.Itoa(retryAfter))
	e.header = map[string]string{"Retry-After": strconv.Itoa(retryAfter)}
	return e
}

func errAlreadyExists(prop, value string) *apiError {
	return newError(http.StatusConflict, baseRegistry+"ResourceAlreadyExists",
		fmt.Sprintf("The requested resource of type Zone with the property %s with the value '%s' already exists.", prop, value),
		"Zone", prop, value).resolve("PATCH the existing zone's Links.Endpoints instead.")
}

func errMethod() *apiError {
	return newError(http.StatusMethodNotAllowed, baseRegistry+"OperationNotAllowed",
		"The HTTP method is not allowed on this resource.")
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
	id := MessageID(err)
	if id == "" {
		return errInternal(err)
	}
	status := http.StatusConflict
	if id == MsgUnknown {
		status = http.StatusBadRequest
	}
	e := newError(status, id, "The fabric refused the change: "+err.Error()+".", err.Error())
	e.msgs[0].resolution = "Nothing was changed. " + resolutions[id]
	return e
}

var resolutions = map[string]string{
	MsgUnknown:     "Name elements of this fabric.",
	MsgUnreachable: "Use a host port that reaches the device.",
	MsgDrawerHosts: "Detach another host's devices from the drawer first.",
	MsgPortBusy:    "Free the port first, or use another one.",
	MsgInUse:       "Detach the block from the host ports holding it first.",
	MsgFailed:      "Repair the element (or clear the injected fault) and retry.",
	MsgInjected:    "Retry, or clear the injected faults.",
}

// errorBody is the Redfish error body of e.
func errorBody(e *apiError) map[string]any {
	var info []any
	for _, m := range e.msgs {
		args := m.args
		if args == nil {
			args = []string{}
		}
		entry := map[string]any{
			"@odata.type":     "#Message.v1_1_1.Message",
			"MessageId":       m.id,
			"Message":         m.text,
			"MessageArgs":     args,
			"MessageSeverity": m.severity,
		}
		if m.resolution != "" {
			entry["Resolution"] = m.resolution
		}
		info = append(info, entry)
	}
	return map[string]any{"error": map[string]any{
		"code":                  e.msgs[0].id,
		"message":               e.msgs[0].text,
		"@Message.ExtendedInfo": info,
	}}
}

// writeError renders e as a Redfish error body.
func writeError(w http.ResponseWriter, e *apiError) {
	for k, v := range e.header {
		w.Header().Set(k, v)
	}
	if e.status == http.StatusUnauthorized {
		w.Header().Set("WWW-Authenticate", `Basic realm="rackpool fabric manager"`)
	}
	writeJSON(w, e.status, errorBody(e))
}

// writeJSON sends v as the JSON body.
func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.Header().Set("OData-Version", "4.0")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}
