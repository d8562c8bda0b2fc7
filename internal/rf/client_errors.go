package rf

import (
	"cmp"
	"encoding/json"
	"fmt"
	"strings"

	"rackpool/internal/jsonlimit"
)

// ErrorBody is what the body of a Redfish error answer says.
type ErrorBody struct {
	Code    string    // error.code
	Message string    // error.message
	Info    []Message // error.@Message.ExtendedInfo, in order
}

// Message is one @Message.ExtendedInfo entry.
type Message struct {
	MessageID string `json:"MessageId"`
	Message   string `json:"Message"`
}

// ParseError reads the body of an answer that is not a success. ok is
// false when it is not a Redfish error: not JSON, or neither an error.code
// nor an @Message.ExtendedInfo entry.
func ParseError(body []byte) (b ErrorBody, ok bool) {
	var doc struct {
		Error struct {
			Code    string    `json:"code"`
			Message string    `json:"message"`
			Info    []Message `json:"@Message.ExtendedInfo"`
		} `json:"error"`
	}
	if jsonlimit.Check(body, jsonlimit.MaxDepth) != nil || json.Unmarshal(body, &doc) != nil || doc.Error.Code == "" && len(doc.Error.Info) == 0 {
		return ErrorBody{}, false
	}
	return ErrorBody{Code: doc.Error.Code, Message: doc.Error.Message, Info: doc.Error.Info}, true
}

// Headline is what an error names the answer by: the first
// @Message.ExtendedInfo entry's MessageId and Message, each else the
// error's code and message.
func (b ErrorBody) Headline() (messageID, message string) {
	messageID, message = b.Code, b.Message
	if len(b.Info) > 0 {
		messageID, message = cmp.Or(b.Info[0].MessageID, messageID), cmp.Or(b.Info[0].Message, message)
	}
	return messageID, message
}

// ErrorText is the text of an error about an answer: head ("GET URL: 404
// Not Found"), then " (MessageId)" and ": message", each where not empty.
func ErrorText(head, messageID, message string) string {
	var b strings.Builder
	b.WriteString(head)
	if messageID != "" {
		fmt.Fprintf(&b, " (%s)", messageID)
	}
	if message != "" {
		b.WriteString(": " + message)
	}
	return b.String()
}

// QuoteBody is a body that is not a Redfish error, for an error message:
// `body: "…"`, trimmed, shortened to 200 bytes and quoted (never trusted);
// "" for a blank body.
func QuoteBody(body []byte) string {
	s := strings.TrimSpace(string(body))
	if s == "" {
		return ""
	}
	const n = 200
	if len(s) > n {
		s = s[:n] + "…"
	}
	return fmt.Sprintf("body: %q", s)
}
