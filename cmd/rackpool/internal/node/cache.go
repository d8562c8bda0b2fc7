package node

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"rackpool/api"
	"rackpool/cmd/rackpool/internal/cli"
	"rackpool/cmd/rackpool/internal/client"
	"rackpool/internal/cache"
	"rackpool/internal/memlease"
	"rackpool/internal/provision"
	"rackpool/internal/telemetry"
	"rackpool/internal/telemetry/report"
	"rackpool/internal/units"
)

// CacheCmd is `rackpool cache`: it serves the memcached protocol from
// local memory, spilling evicted items to pooled memory leased from the
// control plane.
func CacheCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "cache --addr A --local-memory SIZE [--remote-memory SIZE --control URL]",
		Short: "memcached-compatible cache spilling evictions to pooled memory",
		Long: "Serves the memcached protocol from --local-memory, spilling evicted items to a lease of pooled\n" +
			"memory (--remote-memory, or auto: docs/cache.md, docs/provisioning.md).",
		Args: cli.NoArgs,
	}
	fs := cmd.Flags()
	addr := fs.String("addr", "127.0.0.1:11211", "address to serve the memcached protocol on")
	local := fs.String("local-memory", "64MiB", "local memory for items")
	remote := fs.String("remote-memory", "", "pooled memory to lease for evicted items (needs --control); auto: follow the forecast working set between --remote-min and --remote-max")
	remoteMin := fs.String("remote-min", "16MiB", "with --remote-memory auto: the least pooled memory to lease")
	remoteMax := fs.String("remote-max", "1GiB", "with --remote-memory auto: the most pooled memory to lease")
	remoteGranule := fs.String("remote-granule", "4MiB", "with --remote-memory auto: the unit the lease grows and shrinks by")
	remoteStep := fs.Duration("remote-step", 10*time.Second, "with --remote-memory auto: how often the working set is sampled and the lease resized")
	control := fs.String("control", os.Getenv("RACKPOOL_URL"), "control plane URL (credentials from RACKPOOL_USER / RACKPOOL_PASSWORD)")
	var caFile string
	cli.CAFileFlag(fs, &caFile)
	host := fs.String("host", "", "topology host this cache runs on (the nearest memory node is leased)")
	ttl := fs.Duration("lease-ttl", 10*time.Minute, "duration of the memory lease (renewed at a third of it)")
	remoteTier := fs.String("remote-tier", "tcp", "how the remote tier reaches pooled memory: tcp (the memnode protocol, any host) or mapped (loads and stores into the lease mapped from a memnode on this machine; needs --host among the node's --map-hosts)")
	promote := fs.Bool("promote", false, "move an item back to local memory when it is read from the remote tier")
	maxItem := fs.String("max-item-size", "1MiB", "largest item accepted (memcached's -I)")
	usageEvery := fs.Duration("usage-interval", 10*time.Second, "how often to report the remote tier's working set to the control plane (telemetry; 0: never)")
	var verbose bool
	cli.VerboseFlag(fs, &verbose)
	cmd.RunE = func(*cobra.Command, []string) error {
		var mapped bool
		switch *remoteTier {
		case "tcp":
		case "mapped":
			mapped = true
			if *remote == "" {
				return errors.New("--remote-tier mapped needs --remote-memory")
			}
			if *host == "" {
				return errors.New("--remote-tier mapped needs --host, the topology host this cache runs on")
			}
		default:
			return fmt.Errorf("--remote-tier %q: want tcp or mapped", *remoteTier)
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
		var auto *remoteSizer
		if *remote == "auto" {
			if auto, err = newAutoRemote(*remoteMin, *remoteMax, *remoteGranule, *remoteStep); err != nil {
				return err
			}
			remoteBytes = uint64(auto.sizer.Size())
			if *control == "" {
				return errors.New("--remote-memory needs --control URL (or RACKPOOL_URL)")
			}
		} else if *remote != "" {
			if remoteBytes, err = units.ParsePositive(*remote); err != nil {
				return fmt.Errorf("--remote-memory: %w (a size, or auto)", err)
			}
			if *control == "" {
				return errors.New("--remote-memory needs --control URL (or RACKPOOL_URL)")
			}
		}
		if *ttl < 3*time.Second {
			return errors.New("--lease-ttl must be at least 3s")
		}
		if *usageEvery != 0 && *usageEvery < 100*time.Millisecond {
			return errors.New("--usage-interval must be 0 or at least 100ms")
		}
		level := slog.LevelInfo
		if verbose {
			level = slog.LevelDebug
		}
		log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
		c, err := cache.New(cache.Options{LocalMemory: int64(localBytes), PromoteOnHit: *promote, MaxItemSize: int(itemBytes), Logger: log})
		if err != nil {
			return err
		}
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		defer stop()
		var tier *memlease.Keeper
		if remoteBytes > 0 {
			cf := &client.Flags{URL: *control, CAFile: caFile}
			ac, err := cf.Client()
			if err != nil {
				return err
			}
			tier, err = memlease.New(memlease.Options{Control: ac, Request: api.LeaseRequest{Size: remoteBytes, Host: *host, TTL: *ttl, Mapped: mapped},
				Attach: func(mc memlease.Region, n uint64) {
					if mc == nil {
						c.SetRemote(nil, 0) // a nil Region in a Remote is not a nil Remote
						return
					}
					c.SetRemote(mc, n)
				},
				Move: func(mc memlease.Region, n uint64) {
					moved, lost, err := c.MoveRemote(mc, n)
					if err != nil {
						log.Warn("cache: remote tier not moved; it stays where it was", "err", err)
						return
					}
					log.Info("cache: remote tier moved", "bytes", n, "records_moved", moved, "records_lost", lost)
				}, Logger: log})
			if err != nil {
				return err
			}
			if err := tier.Acquire(ctx); err != nil {
				return fmt.Errorf("lease %s of pooled memory: %w", *remote, err)
			}
			go tier.Run(ctx)
			if auto != nil {
				go c.AutoSize(ctx, cache.AutoSizeOptions{Sizer: auto, Lease: tier, Step: *remoteStep, Logger: log})
			}
			if *usageEvery > 0 {
				rep, err := cacheUsageReporter(c, tier, ac, *usageEvery, log)
				if err != nil {
					return err
				}
				go rep.Run(ctx)
			}
		}
		l, err := net.Listen("tcp", *addr)
		if err != nil {
			return err
		}
		log.Info("cache serving", "addr", l.Addr().String(), "local", localBytes, "remote", remoteBytes, "remote_tier", *remoteTier)
		errc := make(chan error, 1)
		go func() { errc <- c.Serve(l) }()
		select {
		case err = <-errc:
		case <-ctx.Done():
			log.Info("cache stopping")
			err = c.Close()
		}
		if tier != nil {
			if rerr := tier.Release(context.Background()); rerr != nil {
				log.Warn("give back the memory lease", "err", rerr)
			}
		}
		return err
	}
	return cmd
}

// cacheUsageReporter reports the remote tier's working set (live bytes and
// items in the remote log) and the bytes per second read from it, as the
// Cache series of the lease the tier lives on.
func cacheUsageReporter(c *cache.Cache, tier *memlease.Keeper, ac *api.Client, every time.Duration, log *slog.Logger) (*report.Reporter, error) {
	var (
		lastRead int64
		lastAt   time.Time
	)
	return report.New(report.Options{
		Interval: every,
		Logger:   log,
		Sample: func(_ context.Context, now time.Time) (map[string]float64, error) {
			st := c.Stats()
			out := map[string]float64{telemetry.CacheRemoteLive: float64(st.RemoteBytes), telemetry.CacheRemoteItems: float64(st.RemoteItems)}
			if !lastAt.IsZero() && now.After(lastAt) && st.RemoteReadBytes >= lastRead {
				out[telemetry.CacheRemoteRead] = float64(st.RemoteReadBytes-lastRead) / now.Sub(lastAt).Seconds()
			}
			lastRead, lastAt = st.RemoteReadBytes, now
			return out, nil
		},
		Push: func(ctx context.Context, s []api.UsageSample) error {
			l := tier.Lease()
			if l == nil {
				return errors.New("no memory lease held now")
			}
			ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			defer cancel()
			return ac.SubmitLeaseUsage(ctx, l.ID, s)
		},
	})
}

// remoteSizer sizes the remote tier's lease for `--remote-memory auto`
// (cache.AutoSize, docs/provisioning.md) with the provisioning policy:
// it forecasts the peak of the next steps of the working set.
type remoteSizer struct{ sizer *provision.Sizer }

func newAutoRemote(minS, maxS, granuleS string, step time.Duration) (*remoteSizer, error) {
	lo, err := units.ParsePositive(minS)
	if err != nil {
		return nil, fmt.Errorf("--remote-min: %w", err)
	}
	hi, err := units.ParsePositive(maxS)
	if err != nil {
		return nil, fmt.Errorf("--remote-max: %w", err)
	}
	g, err := units.ParsePositive(granuleS)
	if err != nil {
		return nil, fmt.Errorf("--remote-granule: %w", err)
	}
	if step < 100*time.Millisecond {
		return nil, errors.New("--remote-step must be at least 100ms")
	}
	if hi < lo {
		return nil, errors.New("--remote-max is below --remote-min")
	}
	sz, err := provision.NewSizer(provision.Predictive, provision.Rules{Window: 64, Horizon: 2}, int64(g), int64(lo), int64(hi), int64(lo))
	if err != nil {
		return nil, err
	}
	return &remoteSizer{sizer: sz}, nil
}

// Size implements cache.RemoteSizer.
func (s *remoteSizer) Size() int64 { return s.sizer.Size() }

// Applied implements cache.RemoteSizer.
func (s *remoteSizer) Applied(size int64) { s.sizer.Applied(size) }

// Decide implements cache.RemoteSizer.
func (s *remoteSizer) Decide(demand int64) (int64, bool, string) {
	d, next := s.sizer.Step(demand)
	return next, d.Action != provision.Hold, fmt.Sprintf("%s forecasts a peak of %.0f granules, %.0f at its quantile; %s %s → %s: %s",
		d.Model, d.ForecastPeak, d.ForecastUpper, d.Action, units.FormatBytes(s.Size()), units.FormatBytes(next), d.Reason)
}
