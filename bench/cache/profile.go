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
	"runtime/pprof"
	"syscall"
	"time"

	"rackpool/api"
	"rackpool/internal/cache"
	"rackpool/internal/memlease"
)

// runCacheServer is the hidden -cache-server mode used by -profile: the
// same cache as `rackpool cache` (internal/cache with a remote tier leased
// through the control plane and kept by internal/memlease, the keeper
// rackpool cache uses), served from this process under a CPU profile. It
// writes the profile and releases the lease on SIGTERM.
func runCacheServer(args []string) error {
	fs := flag.NewFlagSet("cache-server", flag.ContinueOnError)
	addr := fs.String("addr", "127.0.0.1:0", "listen address")
	local := fs.Int64("local", 64<<20, "local memory, bytes")
	remote := fs.Uint64("remote", 0, "pooled memory to lease, bytes (0: local only)")
	control := fs.String("control", "", "control plane URL (password from RACKPOOL_PASSWORD)")
	prof := fs.String("cpuprofile", "", "CPU profile path prefix (profiles are taken between SIGUSR1 and SIGUSR2)")
	ttl := fs.Duration("lease-ttl", time.Hour, "lease duration")
	mapped := fs.Bool("mapped", false, "map the lease (remote tier on mapped memory) instead of TCP")
	host := fs.String("host", "", "topology host the lease is for (needed with -mapped)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	c, err := cache.New(cache.Options{LocalMemory: *local, MaxItemSize: 2 << 20, Logger: log})
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var keeper *memlease.Keeper
	if *remote > 0 {
		if *control == "" {
			return errors.New("-remote needs -control")
		}
		ac := api.New(*control, "Administrator", os.Getenv("RACKPOOL_PASSWORD"))
		keeper, err = memlease.New(memlease.Options{Control: ac, Request: api.LeaseRequest{Size: *remote, TTL: *ttl, Mapped: *mapped, Host: *host},
			Attach: func(mc memlease.Region, n uint64) {
				if mc == nil {
					c.SetRemote(nil, 0)
					return
				}
				c.SetRemote(mc, n)
			}, Logger: log})
		if err != nil {
			return err
		}
		if err := keeper.Acquire(ctx); err != nil {
			return fmt.Errorf("lease: %w", err)
		}
		go keeper.Run(ctx)
	}
	// SIGUSR1 starts a CPU profile (PREFIX-1.pprof, PREFIX-2.pprof, ...),
	// SIGUSR2 stops it: the benchmark profiles the measured runs only.
	usr := make(chan os.Signal, 4)
	signal.Notify(usr, syscall.SIGUSR1, syscall.SIGUSR2)
	var pf *os.File
	stopProf := func() {
		if pf != nil {
			pprof.StopCPUProfile()
			pf.Close()
			pf = nil
		}
	}
	defer stopProf()
	go func() {
		n := 0
		for s := range usr {
			if *prof == "" {
				continue
			}
			if s == syscall.SIGUSR1 && pf == nil {
				n++
				f, err := os.Create(fmt.Sprintf("%s-%d.pprof", *prof, n))
				if err != nil {
					log.Error("profile", "err", err)
					continue
				}
				if err := pprof.StartCPUProfile(f); err != nil {
					f.Close()
					log.Error("profile", "err", err)
					continue
				}
				pf = f
			} else if s == syscall.SIGUSR2 {
				stopProf()
			}
		}
	}()
	l, err := net.Listen("tcp", *addr)
	if err != nil {
		return err
	}
	errc := make(chan error, 1)
	go func() { errc <- c.Serve(l) }()
	select {
	case err = <-errc:
	case <-ctx.Done():
		err = c.Close()
	}
	log.Info("cache stats", "stats", fmt.Sprintf("%+v", c.Stats()))
	if keeper != nil {
		if rerr := keeper.Release(context.Background()); rerr != nil {
			log.Warn("give back the memory lease", "err", rerr)
		}
	}
	return err
}
