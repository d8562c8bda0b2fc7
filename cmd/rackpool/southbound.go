package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
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
// (sessions, namespaces). On error nothing is left open.
func fabricDrivers(ctx context.Context, top *topology.Topology, clk clock.Clock, log *slog.Logger) (drivers map[string]fabric.Driver, closeAll func(), err error) {
	drivers = map[string]fabric.Driver{}
	var closers []func()
	closeAll = func() {
		for i := len(closers) - 1; i >= 0; i-- {
			closers[i]()
		}
	}
	defer func() {
		if err != nil {
			closeAll()
		}
	}()
	for _, f := range top.Fabrics {
		var d fabric.Driver
		switch f.Driver {
		case topology.DriverRedfish:
			rd, err := redfishDriver(ctx, top, f, log)
			if err != nil {
				return nil, nil, err
			}
			closers = append(closers, func() {
				cctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				defer cancel()
				_ = rd.Close(cctx)
			})
			d = rd
		case topology.DriverNetns:
			nd, err := netns.New(top, f, netns.Options{Logger: log})
			if err != nil {
				return nil, nil, fmt.Errorf("fabric %s: %w", f.ID, err)
			}
			closers = append(closers, func() { _ = nd.Close() })
			d = nd
		default:
			if d, err = emulated.New(top, f, clk); err != nil {
				return nil, nil, err
			}
		}
		drivers[f.ID] = d
		log.Info("fabric driver", "fabric", f.ID, "kind", f.Kind, "driver", f.Driver)
	}
	return drivers, closeAll, nil
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
		User: m.User, Password: password, TLS: tlsConf, Logger: log})
	if err != nil {
		return nil, fmt.Errorf("fabric %s: %w", f.ID, err)
	}
	return d, nil
}
