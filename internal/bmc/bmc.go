package bmc

import (
	"cmp"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"rackpool/internal/rf"
	"slices"
	"strings"
	"sync"
	"time"
)

// DefaultTimeout bounds each request when Options.Timeout is zero.
const DefaultTimeout = 10 * time.Second

// maxBody is the largest answer the client reads.
const maxBody = 4 << 20

// maxPreconditionRetries bounds SetBoot's reads again after a 412.
const maxPreconditionRetries = 2

// Options configure a Client.
type Options struct {
	// URL is the BMC's base: scheme://host[:port], its service root at
	// URL/redfish/v1 (a trailing /redfish/v1 is accepted).
	URL string
	// System is the ComputerSystem's path (/redfish/v1/Systems/abc) or its
	// Id; "" is the only member of /redfish/v1/Systems.
	System string
	// User and Password are sent as HTTP Basic authentication. The
	// password never appears in errors.
	User, Password string
	// TLS configures HTTPS (nil: the system's roots).
	TLS *tls.Config
	// Timeout bounds each request, the answer's read included (default
	// DefaultTimeout).
	Timeout time.Duration
}

// Boot is a system's boot override: BootSourceOverrideEnabled,
// BootSourceOverrideTarget, BootSourceOverrideMode and
// UefiTargetBootSourceOverride and BootNext. In SetBoot an empty field is
// left as it is.
type Boot struct {
	Enabled, Target, Mode, UefiTarget, BootNext string
}

// State is what the BMC says of the system.
type State struct {
	PowerState string
	Boot       Boot
	// ResetTypes are the #ComputerSystem.Reset action's allowable
	// ResetType values (inline, or its ActionInfo's); nil if the BMC gives
	// none.
	ResetTypes []string
	// BootTargets are BootSourceOverrideTarget@Redfish.AllowableValues;
	// nil if the BMC gives none.
	BootTargets []string
	// ETag is the system's ETag header, else its @odata.etag.
	ETag string
}

// Client is one BMC's ComputerSystem. It is safe for concurrent use.
type Client struct {
	base           *url.URL // scheme://host:port of the BMC
	hc             *http.Client
	user, password string
	timeout        time.Duration
	path           string // the system's path, as its @odata.id says
	action         string // #ComputerSystem.Reset target

	mu         sync.Mutex
	resetTypes []string // from the last read (or the ActionInfo read at New)
	infoTypes  []string // the ActionInfo's, read at New; used when the system lists none inline
}

// New resolves the system, reads it and checks it is a ComputerSystem with
// a #ComputerSystem.Reset action.
func New(ctx context.Context, o Options) (*Client, error) {
	base, err := parseBase(o)
	if err != nil {
		return nil, err
	}
	if o.Timeout < 0 {
		return nil, fmt.Errorf("bmc %s: negative timeout", base)
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.Proxy = nil
	if o.TLS != nil {
		tr.TLSClientConfig = o.TLS.Clone()
	}
	c := &Client{
		base:     base,
		user:     o.User,
		password: o.Password,
		timeout:  o.Timeout,
	}
	if c.timeout == 0 {
		c.timeout = DefaultTimeout
	}
	// Follow redirects only within the BMC: the credentials must never
	// reach another host, nor travel over another scheme.
	c.hc = &http.Client{Transport: tr, CheckRedirect: rf.SameHost(base, "the BMC")}
	if err := c.resolve(ctx, o.System); err != nil {
		tr.CloseIdleConnections()
		return nil, fmt.Errorf("bmc %s: %w", c.base, err)
	}
	return c, nil
}

// parseBase checks Options.URL.
func parseBase(o Options) (*url.URL, error) {
	u, err := url.Parse(strings.TrimRight(o.URL, "/"))
	if err != nil {
		return nil, fmt.Errorf("bmc URL %q: %w", o.URL, err)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("bmc URL %q: want http(s)://host[:port]", o.URL)
	}
	if u.User != nil {
		return nil, fmt.Errorf("bmc URL %s: put the account in Options.User and Options.Password, not the URL", u.Redacted())
	}
	if p := strings.TrimSuffix(u.Path, "/redfish/v1"); p != "" {
		return nil, fmt.Errorf("bmc URL %s: want the BMC's base (scheme://host[:port]), not a path", u.Redacted())
	}
	if u.RawQuery != "" || u.Fragment != "" {
		return nil, fmt.Errorf("bmc URL %s: no query or fragment, please", u.Redacted())
	}
	if u.Scheme == "http" && (o.User != "" || o.Password != "") && !rf.Loopback(u.Hostname()) {
		return nil, fmt.Errorf("bmc URL %s: refusing to send credentials over plain http to a host other than this one: use https", u.Redacted())
	}
	return &url.URL{Scheme: u.Scheme, Host: u.Host}, nil
}

// Path is the system's path on the BMC, as its @odata.id says (a name the
// BMC redirects to its Id is resolved).
func (c *Client) Path() string { return c.path }

// URL is the BMC's base URL.
func (c *Client) URL() string { return c.base.String() }

// resolve finds the system, reads it and keeps its Reset action.
func (c *Client) resolve(ctx context.Context, system string) error {
	path := system
	switch {
	case system == "":
		members, coll, err := c.systems(ctx)
		if err != nil {
			return err
		}
		if len(members) != 1 {
			return fmt.Errorf("%s has %d systems (%s): name one in the System option", coll, len(members), shortList(members))
		}
		path = members[0]
	case !strings.HasPrefix(system, "/"):
		if strings.Contains(system, "/") {
			return fmt.Errorf("system %q: want a path (/redfish/v1/Systems/ID) or an Id", system)
		}
		path = "/redfish/v1/Systems/" + url.PathEscape(system)
	}
	r, sys, err := c.readSystem(ctx, path)
	var se *Error
	if errors.As(err, &se) && se.Status == http.StatusNotFound {
		msg := fmt.Sprintf("no ComputerSystem %q", cmp.Or(system, path))
		if members, _, lerr := c.systems(ctx); lerr == nil {
			msg += fmt.Sprintf("; its systems are %s", shortList(members))
		}
		return fmt.Errorf("%s: %w", msg, err)
	}
	if err != nil {
		return err
	}
	if !strings.HasPrefix(sys.ODataType, "#ComputerSystem.") {
		return fmt.Errorf("GET %s: @odata.type is %q, not a ComputerSystem", r.URL, sys.ODataType)
	}
	a := sys.Actions.Reset
	if a == nil || a.Target == "" {
		return fmt.Errorf("GET %s: the system has no #ComputerSystem.Reset action with a target", r.URL)
	}
	if _, err := c.url(a.Target); err != nil {
		return fmt.Errorf("GET %s: #ComputerSystem.Reset target: %w", r.URL, err)
	}
	c.path = path
	if id := norm(sys.ODataID); strings.HasPrefix(id, "/") {
		c.path = id
	} else if u, err := url.Parse(r.URL); err == nil && u.Path != "" {
		c.path = u.Path // after a redirect
	}
	c.action = a.Target
	if len(a.AllowableValues) == 0 && a.ActionInfo != "" {
		types, err := c.actionInfo(ctx, a.ActionInfo)
		if err != nil {
			return err
		}
		c.infoTypes = types
	}
	c.resetTypes = c.resetTypesOf(sys)
	return nil
}

// shortList names up to five paths.
func shortList(paths []string) string {
	if len(paths) == 0 {
		return "none"
	}
	if len(paths) > 5 {
		return strings.Join(paths[:5], ", ") + fmt.Sprintf(" and %d more", len(paths)-5)
	}
	return strings.Join(paths, ", ")
}

// systems lists the members of the service root's Systems collection.
func (c *Client) systems(ctx context.Context) (members []string, coll string, err error) {
	var root struct {
		Systems *link `json:"Systems"`
	}
	coll = "/redfish/v1/Systems"
	if _, err := c.get(ctx, "/redfish/v1/", &root); err != nil {
		return nil, "", err
	}
	if root.Systems != nil && root.Systems.ID != "" {
		coll = root.Systems.ID
	}
	var col struct {
		Members []link `json:"Members"`
	}
	r, err := c.get(ctx, coll, &col)
	if err != nil {
		return nil, "", err
	}
	for i, m := range col.Members {
		if m.ID == "" {
			return nil, "", fmt.Errorf("GET %s: Members[%d] has no @odata.id", r.URL, i)
		}
		members = append(members, norm(m.ID))
	}
	return members, coll, nil
}

// actionInfo reads the ResetType parameter's AllowableValues from an
// ActionInfo resource.
func (c *Client) actionInfo(ctx context.Context, ref string) ([]string, error) {
	var info struct {
		Parameters []struct {
			Name            string   `json:"Name"`
			AllowableValues []string `json:"AllowableValues"`
		} `json:"Parameters"`
	}
	if _, err := c.get(ctx, ref, &info); err != nil {
		return nil, fmt.Errorf("#ComputerSystem.Reset's ActionInfo: %w", err)
	}
	for _, p := range info.Parameters {
		if p.Name == "ResetType" && len(p.AllowableValues) > 0 {
			return p.AllowableValues, nil
		}
	}
	return nil, nil
}

// resetTypesOf is the system's inline allowable ResetType values, else the
// ActionInfo's read at New.
func (c *Client) resetTypesOf(sys *systemRes) []string {
	if a := sys.Actions.Reset; a != nil && len(a.AllowableValues) > 0 {
		return a.AllowableValues
	}
	return c.infoTypes
}

// State reads the system afresh.
func (c *Client) State(ctx context.Context) (State, error) {
	r, sys, err := c.readSystem(ctx, c.path)
	if err != nil {
		return State{}, fmt.Errorf("bmc %s: %w", c.base, err)
	}
	st := State{PowerState: sys.PowerState, ETag: etagOf(r, sys)}
	if b := sys.Boot; b != nil {
		st.Boot = Boot{Enabled: b.Enabled, Target: b.Target, Mode: b.Mode, UefiTarget: b.UefiTarget, BootNext: b.BootNext}
		if len(b.Targets) > 0 {
			st.BootTargets = b.Targets
		}
	}
	types := c.resetTypesOf(sys)
	c.mu.Lock()
	c.resetTypes = types
	c.mu.Unlock()
	st.ResetTypes = slices.Clone(types)
	return st, nil
}

// Reset POSTs the #ComputerSystem.Reset action with resetType. A type the
// BMC's allowable values (as last read) do not list is refused without
// sending it. Reset returns when the BMC has accepted the request (200,
// 202 or 204); the power state changes when the BMC gets to it, which
// State shows. It is never retried.
func (c *Client) Reset(ctx context.Context, resetType string) error {
	c.mu.Lock()
	allowed := c.resetTypes
	c.mu.Unlock()
	target, _ := c.url(c.action)
	switch {
	case resetType == "":
		return fmt.Errorf("bmc %s: %w", c.base, &Error{Method: http.MethodPost, URL: target, Status: http.StatusBadRequest, Local: true,
			MessageID: MsgPropertyMissing, Message: "no ResetType"})
	case len(allowed) > 0 && !slices.Contains(allowed, resetType):
		return fmt.Errorf("bmc %s: %w", c.base, &Error{Method: http.MethodPost, URL: target, Status: http.StatusBadRequest, Local: true,
			MessageID: MsgActionParameterValueNotInList,
			Message:   fmt.Sprintf("ResetType %q is not one of the BMC's allowable values %s", resetType, strings.Join(allowed, ", "))})
	}
	r, err := c.do(ctx, http.MethodPost, c.action, map[string]string{"ResetType": resetType}, nil)
	if err != nil {
		return fmt.Errorf("bmc %s: %w", c.base, err)
	}
	if !success(r.Status) {
		return fmt.Errorf("bmc %s: %w", c.base, statusError(r))
	}
	return nil
}

// SetBoot reads the system and PATCHes the non-empty fields of b into its
// Boot, with If-Match when the BMC gave an ETag. A value the BMC's
// allowable values (as just read) do not list is refused without sending
// it. On 412 the system is read again and the PATCH sent again, twice at
// most.
func (c *Client) SetBoot(ctx context.Context, b Boot) error {
	patch := map[string]string{}
	for k, v := range map[string]string{
		"BootSourceOverrideEnabled":    b.Enabled,
		"BootSourceOverrideTarget":     b.Target,
		"BootSourceOverrideMode":       b.Mode,
		"UefiTargetBootSourceOverride": b.UefiTarget,
		"BootNext":                     b.BootNext,
	} {
		if v != "" {
			patch[k] = v
		}
	}
	target, _ := c.url(c.path)
	if len(patch) == 0 {
		return fmt.Errorf("bmc %s: %w", c.base, &Error{Method: http.MethodPatch, URL: target, Status: http.StatusBadRequest, Local: true,
			MessageID: MsgPropertyMissing, Message: "no Boot property to set"})
	}
	for attempt := 0; ; attempt++ {
		r, sys, err := c.readSystem(ctx, c.path)
		if err != nil {
			return fmt.Errorf("bmc %s: %w", c.base, err)
		}
		if sys.Boot == nil {
			return fmt.Errorf("bmc %s: GET %s: the system has no Boot property", c.base, r.URL)
		}
		for _, p := range []struct {
			name, v string
			allowed []string
		}{
			{"BootSourceOverrideEnabled", b.Enabled, sys.Boot.EnabledValues},
			{"BootSourceOverrideTarget", b.Target, sys.Boot.Targets},
			{"BootSourceOverrideMode", b.Mode, sys.Boot.Modes},
		} {
			if p.v != "" && len(p.allowed) > 0 && !slices.Contains(p.allowed, p.v) {
				return fmt.Errorf("bmc %s: %w", c.base, &Error{Method: http.MethodPatch, URL: target, Status: http.StatusBadRequest, Local: true,
					MessageID: MsgPropertyValueNotInList,
					Message:   fmt.Sprintf("%s %q is not one of the BMC's allowable values %s", p.name, p.v, strings.Join(p.allowed, ", "))})
			}
		}
		var hdr http.Header
		if etag := etagOf(r, sys); etag != "" {
			hdr = http.Header{"If-Match": {etag}}
		}
		pr, err := c.do(ctx, http.MethodPatch, c.path, map[string]any{"Boot": patch}, hdr)
		if err != nil {
			return fmt.Errorf("bmc %s: %w", c.base, err)
		}
		switch {
		case success(pr.Status):
			return nil
		case pr.Status == http.StatusPreconditionFailed && hdr != nil && attempt < maxPreconditionRetries:
			continue // someone changed the system since it was read
		}
		return fmt.Errorf("bmc %s: %w", c.base, statusError(pr))
	}
}

// success reports the statuses of a change the BMC accepted.
func success(s int) bool {
	return s == http.StatusOK || s == http.StatusAccepted || s == http.StatusNoContent
}

// readSystem GETs the system.
func (c *Client) readSystem(ctx context.Context, path string) (*rf.Reply, *systemRes, error) {
	var sys systemRes
	r, err := c.get(ctx, path, &sys)
	if err != nil {
		return r, nil, err
	}
	return r, &sys, nil
}

// The few properties of a ComputerSystem the client reads. Anything else
// the BMC sends is ignored; these must have the right JSON types.
type systemRes struct {
	ODataID    string `json:"@odata.id"`
	ODataType  string `json:"@odata.type"`
	ODataETag  string `json:"@odata.etag"`
	PowerState string `json:"PowerState"`
	Boot       *struct {
		Enabled       string   `json:"BootSourceOverrideEnabled"`
		EnabledValues []string `json:"BootSourceOverrideEnabled@Redfish.AllowableValues"`
		Target        string   `json:"BootSourceOverrideTarget"`
		Targets       []string `json:"BootSourceOverrideTarget@Redfish.AllowableValues"`
		Mode          string   `json:"BootSourceOverrideMode"`
		Modes         []string `json:"BootSourceOverrideMode@Redfish.AllowableValues"`
		UefiTarget    string   `json:"UefiTargetBootSourceOverride"`
		BootNext      string   `json:"BootNext"`
	} `json:"Boot"`
	Actions struct {
		Reset *struct {
			Target          string   `json:"target"`
			AllowableValues []string `json:"ResetType@Redfish.AllowableValues"`
			ActionInfo      string   `json:"@Redfish.ActionInfo"`
		} `json:"#ComputerSystem.Reset"`
	} `json:"Actions"`
}

type link struct {
	ID string `json:"@odata.id"`
}

// norm is a link's path without a trailing slash.
func norm(ref string) string {
	if u, err := url.Parse(ref); err == nil {
		ref = u.Path
	}
	if ref == "/" {
		return ref
	}
	return strings.TrimRight(ref, "/")
}

// etagOf is the answer's ETag header, else the system's @odata.etag.
func etagOf(r *rf.Reply, sys *systemRes) string {
	if e := r.Header.Get("ETag"); e != "" {
		return e
	}
	return sys.ODataETag
}

// url resolves a path or link of the BMC's to an absolute URL, and refuses
// one that points elsewhere.
func (c *Client) url(ref string) (string, error) {
	return rf.Resolve(c.base, ref, "the BMC")
}

// do makes one request with Basic authentication under the request
// timeout and reads the whole answer, capped at maxBody.
func (c *Client) do(ctx context.Context, method, ref string, body any, hdr http.Header) (*rf.Reply, error) {
	u, err := c.url(ref)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", method, ref, err)
	}
	var data []byte
	if body != nil {
		if data, err = json.Marshal(body); err != nil {
			return nil, fmt.Errorf("%s %s: encode body: %w", method, u, err)
		}
	}
	rctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	req, err := rf.NewRequest(rctx, method, u, data, hdr)
	if err != nil {
		return nil, err
	}
	if c.user != "" || c.password != "" {
		req.SetBasicAuth(c.user, c.password)
	}
	r, err := rf.Send(c.hc, req, u, maxBody, func(err error) error { return c.failed(ctx, method, u, err) })
	if err != nil {
		return nil, err
	}
	if r.Status == http.StatusUnauthorized || r.Status == http.StatusForbidden {
		e := statusError(r)
		e.Message = fmt.Sprintf("as user %q: %s", c.user, e.Message)
		return nil, e
	}
	return r, nil
}

// failed is the error of a request that got no answer: the caller's own
// cancellation or deadline as such, anything else a *TransportError.
func (c *Client) failed(ctx context.Context, method, u string, err error) error {
	if ctx.Err() != nil {
		return fmt.Errorf("%s %s: %w", method, u, ctx.Err())
	}
	if errors.Is(err, context.DeadlineExceeded) {
		err = fmt.Errorf("no complete answer within the request timeout %s", c.timeout)
	}
	return transportError(method, u, err)
}

// Reads are retried this many times on a transport failure or a busy
// answer (503, 429, 502, 504), waiting readBackoff, doubled each time.
const (
	readRetries = 2
	readBackoff = 200 * time.Millisecond
)

// get reads ref into out. Transport failures and busy answers are retried
// (readRetries); another status that is not 200 is an *Error.
func (c *Client) get(ctx context.Context, ref string, out any) (*rf.Reply, error) {
	wait := readBackoff
	for attempt := 0; ; attempt++ {
		r, err := c.do(ctx, http.MethodGet, ref, nil, nil)
		var te *TransportError
		retry := attempt < readRetries && (errors.As(err, &te) && !te.untrusted || err == nil && rf.Busy(r.Status))
		if retry {
			t := time.NewTimer(wait)
			select {
			case <-ctx.Done():
				t.Stop()
				if err == nil {
					err = statusError(r)
				}
				return nil, fmt.Errorf("%w; last failure: %v", ctx.Err(), err)
			case <-t.C:
			}
			wait *= 2
			continue
		}
		if err != nil {
			return nil, err
		}
		if r.Status != http.StatusOK {
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
