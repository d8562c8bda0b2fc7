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
	// WriteGeneration is the drive's write reservation generation: the
	// blocknode refuses writes of tokens of an older one.
	WriteGeneration uint64
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
	// WriteReservation is who may write the drive now (nil: nobody holds
	// it).
	WriteReservation *DriveWriter
}

// DriveWriter is a drive's write reservation: its holder, the generation
// its tokens carry, and since when.
type DriveWriter struct {
	Holder     string
	Generation uint64
	Since      time.Time
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
	// Holder and WriteGeneration: the write reservation a writer's token
	// was issued under (empty for a reader).
	Holder          string `json:",omitempty"`
	WriteGeneration uint64 `json:",omitempty"`
}

// DriveConnect is what ConnectDrive asks for.
type DriveConnect struct {
	// Rights: "r", "w" or "rw" ("": rw).
	Rights string
	// TTL is the token's lifetime (0: the service's default; the service
	// refuses a negative one).
	TTL time.Duration
	// Holder names the writer, the drive's write reservation holder (""
	// with write rights: "<account>@<client address>"). Clients that give
	// the same name share the reservation.
	Holder string
	// Preempt takes the write reservation over from another holder,
	// fencing its writes.
	Preempt bool
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

// ConnectDrive asks where drive id is served and for a token. A writer
// another holder's write reservation refuses gets an *Error with Status
// 409 naming the holder.
func (c *Client) ConnectDrive(ctx context.Context, id string, req DriveConnect) (*DriveGrant, error) {
	body := map[string]any{}
	if req.Rights != "" {
		body["Rights"] = req.Rights
	}
	if req.TTL != 0 {
		body["TTLSeconds"] = req.TTL.Seconds() // the service refuses a negative one
	}
	if req.Holder != "" {
		body["Holder"] = req.Holder
	}
	if req.Preempt {
		body["Preempt"] = true
	}
	var g DriveGrant
	if _, err := c.Do(ctx, "POST", drivesPath+"/"+url.PathEscape(id)+"/Actions/Oem/Rackpool.Connect", body, &g); err != nil {
		return nil, err
	}
	return &g, nil
}

// ReleaseDrive ends holder's write reservation of drive id ("": the
// default holder, "<account>@<client address>"). Releasing a drive nobody
// holds does nothing; another holder's reservation is refused with 409.
func (c *Client) ReleaseDrive(ctx context.Context, id, holder string) (*Drive, error) {
	body := map[string]any{}
	if holder != "" {
		body["Holder"] = holder
	}
	var d Drive
	if _, err := c.Do(ctx, "POST", drivesPath+"/"+url.PathEscape(id)+"/Actions/Oem/Rackpool.Release", body, &d); err != nil {
		return nil, err
	}
	return &d, nil
}
