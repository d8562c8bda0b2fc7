package rfdriver

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"rackpool/internal/fabric"
	"rackpool/internal/rf"
)

// maxBody is the largest answer the driver reads (docs/southbound.md).
const maxBody = 4 << 20

// Backoff between retries: exponential from backoffMin to backoffMax, each
// wait drawn uniformly from its upper half (jitter).
const (
	backoffMin = 10 * time.Millisecond
	backoffMax = time.Second
)

// client is one Redfish session with one manager: it sends requests with
// the session's token, logs in again on 401, caps and decodes answers and
// retries reads.
type client struct {
	base           *url.URL // scheme://host:port of the manager
	hc             *http.Client
	user, password string
	requestTimeout time.Duration
	log            *slog.Logger

	mu        sync.Mutex // guards the fields below; never held across a request
	token     string
	session   string        // the session's URI, for Close
	loggingIn chan struct{} // closed when the login in progress ends; nil when none is
}

func newClient(rawURL, user, password string, transport http.RoundTripper, requestTimeout time.Duration, log *slog.Logger) (*client, error) {
	u, err := url.Parse(strings.TrimRight(rawURL, "/"))
	if err != nil {
		return nil, fmt.Errorf("manager URL %q: %w", rawURL, err)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("manager URL %q: want http(s)://host[:port]", rawURL)
	}
	if u.Scheme == "http" && !rf.Loopback(u.Hostname()) {
		return nil, fmt.Errorf("manager URL %s: refusing to send credentials over plain http to a host other than this one: use https", u.Redacted())
	}
	if u.User != nil {
		return nil, fmt.Errorf("manager URL %s: put the account in Options.User and Options.Password, not the URL", u.Redacted())
	}
	c := &client{
		base:           &url.URL{Scheme: u.Scheme, Host: u.Host, Path: u.Path},
		user:           user,
		password:       password,
		requestTimeout: requestTimeout,
		log:            log,
	}
	// Follow redirects only within the manager: a token must never reach
	// another host, nor travel over another scheme.
	c.hc = &http.Client{Transport: transport, CheckRedirect: rf.SameHost(c.base, "the manager")}
	return c, nil
}

// url resolves a path or link of the manager's to an absolute URL, and
// refuses one that points elsewhere.
func (c *client) url(ref string) (string, error) {
	u, err := rf.Resolve(c.base, ref, "the manager")
	if err != nil {
		return "", fmt.Errorf("manager %s: %w", c.base, err)
	}
	return u, nil
}

// transientError is a request that may not have reached the manager, or
// whose answer was lost: a connection refused or reset, a request
// deadline, an answer cut short. For a change its outcome is unknown.
type transientError struct {
	method, url string
	err         error
}

func (e *transientError) Error() string { return fmt.Sprintf("%s %s: %v", e.method, e.url, e.err) }
func (e *transientError) Unwrap() error { return e.err }

// roundTrip makes one request under the request deadline and reads the
// whole answer, capped at maxBody. It never retries.
func (c *client) roundTrip(ctx context.Context, method, ref string, body []byte, hdr http.Header, token string) (*rf.Reply, error) {
	u, err := c.url(ref)
	if err != nil {
		return nil, err
	}
	rctx, cancel := context.WithTimeout(ctx, c.requestTimeout)
	defer cancel()
	req, err := rf.NewRequest(rctx, method, u, body, hdr)
	if err != nil {
		return nil, err
	}
	if token != "" {
		req.Header.Set("X-Auth-Token", token)
	}
	if e, ok := fabric.EpochFrom(ctx); ok && method != http.MethodGet {
		req.Header.Set(fabric.EpochHeader, e.String())
	}
	return rf.Send(c.hc, req, u, maxBody, func(err error) error { return c.classify(ctx, method, u, err) })
}

// classify turns a failed request into the operation's error when the
// operation's own deadline or cancellation ended it, into a refusal for a
// redirect elsewhere, and into a transientError otherwise.
func (c *client) classify(ctx context.Context, method, u string, err error) error {
	if ctx.Err() != nil {
		return fmt.Errorf("%s %s: %w (%v)", method, u, ctx.Err(), err)
	}
	var re *rf.RedirectError
	if errors.As(err, &re) {
		return fmt.Errorf("%s %s: %w", method, u, re)
	}
	if rf.Untrusted(err) {
		return fmt.Errorf("%s %s: the manager's certificate is not trusted (set the manager's CA): %w", method, u, unwrapURLError(err))
	}
	if errors.Is(err, context.DeadlineExceeded) {
		err = fmt.Errorf("no complete answer within the request timeout %s", c.requestTimeout)
	}
	return &transientError{method: method, url: u, err: unwrapURLError(err)}
}

func unwrapURLError(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

// do sends one request with the session's token, logging in first when
// there is no session and again when the manager answers 401 (the session
// expired or the manager restarted), up to maxRelogins times: a manager
// that restarts while other requests run can refuse a session as soon as
// it was made, but one that refuses every new session has refused the
// account. Transient failures are returned, not retried: the caller knows
// whether repeating is safe.
// maxRelogins is how many times one request logs in again after a 401.
const maxRelogins = 3

func (c *client) do(ctx context.Context, method, ref string, body any, hdr http.Header) (*rf.Reply, error) {
	var data []byte
	if body != nil {
		var err error
		if data, err = json.Marshal(body); err != nil {
			return nil, fmt.Errorf("%s %s: encode body: %w", method, ref, err)
		}
	}
	for attempt := 0; ; attempt++ {
		token, err := c.currentToken(ctx)
		if err != nil {
			return nil, err
		}
		r, err := c.roundTrip(ctx, method, ref, data, hdr, token)
		if err != nil {
			return nil, err
		}
		if r.Status != http.StatusUnauthorized || attempt >= maxRelogins {
			if r.Status == http.StatusUnauthorized {
				return nil, fmt.Errorf("%s %s: 401 Unauthorized after logging in %d times as %s", method, r.URL, attempt, c.user)
			}
			return r, nil
		}
		c.log.Debug("session refused, logging in again", "url", r.URL)
		if err := c.relogin(ctx, token); err != nil {
			return nil, err
		}
	}
}

// currentToken returns the session token, logging in if there is none.
func (c *client) currentToken(ctx context.Context) (string, error) {
	c.mu.Lock()
	tok := c.token
	c.mu.Unlock()
	if tok != "" {
		return tok, nil
	}
	if err := c.relogin(ctx, ""); err != nil {
		return "", err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.token, nil
}

// relogin replaces the session whose token is stale, unless another
// goroutine already did. Logins are serialised: while one is in progress
// the others wait for it, each at most until its own ctx ends, and then
// use its session (or, when it failed, try their own).
func (c *client) relogin(ctx context.Context, stale string) error {
	for {
		c.mu.Lock()
		if c.token != stale {
			c.mu.Unlock()
			return nil
		}
		if wait := c.loggingIn; wait != nil {
			c.mu.Unlock()
			select {
			case <-wait:
				continue
			case <-ctx.Done():
				return fmt.Errorf("log in to %s: waiting for the login in progress: %w", c.base, ctx.Err())
			}
		}
		done := make(chan struct{})
		c.loggingIn = done
		c.mu.Unlock()

		tok, loc, err := c.login(ctx)
		c.mu.Lock()
		if err == nil {
			c.token, c.session = tok, loc
		}
		c.loggingIn = nil
		c.mu.Unlock()
		close(done)
		return err
	}
}

// login creates a session, retrying what is transient within ctx.
func (c *client) login(ctx context.Context) (token, location string, err error) {
	body := rf.LoginBody(c.user, c.password)
	var last error
	for attempt := 0; ; attempt++ {
		if attempt > 0 {
			if err := sleep(ctx, backoff(attempt), last); err != nil {
				return "", "", fmt.Errorf("log in to %s: %w", c.base, err)
			}
		}
		r, err := c.roundTrip(ctx, http.MethodPost, rf.SessionsPath, body, nil, "")
		var te *transientError
		switch {
		case err != nil && ctx.Err() != nil && last != nil:
			return "", "", fmt.Errorf("log in to %s: %w; last failure: %v", c.base, err, last)
		case errors.As(err, &te):
			last = err
			continue
		case err != nil:
			return "", "", fmt.Errorf("log in to %s: %w", c.base, err)
		case rf.Busy(r.Status):
			last = statusError(r)
			continue
		case r.Status == http.StatusUnauthorized || r.Status == http.StatusForbidden:
			return "", "", fmt.Errorf("log in to %s as %s: refused (%d): check the account and password", c.base, c.user, r.Status)
		case r.Status != http.StatusCreated && r.Status != http.StatusOK:
			return "", "", fmt.Errorf("log in to %s as %s: %w", c.base, c.user, statusError(r))
		}
		token, location = r.Session()
		if token == "" {
			return "", "", fmt.Errorf("log in to %s: POST %s answered %d without X-Auth-Token", c.base, r.URL, r.Status)
		}
		if location != "" {
			if _, err := c.url(location); err != nil {
				c.log.Warn("session Location unusable; the session will not be deleted on close", "err", err)
				location = ""
			}
		}
		c.log.Debug("logged in", "user", c.user)
		return token, location, nil
	}
}

// logout deletes the session, if any. A login in progress is waited for
// (at most until ctx ends) so that its session is deleted too.
func (c *client) logout(ctx context.Context) error {
	c.mu.Lock()
	for wait := c.loggingIn; wait != nil && ctx.Err() == nil; wait = c.loggingIn {
		c.mu.Unlock()
		select {
		case <-wait:
		case <-ctx.Done():
		}
		c.mu.Lock()
	}
	tok, loc := c.token, c.session
	c.token, c.session = "", ""
	c.mu.Unlock()
	if tok == "" || loc == "" {
		return nil
	}
	r, err := c.roundTrip(ctx, http.MethodDelete, loc, nil, nil, tok)
	if err != nil {
		return fmt.Errorf("delete session: %w", err)
	}
	if r.Status >= 300 && r.Status != http.StatusNotFound && r.Status != http.StatusUnauthorized {
		return fmt.Errorf("delete session: %w", statusError(r))
	}
	return nil
}

// get reads ref into out, retrying transient failures and busy answers
// with backoff until ctx ends. A 404 is errNotFound.
func (c *client) get(ctx context.Context, ref string, out any) (*rf.Reply, error) {
	var last error
	var wait time.Duration // Retry-After of the last answer
	for attempt := 0; ; attempt++ {
		if attempt > 0 {
			if err := sleep(ctx, cmp.Or(wait, backoff(attempt)), last); err != nil {
				return nil, err
			}
		}
		r, err := c.do(ctx, http.MethodGet, ref, nil, nil)
		var te *transientError
		switch {
		case err != nil && ctx.Err() != nil && last != nil:
			return nil, fmt.Errorf("%w; last failure: %v", err, last)
		case errors.As(err, &te):
			last, wait = err, 0
			continue
		case err != nil:
			return nil, err
		case rf.Busy(r.Status):
			last, wait = statusError(r), retryAfter(r.Header)
			continue
		case r.Status == http.StatusNotFound:
			return r, &notFoundError{url: r.URL}
		case r.Status != http.StatusOK:
			return r, statusError(r)
		}
		if out != nil {
			if err := r.Decode(out); err != nil {
				return r, err
			}
		}
		return r, nil
	}
}

// notFoundError is a 404 on a read.
type notFoundError struct{ url string }

func (e *notFoundError) Error() string { return "GET " + e.url + ": 404 Not Found" }

// backoff is the wait before retry attempt (1-based): exponential, capped,
// jittered over its upper half.
func backoff(attempt int) time.Duration {
	d := backoffMin << min(attempt-1, 10)
	d = min(d, backoffMax)
	return d/2 + rand.N(d/2+1)
}

// retryAfter is the Retry-After header in seconds (0 when absent or not a
// number of seconds).
func retryAfter(h http.Header) time.Duration {
	d, _ := retryAfterGiven(h)
	return d
}

// retryAfterGiven is retryAfter, and whether the header gave a number of
// seconds at all ("Retry-After: 0" is an answer: ask again now).
func retryAfterGiven(h http.Header) (time.Duration, bool) {
	s, err := strconv.Atoi(strings.TrimSpace(h.Get("Retry-After")))
	if err != nil || s < 0 {
		return 0, false
	}
	return time.Duration(min(s, 3600)) * time.Second, true
}

// sleep waits d, or fails when ctx ends first; the error names the last
// failure that made the caller wait.
func sleep(ctx context.Context, d time.Duration, last error) error {
	if dl, ok := ctx.Deadline(); ok && time.Until(dl) < d {
		d = max(time.Until(dl), 0)
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		if last != nil {
			return fmt.Errorf("%w; last failure: %v", ctx.Err(), last)
		}
		return ctx.Err()
	case <-t.C:
		if err := ctx.Err(); err != nil {
			if last != nil {
				return fmt.Errorf("%w; last failure: %v", err, last)
			}
			return err
		}
		return nil
	}
}

// isTransient reports whether err is a transientError.
func isTransient(err error) bool {
	var te *transientError
	return errors.As(err, &te)
}
