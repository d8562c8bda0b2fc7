package events

import (
	"strconv"
	"strings"
)

// RegistryMessage is one message of a Redfish message registry: its ID as
// events carry it (prefix.major.minor.key), its text with %1..%n
// placeholders, and its severity.
type RegistryMessage struct {
	ID       string
	Text     string
	Severity string
	NumArgs  int
}

// Format returns the message text with each %n (1-based) replaced by
// args[n-1], in one pass, so an argument containing "%1" stays as it is.
// A placeholder without an argument is left in place.
func (m RegistryMessage) Format(args ...string) string {
	var b strings.Builder
	text := m.Text
	for {
		i := strings.IndexByte(text, '%')
		if i < 0 {
			b.WriteString(text)
			return b.String()
		}
		b.WriteString(text[:i])
		text = text[i+1:]
		j := 0
		for j < len(text) && '0' <= text[j] && text[j] <= '9' {
			j++
		}
		n, err := strconv.Atoi(text[:j])
		if j == 0 || err != nil || n < 1 || n > len(args) {
			b.WriteByte('%')
			continue
		}
		b.WriteString(args[n-1])
		text = text[j:]
	}
}

// Event returns an event carrying m with args filled in.
func (m RegistryMessage) Event(typ, origin string, args ...string) Event {
	return Event{
		Type:      typ,
		MessageID: m.ID,
		Message:   m.Format(args...),
		Args:      args,
		Severity:  m.Severity,
		Origin:    origin,
	}
}

// Messages of the DMTF ResourceEvent 1.4.3 registry that the monitor
// publishes; the tests check them against the registry file.
var (
	ResourceStatusChangedOK = RegistryMessage{
		ID:       "ResourceEvent.1.4.ResourceStatusChangedOK",
		Text:     "The health of resource '%1' has changed to %2.",
		Severity: SeverityOK,
		NumArgs:  2,
	}
	ResourceStatusChangedWarning = RegistryMessage{
		ID:       "ResourceEvent.1.4.ResourceStatusChangedWarning",
		Text:     "The health of resource '%1' has changed to %2.",
		Severity: SeverityWarning,
		NumArgs:  2,
	}
	ResourceStatusChangedCritical = RegistryMessage{
		ID:       "ResourceEvent.1.4.ResourceStatusChangedCritical",
		Text:     "The health of resource '%1' has changed to %2.",
		Severity: SeverityCritical,
		NumArgs:  2,
	}
	ResourceErrorThresholdExceeded = RegistryMessage{
		ID:       "ResourceEvent.1.4.ResourceErrorThresholdExceeded",
		Text:     "The resource property %1 has exceeded error threshold of value %2.",
		Severity: SeverityCritical,
		NumArgs:  2,
	}
	ResourceErrorThresholdCleared = RegistryMessage{
		ID:       "ResourceEvent.1.4.ResourceErrorThresholdCleared",
		Text:     "The resource property %1 has cleared the error threshold of value %2.",
		Severity: SeverityOK,
		NumArgs:  2,
	}
)
