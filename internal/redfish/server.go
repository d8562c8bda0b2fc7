// Package redfish is rackpool's northbound API: a DMTF Redfish service with
// CompositionService (ResourceBlocks, ResourceZones), Systems (physical
// hosts and composed systems), Chassis, Fabrics (Switches, Ports,
// Endpoints, Zones) and SessionService. One file per resource family, each
// with its routes: literal patterns beside the privilege they need, all
// registered through one table (routes.go).
//
// Every error leaves as the Redfish error body with a Base or Composition
// registry message ID (errors.go). Unauthenticated clients may read only
// /redfish, /redfish/v1, $metadata and odata, and create a session.
// Anything Redfish has no word for (placement explanations, fault
// injection, telemetry) is under Oem.Rackpool.
package redfish

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"reflect"
	"time"

	"rackpool/internal/fabric"
	"rackpool/internal/observe"
	"rackpool/internal/odata"
	"rackpool/internal/redfish/composition"
	"rackpool/internal/redfish/eventservice"
	"rackpool/internal/redfish/fabrics"
	"rackpool/internal/redfish/managers"
	"rackpool/internal/redfish/oem"
	"rackpool/internal/redfish/service"
	"rackpool/internal/redfish/telemetryservice"
	"rackpool/internal/rf"
	"rackpool/internal/store"
	"rackpool/internal/tenancy"

	"rackpool/internal/events"
	"rackpool/internal/metrics"
	"rackpool/internal/topology"
)

// MaxBody is the largest request body accepted.
const MaxBody = rf.MaxBody

// Server serves the Redfish API over one composition manager.
type Server struct {
	mgr     Compositions
	top     *topology.Topology
	auth    Accounts
	log     *slog.Logger
	mux     *rf.Mux
	started time.Time
	uuid    string

	store          Store // audit log and settings; may be nil
	gather         func(r *http.Request, path string) ([][]byte, error)
	replica        string      // Options.Replica
	leads          func() bool // Options.Leads
	events         eventservice.Bus
	metrics        *apiMetrics
	asyncThreshold time.Duration
	tasks          rf.TaskList[*task]
	resLocks       rf.Locks                    // conditional writers, per resource path (etag.go)
	leases         oem.Leases                  // nil: no memory service
	memory         *oem.Memory                 // pooled memory (oem.MemoryRoutes)
	pooledDrives   *oem.PooledDrives           // pooled drives (oem.DriveRoutes)
	healthSrc      HealthSource                // nil: ask the fabric
	tel            telemetryservice.UsageStore // nil: no usage telemetry
	telemetry      *telemetryservice.Service   // the TelemetryService (telemetryservice.Routes)
	managers       *managers.Service           // the Manager (managers.Routes)
	eventsvc       *eventservice.Service       // the EventService (eventservice.Routes)
	hostAgents     *oem.HostAgents             // the host agents' routes (oem.HostAgentRoutes)
	provisioning   *oem.Provisioning           // predictive provisioning (oem.ProvisioningRoutes)
	fabrics        *fabrics.Service            // the Fabrics (fabrics.Routes)
	composition    *composition.Service        // Systems and the CompositionService (composition.Routes)
	usageReg       *metrics.Registry           // rackpool_usage, for unscoped accounts
}

// Options configure a Server beyond its manager and accounts.
type Options struct {
	Logger *slog.Logger // default: discard
	// Store receives the audit log (every mutation and every refusal) and
	// keeps the push subscriptions (store.Store).
	Store Store
	// Observer publishes events and keeps the metrics; serve shares it
	// with the composition manager's hooks. Default: a new one.
	Observer *observe.Observer
	// AsyncThreshold: compositions whose modelled fabric time exceeds it
	// answer 202 with a task monitor. 0 means DefaultAsyncThreshold;
	// negative means never (unless the client sends Prefer: respond-async).
	AsyncThreshold time.Duration
	// Leases serves pooled memory (GetMemory: lease.Manager); nil
	// disables the memory routes.
	Leases oem.Leases
	// Drives serves pooled drives (blocknodes: drive.Manager); nil
	// disables their routes.
	Drives oem.Drives
	// Telemetry stores usage samples (TelemetryService, SubmitUsage,
	// memnodes' lease usage, rackpool_usage: telemetry.Store); nil
	// disables them.
	Telemetry telemetryservice.UsageStore
	// Provisioning is the predictive provisioning loop (provision.Loop);
	// nil disables its routes.
	Provisioning oem.Provisioner
	// Health reports devices' health as the fabric monitor last saw it
	// (events.Monitor); blocks and endpoints read it instead of asking the
	// fabric on every request. Nil: ask the fabric (tests, benchmarks).
	Health HealthSource
	// Broker hands saga steps to host agents (serve --host-agents:
	// hostagent.Broker); nil disables the host agents' routes.
	Broker oem.HostSteps
	// TaskPrefix begins the ID of every task (an active replica's tag and
	// a dash, docs/ha.md): the replica that ran a task answers for it, and
	// the others forward to it (replica.Forward).
	TaskPrefix string
	// Listen is the address the service listens on, as net.Listen takes
	// it ("127.0.0.1:8443", ":8443"): the Manager's EthernetInterfaces
	// and NetworkProtocol report it (managers). What it leaves open
	// (port 0, a host name, no Listen) is read from each request's
	// connection.
	Listen string
	// Gather reads path at every other active replica as r's client
	// (replica.Gatherer.Get): the task collection lists every replica's
	// tasks, and /metrics every replica's series. nil for a replica
	// serving alone.
	Gather func(r *http.Request, path string) ([][]byte, error)
	// Replica is an active replica's tag: /metrics labels this replica's
	// series replica="TAG" (metrics.go). "" for a replica serving alone,
	// whose series have no such label.
	Replica string
	// Leads reports whether this replica leads the active replicas
	// (replica.Active.Leads): usage telemetry lives at the leader, so
	// only its /metrics has the usage series. nil: always (a replica
	// serving alone).
	Leads func() bool
}

// Compositions is what the handlers need of the composition manager
// (compose.Manager): each resource family declares its part.
type Compositions interface {
	composition.Compositions // package composition
	fabrics.Compositions     // package fabrics
	usageCounter             // account_service.go
	// Topology is the topology the manager composes over.
	Topology() *topology.Topology
	// CatchUp brings the manager's snapshot up to what the other active
	// replicas acknowledged (docs/ha.md, "Reads").
	CatchUp(ctx context.Context) error
}

// Store is what the service keeps in the store (store.Store): each family
// declares its part.
type Store interface {
	auditLog // audit.go
	eventservice.Settings
}

// Accounts is what the handlers need of the accounts, tenants and
// sessions (tenancy.Service): each family declares its part.
type Accounts interface {
	accountStore   // account_service.go
	sessionService // sessions.go
	// Authenticate checks Basic credentials (source counts failed
	// logins); BySessionToken finds a session's principal.
	Authenticate(user, password, source string) (tenancy.Principal, error)
	PrincipalOf(ctx context.Context, token string) (tenancy.Principal, error)
}

// HealthSource is a cache of devices' health (events.Monitor).
type HealthSource interface {
	DeviceHealth(fabricID, device string) (fabric.Health, bool)
}

// DefaultAsyncThreshold is the modelled fabric time above which a
// composition runs as a task.
const DefaultAsyncThreshold = time.Second

// New returns a Server. An Options service given as a nil pointer (a nil
// *lease.Manager) counts as none.
func New(mgr Compositions, auth Accounts, o Options) *Server {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Observer == nil {
		o.Observer = observe.New(metrics.NewRegistry(), events.New(events.Options{Logger: o.Logger}))
	}
	if o.AsyncThreshold == 0 {
		o.AsyncThreshold = DefaultAsyncThreshold
	}
	o.Leases, o.Drives, o.Telemetry = orNil(o.Leases), orNil(o.Drives), orNil(o.Telemetry)
	o.Provisioning, o.Health, o.Broker, o.Store = orNil(o.Provisioning), orNil(o.Health), orNil(o.Broker), orNil(o.Store)
	s := &Server{mgr: mgr, top: mgr.Topology(), auth: auth, log: o.Logger, mux: &rf.Mux{Head: true}, started: time.Now(),
		uuid: rf.ServiceUUID("rackpool:" + mgr.Topology().Name), store: o.Store, events: o.Observer.Bus(), asyncThreshold: o.AsyncThreshold,
		tasks: rf.TaskList[*task]{Prefix: o.TaskPrefix, Retention: taskRetention, Max: maxTasks}, leases: o.Leases, healthSrc: o.Health, tel: o.Telemetry,
		gather: o.Gather, replica: o.Replica, leads: o.Leads}
	s.metrics = newAPIMetrics(o.Observer.Registry(), o.Observer.Bus(), s)
	s.telemetry = telemetryservice.New(telemetryservice.Deps{Core: core{s}, Hosts: s.top, Systems: mgr, Leases: s.leases,
		Usage: s.tel, Logger: s.log})
	s.provisioning = oem.NewProvisioning(o.Provisioning, mgr, core{s})
	s.pooledDrives = oem.NewPooledDrives(o.Drives)
	s.memory = oem.NewMemory(s.leases, s.telemetry)
	s.hostAgents = oem.NewHostAgents(o.Broker, s.top, s.log)
	s.eventsvc = eventservice.New(eventservice.Deps{Events: s.events, Settings: s.store, Logger: s.log})
	s.fabrics = fabrics.New(fabrics.Deps{Topology: s.top, Mgr: mgr, Health: s.health, MemoryChunks: s.memoryChunkInfo,
		Quotas: auth, Hider: core{s}, Logger: s.log})
	s.composition = composition.New(composition.Deps{Topology: s.top, Mgr: mgr, Tenants: auth, Core: core{s}, Health: s.health,
		ComposeLatency: s.metrics.composeLat, Logger: s.log})
	s.managers = managers.New(managers.Deps{UUID: s.uuid, Version: func() string { return Version }, Listen: o.Listen, Audit: s.store, Events: s.events})
	if s.tel != nil {
		s.usageReg = metrics.NewRegistry()
		s.telemetry.RegisterUsageMetrics(s.usageReg)
	}
	s.routes()
	return s
}

// ServeHTTP implements http.Handler. The query of a GET or HEAD is parsed
// here (odata.Parse), before any handler runs, and travels on the recorder
// to writeJSON (query.go).
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	id := randomHex(8)
	r = r.WithContext(context.WithValue(r.Context(), requestIDKey{}, id))
	w.Header().Set("X-Request-Id", id)
	rec := &statusRecorder{ResponseWriter: w, status: 200, srv: s, req: r}
	defer func() {
		took := time.Since(start)
		s.metrics.request(r.Method, rec.status, took)
		s.log.Debug("request", "method", r.Method, "path", r.URL.Path, "status", rec.status, "took", took)
	}()
	// A panic's detail goes to the log under the request's ID; the client
	// gets the ID (fail).
	defer rf.Recover(s.log, r, func(v any) { writeError(rec, s.fail(r, fmt.Errorf("panic: %v", v))) }, "request_id", id)
	rf.TrimSlash(r)
	if s.preflight(rec, r) { // protocol.go: OData-Version, POST to …/Members
		return
	}
	if s.mux.Unmatched(rec, r, func(w http.ResponseWriter, p *rf.Problem) { writeError(w, fromProblem(p)) }) { // 405 with Allow, or 404
		return
	}
	if r.Method == http.MethodGet || r.Method == http.MethodHead {
		q, err := odata.Parse(r.URL.RawQuery)
		if err != nil {
			writeError(rec, fromProblem(err))
			return
		}
		rec.q = q
	}
	s.mux.ServeHTTP(rec, r) // sets the path values
}

// ServeFabricTelemetry makes s serve t's reports: the FabricTelemetry
// report, its definition and metric definitions in the TelemetryService,
// and the SSE stream's EventFormatType=MetricReport. Call it once, before
// serving.
func (s *Server) ServeFabricTelemetry(t telemetryservice.FabricReports) {
	t = orNil(t)
	s.telemetry.ServeFabric(t)
	s.eventsvc.ServeFabric(t)
}

// RestoreSubscriptions loads the push subscriptions from the store and
// delivers to them from now on: the leader of several active replicas does
// (docs/ha.md), the others forward the subscriptions' routes to it.
func (s *Server) RestoreSubscriptions(ctx context.Context) error { return s.restoreSubscriptions(ctx) }

func (s *Server) restoreSubscriptions(ctx context.Context) error {
	return s.eventsvc.RestoreSubscriptions(ctx)
}

// DropSubscriptions stops delivering to every push subscription (their
// records stay): a replica that does not lead.
func (s *Server) DropSubscriptions() { s.eventsvc.DropSubscriptions() }

// publish puts e on the bus.
func (s *Server) publish(e events.Event) { s.events.Publish(e) }

// Version is the service's version, set by main.
var Version = "dev"

// allowedMethods lists the methods the path answers to (Allow).
func (s *Server) allowedMethods(r *http.Request) []string { return s.mux.Allowed(r) }

// statusRecorder is the writer every handler writes to. Besides the
// status it carries what writeJSON needs to shape a GET's body
// (service.Shaper): the
// request, its parsed query and the server to make in-process GETs with.
type statusRecorder struct {
	http.ResponseWriter
	status   int
	srv      *Server
	req      *http.Request
	q        *odata.Query // nil unless a GET or HEAD
	internal bool         // an in-process GET (internalGet): ETag only
}

// Unwrap lets http.ResponseController reach the connection's writer.
func (r *statusRecorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

func (r *statusRecorder) WriteHeader(code int) {
	r.status = code
	r.ResponseWriter.WriteHeader(code)
}

// admit is the northbound rf.Policy.Admit: it authenticates (over TLS
// only) and checks the route's privilege against the account's roles.
// Every refusal is logged and audited before it is answered. An admitted
// request carries its principal and its audit notes.
func (s *Server) admit(r *http.Request, pattern string, priv rf.Privilege) (*http.Request, error) {
	var p tenancy.Principal
	if priv != public {
		var err error
		p, err = s.authenticate(r)
		if errors.Is(err, errCredentialsOverHTTP) {
			s.denied(r, p, err.Error())
			e := errInsecure(r.URL.Path)
			s.auditRequest(r, p, pattern, http.StatusForbidden, &auditInfo{detail: err.Error()}, e)
			return r, e
		}
		if errors.Is(err, store.ErrUnavailable) {
			// A token this replica does not know may be another's: without
			// the database it cannot tell, so the client retries.
			s.log.Warn("request not authenticated: the store is unreachable", "method", r.Method, "path", r.URL.Path, "err", err)
			return r, translate(err)
		}
		if err != nil {
			s.denied(r, p, err.Error())
			e := errNoSession()
			s.auditRequest(r, p, pattern, http.StatusUnauthorized, &auditInfo{detail: err.Error()}, e)
			e.noBasic = sessionClient(r)
			return r, e
		}
		if !p.Has(string(priv)) {
			s.denied(r, p, "missing privilege "+string(priv))
			e := errPrivilege()
			s.auditRequest(r, p, pattern, http.StatusForbidden, &auditInfo{detail: "missing privilege " + string(priv)}, e)
			return r, e
		}
	}
	return r.WithContext(service.WithNotes(service.WithPrincipal(r.Context(), p), &auditInfo{action: pattern})), nil
}

// answerError is the northbound rf.Policy.Fail: the Redfish error of err
// (fail: a 5xx tells only the request ID). A body refused as too large
// before a mutation's handler ran is audited first; every other error of
// a mutation is the handler's, audited by serve.
func (s *Server) answerError(w http.ResponseWriter, r *http.Request, err error) {
	e := s.fail(r, err)
	if info, ok := auditOf(r.Context()); ok && e.status == http.StatusRequestEntityTooLarge && isMutation(r) {
		s.auditRequest(r, principal(r), info.action, e.status, info, e)
	}
	writeError(w, e)
}

func isMutation(r *http.Request) bool {
	return r.Method != http.MethodGet && r.Method != http.MethodHead
}

// serve runs an admitted request's handler. A read first catches up with
// what other active replicas acknowledged (docs/ha.md, "Reads"). A
// mutation's answer is held until its audit entry is durable.
func (s *Server) serve(pattern string, h rf.HandlerFunc) rf.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		if !isMutation(r) {
			if err := s.mgr.CatchUp(r.Context()); err != nil {
				return err
			}
			return h(w, r)
		}
		rec := &rf.Recorder{}
		var fault *apiError
		if err := h(rec, r); err != nil {
			fault = s.fail(r, err)
			writeError(rec, fault)
		}
		if rec.Status == http.StatusRequestEntityTooLarge {
			rf.DrainOversized(rec, r.Body)
		}
		info, _ := auditOf(r.Context())
		s.auditRequest(r, principal(r), pattern, cmp.Or(rec.Status, http.StatusOK), info, fault)
		rec.Replay(w)
		return nil
	}
}

// errCredentialsOverHTTP is authenticate's answer to credentials on a
// connection without TLS.
var errCredentialsOverHTTP = errors.New("credentials over plain HTTP")

// authenticate accepts an X-Auth-Token session or HTTP Basic credentials,
// over TLS only: neither a password nor a session token (which stands for
// one) is accepted, or checked, in clear text.
func (s *Server) authenticate(r *http.Request) (tenancy.Principal, error) {
	if r.TLS == nil {
		user, _, _ := r.BasicAuth()
		return tenancy.Principal{User: user}, errCredentialsOverHTTP
	}
	if tok := r.Header.Get("X-Auth-Token"); tok != "" {
		return s.auth.PrincipalOf(r.Context(), tok)
	}
	if user, pass, ok := r.BasicAuth(); ok {
		p, err := s.auth.Authenticate(user, pass, clientAddr(r))
		if err != nil {
			return tenancy.Principal{User: user}, fmt.Errorf("basic authentication of %q failed: %w", user, err)
		}
		return p, nil
	}
	return tenancy.Principal{}, errors.New("no credentials")
}

// principal returns the authenticated identity of r (zero for public
// routes).
func principal(r *http.Request) tenancy.Principal { return service.Principal(r) }

// denied records a refused request (audit log, logs). Secrets are never
// part of reason.
func (s *Server) denied(r *http.Request, p tenancy.Principal, reason string) {
	s.log.Warn("request refused", "method", r.Method, "path", r.URL.Path, "user", p.User, "remote", r.RemoteAddr, "reason", reason)
}

// clientAddr is the address of r's client, which failed logins count by
// (the connection's peer: a forwarding header is the client's to write,
// so it is not trusted).
func clientAddr(r *http.Request) string { return service.ClientAddr(r) }

// decode reads a JSON object body into v strictly (rf.Decode).
func decode(r *http.Request, v any) error {
	err := rf.Decode(r, v, MaxBody)
	var p *rf.Problem
	if errors.As(err, &p) {
		return fromProblem(p)
	}
	return err
}

// odataID is a Redfish reference.
type odataID = rf.ODataID

var (
	ref        = rf.Ref
	reff       = rf.Reff
	collection = rf.Collection
)

// orNil returns v, or the zero (nil) interface when v holds a nil pointer.
func orNil[T any](v T) T {
	if rv := reflect.ValueOf(v); rv.Kind() == reflect.Pointer && rv.IsNil() {
		var zero T
		return zero
	}
	return v
}

// Restore loads what the service keeps in the store besides compositions,
// accounts and the composition policy (compose's): the event
// subscriptions.
func (s *Server) Restore(ctx context.Context) error {
	return s.restoreSubscriptions(ctx)
}

// ImportAllocation validates a and composes all its systems, or nothing
// (serve --import; composition.Service.ImportAllocation).
func (s *Server) ImportAllocation(ctx context.Context, a composition.Allocation) ([]string, error) {
	return s.composition.ImportAllocation(ctx, a)
}
