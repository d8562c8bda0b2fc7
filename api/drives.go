package api

import (
	"context"
	"encoding/base64"
	"fmt"
	"net/url"
	"time"
)

// Pooled drives (OEM; P1): blocknodes and the drives they serve.

// BlockNode is a registered blocknode.
type BlockNode struct {
	ID         string `json:"Id"`
	Endpoint   string
	HostPort   string
	Fabric     string
	MaxDrives  int
	Online     bool
	Parked     bool    // the elastic policy returned its host to the compute pool
	LoadOps    float64 // operations per second, averaged
	Registered time.Time
	Load       struct{ ReadBytes, WriteBytes, Operations uint64 }
	Links      struct {
		Drives []Ref
	}
	// Set only in the answer to a heartbeat.
	Assigned []AssignedDrive `json:",omitempty"`
	LeaseMs  int64           `json:",omitempty"`
	TokenKey string          `json:",omitempty"`
}

// AssignedDrive is a drive a heartbeat answer gives its blocknode.
type AssignedDrive struct {
	ID            string `json:"Id"`
	Epoch         uint64
	CapacityBytes int64
}

// Key decodes the token key of a heartbeat answer.
func (n *BlockNode) Key() ([]byte, error) {
	k, err := base64.StdEncoding.DecodeString(n.TokenKey)
	if err != nil || len(k) != 32 {
		return nil, fmt.Errorf("heartbeat answer carries no valid token key")
	}
	return k, nil
}

// BlockNodeHeartbeat is what a blocknode sends.
type BlockNodeHeartbeat struct {
	Host      string
	Endpoint  string
	Epoch     uint64
	MaxDrives int `json:",omitempty"`
	Load      struct{ ReadBytes, WriteBytes, Operations uint64 }
	// InUse lists the drives a client has a connection open to.
	InUse []string `json:",omitempty"`
}

// Drive is a pooled drive.
type Drive struct {
	ID            string `json:"Id"`
	Kind          string
	Model         string
	CapacityBytes int64
	Fabric        string
	State         string
	Epoch         uint64
	BlockNode     string
	Endpoint      string
	InService     bool
	Reason        string
	Since         time.Time
}

// DriveGrant is the answer to ConnectDrive: where the drive is served now
// and the token to present there (inside ExportName).
type DriveGrant struct {
	Drive         string
	BlockNode     string
	Endpoint      string
	ExportName    string
	Token         string
	Epoch         uint64
	Rights        string
	Expires       time.Time
	CapacityBytes int64
}

const (
	blockNodesPath = "/redfish/v1/Oem/Rackpool/BlockNodes"
	drivesPath     = "/redfish/v1/Oem/Rackpool/Drives"
)

// HeartbeatBlockNode registers or refreshes a blocknode. Administrator
// only: the answer carries the token key.
func (c *Client) HeartbeatBlockNode(ctx context.Context, hb BlockNodeHeartbeat) (*BlockNode, error) {
	var n BlockNode
	if _, err := c.Do(ctx, "POST", blockNodesPath, hb, &n); err != nil {
		return nil, err
	}
	return &n, nil
}

// BlockNodes lists the blocknodes.
func (c *Client) BlockNodes(ctx context.Context) ([]BlockNode, error) {
	return fetchAll[BlockNode](ctx, c, blockNodesPath)
}

// Drives lists the pooled drives.
func (c *Client) Drives(ctx context.Context) ([]Drive, error) {
	return fetchAll[Drive](ctx, c, drivesPath)
}

// Drive returns one pooled drive: its state and current blocknode.
func (c *Client) Drive(ctx context.Context, id string) (*Drive, error) {
	var d Drive
	if _, err := c.Do(ctx, "GET", drivesPath+"/"+url.PathEscape(id), nil, &d); err != nil {
		return nil, err
	}
	return &d, nil
}

// ConnectDrive asks where drive id is served and for a token with rights
// ("r", "w", "rw"; "" = rw) lasting ttl (0: the service's default).
func (c *Client) ConnectDrive(ctx context.Context, id, rights string, ttl time.Duration) (*DriveGrant, error) {
	body := map[string]any{}
	if rights != "" {
		body["Rights"] = rights
	}
	if ttl != 0 {
		body["TTLSeconds"] = ttl.Seconds() // the service refuses a negative one
	}
	var g DriveGrant
	if _, err := c.Do(ctx, "POST", drivesPath+"/"+url.PathEscape(id)+"/Actions/Oem/Rackpool.Connect", body, &g); err != nil {
		return nil, err
	}
	return &g, nil
}
