package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"rackpool/internal/store"
	"rackpool/internal/store/postgres"
	"rackpool/internal/store/sqlite"
)

// openStore opens the store --store names: "" or "sqlite" for the SQLite
// database in the data directory, or a postgres:// URL. It returns the
// store, a description for logs (never a password) and a function that
// releases the store (and, for PostgreSQL, the serving lock).
func openStore(ctx context.Context, spec, data string, log *slog.Logger) (store.Store, string, func(), error) {
	switch {
	case spec == "" || spec == "sqlite":
		st, err := sqlite.Open(data)
		if err != nil {
			return nil, "", nil, err
		}
		return st, "sqlite " + st.Path(), func() { st.Close() }, nil
	case strings.HasPrefix(spec, "postgres://") || strings.HasPrefix(spec, "postgresql://"):
		st, err := postgres.Open(ctx, spec)
		if err != nil {
			return nil, "", nil, fmt.Errorf("--store: %w", err)
		}
		host, _ := os.Hostname()
		who := fmt.Sprintf("rackpool serve pid %d on %s", os.Getpid(), host)
		lock, err := st.TryLock(ctx, postgres.ServeLock, who)
		if err != nil {
			st.Close()
			if errors.Is(err, postgres.ErrLocked) {
				return nil, "", nil, fmt.Errorf("--store %s is in use by another rackpool serve (%v); this version serves one database from one replica at a time",
					postgres.Redact(spec), err)
			}
			return nil, "", nil, fmt.Errorf("--store: %w", err)
		}
		var held atomic.Pointer[postgres.SessionLock]
		held.Store(lock)
		go keepLock(st, &held, who, spec, log)
		release := func() {
			if l := held.Swap(nil); l != nil {
				l.Release()
			}
			st.Close()
		}
		return st, "postgres " + postgres.Redact(spec), release, nil
	default:
		return nil, "", nil, fmt.Errorf("--store: want sqlite or a postgres://USER:PASSWORD@HOST:PORT/DATABASE URL, got %q", redactSpec(spec))
	}
}

// keepLock takes the serving lock again when its connection fails (the
// database restarted, the network broke): the store's own calls fail
// meanwhile, and are answered as errors. If another replica took the lock
// in between, this one exits rather than write beside it.
func keepLock(st *postgres.Store, held *atomic.Pointer[postgres.SessionLock], who, spec string, log *slog.Logger) {
	for {
		l := held.Load()
		if l == nil {
			return
		}
		<-l.Lost()
		l.Release()
		log.Warn("lost the connection holding the store's serving lock; taking it again", "store", postgres.Redact(spec))
		for delay := 100 * time.Millisecond; ; delay = min(2*delay, 5*time.Second) {
			time.Sleep(delay)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			nl, err := st.TryLock(ctx, postgres.ServeLock, who)
			cancel()
			if errors.Is(err, postgres.ErrLocked) {
				log.Error("another rackpool serve took the store's serving lock; exiting", "store", postgres.Redact(spec), "err", err)
				os.Exit(3)
			}
			if err == nil {
				if !held.CompareAndSwap(l, nl) {
					nl.Release() // closed meanwhile
					return
				}
				log.Info("serving lock taken again", "store", postgres.Redact(spec))
				break
			}
		}
	}
}

// redactSpec hides anything after "://" that looks like credentials.
func redactSpec(spec string) string {
	if i := strings.Index(spec, "@"); i >= 0 {
		return "…" + spec[i:]
	}
	return spec
}
