package replica

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"rackpool/internal/store/postgres"
)

// Others returns the other live replicas' advertisements, in tag order
// of their memberships (a replica that has not advertised yet is left
// out: it answers no request yet).
func (a *Active) Others(ctx context.Context) ([]Peer, error) {
	members, err := a.pg.Members(ctx)
	if err != nil {
		return nil, err
	}
	var out []Peer
	for _, m := range members {
		tag, ok := strings.CutPrefix(m.Name, postgres.MemberPrefix)
		if !ok || !m.Alive || tag == a.tag {
			continue
		}
		p, ok, err := a.peer(ctx, tag)
		if err != nil {
			return nil, err
		}
		if ok {
			out = append(out, p)
		}
	}
	return out, nil
}

// Lister tells a Gatherer where the other replicas are (Active).
type Lister interface {
	Others(ctx context.Context) ([]Peer, error)
}

var _ Lister = (*Active)(nil)

// Gatherer reads a resource at every other replica as the client of a
// request, for what each replica keeps in its own process and every
// replica must answer whole (the task collection). The client's
// credentials travel with it, so each replica answers with what that
// client may see.
type Gatherer struct {
	tag        string
	peers      Lister
	transports *transports
	// Timeout bounds each replica's answer (default 5 s).
	Timeout time.Duration
}

// NewGatherer returns the gatherer of the replica whose tag is tag.
func NewGatherer(tag string, peers Lister) *Gatherer {
	return &Gatherer{tag: tag, peers: peers, transports: &transports{m: map[[32]byte]http.RoundTripper{}}}
}

// maxGathered bounds one replica's answer.
const maxGathered = 16 << 20

// Get GETs path (with its query) at every other live replica with r's
// credentials and returns their bodies. A request another replica
// forwarded gathers nothing (nil): its sender gathers. Any replica that
// does not answer 200 fails the whole (the caller answers 503: a partial
// answer would differ from replica to replica).
func (g *Gatherer) Get(r *http.Request, path string) ([][]byte, error) {
	if r.Header.Get(ForwardedHeader) != "" {
		return nil, nil
	}
	peers, err := g.peers.Others(r.Context())
	if err != nil {
		return nil, fmt.Errorf("list the other replicas: %w", err)
	}
	timeout := g.Timeout
	if timeout <= 0 {
		timeout = 5 * time.Second
	}
	out := make([][]byte, len(peers))
	errs := make([]error, len(peers))
	var wg sync.WaitGroup
	for i, p := range peers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out[i], errs[i] = g.get(r, p, path, timeout)
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

func (g *Gatherer) get(r *http.Request, p Peer, path string, timeout time.Duration) ([]byte, error) {
	base, err := url.Parse(p.URL)
	if err != nil || base.Host == "" {
		return nil, fmt.Errorf("replica at %q: unusable URL", p.URL)
	}
	rt, err := g.transports.get(p.CA)
	if err != nil {
		return nil, fmt.Errorf("replica at %s: %w", p.URL, err)
	}
	ctx, cancel := context.WithTimeout(r.Context(), timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(p.URL, "/")+path, nil)
	if err != nil {
		return nil, err
	}
	for _, h := range []string{"Authorization", "X-Auth-Token", "OData-Version"} {
		if v := r.Header.Get(h); v != "" {
			req.Header.Set(h, v)
		}
	}
	req.Header.Set(ForwardedHeader, g.tag)
	res, err := (&http.Client{Transport: rt}).Do(req)
	if err != nil {
		return nil, fmt.Errorf("replica at %s: %w", p.URL, err)
	}
	defer res.Body.Close()
	body, err := io.ReadAll(io.LimitReader(res.Body, maxGathered+1))
	switch {
	case err != nil:
		return nil, fmt.Errorf("replica at %s: %w", p.URL, err)
	case len(body) > maxGathered:
		return nil, fmt.Errorf("replica at %s: answer larger than %d bytes", p.URL, maxGathered)
	case res.StatusCode != http.StatusOK:
		return nil, fmt.Errorf("replica at %s: GET %s answered %s", p.URL, path, res.Status)
	}
	return body, nil
}
