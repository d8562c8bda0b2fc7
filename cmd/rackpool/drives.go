package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"rackpool/api"
	"rackpool/cmd/rackpool/internal/cli"
	"rackpool/internal/blocknode"
	"rackpool/internal/drive"
	"rackpool/internal/hba"
	"rackpool/internal/nbd"
	"rackpool/internal/profiling"
)

// Pooled drive verbs: blocknode (the storage server), blocknodes, drives,
// drive (show, token, connect).

// blocknodeCmd serves the drives the SAS switch maps to this node's host.
func blocknodeCmd() *cobra.Command {
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
	tlsDir := tlsDirFlagP(fs, "server-cert.pem, server-key.pem; required to listen beyond loopback")
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
	cf := &clientFlags{url: cfg.control, caFile: cfg.caFile}
	c, err := cf.client()
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

func blocknodesCmd() *cobra.Command {
	return list[api.BlockNode]{
		cmd: &cobra.Command{
			Use:   "blocknodes",
			Short: "list registered blocknodes",
			Long:  "Lists the registered blocknodes: NBD endpoint, state, drives served, most drives, operations.",
		},
		fetch:  (*api.Client).BlockNodes,
		header: "BLOCKNODE\tENDPOINT\tSTATE\tDRIVES\tMAX\tOPS",
		row: func(n api.BlockNode) []string {
			return []string{n.ID, n.Endpoint, onlineState(n.Online), strconv.Itoa(len(n.Links.Drives)), strconv.Itoa(n.MaxDrives),
				strconv.FormatUint(n.Load.Operations, 10)}
		},
	}.command()
}

func drivesCmd() *cobra.Command {
	return list[api.Drive]{
		cmd: &cobra.Command{
			Use:   "drives",
			Short: "list pooled drives: state, blocknode, epoch",
			Long:  "Lists the pooled drives: size, state, the blocknode serving each at its ownership epoch, the writer.",
		},
		fetch:  (*api.Client).Drives,
		header: "DRIVE\tKIND\tSIZE\tSTATE\tBLOCKNODE\tENDPOINT\tEPOCH\tWRITER\tREASON",
		row: func(d api.Drive) []string {
			return []string{d.ID, d.Kind, cli.Human(d.CapacityBytes), d.State, orDash(d.BlockNode), orDash(d.Endpoint),
				strconv.FormatUint(d.Epoch, 10), writerColumn(d), orDash(d.Reason)}
		},
	}.command()
}

// driveCmd is `rackpool drive show|token|connect|release`.
func driveCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "drive show|token|connect|release DRIVE",
		Short: "where a drive is served, a token for it, serve it locally over NBD (connect --listen), or give its write reservation back",
		Long: "Works on one pooled drive: where it is served (show), a capability token for it (token), serving it\n" +
			"on this machine over NBD and following it from blocknode to blocknode (connect), or giving its\n" +
			"write reservation back (release). See docs/storage.md.",
		Args: cobra.ArbitraryArgs,
		RunE: cli.GroupRun,
		// The usage line names the sub-verbs, whose flags are their own.
		DisableFlagsInUseLine: true,
	}
	cmd.AddCommand(driveShowCmd(), driveTokenCmd(), driveConnectCmd(), driveReleaseCmd())
	return cmd
}

func driveShowCmd() *cobra.Command {
	cf := &clientFlags{}
	return clientVerb(&cobra.Command{
		Use:   "show DRIVE",
		Short: "show where a drive is served, and its writer",
		Long:  "Shows a pooled drive: size, kind, model, state, the blocknode serving it and its epoch, its writer.",
		Args:  cli.OneArg,
	}, cf, func(ctx context.Context, c *api.Client, args []string) error {
		d, err := c.Drive(ctx, args[0])
		if err != nil {
			return err
		}
		if cf.json {
			return cli.PrintJSON(d)
		}
		fmt.Printf("%s: %s %s, %s, %s", d.ID, cli.Human(d.CapacityBytes), d.Kind, d.Model, d.State)
		if d.BlockNode != "" {
			fmt.Printf(" on blocknode %s at %s (epoch %d)", d.BlockNode, d.Endpoint, d.Epoch)
		}
		fmt.Println()
		if w := d.WriteReservation; w != nil {
			fmt.Printf("written by %s since %s (write reservation generation %d)\n", w.Holder, w.Since.Local().Format(time.RFC3339), w.Generation)
		}
		if d.Reason != "" {
			fmt.Println(d.Reason)
		}
		return nil
	})
}

func driveTokenCmd() *cobra.Command {
	cf := &clientFlags{}
	var req api.DriveConnect
	cmd := clientVerb(&cobra.Command{
		Use:   "token DRIVE [--rights rw] [--ttl D] [--holder NAME] [--preempt]",
		Short: "a capability token for a drive, and its NBD URI",
		Long: "Asks for a capability token for the drive: the blocknode serving it, its epoch, the token's rights\n" +
			"and expiry, and the NBD URI an NBD client (qemu-io, nbdcopy, fio) connects to. With write rights\n" +
			"the holder takes the drive's write reservation.",
		Example: "  rackpool drive token ssd1 --rights r",
		Args:    cli.OneArg,
	}, cf, func(ctx context.Context, c *api.Client, args []string) error {
		g, err := c.ConnectDrive(ctx, args[0], req)
		if err != nil {
			return err
		}
		if cf.json {
			return cli.PrintJSON(g)
		}
		fmt.Printf("%s: blocknode %s at %s, epoch %d, %s, expires %s", g.Drive, g.BlockNode, g.Endpoint, g.Epoch, g.Rights,
			g.Expires.Local().Format(time.RFC3339))
		if g.Holder != "" {
			fmt.Printf(", writer %s (generation %d)", g.Holder, g.WriteGeneration)
		}
		fmt.Println()
		fmt.Println(nbdURI(g.Endpoint, g.ExportName))
		return nil
	})
	fs := cmd.Flags()
	fs.StringVar(&req.Rights, "rights", "rw", "r, w or rw")
	cli.TTLFlag(fs, &req.TTL, "token lifetime, a positive `duration` (default: the service's, 10m)")
	fs.StringVar(&req.Holder, "holder", "", "with write rights, the drive's write reservation holder (default: ACCOUNT@ADDRESS, as the service sees this client)")
	fs.BoolVar(&req.Preempt, "preempt", false, "take the write reservation over from its holder, fencing its writes")
	return cmd
}

// driveConnectCmd serves a pooled drive locally over NBD, following it
// from blocknode to blocknode.
func driveConnectCmd() *cobra.Command {
	cf := &clientFlags{}
	cmd := &cobra.Command{
		Use:   "connect DRIVE --listen unix:PATH|tcp:127.0.0.1:PORT [--tls-certificates DIR] [--rights rw] [--connections N]",
		Short: "serve a drive on this machine over NBD, following it between blocknodes",
		Long: "Serves the drive on --listen over NBD for local NBD clients, over --connections to the blocknode that\n" +
			"owns it, re-resolving through the control plane and replaying what was not acknowledged when the\n" +
			"drive moves, so that clients see a pause, not an error. With write rights it holds the drive's\n" +
			"write reservation until it exits (docs/storage.md).",
		Example: "  rackpool drive connect ssd1 --listen unix:/run/rackpool/ssd1.sock",
		Args:    cli.OneArg,
	}
	fs := cmd.Flags()
	cf.register(fs)
	var o driveConnectConfig
	fs.StringVar(&o.listen, "listen", "", "where to serve the drive: unix:PATH or tcp:HOST:PORT (required; beyond loopback only with --tls-certificates)")
	tlsDir := tlsDirFlagP(fs, "ca-cert.pem, server-cert.pem, server-key.pem; clients must present a certificate of ca-cert.pem")
	fs.StringVar(&o.rights, "rights", "rw", "r, w or rw")
	fs.StringVar(&o.holder, "holder", defaultConnectHolder(), "with write rights, the drive's write reservation holder: another holder's connect is refused while this one writes")
	fs.BoolVar(&o.preempt, "preempt", false, "take the write reservation over from its holder (a crashed drive connect's, say), fencing its writes")
	fs.IntVar(&o.conns, "connections", hba.DefaultConns, "NBD connections to the owning blocknode")
	fs.DurationVar(&o.timeout, "timeout", hba.DefaultTimeout, "how long a request waits for a working path before failing with EIO")
	cli.VerboseFlag(fs, &o.verbose)
	fs.StringVar(&o.cpuProfile, "cpuprofile", "", "write a CPU profile to this file until the process stops (go tool pprof)")
	fs.IntVar(&o.procs, "procs", 1, "threads running Go code at once (GOMAXPROCS; 0: one per CPU). One avoids a cross-thread wake-up per request; raise it for a drive that needs more than a core")
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		if o.listen == "" {
			return cli.Usagef("usage: %s", cmd.UseLine())
		}
		o.tlsDir = *tlsDir
		return connectDrive(cf, args[0], o)
	}
	return cmd
}

// driveConnectConfig is drive connect's command line.
type driveConnectConfig struct {
	listen, tlsDir, rights, holder, cpuProfile string
	preempt, verbose                           bool
	conns, procs                               int
	timeout                                    time.Duration
}

func connectDrive(cf *clientFlags, id string, o driveConnectConfig) error {
	if _, err := blocknode.ParseRights(o.rights); err != nil {
		return fmt.Errorf("--rights: %w", err)
	}
	network, address, ok := strings.Cut(o.listen, ":")
	if !ok || address == "" || network != "unix" && network != "tcp" {
		return fmt.Errorf("--listen %q: want unix:PATH or tcp:HOST:PORT", o.listen)
	}
	listenTLS, err := connectListenTLS(o.tlsDir, id, network, address)
	if err != nil {
		return err
	}
	dial, err := blocknodeDialer(cf.caFile)
	if err != nil {
		return err
	}
	switch {
	case o.procs < 0:
		return fmt.Errorf("--procs %d: want 0 or more", o.procs)
	case o.procs > 0:
		runtime.GOMAXPROCS(o.procs)
	}
	level := slog.LevelInfo
	if o.verbose {
		level = slog.LevelDebug
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	stopProfile, err := profiling.Start(o.cpuProfile, "")
	if err != nil {
		return err
	}
	defer func() { _ = stopProfile() }()
	c, err := cf.client()
	if err != nil {
		return err
	}
	resolve := connectResolver(c, o.rights, o.holder, o.preempt)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	mp, err := newPath(ctx, hba.Options{Drive: id, Resolver: resolve, Conns: o.conns, Timeout: o.timeout, Logger: log, Dial: dial}, log)
	if err != nil {
		var ae *api.Error
		if errors.As(err, &ae) && ae.Status == http.StatusServiceUnavailable {
			return fmt.Errorf("%w (the drive is not in service: is a blocknode running?)", err)
		}
		if errors.As(err, &ae) && ae.Status == http.StatusConflict {
			return fmt.Errorf("refused: %s", ae.Resolution)
		}
		return err
	}
	defer mp.Close()
	if writes(o.rights) {
		defer func() {
			if mp.Err() == nil { // a preempted holder has nothing to release
				releaseWriter(c, id, o.holder, log)
			}
		}()
	}
	if network == "unix" {
		_ = os.Remove(address) // a socket left by an earlier run
	}
	l, err := net.Listen(network, address)
	if err != nil {
		return err
	}
	if network == "unix" {
		if err := os.Chmod(address, 0o600); err != nil {
			l.Close()
			return err
		}
	}
	srv := &nbd.Server{Exports: mp, Logger: log, TLSConfig: listenTLS}
	p := mp.Current()
	log.Info("drive connected", "drive", id, "listen", o.listen, "blocknode", p.Node, "endpoint", p.Endpoint, "epoch", p.Epoch,
		"bytes", mp.Size(), "holder", holderLog(o.rights, o.holder))
	done := make(chan error, 1)
	go func() { done <- srv.Serve(l) }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return srv.Close()
	case <-mp.Revoked():
		_ = srv.Close()
		return revokedError(id, mp.Err())
	}
}

// connectWait is how long drive connect keeps trying at start-up while the
// service answers that the drive is not in service yet (it is being failed
// over or moved between blocknodes, which takes about a lease).
const connectWait = 30 * time.Second

// newPath opens the drive's path, retrying while the service answers 503
// (the drive is between owners), for at most connectWait: a drive that is
// moving when drive connect starts is waited for, as it is once connected.
func newPath(ctx context.Context, o hba.Options, log *slog.Logger) (*hba.Multipath, error) {
	deadline := time.Now().Add(connectWait)
	for {
		mp, err := hba.New(ctx, o)
		var ae *api.Error
		if err == nil || !errors.As(err, &ae) || ae.Status != http.StatusServiceUnavailable || time.Now().After(deadline) {
			return mp, err
		}
		log.Info("the drive is not in service yet; retrying", "drive", o.Drive, "err", ae.Message)
		select {
		case <-ctx.Done():
			return nil, err
		case <-time.After(500 * time.Millisecond):
		}
	}
}
