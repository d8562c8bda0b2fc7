package api

import (
	"context"
	"net/url"
	"time"
)

const provisioningPath = "/redfish/v1/Oem/Rackpool/Provisioning"

// ProvisioningDecision is the last decision of the provisioning loop for a
// system, in memory blocks, with its explanation.
type ProvisioningDecision struct {
	Time                string
	Action              string
	Applied             bool
	FromBlocks          float64
	ToBlocks            float64
	TargetBlocks        float64
	LastUseBlocks       float64
	Observed            int
	ObservedMinBlocks   float64
	ObservedMaxBlocks   float64
	Model               string
	Fallback            string
	ForecastPeakBlocks  float64
	ForecastUpperBlocks float64
	Warmup              bool
	Blocks              []string
	Reason              string
	Explanation         string
}

// ProvisioningSubscription is a system opted into predictive provisioning.
type ProvisioningSubscription struct {
	ID           string `json:"Id"`
	Mode         string // DryRun or On
	Effective    string // the mode the loop applies: Off, DryRun or On
	MinBytes     int64
	MaxBytes     int64
	PooledBytes  int64
	LocalBytes   int64
	Created      time.Time
	HeldSince    time.Time
	Error        string
	LastDecision *ProvisioningDecision
}

// Provisioning is the loop's settings and its subscriptions' links.
type Provisioning struct {
	Mode            string
	IntervalSeconds float64
	Rules           map[string]any
	Members         []Ref
}

// Provisioning returns the loop's settings and the subscriptions the
// caller may see.
func (c *Client) Provisioning(ctx context.Context) (*Provisioning, error) {
	var p Provisioning
	if _, err := c.Do(ctx, "GET", provisioningPath, nil, &p); err != nil {
		return nil, err
	}
	return &p, nil
}

// Subscription returns one system's subscription.
func (c *Client) Subscription(ctx context.Context, system string) (*ProvisioningSubscription, error) {
	var s ProvisioningSubscription
	if _, err := c.Do(ctx, "GET", provisioningPath+"/"+url.PathEscape(system), nil, &s); err != nil {
		return nil, err
	}
	return &s, nil
}

// Subscribe opts a system in (mode "DryRun" or "On"); bounds of 0 are
// none. A system already subscribed has its subscription changed.
func (c *Client) Subscribe(ctx context.Context, system, mode string, minBytes, maxBytes int64) (*ProvisioningSubscription, error) {
	body := map[string]any{"Mode": mode, "MinBytes": minBytes, "MaxBytes": maxBytes}
	var s ProvisioningSubscription
	if _, err := c.Do(ctx, "GET", provisioningPath+"/"+url.PathEscape(system), nil, nil); err == nil {
		if _, err := c.Do(ctx, "PATCH", provisioningPath+"/"+url.PathEscape(system), body, &s); err != nil {
			return nil, err
		}
		return &s, nil
	}
	body["System"] = system
	if _, err := c.Do(ctx, "POST", provisioningPath, body, &s); err != nil {
		return nil, err
	}
	return &s, nil
}

// Unsubscribe opts a system out; it keeps what it holds.
func (c *Client) Unsubscribe(ctx context.Context, system string) error {
	_, err := c.Do(ctx, "DELETE", provisioningPath+"/"+url.PathEscape(system), nil, nil)
	return err
}
