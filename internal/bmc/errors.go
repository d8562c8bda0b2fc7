package bmc

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"

	"rackpool/internal/rf"
)

// ErrAuth is what an *Error of status 401 or 403 unwraps to: the BMC
// refused the account (Options.User and Options.Password), not the request.
// A caller must not pass it back to its own client as that client's 401.
var ErrAuth = errors.New("the BMC refused the account")

// Base registry MessageIds of the refusals the client makes itself (Local).
const (
	MsgActionParameterValueNotInList = "Base.1.22.ActionParameterValueNotInList"
	MsgPropertyValueNotInList        = "Base.1.22.PropertyValueNotInList"
	MsgPropertyMissing               = "Base.1.22.PropertyMissing"
)

// Error is an answer of the BMC's that refuses or fails a request — a 4xx
// or 5xx, with the first @Message.ExtendedInfo entry when the body has one
// — or a request the client refused itself (Local) because the BMC's own
// AllowableValues rule out a value.
type Error struct {
	Method, URL string
	Status      int
	// MessageID is the first @Message.ExtendedInfo MessageId, else the
	// error's code; "" when the body was not a Redfish error.
	MessageID string
	// Message is that entry's Message (else the error's message), or the
	// body quoted and shortened when it was not a Redfish error.
	Message string
	// Local: the client refused the request without sending it.
	Local bool
}

func (e *Error) Error() string {
	head := fmt.Sprintf("%s %s: %d %s", e.Method, e.URL, e.Status, http.StatusText(e.Status))
	if e.Local {
		head = fmt.Sprintf("%s %s: refused before sending (%d %s)", e.Method, e.URL, e.Status, http.StatusText(e.Status))
	}
	return rf.ErrorText(head, e.MessageID, e.Message)
}

// Unwrap returns ErrAuth for a 401 or 403, else nil.
func (e *Error) Unwrap() error {
	if e.Status == http.StatusUnauthorized || e.Status == http.StatusForbidden {
		return ErrAuth
	}
	return nil
}

// TransportError is a request that failed on the way: it may not have
// reached the BMC, or its answer was lost (connection refused or reset,
// the request timeout, a TLS failure). For a Reset or SetBoot the outcome
// is unknown: read State to learn it.
type TransportError struct {
	Method, URL string
	Err         error
	untrusted   bool // the certificate: asking again will not help
}

func (e *TransportError) Error() string { return fmt.Sprintf("%s %s: %v", e.Method, e.URL, e.Err) }
func (e *TransportError) Unwrap() error { return e.Err }

// statusError makes the Error of an answer that is not a success: the
// first @Message.ExtendedInfo entry's MessageId and Message, each else the
// error's code and message. A body that is not a Redfish error is quoted
// (shortened), never trusted.
func statusError(r *rf.Reply) *Error {
	e := &Error{Method: r.Method, URL: r.URL, Status: r.Status}
	if body, ok := rf.ParseError(r.Body); ok {
		e.MessageID, e.Message = body.Headline()
	} else {
		e.Message = rf.QuoteBody(r.Body)
	}
	if e.Unwrap() == ErrAuth && e.Message == "" {
		e.Message = "check the account and password"
	}
	return e
}

// transportError wraps a failed request, with a hint for an untrusted
// certificate. A refused redirect is not a transport failure.
func transportError(method, u string, err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	var re *rf.RedirectError
	if errors.As(err, &re) {
		return fmt.Errorf("%s %s: %w", method, u, re)
	}
	if rf.Untrusted(err) {
		return &TransportError{Method: method, URL: u, Err: fmt.Errorf("the BMC's certificate is not trusted (give its CA): %w", err), untrusted: true}
	}
	return &TransportError{Method: method, URL: u, Err: err}
}
