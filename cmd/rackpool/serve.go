package main

import (
	"context"
	"crypto/tls"
	"encoding/pem"
	"errors"
	"flag"
	"fmt"
	stdlog "log"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"rackpool/internal/console"

	"golang.org/x/net/netutil"

	"rackpool/api"
	"rackpool/internal/compose"
	"rackpool/internal/compose/bmcpower"
	"rackpool/internal/drive"
	"rackpool/internal/events"
	"rackpool/internal/hostagent"
	"rackpool/internal/lease"
	"rackpool/internal/metrics"
	"rackpool/internal/pki"
	"rackpool/internal/provision"
	"rackpool/internal/redfish"
	"rackpool/internal/replica"
	"rackpool/internal/store/postgres"
	"rackpool/internal/telemetry"
	"rackpool/internal/tenancy"
	"rackpool/internal/topology"
)

func runServe(args []string) error {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	addr := fs.String("addr", "127.0.0.1:8080", "listen address")
	data := fs.String("data", "./data", "state directory (SQLite database, TLS CA, fabric state)")
	storeSpec := fs.String("store", os.Getenv("RACKPOOL_STORE"), "where the state lives: sqlite (the database in --data) or postgres://USER:PASSWORD@HOST:PORT/DATABASE (docs/ha.md); default $RACKPOOL_STORE, else sqlite")
	standby := fs.Bool("standby", false, "with a postgres:// --store: wait while another replica serves the database, and take over when it stops or falls silent (docs/ha.md)")
	activeMode := fs.Bool("active", false, "with a postgres:// --store: serve beside the other --active replicas of the database, every one answering (docs/ha.md)")
	advertise := fs.String("advertise", "", "with --active: the URL the other replicas reach this one at (default: the scheme and --addr, which must then not be a wildcard address)")
	topoFile := fs.String("topology", "", "topology file (default: the built-in example rack)")
	fabricTime := fs.String("fabric-time", "real", "real: emulated fabrics take their modelled reconfiguration time; instant: they answer at once (benchmarks)")
	logLevel := fs.String("log-level", "info", "debug, info, warn or error")
	logFormat := fs.String("log-format", "text", "text or json (structured logs on stderr)")
	asyncThreshold := fs.Duration("async-threshold", redfish.DefaultAsyncThreshold,
		"compositions whose modelled fabric time exceeds this answer 202 with a task monitor (negative: never)")
	importFile := fs.String("import", "", "apply the allocation in this export file at start-up, all or nothing (see 'rackpool export')")
	driveLease := fs.Duration("drive-lease", drive.DefaultLeaseTTL,
		"how long a blocknode may serve its drives after a heartbeat; a silent blocknode's drives are failed over after this plus a quarter")
	spareDrives := fs.Int("spare-drives", 0, "pooled drives kept unassigned as rack-wide hot spares (P1 §5)")
	elasticMode := fs.String("elastic", "off", "dynamic elastic disaggregation of blocknodes (P1 §4): off, dry-run or on")
	elasticOps := fs.Float64("elastic-node-ops", 20000, "operations per second one blocknode serves at full load (measure with bench/drives)")
	elasticHold := fs.Duration("elastic-hold", 5*time.Minute, "least time between two elastic decisions")
	elasticWindow := fs.Duration("elastic-window", time.Minute, "blocknode load is averaged over this")
	monitorEvery := fs.Duration("monitor-interval", events.DefaultMonitorInterval, "how often fabric health and telemetry are polled for events")
	tlsCert := fs.String("tls-cert", "", "serve HTTPS with this PEM certificate chain (with --tls-key) instead of the service's own, kept in DATA/tls")
	tlsKey := fs.String("tls-key", "", "PEM private key of --tls-cert")
	insecureHTTP := fs.Bool("insecure-http", false, "serve plain HTTP instead of HTTPS (loopback addresses only; credentials are then refused)")
	tlsSelfSigned := fs.Bool("tls-self-signed", false, "no longer needed: HTTPS with the service's own CA is the default (kept so old scripts run)")
	headerTimeout := fs.Duration("header-timeout", 10*time.Second, "a client must send a request's headers within this (slow clients cannot hold connections)")
	bodyTimeout := fs.Duration("body-timeout", time.Minute, "a client must send a whole request, headers and body, within this")
	idleTimeout := fs.Duration("idle-timeout", 2*time.Minute, "an idle keep-alive connection is closed after this")
	maxConns := fs.Int("max-connections", 1024, "connections served at once; more wait in the kernel's accept queue until one closes")
	telRetention := fs.Duration("telemetry-retention", telemetry.DefaultRetention, "usage samples (rackpool agent, memnodes, caches) older than this are dropped")
	telMaxSeries := fs.Int("telemetry-max-series", telemetry.DefaultMaxSeries, "most usage series kept (a source has one per metric); pushes for new ones beyond it are refused")
	telCheckpoint := fs.Duration("telemetry-checkpoint", time.Minute, "how often usage samples are written to the store (at most this much is lost to a crash)")
	provMode := fs.String("provisioning", "off", "predictive provisioning of subscribed systems' pooled memory (P0 §8; docs/provisioning.md): off, dry-run or on")
	provEvery := fs.Duration("provisioning-interval", 30*time.Second, "a step of the provisioning loop")
	provWindow := fs.Int("provisioning-window", 0, "observation window in steps (default 128)")
	provHorizon := fs.Int("provisioning-horizon", 0, "prediction window in steps: growth is provisioned for its forecast peak (default 2)")
	provQuantile := fs.Float64("provisioning-quantile", 0, "upper quantile of the forecast peak (default 0.99)")
	hostAgents := fs.String("host-agents", "none", "hosts whose compositions wait for their agent to rescan and confirm after an attach and to drain before a detach (docs/southbound.md): none, all, or host IDs separated by commas")
	maxSessions := fs.Int("max-sessions", tenancy.DefaultMaxSessions, "live sessions one account may hold; a login beyond answers SessionLimitExceeded")
	hostTimeout := fs.Duration("host-agent-timeout", compose.DefaultHostTimeout, "how long a host agent has to confirm a step before the composition rolls back")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	for name, d := range map[string]time.Duration{"--header-timeout": *headerTimeout, "--body-timeout": *bodyTimeout, "--idle-timeout": *idleTimeout} {
		if d <= 0 {
			return fmt.Errorf("%s must be positive, not %v", name, d)
		}
	}
	if *maxSessions < 1 {
		return fmt.Errorf("--max-sessions must be at least 1, not %d", *maxSessions)
	}
	if *maxConns < 1 {
		return fmt.Errorf("--max-connections must be at least 1, not %d", *maxConns)
	}
	if *telRetention < time.Minute || *telMaxSeries < 1 || *telCheckpoint <= 0 {
		return errors.New("--telemetry-retention must be at least 1m, --telemetry-max-series at least 1 and --telemetry-checkpoint positive")
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(*logLevel)); err != nil {
		return fmt.Errorf("--log-level: %w", err)
	}
	var log *slog.Logger
	switch *logFormat {
	case "text":
		log = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	case "json":
		log = slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	default:
		return fmt.Errorf("--log-format: want text or json, got %q", *logFormat)
	}

	if *tlsSelfSigned {
		log.Warn("--tls-self-signed is no longer needed and is ignored: HTTPS with the service's own CA (DATA/tls/ca.pem) is the default")
	}
	unlock, err := lockData(*data)
	if err != nil {
		return err
	}
	defer unlock()
	if st, err := os.Stat(*data); err == nil && st.Mode().Perm()&0o077 != 0 {
		log.Warn("the data directory is open to other users; it holds password hashes, sessions and the CA's key: chmod 700 it",
			"data", *data, "mode", st.Mode().Perm().String())
	}

	var top *topology.Topology
	if *topoFile == "" {
		top = topology.LoadDefault()
	} else {
		var err error
		if top, err = topology.LoadFile(*topoFile); err != nil {
			return err
		}
	}
	fabricClock, err := parseFabricTime(*fabricTime)
	if err != nil {
		return err
	}
	tlsConf, certs, err := serverTLS(*tlsCert, *tlsKey, *insecureHTTP, *addr, *data, log)
	if err != nil {
		return err
	}

	ctx := context.Background()
	if *activeMode {
		if *importFile != "" {
			return errors.New("--import applies an allocation on a replica serving alone: run it without --active first")
		}
		if *hostAgents != "none" {
			return errors.New("--host-agents: a host agent's steps wait at the replica that runs the workflow, which --active does not yet route to; run host agents with a replica serving alone")
		}
	}
	opened, err := openStore(ctx, *storeSpec, *data, *standby, *activeMode, top, log)
	if err != nil {
		return err
	}
	defer opened.release()
	st, storeDesc, epoch, act := opened.st, opened.desc, opened.epoch, opened.act
	// An active replica follows the others' commits from the change log
	// read from here on (before anything is loaded).
	var follower *replica.Follower
	// A replica serving alone on PostgreSQL confirms its lead before it
	// answers "not found": another may have taken over and changed it.
	catchUp := opened.check
	driveEpoch := epoch
	if act != nil {
		head, err := opened.pg.Head(ctx)
		if err != nil {
			return fmt.Errorf("--store: %w", err)
		}
		follower = replica.New(opened.pg, head, log)
		catchUp, driveEpoch = follower.CatchUp, act.LeaderEpoch
	}
	auth, generated, err := tenancy.Open(ctx, st, tenancy.Options{IdleTimeout: 30 * time.Minute, MaxSessions: *maxSessions, AdminPassword: os.Getenv("RACKPOOL_ADMIN_PASSWORD"), CatchUp: catchUp})
	if err != nil {
		return fmt.Errorf("load accounts and sessions: %w", err)
	}
	if generated != "" {
		fmt.Fprintf(os.Stderr, "\nGenerated Administrator password (shown once; stored only as a hash): %s\n"+
			"Use it with: export RACKPOOL_PASSWORD=%s\n\n", generated, generated)
	}
	agentHosts, err := hostagent.ParseHosts(*hostAgents, func(h string) bool { return top.Host(h) != nil })
	if err != nil {
		return fmt.Errorf("--host-agents: %w", err)
	}
	if *hostTimeout < time.Second {
		return fmt.Errorf("--host-agent-timeout must be at least 1s, not %v", *hostTimeout)
	}
	broker := hostagent.NewBroker(agentHosts)
	drivers, closeDrivers, err := fabricDrivers(ctx, top, fabricClock, *data, log)
	if err != nil {
		return err
	}
	defer closeDrivers()
	bus := events.New(events.Options{Logger: log, StartID: uint64(time.Now().UnixMicro())})
	defer bus.Close()
	obs := redfish.NewObserver(metrics.NewRegistry(), bus)
	power, err := bmcpower.Drivers(top.Hosts, compose.ModelPower{Clock: fabricClock}, bmcpower.Options{TLS: api.TLSConfig, Logger: log})
	if err != nil {
		return err
	}
	mgr, err := compose.New(ctx, compose.Options{Topology: top, Store: st, Drivers: drivers, Logger: log, Power: power,
		OnChange: obs.OnChange, OnFabricOp: obs.OnFabricOp, OnSchedule: obs.OnSchedule, Host: broker, HostTimeout: *hostTimeout, Epoch: epoch,
		CatchUp: catchUp, Spread: act != nil, Replica: replicaName(act)})
	if err != nil {
		return err
	}
	if follower != nil {
		follower.Compositions(mgr)
		for _, kind := range tenancy.Kinds {
			follower.Handle(kind, func(ctx context.Context, _ []string) {
				if err := auth.Reload(ctx); err != nil {
					log.Warn("replica: reloading accounts and sessions", "err", err)
				}
			})
		}
	}
	leases, err := lease.New(ctx, lease.Options{Store: st, Topology: top, Placement: mgr, Logger: log})
	if err != nil {
		return err
	}
	elastic, err := drive.ParseElasticMode(*elasticMode)
	if err != nil {
		return fmt.Errorf("--elastic: %w", err)
	}
	drives, err := drive.New(ctx, drive.Options{Store: st, Topology: top, Holders: mgr, Logger: log, LeaseTTL: *driveLease, Epoch: driveEpoch,
		Spares: *spareDrives, OnEvent: obs.OnDriveEvent,
		Elastic: drive.Elastic{Mode: elastic, NodeOps: *elasticOps, Hold: *elasticHold, Window: *elasticWindow}})
	if err != nil {
		return err
	}
	// Usage telemetry: samples from agents, memnodes and caches, restored
	// from the last checkpoint; the provisioning loop reads it too.
	tel, err := telemetry.Open(ctx, telemetry.Options{Store: st, Retention: *telRetention, MaxSeries: *telMaxSeries, Logger: log})
	if err != nil {
		return err
	}
	pmode, err := provision.ParseMode(*provMode)
	if err != nil {
		return fmt.Errorf("--provisioning: %w", err)
	}
	rules := provision.Rules{Window: *provWindow, Horizon: *provHorizon}
	if *provQuantile != 0 {
		rules.Forecast = provision.DefaultForecast
		rules.Forecast.Quantile = *provQuantile
	}
	prov, err := provision.NewLoop(ctx, provision.LoopOptions{Mode: pmode, Interval: *provEvery, Rules: rules, Store: st,
		Compose: mgr, Telemetry: tel, Quota: auth.Quota, Logger: log, OnEvent: obs.OnProvisioningEvent})
	if err != nil {
		return fmt.Errorf("--provisioning: %w", err)
	}
	redfish.Version = version
	// The monitor's device telemetry, condensed into the FabricTelemetry
	// MetricReport (its history and the MetricReport SSE stream).
	fabricTel := redfish.NewFabricTelemetry(redfish.FabricTelemetryOptions{Interval: *monitorEvery, Topology: top})
	monitor := events.NewMonitor(bus, drivers, events.MonitorOptions{Interval: *monitorEvery, Logger: log, Stats: fabricTel.Record})
	api := redfish.New(mgr, auth, redfish.Options{Logger: log, Store: st, Observer: obs, AsyncThreshold: *asyncThreshold, Leases: leases, Drives: drives, Health: monitor,
		Telemetry: tel, Provisioning: prov, Broker: broker, TaskPrefix: taskPrefix(act), Listen: *addr})
	api.ServeFabricTelemetry(fabricTel)
	if err := api.Restore(ctx); err != nil {
		return err
	}
	if act != nil {
		api.DropSubscriptions() // the leader delivers them
		follower.Handle(compose.PolicyKind, func(ctx context.Context, _ []string) {
			if err := mgr.ReloadPolicy(ctx); err != nil {
				log.Warn("replica: reloading the composition policy", "err", err)
			}
		})
	}
	if *importFile != "" {
		n, err := importAllocation(ctx, api, *importFile)
		if err != nil {
			return fmt.Errorf("--import %s: %w", *importFile, err)
		}
		log.Info("imported allocation", "file", *importFile, "compositions", n)
	}
	bg, stop := context.WithCancel(ctx)
	defer stop()
	// The loops of one process: with --active, the leader's alone.
	singletons := func(ctx context.Context) {
		go leases.Run(ctx, time.Second)
		go drives.Run(ctx)
		go tel.Run(ctx, *telCheckpoint)
		go prov.Run(ctx)
	}
	if act == nil {
		go mgr.ExpireLoop(bg, time.Second)
		singletons(bg)
	} else {
		go follower.Run(bg, time.Second)
		go everySecond(bg, mgr.RetryStuck)
	}
	go monitor.Run(bg)
	if certs != nil {
		go certs.Run(bg, 6*time.Hour)
	}
	obs.Watch()
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return err
	}
	ln = netutil.LimitListener(ln, *maxConns)
	scheme := "http"
	if tlsConf != nil {
		ln, scheme = tls.NewListener(ln, tlsConf), "https"
	}
	ui, err := console.New()
	if err != nil {
		return fmt.Errorf("console: %w", err)
	}
	handler := ui.Mount(api)
	if act != nil {
		handler = redfish.Forward(handler, act.Tag(), peers{act})
		url := *advertise
		if url == "" {
			host, _, _ := net.SplitHostPort(*addr)
			if ip := net.ParseIP(host); host == "" || ip != nil && ip.IsUnspecified() {
				return fmt.Errorf("--advertise: --addr %s is a wildcard address; say which URL the other replicas reach this one at", *addr)
			}
			url = scheme + "://" + ln.Addr().String()
		}
		ca, err := advertisedCA(certs, *tlsCert == "" && tlsConf != nil, *data)
		if err != nil {
			return fmt.Errorf("--advertise: %w", err)
		}
		if err := act.Advertise(ctx, url, ca); err != nil {
			return err
		}
		// A leader that another replica's write to its subsystems'
		// records reaches (a deposed leader that had not yet noticed it
		// lost the lead) reloads them, so that it never answers from a
		// view older than the database.
		var leading atomic.Bool
		for _, sub := range []struct {
			kinds  []string
			reload func(context.Context) error
		}{{lease.Kinds, leases.Reload}, {drive.Kinds, drives.Reload}} {
			for _, kind := range sub.kinds {
				follower.Handle(kind, func(ctx context.Context, _ []string) {
					if !leading.Load() {
						return
					}
					if err := sub.reload(ctx); err != nil {
						log.Warn("replica: reloading records another replica changed", "kind", kind, "err", err)
					}
				})
			}
		}
		go act.RunLeader(bg, func(lctx context.Context) error {
			leading.Store(true)
			go func() {
				<-lctx.Done()
				leading.Store(false)
			}()
			// Take up what the previous leader left: its state, and
			// the compositions a replica serving alone left unfinished.
			for _, reload := range []func(context.Context) error{leases.Reload, drives.Reload, tel.Reload, prov.Reload} {
				if err := reload(lctx); err != nil {
					return err
				}
			}
			if n, err := mgr.SettleOwner(lctx, ""); err != nil {
				return err
			} else if n > 0 {
				log.Info("settled compositions a replica serving alone left unfinished", "compositions", n)
			}
			if err := api.RestoreSubscriptions(lctx); err != nil {
				return err
			}
			go func() {
				<-lctx.Done()
				api.DropSubscriptions()
			}()
			singletons(lctx)
			go everySecond(lctx, mgr.Expire)
			go opened.pg.PruneLoop(lctx, time.Minute, postgres.ChangeRetention, log)
			go act.EvictLoop(lctx, mgr)
			return nil
		})
	}
	if opened.serving != nil {
		handler = redfish.Gate(handler, opened.serving)
	}
	srv := &http.Server{
		Handler:           handler,
		ReadHeaderTimeout: *headerTimeout,
		ReadTimeout:       max(*bodyTimeout, *headerTimeout),
		IdleTimeout:       *idleTimeout,
		ErrorLog:          stdlog.New(httpErrorLog(log), "", 0),
	}
	srv.RegisterOnShutdown(bus.Close) // ends SSE streams
	log.Info("rackpool serving", "url", scheme+"://"+ln.Addr().String()+"/redfish/v1", "console", scheme+"://"+ln.Addr().String()+console.Prefix, "topology", top.Name,
		"hosts", len(top.Hosts), "blocks", len(top.Blocks), "data", *data, "store", storeDesc, "fabric_time", *fabricTime,
		"compositions", len(mgr.List()))

	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	// Compositions a crash left waiting on a host agent: the agents can
	// reach the service now.
	go mgr.Resume(bg)
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	select {
	case err := <-done:
		if !errors.Is(err, http.ErrServerClosed) {
			return err
		}
	case err := <-opened.deposed:
		srv.Close()
		return err
	case s := <-sig:
		log.Info("shutting down", "signal", s.String())
		sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		if err := srv.Shutdown(sctx); err != nil {
			return err
		}
		if err := tel.Checkpoint(sctx); err != nil {
			log.Warn("usage samples since the last checkpoint not saved", "err", err)
		}
	}
	return nil
}

// everySecond calls fn every second until ctx ends.
func everySecond(ctx context.Context, fn func(context.Context)) {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			fn(context.WithoutCancel(ctx))
		}
	}
}

// replicaName is an active replica's membership, "" without --active.
func replicaName(a *replica.Active) string {
	if a == nil {
		return ""
	}
	return a.Member()
}

// taskPrefix begins an active replica's task IDs.
func taskPrefix(a *replica.Active) string {
	if a == nil {
		return ""
	}
	return a.Tag() + "-"
}

// exitDeposed is the exit status of a replica whose place another took
// (docs/ha.md: restart it as a standby).
const exitDeposed = 3

// exitStatus is the status rackpool exits with after a verb's error err:
// exitDeposed when another replica took this one's place, else
// exitFailure.
func exitStatus(err error) int {
	if errors.Is(err, replica.ErrDeposed) {
		return exitDeposed
	}
	return exitFailure
}

// importAllocation applies an export file at start-up.
func importAllocation(ctx context.Context, api *redfish.Server, file string) (int, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return 0, err
	}
	a, err := redfish.ParseAllocation(data)
	if err != nil {
		return 0, err
	}
	ids, err := api.ImportAllocation(ctx, a)
	return len(ids), err
}

// lockData takes an exclusive lock on the data directory for the life of
// the process: two serve processes on one SQLite directory would each
// place on their own snapshot and hand out the same blocks (several
// replicas need the PostgreSQL store). The kernel drops the lock when the
// process ends, kill -9 included.
func lockData(dir string) (func(), error) {
	// The directory holds password hashes, sessions and the CA's key:
	// its owner's alone.
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	path := filepath.Join(dir, "serve.lock")
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		owner, _ := os.ReadFile(path)
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("data directory %s is in use by another rackpool serve (%s); stop it or choose another --data",
				dir, strings.TrimSpace(string(owner)))
		}
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	owner := fmt.Appendf(nil, "pid %d\n", os.Getpid())
	_, _ = f.WriteAt(owner, 0) // then cut: a reader never sees it empty
	_ = f.Truncate(int64(len(owner)))
	return func() { f.Close() }, nil
}

// advertisedCA is the PEM of the certificate authority this replica's
// certificate chains to: the service's own CA, or the top of the
// operator's chain; nil for plain HTTP.
func advertisedCA(certs *pki.Source, ownCA bool, data string) ([]byte, error) {
	if certs == nil {
		return nil, nil
	}
	if ownCA {
		return os.ReadFile(filepath.Join(data, "tls", "ca.pem"))
	}
	c := certs.Certificate()
	if c == nil || len(c.Certificate) == 0 {
		return nil, errors.New("no certificate is served")
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.Certificate[len(c.Certificate)-1]}), nil
}

// peers tells redfish.Forward where an active replica's peers are.
type peers struct{ a *replica.Active }

var _ redfish.Peers = peers{}

func (p peers) Leader(ctx context.Context) (redfish.Peer, bool, error) {
	r, self, err := p.a.Leader(ctx)
	return redfish.Peer(r), self, err
}

func (p peers) Replica(ctx context.Context, tag string) (redfish.Peer, bool, error) {
	r, ok, err := p.a.Replica(ctx, tag)
	return redfish.Peer(r), ok, err
}
