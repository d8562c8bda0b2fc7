package rfdriver

import (
	"context"
	"fmt"
	"net/http"
	"slices"

	"rackpool/internal/fabric"
	"rackpool/internal/inventory"
)

// Blocks of memory devices and of devices with several blocks attach by
// Connections: the attachment of block B to host port P is a memory
// Connection whose MemoryChunkInfo names B's chunk (its Id is B) and whose
// InitiatorEndpoints name P.

// readConnections reads every connection of the fabric and learns the
// memory chunks they name.
func (d *Driver) readConnections(ctx context.Context) ([]member[connectionRes], error) {
	cs, err := fetchAll[connectionRes](ctx, d.c, d.conns)
	if err != nil {
		return nil, err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, c := range cs {
		for _, ci := range c.v.MemoryChunkInfo {
			if b := d.fabricBlock(ci.MemoryChunk.last()); b != nil && d.chunks[b.ID] == "" {
				if d.chunks == nil {
					d.chunks = map[string]string{}
				}
				d.chunks[b.ID] = ci.MemoryChunk.ID
			}
		}
	}
	return cs, nil
}

// fabricBlock returns the block of this fabric's devices with ID id, or nil.
func (d *Driver) fabricBlock(id string) *inventory.Block {
	if b := d.top.Block(id); b != nil && b.Device != nil && b.Device.Fabric == d.fab {
		return b
	}
	return nil
}

// connectionAttachments lists the attachments connection c states: each
// of its host ports with each block of its memory chunks.
func (d *Driver) connectionAttachments(c *connectionRes) []fabric.Attachment {
	var ports []*inventory.HostPort
	d.mu.Lock()
	for _, l := range c.Links.InitiatorEndpoints {
		if el := d.byURI[norm(l.ID)]; el.hp != nil {
			ports = append(ports, el.hp)
		}
	}
	d.mu.Unlock()
	var out []fabric.Attachment
	for _, ci := range c.MemoryChunkInfo {
		b := d.fabricBlock(ci.MemoryChunk.last())
		if b == nil {
			continue
		}
		for _, p := range ports {
			out = append(out, fabric.Attachment{Block: b.ID, Device: b.Device.ID, Host: p.Host.ID, HostPort: p.ID})
		}
	}
	return out
}

// hasChunk reports whether c names block's memory chunk.
func hasChunk(c *connectionRes, block string) bool {
	return slices.ContainsFunc(c.MemoryChunkInfo, func(ci chunkInfo) bool { return ci.MemoryChunk.last() == block })
}

// connectionStep reads the connections and returns the change that
// attaches (or detaches) j, or nil when the fabric is already so.
func (d *Driver) connectionStep(ctx context.Context, j *job, attach bool) (*change, error) {
	if d.conns == "" {
		return nil, fmt.Errorf("fabric %s of the manager has no Connections: cannot attach blocks of %s: %w", d.fabPath, j.dev.ID, fabric.ErrUnknown)
	}
	cs, err := d.readConnections(ctx)
	if err != nil {
		return nil, err
	}
	var with []member[connectionRes]
	for _, c := range cs {
		if holds(c.v.Links.InitiatorEndpoints, j.ini) && hasChunk(&c.v, j.blk.ID) {
			with = append(with, c)
		}
	}
	switch {
	case attach && len(with) > 0, !attach && len(with) == 0:
		return nil, nil
	case attach:
		chunk, err := d.chunkOf(ctx, j)
		if err != nil {
			return nil, err
		}
		return &change{method: http.MethodPost, url: d.conns, body: map[string]any{
			"ConnectionType":  "Memory",
			"MemoryChunkInfo": []chunkInfo{{MemoryChunk: link{ID: chunk}, AccessCapabilities: []string{"Read", "Write"}}},
			"Links": map[string]any{
				"InitiatorEndpoints": []link{{ID: j.ini}},
				"TargetEndpoints":    []link{{ID: j.tgt}},
			},
		}}, nil
	}
	c := with[0]
	switch {
	case len(c.v.Links.InitiatorEndpoints) > 1:
		return nil, fmt.Errorf("connection %s joins %d host ports: detaching one of them is not supported; detach it on the manager", c.url, len(c.v.Links.InitiatorEndpoints))
	case len(c.v.MemoryChunkInfo) == 1:
		return &change{method: http.MethodDelete, url: c.ref, etag: c.etag}, nil
	default:
		rest := slices.DeleteFunc(slices.Clone(c.v.MemoryChunkInfo), func(ci chunkInfo) bool { return ci.MemoryChunk.last() == j.blk.ID })
		return &change{method: http.MethodPatch, url: c.ref, etag: c.etag, body: map[string]any{"MemoryChunkInfo": rest}}, nil
	}
}

// chunkOf returns the URI of j's block's memory chunk, looking under the
// device's MemoryDomains again when it is not known yet.
func (d *Driver) chunkOf(ctx context.Context, j *job) (string, error) {
	for try := 0; ; try++ {
		d.mu.Lock()
		u := d.chunks[j.blk.ID]
		d.mu.Unlock()
		if u != "" {
			return u, nil
		}
		if try > 0 {
			return "", fmt.Errorf("the manager shows no memory chunk %s under /redfish/v1/Chassis/%s/MemoryDomains nor in a connection: %w", j.blk.ID, j.dev.ID, fabric.ErrUnknown)
		}
		if err := d.mapChunks(ctx, j.dev); err != nil {
			return "", err
		}
	}
}
