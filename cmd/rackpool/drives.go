package main

import (
	"context"
	"errors"
	"flag"
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

	"rackpool/api"
	"rackpool/internal/blocknode"
	"rackpool/internal/drive"
	"rackpool/internal/hba"
	"rackpool/internal/nbd"
	"rackpool/internal/profiling"
)

// Pooled drive verbs: blocknode (the storage server), blocknodes, drives,
// drive (show, token, connect).

// runBlocknode serves the drives the SAS switch maps to this node's host.
func runBlocknode(args []string) error {
	fs := flag.NewFlagSet("blocknode", flag.ContinueOnError)
	addr := fs.String("addr", "127.0.0.1:10809", "address to serve NBD on")
	control := fs.String("control", os.Getenv("RACKPOOL_URL"), "control plane URL (credentials from RACKPOOL_USER / RACKPOOL_PASSWORD)")
	var caFile string
	caFlag(fs, &caFile)
	name := fs.String("name", "", "the topology host this blocknode runs on (required; it needs a port into a SAS circuit switch)")
	dir := fs.String("drive-dir", "", "directory of the drive images, DIR/<drive>.img, shared by every blocknode of the switch (required)")
	advertise := fs.String("advertise", "", "address clients should dial, HOST:PORT (default: the listening address)")
	tlsDir := tlsDirFlag(fs, "server-cert.pem, server-key.pem; required to listen beyond loopback")
	maxDrives := fs.Int("max-drives", drive.DefaultMaxDrives, "most drives this node serves at once")
	heartbeat := fs.Duration("heartbeat", 100*time.Millisecond, "how often to heartbeat (keep it under a third of the control plane's --drive-lease)")
	verbose := fs.Bool("v", false, "log debug messages")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile to this file until the process stops (go tool pprof)")
	procs := fs.Int("procs", 0, "threads running Go code at once (GOMAXPROCS; 0: one per CPU). 1 serves deep queues with fewer wake-ups, at a cost at queue depth 1 (docs/storage.md)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	switch {
	case fs.NArg() > 0:
		return fmt.Errorf("unexpected argument %q", fs.Arg(0))
	case *procs < 0:
		return fmt.Errorf("--procs %d: want 0 or more", *procs)
	case *control == "":
		return errors.New("--control URL is required (or set RACKPOOL_URL)")
	case *name == "":
		return errors.New("--name HOST is required: the topology host this blocknode runs on")
	case *dir == "":
		return errors.New("--drive-dir DIR is required")
	case *heartbeat <= 0:
		return errors.New("--heartbeat must be positive")
	case *maxDrives <= 0:
		return errors.New("--max-drives must be positive")
	}
	tlsCfg, endpointOf, err := blocknodeTLS(*tlsDir, *addr, *advertise)
	if err != nil {
		return err
	}
	if *procs > 0 {
		runtime.GOMAXPROCS(*procs)
	}
	level := slog.LevelInfo
	if *verbose {
		level = slog.LevelDebug
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	stopProfile, err := profiling.Start(*cpuProfile, "")
	if err != nil {
		return err
	}
	defer func() { _ = stopProfile() }()
	cf := &clientFlags{url: *control, caFile: caFile}
	c, err := cf.client()
	if err != nil {
		return err
	}
	srv, err := blocknode.New(blocknode.Options{Dir: *dir, Logger: log, TLS: tlsCfg})
	if err != nil {
		return err
	}
	l, err := net.Listen("tcp", *addr)
	if err != nil {
		return err
	}
	endpoint := *advertise
	if endpoint == "" {
		endpoint = l.Addr().String()
	}
	endpoint = endpointOf(endpoint)
	agent := &blocknode.Agent{Server: srv, Control: apiController{c}, Host: *name, Endpoint: endpoint, Epoch: drive.NewEpoch(),
		MaxDrives: *maxDrives, Interval: *heartbeat, Logger: log}
	srv.SetRefresh(agent.Beat)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := agent.Beat(ctx); err != nil {
		l.Close()
		return fmt.Errorf("register with %s: %w", *control, err)
	}
	go agent.Run(ctx)
	log.Info("blocknode serving", "host", *name, "nbd", endpoint, "drives", len(srv.Served()), "dir", *dir)
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

func runBlocknodes(args []string) error {
	fs, cf := newClientFlags("blocknodes")
	if _, err := parseInterspersed(fs, args); err != nil {
		return err
	}
	c, err := cf.client()
	if err != nil {
		return err
	}
	ns, err := c.BlockNodes(context.Background())
	if err != nil {
		return err
	}
	if cf.json {
		return printJSON(ns)
	}
	var rows [][]string
	for _, n := range ns {
		state := "online"
		if !n.Online {
			state = "offline"
		}
		rows = append(rows, []string{n.ID, n.Endpoint, state, strconv.Itoa(len(n.Links.Drives)), strconv.Itoa(n.MaxDrives),
			strconv.FormatUint(n.Load.Operations, 10)})
	}
	table("BLOCKNODE\tENDPOINT\tSTATE\tDRIVES\tMAX\tOPS", rows)
	return nil
}

func runDrives(args []string) error {
	fs, cf := newClientFlags("drives")
	if _, err := parseInterspersed(fs, args); err != nil {
		return err
	}
	c, err := cf.client()
	if err != nil {
		return err
	}
	ds, err := c.Drives(context.Background())
	if err != nil {
		return err
	}
	if cf.json {
		return printJSON(ds)
	}
	var rows [][]string
	for _, d := range ds {
		rows = append(rows, []string{d.ID, d.Kind, human(d.CapacityBytes), d.State, orDash(d.BlockNode), orDash(d.Endpoint),
			strconv.FormatUint(d.Epoch, 10), writerColumn(d), orDash(d.Reason)})
	}
	table("DRIVE\tKIND\tSIZE\tSTATE\tBLOCKNODE\tENDPOINT\tEPOCH\tWRITER\tREASON", rows)
	return nil
}

// runDrive dispatches `rackpool drive show|token|connect|release`.
func runDrive(args []string) error {
	if len(args) == 0 {
		return errors.New("usage: rackpool drive show DRIVE | token DRIVE [--rights rw] [--ttl D] [--holder NAME] [--preempt] | " +
			"connect DRIVE --listen unix:PATH|tcp:127.0.0.1:PORT [--tls-certificates DIR] [--holder NAME] [--preempt] | release DRIVE [--holder NAME]")
	}
	switch args[0] {
	case "show":
		return runDriveShow(args[1:])
	case "token":
		return runDriveToken(args[1:])
	case "connect":
		return runDriveConnect(args[1:])
	case "release":
		return runDriveRelease(args[1:])
	}
	return fmt.Errorf("unknown drive verb %q: show, token, connect or release", args[0])
}

func runDriveShow(args []string) error {
	fs, cf := newClientFlags("drive show")
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return errors.New("usage: rackpool drive show DRIVE")
	}
	c, err := cf.client()
	if err != nil {
		return err
	}
	d, err := c.Drive(context.Background(), pos[0])
	if err != nil {
		return err
	}
	if cf.json {
		return printJSON(d)
	}
	fmt.Printf("%s: %s %s, %s, %s", d.ID, human(d.CapacityBytes), d.Kind, d.Model, d.State)
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
}

func runDriveToken(args []string) error {
	fs, cf := newClientFlags("drive token")
	rights := fs.String("rights", "rw", "r, w or rw")
	ttl := ttlFlag(fs, "token lifetime, a positive `duration` (default: the service's, 10m)")
	holder := fs.String("holder", "", "with write rights, the drive's write reservation holder (default: ACCOUNT@ADDRESS, as the service sees this client)")
	preempt := fs.Bool("preempt", false, "take the write reservation over from its holder, fencing its writes")
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return errors.New("usage: rackpool drive token DRIVE [--rights rw] [--ttl D] [--holder NAME] [--preempt]")
	}
	c, err := cf.client()
	if err != nil {
		return err
	}
	g, err := c.ConnectDrive(context.Background(), pos[0], api.DriveConnect{Rights: *rights, TTL: *ttl, Holder: *holder, Preempt: *preempt})
	if err != nil {
		return err
	}
	if cf.json {
		return printJSON(g)
	}
	fmt.Printf("%s: blocknode %s at %s, epoch %d, %s, expires %s", g.Drive, g.BlockNode, g.Endpoint, g.Epoch, g.Rights,
		g.Expires.Local().Format(time.RFC3339))
	if g.Holder != "" {
		fmt.Printf(", writer %s (generation %d)", g.Holder, g.WriteGeneration)
	}
	fmt.Println()
	fmt.Println(nbdURI(g.Endpoint, g.ExportName))
	return nil
}

// runDriveConnect serves a pooled drive locally over NBD, following it
// from blocknode to blocknode.
func runDriveConnect(args []string) error {
	fs, cf := newClientFlags("drive connect")
	listen := fs.String("listen", "", "where to serve the drive: unix:PATH or tcp:HOST:PORT (required; beyond loopback only with --tls-certificates)")
	tlsDir := tlsDirFlag(fs, "ca-cert.pem, server-cert.pem, server-key.pem; clients must present a certificate of ca-cert.pem")
	rights := fs.String("rights", "rw", "r, w or rw")
	holder := fs.String("holder", defaultConnectHolder(), "with write rights, the drive's write reservation holder: another holder's connect is refused while this one writes")
	preempt := fs.Bool("preempt", false, "take the write reservation over from its holder (a crashed drive connect's, say), fencing its writes")
	conns := fs.Int("connections", hba.DefaultConns, "NBD connections to the owning blocknode")
	timeout := fs.Duration("timeout", hba.DefaultTimeout, "how long a request waits for a working path before failing with EIO")
	verbose := fs.Bool("v", false, "log debug messages")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile to this file until the process stops (go tool pprof)")
	procs := fs.Int("procs", 1, "threads running Go code at once (GOMAXPROCS; 0: one per CPU). One avoids a cross-thread wake-up per request; raise it for a drive that needs more than a core")
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 || *listen == "" {
		return errors.New("usage: rackpool drive connect DRIVE --listen unix:PATH|tcp:127.0.0.1:PORT [--tls-certificates DIR] [--rights rw] [--connections N]")
	}
	if _, err := blocknode.ParseRights(*rights); err != nil {
		return fmt.Errorf("--rights: %w", err)
	}
	network, address, ok := strings.Cut(*listen, ":")
	if !ok || address == "" || network != "unix" && network != "tcp" {
		return fmt.Errorf("--listen %q: want unix:PATH or tcp:HOST:PORT", *listen)
	}
	listenTLS, err := connectListenTLS(*tlsDir, pos[0], network, address)
	if err != nil {
		return err
	}
	dial, err := blocknodeDialer(cf.caFile)
	if err != nil {
		return err
	}
	switch {
	case *procs < 0:
		return fmt.Errorf("--procs %d: want 0 or more", *procs)
	case *procs > 0:
		runtime.GOMAXPROCS(*procs)
	}
	level := slog.LevelInfo
	if *verbose {
		level = slog.LevelDebug
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	stopProfile, err := profiling.Start(*cpuProfile, "")
	if err != nil {
		return err
	}
	defer func() { _ = stopProfile() }()
	c, err := cf.client()
	if err != nil {
		return err
	}
	id := pos[0]
	resolve := connectResolver(c, *rights, *holder, *preempt)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	mp, err := newPath(ctx, hba.Options{Drive: id, Resolver: resolve, Conns: *conns, Timeout: *timeout, Logger: log, Dial: dial}, log)
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
	if writes(*rights) {
		defer func() {
			if mp.Err() == nil { // a preempted holder has nothing to release
				releaseWriter(c, id, *holder, log)
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
	log.Info("drive connected", "drive", id, "listen", *listen, "blocknode", p.Node, "endpoint", p.Endpoint, "epoch", p.Epoch,
		"bytes", mp.Size(), "holder", holderLog(*rights, *holder))
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
