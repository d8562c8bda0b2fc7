package rfdriver

import (
	"cmp"
	"fmt"
	"net/http"

	"rackpool/internal/rf"
)

// Error is an answer of the manager's that refuses or fails a request:
// a 4xx or 5xx, with the first @Message.ExtendedInfo entry when the body
// has one. It unwraps to the fabric error its MessageId maps to, if any.
type Error struct {
	Method, URL string
	Status      int
	MessageID   string // "" when the body had no Redfish error
	Message     string
	mapped      error
}

func (e *Error) Error() string {
	return rf.ErrorText(fmt.Sprintf("%s %s: %d %s", e.Method, e.URL, e.Status, http.StatusText(e.Status)), e.MessageID, e.Message)
}

// Unwrap returns the fabric error the MessageId maps to, or nil.
func (e *Error) Unwrap() error { return e.mapped }

// statusError makes the Error of an answer that is not a success. A body
// that is not a Redfish error is quoted (shortened), never trusted.
func statusError(r *rf.Reply) *Error {
	e := &Error{Method: r.Method, URL: r.URL, Status: r.Status}
	if body, ok := rf.ParseError(r.Body); ok {
		e.MessageID, e.Message = body.Headline()
		for i, m := range body.Info {
			// A fabric refusal may follow a Base message (the property
			// that was wrong): the first entry that maps wins.
			if mapped := rf.FabricErrors[m.MessageID]; mapped != nil && e.mapped == nil {
				e.mapped = mapped
				if i > 0 {
					e.Message += " (" + m.MessageID + ": " + m.Message + ")"
				}
			}
		}
		if e.mapped == nil {
			e.mapped = rf.FabricErrors[e.MessageID]
		}
	} else {
		e.Message = cmp.Or(rf.QuoteBody(r.Body), "no body")
	}
	return e
}

// taskMessageError makes the Error of a task that ended in Exception.
func taskMessageError(r *rf.Reply, status int, id, msg string) *Error {
	if status == 0 || status < 400 {
		status = http.StatusBadRequest
	}
	e := &Error{Method: r.Method, URL: r.URL, Status: status, MessageID: id, Message: msg}
	if e.Message == "" {
		e.Message = "task ended in Exception"
	}
	e.mapped = rf.FabricErrors[id]
	return e
}
