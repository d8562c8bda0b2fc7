package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"sync"
	"time"

	"rackpool/api"
	"rackpool/internal/bmc"
	"rackpool/internal/clock"
	"rackpool/internal/compose"
	"rackpool/internal/inventory"
	"rackpool/internal/topology"
)

// bmcPower is the power driver of the hosts that have a BMC
// (docs/southbound.md, "Host BMCs"): resets and boot overrides go to the
// BMC, and what it answers comes back. Each host's client logs in on first
// use, so a BMC that is down does not stop serve from starting.
type bmcPower struct {
	log *slog.Logger
	// settle bounds the wait for the BMC to report the state a reset
	// leads to, beyond the host's modelled time.
	settle time.Duration

	mu      sync.Mutex
	clients map[string]*bmc.Client
}

// powerDrivers returns compose.Options.Power for top: the BMC driver for
// hosts that have one, the model on clk (--fabric-time) for the others.
// It checks that each BMC's password variable is set and its CA file
// readable.
func powerDrivers(top *topology.Topology, clk clock.Clock, log *slog.Logger) (func(*inventory.Host) compose.PowerDriver, error) {
	model := compose.ModelPower{Clock: clk}
	for _, h := range top.Hosts {
		if h.BMC == nil {
			continue
		}
		if os.Getenv(h.BMC.PasswordEnv) == "" {
			return nil, fmt.Errorf("host %s: the BMC's password variable %s is not set", h.ID, h.BMC.PasswordEnv)
		}
		if _, err := api.TLSConfig(h.BMC.CAFile); err != nil {
			return nil, fmt.Errorf("host %s: BMC ca_file: %w", h.ID, err)
		}
	}
	bp := &bmcPower{log: log, settle: 15 * time.Second, clients: map[string]*bmc.Client{}}
	return func(h *inventory.Host) compose.PowerDriver {
		if h.BMC == nil {
			return model
		}
		return bp
	}, nil
}

// client returns h's BMC client, logging in on first use.
func (bp *bmcPower) client(ctx context.Context, h *inventory.Host) (*bmc.Client, error) {
	bp.mu.Lock()
	c := bp.clients[h.ID]
	bp.mu.Unlock()
	if c != nil {
		return c, nil
	}
	tlsConf, err := api.TLSConfig(h.BMC.CAFile)
	if err != nil {
		return nil, fmt.Errorf("%w: host %s: ca_file: %w", compose.ErrPowerHost, h.ID, err)
	}
	c, err = bmc.New(ctx, bmc.Options{URL: h.BMC.URL, System: h.BMC.System, User: h.BMC.User,
		Password: os.Getenv(h.BMC.PasswordEnv), TLS: tlsConf})
	if err != nil {
		return nil, bmcError(h, err)
	}
	bp.mu.Lock()
	bp.clients[h.ID] = c
	bp.mu.Unlock()
	bp.log.Info("host BMC", "host", h.ID, "url", h.BMC.URL, "system", c.Path())
	return c, nil
}

// bmcError maps a BMC's answer to the composition manager's errors: a
// request the BMC refused is the client's to fix (ErrPowerValue); the
// rest (unreachable, our account refused, a fault) is the host's
// (ErrPowerHost). The BMC's own message comes with it.
func bmcError(h *inventory.Host, err error) error {
	var be *bmc.Error
	if errors.As(err, &be) && !errors.Is(err, bmc.ErrAuth) && (be.Status == 400 || be.Status == 501) {
		return fmt.Errorf("%w: the BMC of host %s: %s", compose.ErrPowerValue, h.ID, be.Message)
	}
	return fmt.Errorf("%w: host %s: %w", compose.ErrPowerHost, h.ID, err)
}

// Caps implements compose.PowerDriver: what both the BMC and the
// composition manager know.
func (bp *bmcPower) Caps(ctx context.Context, h *inventory.Host) (compose.PowerCaps, error) {
	c, err := bp.client(ctx, h)
	if err != nil {
		return compose.PowerCaps{}, err
	}
	st, err := c.State(ctx)
	if err != nil {
		return compose.PowerCaps{}, bmcError(h, err)
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
	return inventory.Power{State: st.PowerState, Boot: inventory.Boot{Enabled: st.Boot.Enabled, Target: st.Boot.Target, Mode: st.Boot.Mode, UefiTarget: st.Boot.UefiTarget}}
}

// State implements compose.PowerDriver: the BMC's word.
func (bp *bmcPower) State(ctx context.Context, h *inventory.Host, _ inventory.Power) (inventory.Power, error) {
	c, err := bp.client(ctx, h)
	if err != nil {
		return inventory.Power{}, err
	}
	st, err := c.State(ctx)
	if err != nil {
		return inventory.Power{}, bmcError(h, err)
	}
	return power(st), nil
}

// Reset implements compose.PowerDriver: it asks the BMC, then reads the
// system until it reports the state the reset leads to (On, or Off for
// ForceOff and GracefulShutdown), for at most the host's modelled time
// plus bp.settle, and returns the last state read.
func (bp *bmcPower) Reset(ctx context.Context, h *inventory.Host, cur inventory.Power, t string) (inventory.Power, error) {
	c, err := bp.client(ctx, h)
	if err != nil {
		return cur, err
	}
	if err := c.Reset(ctx, t); err != nil {
		return cur, bmcError(h, err)
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
	deadline := time.Now().Add(wait + bp.settle)
	for {
		st, err := c.State(ctx)
		if err != nil {
			return cur, bmcError(h, err)
		}
		if st.PowerState == want || time.Now().After(deadline) {
			return power(st), nil
		}
		select {
		case <-ctx.Done():
			return power(st), ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// SetBoot implements compose.PowerDriver.
func (bp *bmcPower) SetBoot(ctx context.Context, h *inventory.Host, cur inventory.Power, b inventory.Boot) (inventory.Power, error) {
	c, err := bp.client(ctx, h)
	if err != nil {
		return cur, err
	}
	if err := c.SetBoot(ctx, bmc.Boot{Enabled: b.Enabled, Target: b.Target, Mode: b.Mode, UefiTarget: b.UefiTarget}); err != nil {
		return cur, bmcError(h, err)
	}
	st, err := c.State(ctx)
	if err != nil {
		return cur, bmcError(h, err)
	}
	return power(st), nil
}
