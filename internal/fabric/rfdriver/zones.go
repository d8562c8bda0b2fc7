package rfdriver

import (
	"context"
	"net/http"
	"slices"

	"rackpool/internal/fabric"
	"rackpool/internal/inventory"
)

// Devices with one block attach by zone membership: the attachment of
// device D to host port P is a ZoneOfEndpoints holding both P's initiator
// and D's target endpoint.

// readZones reads every zone of endpoints of the fabric.
func (d *Driver) readZones(ctx context.Context) ([]member[zoneRes], error) {
	zs, err := fetchAll[zoneRes](ctx, d.c, d.zones)
	if err != nil {
		return nil, err
	}
	return slices.DeleteFunc(zs, func(z member[zoneRes]) bool {
		return z.v.ZoneType != "" && z.v.ZoneType != "ZoneOfEndpoints"
	}), nil
}

// holds reports whether links name the endpoint ep.
func holds(links []link, ep string) bool {
	ep = norm(ep)
	return slices.ContainsFunc(links, func(l link) bool { return norm(l.ID) == ep })
}

// zoneAttachments lists the attachments zone z states: each of its host
// ports with each of its single-block devices.
func (d *Driver) zoneAttachments(z *zoneRes) []fabric.Attachment {
	var ports []*inventory.HostPort
	var devs []*inventory.Device
	d.mu.Lock()
	for _, l := range z.Links.Endpoints {
		el := d.byURI[norm(l.ID)]
		switch {
		case el.hp != nil:
			ports = append(ports, el.hp)
		case el.dev != nil && !byConnection(el.dev):
			devs = append(devs, el.dev)
		}
	}
	d.mu.Unlock()
	var out []fabric.Attachment
	for _, p := range ports {
		for _, dev := range devs {
			out = append(out, fabric.Attachment{Block: dev.Blocks[0].ID, Device: dev.ID, Host: p.Host.ID, HostPort: p.ID})
		}
	}
	return out
}

// zoneStep reads the zones and returns the change that attaches (or
// detaches) j, or nil when the fabric is already so.
func (d *Driver) zoneStep(ctx context.Context, j *job, attach bool) (*change, error) {
	zs, err := d.readZones(ctx)
	if err != nil {
		return nil, err
	}
	var mine, with []member[zoneRes] // zones holding the initiator; those also holding the target
	for _, z := range zs {
		if holds(z.v.Links.Endpoints, j.ini) {
			mine = append(mine, z)
			if holds(z.v.Links.Endpoints, j.tgt) {
				with = append(with, z)
			}
		}
	}
	switch {
	case attach && len(with) > 0, !attach && len(with) == 0:
		return nil, nil
	case attach && len(mine) == 0:
		return &change{method: http.MethodPost, url: d.zones, body: map[string]any{
			"ZoneType": "ZoneOfEndpoints",
			"Links":    map[string]any{"Endpoints": []link{{ID: j.ini}, {ID: j.tgt}}},
		}}, nil
	case attach:
		z := mine[0]
		eps := append(slices.Clone(z.v.Links.Endpoints), link{ID: j.tgt})
		return &change{method: http.MethodPatch, url: z.ref, etag: z.etag, body: map[string]any{
			"Links": map[string]any{"Endpoints": eps},
		}}, nil
	default:
		z := with[0]
		tgt := norm(j.tgt)
		eps := slices.DeleteFunc(slices.Clone(z.v.Links.Endpoints), func(l link) bool { return norm(l.ID) == tgt })
		return &change{method: http.MethodPatch, url: z.ref, etag: z.etag, body: map[string]any{
			"Links": map[string]any{"Endpoints": eps},
		}}, nil
	}
}
