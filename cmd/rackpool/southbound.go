package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"rackpool/api"
	"rackpool/internal/clock"
	"rackpool/internal/fabric"
	"rackpool/internal/fabric/emulated"
	"rackpool/internal/fabric/netns"
	"rackpool/internal/fabric/rfdriver"
	"rackpool/internal/inventory"
	"rackpool/internal/topology"
)

// fabricDrivers returns the driver of every fabric of top, as each fabric's
// driver field says (docs/southbound.md): the emulation on clk, a Redfish
// fabric manager, or network namespaces. closeAll releases what they hold
// (sessions, namespaces). On error nothing is left open. data, the state
// directory, names the netns driver's namespaces: a restart after a crash
// replaces the ones the crashed process left (and the composition manager
// attaches again what its records hold).
func fabricDrivers(ctx context.Context, top *topology.Topology, clk clock.Clock, data string, log *slog.Logger) (map[string]fabric.Driver, func(), error) {
	drivers := map[string]fabric.Driver{}
	var closers []func()
	closeAll := func() {
		for i := len(closers) - 1; i >= 0; i-- {
			closers[i]()
		}
	}
	for _, f := range top.Fabrics {
		d, closer, err := fabricDriver(ctx, top, f, clk, data, log)
		if err != nil {
			closeAll()
			return nil, nil, err
		}
		if closer != nil {
			closers = append(closers, closer)
		}
		drivers[f.ID] = d
		log.Info("fabric driver", "fabric", f.ID, "kind", f.Kind, "driver", f.Driver)
	}
	return drivers, closeAll, nil
}

// fabricDriver returns f's driver and what closes it (nil: nothing).
func fabricDriver(ctx context.Context, top *topology.Topology, f *inventory.Fabric, clk clock.Clock, data string, log *slog.Logger) (fabric.Driver, func(), error) {
	switch f.Driver {
	case topology.DriverRedfish:
		rd, err := redfishDriver(ctx, top, f, log)
		if err != nil {
			return nil, nil, err
		}
		return rd, func() {
			cctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			_ = rd.Close(cctx)
		}, nil
	case topology.DriverNetns:
		nd, err := netns.New(top, f, netns.Options{Prefix: netnsPrefix(data, f.ID), Logger: log})
		if err != nil {
			return nil, nil, fmt.Errorf("fabric %s: %w", f.ID, err)
		}
		return nd, func() { _ = nd.Close() }, nil
	}
	d, err := emulated.New(top, f, clk)
	return d, nil, err
}

// redfishDriver logs in to f's fabric manager.
func redfishDriver(ctx context.Context, top *topology.Topology, f *inventory.Fabric, log *slog.Logger) (*rfdriver.Driver, error) {
	m := f.Manager
	password := os.Getenv(m.PasswordEnv)
	if password == "" {
		return nil, fmt.Errorf("fabric %s: the fabric manager's password variable %s is not set", f.ID, m.PasswordEnv)
	}
	tlsConf, err := api.TLSConfig(m.CAFile)
	if err != nil {
		return nil, fmt.Errorf("fabric %s: manager ca_file: %w", f.ID, err)
	}
	d, err := rfdriver.New(ctx, rfdriver.Options{Topology: top, Fabric: f.ID, URL: m.URL, ManagerFabric: m.Fabric,
		Composition: m.API == inventory.ManagerCompositionAPI, User: m.User, Password: password, TLS: tlsConf, Logger: log})
	if err != nil {
		return nil, fmt.Errorf("fabric %s: %w", f.ID, err)
	}
	return d, nil
}

// netnsPrefix names fabric's namespaces after the state directory, so two
// control planes on one machine never share them and a restarted one finds
// its own.
func netnsPrefix(data, fabric string) string {
	if abs, err := filepath.Abs(data); err == nil {
		data = abs
	}
	sum := sha256.Sum256([]byte(data + "\x00" + fabric))
	return "rp-" + hex.EncodeToString(sum[:3])
}

// parseFabricTime reads --fabric-time: "real" (fabric changes take their
// modelled time) or "instant" (they answer at once).
func parseFabricTime(v string) (clock.Clock, error) {
	switch v {
	case "real":
		return clock.Real{}, nil
	case "instant":
		return clock.Instant{}, nil
	}
	return nil, fmt.Errorf("--fabric-time: want real or instant, got %q", v)
}
