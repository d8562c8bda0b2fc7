package rf

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"

	"rackpool/internal/jsonlimit"
)

// maxRedirects bounds a chain of same-origin redirects.
const maxRedirects = 5

// Reply is one answer, read whole.
type Reply struct {
	Method string // the request's
	URL    string // the URL that answered, after same-origin redirects
	Status int
	Header http.Header
	Body   []byte
}

// Resolve turns a path or link of the service at base (scheme://host[:port])
// into an absolute URL, and refuses one that points elsewhere; peer names
// the service in that refusal ("the BMC").
func Resolve(base *url.URL, ref, peer string) (string, error) {
	u, err := url.Parse(ref)
	if err != nil {
		return "", fmt.Errorf("bad link %q: %w", ref, err)
	}
	if u.IsAbs() || u.Host != "" {
		if u.Scheme != base.Scheme || u.Host != base.Host {
			return "", fmt.Errorf("link %s points to another host than %s", u.Redacted(), peer)
		}
		return u.String(), nil
	}
	if !strings.HasPrefix(u.Path, "/") {
		return "", fmt.Errorf("link %q is not an absolute path", ref)
	}
	return base.Scheme + "://" + base.Host + ref, nil
}

// NewRequest makes a request to u that asks for JSON (OData-Version 4.0),
// with body, when not nil, as its JSON content and hdr's headers added.
// Its error names the method and u.
func NewRequest(ctx context.Context, method, u string, body []byte, hdr http.Header) (*http.Request, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, u, rd)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", method, u, err)
	}
	req.Header.Set("Accept", "application/json")
	req.Header.Set("OData-Version", "4.0")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range hdr {
		req.Header[k] = v
	}
	return req, nil
}

// Send sends req with hc and reads the whole answer, at most maxBody
// bytes; u is req's URL as the caller's errors name it. It never retries.
// A request that got no complete answer (hc failed, or the body could not
// be read) fails with failed's error of what went wrong, so that each
// client classifies its own; an answer larger than maxBody is refused
// with a *TooLargeError.
func Send(hc *http.Client, req *http.Request, u string, maxBody int, failed func(error) error) (*Reply, error) {
	resp, err := hc.Do(req)
	if err != nil {
		return nil, failed(err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, int64(maxBody)+1))
	if err != nil {
		return nil, failed(fmt.Errorf("reading the answer (%d): %w", resp.StatusCode, err))
	}
	if len(data) > maxBody {
		return nil, fmt.Errorf("%s %s: %w", req.Method, u, &TooLargeError{Limit: maxBody})
	}
	if resp.Request != nil && resp.Request.URL != nil {
		u = resp.Request.URL.String() // after same-origin redirects
	}
	return &Reply{Method: req.Method, URL: u, Status: resp.StatusCode, Header: resp.Header, Body: data}, nil
}

// TooLargeError is an answer larger than Send's limit.
type TooLargeError struct {
	Limit int // bytes
}

func (e *TooLargeError) Error() string {
	if e.Limit >= 1<<20 && e.Limit%(1<<20) == 0 {
		return fmt.Sprintf("answer larger than %d MiB", e.Limit>>20)
	}
	return fmt.Sprintf("answer larger than %d bytes", e.Limit)
}

// SessionsPath is the sessions collection of a Redfish service: a client
// logs in by POSTing LoginBody to it.
const SessionsPath = "/redfish/v1/SessionService/Sessions"

// LoginBody is the body of a login: the account's UserName and Password.
func LoginBody(user, password string) []byte {
	b, _ := json.Marshal(map[string]string{"UserName": user, "Password": password})
	return b
}

// Session reads the answer to a login that succeeded: the session's token
// (X-Auth-Token, "" when the service sent none) and its URI (Location, ""
// when none), which the client DELETEs to log out.
func (r *Reply) Session() (token, location string) {
	return r.Header.Get("X-Auth-Token"), r.Header.Get("Location")
}

// Busy reports the statuses that say the service did not act and may
// later: busy, overloaded, a gateway in between (503, 429, 502, 504).
func Busy(status int) bool {
	switch status {
	case http.StatusServiceUnavailable, http.StatusTooManyRequests, http.StatusBadGateway, http.StatusGatewayTimeout:
		return true
	}
	return false
}

// RedirectError is a redirect a client refuses to follow (SameHost).
type RedirectError struct{ msg string }

func (e *RedirectError) Error() string { return e.msg }

// SameHost is an http.Client's CheckRedirect that follows at most five
// redirects, and only to base's scheme and host: credentials must never
// reach another host, nor travel over another scheme. peer names the
// service in the refusal ("the manager"); a refusal is a *RedirectError.
func SameHost(base *url.URL, peer string) func(req *http.Request, via []*http.Request) error {
	return func(req *http.Request, via []*http.Request) error {
		if req.URL.Scheme != base.Scheme || req.URL.Host != base.Host {
			return &RedirectError{fmt.Sprintf("refusing redirect from %s to %s: not %s %s", via[len(via)-1].URL, req.URL.Redacted(), peer, base)}
		}
		if len(via) > maxRedirects {
			return &RedirectError{fmt.Sprintf("more than %d redirects from %s", maxRedirects, via[0].URL)}
		}
		return nil
	}
}

// Untrusted reports whether err is a TLS failure because the peer's
// certificate is not trusted (an unknown authority, another host's name,
// an invalid certificate): asking again will not help, giving its CA will.
func Untrusted(err error) bool {
	var cve *tls.CertificateVerificationError
	var hostErr x509.HostnameError
	var uae x509.UnknownAuthorityError
	var cie x509.CertificateInvalidError
	return errors.As(err, &cve) || errors.As(err, &hostErr) || errors.As(err, &uae) || errors.As(err, &cie)
}

// Loopback reports whether host names this machine: the only host a
// client sends credentials to over plain http.
func Loopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// Decode parses the JSON answer r into out. A syntax error or a property
// of the wrong type fails with the method, the URL and the property's path.
func (r *Reply) Decode(out any) error {
	if len(r.Body) == 0 {
		return fmt.Errorf("%s %s: %d with an empty body, want JSON", r.Method, r.URL, r.Status)
	}
	if err := jsonlimit.Check(r.Body, jsonlimit.MaxDepth); err != nil {
		return fmt.Errorf("%s %s: %v", r.Method, r.URL, err)
	}
	err := json.Unmarshal(r.Body, out)
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &se):
		return fmt.Errorf("%s %s: malformed JSON at byte %d: %v", r.Method, r.URL, se.Offset, se)
	case errors.As(err, &te):
		field := te.Field
		if field == "" {
			field = "(the document)"
		}
		return fmt.Errorf("%s %s: property %s is a JSON %s, want %s", r.Method, r.URL, field, te.Value, jsonKind(te.Type.Kind().String()))
	default:
		return fmt.Errorf("%s %s: bad JSON: %v", r.Method, r.URL, err)
	}
}

// jsonKind names a Go kind the way JSON does.
func jsonKind(k string) string {
	switch k {
	case "string":
		return "a string"
	case "slice", "array":
		return "an array"
	case "struct", "map":
		return "an object"
	case "bool":
		return "a boolean"
	}
	return "a number"
}
