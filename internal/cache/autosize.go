package cache

import (
	"context"
	"log/slog"
	"time"

	"rackpool/internal/clock"
	"rackpool/internal/units"
)

// The remote tier sized from the cache's own working set (`rackpool cache
// --remote-memory auto`, docs/provisioning.md): every step the cache
// samples the remote log's live bytes plus the bytes the log had to evict
// since the last step (what a larger log would have kept), a sizer
// forecasts the peak of the next steps, and when its decision changes the
// lease is resized: a new lease of the new size, the live records moved
// onto it (MoveRemote), the old one given back.

// RemoteSizer decides the remote tier's size from its working set, one
// sample a step (provision's Sizer under the predictive policy).
type RemoteSizer interface {
	// Size is the size in force, in bytes.
	Size() int64
	// Decide records one sample of the working set (bytes) and returns
	// the size it asks for, whether that is a change, and why.
	Decide(demand int64) (next int64, change bool, why string)
	// Applied records the size the tier has now.
	Applied(size int64)
}

// LeaseResizer resizes the lease the remote tier lives on
// (memlease.Keeper).
type LeaseResizer interface {
	Resize(ctx context.Context, size uint64) error
}

// AutoSizeOptions configure AutoSize.
type AutoSizeOptions struct {
	Sizer  RemoteSizer
	Lease  LeaseResizer
	Step   time.Duration // how often the working set is sampled
	Clock  clock.Clock   // default clock.Real
	Logger *slog.Logger
}

// AutoSize resizes the remote tier's lease every step of o.Clock, as
// o.Sizer decides from the working set, until ctx ends. A resize that
// fails leaves the size as it was; the next decision tries again.
func (c *Cache) AutoSize(ctx context.Context, o AutoSizeOptions) {
	if o.Clock == nil {
		o.Clock = clock.Real{}
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	a := &autoSizer{c: c, o: o, lastEvicted: c.Stats().RemoteEvictedBytes}
	t := clock.NewTicker(o.Clock, o.Step)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C():
			a.step(ctx)
		}
	}
}

type autoSizer struct {
	c           *Cache
	o           AutoSizeOptions
	lastEvicted int64
}

// step samples the working set once and resizes the lease if the sizer
// decides so.
func (a *autoSizer) step(ctx context.Context) {
	st := a.c.Stats()
	demand := st.RemoteBytes + (st.RemoteEvictedBytes - a.lastEvicted)
	a.lastEvicted = st.RemoteEvictedBytes
	next, change, why := a.o.Sizer.Decide(demand)
	if !change {
		return
	}
	msg := "working set " + units.FormatBytes(demand) + " (live " + units.FormatBytes(st.RemoteBytes) + "), " + why
	if err := a.o.Lease.Resize(ctx, uint64(next)); err != nil {
		a.o.Logger.Warn("cache: remote tier not resized: "+msg, "err", err)
		return
	}
	a.o.Sizer.Applied(next)
	a.o.Logger.Info("cache: remote tier resized: " + msg)
}
