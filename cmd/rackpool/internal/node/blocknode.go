package node

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"runtime"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"rackpool/api"
	"rackpool/cmd/rackpool/internal/cli"
	"rackpool/cmd/rackpool/internal/client"
	"rackpool/internal/blocknode"
	"rackpool/internal/drive"
	"rackpool/internal/profiling"
)

// BlocknodeCmd serves the drives the SAS switch maps to this node's host.
func BlocknodeCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "blocknode --addr A --name HOST --drive-dir DIR --control URL",
		Short: "serve the pooled drives the SAS switch maps to HOST over NBD",
		Long: "Serves over NBD the pooled drives the SAS circuit switch maps to --name, from the drive images\n" +
			"in --drive-dir, while it holds each drive's ownership epoch from the control plane; heartbeats\n" +
			"carry its load (docs/storage.md). Beyond loopback it serves NBD over TLS only.",
		Args: cli.NoArgs,
	}
	fs := cmd.Flags()
	var cfg blocknodeConfig
	fs.StringVar(&cfg.addr, "addr", "127.0.0.1:10809", "address to serve NBD on")
	fs.StringVar(&cfg.control, "control", os.Getenv("RACKPOOL_URL"), "control plane URL (credentials from RACKPOOL_USER / RACKPOOL_PASSWORD)")
	cli.CAFileFlag(fs, &cfg.caFile)
	fs.StringVar(&cfg.name, "name", "", "the topology host this blocknode runs on (required; it needs a port into a SAS circuit switch)")
	fs.StringVar(&cfg.dir, "drive-dir", "", "directory of the drive images, DIR/<drive>.img, shared by every blocknode of the switch (required)")
	fs.StringVar(&cfg.advertise, "advertise", "", "address clients should dial, HOST:PORT (default: the listening address)")
	tlsDir := tlsDirFlag(fs, "server-cert.pem, server-key.pem; required to listen beyond loopback")
	fs.IntVar(&cfg.maxDrives, "max-drives", drive.DefaultMaxDrives, "most drives this node serves at once")
	fs.DurationVar(&cfg.heartbeat, "heartbeat", 100*time.Millisecond, "how often to heartbeat (keep it under a third of the control plane's --drive-lease)")
	cli.VerboseFlag(fs, &cfg.verbose)
	fs.StringVar(&cfg.cpuProfile, "cpuprofile", "", "write a CPU profile to this file until the process stops (go tool pprof)")
	fs.IntVar(&cfg.procs, "procs", 0, "threads running Go code at once (GOMAXPROCS; 0: one per CPU). 1 serves deep queues with fewer wake-ups, at a cost at queue depth 1 (docs/storage.md)")
	cmd.RunE = func(*cobra.Command, []string) error {
		cfg.tlsDir = *tlsDir
		return serveBlocknode(cfg)
	}
	return cmd
}

// blocknodeConfig is blocknode's command line.
type blocknodeConfig struct {
	addr, control, caFile, name, dir, advertise, tlsDir, cpuProfile string
	maxDrives, procs                                                int
	heartbeat                                                       time.Duration
	verbose                                                         bool
}

func serveBlocknode(cfg blocknodeConfig) error {
	switch {
	case cfg.procs < 0:
		return fmt.Errorf("--procs %d: want 0 or more", cfg.procs)
	case cfg.control == "":
		return errors.New("--control URL is required (or set RACKPOOL_URL)")
	case cfg.name == "":
		return errors.New("--name HOST is required: the topology host this blocknode runs on")
	case cfg.dir == "":
		return errors.New("--drive-dir DIR is required")
	case cfg.heartbeat <= 0:
		return errors.New("--heartbeat must be positive")
	case cfg.maxDrives <= 0:
		return errors.New("--max-drives must be positive")
	}
	tlsCfg, endpointOf, err := blocknodeTLS(cfg.tlsDir, cfg.addr, cfg.advertise)
	if err != nil {
		return err
	}
	if cfg.procs > 0 {
		runtime.GOMAXPROCS(cfg.procs)
	}
	level := slog.LevelInfo
	if cfg.verbose {
		level = slog.LevelDebug
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	stopProfile, err := profiling.Start(cfg.cpuProfile, "")
	if err != nil {
		return err
	}
	defer func() { _ = stopProfile() }()
	cf := &client.Flags{URL: cfg.control, CAFile: cfg.caFile}
	c, err := cf.Client()
	if err != nil {
		return err
	}
	srv, err := blocknode.New(blocknode.Options{Dir: cfg.dir, Logger: log, TLS: tlsCfg})
	if err != nil {
		return err
	}
	l, err := net.Listen("tcp", cfg.addr)
	if err != nil {
		return err
	}
	endpoint := cfg.advertise
	if endpoint == "" {
		endpoint = l.Addr().String()
	}
	endpoint = endpointOf(endpoint)
	agent := &blocknode.Agent{Server: srv, Control: apiController{c}, Host: cfg.name, Endpoint: endpoint, Epoch: drive.NewEpoch(),
		MaxDrives: cfg.maxDrives, Interval: cfg.heartbeat, Logger: log}
	srv.SetRefresh(agent.Beat)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := agent.Beat(ctx); err != nil {
		l.Close()
		return fmt.Errorf("register with %s: %w", cfg.control, err)
	}
	go agent.Run(ctx)
	log.Info("blocknode serving", "host", cfg.name, "nbd", endpoint, "drives", len(srv.Served()), "dir", cfg.dir)
	done := make(chan error, 1)
	go func() { done <- srv.Serve(l) }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		log.Info("shutting down")
		return srv.Close()
	}
}

// apiController is the control plane through the Go client.
type apiController struct{ c *api.Client }

func (a apiController) Heartbeat(ctx context.Context, hb blocknode.Heartbeat) (blocknode.Assignment, error) {
	req := api.BlockNodeHeartbeat{Host: hb.Host, Endpoint: hb.Endpoint, Epoch: hb.Epoch, MaxDrives: hb.MaxDrives, InUse: hb.InUse}
	req.Load.ReadBytes, req.Load.WriteBytes, req.Load.Operations = hb.ReadBytes, hb.WriteBytes, hb.Ops
	n, err := a.c.HeartbeatBlockNode(ctx, req)
	if err != nil {
		return blocknode.Assignment{}, err
	}
	key, err := n.Key()
	if err != nil {
		return blocknode.Assignment{}, err
	}
	out := blocknode.Assignment{Key: key, LeaseTTL: time.Duration(n.LeaseMs) * time.Millisecond}
	for _, d := range n.Assigned {
		out.Drives = append(out.Drives, blocknode.Assigned{ID: d.ID, Epoch: d.Epoch, Size: d.CapacityBytes, Generation: d.WriteGeneration})
	}
	return out, nil
}

// tlsDirFlag adds --tls-certificates to fs.
func tlsDirFlag(fs *pflag.FlagSet, what string) *string {
	return fs.String("tls-certificates", "", "serve NBD over TLS only, with the credentials in `DIR` ("+what+
		"; the layout of nbdkit --tls-certificates, which `rackpool nbd-certs` writes)")
}
