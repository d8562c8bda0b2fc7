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
	"syscall"
	"time"

	"rackpool/internal/clock"
	"rackpool/internal/compose"
	"rackpool/internal/fabric/emulated"
	"rackpool/internal/redfish"
	"rackpool/internal/store/sqlite"
	"rackpool/internal/topology"
)

func runServe(args []string) error {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	addr := fs.String("addr", "127.0.0.1:8080", "listen address")
	data := fs.String("data", "./data", "state directory (SQLite database)")
	topoFile := fs.String("topology", "", "topology file (default: the built-in example rack)")
	fabricTime := fs.String("fabric-time", "real", "real: emulated fabrics take their modelled reconfiguration time; instant: they answer at once (benchmarks)")
	logLevel := fs.String("log-level", "info", "debug, info, warn or error")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(*logLevel)); err != nil {
		return fmt.Errorf("--log-level: %w", err)
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))

	var top *topology.Topology
	if *topoFile == "" {
		top = topology.LoadDefault()
	} else {
		var err error
		if top, err = topology.LoadFile(*topoFile); err != nil {
			return err
		}
	}
	var fabricClock clock.Clock
	switch *fabricTime {
	case "real":
		fabricClock = clock.Real{}
	case "instant":
		fabricClock = clock.Instant{}
	default:
		return fmt.Errorf("--fabric-time: want real or instant, got %q", *fabricTime)
	}

	ctx := context.Background()
	st, err := sqlite.Open(*data)
	if err != nil {
		return err
	}
	defer st.Close()
	generated, err := redfish.SetupAdmin(ctx, st, os.Getenv("RACKPOOL_ADMIN_PASSWORD"))
	if err != nil {
		return fmt.Errorf("set up the Administrator account: %w", err)
	}
	if generated != "" {
		fmt.Fprintf(os.Stderr, "\nGenerated Administrator password (shown once; stored only as a hash): %s\n"+
			"Use it with: export RACKPOOL_PASSWORD=%s\n\n", generated, generated)
	}
	drivers, err := emulated.NewAll(top, fabricClock)
	if err != nil {
		return err
	}
	mgr, err := compose.New(ctx, compose.Options{Topology: top, Store: st, Drivers: drivers, Logger: log})
	if err != nil {
		return err
	}
	auth, err := redfish.NewAuth(ctx, st, clock.Real{}, 30*time.Minute)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return err
	}
	srv := &http.Server{
		Handler:           redfish.New(mgr, auth, log),
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       time.Minute,
		IdleTimeout:       2 * time.Minute,
	}
	log.Info("rackpool serving", "url", "http://"+ln.Addr().String()+"/redfish/v1", "topology", top.Name,
		"hosts", len(top.Hosts), "blocks", len(top.Blocks), "data", *data, "fabric_time", *fabricTime,
		"compositions", len(mgr.List()))

	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	select {
	case err := <-done:
		if !errors.Is(err, http.ErrServerClosed) {
			return err
		}
	case s := <-sig:
		log.Info("shutting down", "signal", s.String())
		sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		if err := srv.Shutdown(sctx); err != nil {
			return err
		}
	}
	return nil
}
