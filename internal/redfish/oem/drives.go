package oem

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"time"

	"rackpool/internal/blocknode"
	"rackpool/internal/drive"
	"rackpool/internal/redfish/service"
	"rackpool/internal/rf"
)

// Drives is the pooled-drive service the drive routes serve
// (drive.Manager).
type Drives interface {
	Heartbeat(ctx context.Context, hb drive.Heartbeat) (drive.Assignment, error)
	Nodes() []drive.NodeInfo
	Node(id string) (drive.NodeInfo, error)
	Drives() []drive.DriveInfo
	Drive(id string) (drive.DriveInfo, error)
	Connect(ctx context.Context, req drive.ConnectRequest) (drive.Grant, error)
	Release(ctx context.Context, id, holder string) (drive.Writer, error)
}

// PooledDrives serves pooled drives: blocknodes and drives.
type PooledDrives struct {
	drives Drives // nil: no pooled drives
}

// NewPooledDrives returns the pooled drives' service over drives (nil:
// none, every route answers 404).
func NewPooledDrives(drives Drives) *PooledDrives { return &PooledDrives{drives: drives} }

// DriveRoutes are the routes of pooled drives: blocknodes and drives (the
// core's routes.go gathers them).
var DriveRoutes = []service.Route[*PooledDrives]{
	{Pattern: "GET /redfish/v1/Oem/Rackpool/BlockNodes", Priv: service.Login, Handler: (*PooledDrives).getBlockNodes},
	{Pattern: "POST /redfish/v1/Oem/Rackpool/BlockNodes", Priv: service.ConfigureManager, Handler: (*PooledDrives).heartbeatBlockNode},
	{Pattern: "GET /redfish/v1/Oem/Rackpool/BlockNodes/{id}", Priv: service.Login, Handler: (*PooledDrives).getBlockNode},
	{Pattern: "GET /redfish/v1/Oem/Rackpool/Drives", Priv: service.Login, Handler: (*PooledDrives).getDrives},
	{Pattern: "GET /redfish/v1/Oem/Rackpool/Drives/{id}", Priv: service.Login, Handler: (*PooledDrives).getDrive},
	{Pattern: "POST /redfish/v1/Oem/Rackpool/Drives/{id}/Actions/Oem/Rackpool.Connect", Priv: service.ConfigureComponents, Handler: (*PooledDrives).connectDrive},
	{Pattern: "POST /redfish/v1/Oem/Rackpool/Drives/{id}/Actions/Oem/Rackpool.Release", Priv: service.ConfigureComponents, Handler: (*PooledDrives).releaseDrive},
}

// Pooled drives (OEM; P1). Blocknodes register and heartbeat by POSTing to
// BlockNodes (Administrator: the answer carries the token key and the
// drives the node serves); a client finds a drive's current blocknode with
// a GET and asks for a token with the Connect action, whose answer alone
// carries it. A writer needs the drive's write reservation (one holder
// at a time; Connect takes it, Release gives it back, docs/storage.md).
// Pooled drives are the operators' (accounts in no tenant): a
// tenant's accounts see an empty collection and 404 for members.

const (
	blockNodesPath = "/redfish/v1/Oem/Rackpool/BlockNodes"
	drivesPath     = "/redfish/v1/Oem/Rackpool/Drives"
)

func errNoDrives() *rf.Problem {
	return rf.New(http.StatusNotFound, rf.Registry+"ResourceMissingAtURI",
		"The pooled drive service is not enabled on this service.")
}

func blockNodeBody(n drive.NodeInfo) map[string]any {
	drives := []rf.ODataID{}
	for _, d := range n.Drives {
		drives = append(drives, rf.Ref(drivesPath+"/"+d))
	}
	return map[string]any{
		"@odata.id":   blockNodesPath + "/" + n.ID,
		"@odata.type": "#RackpoolBlockNode.v1_0_0.RackpoolBlockNode",
		"Id":          n.ID,
		"Name":        "Blocknode on " + n.ID,
		"Endpoint":    n.Endpoint,
		"HostPort":    n.Port,
		"Fabric":      n.Fabric,
		"MaxDrives":   n.MaxDrives,
		"Online":      n.Online,
		"Parked":      n.Parked,
		"LoadOps":     n.Rate,
		"Registered":  n.Registered.UTC().Format(time.RFC3339),
		"Load":        map[string]uint64{"ReadBytes": n.Load.ReadBytes, "WriteBytes": n.Load.WriteBytes, "Operations": n.Load.Ops},
		"Links": map[string]any{"Drives": drives,
			"ComputerSystem": rf.Ref("/redfish/v1/Systems/" + n.ID)},
	}
}

func driveBody(d drive.DriveInfo) map[string]any {
	out := map[string]any{
		"@odata.id":     drivesPath + "/" + d.ID,
		"@odata.type":   "#RackpoolDrive.v1_0_0.RackpoolDrive",
		"Id":            d.ID,
		"Name":          "Pooled drive " + d.ID,
		"Kind":          string(d.Kind),
		"Model":         d.Model,
		"CapacityBytes": d.Capacity,
		"Fabric":        d.Fabric,
		"State":         string(d.State),
		"Epoch":         d.Epoch,
		"BlockNode":     d.Node,
		"Endpoint":      d.Endpoint,
		"InService":     d.InService,
		"Reason":        d.Reason,
		"Links": map[string]any{
			"ResourceBlock": rf.Ref("/redfish/v1/CompositionService/ResourceBlocks/" + d.ID),
		},
		"Actions": map[string]any{
			"#Rackpool.Connect": map[string]string{"target": drivesPath + "/" + d.ID + "/Actions/Oem/Rackpool.Connect"},
			"#Rackpool.Release": map[string]string{"target": drivesPath + "/" + d.ID + "/Actions/Oem/Rackpool.Release"},
		},
		"WriteReservation": writerBody(d.Writer),
	}
	if !d.Since.IsZero() {
		out["Since"] = d.Since.UTC().Format(time.RFC3339Nano)
	}
	if d.Node != "" {
		out["Links"].(map[string]any)["BlockNode"] = rf.Ref(blockNodesPath + "/" + d.Node)
	}
	return out
}

// drivesFor refuses the drive routes to a tenant's accounts.
func (s *PooledDrives) drivesFor(r *http.Request) (Drives, bool, error) {
	if s.drives == nil {
		return nil, false, errNoDrives()
	}
	return s.drives, service.Principal(r).Tenant == "", nil
}

func (s *PooledDrives) getBlockNodes(w http.ResponseWriter, r *http.Request) error {
	m, ok, err := s.drivesFor(r)
	if err != nil {
		return err
	}
	members := []rf.ODataID{}
	if ok {
		for _, n := range m.Nodes() {
			members = append(members, rf.Ref(blockNodesPath+"/"+n.ID))
		}
	}
	service.WriteJSON(w, http.StatusOK, rf.Collection(blockNodesPath, "RackpoolBlockNodeCollection", "Blocknodes", members))
	return nil
}

func (s *PooledDrives) getBlockNode(w http.ResponseWriter, r *http.Request) error {
	m, ok, err := s.drivesFor(r)
	if err != nil {
		return err
	}
	n, err := m.Node(r.PathValue("id"))
	if err != nil || !ok {
		return rf.NotFound("RackpoolBlockNode", r.PathValue("id"))
	}
	service.WriteJSON(w, http.StatusOK, blockNodeBody(n))
	return nil
}

// heartbeatBlockNode is a blocknode's registration and heartbeat.
func (s *PooledDrives) heartbeatBlockNode(w http.ResponseWriter, r *http.Request) error {
	m, ok, err := s.drivesFor(r)
	if err != nil {
		return err
	}
	if !ok {
		return rf.NotFound("RackpoolBlockNode", "")
	}
	var body struct {
		Host      *string
		Endpoint  *string
		Epoch     uint64
		MaxDrives int
		Load      struct{ ReadBytes, WriteBytes, Operations uint64 }
		InUse     []string
	}
	if err := rf.Decode(r, &body, rf.MaxBody); err != nil {
		return err
	}
	if body.Host == nil {
		return rf.PropertyMissing("Host")
	}
	if body.Endpoint == nil {
		return rf.PropertyMissing("Endpoint")
	}
	a, err := m.Heartbeat(r.Context(), drive.Heartbeat{Host: *body.Host, Endpoint: *body.Endpoint, Epoch: body.Epoch,
		MaxDrives: body.MaxDrives, Load: drive.Load{ReadBytes: body.Load.ReadBytes, WriteBytes: body.Load.WriteBytes, Ops: body.Load.Operations},
		InUse: body.InUse})
	if err != nil {
		return err
	}
	if a.Registered {
		service.NoteDetail(r, "blocknode "+a.Node+" at "+*body.Endpoint)
	} else {
		service.NoteRoutine(r)
	}
	n, err := m.Node(a.Node)
	if err != nil {
		return err
	}
	out := blockNodeBody(n)
	drives := []map[string]any{}
	for _, d := range a.Drives {
		drives = append(drives, map[string]any{"Id": d.ID, "Epoch": d.Epoch, "CapacityBytes": d.Size, "WriteGeneration": d.Generation})
	}
	out["Assigned"] = drives
	out["LeaseMs"] = a.LeaseTTL.Milliseconds()
	// The token key goes only to an Administrator's blocknode, over this
	// answer; it is never logged or audited.
	out["TokenKey"] = base64.StdEncoding.EncodeToString(a.Key)
	w.Header().Set("Location", blockNodesPath+"/"+a.Node)
	service.WriteJSON(w, http.StatusOK, out)
	return nil
}

func (s *PooledDrives) getDrives(w http.ResponseWriter, r *http.Request) error {
	m, ok, err := s.drivesFor(r)
	if err != nil {
		return err
	}
	members := []rf.ODataID{}
	if ok {
		for _, d := range m.Drives() {
			members = append(members, rf.Ref(drivesPath+"/"+d.ID))
		}
	}
	service.WriteJSON(w, http.StatusOK, rf.Collection(drivesPath, "RackpoolDriveCollection", "Pooled drives", members))
	return nil
}

func (s *PooledDrives) getDrive(w http.ResponseWriter, r *http.Request) error {
	m, ok, err := s.drivesFor(r)
	if err != nil {
		return err
	}
	d, err := m.Drive(r.PathValue("id"))
	if err != nil || !ok {
		return rf.NotFound("RackpoolDrive", r.PathValue("id"))
	}
	service.WriteJSON(w, http.StatusOK, driveBody(d))
	return nil
}

// connectDrive is the two-level indirection's answer: the drive's current
// blocknode, export name and a token.
func (s *PooledDrives) connectDrive(w http.ResponseWriter, r *http.Request) error {
	m, ok, err := s.drivesFor(r)
	if err != nil {
		return err
	}
	if !ok {
		return rf.NotFound("RackpoolDrive", r.PathValue("id"))
	}
	var body struct {
		Rights     string
		TTLSeconds *float64
		Holder     *string
		Preempt    bool
	}
	if r.ContentLength != 0 {
		if err := rf.Decode(r, &body, rf.MaxBody); err != nil {
			return err
		}
	}
	rights, err := blocknode.ParseRights(body.Rights)
	if err != nil {
		return rf.PropertyValue("Rights", body.Rights, err.Error())
	}
	ttl, err := ttlOf(body.TTLSeconds)
	if err != nil {
		return err
	}
	req := drive.ConnectRequest{Drive: r.PathValue("id"), Rights: rights, TTL: ttl, Holder: holderOf(r, body.Holder), Preempt: body.Preempt}
	if rights&blocknode.RightWrite == 0 {
		req.Holder = ""
	}
	g, err := m.Connect(r.Context(), req)
	if err != nil {
		return err
	}
	detail := fmt.Sprintf("drive %s on %s at epoch %d, %s", g.Drive, g.Node, g.Epoch, g.Rights)
	if g.Holder != "" {
		detail += fmt.Sprintf(", writer %q at generation %d", g.Holder, g.Generation)
		if body.Preempt {
			detail += " (preempt)"
		}
	}
	service.NoteDetail(r, detail)
	out := map[string]any{
		"Drive":         g.Drive,
		"BlockNode":     g.Node,
		"Endpoint":      g.Endpoint,
		"ExportName":    g.Export,
		"Token":         g.Token,
		"Epoch":         g.Epoch,
		"Rights":        g.Rights.String(),
		"Expires":       g.Expiry.UTC().Format(time.RFC3339Nano),
		"CapacityBytes": g.Size,
	}
	if g.Holder != "" {
		out["Holder"], out["WriteGeneration"] = g.Holder, g.Generation
	}
	service.WriteJSON(w, http.StatusOK, out)
	return nil
}

// releaseDrive ends the caller's write reservation of a drive (Holder, by
// default the one Connect gives the caller) and answers the drive.
func (s *PooledDrives) releaseDrive(w http.ResponseWriter, r *http.Request) error {
	m, ok, err := s.drivesFor(r)
	if err != nil {
		return err
	}
	if !ok {
		return rf.NotFound("RackpoolDrive", r.PathValue("id"))
	}
	var body struct{ Holder *string }
	if r.ContentLength != 0 {
		if err := rf.Decode(r, &body, rf.MaxBody); err != nil {
			return err
		}
	}
	holder := holderOf(r, body.Holder)
	wr, err := m.Release(r.Context(), r.PathValue("id"), holder)
	if err != nil {
		return err
	}
	service.NoteDetail(r, fmt.Sprintf("drive %s released by %q; write reservation generation now %d", r.PathValue("id"), holder, wr.Generation))
	d, err := m.Drive(r.PathValue("id"))
	if err != nil {
		return err
	}
	service.WriteJSON(w, http.StatusOK, driveBody(d))
	return nil
}

// holderOf is the write reservation holder a request names, by default
// "<account>@<client address>".
func holderOf(r *http.Request, named *string) string {
	if named != nil {
		return *named
	}
	return service.Principal(r).User + "@" + service.ClientAddr(r)
}

// writerBody shows a write reservation: null when nobody holds it.
func writerBody(wr drive.Writer) any {
	if wr.Holder == "" {
		return nil
	}
	return map[string]any{"Holder": wr.Holder, "Generation": wr.Generation, "Since": wr.Since.UTC().Format(time.RFC3339Nano)}
}

// TranslateDrive maps the drive manager's errors; ok is false for others.
func TranslateDrive(err error) (*rf.Problem, bool) {
	var reserved *drive.ReservedError
	switch {
	case errors.As(err, &reserved):
		e := rf.New(http.StatusConflict, rf.Registry+"ResourceInUse",
			"The change to the requested resource failed because the resource is in use or in transition.").Resolve(err.Error())
		e.Oem = map[string]any{"Rackpool": map[string]any{"WriteReservation": writerBody(reserved.Writer)}}
		return e, true
	case errors.Is(err, drive.ErrNotFound):
		return rf.New(http.StatusNotFound, rf.Registry+"ResourceMissingAtURI",
			"The requested pooled drive or blocknode was not found.").Resolve(err.Error()), true
	case errors.Is(err, drive.ErrBadInput):
		e := rf.New(http.StatusBadRequest, rf.Registry+"GeneralError", err.Error())
		e.Resolution = "Correct the request and resubmit it."
		return e, true
	case errors.Is(err, drive.ErrConflict):
		return rf.New(http.StatusConflict, rf.Registry+"ResourceInUse",
			"The change to the requested resource failed because the resource is in use or in transition.").Resolve(err.Error()), true
	case errors.Is(err, drive.ErrUnavailable):
		return rf.New(http.StatusServiceUnavailable, rf.Registry+"ServiceTemporarilyUnavailable",
			"The service is temporarily unavailable.  Retry in 1 seconds.", "1").Resolve(err.Error() + "; retry shortly."), true
	}
	return nil, false
}
