package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"rackpool/api"
	"rackpool/internal/cache"
	"rackpool/internal/memory"
	"rackpool/internal/units"
)

// runCache serves the memcached protocol from local memory, spilling
// evicted items to pooled memory leased from the control plane.
func runCache(args []string) error {
	fs := flag.NewFlagSet("cache", flag.ContinueOnError)
	addr := fs.String("addr", "127.0.0.1:11211", "address to serve the memcached protocol on")
	local := fs.String("local-memory", "64MiB", "local memory for items")
	remote := fs.String("remote-memory", "", "pooled memory to lease for evicted items (needs --control)")
	control := fs.String("control", os.Getenv("RACKPOOL_URL"), "control plane URL (credentials from RACKPOOL_USER / RACKPOOL_PASSWORD)")
	host := fs.String("host", "", "topology host this cache runs on (the nearest memory node is leased)")
	ttl := fs.Duration("lease-ttl", 10*time.Minute, "duration of the memory lease (renewed at a third of it)")
	promote := fs.Bool("promote", false, "move an item back to local memory when it is read from the remote tier")
	maxItem := fs.String("max-item-size", "1MiB", "largest item accepted (memcached's -I)")
	verbose := fs.Bool("v", false, "log debug messages")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	localBytes, err := units.ParsePositive(*local)
	if err != nil {
		return fmt.Errorf("--local-memory: %w", err)
	}
	itemBytes, err := units.ParsePositive(*maxItem)
	if err != nil {
		return fmt.Errorf("--max-item-size: %w", err)
	}
	var remoteBytes uint64
	if *remote != "" {
		if remoteBytes, err = units.ParsePositive(*remote); err != nil {
			return fmt.Errorf("--remote-memory: %w", err)
		}
		if *control == "" {
			return errors.New("--remote-memory needs --control URL (or RACKPOOL_URL)")
		}
	}
	if *ttl < 3*time.Second {
		return errors.New("--lease-ttl must be at least 3s")
	}
	level := slog.LevelInfo
	if *verbose {
		level = slog.LevelDebug
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	c, err := cache.New(cache.Options{LocalMemory: int64(localBytes), PromoteOnHit: *promote, MaxItemSize: int(itemBytes), Logger: log})
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var tier *remoteTier
	if remoteBytes > 0 {
		cf := &clientFlags{url: *control}
		ac, err := cf.client()
		if err != nil {
			return err
		}
		tier = &remoteTier{api: ac, cache: c, log: log, req: api.LeaseRequest{Size: remoteBytes, Host: *host, TTL: *ttl}}
		if err := tier.acquire(ctx); err != nil {
			return fmt.Errorf("lease %s of pooled memory: %w", *remote, err)
		}
		go tier.maintain(ctx)
	}
	l, err := net.Listen("tcp", *addr)
	if err != nil {
		return err
	}
	log.Info("cache serving", "addr", l.Addr().String(), "local", localBytes, "remote", remoteBytes)
	errc := make(chan error, 1)
	go func() { errc <- c.Serve(l) }()
	select {
	case err = <-errc:
	case <-ctx.Done():
		log.Info("cache stopping")
		err = c.Close()
	}
	if tier != nil {
		tier.release()
	}
	return err
}

// remoteTier keeps the cache's memory lease: it renews it, and when the
// memnode or the lease is lost it leases again and hands the cache the new
// region (the old region's items are then misses).
type remoteTier struct {
	api   *api.Client
	cache *cache.Cache
	log   *slog.Logger
	req   api.LeaseRequest

	mu     sync.Mutex
	lease  *api.MemoryLease
	client *memory.Client
}

// acquire leases a region, connects to its memnode and attaches it.
func (t *remoteTier) acquire(ctx context.Context) error {
	lctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	l, err := t.api.GetMemory(lctx, t.req)
	if err != nil {
		return err
	}
	mc, err := memory.Dial(lctx, l.Endpoint, l.Token)
	if err != nil {
		_ = t.api.ReleaseLease(context.Background(), l.ID)
		return fmt.Errorf("connect to memory node %s at %s: %w", l.MemoryNode, l.Endpoint, err)
	}
	t.mu.Lock()
	old := t.client
	t.lease, t.client = l, mc
	t.mu.Unlock()
	t.cache.SetRemote(mc, l.CapacityBytes)
	if old != nil {
		_ = old.Close()
	}
	t.log.Info("remote tier leased", "lease", l.ID, "node", l.MemoryNode, "endpoint", l.Endpoint, "bytes", l.CapacityBytes,
		"expires", l.Expires.Format(time.RFC3339))
	return nil
}

// renewMargin is how long before its expiry a lease that cannot be renewed
// is given up for a new one.
const renewMargin = 5 * time.Second

// maintain renews the lease at a third of its duration and checks the
// memnode every few seconds; a lost lease or node is replaced.
func (t *remoteTier) maintain(ctx context.Context) {
	tick := time.NewTicker(2 * time.Second)
	defer tick.Stop()
	renewAt := time.Now().Add(t.req.TTL / 3)
	renewFailing := false // a renewal failure has been logged
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		t.mu.Lock()
		l, mc := t.lease, t.client
		t.mu.Unlock()
		healthy := mc != nil
		if healthy {
			sctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			_, err := mc.Stat(sctx)
			cancel()
			if err != nil {
				t.log.Warn("remote tier unreachable; its items are misses until it is replaced", "node", l.MemoryNode, "err", err)
				healthy = false
			}
		}
		if healthy && time.Now().Before(renewAt) {
			continue
		}
		if healthy {
			rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			nl, err := t.api.RenewLease(rctx, l.ID, t.req.TTL)
			if err == nil {
				err = mc.Renew(rctx, nl.Token)
			}
			cancel()
			if err == nil {
				t.mu.Lock()
				t.lease = nl
				t.mu.Unlock()
				renewAt = time.Now().Add(t.req.TTL / 3)
				if renewFailing {
					t.log.Info("lease renewed again", "lease", nl.ID)
				}
				renewFailing = false
				t.log.Debug("lease renewed", "lease", nl.ID, "expires", nl.Expires.Format(time.RFC3339))
				continue
			}
			// The control plane may be restarting: the lease and its
			// tokens stay good until they expire, so keep the region and
			// retry, and lease anew only when expiry is near.
			if time.Until(l.Expires) > renewMargin {
				if !renewFailing {
					t.log.Warn("lease renewal failed; retrying until the lease is about to expire", "lease", l.ID,
						"expires", l.Expires.Format(time.RFC3339), "err", err)
				}
				renewFailing = true
				continue
			}
			t.log.Warn("lease renewal failed and the lease is about to expire; leasing again", "lease", l.ID, "err", err)
		}
		renewFailing = false
		if l != nil {
			rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			_ = t.api.ReleaseLease(rctx, l.ID)
			cancel()
		}
		if err := t.acquire(ctx); err != nil {
			t.log.Warn("cannot lease pooled memory; evictions drop items until it can", "err", err)
			t.cache.SetRemote(nil, 0)
			t.mu.Lock()
			if t.client != nil {
				_ = t.client.Close()
			}
			t.lease, t.client = nil, nil
			t.mu.Unlock()
			continue
		}
		renewAt = time.Now().Add(t.req.TTL / 3)
	}
}

// release gives the lease back at shutdown.
func (t *remoteTier) release() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.client != nil {
		_ = t.client.Close()
	}
	if t.lease != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := t.api.ReleaseLease(ctx, t.lease.ID); err != nil {
			t.log.Warn("release the memory lease", "lease", t.lease.ID, "err", err)
		}
	}
}
