package node

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
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"rackpool/api"
	"rackpool/cmd/rackpool/internal/cli"
	"rackpool/cmd/rackpool/internal/client"
	"rackpool/internal/blocknode"
	"rackpool/internal/hba"
	"rackpool/internal/nbd"
	"rackpool/internal/profiling"
)

// drive connect: one pooled drive served on this machine over NBD, followed
// from blocknode to blocknode, as its write reservation's holder.

// DriveConnectCmd serves a pooled drive locally over NBD, following it
// from blocknode to blocknode.
func DriveConnectCmd() *cobra.Command {
	cf := &client.Flags{}
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
	cf.Register(fs)
	var o driveConnectConfig
	fs.StringVar(&o.listen, "listen", "", "where to serve the drive: unix:PATH or tcp:HOST:PORT (required; beyond loopback only with --tls-certificates)")
	tlsDir := tlsDirFlag(fs, "ca-cert.pem, server-cert.pem, server-key.pem; clients must present a certificate of ca-cert.pem")
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

func connectDrive(cf *client.Flags, id string, o driveConnectConfig) error {
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
	dial, err := blocknodeDialer(cf.CAFile)
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
	c, err := cf.Client()
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

// One writer per drive, as the CLI sees it (docs/storage.md): drive
// connect and drive token name the write reservation's holder, may
// preempt, and drive release (or drive connect's clean exit) gives the
// reservation back.

// defaultConnectHolder is drive connect's holder name unless --holder
// says another: this process on this host, so that a second drive
// connect, here or elsewhere, is refused while this one writes.
func defaultConnectHolder() string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "localhost"
	}
	return fmt.Sprintf("%s/drive-connect/%d", host, os.Getpid())
}

// writes reports whether rights ("r", "w", "rw", "") include writing.
func writes(rights string) bool { return rights == "" || strings.Contains(rights, "w") }

// connectResolver asks the control plane for the drive's current path.
// With write rights it names holder; it preempts only until the first
// answer: a later preempt by someone else must end this process's
// writing, not be undone by its next reconnection. A refusal by another
// holder's reservation is final (hba.ErrRevoked).
func connectResolver(c *api.Client, rights, holder string, preempt bool) hba.ResolverFunc {
	var first atomic.Bool
	first.Store(preempt)
	return func(ctx context.Context, drive string) (hba.Path, error) {
		req := api.DriveConnect{Rights: rights, Preempt: first.Load()}
		if writes(rights) {
			req.Holder = holder
		}
		g, err := c.ConnectDrive(ctx, drive, req)
		var ae *api.Error
		if errors.As(err, &ae) && ae.Status == http.StatusConflict {
			return hba.Path{}, fmt.Errorf("%w: %w", hba.ErrRevoked, err)
		}
		if err != nil {
			return hba.Path{}, err
		}
		first.Store(false)
		return hba.Path{Endpoint: g.Endpoint, Export: g.ExportName, Epoch: g.Epoch, Node: g.BlockNode}, nil
	}
}

// releaseWriter gives holder's write reservation of drive back as drive
// connect exits cleanly, so the next writer needs no preempt.
func releaseWriter(c *api.Client, drive, holder string, log *slog.Logger) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := c.ReleaseDrive(ctx, drive, holder); err != nil {
		log.Warn("could not release the write reservation; the next writer will have to preempt it", "drive", drive, "holder", holder, "err", err)
		return
	}
	log.Info("write reservation released", "drive", drive, "holder", holder)
}

// holderLog is the holder drive connect logs: none for a reader.
func holderLog(rights, holder string) string {
	if !writes(rights) {
		return "-"
	}
	return holder
}

// revokedError is drive connect's exit once another holder took the
// drive's write reservation over: it names the new holder.
func revokedError(drive string, err error) error {
	var ae *api.Error
	if errors.As(err, &ae) {
		return fmt.Errorf("drive %s was taken over by another writer; this process no longer serves it: %s", drive, ae.Resolution)
	}
	return fmt.Errorf("drive %s: %w", drive, err)
}
