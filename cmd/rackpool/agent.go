package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"syscall"
	"time"

	"rackpool/api"
	"rackpool/internal/telemetry/host"
	"rackpool/internal/telemetry/report"
)

// runAgent reports what a composed host really uses to the control plane
// (docs/telemetry.md): memory of a cgroup or of the whole machine, block
// I/O and GPU memory, every interval, until SIGTERM.
func runAgent(args []string) error {
	fs := flag.NewFlagSet("agent", flag.ContinueOnError)
	control := fs.String("control", os.Getenv("RACKPOOL_URL"), "control plane URL (credentials from RACKPOOL_USER / RACKPOOL_PASSWORD)")
	var caFile string
	caFlag(fs, &caFile)
	system := fs.String("system", "", "the composed system (or, for an administrator, the host) this agent runs on (required)")
	cgroup := fs.String("cgroup", "", "cgroup to measure, relative to its hierarchy's mount (e.g. system.slice/job.service; / is the root); default the whole machine")
	interval := fs.Duration("interval", 10*time.Second, "how often to sample and push")
	buffered := fs.Int("max-buffered", report.DefaultMaxBuffered, "samples kept while the control plane cannot be reached (the oldest are dropped)")
	verbose := fs.Bool("v", false, "log debug messages")
	if err := fs.Parse(args); err != nil {
		return err
	}
	switch {
	case fs.NArg() > 0:
		return fmt.Errorf("unexpected argument %q", fs.Arg(0))
	case *control == "":
		return errors.New("--control URL is required (or set RACKPOOL_URL)")
	case *system == "":
		return errors.New("--system ID is required: the composed system this host is (rackpool systems)")
	case *interval < 100*time.Millisecond:
		return errors.New("--interval must be at least 100ms")
	case *buffered < 1:
		return errors.New("--max-buffered must be at least 1")
	}
	level := slog.LevelInfo
	if *verbose {
		level = slog.LevelDebug
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	reader, err := host.New(host.Options{Cgroup: *cgroup})
	if err != nil {
		return err
	}
	cf := &clientFlags{url: *control, caFile: caFile}
	c, err := cf.client()
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := checkSystem(ctx, c, *system); err != nil {
		return err
	}
	timeout := min(max(*interval, 2*time.Second), 10*time.Second)
	rep, err := report.New(report.Options{
		Interval:    *interval,
		MaxBuffered: *buffered,
		Logger:      log,
		Sample:      reader.Read,
		Push: func(ctx context.Context, s []api.UsageSample) error {
			ctx, cancel := context.WithTimeout(ctx, timeout)
			defer cancel()
			return c.SubmitSystemUsage(ctx, *system, s)
		},
	})
	if err != nil {
		return err
	}
	log.Info("agent reporting", "system", *system, "control", *control, "memory", string(reader.Mode()), "cgroup", reader.Dir(),
		"gpus", reader.GPUs(), "interval", *interval)
	rep.Run(ctx)
	log.Info("agent stopping", "unsent", rep.Buffered())
	return nil
}

// checkSystem fails fast on what retrying cannot cure: a system the
// account cannot see (or that does not exist), or credentials that are
// refused. A control plane that cannot be reached yet is not an error:
// the reporter retries.
func checkSystem(ctx context.Context, c *api.Client, system string) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	_, err := c.Do(ctx, "GET", "/redfish/v1/Systems/"+url.PathEscape(system), nil, nil)
	var ae *api.Error
	if errors.As(err, &ae) {
		switch ae.Status {
		case http.StatusNotFound:
			return fmt.Errorf("system %s: not found, or not of this account's tenant (rackpool systems lists them)", system)
		case http.StatusUnauthorized, http.StatusForbidden:
			return fmt.Errorf("the control plane refuses this account: %w", err)
		}
	}
	return nil
}
