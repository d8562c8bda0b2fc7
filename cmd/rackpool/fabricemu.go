package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	stdlog "log"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"rackpool/cmd/rackpool/internal/cli"
	"rackpool/internal/fabric/fmserver"
	"rackpool/internal/pki"
	"rackpool/internal/topology"
)

// fabricEmulatorPasswordEnv holds the fabric emulator's account password.
const fabricEmulatorPasswordEnv = "RACKPOOL_FM_PASSWORD"

// fabricEmulatorCmd is `rackpool fabric-emulator`: it serves one emulated
// fabric of a topology as a Redfish fabric manager
// (internal/fabric/fmserver), HTTPS with the service's own CA in DATA/tls
// by default.
func fabricEmulatorCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "fabric-emulator --topology FILE --fabric ID --addr A",
		Short: "serve one emulated fabric as a Redfish fabric manager (tests of the redfish driver)",
		Long: "Serves one fabric of a topology file as a Redfish fabric manager, for the redfish southbound\n" +
			"driver's tests (docs/southbound.md).",
		Args: cli.NoArgs,
	}
	fs := cmd.Flags()
	topoFile := fs.String("topology", "", "topology file (default: the built-in example rack)")
	fabricID := fs.String("fabric", "", "ID of the fabric to serve (required)")
	addr := fs.String("addr", "127.0.0.1:8443", "listen address")
	data := fs.String("data", "./data-fm", "state directory: the TLS CA and certificate in DATA/tls")
	user := fs.String("user", "Administrator", "the account's user name (password from $"+fabricEmulatorPasswordEnv+")")
	insecureHTTP := fs.Bool("insecure-http", false, "serve plain HTTP (loopback addresses only; for tests)")
	threshold := fs.Duration("task-threshold", 0, "changes whose modelled time exceeds this answer 202 with a task monitor (0: every change that changes something)")
	sessionTimeout := fs.Duration("session-timeout", fmserver.DefaultSessionTimeout, "a session ends after this much inactivity")
	chaos := fs.Int64("chaos", 0, "non-zero: seed of a random mix of transport faults (503 bursts, lost answers, restarts)")
	fabricTime := fs.String("fabric-time", "real", "real: changes take their modelled time; instant: they answer at once")
	logLevel := fs.String("log-level", "info", "debug, info, warn or error")
	cmd.RunE = func(*cobra.Command, []string) error {
		if *fabricID == "" {
			return errors.New("--fabric is required: the ID of the topology's fabric to serve")
		}
		password := os.Getenv(fabricEmulatorPasswordEnv)
		if password == "" {
			return fmt.Errorf("no password: set %s to the password of account %q", fabricEmulatorPasswordEnv, *user)
		}
		if *threshold < 0 || *sessionTimeout <= 0 {
			return errors.New("--task-threshold must not be negative and --session-timeout must be positive")
		}
		var level slog.Level
		if err := level.UnmarshalText([]byte(*logLevel)); err != nil {
			return fmt.Errorf("--log-level: %w", err)
		}
		log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
		clk, err := parseFabricTime(*fabricTime)
		if err != nil {
			return err
		}
		top := topology.LoadDefault()
		if *topoFile != "" {
			var err error
			if top, err = topology.LoadFile(*topoFile); err != nil {
				return err
			}
		}
		srv, err := fmserver.New(fmserver.Options{Topology: top, Fabric: *fabricID, Clock: clk, User: *user, Password: password,
			TaskThreshold: *threshold, SessionTimeout: *sessionTimeout, Chaos: *chaos, Logger: log})
		if err != nil {
			return err
		}
		tlsConf, certs, err := fabricEmulatorTLS(*insecureHTTP, *addr, *data, log)
		if err != nil {
			return err
		}
		ln, err := net.Listen("tcp", *addr)
		if err != nil {
			return err
		}
		scheme := "http"
		if tlsConf != nil {
			ln, scheme = tls.NewListener(ln, tlsConf), "https"
		}
		ctx, stop := context.WithCancel(context.Background())
		defer stop()
		if certs != nil {
			go certs.Run(ctx, 6*time.Hour)
		}
		hs := &http.Server{
			Handler:           srv.Handler(),
			ReadHeaderTimeout: 10 * time.Second,
			ReadTimeout:       time.Minute,
			IdleTimeout:       2 * time.Minute,
			ErrorLog:          stdlog.New(httpErrorLog(log), "", 0),
		}
		log.Info("rackpool fabric-emulator serving", "url", scheme+"://"+ln.Addr().String()+"/redfish/v1", "topology", top.Name,
			"fabric", *fabricID, "fabric_time", *fabricTime, "task_threshold", *threshold, "chaos", *chaos)
		done := make(chan error, 1)
		go func() { done <- hs.Serve(ln) }()
		sig := make(chan os.Signal, 1)
		signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
		select {
		case err := <-done:
			if !errors.Is(err, http.ErrServerClosed) {
				return err
			}
		case s := <-sig:
			log.Info("shutting down", "signal", s.String())
			sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			defer cancel()
			return hs.Shutdown(sctx)
		}
		return nil
	}
	return cmd
}

// fabricEmulatorTLS is serve's TLS set-up (tls.go) without operator
// certificates: the service's own CA in DATA/tls, or plain HTTP on a
// loopback address. Unlike serve, the emulator accepts credentials over
// plain HTTP: it is a test tool.
func fabricEmulatorTLS(insecure bool, addr, data string, log *slog.Logger) (*tls.Config, *pki.Source, error) {
	if insecure {
		host, _, err := net.SplitHostPort(addr)
		if err != nil {
			return nil, nil, fmt.Errorf("--addr %q: %w", addr, err)
		}
		if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
			return nil, nil, fmt.Errorf("--insecure-http serves plain HTTP, which only a loopback address may (--addr %s)", addr)
		}
		log.Warn("serving plain HTTP (--insecure-http): credentials travel in clear text; for loopback tests only")
		return nil, nil, nil
	}
	if err := os.MkdirAll(data, 0o700); err != nil {
		return nil, nil, err
	}
	return serverTLS("", "", false, addr, data, log)
}
