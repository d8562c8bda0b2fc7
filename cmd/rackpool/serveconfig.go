package main

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/spf13/pflag"

	"rackpool/internal/clock"
	"rackpool/internal/compose"
	"rackpool/internal/drive"
	"rackpool/internal/events"
	"rackpool/internal/provision"
	"rackpool/internal/redfish"
	"rackpool/internal/telemetry"
	"rackpool/internal/tenancy"
)

// serve's defaults that no package names.
const (
	defaultServeAddr            = "127.0.0.1:8080"
	defaultServeData            = "./data"
	defaultFabricTime           = "real"
	defaultLogLevel             = "info"
	defaultLogFormat            = "text"
	defaultElastic              = "off"
	defaultElasticNodeOps       = 20000 // operations per second of one blocknode at full load
	defaultElasticHold          = 5 * time.Minute
	defaultElasticWindow        = time.Minute
	defaultHeaderTimeout        = 10 * time.Second
	defaultBodyTimeout          = time.Minute
	defaultIdleTimeout          = 2 * time.Minute
	defaultMaxConnections       = 1024
	defaultTelemetryCheckpoint  = time.Minute
	defaultProvisioning         = "off"
	defaultProvisioningInterval = 30 * time.Second
	defaultHostAgents           = "none"
	// minTelemetryRetention and minHostAgentTimeout bound what the flags
	// accept.
	minTelemetryRetention = time.Minute
	minHostAgentTimeout   = time.Second
)

// serveConfig is serve's configuration: one field per flag, bound by
// flags (which sets every default), checked by validate.
type serveConfig struct {
	Addr      string
	Data      string
	Store     string
	Standby   bool
	Active    bool
	Advertise string
	Topology  string
	Import    string

	FabricTime string
	LogLevel   string
	LogFormat  string

	AsyncThreshold  time.Duration
	MonitorInterval time.Duration

	DriveLease     time.Duration
	SpareDrives    int
	Elastic        string
	ElasticNodeOps float64
	ElasticHold    time.Duration
	ElasticWindow  time.Duration

	TLSCert       string
	TLSKey        string
	InsecureHTTP  bool
	TLSSelfSigned bool

	HeaderTimeout  time.Duration
	BodyTimeout    time.Duration
	IdleTimeout    time.Duration
	MaxConnections int
	MaxSessions    int

	TelemetryRetention  time.Duration
	TelemetryMaxSeries  int
	TelemetryCheckpoint time.Duration

	Provisioning         string
	ProvisioningInterval time.Duration
	ProvisioningWindow   int
	ProvisioningHorizon  int
	ProvisioningQuantile float64

	HostAgents       string
	HostAgentTimeout time.Duration

	// What validate parses.
	level        slog.Level
	fabricClock  clock.Clock
	elastic      drive.ElasticMode
	provisioning provision.Mode
}

// flags binds c's fields to serve's flags on fs, each set to its default.
func (c *serveConfig) flags(fs *pflag.FlagSet) {
	fs.StringVar(&c.Addr, "addr", defaultServeAddr, "listen address")
	fs.StringVar(&c.Data, "data", defaultServeData, "state directory (SQLite database, TLS CA, fabric state)")
	fs.StringVar(&c.Store, "store", os.Getenv("RACKPOOL_STORE"), "where the state lives: sqlite (the database in --data) or postgres://USER:PASSWORD@HOST:PORT/DATABASE (docs/ha.md); default $RACKPOOL_STORE, else sqlite")
	fs.BoolVar(&c.Standby, "standby", false, "with a postgres:// --store: wait while another replica serves the database, and take over when it stops or falls silent (docs/ha.md)")
	fs.BoolVar(&c.Active, "active", false, "with a postgres:// --store: serve beside the other --active replicas of the database, every one answering (docs/ha.md)")
	fs.StringVar(&c.Advertise, "advertise", "", "with --active: the URL the other replicas reach this one at (default: the scheme and --addr, which must then not be a wildcard address)")
	fs.StringVar(&c.Topology, "topology", "", "topology file (default: the built-in example rack)")
	fs.StringVar(&c.FabricTime, "fabric-time", defaultFabricTime, "real: emulated fabrics take their modelled reconfiguration time; instant: they answer at once (benchmarks)")
	fs.StringVar(&c.LogLevel, "log-level", defaultLogLevel, "debug, info, warn or error")
	fs.StringVar(&c.LogFormat, "log-format", defaultLogFormat, "text or json (structured logs on stderr)")
	fs.DurationVar(&c.AsyncThreshold, "async-threshold", redfish.DefaultAsyncThreshold,
		"compositions whose modelled fabric time exceeds this answer 202 with a task monitor (negative: never)")
	fs.StringVar(&c.Import, "import", "", "apply the allocation in this export file at start-up, all or nothing (see 'rackpool export')")
	fs.DurationVar(&c.DriveLease, "drive-lease", drive.DefaultLeaseTTL,
		"how long a blocknode may serve its drives after a heartbeat; a silent blocknode's drives are failed over after this plus a quarter")
	fs.IntVar(&c.SpareDrives, "spare-drives", 0, "pooled drives kept unassigned as rack-wide hot spares (P1 §5)")
	fs.StringVar(&c.Elastic, "elastic", defaultElastic, "dynamic elastic disaggregation of blocknodes (P1 §4): off, dry-run or on")
	fs.Float64Var(&c.ElasticNodeOps, "elastic-node-ops", defaultElasticNodeOps, "operations per second one blocknode serves at full load (measure with bench/drives)")
	fs.DurationVar(&c.ElasticHold, "elastic-hold", defaultElasticHold, "least time between two elastic decisions")
	fs.DurationVar(&c.ElasticWindow, "elastic-window", defaultElasticWindow, "blocknode load is averaged over this")
	fs.DurationVar(&c.MonitorInterval, "monitor-interval", events.DefaultMonitorInterval, "how often fabric health and telemetry are polled for events")
	fs.StringVar(&c.TLSCert, "tls-cert", "", "serve HTTPS with this PEM certificate chain (with --tls-key) instead of the service's own, kept in DATA/tls")
	fs.StringVar(&c.TLSKey, "tls-key", "", "PEM private key of --tls-cert")
	fs.BoolVar(&c.InsecureHTTP, "insecure-http", false, "serve plain HTTP instead of HTTPS (loopback addresses only; credentials are then refused)")
	fs.BoolVar(&c.TLSSelfSigned, "tls-self-signed", false, "no longer needed: HTTPS with the service's own CA is the default (kept so old scripts run)")
	fs.DurationVar(&c.HeaderTimeout, "header-timeout", defaultHeaderTimeout, "a client must send a request's headers within this (slow clients cannot hold connections)")
	fs.DurationVar(&c.BodyTimeout, "body-timeout", defaultBodyTimeout, "a client must send a whole request, headers and body, within this")
	fs.DurationVar(&c.IdleTimeout, "idle-timeout", defaultIdleTimeout, "an idle keep-alive connection is closed after this")
	fs.IntVar(&c.MaxConnections, "max-connections", defaultMaxConnections, "connections served at once; more wait in the kernel's accept queue until one closes")
	fs.DurationVar(&c.TelemetryRetention, "telemetry-retention", telemetry.DefaultRetention, "usage samples (rackpool agent, memnodes, caches) older than this are dropped")
	fs.IntVar(&c.TelemetryMaxSeries, "telemetry-max-series", telemetry.DefaultMaxSeries, "most usage series kept (a source has one per metric); pushes for new ones beyond it are refused")
	fs.DurationVar(&c.TelemetryCheckpoint, "telemetry-checkpoint", defaultTelemetryCheckpoint, "how often usage samples are written to the store (at most this much is lost to a crash)")
	fs.StringVar(&c.Provisioning, "provisioning", defaultProvisioning, "predictive provisioning of subscribed systems' pooled memory (P0 §8; docs/provisioning.md): off, dry-run or on")
	fs.DurationVar(&c.ProvisioningInterval, "provisioning-interval", defaultProvisioningInterval, "a step of the provisioning loop")
	fs.IntVar(&c.ProvisioningWindow, "provisioning-window", 0, "observation window in steps (default 128)")
	fs.IntVar(&c.ProvisioningHorizon, "provisioning-horizon", 0, "prediction window in steps: growth is provisioned for its forecast peak (default 2)")
	fs.Float64Var(&c.ProvisioningQuantile, "provisioning-quantile", 0, "upper quantile of the forecast peak (default 0.99)")
	fs.StringVar(&c.HostAgents, "host-agents", defaultHostAgents, "hosts whose compositions wait for their agent to rescan and confirm after an attach and to drain before a detach (docs/southbound.md): none, all, or host IDs separated by commas")
	fs.IntVar(&c.MaxSessions, "max-sessions", tenancy.DefaultMaxSessions, "live sessions one account may hold; a login beyond answers SessionLimitExceeded")
	fs.DurationVar(&c.HostAgentTimeout, "host-agent-timeout", compose.DefaultHostTimeout, "how long a host agent has to confirm a step before the composition rolls back")
}

// validate checks c and parses what its uses need parsed. The checks that
// need the topology or the store (--host-agents' host IDs, --store's
// kind) are made where those are opened.
func (c *serveConfig) validate() error {
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"--header-timeout", c.HeaderTimeout}, {"--body-timeout", c.BodyTimeout}, {"--idle-timeout", c.IdleTimeout}} {
		if d.v <= 0 {
			return fmt.Errorf("%s must be positive, not %v", d.name, d.v)
		}
	}
	if c.MaxSessions < 1 {
		return fmt.Errorf("--max-sessions must be at least 1, not %d", c.MaxSessions)
	}
	if c.MaxConnections < 1 {
		return fmt.Errorf("--max-connections must be at least 1, not %d", c.MaxConnections)
	}
	if c.TelemetryRetention < minTelemetryRetention || c.TelemetryMaxSeries < 1 || c.TelemetryCheckpoint <= 0 {
		return errors.New("--telemetry-retention must be at least 1m, --telemetry-max-series at least 1 and --telemetry-checkpoint positive")
	}
	if err := c.level.UnmarshalText([]byte(c.LogLevel)); err != nil {
		return fmt.Errorf("--log-level: %w", err)
	}
	if c.LogFormat != "text" && c.LogFormat != "json" {
		return fmt.Errorf("--log-format: want text or json, got %q", c.LogFormat)
	}
	var err error
	if c.fabricClock, err = parseFabricTime(c.FabricTime); err != nil {
		return err
	}
	if c.Active && c.Import != "" {
		return errors.New("--import applies an allocation on a replica serving alone: run it without --active first")
	}
	if c.HostAgentTimeout < minHostAgentTimeout {
		return fmt.Errorf("--host-agent-timeout must be at least 1s, not %v", c.HostAgentTimeout)
	}
	if c.elastic, err = drive.ParseElasticMode(c.Elastic); err != nil {
		return fmt.Errorf("--elastic: %w", err)
	}
	if c.provisioning, err = provision.ParseMode(c.Provisioning); err != nil {
		return fmt.Errorf("--provisioning: %w", err)
	}
	return nil
}

// logger is the logger c's --log-level and --log-format ask for (after
// validate).
func (c *serveConfig) logger() *slog.Logger {
	opts := &slog.HandlerOptions{Level: c.level}
	if c.LogFormat == "json" {
		return slog.New(slog.NewJSONHandler(os.Stderr, opts))
	}
	return slog.New(slog.NewTextHandler(os.Stderr, opts))
}

// provisioningRules are the provisioning loop's rules from the flags.
func (c *serveConfig) provisioningRules() provision.Rules {
	rules := provision.Rules{Window: c.ProvisioningWindow, Horizon: c.ProvisioningHorizon}
	if c.ProvisioningQuantile != 0 {
		rules.Forecast = provision.DefaultForecast
		rules.Forecast.Quantile = c.ProvisioningQuantile
	}
	return rules
}
