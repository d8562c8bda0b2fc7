// Package netserve is what the data-plane servers (rackpool cache,
// memnode and the NBD server) share apart from their protocols: the accept
// loop and the tracking of listeners and connections that lets Close end
// them all.
//
// Loop is the accept loop. Accept failures that a wait can cure — the
// process or the system out of file descriptors (EMFILE, ENFILE), a
// connection aborted before it was accepted, out of buffer space — are
// retried with a backoff from 5 ms doubling to 1 s, logged once per
// failure; the loop ends when its server closes the listener.
//
// Server runs Loop on each of its listeners and serves every connection
// on a goroutine of its own, keeping the connection's protocol state with
// it; Close closes the listeners, cancels and closes the connections and
// waits for their goroutines.
package netserve

import (
	"errors"
	"log/slog"
	"net"
	"time"
)

// Backoff bounds between retries of a failed accept.
const (
	MinBackoff = 5 * time.Millisecond
	MaxBackoff = time.Second
)

// Loop describes one accept loop.
type Loop struct {
	// Closed reports whether the server was closed: an accept error then
	// ends the loop quietly.
	Closed func() bool
	// Handle takes each accepted connection. It must not block the loop
	// for long: serve the connection on a goroutine of its own.
	Handle func(net.Conn)
	// Logger receives the retried failures (default: discard).
	Logger *slog.Logger
	// Sleep waits between retries (default time.Sleep; tests inject it).
	Sleep func(time.Duration)
}

// Serve accepts on l until the server is closed (it returns nil) or l
// fails for good: closed under a server that is not (net.ErrClosed), which
// it returns wrapped.
func (lp Loop) Serve(l net.Listener) error {
	log := lp.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	sleep := lp.Sleep
	if sleep == nil {
		sleep = time.Sleep
	}
	var backoff time.Duration
	for {
		nc, err := l.Accept()
		if err != nil {
			if lp.Closed != nil && lp.Closed() {
				return nil
			}
			if errors.Is(err, net.ErrClosed) {
				return err
			}
			backoff = min(max(2*backoff, MinBackoff), MaxBackoff)
			log.Warn("accept failed; retrying", "addr", l.Addr().String(), "err", err, "after", backoff)
			sleep(backoff)
			continue
		}
		backoff = 0
		lp.Handle(nc)
	}
}
