// Package bmcpower is the composition manager's power driver for the
// hosts the topology gives a BMC (docs/southbound.md, "Host BMCs"): resets
// and boot overrides go to the host's BMC through internal/bmc, and what
// the BMC answers comes back. A bmc.Client per host logs in on first use,
// so a BMC that is down does not stop serve from starting. After a reset
// the driver reads the system, on its clock, until it reports the state
// the reset leads to or the host's modelled time plus a settle time has
// passed. Drivers picks it or the model (compose.ModelPower) per host.
package bmcpower

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"sync"
	"time"

	"rackpool/internal/bmc"
	"rackpool/internal/clock"
	"rackpool/internal/compose"
	"rackpool/internal/inventory"
)

// Driver is the power driver of the hosts that have a BMC.
type Driver struct {
	clk clock.Clock
	log *slog.Logger
	// settle bounds the wait for the BMC to report the state a reset
	// leads to, beyond the host's modelled time.
	settle time.Duration

	tls func(caFile string) (*tls.Config, error)

	mu      sync.Mutex
	clients map[string]*bmc.Client
}

var _ compose.PowerDriver = (*Driver)(nil)

// DefaultSettle is how long Driver waits, beyond a host's modelled time, for
// its BMC to report the state a reset leads to.
const DefaultSettle = 15 * time.Second

// pollEvery is how often Driver reads a system while a reset runs.
const pollEvery = 250 * time.Millisecond

// Options configure New.
type Options struct {
	// TLS makes the TLS configuration that trusts the system's roots and
	// a BMC's ca_file ("": the system's alone), as api.TLSConfig does.
	TLS    func(caFile string) (*tls.Config, error)
	Settle time.Duration // default DefaultSettle
	Clock  clock.Clock   // the waits for a reset (default clock.Real)
	Logger *slog.Logger
}

// New returns a power driver for hosts with a BMC.
func New(o Options) *Driver {
	if o.Settle == 0 {
		o.Settle = DefaultSettle
	}
	if o.Clock == nil {
		o.Clock = clock.Real{}
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return &Driver{clk: o.Clock, log: o.Logger, settle: o.Settle, tls: o.TLS, clients: map[string]*bmc.Client{}}
}

// Drivers returns compose.Options.Power for hosts: a Driver for the hosts
// that have a BMC, model for the others. It checks that each BMC's
// password variable is set and its CA file readable.
func Drivers(hosts []*inventory.Host, model compose.PowerDriver, o Options) (func(*inventory.Host) compose.PowerDriver, error) {
	for _, h := range hosts {
		if h.BMC == nil {
			continue
		}
		if os.Getenv(h.BMC.PasswordEnv) == "" {
			return nil, fmt.Errorf("host %s: the BMC's password variable %s is not set", h.ID, h.BMC.PasswordEnv)
		}
		if _, err := o.TLS(h.BMC.CAFile); err != nil {
			return nil, fmt.Errorf("host %s: BMC ca_file: %w", h.ID, err)
		}
	}
	bp := New(o)
	return func(h *inventory.Host) compose.PowerDriver {
		if h.BMC == nil {
			return model
		}
		return bp
	}, nil
}

// client returns h's BMC client, logging in on first use.
func (bp *Driver) client(ctx context.Context, h *inventory.Host) (*bmc.Client, error) {
	bp.mu.Lock()
	c := bp.clients[h.ID]
	bp.mu.Unlock()
	if c != nil {
		return c, nil
	}
	tlsConf, err := bp.tls(h.BMC.CAFile)
	if err != nil {
		return nil, fmt.Errorf("%w: host %s: ca_file: %w", compose.ErrPowerHost, h.ID, err)
	}
	c, err = bmc.New(ctx, bmc.Options{URL: h.BMC.URL, System: h.BMC.System, User: h.BMC.User,
		Password: os.Getenv(h.BMC.PasswordEnv), TLS: tlsConf})
	if err != nil {
		return nil, powerError(h, err)
	}
	bp.mu.Lock()
	bp.clients[h.ID] = c
	bp.mu.Unlock()
	bp.log.Info("host BMC", "host", h.ID, "url", h.BMC.URL, "system", c.Path())
	return c, nil
}

// powerError maps a BMC's answer to the composition manager's errors: a
// request the BMC refused is the client's to fix (ErrPowerValue); the
// rest (unreachable, our account refused, a fault) is the host's
// (ErrPowerHost). The BMC's own message comes with it.
func powerError(h *inventory.Host, err error) error {
	var be *bmc.Error
	if errors.As(err, &be) && !errors.Is(err, bmc.ErrAuth) && (be.Status == 400 || be.Status == 501) {
		return fmt.Errorf("%w: the BMC of host %s: %s", compose.ErrPowerValue, h.ID, be.Message)
	}
	return fmt.Errorf("%w: host %s: %w", compose.ErrPowerHost, h.ID, err)
}

// Caps implements compose.PowerDriver: what both the BMC and the
// composition manager know.
func (bp *Driver) Caps(ctx context.Context, h *inventory.Host) (compose.PowerCaps, error) {
	c, err := bp.client(ctx, h)
	if err != nil {
		return compose.PowerCaps{}, err
	}
	st, err := c.State(ctx)
	if err != nil {
		return compose.PowerCaps{}, powerError(h, err)
	}
	caps := compose.PowerCaps{ResetTypes: compose.ModelResetTypes, BootTargets: compose.ModelBootTargets}
	if st.ResetTypes != nil {
		caps.ResetTypes = slices.DeleteFunc(slices.Clone(compose.ModelResetTypes), func(t string) bool { return !slices.Contains(st.ResetTypes, t) })
	}
	if st.BootTargets != nil {
		caps.BootTargets = append([]string{"None"}, slices.DeleteFunc(slices.Clone(st.BootTargets), func(t string) bool { return t == "None" })...)
	}
	return caps, nil
}

// power turns the BMC's state into the record's.
func power(st bmc.State) inventory.Power {
	return inventory.Power{State: st.PowerState, Boot: inventory.Boot{Enabled: st.Boot.Enabled, Target: st.Boot.Target, Mode: st.Boot.Mode, UefiTarget: st.Boot.UefiTarget, BootNext: st.Boot.BootNext}}
}

// State implements compose.PowerDriver: the BMC's word.
func (bp *Driver) State(ctx context.Context, h *inventory.Host, _ inventory.Power) (inventory.Power, error) {
	c, err := bp.client(ctx, h)
	if err != nil {
		return inventory.Power{}, err
	}
	st, err := c.State(ctx)
	if err != nil {
		return inventory.Power{}, powerError(h, err)
	}
	return power(st), nil
}

// Reset implements compose.PowerDriver: it asks the BMC, then reads the
// system until it reports the state the reset leads to (On, or Off for
// ForceOff and GracefulShutdown), for at most the host's modelled time
// plus the settle time, and returns the last state read.
func (bp *Driver) Reset(ctx context.Context, h *inventory.Host, cur inventory.Power, t string) (inventory.Power, error) {
	c, err := bp.client(ctx, h)
	if err != nil {
		return cur, err
	}
	if err := c.Reset(ctx, t); err != nil {
		return cur, powerError(h, err)
	}
	want, wait := inventory.PowerOn, h.PowerOn
	switch t {
	case compose.ResetForceOff:
		want, wait = inventory.PowerOff, 0
	case compose.ResetGracefulShutdown:
		want, wait = inventory.PowerOff, h.Shutdown
	case compose.ResetGracefulRestart:
		wait = h.Shutdown + h.PowerOn
	case compose.ResetNmi:
		want = cur.State
	}
	deadline := bp.clk.Now().Add(wait + bp.settle)
	tick := clock.NewTicker(bp.clk, pollEvery)
	defer tick.Stop()
	for {
		st, err := c.State(ctx)
		if err != nil {
			return cur, powerError(h, err)
		}
		if st.PowerState == want || bp.clk.Now().After(deadline) {
			return power(st), nil
		}
		select {
		case <-ctx.Done():
			return power(st), ctx.Err()
		case <-tick.C():
		}
	}
}

// SetBoot implements compose.PowerDriver.
func (bp *Driver) SetBoot(ctx context.Context, h *inventory.Host, cur inventory.Power, b inventory.Boot) (inventory.Power, error) {
	c, err := bp.client(ctx, h)
	if err != nil {
		return cur, err
	}
	if err := c.SetBoot(ctx, bmc.Boot{Enabled: b.Enabled, Target: b.Target, Mode: b.Mode, UefiTarget: b.UefiTarget, BootNext: b.BootNext}); err != nil {
		return cur, powerError(h, err)
	}
	st, err := c.State(ctx)
	if err != nil {
		return cur, powerError(h, err)
	}
	return power(st), nil
}
