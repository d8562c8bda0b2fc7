package fabric

import (
	"context"
	"fmt"
	"strconv"
	"sync"
)

// Fencing. A control plane that leads by epoch (docs/ha.md: a replica's
// leadership of its database) puts its epoch in the context of every
// attach and detach (WithEpoch); the fabric remembers the highest epoch it
// has seen and refuses a change carrying a lower one with ErrFenced. A
// replica that lost its leadership while paused can thus never change a
// fabric after its successor has: its first call after resuming is refused.
// A change without an epoch (a single control plane on SQLite, a manual
// tool) is not fenced.

// ErrFenced: the change carries an epoch lower than one the fabric has
// seen: its sender no longer leads.
var ErrFenced = fmt.Errorf("stale leadership epoch")

// EpochHeader is the HTTP header that carries the epoch to a Redfish
// fabric manager (rfdriver to fabric-emulator).
const EpochHeader = "Rackpool-Epoch"

type epochKey struct{}

// WithEpoch returns a copy of ctx carrying epoch (ignored unless positive).
func WithEpoch(ctx context.Context, epoch int64) context.Context {
	if epoch <= 0 {
		return ctx
	}
	return context.WithValue(ctx, epochKey{}, epoch)
}

// EpochFrom returns the epoch ctx carries, and false if none.
func EpochFrom(ctx context.Context) (int64, bool) {
	e, ok := ctx.Value(epochKey{}).(int64)
	return e, ok
}

// ParseEpoch reads an EpochHeader value: a positive decimal integer, or ""
// for none.
func ParseEpoch(v string) (int64, error) {
	if v == "" {
		return 0, nil
	}
	e, err := strconv.ParseInt(v, 10, 64)
	if err != nil || e <= 0 {
		return 0, fmt.Errorf("%s %q is not a positive integer", EpochHeader, v)
	}
	return e, nil
}

// Fence is a fabric's memory of the highest epoch it has seen. The zero
// value is ready to use; it is safe for concurrent use.
type Fence struct {
	mu      sync.Mutex
	highest int64
}

// Admit checks the epoch ctx carries: a lower one than the highest seen is
// refused with ErrFenced; a higher one becomes the highest. A context
// without an epoch is admitted. A fabric calls it, under the lock that
// orders its changes, before each attach and detach.
func (f *Fence) Admit(ctx context.Context) error {
	e, ok := EpochFrom(ctx)
	if !ok {
		return nil
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if e < f.highest {
		return fmt.Errorf("epoch %d, the fabric has seen %d: %w", e, f.highest, ErrFenced)
	}
	f.highest = e
	return nil
}
