package api

import (
	"context"
	"encoding/base64"
	"fmt"
	"net/url"
	"time"
)

// Pooled memory (OEM): memory nodes and GetMemory leases.

// MemoryNode is a registered memnode.
type MemoryNode struct {
	ID            string `json:"Id"`
	Endpoint      string
	CapacityBytes uint64
	LeasedBytes   uint64
	Leases        int
	Online        bool
	Registered    time.Time
	MapHosts      []string `json:",omitempty"`
	Links         struct {
		ResourceBlocks []Ref
	}
	// Set only in the answer to a registration.
	TokenKey string            `json:",omitempty"`
	Revoked  map[string]string `json:",omitempty"`
}

// Key decodes the token key of a registration answer.
func (n *MemoryNode) Key() ([]byte, error) {
	k, err := base64.StdEncoding.DecodeString(n.TokenKey)
	if err != nil || len(k) < 32 {
		return nil, fmt.Errorf("registration answer carries no valid token key")
	}
	return k, nil
}

// MemoryLease is a lease on pooled memory. Endpoint, Token, RoundTripNs
// and Hops are set only by GetMemory and RenewLease.
type MemoryLease struct {
	ID            string `json:"Id"`
	MemoryNode    string
	Offset        uint64
	CapacityBytes uint64
	Rights        string
	Tenant        string
	Owner         string
	Host          string
	Created       time.Time
	Expires       time.Time
	State         string
	Mapped        bool
	Endpoint      string `json:",omitempty"`
	Token         string `json:",omitempty"`
	// MapSocket is set when Host can map the lease (memory.Map); the
	// lease is used over TCP at Endpoint otherwise.
	MapSocket   string  `json:",omitempty"`
	RoundTripNs float64 `json:",omitempty"`
	Hops        int     `json:",omitempty"`
}

// LeaseRequest asks for pooled memory.
type LeaseRequest struct {
	Size         uint64
	Host         string        // the topology host the memory is for (nearest node first)
	TTL          time.Duration // 0: the service's default
	Rights       string        // "r", "w" or "rw" ("" = rw)
	MaxLatencyNs float64
	MemoryNode   string // pin to one node
	// Mapped asks for memory Host can map with loads and stores (a node
	// that lists Host among its MapHosts).
	Mapped bool
}

const (
	memoryNodesPath  = "/redfish/v1/Oem/Rackpool/MemoryNodes"
	memoryLeasesPath = "/redfish/v1/Oem/Rackpool/MemoryLeases"
)

// GetMemory leases pooled memory: the answer names the memnode endpoint
// and carries the capability token to present there.
func (c *Client) GetMemory(ctx context.Context, r LeaseRequest) (*MemoryLease, error) {
	body := map[string]any{"CapacityBytes": r.Size}
	if r.Host != "" {
		body["Host"] = r.Host
	}
	if r.TTL != 0 {
		body["TTLSeconds"] = r.TTL.Seconds() // the service refuses a negative one
	}
	if r.Rights != "" {
		body["Rights"] = r.Rights
	}
	if r.MaxLatencyNs > 0 {
		body["MaxLatencyNs"] = r.MaxLatencyNs
	}
	if r.MemoryNode != "" {
		body["MemoryNode"] = r.MemoryNode
	}
	if r.Mapped {
		body["Mapped"] = true
	}
	var l MemoryLease
	if _, err := c.Do(ctx, "POST", memoryLeasesPath, body, &l); err != nil {
		return nil, err
	}
	return &l, nil
}

// RenewLease extends lease id by ttl from now (0: the default) and returns
// it with a new token.
func (c *Client) RenewLease(ctx context.Context, id string, ttl time.Duration) (*MemoryLease, error) {
	body := map[string]any{}
	if ttl != 0 {
		body["TTLSeconds"] = ttl.Seconds() // the service refuses a negative one
	}
	var l MemoryLease
	if _, err := c.Do(ctx, "POST", memoryLeasesPath+"/"+url.PathEscape(id)+"/Actions/Oem/Rackpool.Renew", body, &l); err != nil {
		return nil, err
	}
	return &l, nil
}

// ReleaseLease ends lease id; its memory is zeroed before reuse.
func (c *Client) ReleaseLease(ctx context.Context, id string) error {
	_, err := c.Do(ctx, "DELETE", memoryLeasesPath+"/"+url.PathEscape(id), nil, nil)
	return err
}

// Lease returns lease id (without its token).
func (c *Client) Lease(ctx context.Context, id string) (*MemoryLease, error) {
	var l MemoryLease
	if _, err := c.Do(ctx, "GET", memoryLeasesPath+"/"+url.PathEscape(id), nil, &l); err != nil {
		return nil, err
	}
	return &l, nil
}

// Leases lists the leases the account may see.
func (c *Client) Leases(ctx context.Context) ([]MemoryLease, error) {
	return fetchAll[MemoryLease](ctx, c, memoryLeasesPath)
}

// MemoryNodes lists the registered memory nodes.
func (c *Client) MemoryNodes(ctx context.Context) ([]MemoryNode, error) {
	return fetchAll[MemoryNode](ctx, c, memoryNodesPath)
}

// NodeRegistration is what a memnode sends.
type NodeRegistration struct {
	Device        string `json:",omitempty"` // topology memory device; "" lets the service pick
	Endpoint      string
	CapacityBytes uint64
	Epoch         uint64
	// MapSocket is the node's local socket for mapped leases and
	// MapHosts the topology hosts on its machine that may use it.
	MapSocket string   `json:",omitempty"`
	MapHosts  []string `json:",omitempty"`
	// LeaseUsage reports the bytes each lease has in use on the node
	// (telemetry kind MemoryLease).
	LeaseUsage []LeaseUsage `json:",omitempty"`
}

// RegisterMemoryNode registers (or heartbeats) a memnode. Administrator
// only: the answer carries the token key.
func (c *Client) RegisterMemoryNode(ctx context.Context, r NodeRegistration) (*MemoryNode, error) {
	var n MemoryNode
	if _, err := c.Do(ctx, "POST", memoryNodesPath, r, &n); err != nil {
		return nil, err
	}
	return &n, nil
}
