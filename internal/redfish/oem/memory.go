package oem

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"math"
	"net/http"
	"time"

	"rackpool/internal/lease"
	"rackpool/internal/memory"
	"rackpool/internal/redfish/service"
	"rackpool/internal/rf"
)

// Leases is the memory service the memory routes serve (lease.Manager).
type Leases interface {
	Register(ctx context.Context, r lease.Registration) (lease.Registered, error)
	Nodes() []lease.NodeInfo
	Node(id string) (lease.NodeInfo, error)
	Grant(ctx context.Context, req lease.Request) (lease.Grant, error)
	Renew(ctx context.Context, id, tenant string, ttl time.Duration) (lease.Grant, error)
	Release(ctx context.Context, id, tenant string) error
	Get(id, tenant string) (lease.Lease, error)
	List(tenant string) []lease.Lease
}

// Memory serves pooled memory: memory nodes and leases.
type Memory struct {
	leases Leases // nil: no memory service
	usage  UsageRecorder
}

// UsageRecorder keeps what memnodes report of their leases' use
// (telemetryservice.Service).
type UsageRecorder interface {
	RecordLeaseUsage(node string, usage map[string]uint64)
}

// NewMemory returns the memory service over leases (nil: none, every
// route answers 404), recording memnodes' lease usage in usage.
func NewMemory(leases Leases, usage UsageRecorder) *Memory {
	return &Memory{leases: leases, usage: usage}
}

// MemoryRoutes are the routes of pooled memory: memory nodes and leases
// (the core's routes.go gathers them).
var MemoryRoutes = []service.Route[*Memory]{
	{Pattern: "GET /redfish/v1/Oem/Rackpool/MemoryNodes", Priv: service.Login, Handler: (*Memory).getMemoryNodes},
	{Pattern: "POST /redfish/v1/Oem/Rackpool/MemoryNodes", Priv: service.ConfigureManager, Handler: (*Memory).registerMemoryNode},
	{Pattern: "GET /redfish/v1/Oem/Rackpool/MemoryNodes/{id}", Priv: service.Login, Handler: (*Memory).getMemoryNode},
	{Pattern: "GET /redfish/v1/Oem/Rackpool/MemoryLeases", Priv: service.Login, Handler: (*Memory).getMemoryLeases},
	{Pattern: "POST /redfish/v1/Oem/Rackpool/MemoryLeases", Priv: service.ConfigureComponents, Handler: (*Memory).postMemoryLease},
	{Pattern: "GET /redfish/v1/Oem/Rackpool/MemoryLeases/{id}", Priv: service.Login, Handler: (*Memory).getMemoryLease},
	{Pattern: "DELETE /redfish/v1/Oem/Rackpool/MemoryLeases/{id}", Priv: service.ConfigureComponents, Handler: (*Memory).deleteMemoryLease},
	{Pattern: "POST /redfish/v1/Oem/Rackpool/MemoryLeases/{id}/Actions/Oem/Rackpool.Renew", Priv: service.ConfigureComponents, Handler: (*Memory).renewMemoryLease},
}

// Pooled memory as a service (OEM; P0 §4 "GetMemory"). Memory nodes
// register themselves (Administrator: the answer carries the token key);
// a GetMemory is a POST to MemoryLeases, whose answer carries the memnode
// endpoint and a capability token, returned only there and by Renew. A
// tenant's accounts see only their tenant's leases.

const (
	memoryNodesPath  = "/redfish/v1/Oem/Rackpool/MemoryNodes"
	memoryLeasesPath = "/redfish/v1/Oem/Rackpool/MemoryLeases"
)

func errNoLeases() *rf.Problem {
	return rf.New(http.StatusNotFound, rf.Registry+"ResourceMissingAtURI",
		"The memory service is not enabled on this service.")
}

func (s *Memory) memoryNodeBody(n lease.NodeInfo) map[string]any {
	blocks := []rf.ODataID{}
	for _, b := range n.Blocks {
		blocks = append(blocks, rf.Ref("/redfish/v1/CompositionService/ResourceBlocks/"+b))
	}
	return map[string]any{
		"@odata.id":     memoryNodesPath + "/" + n.ID,
		"@odata.type":   "#RackpoolMemoryNode.v1_0_0.RackpoolMemoryNode",
		"Id":            n.ID,
		"Name":          "Memory node " + n.ID,
		"Endpoint":      n.Endpoint,
		"CapacityBytes": n.Capacity,
		"LeasedBytes":   n.Leased,
		"Leases":        n.Leases,
		"Online":        n.Online,
		"Registered":    n.Registered.UTC().Format(time.RFC3339),
		"MapHosts":      append([]string{}, n.MapHosts...),
		"Links":         map[string]any{"ResourceBlocks": blocks},
	}
}

func (s *Memory) getMemoryNodes(w http.ResponseWriter, r *http.Request) error {
	if s.leases == nil {
		return errNoLeases()
	}
	members := []rf.ODataID{}
	for _, n := range s.leases.Nodes() {
		members = append(members, rf.Ref(memoryNodesPath+"/"+n.ID))
	}
	service.WriteJSON(w, http.StatusOK, rf.Collection(memoryNodesPath, "RackpoolMemoryNodeCollection", "Memory nodes", members))
	return nil
}

func (s *Memory) getMemoryNode(w http.ResponseWriter, r *http.Request) error {
	if s.leases == nil {
		return errNoLeases()
	}
	n, err := s.leases.Node(r.PathValue("id"))
	if err != nil {
		return rf.NotFound("RackpoolMemoryNode", r.PathValue("id"))
	}
	service.WriteJSON(w, http.StatusOK, s.memoryNodeBody(n))
	return nil
}

// registerMemoryNode is a memnode's registration and heartbeat.
func (s *Memory) registerMemoryNode(w http.ResponseWriter, r *http.Request) error {
	if s.leases == nil {
		return errNoLeases()
	}
	var body struct {
		Device        string
		Endpoint      *string
		CapacityBytes *uint64
		Epoch         uint64
		MapSocket     string
		MapHosts      []string
		// LeaseUsage: bytes in use per lease (telemetry, MemoryLease).
		LeaseUsage []struct {
			Lease      string
			BytesInUse uint64
		}
	}
	if err := rf.Decode(r, &body, rf.MaxBody); err != nil {
		return err
	}
	var usage map[string]uint64
	for i, u := range body.LeaseUsage {
		if usage == nil {
			usage = map[string]uint64{}
		}
		if _, dup := usage[u.Lease]; dup || u.Lease == "" {
			return rf.PropertyValue(fmt.Sprintf("LeaseUsage/%d/Lease", i), u.Lease, "Name each lease once.")
		}
		usage[u.Lease] = u.BytesInUse
	}
	if body.Endpoint == nil {
		return rf.PropertyMissing("Endpoint")
	}
	if body.CapacityBytes == nil {
		return rf.PropertyMissing("CapacityBytes")
	}
	reg, err := s.leases.Register(r.Context(), lease.Registration{Device: body.Device, Endpoint: *body.Endpoint,
		Capacity: *body.CapacityBytes, Epoch: body.Epoch, MapSocket: body.MapSocket, MapHosts: body.MapHosts, Usage: usage})
	if err != nil {
		return err
	}
	s.usage.RecordLeaseUsage(reg.Node.ID, reg.Usage)
	info, err := s.leases.Node(reg.Node.ID)
	if err != nil {
		return err
	}
	out := s.memoryNodeBody(info)
	revoked := map[string]string{}
	for id, until := range reg.Revoked {
		revoked[id] = until.UTC().Format(time.RFC3339Nano)
	}
	// The token key goes only to an Administrator registering a node,
	// over this answer; it is never logged or audited.
	out["TokenKey"] = base64.StdEncoding.EncodeToString(reg.Key)
	out["Revoked"] = revoked
	service.NoteDetail(r, "memory node "+reg.Node.ID+" at "+reg.Node.Endpoint)
	w.Header().Set("Location", memoryNodesPath+"/"+reg.Node.ID)
	service.WriteJSON(w, http.StatusOK, out)
	return nil
}

func leaseBody(l lease.Lease) map[string]any {
	return map[string]any{
		"@odata.id":     memoryLeasesPath + "/" + l.ID,
		"@odata.type":   "#RackpoolMemoryLease.v1_0_0.RackpoolMemoryLease",
		"Id":            l.ID,
		"Name":          "Memory lease " + l.ID,
		"MemoryNode":    l.Node,
		"Offset":        l.Offset,
		"CapacityBytes": l.Size,
		"Rights":        l.Rights.String(),
		"Tenant":        l.Tenant,
		"Owner":         l.Owner,
		"Host":          l.Host,
		"Created":       l.Created.UTC().Format(time.RFC3339Nano),
		"Expires":       l.Expiry.UTC().Format(time.RFC3339Nano),
		"State":         string(l.State),
		"Mapped":        l.Mapped,
		"Links":         map[string]any{"MemoryNode": rf.Ref(memoryNodesPath + "/" + l.Node)},
	}
}

func grantBody(g lease.Grant) map[string]any {
	out := leaseBody(g.Lease)
	out["Endpoint"] = g.Endpoint
	out["Token"] = g.Token
	out["RoundTripNs"] = g.RTTNS
	out["Hops"] = g.Hops
	if g.MapSocket != "" {
		out["MapSocket"] = g.MapSocket
	}
	return out
}

func (s *Memory) getMemoryLeases(w http.ResponseWriter, r *http.Request) error {
	if s.leases == nil {
		return errNoLeases()
	}
	members := []rf.ODataID{}
	for _, l := range s.leases.List(service.Principal(r).Tenant) {
		members = append(members, rf.Ref(memoryLeasesPath+"/"+l.ID))
	}
	service.WriteJSON(w, http.StatusOK, rf.Collection(memoryLeasesPath, "RackpoolMemoryLeaseCollection", "Memory leases", members))
	return nil
}

func (s *Memory) getMemoryLease(w http.ResponseWriter, r *http.Request) error {
	if s.leases == nil {
		return errNoLeases()
	}
	l, err := s.leases.Get(r.PathValue("id"), service.Principal(r).Tenant)
	if err != nil {
		return err
	}
	service.WriteJSON(w, http.StatusOK, leaseBody(l))
	return nil
}

// postMemoryLease is GetMemory.
func (s *Memory) postMemoryLease(w http.ResponseWriter, r *http.Request) error {
	if s.leases == nil {
		return errNoLeases()
	}
	var body struct {
		CapacityBytes *uint64
		Host          string
		TTLSeconds    *float64
		Rights        string
		MaxLatencyNs  float64
		MemoryNode    string
		Mapped        bool
	}
	if err := rf.Decode(r, &body, rf.MaxBody); err != nil {
		return err
	}
	if body.CapacityBytes == nil {
		return rf.PropertyMissing("CapacityBytes")
	}
	ttl, err := ttlOf(body.TTLSeconds)
	if err != nil {
		return err
	}
	var rights memory.Rights
	if body.Rights != "" {
		if rights, err = memory.ParseRights(body.Rights); err != nil {
			return rf.PropertyValue("Rights", body.Rights, err.Error())
		}
	}
	if body.MaxLatencyNs < 0 || math.IsNaN(body.MaxLatencyNs) {
		return rf.PropertyValue("MaxLatencyNs", fmt.Sprint(body.MaxLatencyNs), "it must not be negative")
	}
	p := service.Principal(r)
	g, err := s.leases.Grant(r.Context(), lease.Request{Size: *body.CapacityBytes, Host: body.Host, TTL: ttl, Rights: rights,
		MaxLatencyNS: body.MaxLatencyNs, Node: body.MemoryNode, Mapped: body.Mapped, Tenant: p.Tenant, Owner: p.User})
	if err != nil {
		return err
	}
	service.NoteDetail(r, fmt.Sprintf("lease %s: %d bytes on %s", g.ID, g.Size, g.Node))
	w.Header().Set("Location", memoryLeasesPath+"/"+g.ID)
	service.WriteJSON(w, http.StatusCreated, grantBody(g))
	return nil
}

// ttlOf converts a request's TTLSeconds: absent is 0 (the service's
// default); a value given must be a positive number of seconds, at least a
// nanosecond, so that 0 or -5 is refused rather than read as the default.
func ttlOf(seconds *float64) (time.Duration, error) {
	if seconds == nil {
		return 0, nil
	}
	s := *seconds
	if !(s > 0) || s > float64(math.MaxInt64/int64(time.Second)) || time.Duration(s*float64(time.Second)) <= 0 {
		return 0, rf.PropertyValue("TTLSeconds", fmt.Sprint(s), "it must be a positive number of seconds")
	}
	return time.Duration(s * float64(time.Second)), nil
}

func (s *Memory) renewMemoryLease(w http.ResponseWriter, r *http.Request) error {
	if s.leases == nil {
		return errNoLeases()
	}
	var body struct{ TTLSeconds *float64 }
	if r.ContentLength != 0 {
		if err := rf.Decode(r, &body, rf.MaxBody); err != nil {
			return err
		}
	}
	ttl, err := ttlOf(body.TTLSeconds)
	if err != nil {
		return err
	}
	g, err := s.leases.Renew(r.Context(), r.PathValue("id"), service.Principal(r).Tenant, ttl)
	if err != nil {
		return err
	}
	service.NoteDetail(r, "lease "+g.ID+" until "+g.Expiry.UTC().Format(time.RFC3339))
	service.WriteJSON(w, http.StatusOK, grantBody(g))
	return nil
}

func (s *Memory) deleteMemoryLease(w http.ResponseWriter, r *http.Request) error {
	if s.leases == nil {
		return errNoLeases()
	}
	id := r.PathValue("id")
	if err := s.leases.Release(r.Context(), id, service.Principal(r).Tenant); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// TranslateLease maps the lease manager's errors; ok is false for others.
func TranslateLease(err error) (*rf.Problem, bool) {
	switch {
	case errors.Is(err, lease.ErrNotFound):
		return rf.New(http.StatusNotFound, rf.Registry+"ResourceMissingAtURI",
			"The requested memory lease or memory node was not found.").Resolve(err.Error()), true
	case errors.Is(err, lease.ErrBadInput):
		e := rf.New(http.StatusBadRequest, rf.Registry+"GeneralError", err.Error())
		e.Resolution = "Correct the request and resubmit it."
		return e, true
	case errors.Is(err, lease.ErrNoMemory):
		return rf.New(http.StatusConflict, rf.Registry+"ResourceExhaustion",
			"The resource 'MemoryLeases' was unable to satisfy the request due to unavailability of resources.", "MemoryLeases").
			Resolve(err.Error()), true
	case errors.Is(err, lease.ErrExpired), errors.Is(err, lease.ErrReclaimed), errors.Is(err, lease.ErrConflict):
		e := rf.New(http.StatusConflict, rf.Registry+"ResourceInUse",
			"The change to the requested resource failed because the resource is in use or in transition.")
		e.Resolution = err.Error()
		return e, true
	}
	return nil, false
}
