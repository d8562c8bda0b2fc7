package fabric

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
)

// Fencing. A control plane that leads by epoch (docs/ha.md) puts its epoch
// in the context of every attach and detach (WithEpoch); the fabric
// remembers the highest epoch it has seen in each domain and refuses a
// change carrying a lower one with ErrFenced. A domain is whoever the
// epochs count for: the serving replica of a database (domain ""), or one
// replica of several active ones (its membership, e.g. "member/cp1-4242-
// 9f3c"), whose epoch the leader raises when it settles that replica's
// unfinished work after it fell silent. Either way a replica that lost its
// place while paused can never change a fabric after its successor has:
// its first call after resuming is refused. A change without an epoch (a
// single control plane on SQLite, a manual tool) is not fenced.

// ErrFenced: the change carries an epoch lower than one the fabric has
// seen in its domain: its sender no longer leads.
var ErrFenced = fmt.Errorf("stale leadership epoch")

// EpochHeader is the HTTP header that carries the epoch to a Redfish
// fabric manager (rfdriver to fabric-emulator): "N", or "N; DOMAIN".
const EpochHeader = "Rackpool-Epoch"

// Epoch is a leadership epoch: N counts up within Domain.
type Epoch struct {
	Domain string
	N      int64
}

// String is the EpochHeader value of e.
func (e Epoch) String() string {
	if e.Domain == "" {
		return strconv.FormatInt(e.N, 10)
	}
	return strconv.FormatInt(e.N, 10) + "; " + e.Domain
}

// maxDomain bounds a domain's length.
const maxDomain = 128

type epochKey struct{}

// WithEpoch returns a copy of ctx carrying e (ignored unless e.N is
// positive).
func WithEpoch(ctx context.Context, e Epoch) context.Context {
	if e.N <= 0 {
		return ctx
	}
	return context.WithValue(ctx, epochKey{}, e)
}

// EpochFrom returns the epoch ctx carries, and false if none.
func EpochFrom(ctx context.Context) (Epoch, bool) {
	e, ok := ctx.Value(epochKey{}).(Epoch)
	return e, ok
}

// ParseEpoch reads an EpochHeader value: a positive decimal integer,
// optionally followed by "; " and a domain of at most 128 letters, digits
// and "._/-"; or "" for none.
func ParseEpoch(v string) (Epoch, error) {
	if v == "" {
		return Epoch{}, nil
	}
	num, domain, _ := strings.Cut(v, ";")
	domain = strings.TrimSpace(domain)
	n, err := strconv.ParseInt(strings.TrimSpace(num), 10, 64)
	if err != nil || n <= 0 {
		return Epoch{}, fmt.Errorf("%s %q does not start with a positive integer", EpochHeader, v)
	}
	if strings.Contains(v, ";") && !validDomain(domain) {
		return Epoch{}, fmt.Errorf("%s %q: the domain must be 1 to %d letters, digits and ._/-", EpochHeader, v, maxDomain)
	}
	return Epoch{Domain: domain, N: n}, nil
}

func validDomain(d string) bool {
	if d == "" || len(d) > maxDomain {
		return false
	}
	for _, r := range d {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("._/-", r)) {
			return false
		}
	}
	return true
}

// Fence is a fabric's memory of the highest epoch it has seen in each
// domain. The zero value is ready to use; it is safe for concurrent use.
// It keeps one entry per domain it has seen: one per replica process that
// changed the fabric, a few bytes each.
type Fence struct {
	mu      sync.Mutex
	highest map[string]int64
}

// Admit checks the epoch ctx carries: a lower one than the highest seen in
// its domain is refused with ErrFenced; a higher one becomes the highest.
// A context without an epoch is admitted. A fabric calls it, under the
// lock that orders its changes, before each attach and detach.
func (f *Fence) Admit(ctx context.Context) error {
	e, ok := EpochFrom(ctx)
	if !ok {
		return nil
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if h := f.highest[e.Domain]; e.N < h {
		return fmt.Errorf("epoch %v, the fabric has seen %d: %w", e, h, ErrFenced)
	}
	if f.highest == nil {
		f.highest = map[string]int64{}
	}
	f.highest[e.Domain] = e.N
	return nil
}
