package discover

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"time"

	"rackpool/internal/jsonlimit"
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
	session string // its path, deleted by Close
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
	g.client = &http.Client{Transport: rt, Timeout: o.Timeout, CheckRedirect: g.checkRedirect}
	return g, nil
}

// checkRedirect follows a redirect only to the same scheme, host and port.
func (g *HTTPGetter) checkRedirect(req *http.Request, via []*http.Request) error {
	if len(via) >= 5 {
		return errors.New("more than 5 redirects")
	}
	if req.URL.Scheme != g.base.Scheme || req.URL.Host != g.base.Host {
		return fmt.Errorf("redirect to %s://%s refused: only %s://%s is read", req.URL.Scheme, req.URL.Host, g.base.Scheme, g.base.Host)
	}
	return nil
}

func (g *HTTPGetter) url(path string) string {
	return g.base.Scheme + "://" + g.base.Host + g.base.Path + path
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
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, g.url(path), nil)
		if err != nil {
			return nil, err
		}
		req.Header.Set("Accept", "application/json")
		g.authorize(req)
		resp, err := g.client.Do(req)
		if err != nil {
			return nil, err
		}
		body, err := g.readBody(resp)
		if err != nil {
			return nil, err
		}
		switch {
		case resp.StatusCode == http.StatusUnauthorized && attempt == 0 && g.hasSession():
			g.mu.Lock()
			g.token, g.session = "", ""
			g.mu.Unlock()
			if err := g.login(ctx); err != nil {
				return nil, err
			}
			continue
		case resp.StatusCode == http.StatusNotFound:
			return nil, fmt.Errorf("%w (404)", ErrNotFound)
		case resp.StatusCode < 200 || resp.StatusCode > 299:
			return nil, statusError(resp, body)
		}
		return body, nil
	}
}

func (g *HTTPGetter) readBody(resp *http.Response) ([]byte, error) {
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, g.o.MaxBodyBytes+1))
	if err != nil {
		return nil, fmt.Errorf("read body: %w", err)
	}
	if int64(len(body)) > g.o.MaxBodyBytes {
		return nil, fmt.Errorf("%w: more than %d bytes", ErrTooLarge, g.o.MaxBodyBytes)
	}
	return body, nil
}

// statusError says what a non-2xx answer was, with the Redfish error
// message when the body has one.
func statusError(resp *http.Response, body []byte) error {
	var e struct {
		Error struct {
			Message  string `json:"message"`
			Extended []struct {
				Message string `json:"Message"`
			} `json:"@Message.ExtendedInfo"`
		} `json:"error"`
	}
	msg := ""
	if jsonlimit.Check(body, jsonlimit.MaxDepth) == nil && json.Unmarshal(body, &e) == nil {
		msg = e.Error.Message
		if len(e.Error.Extended) > 0 && e.Error.Extended[0].Message != "" {
			msg = e.Error.Extended[0].Message
		}
	}
	if msg != "" {
		return fmt.Errorf("%s: %s", resp.Status, msg)
	}
	return errors.New(resp.Status)
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
	body, _ := json.Marshal(map[string]string{"UserName": g.o.User, "Password": g.o.Password})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, g.url(ServiceRoot+"/SessionService/Sessions"), bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := g.client.Do(req)
	if err != nil {
		return fmt.Errorf("log in: %w", err)
	}
	rb, err := g.readBody(resp)
	if err != nil {
		return fmt.Errorf("log in: %w", err)
	}
	switch {
	case resp.StatusCode == http.StatusNotFound || resp.StatusCode == http.StatusMethodNotAllowed || resp.StatusCode == http.StatusNotImplemented:
		g.basic = true
		return nil
	case resp.StatusCode < 200 || resp.StatusCode > 299:
		return fmt.Errorf("log in as %s: %w", g.o.User, statusError(resp, rb))
	}
	g.token = resp.Header.Get("X-Auth-Token")
	if g.token == "" {
		g.basic = true
		return nil
	}
	if loc, err := url.Parse(resp.Header.Get("Location")); err == nil && loc.Path != "" {
		g.session = loc.Path
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
	u := g.base.Scheme + "://" + g.base.Host + session
	req, err := http.NewRequestWithContext(ctx, http.MethodDelete, u, nil)
	if err != nil {
		return err
	}
	req.Header.Set("X-Auth-Token", token)
	resp, err := g.client.Do(req)
	if err != nil {
		return fmt.Errorf("log out: %w", err)
	}
	resp.Body.Close()
	return nil
}
