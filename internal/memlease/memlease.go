// Package memlease keeps one pooled-memory lease alive for a client of the
// GetMemory API: rackpool cache's remote tier, and the benchmarks that
// drive it. A Keeper leases a region, connects to its memnode and hands
// the connection to its user; then, on its clock, it checks the memnode
// every Check interval, renews the lease at a third of its duration, and
// when the memnode or the lease is lost it releases what is left and
// leases again, handing over the new region (the old region's contents
// are gone with it). A control plane that does not answer a renewal (it
// may be restarting) costs nothing while the lease has more than
// RenewMargin to live: the region and its token stay valid until expiry.
package memlease

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"rackpool/api"
	"rackpool/internal/clock"
	"rackpool/internal/memory"
)

// Control is the part of the control plane's API a Keeper uses
// (api.Client).
type Control interface {
	GetMemory(ctx context.Context, r api.LeaseRequest) (*api.MemoryLease, error)
	RenewLease(ctx context.Context, id string, ttl time.Duration) (*api.MemoryLease, error)
	ReleaseLease(ctx context.Context, id string) error
}

// Region is a connected lease region: a TCP connection to the memnode
// (*memory.Client) or, for a mapped lease, the region mapped into this
// process (*memory.Mapping). Both implement the cache's Remote.
type Region interface {
	Read(ctx context.Context, off uint64, p []byte) error
	Write(ctx context.Context, off uint64, bufs ...[]byte) error
	Stat(ctx context.Context) (memory.RegionStat, error)
	Renew(ctx context.Context, token string) error
	Close() error
}

// Connect reaches a lease's region: it maps it when the request asked for
// mapped memory (the grant must name the node's socket), and dials the
// memnode over TCP otherwise.
func Connect(ctx context.Context, l *api.MemoryLease, mapped bool) (Region, error) {
	if !mapped {
		mc, err := memory.Dial(ctx, l.Endpoint, l.Token)
		if err != nil {
			return nil, fmt.Errorf("connect to memory node %s at %s: %w", l.MemoryNode, l.Endpoint, err)
		}
		return mc, nil
	}
	if l.MapSocket == "" {
		return nil, fmt.Errorf("lease %s on memory node %s cannot be mapped from host %q", l.ID, l.MemoryNode, l.Host)
	}
	m, err := memory.Map(ctx, l.MapSocket, l.Token)
	if err != nil {
		return nil, fmt.Errorf("map lease %s of memory node %s: %w", l.ID, l.MemoryNode, err)
	}
	return m, nil
}

// RenewMargin is how long before its expiry a lease that cannot be renewed
// is given up for a new one.
const RenewMargin = 5 * time.Second

// Options configure a Keeper.
type Options struct {
	Control Control
	// Request is the lease to keep; its TTL (at least 3 s) paces renewals.
	Request api.LeaseRequest
	// Attach receives each new region and its size, and (nil, 0) when the
	// region is lost and none could be leased again. The Keeper closes a
	// region once it has handed over its successor.
	Attach func(r Region, size uint64)
	// Move receives the region of a resized lease (Resize) and returns once
	// its user has moved onto it; the old region is released after. Nil
	// means Attach.
	Move func(r Region, size uint64)
	// Clock paces checks and renewals (default the wall clock).
	Clock clock.Clock
	// Check is how often the memnode is checked (default 2 s).
	Check time.Duration
	// Logger receives losses, renewals and re-leases (default: discard).
	Logger *slog.Logger
	// Connect reaches a granted lease's region (default: the package's
	// Connect, mapping when Request.Mapped).
	Connect func(ctx context.Context, l *api.MemoryLease) (Region, error)
}

// Keeper keeps one lease; its methods are safe for concurrent use.
type Keeper struct {
	o   Options
	log *slog.Logger

	mu     sync.Mutex
	lease  *api.MemoryLease
	client Region
	leases int // how many leases it has taken
}

// New returns a Keeper; call Acquire, then Run.
func New(o Options) (*Keeper, error) {
	if o.Control == nil || o.Attach == nil {
		return nil, errors.New("memlease: Control and Attach are required")
	}
	if o.Request.TTL < 3*time.Second {
		return nil, fmt.Errorf("memlease: lease duration %v is under 3s", o.Request.TTL)
	}
	if o.Clock == nil {
		o.Clock = clock.Real{}
	}
	if o.Check <= 0 {
		o.Check = 2 * time.Second
	}
	if o.Connect == nil {
		mapped := o.Request.Mapped
		o.Connect = func(ctx context.Context, l *api.MemoryLease) (Region, error) { return Connect(ctx, l, mapped) }
	}
	log := o.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Keeper{o: o, log: log}, nil
}

// Lease returns the lease held now (nil when none is).
func (k *Keeper) Lease() *api.MemoryLease {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.lease == nil {
		return nil
	}
	l := *k.lease
	return &l
}

// Leases counts the leases taken so far (1 after Acquire; one more per
// re-lease).
func (k *Keeper) Leases() int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.leases
}

// Acquire leases a region, connects to its memnode and attaches it.
func (k *Keeper) Acquire(ctx context.Context) error {
	lctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	k.mu.Lock()
	req := k.o.Request
	k.mu.Unlock()
	l, err := k.o.Control.GetMemory(lctx, req)
	if err != nil {
		return err
	}
	mc, err := k.o.Connect(lctx, l)
	if err != nil {
		_ = k.o.Control.ReleaseLease(context.WithoutCancel(ctx), l.ID)
		return err
	}
	k.mu.Lock()
	old := k.client
	k.lease, k.client = l, mc
	k.leases++
	k.mu.Unlock()
	k.o.Attach(mc, l.CapacityBytes)
	if old != nil {
		_ = old.Close()
	}
	k.log.Info("remote tier leased", "lease", l.ID, "node", l.MemoryNode, "endpoint", l.Endpoint, "bytes", l.CapacityBytes,
		"expires", l.Expires.Format(time.RFC3339))
	return nil
}

// Run keeps the lease until ctx ends: the memnode is checked every Check
// interval, the lease renewed at a third of its duration, and a lost node
// or lease replaced.
func (k *Keeper) Run(ctx context.Context) {
	tick := clock.NewTicker(k.o.Clock, k.o.Check)
	defer tick.Stop()
	ttl := k.o.Request.TTL
	renewAt := k.o.Clock.Now().Add(ttl / 3)
	renewFailing := false // a renewal failure has been logged
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C():
		}
		k.mu.Lock()
		l, mc := k.lease, k.client
		k.mu.Unlock()
		healthy := mc != nil
		if healthy {
			sctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			_, err := mc.Stat(sctx)
			cancel()
			if err != nil {
				k.log.Warn("remote tier unreachable; its items are misses until it is replaced", "node", l.MemoryNode, "err", err)
				healthy = false
			}
		}
		now := k.o.Clock.Now()
		if healthy && now.Before(renewAt) {
			continue
		}
		if healthy {
			rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			nl, err := k.o.Control.RenewLease(rctx, l.ID, ttl)
			if err == nil {
				err = mc.Renew(rctx, nl.Token)
			}
			cancel()
			if err == nil {
				k.mu.Lock()
				k.lease = nl
				k.mu.Unlock()
				renewAt = k.o.Clock.Now().Add(ttl / 3)
				if renewFailing {
					k.log.Info("lease renewed again", "lease", nl.ID)
				}
				renewFailing = false
				k.log.Debug("lease renewed", "lease", nl.ID, "expires", nl.Expires.Format(time.RFC3339))
				continue
			}
			// The control plane may be restarting: the lease and its
			// tokens stay good until they expire, so keep the region and
			// retry, and lease anew only when expiry is near.
			if l.Expires.Sub(now) > RenewMargin {
				if !renewFailing {
					k.log.Warn("lease renewal failed; retrying until the lease is about to expire", "lease", l.ID,
						"expires", l.Expires.Format(time.RFC3339), "err", err)
				}
				renewFailing = true
				continue
			}
			k.log.Warn("lease renewal failed and the lease is about to expire; leasing again", "lease", l.ID, "err", err)
		}
		renewFailing = false
		if l != nil {
			rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			_ = k.o.Control.ReleaseLease(rctx, l.ID)
			cancel()
		}
		if err := k.Acquire(ctx); err != nil {
			k.log.Warn("cannot lease pooled memory; evictions drop items until it can", "err", err)
			k.o.Attach(nil, 0)
			k.mu.Lock()
			if k.client != nil {
				_ = k.client.Close()
			}
			k.lease, k.client = nil, nil
			k.mu.Unlock()
			continue
		}
		renewAt = k.o.Clock.Now().Add(ttl / 3)
	}
}

// Resize leases a region of size bytes, hands it to Move (or Attach),
// then gives the old lease back; later re-leases ask for size too. When
// the new region cannot be had, nothing changes and the error says why.
func (k *Keeper) Resize(ctx context.Context, size uint64) error {
	k.mu.Lock()
	req := k.o.Request
	k.mu.Unlock()
	req.Size = size
	lctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	l, err := k.o.Control.GetMemory(lctx, req)
	if err != nil {
		return err
	}
	mc, err := k.o.Connect(lctx, l)
	if err != nil {
		_ = k.o.Control.ReleaseLease(context.WithoutCancel(ctx), l.ID)
		return err
	}
	if k.o.Move != nil {
		k.o.Move(mc, l.CapacityBytes)
	} else {
		k.o.Attach(mc, l.CapacityBytes)
	}
	k.mu.Lock()
	old, oldClient := k.lease, k.client
	k.lease, k.client = l, mc
	k.leases++
	k.o.Request.Size = size
	k.mu.Unlock()
	if oldClient != nil {
		_ = oldClient.Close()
	}
	if old != nil {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if err := k.o.Control.ReleaseLease(rctx, old.ID); err != nil {
			k.log.Warn("give back the lease before the resize", "lease", old.ID, "err", err)
		}
	}
	k.log.Info("remote tier resized", "lease", l.ID, "node", l.MemoryNode, "bytes", l.CapacityBytes)
	return nil
}

// Release closes the connection and gives the lease back (at shutdown).
func (k *Keeper) Release(ctx context.Context) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.client != nil {
		_ = k.client.Close()
		k.client = nil
	}
	if k.lease == nil {
		return nil
	}
	id := k.lease.ID
	k.lease = nil
	rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := k.o.Control.ReleaseLease(rctx, id); err != nil {
		return fmt.Errorf("release memory lease %s: %w", id, err)
	}
	return nil
}
