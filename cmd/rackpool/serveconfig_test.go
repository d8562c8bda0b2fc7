package main

import (
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"

	"rackpool/cmd/rackpool/internal/cli"
	"rackpool/internal/clock"
	"rackpool/internal/drive"
	"rackpool/internal/provision"
	"rackpool/internal/tenancy"
)

// parseServe parses args as serve's flags.
func parseServe(t *testing.T, args ...string) (*serveConfig, error) {
	t.Helper()
	var c serveConfig
	fs := pflag.NewFlagSet("serve", pflag.ContinueOnError)
	fs.SetOutput(io.Discard)
	c.flags(fs)
	return &c, fs.Parse(args)
}

// TestServeConfigDefaults: no flags is the named defaults, and they are
// valid.
func TestServeConfigDefaults(t *testing.T) {
	t.Setenv("RACKPOOL_STORE", "postgres://u@h/db")
	c, err := parseServe(t)
	if err != nil {
		t.Fatal(err)
	}
	if c.Addr != defaultServeAddr || c.Data != defaultServeData || c.Store != "postgres://u@h/db" || c.HostAgents != defaultHostAgents ||
		c.MaxConnections != defaultMaxConnections || c.MaxSessions != tenancy.DefaultMaxSessions || c.DriveLease != drive.DefaultLeaseTTL ||
		c.HeaderTimeout != defaultHeaderTimeout || c.ElasticHold != defaultElasticHold || c.ProvisioningInterval != defaultProvisioningInterval {
		t.Errorf("defaults %+v", c)
	}
	if err := c.validate(); err != nil {
		t.Fatalf("the defaults are invalid: %v", err)
	}
	if _, ok := c.fabricClock.(clock.Real); !ok || c.elastic != drive.ElasticOff || c.provisioning != provision.ModeOff {
		t.Errorf("parsed: clock %T, elastic %q, provisioning %q", c.fabricClock, c.elastic, c.provisioning)
	}
	if r := c.provisioningRules(); r.Forecast.Quantile != 0 {
		t.Errorf("rules %+v without --provisioning-quantile", r)
	}
}

// TestServeConfigValidate: each flag's rule, with the error naming the
// flag.
func TestServeConfigValidate(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string // "" for valid
	}{
		{[]string{"--addr", "0.0.0.0:9", "--fabric-time", "instant", "--log-format", "json", "--log-level", "debug"}, ""},
		{[]string{"--elastic", "dry-run", "--provisioning", "on", "--provisioning-quantile", "0.9"}, ""},
		{[]string{"--header-timeout", "0s"}, "--header-timeout must be positive"},
		{[]string{"--body-timeout", "-1s"}, "--body-timeout must be positive"},
		{[]string{"--idle-timeout", "0s"}, "--idle-timeout must be positive"},
		{[]string{"--max-sessions", "0"}, "--max-sessions must be at least 1"},
		{[]string{"--max-connections", "0"}, "--max-connections must be at least 1"},
		{[]string{"--telemetry-retention", "59s"}, "--telemetry-retention must be at least 1m"},
		{[]string{"--telemetry-checkpoint", "0s"}, "--telemetry-checkpoint positive"},
		{[]string{"--log-level", "loud"}, "--log-level"},
		{[]string{"--log-format", "xml"}, "--log-format: want text or json"},
		{[]string{"--fabric-time", "fast"}, "--fabric-time: want real or instant"},
		{[]string{"--active", "--import", "x.json"}, "--import applies an allocation on a replica serving alone"},
		{[]string{"--active", "--host-agents", "all"}, ""},
		{[]string{"--host-agent-timeout", "500ms"}, "--host-agent-timeout must be at least 1s"},
		{[]string{"--elastic", "maybe"}, "--elastic"},
		{[]string{"--provisioning", "maybe"}, "--provisioning"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			c, err := parseServe(t, tc.args...)
			if err != nil {
				t.Fatal(err)
			}
			err = c.validate()
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("refused: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("got %v, want an error saying %q", err, tc.want)
			}
		})
	}
	c, _ := parseServe(t, "--provisioning-quantile", "0.9", "--provisioning-window", "64")
	if r := c.provisioningRules(); r.Forecast.Quantile != 0.9 || r.Window != 64 {
		t.Errorf("rules %+v", r)
	}
}

// TestServeCommand: serve's flags are long flags with two dashes; a
// command line that does not parse is a usage error (exit status 2),
// --help is not an error, and nothing is served on a flag error.
func TestServeCommand(t *testing.T) {
	for _, tc := range []struct {
		args  []string
		want  string
		usage bool
	}{
		{[]string{"-addr", "127.0.0.1:9"}, "unknown shorthand flag", true},
		{[]string{"--addr"}, "flag needs an argument", true},
		{[]string{"--drive-lease", "soon"}, "invalid argument", true},
		{[]string{"extra"}, `unexpected argument "extra"`, true},
		{[]string{"--header-timeout", "0s", "--data", t.TempDir()}, "--header-timeout must be positive", false},
	} {
		err := execute(append([]string{"serve"}, tc.args...)...)
		var ue cli.UsageError
		if err == nil || !strings.Contains(err.Error(), tc.want) || errors.As(err, &ue) != tc.usage {
			t.Errorf("serve %v: %v, want an error saying %q (usage error %v)", tc.args, err, tc.want, tc.usage)
		}
	}
	if err := execute("serve", "--help"); err != nil {
		t.Errorf("serve --help: %v", err)
	}
	// The parsed durations are the flags'.
	c, err := parseServe(t, "--elastic-window=90s", "--async-threshold", "-1s")
	if err != nil || c.ElasticWindow != 90*time.Second || c.AsyncThreshold != -time.Second {
		t.Errorf("%v: window %v, threshold %v", err, c.ElasticWindow, c.AsyncThreshold)
	}
}
