package rfdriver

import (
	"cmp"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"rackpool/internal/fabric"
	"rackpool/internal/inventory"
	"rackpool/internal/topology"
)

// Defaults of Options.
const (
	DefaultTimeout        = 30 * time.Second
	DefaultRequestTimeout = 5 * time.Second
)

// Options configure a Driver. The zero value of every optional field means
// its default.
type Options struct {
	Topology *topology.Topology
	// Fabric is the topology's fabric ID.
	Fabric string
	// URL is the manager's base URL; its service root is URL/redfish/v1.
	URL string
	// ManagerFabric is the manager's Fabric Id (default: Fabric).
	ManagerFabric string
	// Composition drives a vendor composer instead of a fabric manager: a
	// service that composes its own resource blocks into ComputerSystems
	// (composition.go); ManagerFabric is then unused.
	Composition bool
	// User and Password are the manager account's. The password never
	// appears in errors or logs.
	User, Password string
	// TLS configures HTTPS (nil: the system's roots).
	TLS *tls.Config
	// Timeout bounds each Attach, Detach, Discover and New, retries and
	// task polling included (default DefaultTimeout).
	Timeout time.Duration
	// RequestTimeout bounds each HTTP request, answer read included
	// (default DefaultRequestTimeout).
	RequestTimeout time.Duration
	// Logger receives the driver's logs (nil: slog.Default()).
	Logger *slog.Logger
}

// Validate checks the required fields.
func (o *Options) Validate() error {
	switch {
	case o.Topology == nil:
		return errors.New("redfish driver: no topology")
	case o.Fabric == "":
		return errors.New("redfish driver: no fabric")
	case o.Topology.Fabric(o.Fabric) == nil:
		return fmt.Errorf("redfish driver: fabric %s is not in topology %s", o.Fabric, o.Topology.Name)
	case o.URL == "":
		return fmt.Errorf("redfish driver for fabric %s: no manager URL", o.Fabric)
	case o.Timeout < 0 || o.RequestTimeout < 0:
		return fmt.Errorf("redfish driver for fabric %s: negative timeout", o.Fabric)
	}
	return nil
}

// Driver operates one fabric of a Redfish fabric manager. It is safe for
// concurrent use.
type Driver struct {
	top      *topology.Topology
	fab      *inventory.Fabric
	c        *client
	fabPath  string // /redfish/v1/Fabrics/{manager fabric}
	timeout  time.Duration
	log      *slog.Logger
	endpoint string // the Endpoints collection
	zones    string // the Zones collection ("" when the fabric has none)
	conns    string // the Connections collection ("" when none)
	actions  map[string]string

	// A vendor composer's (composition.go): its ResourceBlocks and Systems
	// collections; composition is set when the driver drives one.
	composition         bool
	blocksColl, systems string

	mu     sync.Mutex
	byURI  map[string]element // endpoint URI → topology element
	target map[string]string  // device ID → endpoint URI
	init   map[string]string  // "host/port" → endpoint URI
	chunks map[string]string  // block ID → memory chunk URI
	// A vendor composer's: host ID → its Compute block, block ID → its
	// resource block (URIs).
	compute, device map[string]string

	locks keyedMutex // one change at a time per initiator endpoint
}

var (
	_ fabric.Driver        = (*Driver)(nil)
	_ fabric.FaultInjector = (*Driver)(nil)
)

// element is what an endpoint stands for: a device, or a host port.
type element struct {
	dev *inventory.Device
	hp  *inventory.HostPort
}

// New logs in to the manager, checks that it has the fabric and maps its
// endpoints (and memory chunks) onto the topology, all within o.Timeout.
func New(ctx context.Context, o Options) (*Driver, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	if o.ManagerFabric == "" {
		o.ManagerFabric = o.Fabric
	}
	if o.Timeout == 0 {
		o.Timeout = DefaultTimeout
	}
	if o.RequestTimeout == 0 {
		o.RequestTimeout = DefaultRequestTimeout
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.Proxy = nil
	if o.TLS != nil {
		tr.TLSClientConfig = o.TLS.Clone()
	}
	log := o.Logger.With("fabric", o.Fabric, "manager", o.URL)
	c, err := newClient(o.URL, o.User, o.Password, tr, o.RequestTimeout, log)
	if err != nil {
		return nil, fmt.Errorf("redfish driver for fabric %s: %w", o.Fabric, err)
	}
	d := &Driver{
		top:     o.Topology,
		fab:     o.Topology.Fabric(o.Fabric),
		c:       c,
		fabPath: "/redfish/v1/Fabrics/" + o.ManagerFabric,
		timeout: o.Timeout,
		log:     log,
		actions: map[string]string{},

		composition: o.Composition,
	}
	ctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	start := d.start
	if d.composition {
		start = d.startComposition
	}
	if err := start(ctx); err != nil {
		cctx, ccancel := context.WithTimeout(context.WithoutCancel(ctx), o.RequestTimeout)
		defer ccancel()
		_ = c.logout(cctx)
		return nil, fmt.Errorf("redfish driver for fabric %s at %s: %w", o.Fabric, c.base, err)
	}
	return d, nil
}

// start logs in and reads the fabric, its endpoints and memory chunks.
func (d *Driver) start(ctx context.Context) error {
	if _, err := d.c.currentToken(ctx); err != nil {
		return err
	}
	var f fabricRes
	if _, err := d.c.get(ctx, d.fabPath, &f); err != nil {
		var nf *notFoundError
		if errors.As(err, &nf) {
			return fmt.Errorf("the manager has no fabric %s (%s)", d.fabPath[strings.LastIndex(d.fabPath, "/")+1:], nf.url)
		}
		return err
	}
	if f.Endpoints == nil || f.Endpoints.ID == "" {
		return fmt.Errorf("fabric %s has no Endpoints", d.fabPath)
	}
	d.endpoint = f.Endpoints.ID
	if f.Zones != nil {
		d.zones = f.Zones.ID
	}
	if f.Connections != nil {
		d.conns = f.Connections.ID
	}
	for name, a := range f.Actions.Oem {
		if a.Target != "" {
			d.actions[name] = a.Target
		}
	}
	eps, err := d.readEndpoints(ctx)
	if err != nil {
		return err
	}
	missing := d.mapEndpoints(eps)
	if len(missing) > 0 {
		d.log.Warn("the manager shows no endpoint for some of the fabric's devices and host ports; they cannot be attached", "missing", missing)
	}
	for _, dev := range d.fab.Devices {
		if byConnection(dev) {
			if err := d.mapChunks(ctx, dev); err != nil {
				return err
			}
		}
	}
	return nil
}

// Close deletes the driver's session.
func (d *Driver) Close(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, d.c.requestTimeout)
	defer cancel()
	if err := d.c.logout(ctx); err != nil {
		return fmt.Errorf("redfish driver for fabric %s: %w", d.fab.ID, err)
	}
	return nil
}

// byConnection reports whether dev's blocks attach by memory Connections
// rather than by zone membership: CXL memory and any device with several
// blocks (docs/southbound.md).
func byConnection(dev *inventory.Device) bool {
	return len(dev.Blocks) > 1 || dev.Fabric.Kind == inventory.CXLMemory
}

// portName is the "host/port" name of a host port, as fault targets and
// the Health map spell it.
func portName(host, port string) string { return host + "/" + port }

// readEndpoints reads every endpoint of the fabric.
func (d *Driver) readEndpoints(ctx context.Context) ([]member[endpointRes], error) {
	eps, err := fetchAll[endpointRes](ctx, d.c, d.endpoint)
	if err != nil {
		return nil, err
	}
	for _, e := range eps {
		if e.v.ID == "" {
			return nil, fmt.Errorf("GET %s: endpoint without Id", e.url)
		}
	}
	return eps, nil
}

// mapEndpoints replaces the endpoint maps from eps and returns the
// topology elements that have no endpoint.
func (d *Driver) mapEndpoints(eps []member[endpointRes]) (missing []string) {
	byURI := map[string]element{}
	target := map[string]string{}
	init := map[string]string{}
	for _, e := range eps {
		el, ok := d.identify(&e.v)
		if !ok {
			continue
		}
		byURI[norm(e.ref)] = el
		if el.dev != nil {
			target[el.dev.ID] = e.ref
		} else {
			init[portName(el.hp.Host.ID, el.hp.ID)] = e.ref
		}
	}
	for _, dev := range d.fab.Devices {
		if target[dev.ID] == "" {
			missing = append(missing, dev.ID)
		}
	}
	for _, p := range d.fab.Ports {
		if init[portName(p.Host.ID, p.ID)] == "" {
			missing = append(missing, portName(p.Host.ID, p.ID))
		}
	}
	d.mu.Lock()
	d.byURI, d.target, d.init = byURI, target, init
	d.mu.Unlock()
	return missing
}

// identify maps one endpoint onto the topology (docs/southbound.md): a
// target whose Id is a device ID; an initiator whose Id is
// "{host}-{port}", or the port ID with EntityLink /redfish/v1/Systems/{host}.
func (d *Driver) identify(e *endpointRes) (element, bool) {
	role, sys := "", ""
	if len(e.ConnectedEntities) > 0 {
		role = e.ConnectedEntities[0].EntityRole
		if l := e.ConnectedEntities[0].EntityLink; l != nil {
			if h, ok := strings.CutPrefix(strings.TrimRight(l.ID, "/"), "/redfish/v1/Systems/"); ok {
				sys = h
			}
		}
	}
	if role != "Initiator" {
		for _, dev := range d.fab.Devices {
			if dev.ID == e.ID {
				return element{dev: dev}, true
			}
		}
	}
	if role != "Target" {
		for _, p := range d.fab.Ports {
			if e.ID == p.Host.ID+"-"+p.ID || (e.ID == p.ID && sys == p.Host.ID) {
				return element{hp: p}, true
			}
		}
	}
	return element{}, false
}

// mapChunks finds the memory chunk of each of dev's blocks under
// Chassis/{dev}/MemoryDomains. A manager without them is not an error:
// chunks are then looked for in the existing connections.
func (d *Driver) mapChunks(ctx context.Context, dev *inventory.Device) error {
	domains, err := fetchAll[struct {
		MemoryChunks *link `json:"MemoryChunks"`
	}](ctx, d.c, "/redfish/v1/Chassis/"+dev.ID+"/MemoryDomains")
	var nf *notFoundError
	if errors.As(err, &nf) {
		d.log.Debug("no memory domains", "device", dev.ID)
		return nil
	}
	if err != nil {
		return err
	}
	found := map[string]string{}
	for _, dom := range domains {
		if dom.v.MemoryChunks == nil {
			continue
		}
		refs, err := listAll(ctx, d.c, dom.v.MemoryChunks.ID)
		if err != nil {
			return err
		}
		for _, r := range refs {
			found[r.last()] = r.ID
		}
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.chunks == nil {
		d.chunks = map[string]string{}
	}
	for _, b := range dev.Blocks {
		if u := found[b.ID]; u != "" {
			d.chunks[b.ID] = u
		}
	}
	return nil
}

// job is one resolved Attach or Detach.
type job struct {
	a   fabric.Attachment
	blk *inventory.Block
	dev *inventory.Device
	hp  *inventory.HostPort
	ini string // the host port's initiator endpoint
	tgt string // the device's target endpoint
}

func (j *job) String() string {
	return fmt.Sprintf("%s to %s", j.a.Block, portName(j.a.Host, j.a.HostPort))
}

// resolve checks a against the topology and the manager's endpoints: every
// name must be part of this fabric (else ErrUnknown).
func (d *Driver) resolve(ctx context.Context, a fabric.Attachment) (*job, error) {
	blk := d.top.Block(a.Block)
	if blk == nil || blk.Device == nil || blk.Device.Fabric != d.fab {
		return nil, fmt.Errorf("block %q on fabric %s: %w", a.Block, d.fab.ID, fabric.ErrUnknown)
	}
	if a.Device != "" && a.Device != blk.Device.ID {
		return nil, fmt.Errorf("block %s is of device %s, not %q: %w", a.Block, blk.Device.ID, a.Device, fabric.ErrUnknown)
	}
	a.Device = blk.Device.ID
	h := d.top.Host(a.Host)
	if h == nil {
		return nil, fmt.Errorf("host %q: %w", a.Host, fabric.ErrUnknown)
	}
	var hp *inventory.HostPort
	for _, p := range h.Ports {
		if p.ID == a.HostPort && p.Fabric == d.fab {
			hp = p
		}
	}
	if hp == nil {
		return nil, fmt.Errorf("port %s on fabric %s: %w", portName(a.Host, a.HostPort), d.fab.ID, fabric.ErrUnknown)
	}
	j := &job{a: a, blk: blk, dev: blk.Device, hp: hp}
	if d.composition {
		if err := d.composeJob(ctx, j); err != nil {
			return nil, err
		}
		return j, nil
	}
	for try := 0; ; try++ {
		d.mu.Lock()
		j.ini, j.tgt = d.init[portName(a.Host, a.HostPort)], d.target[a.Device]
		d.mu.Unlock()
		if j.ini != "" && j.tgt != "" {
			return j, nil
		}
		if try > 0 {
			return nil, fmt.Errorf("the manager shows no endpoint for %s or %s: %w", a.Device, portName(a.Host, a.HostPort), fabric.ErrUnknown)
		}
		eps, err := d.readEndpoints(ctx)
		if err != nil {
			return nil, err
		}
		d.mapEndpoints(eps)
	}
}

// Attach connects a.Block to a.HostPort (idempotent; see fabric.Driver).
func (d *Driver) Attach(ctx context.Context, a fabric.Attachment) (fabric.Result, error) {
	return d.operate(ctx, "attach", a, true)
}

// Detach disconnects a.Block from a.HostPort (idempotent; see fabric.Driver).
func (d *Driver) Detach(ctx context.Context, a fabric.Attachment) (fabric.Result, error) {
	return d.operate(ctx, "detach", a, false)
}

func (d *Driver) operate(ctx context.Context, verb string, a fabric.Attachment, attach bool) (fabric.Result, error) {
	parent := ctx
	ctx, cancel := context.WithTimeout(ctx, d.timeout)
	defer cancel()
	j, err := d.resolve(ctx, a)
	if err != nil {
		return fabric.Result{}, fmt.Errorf("%s %s to %s: %w", verb, a.Block, portName(a.Host, a.HostPort), err)
	}
	unlock, err := d.locks.lock(ctx, j.ini, "the change in progress on host port "+portName(a.Host, a.HostPort))
	if err != nil {
		return fabric.Result{}, fmt.Errorf("%s %s on fabric %s: %w", verb, j, d.fab.ID, err)
	}
	defer unlock()
	decide := d.zoneStep
	switch {
	case d.composition:
		decide = d.composeStep
	case byConnection(j.dev):
		decide = d.connectionStep
	}
	r, err := d.reconcile(parent, ctx, func(ctx context.Context) (*change, error) { return decide(ctx, j, attach) })
	if err != nil {
		return r, fmt.Errorf("%s %s on fabric %s: %w", verb, j, d.fab.ID, err)
	}
	if r.Changed {
		d.log.Info(verb, "block", j.a.Block, "host", j.a.Host, "port", j.a.HostPort, "took", r.Took)
	}
	return r, nil
}

// change is one request that moves the fabric toward the asked state.
type change struct {
	method, url string
	body        any
	etag        string // sent as If-Match when set
}

// reconcile runs the decision loop of doc.go: step reads the state and
// returns nil when it is as asked, or the change to send. parent is the
// caller's context, ctx the operation's (parent under the timeout).
func (d *Driver) reconcile(parent, ctx context.Context, step func(context.Context) (*change, error)) (fabric.Result, error) {
	var start time.Time
	sent := false  // a change may have been applied
	var last error // why the last change did not clearly succeed
	fail := func(err error) (fabric.Result, error) {
		if last != nil && ctx.Err() != nil {
			err = fmt.Errorf("%w; last failure: %v", err, last)
		}
		if sent && ctx.Err() != nil && parent.Err() == nil {
			return d.lastLook(parent, start, step, err)
		}
		return fabric.Result{}, err
	}
	for attempt := 1; ; attempt++ {
		ch, err := step(ctx)
		if err != nil {
			return fail(err)
		}
		if ch == nil {
			if !sent {
				return fabric.Result{}, nil
			}
			return fabric.Result{Changed: true, Took: time.Since(start)}, nil
		}
		if start.IsZero() {
			start = time.Now()
		}
		out, err := d.send(ctx, ch)
		switch out {
		case applied:
			return fabric.Result{Changed: true, Took: time.Since(start)}, nil
		case refused:
			return fabric.Result{}, err
		case conflict:
			d.log.Debug("changed by someone else; reading again", "err", err)
			last = err
			if err := sleep(ctx, backoff(1), nil); err != nil {
				return fail(err)
			}
		case unclear:
			sent = true
			if ctx.Err() == nil || last == nil {
				last = err // not one the operation's own deadline caused
			}
			d.log.Debug("outcome unclear; reading the state back", "err", err)
			if err := sleep(ctx, backoff(attempt), nil); err != nil {
				return fail(err)
			}
		}
	}
}

// lastLook reads the state once more after the operation's deadline, when
// a change was sent whose outcome is unknown: the caller is told the truth
// (done, or not in effect), never a guess.
func (d *Driver) lastLook(parent context.Context, start time.Time, step func(context.Context) (*change, error), cause error) (fabric.Result, error) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(parent), 2*d.c.requestTimeout)
	defer cancel()
	ch, err := step(ctx)
	switch {
	case err != nil:
		return fabric.Result{}, fmt.Errorf("%w; the outcome is unknown: reading the state back failed too: %v", cause, err)
	case ch == nil:
		return fabric.Result{Changed: true, Took: time.Since(start)}, nil
	default:
		return fabric.Result{}, fmt.Errorf("%w; the change is not in effect", cause)
	}
}

// Discover returns the fabric's attachments, read from its zones and
// connections, and the health of every device, host port ("host/port")
// and host the manager has an endpoint for.
func (d *Driver) Discover(ctx context.Context) (fabric.State, error) {
	ctx, cancel := context.WithTimeout(ctx, d.timeout)
	defer cancel()
	discover := d.discover
	if d.composition {
		discover = d.discoverComposition
	}
	st, err := discover(ctx)
	if err != nil {
		return fabric.State{}, fmt.Errorf("discover fabric %s: %w", d.fab.ID, err)
	}
	return st, nil
}

func (d *Driver) discover(ctx context.Context) (fabric.State, error) {
	eps, err := d.readEndpoints(ctx)
	if err != nil {
		return fabric.State{}, err
	}
	d.mapEndpoints(eps)
	st := fabric.State{Health: map[string]fabric.Health{}}
	systems, err := d.systemHealth(ctx, eps)
	if err != nil {
		return fabric.State{}, err
	}
	if err := d.health(eps, systems, st.Health); err != nil {
		return fabric.State{}, err
	}
	seen := map[fabric.Attachment]bool{}
	add := func(a fabric.Attachment) {
		if !seen[a] {
			seen[a] = true
			st.Attachments = append(st.Attachments, a)
		}
	}
	if d.zones != "" {
		zs, err := d.readZones(ctx)
		if err != nil {
			return fabric.State{}, err
		}
		for _, z := range zs {
			for _, a := range d.zoneAttachments(&z.v) {
				add(a)
			}
		}
	}
	if d.conns != "" {
		cs, err := d.readConnections(ctx)
		if err != nil {
			return fabric.State{}, err
		}
		for _, c := range cs {
			for _, a := range d.connectionAttachments(&c.v) {
				add(a)
			}
		}
	}
	slices.SortFunc(st.Attachments, func(a, b fabric.Attachment) int {
		return cmp.Or(cmp.Compare(d.top.Block(a.Block).Index, d.top.Block(b.Block).Index),
			cmp.Compare(a.Host, b.Host), cmp.Compare(a.HostPort, b.HostPort))
	})
	return st, nil
}

// health fills h from the endpoints: each device's and host port's own
// Status.Health; a host's from its ComputerSystem (systems) where the
// manager has one, else Critical when every one of its ports on the
// fabric is, else OK.
func (d *Driver) health(eps []member[endpointRes], systems map[string]fabric.Health, h map[string]fabric.Health) error {
	for _, e := range eps {
		d.mu.Lock()
		el, ok := d.byURI[norm(e.ref)]
		d.mu.Unlock()
		if !ok {
			continue
		}
		v, err := e.v.Status.health()
		if err != nil {
			return fmt.Errorf("GET %s: %w", e.url, err)
		}
		if el.dev != nil {
			h[el.dev.ID] = v
		} else {
			h[portName(el.hp.Host.ID, el.hp.ID)] = v
		}
	}
	allFailed := map[string]bool{}
	for _, p := range d.fab.Ports {
		ph, ok := h[portName(p.Host.ID, p.ID)]
		if !ok {
			continue
		}
		if failed, seen := allFailed[p.Host.ID]; !seen || failed {
			allFailed[p.Host.ID] = ph == fabric.Critical
		}
	}
	for host, failed := range allFailed {
		switch said, ok := systems[host]; {
		case ok:
			h[host] = said
		case failed:
			h[host] = fabric.Critical
		default:
			h[host] = fabric.OK
		}
	}
	return nil
}

// systemHealth reads the ComputerSystem each initiator endpoint's
// EntityLink names (/redfish/v1/Systems/{host}) for the host's health. A
// manager without them (404) is not an error: the hosts' health is then
// derived from their ports'.
func (d *Driver) systemHealth(ctx context.Context, eps []member[endpointRes]) (map[string]fabric.Health, error) {
	links := map[string]string{} // host → its System
	for _, e := range eps {
		d.mu.Lock()
		el := d.byURI[norm(e.ref)]
		d.mu.Unlock()
		if el.hp == nil || len(e.v.ConnectedEntities) == 0 || e.v.ConnectedEntities[0].EntityLink == nil {
			continue
		}
		l := *e.v.ConnectedEntities[0].EntityLink
		if norm(l.ID) == "/redfish/v1/Systems/"+el.hp.Host.ID {
			links[el.hp.Host.ID] = l.ID
		}
	}
	out := map[string]fabric.Health{}
	var mu sync.Mutex
	err := forEach(ctx, slices.Sorted(maps.Keys(links)), func(ctx context.Context, host string) error {
		var sys struct {
			Status *status `json:"Status"`
		}
		r, err := d.c.get(ctx, links[host], &sys)
		var nf *notFoundError
		switch {
		case errors.As(err, &nf):
			return nil
		case err != nil:
			return err
		}
		h, err := sys.Status.health()
		if err != nil {
			return fmt.Errorf("GET %s: %w", r.URL, err)
		}
		mu.Lock()
		out[host] = h
		mu.Unlock()
		return nil
	})
	return out, err
}

// keyedMutex serialises work per key. A waiter waits at most until its
// context ends.
type keyedMutex struct {
	mu sync.Mutex
	m  map[string]*keyedEntry
}

type keyedEntry struct {
	held chan struct{} // holds a token while the key is locked
	refs int           // holder and waiters
}

// lock locks key, or fails when ctx ends first with an error that says
// what it waited for (what, e.g. "the change in progress on host port
// host1/pcie").
func (k *keyedMutex) lock(ctx context.Context, key, what string) (unlock func(), err error) {
	k.mu.Lock()
	if k.m == nil {
		k.m = map[string]*keyedEntry{}
	}
	e := k.m[key]
	if e == nil {
		e = &keyedEntry{held: make(chan struct{}, 1)}
		k.m[key] = e
	}
	e.refs++
	k.mu.Unlock()
	release := func() {
		k.mu.Lock()
		if e.refs--; e.refs == 0 {
			delete(k.m, key)
		}
		k.mu.Unlock()
	}
	select {
	case e.held <- struct{}{}:
	case <-ctx.Done():
		release()
		return nil, fmt.Errorf("waiting for %s: %w", what, ctx.Err())
	}
	return func() {
		<-e.held
		release()
	}, nil
}
