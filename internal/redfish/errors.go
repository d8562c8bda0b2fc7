package redfish

import (
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"rackpool/internal/compose"
	"rackpool/internal/fabric"
	"rackpool/internal/redfish/oem"
	"rackpool/internal/redfish/service"
	"rackpool/internal/rf"
	"rackpool/internal/schedule"
	"rackpool/internal/store"
)

// Registry prefixes of the message IDs rackpool uses.
const (
	baseRegistry        = rf.Registry
	compositionRegistry = "Composition.1.1."
)

// apiError is an error with its HTTP status and Redfish message. Handlers
// return one; writeError renders it as the Redfish error body, the one
// shape every error leaves the service in.
type apiError struct {
	status     int
	id         string // message ID with registry prefix
	message    string
	args       []string
	severity   string
	resolution string
	related    []string // RelatedProperties: JSON pointers of the properties at fault
	noBasic    bool     // a 401 without the Basic challenge (sessionClient)
	oem        any      // extra detail under Oem.Rackpool (e.g. rejections)
	internal   error    // what went wrong inside: logged with the request ID, never sent
}

func (e *apiError) Error() string { return e.message }

// withResolution sets the resolution text and returns e.
func (e *apiError) withResolution(r string) *apiError {
	e.resolution = r
	return e
}

// fromProblem is the northbound error of a Base registry problem.
func fromProblem(p *rf.Problem) *apiError {
	e := &apiError{status: p.Status, id: p.ID, message: p.Text, args: p.Args, severity: p.Severity, resolution: p.Resolution,
		related: p.Related, internal: p.Internal}
	if o, ok := p.Oem["Rackpool"]; ok {
		e.oem = o
	}
	return e
}

func newError(status int, id, msg string, args ...string) *apiError {
	return fromProblem(rf.New(status, id, msg, args...))
}

func errNotFound(kind, name string) *apiError { return fromProblem(rf.NotFound(kind, name)) }

func errPropertyMissing(prop string) *apiError { return fromProblem(rf.PropertyMissing(prop)) }

func errPropertyValue(prop, value, why string) *apiError {
	return fromProblem(rf.PropertyValue(prop, value, why))
}

// sessionClient reports whether r comes from a client that logs in with a
// session rather than Basic credentials: it sent a session token, or it
// says it is a script in a page (X-Requested-With, as the console and most
// browser front ends send). A 401 to such a client carries no Basic
// challenge: a browser would answer one with its own password prompt, and
// a headless one waits on it forever, instead of letting the page show
// its login form.
func sessionClient(r *http.Request) bool {
	return r.Header.Get("X-Auth-Token") != "" || r.Header.Get("X-Requested-With") == "XMLHttpRequest"
}

func errNoSession() *apiError {
	return newError(http.StatusUnauthorized, baseRegistry+"NoValidSession",
		"There is no valid session established with the implementation.")
}

func errPrivilege() *apiError { return fromProblem(rf.InsufficientPrivilege()) }

// errInsecure refuses credentials sent over plain HTTP: Redfish (DSP0266)
// accepts Basic authentication and creates sessions only over HTTPS.
// Refused before the password is checked, so it counts no failed login.
func errInsecure(uri string) *apiError {
	e := newError(http.StatusForbidden, baseRegistry+"AccessDenied",
		fmt.Sprintf("While attempting to establish a connection to '%s', the service denied access.", uri), uri)
	e.resolution = "Credentials are accepted only over HTTPS: send the request to the service's https:// URL (this one serves plain HTTP because it was started with --insecure-http)."
	return e
}

// errInternal answers an error the client cannot act on: the client gets
// the Redfish message and a request ID (Server.fail), the log gets err.
func errInternal(err error) *apiError {
	e := newError(http.StatusInternalServerError, baseRegistry+"InternalError",
		"The request failed due to an internal service error.  The service is still operational.")
	e.internal = err
	return e
}

// translate maps workflow and scheduler errors to Redfish errors.
func translate(err error) *apiError {
	var ae *apiError
	if errors.As(err, &ae) {
		return ae
	}
	var p *rf.Problem
	if errors.As(err, &p) {
		return fromProblem(p)
	}
	if p, ok := oem.TranslateLease(err); ok {
		return fromProblem(p)
	}
	if p, ok := oem.TranslateDrive(err); ok {
		return fromProblem(p)
	}
	if e, ok := translateTenancy(err); ok {
		return e
	}
	var u *schedule.Unsatisfiable
	switch {
	case errors.As(err, &u):
		status := http.StatusConflict
		if u.Never {
			status = http.StatusBadRequest
		}
		kind := "ResourceBlock"
		for _, r := range u.Rejections {
			if r.Block != "" && r.Reason == schedule.InUse {
				e := newError(http.StatusConflict, compositionRegistry+"ResourceBlockInUse",
					fmt.Sprintf("Resource block '%s' cannot be part of any new compositions.", r.Block), r.Block)
				e.resolution = r.Detail
				e.oem = map[string]any{"Rejections": u.Rejections}
				return e
			}
		}
		e := newError(status, compositionRegistry+"NoResourceMatch",
			fmt.Sprintf("The requested resources of type '%s' are not available for allocation.", kind), kind)
		e.resolution = u.Error()
		e.oem = map[string]any{"Rejections": u.Rejections, "CanNeverFit": u.Never}
		return e
	case errors.Is(err, schedule.ErrUnknownBlock):
		id := strings.Trim(strings.TrimPrefix(err.Error(), schedule.ErrUnknownBlock.Error()+" "), `"`)
		return newError(http.StatusBadRequest, compositionRegistry+"ResourceBlockNotFound",
			fmt.Sprintf("Resource block '%s' was not found.", id), id)
	case errors.Is(err, schedule.ErrUnknownHost), errors.Is(err, schedule.ErrUnknownZone), errors.Is(err, schedule.ErrBadRequest),
		errors.Is(err, compose.ErrBadRequest):
		e := newError(http.StatusBadRequest, baseRegistry+"GeneralError", err.Error())
		e.resolution = "Correct the request and resubmit it."
		return e
	case errors.Is(err, compose.ErrNotFound):
		return errNotFound("ComputerSystem", strings.TrimPrefix(err.Error(), compose.ErrNotFound.Error()+": "))
	case errors.Is(err, compose.ErrQuota):
		return newError(http.StatusConflict, baseRegistry+"ResourceExhaustion",
			"The resource 'ResourceBlocks' was unable to satisfy the request due to unavailability of resources.", "ResourceBlocks").
			withResolution(err.Error() + "; ask an administrator to raise the tenant's quota or release resources.")
	case errors.Is(err, compose.ErrBusy):
		e := newError(http.StatusConflict, baseRegistry+"ResourceInUse",
			"The change to the requested resource failed because the resource is in use or in transition.")
		e.resolution = err.Error()
		return e
	case errors.Is(err, compose.ErrUnfinished):
		e := newError(http.StatusInternalServerError, baseRegistry+"OperationFailed",
			"An error occurred internal to the service as part of the overall request.  Partial results may have been returned.")
		e.internal = err
		e.resolution = "The system is being decomposed and will be: the service could not reach its database to finish. Retry the DELETE; a 404 then means it is done."
		return e
	case errors.Is(err, store.ErrUnavailable):
		// The database is unreachable, or this replica no longer leads:
		// nothing was changed; a load balancer retries elsewhere.
		return newError(http.StatusServiceUnavailable, baseRegistry+"ServiceTemporarilyUnavailable",
			"The service is temporarily unavailable.  Retry in 1 seconds.", "1").
			withResolution("The service's database is unreachable, or this replica no longer serves it; nothing was changed. Retry shortly.")
	case errors.Is(err, store.ErrConflict):
		e := newError(http.StatusConflict, baseRegistry+"ResourceInUse",
			"The change to the requested resource failed because the resource is in use or in transition.")
		e.resolution = "Another request changed what this one was decided on; read the resource again and retry."
		return e
	case errors.Is(err, compose.ErrPowerState):
		// What the reset needs is the system On: it is in standby, not busy.
		return newError(http.StatusConflict, baseRegistry+"ResourceInStandby",
			"The request could not be performed because the resource is in standby.").withResolution(err.Error())
	case errors.Is(err, compose.ErrPowered):
		e := newError(http.StatusConflict, baseRegistry+"ResourceInUse",
			"The change to the requested resource failed because the resource is in use or in transition.")
		e.resolution = err.Error()
		return e
	case errors.Is(err, compose.ErrPowerValue):
		return newError(http.StatusBadRequest, baseRegistry+"GeneralError", err.Error()).
			withResolution("Use one of the values the system's @Redfish.AllowableValues list.")
	case errors.Is(err, compose.ErrPowerHost):
		e := newError(http.StatusInternalServerError, baseRegistry+"OperationFailed",
			"An error occurred internal to the service as part of the overall request.  Partial results may have been returned.")
		e.resolution = err.Error() + "; GET the system for its power state and retry."
		return e
	case errors.Is(err, compose.ErrVersion):
		e := newError(http.StatusPreconditionFailed, baseRegistry+"PreconditionFailed",
			"The ETag supplied did not match the ETag required to change this resource.")
		e.resolution = err.Error()
		return e
	case errors.Is(err, compose.ErrHostStep):
		// The step and the agent's own words: what the operator of the
		// host needs, nothing internal to the service.
		var se *compose.StepError
		if errors.As(err, &se) && se.Step == compose.StepHostDrain {
			e := newError(http.StatusConflict, baseRegistry+"ResourceInUse",
				"The change to the requested resource failed because the resource is in use or in transition.")
			e.resolution = err.Error() + "; the system stays composed. Stop using its devices on the host and retry."
			return e
		}
		e := newError(http.StatusInternalServerError, baseRegistry+"OperationFailed",
			"An error occurred internal to the service as part of the overall request.  Partial results may have been returned.")
		e.resolution = err.Error() + "; the composition was rolled back. Check the host agent and retry."
		return e
	case errors.Is(err, compose.ErrAttach) && errors.Is(err, fabric.ErrInUse):
		// The fabric holds the block for something this service does not
		// know of (a vendor composer's own system): a conflict, not a
		// fault. Which fabric said what goes to the operator's log.
		e := newError(http.StatusConflict, baseRegistry+"ResourceInUse",
			"The change to the requested resource failed because the resource is in use or in transition.")
		e.internal = err
		e.resolution = "The fabric reports a requested block in use outside this service; the operation was rolled back. Choose other blocks, or free the block on the fabric and retry."
		return e
	case errors.Is(err, compose.ErrAttach), errors.Is(err, compose.ErrDetach):
		e := newError(http.StatusInternalServerError, baseRegistry+"OperationFailed",
			"An error occurred internal to the service as part of the overall request.  Partial results may have been returned.")
		e.internal = err // which fabric said what: for the operator's log
		e.resolution = "A fabric operation failed; the operation was rolled back. Retry the request."
		if errors.Is(err, compose.ErrDetach) {
			e.resolution = "A fabric operation failed; the system stays Decomposing. Retry the DELETE."
		}
		return e
	}
	return errInternal(err)
}

// problem is e as an *rf.Problem of its own (its slices copied), internal
// detail included.
func (e *apiError) problem() *rf.Problem {
	p := &rf.Problem{Status: e.status, ID: e.id, Text: e.message, Args: slices.Clone(e.args), Severity: e.severity,
		Resolution: e.resolution, Related: slices.Clone(e.related), Internal: e.internal}
	if e.oem != nil {
		p.Oem = map[string]any{"Rackpool": e.oem}
	}
	return p
}

// problem maps err to the Redfish error it is answered with (translate),
// as a Problem a resource family may reword before it returns it: the
// core renders it as it renders its own, internal detail logged.
func problem(err error) *rf.Problem { return translate(err).problem() }

// writeError renders e as a Redfish error body: one message, which
// always names its RelatedProperties, and carries e's OEM detail.
func writeError(w http.ResponseWriter, e *apiError) {
	p := e.problem()
	p.Related, p.Internal = nonNil(p.Related), nil
	if e.status == http.StatusUnauthorized && !e.noBasic {
		w.Header().Set("WWW-Authenticate", `Basic realm="rackpool"`)
	}
	if e.id == baseRegistry+"ServiceTemporarilyUnavailable" && len(e.args) == 1 {
		w.Header().Set("Retry-After", e.args[0])
	}
	if e.status == http.StatusMethodNotAllowed && w.Header().Get("Allow") == "" {
		w.Header().Set("Allow", "GET, HEAD")
	}
	rf.WriteError(w, p)
}

func nonNil(s []string) []string { return service.NonNil(s) }

// writeJSON sends v as the JSON body. A GET or HEAD answered 200 is first
// shaped by its query and given its ETag, Link and Allow headers
// (query.go); it may be answered 304, or 400 for a query the body cannot
// take.
func writeJSON(w http.ResponseWriter, status int, v any) { service.WriteJSON(w, status, v) }

// requestIDKey carries a request's ID in its context.
type requestIDKey struct{}

// requestID returns r's ID (ServeHTTP gives every request one and answers
// it in X-Request-Id).
func requestID(r *http.Request) string {
	id, _ := r.Context().Value(requestIDKey{}).(string)
	return id
}

// fail turns a handler's error into the Redfish error to answer r with.
// A server-side failure (5xx) leaves its internal detail in the log under
// the request's ID and tells the client only that ID to report.
func (s *Server) fail(r *http.Request, err error) *apiError {
	e := translate(err)
	if e.status < 500 {
		return e
	}
	id := requestID(r)
	detail := e.message
	if e.internal != nil {
		detail = e.internal.Error()
	}
	s.log.Error("request failed", "request_id", id, "method", r.Method, "path", r.URL.Path, "status", e.status, "err", detail)
	c := *e
	c.internal = nil
	if c.resolution != "" {
		c.resolution += " "
	}
	c.resolution += "If it persists, report request ID " + id + " to the operator."
	return &c
}
