package redfish

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"
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
// others forward to that replica.

// Peer is another replica as the forwarding layer reaches it.
type Peer struct {
	URL string // base URL, "https://host:port"
	// CA is the PEM of the certificate authority the replica's certificate
	// chains to (its own CA, or the top of the operator's chain); empty
	// for plain HTTP. The system's roots are trusted too.
	CA []byte
}

// Peers tells the forwarding layer where the other replicas are.
type Peers interface {
	// Leader returns the leader, or self true when this replica leads.
	// An error (none leads now, the database is unreachable) is answered
	// 503.
	Leader(ctx context.Context) (p Peer, self bool, err error)
	// Replica returns the replica whose tag is tag; ok false when no live
	// replica has it (it stopped: its tasks are gone).
	Replica(ctx context.Context, tag string) (p Peer, ok bool, err error)
}

// ForwardedHeader marks a forwarded request: it is never forwarded again.
const ForwardedHeader = "Rackpool-Forwarded-By"

// ReplicaHeader names, in every answer, the active replica that made it.
const ReplicaHeader = "Rackpool-Replica"

// leaderPaths are the resources the leader alone serves.
var leaderPaths = []string{
	"/redfish/v1/Oem/Rackpool/MemoryNodes",
	"/redfish/v1/Oem/Rackpool/MemoryLeases",
	"/redfish/v1/Oem/Rackpool/BlockNodes",
	"/redfish/v1/Oem/Rackpool/Drives",
	"/redfish/v1/Oem/Rackpool/Provisioning",
	"/redfish/v1/TelemetryService",
	// Push subscriptions: the leader delivers them (it sees every
	// replica's composition changes through the change log).
	"/redfish/v1/EventService/Subscriptions",
	"/redfish/v1/EventService/Actions/EventService.SubmitTestEvent",
}

// leaderOwned reports whether the leader alone serves path.
func leaderOwned(path string) bool {
	for _, p := range leaderPaths {
		if path == p || strings.HasPrefix(path, p+"/") {
			return true
		}
	}
	return strings.HasPrefix(path, "/redfish/v1/Systems/") && strings.HasSuffix(path, "/Actions/Oem/Rackpool.SubmitUsage")
}

// taskTag returns the tag of the replica a task path names, "" if the
// path is no task's or its ID has none.
func taskTag(path string) string {
	for _, p := range []string{tasksPath, monitorsPath} {
		if id, ok := strings.CutPrefix(path, p); ok && !strings.Contains(id, "/") {
			if tag, _, ok := strings.Cut(id, "-"); ok {
				return tag
			}
		}
	}
	return ""
}

// Forward returns next behind the forwarding layer of the replica whose
// tag is tag.
func Forward(next http.Handler, tag string, peers Peers) http.Handler {
	return &forwarder{next: next, tag: tag, peers: peers, transports: map[[32]byte]http.RoundTripper{}}
}

type forwarder struct {
	next  http.Handler
	tag   string
	peers Peers

	mu         sync.Mutex
	transports map[[32]byte]http.RoundTripper // by the peer's CA
}

func (f *forwarder) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	forwarded := r.Header.Get(ForwardedHeader) != ""
	w.Header().Set(ReplicaHeader, f.tag) // a forwarded answer carries the other's
	if leaderOwned(r.URL.Path) {
		p, self, err := f.peers.Leader(r.Context())
		switch {
		case self:
			f.next.ServeHTTP(w, r)
		case err != nil || forwarded:
			// Forwarded here, yet this replica does not lead: the lead
			// moved meanwhile.
			writeError(w, unavailable("The replica that leads serves this resource, and none does now (a new one takes over within seconds), or it could not be found."))
		default:
			f.proxy(w, r, p)
		}
		return
	}
	if tag := taskTag(r.URL.Path); tag != "" && tag != f.tag && !forwarded {
		p, ok, err := f.peers.Replica(r.Context(), tag)
		switch {
		case err != nil:
			writeError(w, unavailable("The replica that runs this task could not be looked up."))
		case !ok:
			writeError(w, newError(http.StatusNotFound, baseRegistry+"ResourceMissingAtURI",
				"The resource at the URI '"+r.URL.Path+"' was not found.", r.URL.Path).
				withResolution("The replica that ran this task has stopped, and its tasks with it. Read the resource the task changed to know its outcome."))
		default:
			f.proxy(w, r, p)
		}
		return
	}
	f.next.ServeHTTP(w, r)
}

func unavailable(why string) *apiError {
	return newError(http.StatusServiceUnavailable, baseRegistry+"ServiceTemporarilyUnavailable",
		"The service is temporarily unavailable.  Retry in 1 seconds.", "1").withResolution(why + " Retry shortly.")
}

// proxy sends r to p and its answer back.
func (f *forwarder) proxy(w http.ResponseWriter, r *http.Request, p Peer) {
	target, err := url.Parse(p.URL)
	if err != nil || target.Host == "" {
		writeError(w, unavailable("The replica to forward to advertised an unusable URL."))
		return
	}
	rt, err := f.transport(p.CA)
	if err != nil {
		writeError(w, unavailable("The replica to forward to advertised an unusable certificate authority."))
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
			writeError(w, unavailable("The replica that serves this resource could not be reached."))
		},
	}
	rp.ServeHTTP(w, r)
}

// transport returns the round tripper that trusts ca (and the system's
// roots).
func (f *forwarder) transport(ca []byte) (http.RoundTripper, error) {
	key := sha256.Sum256(ca)
	f.mu.Lock()
	defer f.mu.Unlock()
	if rt := f.transports[key]; rt != nil {
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
	f.transports[key] = rt
	return rt, nil
}

// Gate answers 503 to every request but the service root's while serving
// reports false: a replica whose hold on the database (its lead, or its
// membership) is lost until it takes it again, which must not answer from
// a snapshot that may be stale.
func Gate(next http.Handler, serving func() bool) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if p := strings.TrimSuffix(r.URL.Path, "/"); p != "/redfish/v1" && p != "/redfish" && !serving() {
			writeError(w, unavailable("This replica has lost its hold on the database and answers nothing until it takes it again (or exits, if another replica took over its work)."))
			return
		}
		next.ServeHTTP(w, r)
	})
}
