package fmserver

import (
	"bytes"
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"sync"
	"time"

	"rackpool/internal/clock"
	"rackpool/internal/fabric"
	"rackpool/internal/fabric/emulated"
	"rackpool/internal/inventory"
	"rackpool/internal/rf"
	"rackpool/internal/topology"
)

// Options configure a Server. The zero value of every field but Topology,
// Fabric, User and Password means its default.
type Options struct {
	Topology *topology.Topology
	Fabric   string      // fabric ID in Topology
	Clock    clock.Clock // nil: the wall clock; the emulated driver runs on it
	// User and Password are the one account.
	User, Password string
	// TaskThreshold: a change whose modelled time exceeds it answers 202
	// with a task monitor. 0: every change that changes something does.
	TaskThreshold time.Duration
	// SessionTimeout ends a session after this much inactivity on Clock
	// (default DefaultSessionTimeout).
	SessionTimeout time.Duration
	// Chaos, when non-zero, seeds a random mix of transport faults (see
	// the package documentation for the rates).
	Chaos  int64
	Logger *slog.Logger // default: discard
}

// DefaultSessionTimeout is Options.SessionTimeout's default.
const DefaultSessionTimeout = 30 * time.Minute

// Validate reports what is wrong with o.
func (o Options) Validate() error {
	switch {
	case o.Topology == nil:
		return errors.New("fabric manager: no topology")
	case o.Topology.Fabric(o.Fabric) == nil:
		return fmt.Errorf("fabric manager: topology %s has no fabric %q", o.Topology.Name, o.Fabric)
	case o.User == "":
		return errors.New("fabric manager: no user name")
	case o.Password == "":
		return errors.New("fabric manager: no password")
	case o.TaskThreshold < 0 || o.SessionTimeout < 0:
		return errors.New("fabric manager: negative task threshold or session timeout")
	}
	return nil
}

// Server serves one emulated fabric as a Redfish fabric manager.
type Server struct {
	top       *topology.Topology
	fab       *inventory.Fabric
	drv       fabric.Driver
	clk       clock.Clock
	wallClock bool // the driver sleeps in wall time (clock.Real)
	user      string
	password  string
	threshold time.Duration
	log       *slog.Logger
	mux       *rf.Mux
	uuid      string

	sessions sessionTable
	tasks    rf.TaskList[*job]
	faults   transportFaults
	ports    portLocks

	zmu   sync.Mutex
	zones map[string]bool // initiator endpoint IDs of zones created and not deleted
}

var _ http.Handler = (*Server)(nil)

// New builds the emulated driver of o.Fabric and the server in front of
// it.
func New(o Options) (*Server, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	if o.Clock == nil {
		o.Clock = clock.Real{}
	}
	if o.SessionTimeout == 0 {
		o.SessionTimeout = DefaultSessionTimeout
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	f := o.Topology.Fabric(o.Fabric)
	drv, err := emulated.New(o.Topology, f, o.Clock)
	if err != nil {
		return nil, err
	}
	_, wall := o.Clock.(clock.Real)
	s := &Server{
		top: o.Topology, fab: f, drv: drv, clk: o.Clock, wallClock: wall,
		user: o.User, password: o.Password, threshold: o.TaskThreshold, log: o.Logger,
		mux: &rf.Mux{}, uuid: rf.ServiceUUID("rackpool-fm:" + o.Topology.Name + "/" + f.ID),
		sessions: sessionTable{timeout: o.SessionTimeout, byToken: map[string]*session{}},
		tasks:    rf.TaskList[*job]{Retention: taskRetention, Max: maxTasks},
		zones:    map[string]bool{},
	}
	s.faults.init(o.Chaos)
	s.routes()
	return s, nil
}

// Handler returns the server's HTTP handler.
func (s *Server) Handler() http.Handler { return s }

// Driver returns the emulated driver underneath: the truth tests compare
// the Redfish view with.
func (s *Server) Driver() fabric.Driver { return s.drv }

// The privileges of the routes: the one account has them all.
const (
	public = rf.Public // no authentication
	login  = rf.Login  // the account
)

type handlerFunc func(s *Server, w http.ResponseWriter, r *http.Request) error

// route is one literal pattern, the privilege it needs and its handler.
type route struct {
	pattern string
	priv    rf.Privilege
	h       handlerFunc
}

// routeTable is every route of the server, family by family: the one
// table.
var routeTable = slices.Concat(serviceRoutes, sessionRoutes, taskRoutes, fabricRoutes, zoneRoutes,
	connectionRoutes, chassisRoutes, faultRoutes)

// routes registers routeTable, each route in the pipeline of rf.Policy.
func (s *Server) routes() {
	policy := rf.Policy{Admit: s.admit, Fail: s.fail}
	for _, rt := range routeTable {
		h := rt.h
		s.mux.Handle(rt.pattern, policy.Wrap(rt.pattern, rt.priv, func(w http.ResponseWriter, r *http.Request) error { return h(s, w, r) }))
	}
}

// ServeHTTP implements http.Handler: transport faults first (faults.go),
// then the route.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	defer rf.Recover(s.log, r, func(any) {
		writeError(w, errInternal(errors.New("the fabric manager failed serving the request; its log says why")))
	})
	rf.TrimSlash(r)
	s.serveWithFaults(w, r, func(w http.ResponseWriter, r *http.Request) {
		if s.mux.Unmatched(w, r, func(w http.ResponseWriter, p *rf.Problem) { writeError(w, fromProblem(p)) }) {
			return
		}
		s.mux.ServeHTTP(w, r)
	})
}

type userKey struct{}

// admit is the fabric manager's rf.Policy.Admit: the one account (a
// session or Basic credentials) on every route but the public ones, and on
// every route the sender's leadership epoch (docs/ha.md) for the fabric's
// fence: every change the request makes carries it.
func (s *Server) admit(r *http.Request, _ string, priv rf.Privilege) (*http.Request, error) {
	if priv != public {
		user, err := s.authenticate(r)
		if err != nil {
			s.log.Debug("request refused", "method", r.Method, "path", r.URL.Path, "remote", r.RemoteAddr, "reason", err)
			return r, errNoSession()
		}
		r = r.WithContext(context.WithValue(r.Context(), userKey{}, user))
	}
	epoch, err := fabric.ParseEpoch(r.Header.Get(fabric.EpochHeader))
	if err != nil {
		return r, newError(http.StatusBadRequest, baseRegistry+"HeaderInvalid",
			fmt.Sprintf("The header '%s' is invalid.", fabric.EpochHeader), fabric.EpochHeader)
	}
	return r.WithContext(fabric.WithEpoch(r.Context(), epoch)), nil
}

// fail is the fabric manager's rf.Policy.Fail: an *apiError or a Base
// registry problem as it is, anything else 500 (logged).
func (s *Server) fail(w http.ResponseWriter, r *http.Request, err error) {
	var ae *apiError
	var p *rf.Problem
	switch {
	case errors.As(err, &ae):
	case errors.As(err, &p):
		ae = fromProblem(p)
	default:
		ae = errInternal(err)
	}
	if ae.status >= 500 {
		s.log.Error("request failed", "method", r.Method, "path", r.URL.Path, "status", ae.status, "err", err)
	}
	if ae.status == http.StatusRequestEntityTooLarge {
		rf.DrainOversized(w, r.Body)
	}
	writeError(w, ae)
}

// authenticate accepts an X-Auth-Token session or Basic credentials of
// the one account.
func (s *Server) authenticate(r *http.Request) (string, error) {
	if tok := r.Header.Get("X-Auth-Token"); tok != "" {
		sess, ok := s.sessions.touch(tok, s.clk.Now())
		if !ok {
			return "", errors.New("invalid or expired session token")
		}
		return sess.user, nil
	}
	if user, pass, ok := r.BasicAuth(); ok {
		if !s.credentialsOK(user, pass) {
			return "", fmt.Errorf("basic authentication of %q failed", user)
		}
		return user, nil
	}
	return "", errors.New("no credentials")
}

func (s *Server) credentialsOK(user, pass string) bool {
	u := subtle.ConstantTimeCompare([]byte(user), []byte(s.user))
	p := subtle.ConstantTimeCompare([]byte(pass), []byte(s.password))
	return u&p == 1
}

// decode reads a JSON object body into v strictly (rf.Decode).
func decode(r *http.Request, v any) error {
	err := rf.Decode(r, v, rf.MaxBody)
	var p *rf.Problem
	if errors.As(err, &p) {
		return fromProblem(p)
	}
	return err
}

// decodeOptional accepts an empty body or an empty JSON object (an action
// without parameters).
func decodeOptional(r *http.Request) error {
	data, err := io.ReadAll(r.Body)
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return errTooLarge(rf.MaxBody)
		}
		return errMalformed(err.Error())
	}
	if len(bytes.TrimSpace(data)) == 0 {
		return nil
	}
	r.Body = io.NopCloser(bytes.NewReader(data))
	var none struct{}
	return decode(r, &none)
}

// odataID is a Redfish reference.
type odataID = rf.ODataID

var (
	ref        = rf.Ref
	collection = rf.Collection
)

func statusOK(health fabric.Health) map[string]string {
	if health == "" {
		health = fabric.OK
	}
	return map[string]string{"State": "Enabled", "Health": string(health)}
}

// portLocks serialise the changes of one host port: a zone's or a
// connection's If-Match check, its change and the change's modelled time
// all happen under the port's lock (rf.Locks), so of two writers with the
// same ETag exactly one wins. A lock may be released by another goroutine
// (the background change of a task).
type portLocks struct{ rf.Locks }

// maxLockWait bounds how long a change waits for the change before it on
// the same host port (whose modelled time may be long on the wall clock)
// before it answers 503 with Retry-After instead (a variable for tests).
var maxLockWait = 10 * time.Second

// lock locks key and returns the unlock function. It waits at most until
// ctx ends (the client gave up: the request's context) or maxLockWait
// passes; then it fails with an error that says what it waited for, and
// the port stays as it was. A handler therefore never waits on a port
// without a deadline, and a server's Close never waits on one.
func (p *portLocks) lock(ctx context.Context, key string) (func(), error) {
	wait, cancel := context.WithTimeout(ctx, maxLockWait)
	defer cancel()
	unlock, err := p.Lock(wait, key)
	switch {
	case err == nil:
		return unlock, nil
	case ctx.Err() != nil:
		return nil, errPortLocked(key, fmt.Errorf("the request ended first: %w", ctx.Err()))
	}
	return nil, errPortLocked(key, fmt.Errorf("it did not end within %s", maxLockWait))
}
