package events

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"
)

// EventODataType is the schema version of the payloads Payload writes.
const EventODataType = "#Event.v1_9_0.Event"

// payload is the Redfish Event resource: what a push destination receives
// in one POST and what each SSE data line carries.
type payload struct {
	ODataType string        `json:"@odata.type"`
	ID        string        `json:"Id"`
	Name      string        `json:"Name"`
	Context   string        `json:"Context,omitempty"`
	Events    []eventRecord `json:"Events"`
}

// eventRecord is one entry of an Event resource's Events array.
type eventRecord struct {
	MemberID          string         `json:"MemberId"`
	EventID           string         `json:"EventId"`
	EventType         string         `json:"EventType"`
	EventTimestamp    string         `json:"EventTimestamp"`
	Severity          string         `json:"Severity"`
	MessageSeverity   string         `json:"MessageSeverity"`
	Message           string         `json:"Message"`
	MessageID         string         `json:"MessageId"`
	MessageArgs       []string       `json:"MessageArgs"`
	OriginOfCondition *odataID       `json:"OriginOfCondition,omitempty"`
	Oem               map[string]any `json:"Oem,omitempty"`
}

type odataID struct {
	ID string `json:"@odata.id"`
}

// Payload returns the Redfish Event resource (Event.v1_9_0) carrying evs,
// as JSON on one line: what a push destination receives, and, for one
// event and a zero d, what an SSE data line carries. d.Context is included
// when set. The resource's Id is the first event's ID.
//
// Each record's EventType is the event's Type when it is one of the Type
// constants and "Other" otherwise; MessageSeverity is its Severity when
// that is OK, Warning or Critical and "OK" otherwise (empty Severity is
// written as "OK" too). An Oem value that cannot be encoded as JSON is
// left out of the record rather than failing the payload.
func Payload(d Destination, evs ...Event) []byte {
	p := payload{
		ODataType: EventODataType,
		Name:      "Event",
		Context:   d.Context,
		Events:    make([]eventRecord, 0, len(evs)),
	}
	if len(evs) > 0 {
		p.ID = strconv.FormatUint(evs[0].ID, 10)
	}
	for i, e := range evs {
		r := eventRecord{
			MemberID:        strconv.Itoa(i),
			EventID:         strconv.FormatUint(e.ID, 10),
			EventType:       payloadType(e.Type),
			EventTimestamp:  e.Time.UTC().Format(time.RFC3339Nano),
			Severity:        e.Severity,
			MessageSeverity: health(e.Severity),
			Message:         e.Message,
			MessageID:       e.MessageID,
			MessageArgs:     e.Args,
			Oem:             e.Oem,
		}
		if r.Severity == "" {
			r.Severity = SeverityOK
		}
		if r.MessageArgs == nil {
			r.MessageArgs = []string{}
		}
		if e.Origin != "" {
			r.OriginOfCondition = &odataID{e.Origin}
		}
		if len(r.Oem) > 0 {
			if _, err := json.Marshal(r.Oem); err != nil {
				r.Oem = nil
			}
		}
		p.Events = append(p.Events, r)
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(p); err != nil {
		// Every field is a string, a slice of strings or an Oem map that
		// was checked above.
		panic(fmt.Sprintf("events: encode payload: %v", err))
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
}

// payloadType is t when it is a Redfish EventType, else "Other".
func payloadType(t string) string {
	switch t {
	case TypeStatusChange, TypeResourceUpdated, TypeResourceAdded, TypeResourceRemoved, TypeAlert, TypeOther:
		return t
	}
	return TypeOther
}

// health is sev when it is a Resource.Health value, else "OK".
func health(sev string) string {
	switch sev {
	case SeverityOK, SeverityWarning, SeverityCritical:
		return sev
	}
	return SeverityOK
}

// WriteSSE writes e as one server-sent event in the Redfish SSE format:
//
//	id: <ID>
//	data: <Payload(Destination{}, e)>
//	<blank line>
//
// The caller flushes.
func WriteSSE(w io.Writer, e Event) error {
	var b bytes.Buffer
	b.WriteString("id: ")
	b.WriteString(strconv.FormatUint(e.ID, 10))
	b.WriteString("\ndata: ")
	b.Write(Payload(Destination{}, e))
	b.WriteString("\n\n")
	_, err := w.Write(b.Bytes())
	return err
}

// Match reports whether d should receive e: e must be visible to d's
// owner (Visible(d.Tenant, e)), and pass each of d's filters that is set —
// EventTypes (the event's Type, or the EventType Payload writes for it),
// RegistryPrefixes (the part of MessageID before its first dot) and
// OriginResources (the event's Origin, exactly, ignoring a trailing slash).
// An empty filter list matches everything.
func Match(d Destination, e Event) bool {
	if !Visible(d.Tenant, e) {
		return false
	}
	if len(d.EventTypes) > 0 && !slices.Contains(d.EventTypes, e.Type) && !slices.Contains(d.EventTypes, payloadType(e.Type)) {
		return false
	}
	if len(d.RegistryPrefixes) > 0 {
		prefix, _, _ := strings.Cut(e.MessageID, ".")
		if !slices.Contains(d.RegistryPrefixes, prefix) {
			return false
		}
	}
	if len(d.OriginResources) > 0 {
		origin := strings.TrimSuffix(e.Origin, "/")
		if !slices.ContainsFunc(d.OriginResources, func(o string) bool { return strings.TrimSuffix(o, "/") == origin }) {
			return false
		}
	}
	return true
}
