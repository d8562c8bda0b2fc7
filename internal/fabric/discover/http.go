package discover

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"time"

	"rackpool/internal/rf"
)

// HTTPOptions configure the getter NewHTTPGetter makes. The zero value
// (with a URL) reads without authentication, trusting the system's CAs,
// with the default timeouts and body limit.
type HTTPOptions struct {
	// URL is the service's base: http(s)://host[:port]; the service root
	// is URL + "/redfish/v1". A path ending in /redfish/v1 is accepted.
	URL string
	// User, when not empty, logs in with Password: a session
	// (POST /redfish/v1/SessionService/Sessions), or HTTP Basic
	// authentication when the service has no session service.
	User, Password string
	// CAFile is a PEM file of CAs to trust besides the system's.
	CAFile string
	// Timeout bounds each request (0: 30s).
	Timeout time.Duration
	// MaxBodyBytes is the largest body read (0: DefaultMaxBodyBytes).
	MaxBodyBytes int64
	// Transport replaces the HTTP transport (tests); CAFile is then
	// ignored.
	Transport http.RoundTripper
}

// HTTPGetter reads a Redfish service over HTTP(S). Close ends its session.
type HTTPGetter struct {
	base    *url.URL
	client  *http.Client
	o       HTTPOptions
	mu      sync.Mutex
	token   string // X-Auth-Token of the session
	session string // its URL, deleted by Close
	basic   bool   // no session service: Basic authentication
}

// NewHTTPGetter checks o and makes the getter; it does not connect yet.
func NewHTTPGetter(o HTTPOptions) (*HTTPGetter, error) {
	u, err := url.Parse(strings.TrimRight(o.URL, "/"))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("discover: %q is not an http(s) URL", o.URL)
	}
	if u.User != nil {
		return nil, errors.New("discover: give the user with --user, not in the URL")
	}
	u.Path = strings.TrimSuffix(u.Path, ServiceRoot)
	u.RawQuery, u.Fragment = "", ""
	if o.Timeout == 0 {
		o.Timeout = 30 * time.Second
	}
	if o.MaxBodyBytes == 0 {
		o.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if o.Timeout < 0 || o.MaxBodyBytes < 0 {
		return nil, errors.New("discover: negative timeout or body limit")
	}
	rt := o.Transport
	if rt == nil {
		t := http.DefaultTransport.(*http.Transport).Clone()
		t.TLSClientConfig = &tls.Config{MinVersion: tls.VersionTLS12}
		t.ResponseHeaderTimeout = o.Timeout
		if o.CAFile != "" {
			pem, err := os.ReadFile(o.CAFile)
			if err != nil {
				return nil, fmt.Errorf("discover: CA file: %w", err)
			}
			pool, err := x509.SystemCertPool()
			if err != nil {
				pool = x509.NewCertPool()
			}
			if !pool.AppendCertsFromPEM(pem) {
				return nil, fmt.Errorf("discover: CA file %s holds no PEM certificate", o.CAFile)
			}
			t.TLSClientConfig.RootCAs = pool
		}
		rt = t
	}
	g := &HTTPGetter{base: u, o: o}
	// Follow redirects only within the service: credentials must never
	// reach another host, nor travel over another scheme.
	g.client = &http.Client{Transport: rt, Timeout: o.Timeout, CheckRedirect: rf.SameHost(u, "the service")}
	return g, nil
}

func (g *HTTPGetter) url(path string) string {
	return g.base.Scheme + "://" + g.base.Host + g.base.Path + path
}

// send makes one request and reads the whole answer, at most
// MaxBodyBytes (more is ErrTooLarge). auth, when not nil, sets the
// request's credentials.
func (g *HTTPGetter) send(ctx context.Context, method, u string, body []byte, auth func(*http.Request)) (*rf.Reply, error) {
	req, err := rf.NewRequest(ctx, method, u, body, nil)
	if err != nil {
		return nil, err
	}
	if auth != nil {
		auth(req)
	}
	r, err := rf.Send(g.client, req, u, int(g.o.MaxBodyBytes), func(err error) error { return err })
	var tl *rf.TooLargeError
	if errors.As(err, &tl) {
		return nil, fmt.Errorf("%s %s: %w: more than %d bytes", method, u, ErrTooLarge, g.o.MaxBodyBytes)
	}
	return r, err
}

// Get is a Getter: it GETs path and returns the body (at most
// MaxBodyBytes). 404 is ErrNotFound; other non-2xx statuses are errors
// with the status and the Redfish message when there is one. A 401 with a
// session logs in again once.
func (g *HTTPGetter) Get(ctx context.Context, path string) ([]byte, error) {
	if err := g.login(ctx); err != nil {
		return nil, err
	}
	for attempt := 0; ; attempt++ {
		r, err := g.send(ctx, http.MethodGet, g.url(path), nil, g.authorize)
		if err != nil {
			return nil, err
		}
		switch {
		case r.Status == http.StatusUnauthorized && attempt == 0 && g.hasSession():
			g.mu.Lock()
			g.token, g.session = "", ""
			g.mu.Unlock()
			if err := g.login(ctx); err != nil {
				return nil, err
			}
			continue
		case r.Status == http.StatusNotFound:
			return nil, fmt.Errorf("%w (404)", ErrNotFound)
		case r.Status < 200 || r.Status > 299:
			return nil, statusError(r)
		}
		return r.Body, nil
	}
}

// statusError says what a non-2xx answer was ("503 Service Unavailable"),
// with the MessageId and message of the Redfish error when the body is
// one.
func statusError(r *rf.Reply) error {
	head := fmt.Sprintf("%d %s", r.Status, http.StatusText(r.Status))
	b, ok := rf.ParseError(r.Body)
	if !ok {
		return errors.New(head)
	}
	id, msg := b.Headline()
	return errors.New(rf.ErrorText(head, id, msg))
}

func (g *HTTPGetter) hasSession() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.token != ""
}

func (g *HTTPGetter) authorize(req *http.Request) {
	g.mu.Lock()
	defer g.mu.Unlock()
	switch {
	case g.token != "":
		req.Header.Set("X-Auth-Token", g.token)
	case g.basic:
		req.SetBasicAuth(g.o.User, g.o.Password)
	}
}

// login opens a session when a user is given and none is open. A service
// without a session service (404, 405, 501) or one that answers without a
// token gets Basic authentication instead.
func (g *HTTPGetter) login(ctx context.Context) error {
	if g.o.User == "" {
		return nil
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.token != "" || g.basic {
		return nil
	}
	r, err := g.send(ctx, http.MethodPost, g.url(rf.SessionsPath), rf.LoginBody(g.o.User, g.o.Password), nil)
	if err != nil {
		return fmt.Errorf("log in: %w", err)
	}
	switch {
	case r.Status == http.StatusNotFound || r.Status == http.StatusMethodNotAllowed || r.Status == http.StatusNotImplemented:
		g.basic = true
		return nil
	case r.Status < 200 || r.Status > 299:
		return fmt.Errorf("log in as %s: %w", g.o.User, statusError(r))
	}
	token, loc := r.Session()
	if token == "" {
		g.basic = true
		return nil
	}
	g.token = token
	if u, err := rf.Resolve(g.base, loc, "the service"); err == nil {
		g.session = u
	}
	return nil
}

// Close deletes the session, if one was opened. Discover's only request
// that is not a GET besides the login.
func (g *HTTPGetter) Close() error {
	g.mu.Lock()
	token, session := g.token, g.session
	g.token, g.session = "", ""
	g.mu.Unlock()
	if token == "" || session == "" {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), g.o.Timeout)
	defer cancel()
	auth := func(req *http.Request) { req.Header.Set("X-Auth-Token", token) }
	if _, err := g.send(ctx, http.MethodDelete, session, nil, auth); err != nil {
		return fmt.Errorf("log out: %w", err)
	}
	return nil
}
