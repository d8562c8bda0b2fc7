package discover

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
)

// A vendor composer is a Redfish service that composes its own resource
// blocks (DMTF's composability model: H3 and GigaIO boxes, DMTF's
// public-expansion-box, another rackpool) rather than exposing a fabric.
// Walk reads one as a fabric of its own, DefaultComposerFabric, of kind
// pcie-switch: each Compute block is a host (cores and memory from its
// processors and memory), each other block a device whose kind and
// capacity come from what the block holds (its drives' capacities added
// up, its DIMMs' sizes added up), and each composed ComputerSystem a zone
// of its blocks, reported as an attachment. The `redfish` driver then
// composes through it (manager api: composition, docs/southbound.md).

// DefaultComposerFabric is the Id of the fabric Walk makes of a composer.
const DefaultComposerFabric = "composer"

// Composer is what Walk found of a vendor composer.
type Composer struct {
	// Blocks and Systems are the paths of its ResourceBlocks and Systems
	// collections (Systems "" when it has none).
	Blocks, Systems string
	// CompositionService is its path; "" when the service has none (an
	// expansion box that only lists its blocks).
	CompositionService string
	// Compute are the Ids of its Compute blocks: the hosts it composes
	// for. Hosts are those Options.Hosts named instead.
	Compute, Hosts []string
	// Composed counts its composed systems.
	Composed int
}

// CanCompose reports whether rackpool can compose through the service: it
// has a CompositionService and a Systems collection to compose into.
func (c *Composer) CanCompose() bool { return c.CompositionService != "" && c.Systems != "" }

// composer reads the service as a vendor composer. A service with no
// resource blocks is left as it is (no fabric), unless Options.Composition
// asked for one.
func (w *walker) composer(ctx context.Context, root *serviceRootBody) error {
	c := &Composer{}
	cs, err := link(ServiceRoot, "CompositionService", root.CompositionService)
	if err != nil {
		return err
	}
	rb := ""
	if cs != "" {
		var csb compositionServiceBody
		err := w.decode(ctx, cs, &csb, "CompositionService")
		switch {
		case errors.Is(err, ErrNotFound):
			w.notef("the service root links to CompositionService %s, which does not exist", cs)
			cs = ""
		case err != nil:
			return err
		default:
			if rb, err = link(cs, "ResourceBlocks", csb.ResourceBlocks); err != nil {
				return err
			}
		}
	}
	if rb == "" {
		if rb, err = link(ServiceRoot, "ResourceBlocks", root.ResourceBlocks); err != nil {
			return err
		}
	}
	if rb == "" {
		if w.o.Composition {
			return fmt.Errorf("GET %s: %w: the service has no ResourceBlocks to compose", ServiceRoot, ErrNotFound)
		}
		return nil
	}
	c.Blocks, c.CompositionService = rb, cs
	if c.Systems, err = link(ServiceRoot, "Systems", root.Systems); err != nil {
		return err
	}
	f := &Fabric{ID: DefaultComposerFabric, Path: rb, Name: "resource blocks of " + or(w.res.Service, "the service"), Type: "PCIe",
		Composer: c, MemoryChunks: map[string]*MemoryChunk{}, Volumes: map[string]*Volume{}}
	ms, err := w.members(ctx, rb, []string{ServiceRoot})
	if err != nil {
		return err
	}
	w.res.ResourceBlocks = len(ms)
	byPath := map[string]*Endpoint{}
	for _, m := range ms {
		e, err := w.resourceBlock(ctx, f, m)
		if err != nil {
			return err
		}
		if e != nil {
			f.Endpoints = append(f.Endpoints, e)
			byPath[m] = e
		}
	}
	for _, h := range w.o.Hosts {
		if slices.Contains(c.Compute, h) {
			return fmt.Errorf("discover: host %s is a Compute block of the service already", h)
		}
		c.Hosts = append(c.Hosts, h)
		f.Endpoints = append(f.Endpoints, &Endpoint{ID: h + "-" + f.ID, Path: rb + "#host-" + h, Role: RoleInitiator, Listed: true})
	}
	if c.Systems != "" {
		if err := w.composedSystems(ctx, f, byPath); err != nil {
			return err
		}
	}
	w.res.Composer = c
	w.res.Fabrics = append(w.res.Fabrics, f)
	return nil
}

// resourceBlock reads one resource block as an endpoint of the composer's
// fabric: an initiator for a Compute block (its System, for the host's
// cores and memory, kept under the block's path), else a target whose
// entities are what the block holds, one per kind with the capacities
// added up.
func (w *walker) resourceBlock(ctx context.Context, f *Fabric, m string) (*Endpoint, error) {
	var b resourceBlockBody
	if err := w.decode(ctx, m, &b, "ResourceBlock"); err != nil {
		return nil, err
	}
	id := w.idOf(m, b.ID, "resource block")
	if slices.Contains(b.ResourceBlockType, "Compute") {
		f.Composer.Compute = append(f.Composer.Compute, id)
		sys := &System{ID: id, Path: m}
		ps, err := links(m, "Processors", b.Processors)
		if err != nil {
			return nil, err
		}
		for _, p := range ps {
			var pb processorBody
			if err := w.decode(ctx, p, &pb, "Processor"); err != nil {
				return nil, err
			}
			if (pb.ProcessorType == "" || pb.ProcessorType == "CPU") && pb.TotalCores != nil && *pb.TotalCores > 0 && *pb.TotalCores < 1<<20 {
				sys.Cores += int(*pb.TotalCores)
			}
		}
		mems, err := links(m, "Memory", b.Memory)
		if err != nil {
			return nil, err
		}
		var bytes int64
		for _, p := range mems {
			var mb memoryBody
			if err := w.decode(ctx, p, &mb, "Memory"); err != nil {
				return nil, err
			}
			bytes += mibOf(mb.CapacityMiB)
		}
		sys.MemoryGiB = int(bytes >> 30)
		w.res.Systems[m] = sys
		return &Endpoint{ID: id + "-" + f.ID, Path: m, Role: RoleInitiator, Health: b.Status.Health, Listed: true}, nil
	}
	e := &Endpoint{ID: id, Path: m, Role: RoleTarget, Health: b.Status.Health, Listed: true}
	add := func(typ, prop string, ls []odataLink) error {
		paths, err := links(m, prop, ls)
		if err != nil {
			return err
		}
		for _, p := range paths {
			if !slices.ContainsFunc(e.Entities, func(x *Entity) bool { return x.Link == p }) {
				e.Entities = append(e.Entities, &Entity{Type: typ, Role: string(RoleTarget), Link: p})
			}
		}
		return nil
	}
	for _, s := range []struct {
		typ, prop string
		ls        []odataLink
	}{{"Processor", "Processors", b.Processors}, {"Drive", "Drives", b.Drives}, {"Memory", "Memory", b.Memory},
		{"NetworkController", "EthernetInterfaces", b.EthernetInterfaces}, {"NetworkController", "NetworkInterfaces", b.NetworkInterfaces}} {
		if err := add(s.typ, s.prop, s.ls); err != nil {
			return nil, err
		}
	}
	storages, err := links(m, "Storage", b.Storage)
	if err != nil {
		return nil, err
	}
	if len(b.Drives) > 0 {
		storages = nil // the block's own Drives are the drives its Storage holds too (DMTF's mockups list both)
	}
	for _, sp := range storages {
		var sb storageBody
		err := w.decode(ctx, sp, &sb, "Storage")
		if errors.Is(err, ErrNotFound) {
			w.notef("resource block %s links to storage %s, which does not exist", m, sp)
			continue
		}
		if err != nil {
			return nil, err
		}
		if err := add("Drive", "Drives", sb.Drives); err != nil {
			return nil, err
		}
	}
	for _, en := range e.Entities {
		if err := w.entity(ctx, f, e, en); err != nil {
			return nil, err
		}
	}
	// One entity per kind, its capacity the block's: a block of four
	// drives is one device of their total size.
	var merged []*Entity
	for _, en := range e.Entities {
		i := slices.IndexFunc(merged, func(x *Entity) bool { return x.Type == en.Type })
		if i < 0 {
			merged = append(merged, en)
			continue
		}
		merged[i].CapacityBytes += en.CapacityBytes
	}
	if n := len(e.Entities) - len(merged); n > 0 {
		w.notef("resource block %s holds %d members; its device is all of them, their capacities added up", id, len(e.Entities))
	}
	e.Entities = merged
	return e, nil
}

// composedSystems reads the composer's composed systems: each is a zone of
// the blocks it is composed of (the attachments Walk reports).
func (w *walker) composedSystems(ctx context.Context, f *Fabric, byPath map[string]*Endpoint) error {
	ms, err := w.members(ctx, f.Composer.Systems, []string{ServiceRoot})
	if err != nil {
		return err
	}
	for _, m := range ms {
		var sb composedSystemBody
		if err := w.decode(ctx, m, &sb, "ComputerSystem"); err != nil {
			return err
		}
		if sb.SystemType != "Composed" {
			continue
		}
		f.Composer.Composed++
		blocks, err := links(m, "Links.ResourceBlocks", sb.Links.ResourceBlocks)
		if err != nil {
			return err
		}
		z := &Zone{ID: w.idOf(m, sb.ID, "system"), Path: m, Type: "ZoneOfEndpoints"}
		for _, bp := range blocks {
			e := byPath[strings.TrimRight(bp, "/")]
			if e == nil {
				w.notef("composed system %s names resource block %s, which the service does not list", m, bp)
				continue
			}
			z.Endpoints = append(z.Endpoints, e.Path)
			e.Zones = append(e.Zones, m)
		}
		f.Zones = append(f.Zones, z)
	}
	return nil
}
