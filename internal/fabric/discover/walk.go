package discover

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/url"
	"slices"
	"strings"

	"rackpool/internal/jsonlimit"
)

// Getter reads one resource: it GETs path (a service path such as
// "/redfish/v1/Fabrics", possibly with a query) and returns the body. It
// reports a resource that does not exist with an error wrapping
// ErrNotFound. Walk adds the path to every error, so a Getter need not.
type Getter func(ctx context.Context, path string) ([]byte, error)

// Defaults for Options' zero values.
const (
	DefaultMaxResources = 20_000
	DefaultMaxBodyBytes = 4 << 20
)

// ServiceRoot is the path every walk starts from.
const ServiceRoot = "/redfish/v1"

// Options bound a walk. The zero value walks every fabric within the
// default limits.
type Options struct {
	// Fabrics, when not empty, are the Ids of the only fabrics to read; a
	// name the service does not have is an error (ErrUnknownFabric).
	Fabrics []string
	// MaxResources is the most resources one walk reads (0:
	// DefaultMaxResources); one more is ErrTooMany.
	MaxResources int
	// MaxBodyBytes is the largest body accepted (0: DefaultMaxBodyBytes);
	// a larger one is ErrTooLarge.
	MaxBodyBytes int64
	// Composition reads the service as a vendor composer (composer.go)
	// even when it has Fabrics; without it, a service without Fabrics is
	// read so when it has resource blocks.
	Composition bool
	// Hosts are the hosts cabled to a composer that lists no Compute
	// block of its own (an expansion box): each becomes a host of the
	// composer's fabric.
	Hosts []string
}

// Validate reports options that cannot be used.
func (o Options) Validate() error {
	if o.MaxResources < 0 {
		return fmt.Errorf("discover: MaxResources must not be negative, got %d", o.MaxResources)
	}
	if o.MaxBodyBytes < 0 {
		return fmt.Errorf("discover: MaxBodyBytes must not be negative, got %d", o.MaxBodyBytes)
	}
	for _, f := range o.Fabrics {
		if f == "" || strings.Contains(f, "/") {
			return fmt.Errorf("discover: %q is not a fabric Id", f)
		}
	}
	for _, h := range o.Hosts {
		if h == "" || strings.ContainsAny(h, "/ ") {
			return fmt.Errorf("discover: %q is not a host Id", h)
		}
	}
	if o.Composition && len(o.Fabrics) > 0 {
		return errors.New("discover: Composition reads resource blocks, not fabrics: leave Fabrics empty")
	}
	return nil
}

func (o Options) withDefaults() Options {
	if o.MaxResources == 0 {
		o.MaxResources = DefaultMaxResources
	}
	if o.MaxBodyBytes == 0 {
		o.MaxBodyBytes = DefaultMaxBodyBytes
	}
	return o
}

// Walk reads a Redfish service through get, from the service root to its
// Fabrics and, in each, the Switches and their Ports, Endpoints, Zones,
// EndpointGroups and Connections, then the resources those link to that
// say what a device or host is: the ComputerSystems initiators belong to,
// the Processors, Drives, Volumes, Memory, CXL logical devices, PCIe
// devices and MemoryChunks targets and connections name. Each resource is
// read once. Walk only reads: get is the only way it reaches the service.
//
// A malformed resource (not JSON, a property of the wrong type, a link
// without @odata.id, a resource of another type than its link promised),
// a cycle, a body over the size limit or more resources than the limit
// end the walk with an error naming the path. A link that leads nowhere
// (404) ends it when the link is structural (a collection's member) and
// is a note in the Result when Walk followed it only to learn more.
func Walk(ctx context.Context, get Getter, o Options) (*Result, error) {
	if get == nil {
		return nil, errors.New("discover: no getter")
	}
	if err := o.Validate(); err != nil {
		return nil, err
	}
	w := &walker{get: get, o: o.withDefaults(), bodies: map[string][]byte{},
		res: &Result{Systems: map[string]*System{}}}
	if err := w.walk(ctx); err != nil {
		return nil, err
	}
	w.res.Resources = len(w.bodies)
	return w.res, nil
}

type walker struct {
	get    Getter
	o      Options
	bodies map[string][]byte
	res    *Result
}

func (w *walker) notef(format string, args ...any) {
	n := fmt.Sprintf(format, args...)
	if !slices.Contains(w.res.Notes, n) {
		w.res.Notes = append(w.res.Notes, n)
	}
}

// normPath checks that link is a path of the service and returns it
// without fragment or trailing slash (the query stays: page links have
// one).
func normPath(link string) (string, error) {
	u, err := url.Parse(link)
	if err != nil || u.Scheme != "" || u.Host != "" || u.Opaque != "" {
		return "", fmt.Errorf("%q is not a path of this service", link)
	}
	p := strings.TrimRight(u.Path, "/")
	if p != ServiceRoot && !strings.HasPrefix(p, ServiceRoot+"/") {
		return "", fmt.Errorf("%q is not a %s path", link, ServiceRoot)
	}
	for _, seg := range strings.Split(p, "/") {
		if seg == "." || seg == ".." {
			return "", fmt.Errorf("%q has a dot segment", link)
		}
	}
	if u.RawQuery != "" {
		p += "?" + u.RawQuery
	}
	return p, nil
}

// read GETs path once; later reads return the same body.
func (w *walker) read(ctx context.Context, path string) ([]byte, error) {
	if b, ok := w.bodies[path]; ok {
		return b, nil
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("GET %s: %w", path, err)
	}
	if len(w.bodies) >= w.o.MaxResources {
		return nil, fmt.Errorf("GET %s: %w: more than %d resources", path, ErrTooMany, w.o.MaxResources)
	}
	b, err := w.get(ctx, path)
	if err != nil {
		return nil, fmt.Errorf("GET %s: %w", path, err)
	}
	if int64(len(b)) > w.o.MaxBodyBytes {
		return nil, fmt.Errorf("GET %s: %w: %d bytes, the limit is %d", path, ErrTooLarge, len(b), w.o.MaxBodyBytes)
	}
	w.bodies[path] = b
	return b, nil
}

// schema is the schema name of an @odata.type: "#Fabric.v1_4_0.Fabric"
// is "Fabric".
func schema(odataType string) string {
	s := strings.TrimPrefix(odataType, "#")
	if i := strings.IndexByte(s, '.'); i >= 0 {
		s = s[:i]
	}
	return s
}

// decode reads path into v (a pointer to a body type). want, when not
// empty, lists the schemas the resource may be; a resource that names
// another @odata.type is ErrMalformed (one that names none is accepted).
func (w *walker) decode(ctx context.Context, path string, v any, want ...string) error {
	b, err := w.read(ctx, path)
	if err != nil {
		return err
	}
	if err := jsonlimit.Check(b, jsonlimit.MaxDepth); err != nil {
		return fmt.Errorf("GET %s: %w: %v", path, ErrMalformed, err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		var te *json.UnmarshalTypeError
		var se *json.SyntaxError
		switch {
		case errors.As(err, &te) && te.Field == "":
			return fmt.Errorf("GET %s: %w: the body is a JSON %s, not an object", path, ErrMalformed, te.Value)
		case errors.As(err, &te):
			return fmt.Errorf("GET %s: %w: property %s: a JSON %s where %s was expected", path, ErrMalformed, te.Field, te.Value, jsonKind(te.Type.String()))
		case errors.As(err, &se):
			return fmt.Errorf("GET %s: %w: not JSON: %v (at byte %d)", path, ErrMalformed, se, se.Offset)
		default:
			return fmt.Errorf("GET %s: %w: %v", path, ErrMalformed, err)
		}
	}
	if len(want) > 0 {
		var r resource
		_ = json.Unmarshal(b, &r) // decoded above
		if s := schema(r.ODataType); r.ODataType != "" && !slices.Contains(want, s) {
			return fmt.Errorf("GET %s: %w: a %s where a %s was expected", path, ErrMalformed, s, strings.Join(want, " or "))
		}
	}
	return nil
}

// jsonKind names the JSON type a Go type decodes from.
func jsonKind(goType string) string {
	switch {
	case strings.HasPrefix(goType, "[]"):
		return "an array"
	case goType == "string":
		return "a string"
	case strings.Contains(goType, "float") || strings.Contains(goType, "int"):
		return "a number"
	case goType == "bool":
		return "a boolean"
	default:
		return "an object"
	}
}

// links checks a list of links (property prop of the resource at path)
// and returns their paths.
func links(path, prop string, ls []odataLink) ([]string, error) {
	out := make([]string, 0, len(ls))
	for i, l := range ls {
		if l.ID == nil || *l.ID == "" {
			return nil, fmt.Errorf("GET %s: %w: %s[%d] has no @odata.id", path, ErrMalformed, prop, i)
		}
		p, err := normPath(*l.ID)
		if err != nil {
			return nil, fmt.Errorf("GET %s: %w: %s[%d]: %v", path, ErrMalformed, prop, i, err)
		}
		out = append(out, p)
	}
	return out, nil
}

// link checks one optional link; nil is "".
func link(path, prop string, l *odataLink) (string, error) {
	if l == nil {
		return "", nil
	}
	if l.ID == nil || *l.ID == "" {
		return "", fmt.Errorf("GET %s: %w: %s has no @odata.id", path, ErrMalformed, prop)
	}
	p, err := normPath(*l.ID)
	if err != nil {
		return "", fmt.Errorf("GET %s: %w: %s: %v", path, ErrMalformed, prop, err)
	}
	return p, nil
}

// members reads the collection at path, following its pages, and returns
// its members. above are the resources the walk came through to reach it:
// a member that is one of them, or the collection itself, is a cycle.
func (w *walker) members(ctx context.Context, path string, above []string) ([]string, error) {
	var out []string
	pages := map[string]bool{}
	for page := path; page != ""; {
		if pages[page] {
			return nil, fmt.Errorf("GET %s: %w: Members@odata.nextLink comes back to %s", path, ErrCycle, page)
		}
		pages[page] = true
		var c collectionBody
		if err := w.decode(ctx, page, &c); err != nil {
			return nil, err
		}
		if s := schema(c.ODataType); c.ODataType != "" && !strings.HasSuffix(s, "Collection") {
			return nil, fmt.Errorf("GET %s: %w: a %s where a collection was expected", page, ErrMalformed, s)
		}
		left := w.o.MaxResources - len(w.bodies)
		if c.Count != nil && (*c.Count > float64(left) || *c.Count < 0 || math.IsNaN(*c.Count)) && *c.Count > float64(len(out)) {
			return nil, fmt.Errorf("GET %s: %w: %.0f members, more than the %d resources left of %d", page, ErrTooMany, *c.Count, left, w.o.MaxResources)
		}
		ms, err := links(page, "Members", c.Members)
		if err != nil {
			return nil, err
		}
		if len(out)+len(ms) > left {
			return nil, fmt.Errorf("GET %s: %w: %d members, more than the %d resources left of %d", page, ErrTooMany, len(out)+len(ms), left, w.o.MaxResources)
		}
		for _, m := range ms {
			if m == path || m == page || slices.Contains(above, m) {
				return nil, fmt.Errorf("GET %s: %w: it lists %s, which contains it", page, ErrCycle, m)
			}
		}
		out = append(out, ms...)
		page = ""
		if c.NextLink != "" {
			if page, err = normPath(c.NextLink); err != nil {
				return nil, fmt.Errorf("GET %s: %w: Members@odata.nextLink: %v", path, ErrMalformed, err)
			}
		}
	}
	return out, nil
}

func (w *walker) walk(ctx context.Context) error {
	var root serviceRootBody
	if err := w.decode(ctx, ServiceRoot, &root, "ServiceRoot"); err != nil {
		return err
	}
	svc := strings.TrimSpace(root.Vendor + " " + root.Product)
	switch {
	case svc != "" && root.RedfishVersion != "":
		svc += ", Redfish " + root.RedfishVersion
	case root.RedfishVersion != "":
		svc = "Redfish " + root.RedfishVersion
	}
	w.res.Service = svc
	fabrics, err := link(ServiceRoot, "Fabrics", root.Fabrics)
	if err != nil {
		return err
	}
	if w.o.Composition {
		return w.composer(ctx, &root)
	}
	if fabrics == "" {
		if len(w.o.Fabrics) > 0 {
			return fmt.Errorf("GET %s: %w: %s: the service has no Fabrics", ServiceRoot, ErrUnknownFabric, strings.Join(w.o.Fabrics, ", "))
		}
		w.notef("the service root has no Fabrics")
		return w.composer(ctx, &root)
	}
	ms, err := w.members(ctx, fabrics, []string{ServiceRoot})
	if err != nil {
		return err
	}
	found := map[string]bool{}
	var ids []string
	for _, m := range ms {
		var fb fabricBody
		if err := w.decode(ctx, m, &fb, "Fabric"); err != nil {
			return err
		}
		id := w.idOf(m, fb.ID, "fabric")
		ids = append(ids, id)
		if len(w.o.Fabrics) > 0 && !slices.Contains(w.o.Fabrics, id) {
			continue
		}
		if found[id] {
			return fmt.Errorf("GET %s: %w: a second fabric with Id %q", m, ErrMalformed, id)
		}
		found[id] = true
		f, err := w.fabric(ctx, m, id, &fb, []string{ServiceRoot, fabrics})
		if err != nil {
			return err
		}
		w.res.Fabrics = append(w.res.Fabrics, f)
	}
	for _, want := range w.o.Fabrics {
		if !found[want] {
			return fmt.Errorf("GET %s: %w %q (the service has: %s)", fabrics, ErrUnknownFabric, want, strings.Join(ids, ", "))
		}
	}
	return nil
}

// idOf is a resource's Id, or its path's last segment when it has none.
func (w *walker) idOf(path, id, what string) string {
	last := path[strings.LastIndexByte(path, '/')+1:]
	if id == "" {
		w.notef("%s %s has no Id; using %q from its path", what, path, last)
		return last
	}
	if id != last {
		w.notef("%s %s has Id %q, not its path's last segment %q", what, path, id, last)
	}
	return id
}

func (w *walker) fabric(ctx context.Context, path, id string, fb *fabricBody, above []string) (*Fabric, error) {
	f := &Fabric{ID: id, Path: path, Name: fb.Name, Type: fb.FabricType, Health: fb.Status.Health,
		MemoryChunks: map[string]*MemoryChunk{}, Volumes: map[string]*Volume{}}
	above = append(slices.Clip(above), path)
	coll := func(prop string, l *odataLink) ([]string, string, error) {
		p, err := link(path, prop, l)
		if err != nil || p == "" {
			return nil, p, err
		}
		ms, err := w.members(ctx, p, above)
		return ms, p, err
	}

	// Switches and their ports.
	sws, swColl, err := coll("Switches", fb.Switches)
	if err != nil {
		return nil, err
	}
	for _, sp := range sws {
		var sb switchBody
		if err := w.decode(ctx, sp, &sb, "Switch"); err != nil {
			return nil, err
		}
		s := &Switch{ID: w.idOf(sp, sb.ID, "switch"), Path: sp, Type: sb.SwitchType}
		pc, err := link(sp, "Ports", sb.Ports)
		if err != nil {
			return nil, err
		}
		if pc != "" {
			pms, err := w.members(ctx, pc, append(slices.Clip(above), swColl, sp))
			if err != nil {
				return nil, err
			}
			for _, pp := range pms {
				p, err := w.port(ctx, pp)
				if err != nil {
					return nil, err
				}
				s.Ports = append(s.Ports, p)
			}
		}
		f.Switches = append(f.Switches, s)
	}

	// Endpoints the collection lists.
	eps, epColl, err := coll("Endpoints", fb.Endpoints)
	if err != nil {
		return nil, err
	}
	for _, ep := range eps {
		e, err := w.endpoint(ctx, ep)
		if err != nil {
			return nil, err
		}
		e.Listed = true
		f.Endpoints = append(f.Endpoints, e)
	}

	// Zones, endpoint groups, connections.
	zs, zColl, err := coll("Zones", fb.Zones)
	if err != nil {
		return nil, err
	}
	for _, zp := range zs {
		z, err := w.zone(ctx, zp)
		if err != nil {
			return nil, err
		}
		f.Zones = append(f.Zones, z)
	}
	gs, _, err := coll("EndpointGroups", fb.EndpointGroups)
	if err != nil {
		return nil, err
	}
	groups := map[string]*EndpointGroup{}
	for _, gp := range gs {
		var gb endpointGroupBody
		if err := w.decode(ctx, gp, &gb, "EndpointGroup"); err != nil {
			return nil, err
		}
		g := &EndpointGroup{ID: w.idOf(gp, gb.ID, "endpoint group"), Path: gp}
		if g.Endpoints, err = links(gp, "Links.Endpoints", gb.Links.Endpoints); err != nil {
			return nil, err
		}
		groups[gp] = g
		f.EndpointGroups = append(f.EndpointGroups, g)
	}
	cs, cColl, err := coll("Connections", fb.Connections)
	if err != nil {
		return nil, err
	}
	for _, cp := range cs {
		c, err := w.connection(ctx, cp, groups)
		if err != nil {
			return nil, err
		}
		f.Connections = append(f.Connections, c)
	}

	// Endpoints, zones and connections that the others link to but their
	// collections do not list: read them too, until nothing new turns up.
	tried := map[string]bool{}
	// unlisted says whether p is a member of collection coll the walk
	// should still read, noting links that lead outside it.
	unlisted := func(p, coll, what string) bool {
		if tried[p] {
			return false
		}
		tried[p] = true
		if coll == "" || !strings.HasPrefix(p, coll+"/") || strings.Contains(p[len(coll)+1:], "/") {
			w.notef("fabric %s links to %s %s, outside its %ss", f.ID, what, p, what)
			return false
		}
		return true
	}
	for more := true; more; {
		more = false
		var eps []string
		for _, z := range f.Zones {
			eps = append(eps, z.Endpoints...)
		}
		for _, g := range f.EndpointGroups {
			eps = append(eps, g.Endpoints...)
		}
		for _, c := range f.Connections {
			eps = append(eps, c.Initiators...)
			eps = append(eps, c.Targets...)
		}
		for _, s := range f.Switches {
			for _, p := range s.Ports {
				eps = append(eps, p.AssociatedEndpoints...)
			}
		}
		for _, ep := range eps {
			if f.Endpoint(ep) != nil || !unlisted(ep, epColl, "endpoint") {
				continue
			}
			e, err := w.endpoint(ctx, ep)
			if errors.Is(err, ErrNotFound) {
				w.notef("fabric %s links to endpoint %s, which does not exist", f.ID, ep)
				continue
			}
			if err != nil {
				return nil, err
			}
			w.notef("endpoint %s is linked but not listed in %s; read it anyway", ep, epColl)
			f.Endpoints = append(f.Endpoints, e)
			more = true
		}
		for _, e := range f.Endpoints {
			for _, zp := range e.Zones {
				if f.zone(zp) != nil || !unlisted(zp, zColl, "zone") {
					continue
				}
				z, err := w.zone(ctx, zp)
				if errors.Is(err, ErrNotFound) {
					w.notef("endpoint %s links to zone %s, which does not exist", e.Path, zp)
					continue
				}
				if err != nil {
					return nil, err
				}
				w.notef("zone %s is linked but not listed in %s; read it anyway", zp, zColl)
				f.Zones = append(f.Zones, z)
				more = true
			}
			for _, cp := range e.Connections {
				if f.connection(cp) != nil || !unlisted(cp, cColl, "connection") {
					continue
				}
				c, err := w.connection(ctx, cp, groups)
				if errors.Is(err, ErrNotFound) {
					w.notef("endpoint %s links to connection %s, which does not exist", e.Path, cp)
					continue
				}
				if err != nil {
					return nil, err
				}
				w.notef("connection %s is linked but not listed in %s; read it anyway", cp, cColl)
				f.Connections = append(f.Connections, c)
				more = true
			}
		}
	}

	// What the endpoints' entities and the connections link to.
	for _, e := range f.Endpoints {
		for _, en := range e.Entities {
			if en.Link == "" {
				continue
			}
			if sys := systemPath(en.Link); sys != "" && e.Role != RoleTarget {
				if err := w.system(ctx, sys); err != nil {
					return nil, err
				}
				continue
			}
			if err := w.entity(ctx, f, e, en); err != nil {
				return nil, err
			}
		}
	}
	for _, c := range f.Connections {
		for _, ch := range c.MemoryChunks {
			if _, err := w.chunk(ctx, f, ch, ""); err != nil {
				return nil, err
			}
		}
		for _, vp := range c.Volumes {
			if _, ok := f.Volumes[vp]; ok {
				continue
			}
			v := &Volume{ID: vp[strings.LastIndexByte(vp, '/')+1:], Path: vp}
			var vb volumeBody
			err := w.decode(ctx, vp, &vb, "Volume")
			switch {
			case errors.Is(err, ErrNotFound):
				v.Missing = true
				w.notef("connection %s links to volume %s, which does not exist", c.Path, vp)
			case err != nil:
				return nil, err
			default:
				v.ID = w.idOf(vp, vb.ID, "volume")
				v.CapacityBytes = bytesOf(vb.CapacityBytes)
			}
			f.Volumes[vp] = v
		}
	}
	return f, nil
}

func (w *walker) zone(ctx context.Context, zp string) (*Zone, error) {
	var zb zoneBody
	if err := w.decode(ctx, zp, &zb, "Zone"); err != nil {
		return nil, err
	}
	z := &Zone{ID: w.idOf(zp, zb.ID, "zone"), Path: zp, Type: zb.ZoneType}
	var err error
	if z.Endpoints, err = links(zp, "Links.Endpoints", zb.Links.Endpoints); err != nil {
		return nil, err
	}
	return z, nil
}

func (w *walker) port(ctx context.Context, pp string) (*Port, error) {
	var pb portBody
	if err := w.decode(ctx, pp, &pb, "Port"); err != nil {
		return nil, err
	}
	p := &Port{ID: w.idOf(pp, pb.ID, "port"), Path: pp, Type: pb.PortType, Protocol: pb.PortProtocol}
	if pb.Width != nil {
		p.Width = int(*pb.Width)
	}
	if pb.CurrentSpeedGbps != nil {
		p.SpeedGbps = *pb.CurrentSpeedGbps
	}
	var err error
	if p.AssociatedEndpoints, err = links(pp, "Links.AssociatedEndpoints", pb.Links.AssociatedEndpoints); err != nil {
		return nil, err
	}
	if p.ConnectedPorts, err = links(pp, "Links.ConnectedPorts", pb.Links.ConnectedPorts); err != nil {
		return nil, err
	}
	more, err := links(pp, "Links.ConnectedSwitchPorts", pb.Links.ConnectedSwitchPorts)
	if err != nil {
		return nil, err
	}
	p.ConnectedPorts = appendNew(p.ConnectedPorts, more...)
	if p.ConnectedSwitches, err = links(pp, "Links.ConnectedSwitches", pb.Links.ConnectedSwitches); err != nil {
		return nil, err
	}
	return p, nil
}

func appendNew(s []string, vs ...string) []string {
	for _, v := range vs {
		if !slices.Contains(s, v) {
			s = append(s, v)
		}
	}
	return s
}

func (w *walker) endpoint(ctx context.Context, ep string) (*Endpoint, error) {
	var eb endpointBody
	if err := w.decode(ctx, ep, &eb, "Endpoint"); err != nil {
		return nil, err
	}
	e := &Endpoint{ID: w.idOf(ep, eb.ID, "endpoint"), Path: ep, Protocol: eb.EndpointProtocol, Health: eb.Status.Health}
	roles := map[Role]bool{}
	for i, ce := range eb.ConnectedEntities {
		l, err := link(ep, fmt.Sprintf("ConnectedEntities[%d].EntityLink", i), ce.EntityLink)
		if err != nil {
			return nil, err
		}
		e.Entities = append(e.Entities, &Entity{Type: ce.EntityType, Role: ce.EntityRole, Link: l})
		switch ce.EntityRole {
		case "Initiator":
			roles[RoleInitiator] = true
		case "Target":
			roles[RoleTarget] = true
		case "Both":
			roles[RoleBoth] = true
		}
	}
	switch {
	case roles[RoleBoth] || roles[RoleInitiator] && roles[RoleTarget]:
		e.Role = RoleBoth
	case roles[RoleInitiator]:
		e.Role = RoleInitiator
	case roles[RoleTarget]:
		e.Role = RoleTarget
	}
	var err error
	if e.Ports, err = links(ep, "Links.Ports", eb.Links.Ports); err != nil {
		return nil, err
	}
	more, err := links(ep, "Links.ConnectedPorts", eb.Links.ConnectedPorts)
	if err != nil {
		return nil, err
	}
	e.Ports = appendNew(e.Ports, more...)
	if e.Zones, err = links(ep, "Links.Zones", eb.Links.Zones); err != nil {
		return nil, err
	}
	if e.Connections, err = links(ep, "Links.Connections", eb.Links.Connections); err != nil {
		return nil, err
	}
	return e, nil
}

func (w *walker) connection(ctx context.Context, cp string, groups map[string]*EndpointGroup) (*Connection, error) {
	var cb connectionBody
	if err := w.decode(ctx, cp, &cb, "Connection"); err != nil {
		return nil, err
	}
	c := &Connection{ID: w.idOf(cp, cb.ID, "connection"), Path: cp, Type: cb.ConnectionType}
	var err error
	if c.Initiators, err = links(cp, "Links.InitiatorEndpoints", cb.Links.InitiatorEndpoints); err != nil {
		return nil, err
	}
	if c.Targets, err = links(cp, "Links.TargetEndpoints", cb.Links.TargetEndpoints); err != nil {
		return nil, err
	}
	for _, x := range []struct {
		prop string
		ls   []odataLink
		dst  *[]string
	}{{"Links.InitiatorEndpointGroups", cb.Links.InitiatorEndpointGroups, &c.Initiators},
		{"Links.TargetEndpointGroups", cb.Links.TargetEndpointGroups, &c.Targets}} {
		gps, err := links(cp, x.prop, x.ls)
		if err != nil {
			return nil, err
		}
		for _, gp := range gps {
			g := groups[gp]
			if g == nil {
				w.notef("connection %s names endpoint group %s, which the fabric does not list", cp, gp)
				continue
			}
			*x.dst = appendNew(*x.dst, g.Endpoints...)
		}
	}
	for i, mc := range cb.MemoryChunkInfo {
		p, err := link(cp, fmt.Sprintf("MemoryChunkInfo[%d].MemoryChunk", i), mc.MemoryChunk)
		if err != nil {
			return nil, err
		}
		if p != "" {
			c.MemoryChunks = appendNew(c.MemoryChunks, p)
		}
	}
	for i, vi := range cb.VolumeInfo {
		p, err := link(cp, fmt.Sprintf("VolumeInfo[%d].Volume", i), vi.Volume)
		if err != nil {
			return nil, err
		}
		if p != "" {
			c.Volumes = appendNew(c.Volumes, p)
		}
	}
	return c, nil
}

// systemPath is the ComputerSystem a link is in ("/redfish/v1/Systems/X"
// for ".../Systems/X/Processors/CPU"), or "".
func systemPath(l string) string {
	rest, ok := strings.CutPrefix(l, ServiceRoot+"/Systems/")
	if !ok || rest == "" {
		return ""
	}
	if i := strings.IndexByte(rest, '/'); i >= 0 {
		rest = rest[:i]
	}
	return ServiceRoot + "/Systems/" + rest
}

func (w *walker) system(ctx context.Context, sp string) error {
	if w.res.Systems[sp] != nil {
		return nil
	}
	s := &System{ID: sp[strings.LastIndexByte(sp, '/')+1:], Path: sp}
	w.res.Systems[sp] = s
	var sb systemBody
	err := w.decode(ctx, sp, &sb, "ComputerSystem")
	if errors.Is(err, ErrNotFound) {
		s.Missing = true
		w.notef("an initiator links to system %s, which does not exist", sp)
		return nil
	}
	if err != nil {
		return err
	}
	s.ID = w.idOf(sp, sb.ID, "system")
	s.Manufacturer, s.Model = sb.Manufacturer, sb.Model
	if v := sb.MemorySummary.TotalSystemMemoryGiB; v != nil && *v > 0 && *v < 1<<40 {
		s.MemoryGiB = int(*v)
	}
	if v := sb.ProcessorSummary.CoreCount; v != nil && *v > 0 && *v < 1<<30 {
		s.Cores = int(*v)
		return nil
	}
	// No core count in the summary: add up the CPUs' cores.
	pc, err := link(sp, "Processors", sb.Processors)
	if err != nil || pc == "" {
		return err
	}
	ms, err := w.members(ctx, pc, []string{ServiceRoot, sp})
	if errors.Is(err, ErrNotFound) {
		w.notef("system %s links to processors %s, which do not exist", sp, pc)
		return nil
	}
	if err != nil {
		return err
	}
	for _, m := range ms {
		var pb processorBody
		err := w.decode(ctx, m, &pb, "Processor")
		if errors.Is(err, ErrNotFound) {
			w.notef("system %s lists processor %s, which does not exist", sp, m)
			continue
		}
		if err != nil {
			return err
		}
		if (pb.ProcessorType == "" || pb.ProcessorType == "CPU") && pb.TotalCores != nil && *pb.TotalCores > 0 && *pb.TotalCores < 1<<20 {
			s.Cores += int(*pb.TotalCores)
		}
	}
	return nil
}

const mib = 1 << 20

func bytesOf(v *float64) int64 {
	if v == nil || *v <= 0 || *v > 1<<62 {
		return 0
	}
	return int64(*v)
}

func mibOf(v *float64) int64 {
	if v == nil || *v <= 0 || *v > 1<<40 {
		return 0
	}
	return int64(*v * mib)
}

// pcieSpeed is the transfer rate of a PCIe generation.
var pcieSpeed = map[string]string{"Gen1": "2.5GT/s", "Gen2": "5GT/s", "Gen3": "8GT/s", "Gen4": "16GT/s", "Gen5": "32GT/s", "Gen6": "64GT/s"}

// entity reads what an endpoint's entity links to.
func (w *walker) entity(ctx context.Context, f *Fabric, e *Endpoint, en *Entity) error {
	var r resource
	err := w.decode(ctx, en.Link, &r)
	if errors.Is(err, ErrNotFound) {
		w.notef("endpoint %s links to %s, which does not exist", e.Path, en.Link)
		return nil
	}
	if err != nil {
		return err
	}
	en.ResourceType = schema(r.ODataType)
	switch en.ResourceType {
	case "Processor":
		var b processorBody
		if err := w.decode(ctx, en.Link, &b); err != nil {
			return err
		}
		en.ProcessorType, en.Manufacturer, en.Model = b.ProcessorType, b.Manufacturer, b.Model
		en.CapacityBytes = mibOf(b.MemorySummary.TotalMemorySizeMiB)
	case "Drive":
		var b driveBody
		if err := w.decode(ctx, en.Link, &b); err != nil {
			return err
		}
		en.MediaType, en.Protocol, en.Manufacturer, en.Model = b.MediaType, b.Protocol, b.Manufacturer, b.Model
		en.CapacityBytes = bytesOf(b.CapacityBytes)
	case "Volume":
		var b volumeBody
		if err := w.decode(ctx, en.Link, &b); err != nil {
			return err
		}
		en.CapacityBytes = bytesOf(b.CapacityBytes)
	case "Memory":
		var b memoryBody
		if err := w.decode(ctx, en.Link, &b); err != nil {
			return err
		}
		en.Manufacturer, en.Model = b.Manufacturer, b.Model
		en.CapacityBytes = mibOf(b.CapacityMiB)
	case "MemoryChunks":
		ch, err := w.chunk(ctx, f, en.Link, e.Path)
		if err != nil {
			return err
		}
		en.MemoryChunks = []string{ch.Path}
		en.CapacityBytes = ch.SizeBytes
	case "CXLLogicalDevice":
		var b cxlLogicalDeviceBody
		if err := w.decode(ctx, en.Link, &b); err != nil {
			return err
		}
		en.CapacityBytes = mibOf(b.MemorySizeMiB)
		chs, err := links(en.Link, "Links.MemoryChunks", b.Links.MemoryChunks)
		if err != nil {
			return err
		}
		for _, c := range chs {
			if _, err := w.chunk(ctx, f, c, e.Path); err != nil {
				return err
			}
		}
		en.MemoryChunks = chs
	case "PCIeDevice":
		var b pcieDeviceBody
		if err := w.decode(ctx, en.Link, &b); err != nil {
			return err
		}
		en.Manufacturer, en.Model, en.LinkSpeed = b.Manufacturer, b.Model, pcieSpeed[b.PCIeInterface.PCIeType]
		if v := b.PCIeInterface.LanesInUse; v != nil && *v > 0 && *v <= 32 {
			en.LinkWidth = int(*v)
		}
	default:
		var b productBody
		if err := w.decode(ctx, en.Link, &b); err != nil {
			return err
		}
		en.Manufacturer, en.Model = b.Manufacturer, b.Model
	}
	return nil
}

// chunk reads a memory chunk once per fabric; target, when not empty, is
// an endpoint that names it.
func (w *walker) chunk(ctx context.Context, f *Fabric, cp, target string) (*MemoryChunk, error) {
	ch := f.MemoryChunks[cp]
	if ch == nil {
		ch = &MemoryChunk{ID: cp[strings.LastIndexByte(cp, '/')+1:], Path: cp}
		f.MemoryChunks[cp] = ch
		var b memoryChunkBody
		err := w.decode(ctx, cp, &b, "MemoryChunks", "MemoryChunk")
		switch {
		case errors.Is(err, ErrNotFound):
			ch.Missing = true
			w.notef("fabric %s links to memory chunk %s, which does not exist", f.ID, cp)
		case err != nil:
			return nil, err
		default:
			ch.ID = w.idOf(cp, b.ID, "memory chunk")
			ch.SizeBytes = mibOf(b.MemoryChunkSizeMiB)
			if b.AddressRangeOffsetMiB != nil && *b.AddressRangeOffsetMiB >= 0 && *b.AddressRangeOffsetMiB < 1<<40 {
				ch.OffsetMiB = int64(*b.AddressRangeOffsetMiB)
			}
			ch.RangeType = b.AddressRangeType
		}
	}
	if target != "" {
		ch.Endpoints = appendNew(ch.Endpoints, target)
	}
	return ch, nil
}
