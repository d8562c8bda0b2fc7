package replica

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net/http"
	"net/http/httputil"
	"net/url"
	"sync"
	"time"
)

// Several active replicas (docs/ha.md). Every replica answers compositions,
// accounts and sessions itself, from its snapshot and the shared database.
// The subsystems whose state lives in one process, memory leases and
// memory nodes, blocknodes and drives, usage telemetry and predictive
// provisioning, are served by the leader alone, which also runs their
// loops; the other replicas forward those requests to it. So are push
// event subscriptions: one replica delivers each event once. A task is
// answered by the replica that runs it, whose tag begins its ID; the
// others forward to that replica. Which requests those are is the
// service's knowledge (Service); where the replicas are is Active's
// (Peers).

// ForwardedHeader marks a forwarded request: it is never forwarded again.
const ForwardedHeader = "Rackpool-Forwarded-By"

// ReplicaHeader names, in every answer, the active replica that made it.
const ReplicaHeader = "Rackpool-Replica"

// Peers tells Forward where the other replicas are (Active).
type Peers interface {
	// Leader returns the leader, or self true when this replica leads.
	// An error (none leads now, the database is unreachable) is answered
	// 503.
	Leader(ctx context.Context) (p Peer, self bool, err error)
	// Replica returns the replica whose tag is tag; ok false when no live
	// replica has it (it stopped: its tasks are gone).
	Replica(ctx context.Context, tag string) (p Peer, ok bool, err error)
}

var _ Peers = (*Active)(nil)

// Service is what Forward and Gate know of the service they stand in
// front of (redfish.Forwarding): which requests the leader or another
// replica answers, and the service's own error bodies for the answers
// they give themselves.
type Service interface {
	// LeaderOwned reports whether the leader alone serves path.
	LeaderOwned(path string) bool
	// TaskTag returns the tag of the replica that runs the task path
	// names, "" if path is no task's or its ID names no replica.
	TaskTag(path string) string
	// Root reports whether path is the service root, which Gate lets
	// through while the replica is not serving.
	Root(path string) bool
	// Unavailable answers 503, to be retried shortly, saying why.
	Unavailable(w http.ResponseWriter, why string)
	// TaskGone answers 404 for the task at path: the replica that ran it
	// has stopped, and its tasks with it.
	TaskGone(w http.ResponseWriter, path string)
	// StepsHost returns the host whose agent's steps path names (its
	// poll, or its answer to a step), "" if path is no host agent's.
	StepsHost(path string) string
}

// Steps tells Forward which replica runs the workflow that waits on a
// host's agent (compose.Manager.StepOwner): the agent's polls and answers
// go there.
type Steps interface {
	// StepTag returns the tag of the replica whose workflow waits on a
	// step of host, "" when none does (the answering replica serves the
	// poll, and hands the agent back as soon as another replica's
	// workflow needs it: hostagent.Broker.Kick).
	StepTag(ctx context.Context, host string) (string, error)
}

// Option configures Forward.
type Option func(*forwarder)

// WithSteps routes host agents' requests to the replica running the
// workflow that waits on their host.
func WithSteps(s Steps) Option { return func(f *forwarder) { f.steps = s } }

// Forward returns next behind the forwarding layer of the replica whose
// tag is tag: a request for what the leader serves goes to the leader,
// one for another replica's task to that replica, over HTTP(S) that
// trusts the CA the peer advertised and the system's roots. A forwarded
// request is never forwarded again, and every answer names the replica
// that made it (ReplicaHeader).
func Forward(next http.Handler, tag string, peers Peers, svc Service, opts ...Option) http.Handler {
	f := &forwarder{next: next, tag: tag, peers: peers, svc: svc, transports: &transports{m: map[[32]byte]http.RoundTripper{}}}
	for _, o := range opts {
		o(f)
	}
	return f
}

type forwarder struct {
	next  http.Handler
	tag   string
	peers Peers
	svc   Service
	steps Steps // nil: host agents are served where they ask

	transports *transports // by the peer's CA
}

func (f *forwarder) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	forwarded := r.Header.Get(ForwardedHeader) != ""
	w.Header().Set(ReplicaHeader, f.tag) // a forwarded answer carries the other's
	if f.svc.LeaderOwned(r.URL.Path) {
		p, self, err := f.peers.Leader(r.Context())
		switch {
		case self:
			f.next.ServeHTTP(w, r)
		case err != nil || forwarded:
			// Forwarded here, yet this replica does not lead: the lead
			// moved meanwhile.
			f.svc.Unavailable(w, "The replica that leads serves this resource, and none does now (a new one takes over within seconds), or it could not be found.")
		default:
			f.proxy(w, r, p)
		}
		return
	}
	if tag := f.svc.TaskTag(r.URL.Path); tag != "" && tag != f.tag && !forwarded {
		p, ok, err := f.peers.Replica(r.Context(), tag)
		switch {
		case err != nil:
			f.svc.Unavailable(w, "The replica that runs this task could not be looked up.")
		case !ok:
			f.svc.TaskGone(w, r.URL.Path)
		default:
			f.proxy(w, r, p)
		}
		return
	}
	if host := f.svc.StepsHost(r.URL.EscapedPath()); host != "" && f.steps != nil && !forwarded {
		tag, err := f.steps.StepTag(r.Context(), host)
		if err != nil {
			f.svc.Unavailable(w, "Which replica runs the workflow waiting on this host's agent could not be read from the database.")
			return
		}
		if tag != "" && tag != f.tag {
			p, ok, err := f.peers.Replica(r.Context(), tag)
			switch {
			case err != nil:
				f.svc.Unavailable(w, "The replica that runs the workflow waiting on this host's agent could not be looked up.")
			case !ok:
				// It stopped: the leader settles its workflow; nothing
				// waits on the agent there any more.
				f.next.ServeHTTP(w, r)
			default:
				f.proxy(w, r, p)
			}
			return
		}
	}
	f.next.ServeHTTP(w, r)
}

// proxy sends r to p and its answer back.
func (f *forwarder) proxy(w http.ResponseWriter, r *http.Request, p Peer) {
	target, err := url.Parse(p.URL)
	if err != nil || target.Host == "" {
		f.svc.Unavailable(w, "The replica to forward to advertised an unusable URL.")
		return
	}
	rt, err := f.transport(p.CA)
	if err != nil {
		f.svc.Unavailable(w, "The replica to forward to advertised an unusable certificate authority.")
		return
	}
	rp := &httputil.ReverseProxy{
		ModifyResponse: func(res *http.Response) error {
			w.Header().Del(ReplicaHeader)
			return nil
		},
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(target)
			pr.SetXForwarded()
			pr.Out.Header.Set(ForwardedHeader, f.tag)
		},
		Transport: rt,
		ErrorHandler: func(w http.ResponseWriter, _ *http.Request, _ error) {
			f.svc.Unavailable(w, "The replica that serves this resource could not be reached.")
		},
	}
	rp.ServeHTTP(w, r)
}

// transport returns the round tripper that trusts ca (and the system's
// roots).
func (f *forwarder) transport(ca []byte) (http.RoundTripper, error) { return f.transports.get(ca) }

// transports keeps a round tripper per certificate authority a peer
// advertised.
type transports struct {
	mu sync.Mutex
	m  map[[32]byte]http.RoundTripper
}

// get returns the round tripper that trusts ca (and the system's roots).
func (t *transports) get(ca []byte) (http.RoundTripper, error) {
	key := sha256.Sum256(ca)
	t.mu.Lock()
	defer t.mu.Unlock()
	if rt := t.m[key]; rt != nil {
		return rt, nil
	}
	roots, err := x509.SystemCertPool()
	if err != nil {
		roots = x509.NewCertPool()
	}
	if len(ca) > 0 && !roots.AppendCertsFromPEM(ca) {
		return nil, errors.New("no certificate in the advertised CA")
	}
	rt := &http.Transport{
		TLSClientConfig:     &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12},
		MaxIdleConnsPerHost: 16,
		IdleConnTimeout:     time.Minute,
		TLSHandshakeTimeout: 5 * time.Second,
		// A stream (SSE) may last; a request's headers may not.
		ResponseHeaderTimeout: time.Minute,
	}
	t.m[key] = rt
	return rt, nil
}

// Gate answers 503 to every request but the service root's while serving
// reports false: a replica whose hold on the database (its lead, or its
// membership) is lost until it takes it again, which must not answer from
// a snapshot that may be stale.
func Gate(next http.Handler, svc Service, serving func() bool) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !svc.Root(r.URL.Path) && !serving() {
			svc.Unavailable(w, "This replica has lost its hold on the database and answers nothing until it takes it again (or exits, if another replica took over its work).")
			return
		}
		next.ServeHTTP(w, r)
	})
}
