package main

import (
	"context"
	"crypto/tls"
	"encoding/pem"
	"errors"
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

	"github.com/spf13/cobra"
	"golang.org/x/net/netutil"

	"rackpool/api"
	"rackpool/cmd/rackpool/internal/cli"
	"rackpool/internal/compose"
	"rackpool/internal/compose/bmcpower"
	"rackpool/internal/console"
	"rackpool/internal/drive"
	"rackpool/internal/events"
	"rackpool/internal/hostagent"
	"rackpool/internal/lease"
	"rackpool/internal/metrics"
	"rackpool/internal/observe"
	"rackpool/internal/pki"
	"rackpool/internal/provision"
	"rackpool/internal/redfish"
	"rackpool/internal/redfish/composition"
	"rackpool/internal/replica"
	"rackpool/internal/store/postgres"
	"rackpool/internal/telemetry"
	"rackpool/internal/telemetry/fabricreport"
	"rackpool/internal/tenancy"
	"rackpool/internal/topology"
)

// serveCmd is `rackpool serve`: serve's configuration bound to the
// command's flags.
func serveCmd() *cobra.Command {
	var c serveConfig
	cmd := &cobra.Command{
		Use:   "serve [--addr A] [--data DIR] [--topology FILE]",
		Short: "run the control plane (Redfish API) on the emulated fabrics",
		Long: "Runs the control plane: the Redfish service on --addr over HTTPS, its state in --data (or --store\n" +
			"postgres, docs/ha.md), the fabrics of --topology.",
		Args: cli.NoArgs,
		RunE: func(*cobra.Command, []string) error { return serve(&c) },
	}
	c.flags(cmd.Flags())
	return cmd
}

// serve runs the control plane c describes until a signal stops it, its
// listener fails, or another replica takes this one's place (an error
// wrapping replica.ErrDeposed).
func serve(c *serveConfig) error {
	if err := c.validate(); err != nil {
		return err
	}
	log := c.logger()
	if c.TLSSelfSigned {
		log.Warn("--tls-self-signed is no longer needed and is ignored: HTTPS with the service's own CA (DATA/tls/ca.pem) is the default")
	}
	unlock, err := lockData(c.Data)
	if err != nil {
		return err
	}
	defer unlock()
	if st, err := os.Stat(c.Data); err == nil && st.Mode().Perm()&0o077 != 0 {
		log.Warn("the data directory is open to other users; it holds password hashes, sessions and the CA's key: chmod 700 it",
			"data", c.Data, "mode", st.Mode().Perm().String())
	}
	top := topology.LoadDefault()
	if c.Topology != "" {
		if top, err = topology.LoadFile(c.Topology); err != nil {
			return err
		}
	}
	tlsConf, certs, err := serverTLS(c.TLSCert, c.TLSKey, c.InsecureHTTP, c.Addr, c.Data, log)
	if err != nil {
		return err
	}

	ctx := context.Background()
	opened, err := openStore(ctx, c.Store, c.Data, c.Standby, c.Active, top, log)
	if err != nil {
		return err
	}
	defer opened.release()
	p, err := newPlane(ctx, c, top, opened, log)
	if err != nil {
		return err
	}
	defer p.close()
	if c.Import != "" {
		n, err := importAllocation(ctx, p.api, c.Import)
		if err != nil {
			return fmt.Errorf("--import %s: %w", c.Import, err)
		}
		log.Info("imported allocation", "file", c.Import, "compositions", n)
	}
	bg, stop := context.WithCancel(ctx)
	defer stop()
	p.start(bg)
	if certs != nil {
		go certs.Run(bg, 6*time.Hour)
	}
	ln, err := net.Listen("tcp", c.Addr)
	if err != nil {
		return err
	}
	ln = netutil.LimitListener(ln, c.MaxConnections)
	scheme := "http"
	if tlsConf != nil {
		ln, scheme = tls.NewListener(ln, tlsConf), "https"
	}
	ui, err := console.New()
	if err != nil {
		return fmt.Errorf("console: %w", err)
	}
	handler := ui.Mount(p.api)
	if p.act != nil {
		handler = replica.Forward(handler, p.act.Tag(), p.act, redfish.Forwarding{}, replica.WithSteps(stepTags{p.mgr}))
		url := c.Advertise
		if url == "" {
			host, _, _ := net.SplitHostPort(c.Addr)
			if ip := net.ParseIP(host); host == "" || ip != nil && ip.IsUnspecified() {
				return fmt.Errorf("--advertise: --addr %s is a wildcard address; say which URL the other replicas reach this one at", c.Addr)
			}
			url = scheme + "://" + ln.Addr().String()
		}
		ca, err := advertisedCA(certs, c.TLSCert == "" && tlsConf != nil, c.Data)
		if err != nil {
			return fmt.Errorf("--advertise: %w", err)
		}
		if err := p.act.Advertise(ctx, url, ca); err != nil {
			return err
		}
		p.lead(bg)
	}
	if opened.serving != nil {
		handler = replica.Gate(handler, redfish.Forwarding{}, opened.serving)
	}
	srv := &http.Server{
		Handler:           handler,
		ReadHeaderTimeout: c.HeaderTimeout,
		ReadTimeout:       max(c.BodyTimeout, c.HeaderTimeout),
		IdleTimeout:       c.IdleTimeout,
		ErrorLog:          stdlog.New(httpErrorLog(log), "", 0),
	}
	srv.RegisterOnShutdown(p.bus.Close) // ends SSE streams
	log.Info("rackpool serving", "url", scheme+"://"+ln.Addr().String()+"/redfish/v1", "console", scheme+"://"+ln.Addr().String()+console.Prefix, "topology", top.Name,
		"hosts", len(top.Hosts), "blocks", len(top.Blocks), "data", c.Data, "store", opened.desc, "fabric_time", c.FabricTime,
		"compositions", len(p.mgr.List()))

	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	// Compositions a crash left waiting on a host agent: the agents can
	// reach the service now.
	go p.mgr.Resume(bg)
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
		if err := p.tel.Checkpoint(sctx); err != nil {
			log.Warn("usage samples since the last checkpoint not saved", "err", err)
		}
	}
	return nil
}

// plane is the control plane's parts, wired to each other and the store.
type plane struct {
	log      *slog.Logger
	act      *replica.Active   // with --active
	pg       *postgres.Store   // with a postgres:// --store
	follower *replica.Follower // with --active: the others' commits
	elog     *replica.EventLog // with --active: every replica's events
	mgr      *compose.Manager
	auth     *tenancy.Service
	leases   *lease.Manager
	drives   *drive.Manager
	tel      *telemetry.Store
	prov     *provision.Loop
	bus      *events.Bus
	monitor  *events.Monitor
	api      *redfish.Server
	close    func()
	telEvery time.Duration
}

// stepTags finds, for replica.Forward, the active replica whose workflow
// waits on a host's agent: from the snapshot, caught up with the log.
type stepTags struct{ mgr *compose.Manager }

func (s stepTags) StepTag(ctx context.Context, host string) (string, error) {
	if err := s.mgr.CatchUp(ctx); err != nil {
		return "", err
	}
	tag, _ := strings.CutPrefix(s.mgr.StepOwner(host), postgres.MemberPrefix)
	return tag, nil
}

// newPlane builds the control plane's parts on the opened store, each
// loading its state. An active replica's follower reads the change log from
// before anything is loaded.
func newPlane(ctx context.Context, c *serveConfig, top *topology.Topology, opened *openedStore, log *slog.Logger) (_ *plane, err error) {
	p := &plane{log: log, act: opened.act, pg: opened.pg, telEvery: c.TelemetryCheckpoint}
	var closers []func()
	p.close = func() {
		for i := len(closers) - 1; i >= 0; i-- {
			closers[i]()
		}
	}
	defer func() {
		if err != nil {
			p.close()
		}
	}()
	st, epoch := opened.st, opened.epoch
	// A replica serving alone on PostgreSQL confirms its lead before it
	// answers "not found": another may have taken over and changed it.
	catchUp := opened.check
	driveEpoch := epoch
	if p.act != nil {
		head, err := opened.pg.Head(ctx)
		if err != nil {
			return nil, fmt.Errorf("--store: %w", err)
		}
		p.follower = replica.New(opened.pg, head, log)
		catchUp, driveEpoch = p.follower.CatchUp, p.act.LeaderEpoch
	}
	auth, generated, err := tenancy.Open(ctx, st, tenancy.Options{IdleTimeout: 30 * time.Minute, MaxSessions: c.MaxSessions, AdminPassword: os.Getenv("RACKPOOL_ADMIN_PASSWORD"), CatchUp: catchUp})
	if err != nil {
		return nil, fmt.Errorf("load accounts and sessions: %w", err)
	}
	p.auth = auth
	if generated != "" {
		fmt.Fprintf(os.Stderr, "\nGenerated Administrator password (shown once; stored only as a hash): %s\n"+
			"Use it with: export RACKPOOL_PASSWORD=%s\n\n", generated, generated)
	}
	agentHosts, err := hostagent.ParseHosts(c.HostAgents, func(h string) bool { return top.Host(h) != nil })
	if err != nil {
		return nil, fmt.Errorf("--host-agents: %w", err)
	}
	broker := hostagent.NewBroker(agentHosts)
	drivers, closeDrivers, err := fabricDrivers(ctx, top, c.fabricClock, c.Data, log)
	if err != nil {
		return nil, err
	}
	closers = append(closers, closeDrivers)
	busOpts := events.Options{Logger: log, StartID: uint64(time.Now().UnixMicro())}
	var leads func() bool // nil: this replica serves alone
	if p.act != nil {
		// Active replicas share one event stream: the store's event log.
		if p.elog, err = replica.OpenEventLog(ctx, opened.pg, p.act.Tag(), log); err != nil {
			return nil, fmt.Errorf("--store: %w", err)
		}
		closers = append(closers, p.elog.Close)
		busOpts, leads = p.elog.BusOptions(busOpts), p.act.Leads
	}
	p.bus = events.New(busOpts)
	closers = append(closers, p.bus.Close)
	obs := observe.New(metrics.NewRegistry(), p.bus)
	power, err := bmcpower.Drivers(top.Hosts, compose.ModelPower{Clock: c.fabricClock}, bmcpower.Options{TLS: api.TLSConfig, Logger: log})
	if err != nil {
		return nil, err
	}
	replicaName := ""
	if p.act != nil {
		replicaName = p.act.Member()
	}
	onChange := obs.OnChange
	if p.act != nil && (agentHosts.All || len(agentHosts.Hosts) > 0) {
		// Another replica's workflow now waits on a host's agent: hand
		// the agent, if it polls here, back at once, to be routed there.
		onChange = func(ch compose.Change) {
			obs.OnChange(ch)
			if n := ch.New; ch.Remote && n != nil && n.Step != "" && n.Owner != replicaName {
				broker.Kick(n.Host)
			}
		}
	}
	p.mgr, err = compose.New(ctx, compose.Options{Topology: top, Store: st, Drivers: drivers, Logger: log, Power: power,
		OnChange: onChange, OnFabricOp: obs.OnFabricOp, OnSchedule: obs.OnSchedule, Host: broker, HostTimeout: c.HostAgentTimeout, Epoch: epoch,
		CatchUp: catchUp, Spread: p.act != nil, Replica: replicaName})
	if err != nil {
		return nil, err
	}
	if p.follower != nil {
		p.follower.Compositions(p.mgr)
		for _, kind := range tenancy.Kinds {
			p.follower.Handle(kind, func(ctx context.Context, _ []string) {
				if err := auth.Reload(ctx); err != nil {
					log.Warn("replica: reloading accounts and sessions", "err", err)
				}
			})
		}
	}
	if p.leases, err = lease.New(ctx, lease.Options{Store: st, Topology: top, Placement: p.mgr, Logger: log}); err != nil {
		return nil, err
	}
	p.drives, err = drive.New(ctx, drive.Options{Store: st, Topology: top, Holders: p.mgr, Logger: log, LeaseTTL: c.DriveLease, Epoch: driveEpoch,
		Spares: c.SpareDrives, OnEvent: obs.OnDriveEvent,
		Elastic: drive.Elastic{Mode: c.elastic, NodeOps: c.ElasticNodeOps, Hold: c.ElasticHold, Window: c.ElasticWindow}})
	if err != nil {
		return nil, err
	}
	// Usage telemetry: samples from agents, memnodes and caches, restored
	// from the last checkpoint; the provisioning loop reads it too.
	p.tel, err = telemetry.Open(ctx, telemetry.Options{Store: st, Retention: c.TelemetryRetention, MaxSeries: c.TelemetryMaxSeries, Logger: log})
	if err != nil {
		return nil, err
	}
	p.prov, err = provision.NewLoop(ctx, provision.LoopOptions{Mode: c.provisioning, Interval: c.ProvisioningInterval, Rules: c.provisioningRules(), Store: st,
		Compose: p.mgr, Telemetry: p.tel, Quota: auth.Quota, Logger: log, OnEvent: obs.OnProvisioningEvent})
	if err != nil {
		return nil, fmt.Errorf("--provisioning: %w", err)
	}
	redfish.Version = version
	// The monitor's device telemetry, condensed into the FabricTelemetry
	// MetricReport (its history and the MetricReport SSE stream).
	fabricTel := fabricreport.New(fabricreport.Options{Interval: c.MonitorInterval, Topology: top})
	p.monitor = events.NewMonitor(p.bus, drivers, events.MonitorOptions{Interval: c.MonitorInterval, Logger: log, Stats: fabricTel.Record, Publishes: leads})
	taskPrefix, tag := "", ""
	if p.act != nil {
		tag = p.act.Tag()
		taskPrefix = tag + "-"
	}
	var gather func(r *http.Request, path string) ([][]byte, error)
	if p.act != nil {
		gather = replica.NewGatherer(p.act.Tag(), p.act).Get
	}
	p.api = redfish.New(p.mgr, auth, redfish.Options{Logger: log, Store: st, Observer: obs, AsyncThreshold: c.AsyncThreshold, Leases: p.leases, Drives: p.drives, Health: p.monitor,
		Telemetry: p.tel, Provisioning: p.prov, Broker: broker, TaskPrefix: taskPrefix, Listen: c.Addr, Gather: gather, Replica: tag, Leads: leads})
	p.api.ServeFabricTelemetry(fabricTel)
	if err := p.api.Restore(ctx); err != nil {
		return nil, err
	}
	if p.follower != nil {
		p.api.DropSubscriptions() // the leader delivers them
		p.follower.Handle(compose.PolicyKind, func(ctx context.Context, _ []string) {
			if err := p.mgr.ReloadPolicy(ctx); err != nil {
				log.Warn("replica: reloading the composition policy", "err", err)
			}
		})
	}
	obs.Watch()
	return p, nil
}

// singletons starts the loops of which one runs per database: with
// --active, the leader's alone.
func (p *plane) singletons(ctx context.Context) {
	go p.leases.Run(ctx, time.Second)
	go p.drives.Run(ctx)
	go p.tel.Run(ctx, p.telEvery)
	go p.prov.Run(ctx)
}

// start starts the background loops until ctx ends: all of them on a
// replica serving alone (with PostgreSQL, the change log's pruning too);
// an active replica's own (following the others,
// retrying its stuck compositions) until it leads (lead).
func (p *plane) start(ctx context.Context) {
	if p.act == nil {
		go p.mgr.ExpireLoop(ctx, time.Second)
		p.singletons(ctx)
		if p.pg != nil {
			go p.pg.PruneLoop(ctx, time.Minute, postgres.ChangeRetention, p.log)
		}
	} else {
		go p.follower.Run(ctx, time.Second)
		go p.elog.Run(ctx, p.bus)
		go everySecond(ctx, p.mgr.RetryStuck)
	}
	go p.monitor.Run(ctx)
}

// lead makes this active replica wait for the leader role and, while it
// holds it, take up the leader's duties.
func (p *plane) lead(ctx context.Context) {
	log := p.log
	// A leader that another replica's write to its subsystems' records
	// reaches (a deposed leader that had not yet noticed it lost the
	// lead) reloads them, so that it never answers from a view older than
	// the database.
	var leading atomic.Bool
	for _, sub := range []struct {
		kinds  []string
		reload func(context.Context) error
	}{{lease.Kinds, p.leases.Reload}, {drive.Kinds, p.drives.Reload}} {
		for _, kind := range sub.kinds {
			p.follower.Handle(kind, func(ctx context.Context, _ []string) {
				if !leading.Load() {
					return
				}
				if err := sub.reload(ctx); err != nil {
					log.Warn("replica: reloading records another replica changed", "kind", kind, "err", err)
				}
			})
		}
	}
	go p.act.RunLeader(ctx, func(lctx context.Context) error {
		leading.Store(true)
		go func() {
			<-lctx.Done()
			leading.Store(false)
		}()
		// Take up what the previous leader left: its state, and the
		// compositions a replica serving alone left unfinished.
		for _, reload := range []func(context.Context) error{p.leases.Reload, p.drives.Reload, p.tel.Reload, p.prov.Reload} {
			if err := reload(lctx); err != nil {
				return err
			}
		}
		if n, err := p.mgr.SettleOwner(lctx, ""); err != nil {
			return err
		} else if n > 0 {
			log.Info("settled compositions a replica serving alone left unfinished", "compositions", n)
		}
		if err := p.api.RestoreSubscriptions(lctx); err != nil {
			return err
		}
		go func() {
			<-lctx.Done()
			p.api.DropSubscriptions()
		}()
		p.singletons(lctx)
		go everySecond(lctx, p.mgr.Expire)
		go p.pg.PruneLoop(lctx, time.Minute, postgres.ChangeRetention, log)
		go p.act.EvictLoop(lctx, p.mgr)
		return nil
	})
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
	a, err := composition.ParseAllocation(data)
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
