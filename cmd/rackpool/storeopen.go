package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"

	"rackpool/internal/fabric"
	"rackpool/internal/replica"
	"rackpool/internal/store"
	"rackpool/internal/store/postgres"
	"rackpool/internal/store/sqlite"
	"rackpool/internal/topology"
)

// openStore opens the store --store names: "" or "sqlite" for the SQLite
// database in the data directory, or a postgres:// URL. It returns the
// store, a description for logs (never a password) and a function that
// releases the store (and, for PostgreSQL, the lead), and for PostgreSQL
// the leadership epoch every fabric change carries. With PostgreSQL one
// replica serves a database at a time; standby waits for it to stop (or
// to fall silent for a lease) and then takes over.
func openStore(ctx context.Context, spec, data string, standby, act bool, top *topology.Topology, log *slog.Logger) (*openedStore, error) {
	switch {
	case spec == "" || spec == "sqlite":
		if standby || act {
			return nil, errors.New("--standby and --active need a postgres:// --store: an SQLite database is served by one process on its own machine")
		}
		st, err := sqlite.Open(data)
		if err != nil {
			return nil, err
		}
		return &openedStore{st: st, desc: "sqlite " + st.Path(), release: func() { st.Close() }}, nil
	case strings.HasPrefix(spec, "postgres://") || strings.HasPrefix(spec, "postgresql://"):
		if standby && act {
			return nil, errors.New("--standby and --active exclude each other: active replicas all serve, a standby waits for a replica serving alone")
		}
		st, err := postgres.Open(ctx, spec)
		if err != nil {
			return nil, fmt.Errorf("--store: %w", err)
		}
		if act {
			a, err := openActive(ctx, st, spec, top, log)
			if err != nil {
				st.Close()
				return nil, err
			}
			release := func() {
				a.Release()
				st.Close()
			}
			return &openedStore{st: st, pg: st, desc: "postgres " + postgres.Redact(spec) + " (active replica " + a.Tag() + ")", release: release, epoch: a.Epoch, act: a,
				serving: a.Serving, deposed: a.Deposed()}, nil
		}
		held, err := replica.LeadAlone(ctx, st, replica.AloneOptions{Name: top.Name, Digest: topology.Digest(top), Standby: standby,
			Store: postgres.Redact(spec), Logger: log})
		if err != nil {
			st.Close()
			return nil, leadError(spec, err, "--store %s is in use by another rackpool serve (%v); start this one with --standby to take over when it stops, or run every replica with --active")
		}
		release := func() {
			held.Release()
			st.Close()
		}
		epoch := func() fabric.Epoch {
			if n := held.Epoch(); n != 0 {
				return fabric.Epoch{N: n}
			}
			return fabric.Epoch{}
		}
		return &openedStore{st: st, pg: st, desc: "postgres " + postgres.Redact(spec), release: release, epoch: epoch,
			serving: held.Holding, check: held.Check, deposed: held.Deposed()}, nil
	default:
		return nil, fmt.Errorf("--store: want sqlite or a postgres://USER:PASSWORD@HOST:PORT/DATABASE URL, got %q", redactSpec(spec))
	}
}

// openedStore is the store serve runs on.
type openedStore struct {
	st      store.Store
	pg      *postgres.Store // nil for SQLite
	desc    string          // for logs: never a password
	release func()
	// epoch is the epoch every composition's fabric change carries (nil
	// for SQLite).
	epoch func() fabric.Epoch
	act   *replica.Active // an active replica's membership (--active)
	// serving reports whether this replica holds the database (its lead
	// or membership, not lost); nil for SQLite.
	serving func() bool
	// check confirms that this replica serving alone still holds the
	// lead (it pings the session that holds it): before it answers that
	// something does not exist. Nil for SQLite and active replicas.
	check func(ctx context.Context) error
	// deposed delivers an error wrapping replica.ErrDeposed once another
	// process took this replica's role (nil for SQLite): its state is
	// stale, and serve exits with status 3.
	deposed <-chan error
}

// openActive joins the database as an active replica (replica.Join).
func openActive(ctx context.Context, st *postgres.Store, spec string, top *topology.Topology, log *slog.Logger) (*replica.Active, error) {
	for _, f := range top.Fabrics {
		if f.Driver != topology.DriverRedfish {
			return nil, fmt.Errorf("--active: fabric %s is driven by %q, inside this process; replicas that all compose need the fabrics they share: drive every fabric with the redfish driver (a fabric manager, or rackpool fabric-emulator)",
				f.ID, f.Driver)
		}
	}
	a, err := replica.Join(ctx, st, replica.JoinOptions{Name: top.Name, Digest: topology.Digest(top), Store: postgres.Redact(spec), Logger: log})
	if err != nil {
		return nil, leadError(spec, err, "--store %s is served by a replica serving alone (%v); stop it, or start this one without --active")
	}
	return a, nil
}

// leadError names the flag an error of taking the database's lead or a
// membership is about; locked formats the one of a database another
// replica serves (with --store, redacted, and the error).
func leadError(spec string, err error, locked string) error {
	var mismatch *store.TopologyMismatch
	switch {
	case errors.Is(err, postgres.ErrLocked):
		return fmt.Errorf(locked, postgres.Redact(spec), err)
	case errors.As(err, &mismatch):
		return fmt.Errorf("--topology: %w", err)
	}
	return fmt.Errorf("--store: %w", err)
}

// redactSpec hides anything after "://" that looks like credentials.
func redactSpec(spec string) string {
	if i := strings.Index(spec, "@"); i >= 0 {
		return "…" + spec[i:]
	}
	return spec
}
