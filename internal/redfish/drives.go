package redfish

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"time"

	"rackpool/internal/blocknode"
	"rackpool/internal/drive"
	"rackpool/internal/redfish/oem"
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

// driveRoutes are the routes of pooled drives: blocknodes and drives (routes.go).
var driveRoutes = []route{
	{"GET /redfish/v1/Oem/Rackpool/BlockNodes", login, (*Server).getBlockNodes},
	{"POST /redfish/v1/Oem/Rackpool/BlockNodes", configureManager, (*Server).heartbeatBlockNode},
	{"GET /redfish/v1/Oem/Rackpool/BlockNodes/{id}", login, (*Server).getBlockNode},
	{"GET /redfish/v1/Oem/Rackpool/Drives", login, (*Server).getDrives},
	{"GET /redfish/v1/Oem/Rackpool/Drives/{id}", login, (*Server).getDrive},
	{"POST /redfish/v1/Oem/Rackpool/Drives/{id}/Actions/Oem/Rackpool.Connect", configureComponents, (*Server).connectDrive},
	{"POST /redfish/v1/Oem/Rackpool/Drives/{id}/Actions/Oem/Rackpool.Release", configureComponents, (*Server).releaseDrive},
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

var errNoDrives = newError(http.StatusNotFound, baseRegistry+"ResourceMissingAtURI",
	"The pooled drive service is not enabled on this service.")

func blockNodeBody(n drive.NodeInfo) map[string]any {
	drives := []odataID{}
	for _, d := range n.Drives {
		drives = append(drives, ref(drivesPath+"/"+d))
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
			"ComputerSystem": ref("/redfish/v1/Systems/" + n.ID)},
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
			"ResourceBlock": ref("/redfish/v1/CompositionService/ResourceBlocks/" + d.ID),
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
		out["Links"].(map[string]any)["BlockNode"] = ref(blockNodesPath + "/" + d.Node)
	}
	return out
}

// drivesFor refuses the drive routes to a tenant's accounts.
func (s *Server) drivesFor(r *http.Request) (Drives, bool, error) {
	if s.drives == nil {
		return nil, false, errNoDrives
	}
	return s.drives, principal(r).Tenant == "", nil
}

func (s *Server) getBlockNodes(w http.ResponseWriter, r *http.Request) error {
	m, ok, err := s.drivesFor(r)
	if err != nil {
		return err
	}
	members := []odataID{}
	if ok {
		for _, n := range m.Nodes() {
			members = append(members, ref(blockNodesPath+"/"+n.ID))
		}
	}
	writeJSON(w, http.StatusOK, collection(blockNodesPath, "RackpoolBlockNodeCollection", "Blocknodes", members))
	return nil
}

func (s *Server) getBlockNode(w http.ResponseWriter, r *http.Request) error {
	m, ok, err := s.drivesFor(r)
	if err != nil {
		return err
	}
	n, err := m.Node(r.PathValue("id"))
	if err != nil || !ok {
		return errNotFound("RackpoolBlockNode", r.PathValue("id"))
	}
	writeJSON(w, http.StatusOK, blockNodeBody(n))
	return nil
}

// heartbeatBlockNode is a blocknode's registration and heartbeat.
func (s *Server) heartbeatBlockNode(w http.ResponseWriter, r *http.Request) error {
	m, ok, err := s.drivesFor(r)
	if err != nil {
		return err
	}
	if !ok {
		return errNotFound("RackpoolBlockNode", "")
	}
	var body struct {
		Host      *string
		Endpoint  *string
		Epoch     uint64
		MaxDrives int
		Load      struct{ ReadBytes, WriteBytes, Operations uint64 }
		InUse     []string
	}
	if err := decode(r, &body); err != nil {
		return err
	}
	if body.Host == nil {
		return errPropertyMissing("Host")
	}
	if body.Endpoint == nil {
		return errPropertyMissing("Endpoint")
	}
	a, err := m.Heartbeat(r.Context(), drive.Heartbeat{Host: *body.Host, Endpoint: *body.Endpoint, Epoch: body.Epoch,
		MaxDrives: body.MaxDrives, Load: drive.Load{ReadBytes: body.Load.ReadBytes, WriteBytes: body.Load.WriteBytes, Ops: body.Load.Operations},
		InUse: body.InUse})
	if err != nil {
		return err
	}
	if a.Registered {
		noteAudit(r).detail = "blocknode " + a.Node + " at " + *body.Endpoint
	} else {
		noteAudit(r).routine = true
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
	writeJSON(w, http.StatusOK, out)
	return nil
}

func (s *Server) getDrives(w http.ResponseWriter, r *http.Request) error {
	m, ok, err := s.drivesFor(r)
	if err != nil {
		return err
	}
	members := []odataID{}
	if ok {
		for _, d := range m.Drives() {
			members = append(members, ref(drivesPath+"/"+d.ID))
		}
	}
	writeJSON(w, http.StatusOK, collection(drivesPath, "RackpoolDriveCollection", "Pooled drives", members))
	return nil
}

func (s *Server) getDrive(w http.ResponseWriter, r *http.Request) error {
	m, ok, err := s.drivesFor(r)
	if err != nil {
		return err
	}
	d, err := m.Drive(r.PathValue("id"))
	if err != nil || !ok {
		return errNotFound("RackpoolDrive", r.PathValue("id"))
	}
	writeJSON(w, http.StatusOK, driveBody(d))
	return nil
}

// connectDrive is the two-level indirection's answer: the drive's current
// blocknode, export name and a token.
func (s *Server) connectDrive(w http.ResponseWriter, r *http.Request) error {
	m, ok, err := s.drivesFor(r)
	if err != nil {
		return err
	}
	if !ok {
		return errNotFound("RackpoolDrive", r.PathValue("id"))
	}
	var body struct {
		Rights     string
		TTLSeconds *float64
		Holder     *string
		Preempt    bool
	}
	if r.ContentLength != 0 {
		if err := decode(r, &body); err != nil {
			return err
		}
	}
	rights, err := blocknode.ParseRights(body.Rights)
	if err != nil {
		return errPropertyValue("Rights", body.Rights, err.Error())
	}
	ttl, err := oem.TTLOf(body.TTLSeconds)
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
	noteAudit(r).detail = detail
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
	writeJSON(w, http.StatusOK, out)
	return nil
}

// releaseDrive ends the caller's write reservation of a drive (Holder, by
// default the one Connect gives the caller) and answers the drive.
func (s *Server) releaseDrive(w http.ResponseWriter, r *http.Request) error {
	m, ok, err := s.drivesFor(r)
	if err != nil {
		return err
	}
	if !ok {
		return errNotFound("RackpoolDrive", r.PathValue("id"))
	}
	var body struct{ Holder *string }
	if r.ContentLength != 0 {
		if err := decode(r, &body); err != nil {
			return err
		}
	}
	holder := holderOf(r, body.Holder)
	wr, err := m.Release(r.Context(), r.PathValue("id"), holder)
	if err != nil {
		return err
	}
	noteAudit(r).detail = fmt.Sprintf("drive %s released by %q; write reservation generation now %d", r.PathValue("id"), holder, wr.Generation)
	d, err := m.Drive(r.PathValue("id"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, driveBody(d))
	return nil
}

// holderOf is the write reservation holder a request names, by default
// "<account>@<client address>".
func holderOf(r *http.Request, named *string) string {
	if named != nil {
		return *named
	}
	return principal(r).User + "@" + clientAddr(r)
}

// writerBody shows a write reservation: null when nobody holds it.
func writerBody(wr drive.Writer) any {
	if wr.Holder == "" {
		return nil
	}
	return map[string]any{"Holder": wr.Holder, "Generation": wr.Generation, "Since": wr.Since.UTC().Format(time.RFC3339Nano)}
}

// translateDrive maps the drive manager's errors; ok is false for others.
func translateDrive(err error) (*apiError, bool) {
	var reserved *drive.ReservedError
	switch {
	case errors.As(err, &reserved):
		e := newError(http.StatusConflict, baseRegistry+"ResourceInUse",
			"The change to the requested resource failed because the resource is in use or in transition.").withResolution(err.Error())
		e.oem = map[string]any{"WriteReservation": writerBody(reserved.Writer)}
		return e, true
	case errors.Is(err, drive.ErrNotFound):
		return newError(http.StatusNotFound, baseRegistry+"ResourceMissingAtURI",
			"The requested pooled drive or blocknode was not found.").withResolution(err.Error()), true
	case errors.Is(err, drive.ErrBadInput):
		e := newError(http.StatusBadRequest, baseRegistry+"GeneralError", err.Error())
		e.resolution = "Correct the request and resubmit it."
		return e, true
	case errors.Is(err, drive.ErrConflict):
		return newError(http.StatusConflict, baseRegistry+"ResourceInUse",
			"The change to the requested resource failed because the resource is in use or in transition.").withResolution(err.Error()), true
	case errors.Is(err, drive.ErrUnavailable):
		return newError(http.StatusServiceUnavailable, baseRegistry+"ServiceTemporarilyUnavailable",
			"The service is temporarily unavailable.  Retry in 1 seconds.", "1").withResolution(err.Error() + "; retry shortly."), true
	}
	return nil, false
}
