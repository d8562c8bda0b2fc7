package api

import (
	"context"
	"fmt"
	"net/url"
	"time"
)

// hostAgentsPath is where host agents take their steps (docs/southbound.md).
const hostAgentsPath = "/redfish/v1/Oem/Rackpool/HostAgents"

// HostStep is one step of a composition saga for a host's agent: after the
// fabric attached Devices, "attach" (rescan, confirm each is visible and
// healthy); before the fabric detaches them, "detach" (drain, confirm they
// are gone).
type HostStep struct {
	ID          string
	Composition string
	Host        string
	Op          string // "attach" or "detach"
	Devices     []HostDevice
	// Have lists the composition's other devices, already on the host.
	Have     []HostDevice
	Deadline time.Time
}

// HostDevice is what an agent needs to find a device on its host.
type HostDevice struct {
	Block    string
	Device   string
	Kind     string
	Fabric   string // the fabric's kind
	VendorID string `json:",omitempty"`
	DeviceID string `json:",omitempty"`
	Serial   string `json:",omitempty"` // the topology's attrs.serial or attrs.wwn
	Bytes    int64  `json:",omitempty"`
}

// HostStepResult is an agent's answer to a step.
type HostStepResult struct {
	Success bool
	// Message says what failed (or, on success, what was done).
	Message string
}

type hostSteps struct {
	Members []HostStep
}

// HostSteps long-polls the control plane for host's pending steps,
// waiting up to wait (at most 30 s) when there are none.
func (c *Client) HostSteps(ctx context.Context, host string, wait time.Duration) ([]HostStep, error) {
	var out hostSteps
	path := fmt.Sprintf("%s/%s/Steps?wait=%d", hostAgentsPath, url.PathEscape(host), int(wait.Seconds()))
	if _, err := c.Do(ctx, "GET", path, nil, &out); err != nil {
		return nil, err
	}
	return out.Members, nil
}

// CompleteHostStep reports the outcome of step id of host.
func (c *Client) CompleteHostStep(ctx context.Context, host, id string, r HostStepResult) error {
	path := fmt.Sprintf("%s/%s/Steps/%s/Actions/Oem/Rackpool.Complete", hostAgentsPath, url.PathEscape(host), url.PathEscape(id))
	_, err := c.Do(ctx, "POST", path, r, nil)
	return err
}
