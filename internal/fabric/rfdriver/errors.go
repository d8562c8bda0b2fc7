package rfdriver

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
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
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s: %d %s", e.Method, e.URL, e.Status, http.StatusText(e.Status))
	if e.MessageID != "" {
		fmt.Fprintf(&b, " (%s)", e.MessageID)
	}
	if e.Message != "" {
		b.WriteString(": " + e.Message)
	}
	return b.String()
}

// Unwrap returns the fabric error the MessageId maps to, or nil.
func (e *Error) Unwrap() error { return e.mapped }

// redfishError is the body of a Redfish error answer.
type redfishError struct {
	Error struct {
		Code    string `json:"code"`
		Message string `json:"message"`
		Info    []struct {
			MessageID string `json:"MessageId"`
			Message   string `json:"Message"`
		} `json:"@Message.ExtendedInfo"`
	} `json:"error"`
}

// statusError makes the Error of an answer that is not a success. A body
// that is not a Redfish error is quoted (shortened), never trusted.
func statusError(r *reply) *Error {
	e := &Error{Method: r.method, URL: r.url, Status: r.status}
	var body redfishError
	if json.Unmarshal(r.body, &body) == nil && (body.Error.Code != "" || len(body.Error.Info) > 0) {
		e.MessageID, e.Message = body.Error.Code, body.Error.Message
		for i, m := range body.Error.Info {
			if i == 0 && m.MessageID != "" {
				e.MessageID, e.Message = m.MessageID, cmp.Or(m.Message, e.Message)
			}
			// A fabric refusal may follow a Base message (the property
			// that was wrong): the first entry that maps wins.
			if mapped := messageError(m.MessageID); mapped != nil && e.mapped == nil {
				e.mapped = mapped
				if i > 0 {
					e.Message += " (" + m.MessageID + ": " + m.Message + ")"
				}
			}
		}
		if e.mapped == nil {
			e.mapped = messageError(e.MessageID)
		}
	} else if s := strings.TrimSpace(string(r.body)); s != "" {
		e.Message = "body: " + quote(s)
	} else {
		e.Message = "no body"
	}
	return e
}

// taskMessageError makes the Error of a task that ended in Exception.
func taskMessageError(r *reply, status int, id, msg string) *Error {
	if status == 0 || status < 400 {
		status = http.StatusBadRequest
	}
	e := &Error{Method: r.method, URL: r.url, Status: status, MessageID: id, Message: msg}
	if e.Message == "" {
		e.Message = "task ended in Exception"
	}
	e.mapped = messageError(id)
	return e
}

// quote shortens s for an error message.
func quote(s string) string {
	const n = 200
	if len(s) > n {
		s = s[:n] + "…"
	}
	return fmt.Sprintf("%q", s)
}

// decode parses the JSON answer r into out. A syntax error or a property
// of the wrong type fails with the URL and the property's path.
func decode(r *reply, out any) error {
	if len(r.body) == 0 {
		return fmt.Errorf("%s %s: %d with an empty body, want JSON", r.method, r.url, r.status)
	}
	err := json.Unmarshal(r.body, out)
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &se):
		return fmt.Errorf("%s %s: malformed JSON at byte %d: %v", r.method, r.url, se.Offset, se)
	case errors.As(err, &te):
		field := te.Field
		if field == "" {
			field = "(the document)"
		}
		return fmt.Errorf("%s %s: property %s is a JSON %s, want %s", r.method, r.url, field, te.Value, jsonKind(te.Type.Kind().String()))
	default:
		return fmt.Errorf("%s %s: bad JSON: %v", r.method, r.url, err)
	}
}

// jsonKind names a Go kind the way JSON does.
func jsonKind(k string) string {
	switch k {
	case "string":
		return "a string"
	case "slice", "array":
		return "an array"
	case "struct", "map":
		return "an object"
	case "bool":
		return "a boolean"
	}
	return "a number"
}
