package fmserver

import (
	"context"
	"fmt"
	"net/http"
	"strings"

	"rackpool/internal/fabric"
	"rackpool/internal/inventory"
	"rackpool/internal/rf"
)

// connectionRoutes are the routes of Connections.
var connectionRoutes = []route{
	{"GET /redfish/v1/Fabrics/{id}/Connections", login, (*Server).getConnections},
	{"POST /redfish/v1/Fabrics/{id}/Connections", login, (*Server).postConnection},
	{"GET /redfish/v1/Fabrics/{id}/Connections/{conn}", login, (*Server).getConnection},
	{"DELETE /redfish/v1/Fabrics/{id}/Connections/{conn}", login, (*Server).deleteConnection},
}

// A Connection is one attachment of one block of a device that uses
// Connections (UsesConnections: CXL memory, memory nodes): a Memory
// connection whose MemoryChunkInfo names the block's MemoryChunk, from the
// host port's initiator endpoint to the device's target endpoint. Its Id
// is ConnectionID of the attachment; connections are the driver's
// attachments, nothing is stored besides. The ETag is a hash of the
// attachment: a connection never changes, it exists or it does not.

// ConnectionID is the Id of the Connection of attachment a:
// "{host}-{port}.{block}".
func ConnectionID(a fabric.Attachment) string { return InitiatorID(a.Host, a.HostPort) + "." + a.Block }

// connections returns the attachments that are Connections, in Discover's
// order.
func (s *Server) connections(st fabric.State) []fabric.Attachment {
	var out []fabric.Attachment
	for _, a := range st.Attachments {
		if d := s.device(a.Device); d != nil && UsesConnections(d) {
			out = append(out, a)
		}
	}
	return out
}

func connectionETag(a fabric.Attachment) string {
	return contentETag("connection", a.Block, a.Device, a.Host, a.HostPort)
}

func (s *Server) connectionPath(a fabric.Attachment) string {
	return s.base() + "/Connections/" + ConnectionID(a)
}

func (s *Server) connectionBody(a fabric.Attachment) map[string]any {
	return map[string]any{
		"@odata.id":      s.connectionPath(a),
		"@odata.type":    "#Connection.v1_3_0.Connection",
		"@odata.etag":    connectionETag(a),
		"Id":             ConnectionID(a),
		"Name":           fmt.Sprintf("%s on %s", a.Block, InitiatorID(a.Host, a.HostPort)),
		"ConnectionType": "Memory",
		"Status":         statusOK(""),
		"MemoryChunkInfo": []any{map[string]any{
			"AccessCapabilities": []string{"Read", "Write"},
			"MemoryChunk":        ref(MemoryChunkPath(s.top.Block(a.Block))),
		}},
		"Links": map[string]any{
			"InitiatorEndpoints": []odataID{ref(s.endpointPath(InitiatorID(a.Host, a.HostPort)))},
			"TargetEndpoints":    []odataID{ref(s.endpointPath(a.Device))},
		},
	}
}

func (s *Server) connectionResponse(status int, a fabric.Attachment) *rf.Recorder {
	resp := jsonResponse(status, s.connectionBody(a))
	resp.Header().Set("ETag", connectionETag(a))
	resp.Header().Set("Location", s.connectionPath(a))
	return resp
}

func (s *Server) getConnections(w http.ResponseWriter, r *http.Request) error {
	if err := s.checkFabric(r); err != nil {
		return err
	}
	st, err := s.state(r.Context())
	if err != nil {
		return err
	}
	var members []odataID
	for _, a := range s.connections(st) {
		members = append(members, ref(s.connectionPath(a)))
	}
	rf.WriteJSON(w, http.StatusOK, collection(s.base()+"/Connections", "ConnectionCollection", "Connection Collection", members))
	return nil
}

// connection returns the attachment of the connection r names.
func (s *Server) connection(r *http.Request) (fabric.Attachment, error) {
	if err := s.checkFabric(r); err != nil {
		return fabric.Attachment{}, err
	}
	st, err := s.state(r.Context())
	if err != nil {
		return fabric.Attachment{}, err
	}
	id := r.PathValue("conn")
	for _, a := range s.connections(st) {
		if ConnectionID(a) == id {
			return a, nil
		}
	}
	return fabric.Attachment{}, errNotFound("Connection", id)
}

func (s *Server) getConnection(w http.ResponseWriter, r *http.Request) error {
	a, err := s.connection(r)
	if err != nil {
		return err
	}
	w.Header().Set("ETag", connectionETag(a))
	rf.WriteJSON(w, http.StatusOK, s.connectionBody(a))
	return nil
}

// connectionRequest is the body of a Connection's POST.
type connectionRequest struct {
	Name            *string
	Description     *string
	ConnectionType  *string
	MemoryChunkInfo []struct {
		MemoryChunk        *odataID
		AccessCapabilities []string
	}
	Links *struct {
		InitiatorEndpoints []odataID
		TargetEndpoints    []odataID
	}
}

// chunkBlock resolves a MemoryChunk link to a block of a device of this
// fabric that uses Connections.
func (s *Server) chunkBlock(prop string, l odataID) (*inventory.Block, error) {
	path := strings.TrimRight(l.ID, "/")
	parts := strings.Split(strings.TrimPrefix(path, "/redfish/v1/Chassis/"), "/")
	if !strings.HasPrefix(path, "/redfish/v1/Chassis/") || len(parts) != 5 {
		return nil, errUnknownLink(prop, l.ID, "Link a memory chunk: /redfish/v1/Chassis/{device}/MemoryDomains/{domain}/MemoryChunks/{block}.")
	}
	b := s.top.Block(parts[4])
	if b == nil || b.Device == nil || b.Device.Fabric != s.fab || !UsesConnections(b.Device) || MemoryChunkPath(b) != path {
		return nil, errUnknownLink(prop, l.ID, "No such memory chunk in fabric "+s.fab.ID+".")
	}
	return b, nil
}

// parseConnection checks a Connection body and returns the attachment it
// asks for.
func (s *Server) parseConnection(req *connectionRequest) (fabric.Attachment, error) {
	if req.ConnectionType != nil && *req.ConnectionType != "Memory" {
		return fabric.Attachment{}, errPropertyValue("ConnectionType", *req.ConnectionType, "Connections of this fabric manager are Memory connections.")
	}
	if len(req.MemoryChunkInfo) == 0 {
		return fabric.Attachment{}, errPropertyMissing("MemoryChunkInfo")
	}
	if len(req.MemoryChunkInfo) != 1 {
		return fabric.Attachment{}, errPropertyValue("MemoryChunkInfo", fmt.Sprint(len(req.MemoryChunkInfo)), "Name exactly one memory chunk per connection.")
	}
	info := req.MemoryChunkInfo[0]
	if info.MemoryChunk == nil {
		return fabric.Attachment{}, errPropertyMissing("MemoryChunkInfo[0].MemoryChunk")
	}
	for i, c := range info.AccessCapabilities {
		if c != "Read" && c != "Write" {
			return fabric.Attachment{}, errPropertyValue(fmt.Sprintf("MemoryChunkInfo[0].AccessCapabilities[%d]", i), c, "Use Read and Write.")
		}
	}
	b, err := s.chunkBlock("MemoryChunkInfo[0].MemoryChunk", *info.MemoryChunk)
	if err != nil {
		return fabric.Attachment{}, err
	}
	if req.Links == nil || len(req.Links.InitiatorEndpoints) == 0 {
		return fabric.Attachment{}, errPropertyMissing("Links.InitiatorEndpoints")
	}
	if len(req.Links.InitiatorEndpoints) != 1 {
		return fabric.Attachment{}, errPropertyValue("Links.InitiatorEndpoints", fmt.Sprint(len(req.Links.InitiatorEndpoints)), "Name exactly one host port endpoint.")
	}
	hp, d, err := s.endpointRef("Links.InitiatorEndpoints[0]", req.Links.InitiatorEndpoints[0])
	if err != nil {
		return fabric.Attachment{}, err
	}
	if hp == nil {
		return fabric.Attachment{}, errPropertyValue("Links.InitiatorEndpoints[0]", s.endpointPath(d.ID), "The initiator must be a host port endpoint.")
	}
	for i, l := range req.Links.TargetEndpoints {
		prop := fmt.Sprintf("Links.TargetEndpoints[%d]", i)
		_, d, err := s.endpointRef(prop, l)
		if err != nil {
			return fabric.Attachment{}, err
		}
		if d != b.Device {
			return fabric.Attachment{}, errPropertyValue(prop, l.ID, "The target must be the memory chunk's device, "+b.Device.ID+".")
		}
	}
	return fabric.Attachment{Block: b.ID, Device: b.Device.ID, Host: hp.Host.ID, HostPort: hp.ID}, nil
}

func (s *Server) postConnection(w http.ResponseWriter, r *http.Request) error {
	if err := s.checkFabric(r); err != nil {
		return err
	}
	var req connectionRequest
	if err := decode(r, &req); err != nil {
		return err
	}
	a, err := s.parseConnection(&req)
	if err != nil {
		return err
	}
	unlock, err := s.ports.lock(r.Context(), InitiatorID(a.Host, a.HostPort))
	if err != nil {
		return err
	}
	st, err := s.state(r.Context())
	if err != nil {
		unlock()
		return err
	}
	for _, c := range s.connections(st) {
		if c == a {
			unlock()
			// Already attached: nothing to create; the existing one.
			s.connectionResponse(http.StatusOK, a).Replay(w)
			return nil
		}
	}
	s.runChange(w, r, unlock, []step{{a: a}}, func(context.Context) *rf.Recorder {
		return s.connectionResponse(http.StatusCreated, a)
	})
	return nil
}

func (s *Server) deleteConnection(w http.ResponseWriter, r *http.Request) error {
	a, err := s.connection(r)
	if err != nil {
		return err
	}
	unlock, err := s.ports.lock(r.Context(), InitiatorID(a.Host, a.HostPort))
	if err != nil {
		return err
	}
	if a, err = s.connection(r); err != nil {
		unlock()
		return err
	}
	if err := checkIfMatch(r, connectionETag(a)); err != nil {
		unlock()
		return err
	}
	s.runChange(w, r, unlock, []step{{detach: true, a: a}}, func(context.Context) *rf.Recorder {
		return &rf.Recorder{Status: http.StatusNoContent}
	})
	return nil
}
