package rfdriver

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"sync"

	"rackpool/internal/fabric"
)

// A vendor composer (Options.Composition) is a Redfish service that
// composes its own resource blocks, as DMTF's composability model has it
// (H3 and GigaIO boxes, DMTF's public-expansion-box, another rackpool):
// no Fabrics, but ResourceBlocks (under the CompositionService or at the
// service root) and composed ComputerSystems. The topology's hosts are the
// vendor's Compute blocks and its device blocks the vendor's other blocks,
// each by Id. Attaching block B to host H is composing B into H's composed
// system:
//
//	H has no composed system  POST Systems {Links: {ResourceBlocks: [H, B]}}
//	H has one                 PATCH it, If-Match its ETag, with B added to Links.ResourceBlocks
//
// and detaching is the mirror: a PATCH without B, or a DELETE of the system
// when B was its last device block, so the vendor's host is left free. The
// state is the vendor's composed systems (SystemType Composed) and the
// blocks in their Links.ResourceBlocks; the reconcile loop of doc.go runs
// unchanged over it: a lost answer is read back, a 412 re-decided.

// blockRes and systemRes are the properties of a resource block and a
// composed system the composition mode reads.
type blockRes struct {
	ID                string   `json:"Id"`
	ResourceBlockType []string `json:"ResourceBlockType"`
	Status            *status  `json:"Status"`
}

type systemRes struct {
	ID         string `json:"Id"`
	SystemType string `json:"SystemType"`
	Links      struct {
		ResourceBlocks []link `json:"ResourceBlocks"`
	} `json:"Links"`
}

type serviceRoot struct {
	Systems            *link `json:"Systems"`
	ResourceBlocks     *link `json:"ResourceBlocks"`
	CompositionService *link `json:"CompositionService"`
}

// startComposition logs in and maps the vendor's resource blocks onto the
// topology: a Compute block whose Id is a host's is that host; another
// block is the device of that Id when the device has one block (as
// discover makes them: a memory device's block is then "{device}-b01"),
// else the block of that Id.
func (d *Driver) startComposition(ctx context.Context) error {
	if _, err := d.c.currentToken(ctx); err != nil {
		return err
	}
	var root serviceRoot
	if _, err := d.c.get(ctx, "/redfish/v1", &root); err != nil {
		return err
	}
	blocks := ""
	if root.CompositionService != nil && root.CompositionService.ID != "" {
		var cs struct {
			ResourceBlocks *link `json:"ResourceBlocks"`
		}
		if _, err := d.c.get(ctx, root.CompositionService.ID, &cs); err != nil {
			return err
		}
		if cs.ResourceBlocks != nil {
			blocks = cs.ResourceBlocks.ID
		}
	}
	if blocks == "" && root.ResourceBlocks != nil {
		blocks = root.ResourceBlocks.ID
	}
	switch {
	case blocks == "":
		return errors.New("the service has no ResourceBlocks (neither under its CompositionService nor at its root): it composes nothing")
	case root.Systems == nil || root.Systems.ID == "":
		return errors.New("the service has no Systems collection to compose into")
	}
	d.blocksColl, d.systems = blocks, root.Systems.ID
	bs, err := d.readBlocks(ctx)
	if err != nil {
		return err
	}
	if missing := d.mapBlocks(bs); len(missing) > 0 {
		d.log.Warn("the composer shows no resource block for some of the fabric's hosts and blocks; they cannot be composed", "missing", missing)
	}
	return nil
}

func (d *Driver) readBlocks(ctx context.Context) ([]member[blockRes], error) {
	bs, err := fetchAll[blockRes](ctx, d.c, d.blocksColl)
	if err != nil {
		return nil, err
	}
	for _, b := range bs {
		if b.v.ID == "" {
			return nil, fmt.Errorf("GET %s: resource block without Id", b.url)
		}
	}
	return bs, nil
}

// mapBlocks replaces the block maps from bs and returns the hosts and
// blocks of the fabric that have no resource block.
func (d *Driver) mapBlocks(bs []member[blockRes]) (missing []string) {
	compute := map[string]string{} // host ID → its Compute block's URI
	device := map[string]string{}  // block ID → its resource block's URI
	hosts := map[string]bool{}
	for _, p := range d.fab.Ports {
		hosts[p.Host.ID] = true
	}
	mine := map[string]string{} // the vendor's block Id → the topology block
	for _, dev := range d.fab.Devices {
		if len(dev.Blocks) == 1 {
			mine[dev.ID] = dev.Blocks[0].ID
			continue
		}
		for _, b := range dev.Blocks {
			mine[b.ID] = b.ID
		}
	}
	for _, b := range bs {
		switch {
		case slices.Contains(b.v.ResourceBlockType, "Compute") && hosts[b.v.ID]:
			compute[b.v.ID] = b.ref
		case !slices.Contains(b.v.ResourceBlockType, "Compute") && mine[b.v.ID] != "":
			device[mine[b.v.ID]] = b.ref
		}
	}
	for _, h := range slices.Sorted(maps.Keys(hosts)) {
		if compute[h] == "" {
			missing = append(missing, h)
		}
	}
	for _, dev := range d.fab.Devices {
		for _, b := range dev.Blocks {
			if device[b.ID] == "" {
				missing = append(missing, b.ID)
			}
		}
	}
	d.mu.Lock()
	d.compute, d.device = compute, device
	d.mu.Unlock()
	return missing
}

// composeURIs returns the URIs of j's host's Compute block and j's block,
// reading the blocks again once when either is not known yet.
func (d *Driver) composeURIs(ctx context.Context, j *job) (host, block string, err error) {
	for try := 0; ; try++ {
		d.mu.Lock()
		host, block = d.compute[j.a.Host], d.device[j.a.Block]
		d.mu.Unlock()
		if host != "" && block != "" {
			return host, block, nil
		}
		if try > 0 {
			return "", "", fmt.Errorf("the composer shows no resource block for host %s or block %s: %w", j.a.Host, j.a.Block, fabric.ErrUnknown)
		}
		bs, err := d.readBlocks(ctx)
		if err != nil {
			return "", "", err
		}
		d.mapBlocks(bs)
	}
}

// readComposed reads the vendor's composed systems.
func (d *Driver) readComposed(ctx context.Context) ([]member[systemRes], error) {
	ss, err := fetchAll[systemRes](ctx, d.c, d.systems)
	if err != nil {
		return nil, err
	}
	return slices.DeleteFunc(ss, func(s member[systemRes]) bool { return s.v.SystemType != "Composed" }), nil
}

// composeStep reads the composed systems and returns the change that
// composes j's block into (or out of) its host's system, or nil when it is
// already so. A block composed into another host's system is ErrInUse.
func (d *Driver) composeStep(ctx context.Context, j *job, attach bool) (*change, error) {
	hostURI, blockURI, err := d.composeURIs(ctx, j)
	if err != nil {
		return nil, err
	}
	ss, err := d.readComposed(ctx)
	if err != nil {
		return nil, err
	}
	var mine, holder *member[systemRes] // the host's system; the block's
	for i := range ss {
		if holds(ss[i].v.Links.ResourceBlocks, hostURI) && mine == nil {
			mine = &ss[i]
		}
		if holds(ss[i].v.Links.ResourceBlocks, blockURI) && holder == nil {
			holder = &ss[i]
		}
	}
	switch {
	case holder != nil && holder != mine:
		if !attach {
			return nil, nil // composed elsewhere: not attached to this host
		}
		return nil, fmt.Errorf("block %s is composed into the composer's system %s, not host %s's: %w", j.a.Block, holder.ref, j.a.Host, fabric.ErrInUse)
	case attach && holder != nil, !attach && holder == nil:
		return nil, nil
	case attach && mine == nil:
		return &change{method: http.MethodPost, url: d.systems, body: map[string]any{
			"Name":  "rackpool " + j.a.Host,
			"Links": map[string]any{"ResourceBlocks": []link{{ID: hostURI}, {ID: blockURI}}},
		}}, nil
	case attach:
		blocks := append(slices.Clone(mine.v.Links.ResourceBlocks), link{ID: blockURI})
		return &change{method: http.MethodPatch, url: mine.ref, etag: mine.etag, body: map[string]any{
			"Links": map[string]any{"ResourceBlocks": blocks},
		}}, nil
	}
	b := norm(blockURI)
	rest := slices.DeleteFunc(slices.Clone(mine.v.Links.ResourceBlocks), func(l link) bool { return norm(l.ID) == b })
	if len(rest) == 1 && holds(rest, hostURI) {
		// The last device block: decompose, leaving the vendor's host free.
		return &change{method: http.MethodDelete, url: mine.ref, etag: mine.etag}, nil
	}
	return &change{method: http.MethodPatch, url: mine.ref, etag: mine.etag, body: map[string]any{
		"Links": map[string]any{"ResourceBlocks": rest},
	}}, nil
}

// discoverComposition returns the attachments the composed systems state
// (each device block of a host's system, on the host's port into this
// fabric) and the health of every mapped host and device from its resource
// block.
func (d *Driver) discoverComposition(ctx context.Context) (fabric.State, error) {
	var (
		bs  []member[blockRes]
		ss  []member[systemRes]
		wg  sync.WaitGroup
		err [2]error
	)
	wg.Add(2)
	go func() { defer wg.Done(); bs, err[0] = d.readBlocks(ctx) }()
	go func() { defer wg.Done(); ss, err[1] = d.readComposed(ctx) }()
	wg.Wait()
	if e := cmp.Or(err[0], err[1]); e != nil {
		return fabric.State{}, e
	}
	d.mapBlocks(bs)
	st := fabric.State{Health: map[string]fabric.Health{}}
	d.mu.Lock()
	hostOf, blockOf := invert(d.compute), invert(d.device)
	d.mu.Unlock()
	for _, b := range bs {
		h, err := b.v.Status.health()
		if err != nil {
			return fabric.State{}, fmt.Errorf("GET %s: %w", b.url, err)
		}
		switch ref := norm(b.ref); {
		case hostOf[ref] != "":
			st.Health[hostOf[ref]] = h
		case blockOf[ref] != "":
			st.Health[d.top.Block(blockOf[ref]).Device.ID] = h
		}
	}
	for _, s := range ss {
		host, port := "", ""
		for _, l := range s.v.Links.ResourceBlocks {
			if h := hostOf[norm(l.ID)]; h != "" {
				host, port = h, d.portOf(h)
			}
		}
		if host == "" {
			continue // a system of a host outside this topology
		}
		for _, l := range s.v.Links.ResourceBlocks {
			if id := blockOf[norm(l.ID)]; id != "" {
				blk := d.top.Block(id)
				st.Attachments = append(st.Attachments, fabric.Attachment{Block: id, Device: blk.Device.ID, Host: host, HostPort: port})
			}
		}
	}
	slices.SortFunc(st.Attachments, func(a, b fabric.Attachment) int {
		return cmp.Or(cmp.Compare(d.top.Block(a.Block).Index, d.top.Block(b.Block).Index), cmp.Compare(a.Host, b.Host))
	})
	return st, nil
}

// portOf is host's port into this fabric (its first).
func (d *Driver) portOf(host string) string {
	for _, p := range d.fab.Ports {
		if p.Host.ID == host {
			return p.ID
		}
	}
	return ""
}

// invert maps each URI (normalised) back to its ID.
func invert(m map[string]string) map[string]string {
	out := make(map[string]string, len(m))
	for id, uri := range m {
		out[norm(uri)] = id
	}
	return out
}

// composeJob is resolve for a composer: the job's initiator is the host's
// Compute block, which serialises changes per host as zones serialise them
// per host port.
func (d *Driver) composeJob(ctx context.Context, j *job) error {
	host, block, err := d.composeURIs(ctx, j)
	if err != nil {
		return err
	}
	j.ini, j.tgt = host, block
	return nil
}
