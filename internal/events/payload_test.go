package events

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"math"
	"os"
	"strings"
	"testing"
	"time"
)

func sampleEvent() Event {
	return Event{
		ID:        42,
		Time:      time.Date(2025, 3, 14, 15, 9, 26, 500_000_000, time.FixedZone("X", 3600)),
		Type:      TypeStatusChange,
		MessageID: "ResourceEvent.1.4.ResourceStatusChangedCritical",
		Message:   "The health of resource 'gpu1' has changed to Critical.",
		Args:      []string{"gpu1", "Critical"},
		Severity:  SeverityCritical,
		Origin:    "/redfish/v1/Fabrics/falcon1/Endpoints/gpu1",
		Tenant:    "t1",
		Oem:       map[string]any{"Rackpool": map[string]any{"Fabric": "falcon1", "Device": "gpu1"}},
	}
}

func TestPayloadGolden(t *testing.T) {
	e := sampleEvent()
	plain := Event{ID: 43, Time: time.Date(2025, 3, 14, 15, 9, 27, 0, time.UTC), Type: "ResourceEvent", Severity: "Informational", Message: "<&>"}
	tests := []struct {
		name string
		d    Destination
		evs  []Event
		want string
	}{
		{
			name: "one event with context",
			d:    Destination{ID: "1", Context: "ctx-1"},
			evs:  []Event{e},
			want: `{"@odata.type":"#Event.v1_9_0.Event","Id":"42","Name":"Event","Context":"ctx-1","Events":[` +
				`{"MemberId":"0","EventId":"42","EventType":"StatusChange","EventTimestamp":"2025-03-14T14:09:26.5Z",` +
				`"Severity":"Critical","MessageSeverity":"Critical","Message":"The health of resource 'gpu1' has changed to Critical.",` +
				`"MessageId":"ResourceEvent.1.4.ResourceStatusChangedCritical","MessageArgs":["gpu1","Critical"],` +
				`"OriginOfCondition":{"@odata.id":"/redfish/v1/Fabrics/falcon1/Endpoints/gpu1"},` +
				`"Oem":{"Rackpool":{"Device":"gpu1","Fabric":"falcon1"}}}]}`,
		},
		{
			name: "no context, unknown type and severity, no origin or args",
			evs:  []Event{plain},
			want: `{"@odata.type":"#Event.v1_9_0.Event","Id":"43","Name":"Event","Events":[` +
				`{"MemberId":"0","EventId":"43","EventType":"Other","EventTimestamp":"2025-03-14T15:09:27Z",` +
				`"Severity":"Informational","MessageSeverity":"OK","Message":"<&>","MessageId":"","MessageArgs":[]}]}`,
		},
		{
			name: "batch",
			d:    Destination{Context: "c"},
			evs:  []Event{{ID: 7, Time: t0}, {ID: 8, Time: t0}},
			want: `{"@odata.type":"#Event.v1_9_0.Event","Id":"7","Name":"Event","Context":"c","Events":[` +
				`{"MemberId":"0","EventId":"7","EventType":"Other","EventTimestamp":"2025-03-14T15:09:26Z","Severity":"OK","MessageSeverity":"OK","Message":"","MessageId":"","MessageArgs":[]},` +
				`{"MemberId":"1","EventId":"8","EventType":"Other","EventTimestamp":"2025-03-14T15:09:26Z","Severity":"OK","MessageSeverity":"OK","Message":"","MessageId":"","MessageArgs":[]}]}`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := string(Payload(tt.d, tt.evs...))
			if got != tt.want {
				t.Fatalf("payload\n%s\nwant\n%s", got, tt.want)
			}
			if !json.Valid([]byte(got)) {
				t.Fatal("not valid JSON")
			}
		})
	}
}

func TestPayloadDropsUnencodableOem(t *testing.T) {
	e := sampleEvent()
	e.Oem = map[string]any{"Rackpool": map[string]any{"Bad": math.NaN()}}
	var p struct {
		Events []map[string]any
	}
	if err := json.Unmarshal(Payload(Destination{}, e), &p); err != nil {
		t.Fatal(err)
	}
	if _, ok := p.Events[0]["Oem"]; ok {
		t.Fatalf("unencodable Oem kept: %v", p.Events[0])
	}
	if p.Events[0]["MessageId"] != e.MessageID {
		t.Fatalf("record lost with its Oem: %v", p.Events[0])
	}
}

func TestWriteSSE(t *testing.T) {
	e := sampleEvent()
	e.Message = "line one\nline two" // JSON escapes it: data stays one line
	var b bytes.Buffer
	if err := WriteSSE(&b, e); err != nil {
		t.Fatal(err)
	}
	want := "id: 42\ndata: " + string(Payload(Destination{}, e)) + "\n\n"
	if b.String() != want {
		t.Fatalf("got %q\nwant %q", b.String(), want)
	}
	// Read it back as an SSE client does.
	sc := bufio.NewScanner(&b)
	var id, data string
	lines := 0
	for sc.Scan() {
		line := sc.Text()
		lines++
		switch {
		case strings.HasPrefix(line, "id: "):
			id = strings.TrimPrefix(line, "id: ")
		case strings.HasPrefix(line, "data: "):
			data = strings.TrimPrefix(line, "data: ")
		case line == "":
		default:
			t.Fatalf("unexpected line %q", line)
		}
	}
	if lines != 3 || id != "42" {
		t.Fatalf("%d lines, id %q", lines, id)
	}
	var p struct {
		Context *string
		Events  []struct{ EventId, Message string }
	}
	if err := json.Unmarshal([]byte(data), &p); err != nil {
		t.Fatal(err)
	}
	if p.Context != nil || len(p.Events) != 1 || p.Events[0].EventId != "42" || p.Events[0].Message != e.Message {
		t.Fatalf("data decodes to %+v", p)
	}
	if err := WriteSSE(failingWriter{}, e); err == nil {
		t.Fatal("WriteSSE hid a write error")
	}
}

type failingWriter struct{}

func (failingWriter) Write([]byte) (int, error) { return 0, errors.New("broken pipe") }

func TestMatch(t *testing.T) {
	e := sampleEvent() // StatusChange, ResourceEvent registry, tenant t1
	other := Event{Type: "ResourceEvent", MessageID: "Composition.1.1.ResourceBlockCompositionStateChanged", Origin: "/redfish/v1/Systems/s1/"}
	tests := []struct {
		name string
		d    Destination
		e    Event
		want bool
	}{
		{"no filters", Destination{}, e, true},
		{"event type", Destination{EventTypes: []string{TypeAlert, TypeStatusChange}}, e, true},
		{"other event type", Destination{EventTypes: []string{TypeAlert}}, e, false},
		{"unknown type matches Other", Destination{EventTypes: []string{TypeOther}}, other, true},
		{"unknown type matches itself", Destination{EventTypes: []string{"ResourceEvent"}}, other, true},
		{"registry prefix", Destination{RegistryPrefixes: []string{"ResourceEvent"}}, e, true},
		{"other registry prefix", Destination{RegistryPrefixes: []string{"Composition"}}, e, false},
		{"prefix is the part before the first dot", Destination{RegistryPrefixes: []string{"ResourceEvent.1.4"}}, e, false},
		{"composition prefix", Destination{RegistryPrefixes: []string{"Composition"}}, other, true},
		{"origin", Destination{OriginResources: []string{"/redfish/v1/Fabrics/falcon1/Endpoints/gpu1"}}, e, true},
		{"origin with trailing slash", Destination{OriginResources: []string{"/redfish/v1/Fabrics/falcon1/Endpoints/gpu1/"}}, e, true},
		{"event origin with trailing slash", Destination{OriginResources: []string{"/redfish/v1/Systems/s1"}}, other, true},
		{"other origin", Destination{OriginResources: []string{"/redfish/v1/Fabrics/falcon1/Endpoints/gpu2"}}, e, false},
		{"origin prefix is not enough", Destination{OriginResources: []string{"/redfish/v1/Fabrics/falcon1"}}, e, false},
		{"all filters pass", Destination{EventTypes: []string{TypeStatusChange}, RegistryPrefixes: []string{"ResourceEvent"}, OriginResources: []string{e.Origin}}, e, true},
		{"one filter fails", Destination{EventTypes: []string{TypeStatusChange}, RegistryPrefixes: []string{"Base"}, OriginResources: []string{e.Origin}}, e, false},
		{"tenant owner sees own tenant", Destination{Tenant: "t1"}, e, true},
		{"tenant owner does not see another's", Destination{Tenant: "t2"}, e, false},
		{"tenant owner does not see operators' events", Destination{Tenant: "t1"}, other, false},
		{"operator sees everything", Destination{}, other, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Match(tt.d, tt.e); got != tt.want {
				t.Fatalf("Match = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestRegistryMessageFormat(t *testing.T) {
	m := RegistryMessage{Text: "Resource '%1' is %2; again %1, %3 and 100%."}
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"all args", []string{"gpu1", "OK", "x"}, "Resource 'gpu1' is OK; again gpu1, x and 100%."},
		{"missing args stay", []string{"gpu1"}, "Resource 'gpu1' is %2; again gpu1, %3 and 100%."},
		{"args are not re-expanded", []string{"%2", "%1", "%3"}, "Resource '%2' is %1; again %2, %3 and 100%."},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := m.Format(tt.args...); got != tt.want {
				t.Fatalf("Format = %q, want %q", got, tt.want)
			}
		})
	}
	ten := RegistryMessage{Text: "%10 then %1"}
	args := []string{"a", "b", "c", "d", "e", "f", "g", "h", "i", "j"}
	if got := ten.Format(args...); got != "j then a" {
		t.Fatalf("%%10: %q", got)
	}
}

// TestMessagesInRegistry checks every message the package publishes
// against the DMTF ResourceEvent 1.4.3 registry (testdata/README.md).
func TestMessagesInRegistry(t *testing.T) {
	data, err := os.ReadFile("testdata/ResourceEvent.1.4.3.json")
	if err != nil {
		t.Fatal(err)
	}
	var reg struct {
		RegistryPrefix  string
		RegistryVersion string
		Messages        map[string]struct {
			Message         string
			MessageSeverity string
			NumberOfArgs    int
		}
	}
	if err := json.Unmarshal(data, &reg); err != nil {
		t.Fatal(err)
	}
	for _, m := range []RegistryMessage{
		ResourceStatusChangedOK, ResourceStatusChangedWarning, ResourceStatusChangedCritical,
		ResourceErrorThresholdExceeded, ResourceErrorThresholdCleared,
	} {
		parts := strings.Split(m.ID, ".")
		if len(parts) != 4 || parts[0] != reg.RegistryPrefix || !strings.HasPrefix(reg.RegistryVersion, parts[1]+"."+parts[2]+".") {
			t.Errorf("%s: not a %s %s message ID", m.ID, reg.RegistryPrefix, reg.RegistryVersion)
			continue
		}
		rm, ok := reg.Messages[parts[3]]
		switch {
		case !ok:
			t.Errorf("%s: not in the registry", m.ID)
		case rm.Message != m.Text:
			t.Errorf("%s: text %q, registry has %q", m.ID, m.Text, rm.Message)
		case rm.MessageSeverity != m.Severity:
			t.Errorf("%s: severity %s, registry has %s", m.ID, m.Severity, rm.MessageSeverity)
		case rm.NumberOfArgs != m.NumArgs:
			t.Errorf("%s: %d args, registry has %d", m.ID, m.NumArgs, rm.NumberOfArgs)
		}
	}
}

func FuzzPayload(f *testing.F) {
	f.Add(uint64(1), "StatusChange", "ResourceEvent.1.4.X", "msg", "a", "Critical", "/redfish/v1/x", "ctx")
	f.Add(uint64(0), "", "", "line\nbreak\"quote\\", "\xff", "", "", "")
	f.Fuzz(func(t *testing.T, id uint64, typ, msgID, msg, arg, sev, origin, ctx string) {
		e := Event{ID: id, Time: t0, Type: typ, MessageID: msgID, Message: msg, Args: []string{arg}, Severity: sev, Origin: origin}
		p := Payload(Destination{Context: ctx}, e)
		var back struct {
			Events []map[string]any
		}
		if err := json.Unmarshal(p, &back); err != nil {
			t.Fatalf("payload is not JSON: %v\n%s", err, p)
		}
		if len(back.Events) != 1 {
			t.Fatalf("%d events", len(back.Events))
		}
		var b bytes.Buffer
		if err := WriteSSE(&b, e); err != nil {
			t.Fatal(err)
		}
		if n := strings.Count(b.String(), "\n"); n != 3 {
			t.Fatalf("SSE frame has %d newlines, want 3: %q", n, b.String())
		}
	})
}
