package rfdriver

import (
	"fmt"
	"net/url"
	"strings"

	"rackpool/internal/fabric"
)

// The few properties of each Redfish resource the driver reads. Anything
// else a manager sends is ignored; these must have the right JSON types.

type link struct {
	ID string `json:"@odata.id"`
}

// last is the link's last path segment: the linked resource's Id by
// Redfish convention.
func (l link) last() string {
	id := strings.TrimRight(l.ID, "/")
	return id[strings.LastIndex(id, "/")+1:]
}

type collection struct {
	Members []link `json:"Members"`
	// NextLink pages a long collection.
	NextLink string `json:"Members@odata.nextLink"`
}

type status struct {
	State  *string `json:"State"`
	Health *string `json:"Health"`
}

// health reads Status.Health; absent or null is OK (no fault reported).
func (s *status) health() (fabric.Health, error) {
	if s == nil || s.Health == nil {
		return fabric.OK, nil
	}
	switch h := fabric.Health(*s.Health); h {
	case fabric.OK, fabric.Warning, fabric.Critical:
		return h, nil
	}
	return "", fmt.Errorf("Status.Health is %q, want OK, Warning or Critical", *s.Health)
}

type fabricRes struct {
	ID          string `json:"Id"`
	Endpoints   *link  `json:"Endpoints"`
	Zones       *link  `json:"Zones"`
	Connections *link  `json:"Connections"`
	Actions     struct {
		Oem map[string]struct {
			Target string `json:"target"`
		} `json:"Oem"`
	} `json:"Actions"`
}

type endpointRes struct {
	ID                string `json:"Id"`
	ConnectedEntities []struct {
		EntityRole string `json:"EntityRole"`
		EntityLink *link  `json:"EntityLink"`
	} `json:"ConnectedEntities"`
	Status *status `json:"Status"`
}

type zoneRes struct {
	ID       string `json:"Id"`
	ZoneType string `json:"ZoneType"`
	Links    struct {
		Endpoints []link `json:"Endpoints"`
	} `json:"Links"`
}

type chunkInfo struct {
	MemoryChunk        link     `json:"MemoryChunk"`
	AccessCapabilities []string `json:"AccessCapabilities,omitempty"`
}

type connectionRes struct {
	ID              string      `json:"Id"`
	ConnectionType  string      `json:"ConnectionType"`
	MemoryChunkInfo []chunkInfo `json:"MemoryChunkInfo"`
	Links           struct {
		InitiatorEndpoints []link `json:"InitiatorEndpoints"`
		TargetEndpoints    []link `json:"TargetEndpoints"`
	} `json:"Links"`
}

type taskRes struct {
	ODataType  string `json:"@odata.type"`
	TaskState  string `json:"TaskState"`
	TaskStatus string `json:"TaskStatus"`
	Messages   []struct {
		MessageID string `json:"MessageId"`
		Message   string `json:"Message"`
	} `json:"Messages"`
	Payload *struct {
		HTTPStatus *int `json:"HttpStatusCode"`
	} `json:"Payload"`
}

// norm is the comparable form of a link: its path without a trailing
// slash (a manager may list links absolute or relative).
func norm(ref string) string {
	if u, err := url.Parse(ref); err == nil {
		ref = u.Path
	}
	return strings.TrimRight(ref, "/")
}
