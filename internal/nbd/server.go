package nbd

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"time"

	"rackpool/internal/netserve"
)

// Server defaults and bounds.
const (
	// DefaultMaxInFlight is the requests in flight per connection when
	// Server.MaxInFlight is 0.
	DefaultMaxInFlight = 64
	// DefaultMaxPayload is the largest READ or WRITE when
	// Server.MaxPayload is 0: 32 MiB, the size the protocol says clients
	// may count on.
	DefaultMaxPayload = 32 << 20
	// DefaultHandshakeTimeout bounds the negotiation when
	// Server.HandshakeTimeout is 0.
	DefaultHandshakeTimeout = 10 * time.Second

	minPayload = 4096    // MaxPayload is raised to at least this (the preferred block size)
	maxPayload = 1 << 30 // and lowered to at most this

	// preferredBlock is the preferred block size advertised.
	preferredBlock = 4096

	// inFlightBytes bounds the payload bytes (WRITE data read, READ data
	// to send) a connection holds at once; a single request may exceed
	// it when it is the only one in flight.
	inFlightBytes = 64 << 20
	// discardMin is the smallest oversized WRITE payload the server reads
	// and throws away to keep the connection; see doc.go.
	discardMin = 64 << 20

	readBufSize = 64 << 10
)

// Server serves exports over NBD. Set its fields before the first Serve
// or ServeConn and leave them alone after; the zero value of each
// optional field means its default. A Server is safe for concurrent use.
type Server struct {
	// Exports is the set of exports offered; required.
	Exports Exports
	// Logger receives connection events and export errors; nil discards.
	Logger *slog.Logger
	// LogName is how an export name appears in logs and in the errors
	// that reach them; nil shows names as they are. A server whose names
	// carry secrets (capability tokens) redacts them here.
	LogName func(name string) string
	// MaxInFlight bounds the requests a connection has in flight (default
	// DefaultMaxInFlight); when it is reached the server stops reading
	// from that connection until a reply has gone out.
	MaxInFlight int
	// MaxPayload is the largest READ or WRITE length (default
	// DefaultMaxPayload, raised to 4096 and lowered to 1 GiB); it is
	// advertised as the maximum block size. Longer requests fail with
	// NBD_EOVERFLOW.
	MaxPayload uint32
	// HandshakeTimeout bounds the whole negotiation phase (default
	// DefaultHandshakeTimeout); a client that has not reached the
	// transmission phase by then is dropped.
	HandshakeTimeout time.Duration
	// TLSConfig, when set, makes the server require TLS (the protocol's
	// FORCEDTLS mode): before NBD_OPT_STARTTLS every option but ABORT is
	// answered NBD_REP_ERR_TLS_REQD, and NBD_OPT_EXPORT_NAME drops the
	// client. Set ClientAuth in it to ask clients for certificates. nil
	// serves plain text and answers STARTTLS NBD_REP_ERR_UNSUP.
	TLSConfig *tls.Config

	// net holds the listeners and the connections being served.
	net netserve.Server[struct{}]
}

// settings are a server's fields with defaults and bounds applied.
type settings struct {
	log              *slog.Logger
	logName          func(string) string
	maxInFlight      int
	maxPayload       uint32
	handshakeTimeout time.Duration
	tls              *tls.Config
}

func (s *Server) settings() settings {
	st := settings{
		log:              s.Logger,
		logName:          s.LogName,
		maxInFlight:      s.MaxInFlight,
		maxPayload:       s.MaxPayload,
		handshakeTimeout: s.HandshakeTimeout,
	}
	if st.log == nil {
		st.log = slog.New(slog.DiscardHandler)
	}
	if st.logName == nil {
		st.logName = func(name string) string { return name }
	}
	if st.maxInFlight <= 0 {
		st.maxInFlight = DefaultMaxInFlight
	}
	if st.maxPayload == 0 {
		st.maxPayload = DefaultMaxPayload
	}
	st.maxPayload = min(max(st.maxPayload, minPayload), maxPayload)
	if st.handshakeTimeout <= 0 {
		st.handshakeTimeout = DefaultHandshakeTimeout
	}
	if s.TLSConfig != nil {
		// Records start full: dynamic sizing helps the first bytes of a
		// web page, not a block device.
		st.tls = s.TLSConfig.Clone()
		st.tls.DynamicRecordSizingDisabled = true
	}
	return st
}

// Serve accepts connections on l and serves each on its own goroutine
// until Close, then returns nil; it returns an error if l fails for
// another reason. Serve may be called on several listeners.
func (s *Server) Serve(l net.Listener) error {
	if s.Exports == nil {
		return errors.New("nbd: server has no Exports")
	}
	st := s.settings()
	serve := func(ctx context.Context, c *netserve.Conn[struct{}]) { s.serveConn(ctx, c.NC, st) }
	if err := s.net.Serve(l, netserve.Handler[struct{}]{Serve: serve, Logger: st.log}); err != nil {
		return fmt.Errorf("nbd: accept: %w", err)
	}
	return nil
}

// ServeConn serves one connection and returns when it is done; it closes
// nc. Cancelling ctx, or Close, ends the connection.
func (s *Server) ServeConn(ctx context.Context, nc net.Conn) {
	if s.Exports == nil {
		nc.Close()
		return
	}
	st := s.settings()
	s.net.ServeConn(ctx, nc, struct{}{}, func(ctx context.Context, c *netserve.Conn[struct{}]) { s.serveConn(ctx, c.NC, st) })
}

// Close stops every Serve, closes every connection (cancelling the
// contexts its exports' methods got), and waits until every connection's
// requests have finished and its export is closed. It is idempotent.
func (s *Server) Close() error {
	s.net.Close()
	return nil
}

// serveConn runs the negotiation and then the transmission phase of one
// connection, and closes it.
func (s *Server) serveConn(ctx context.Context, nc net.Conn, st settings) {
	defer nc.Close()
	log := st.log.With("remote", remoteAddr(nc))
	stop := context.AfterFunc(ctx, func() { nc.Close() })
	defer stop()

	br := newReader(nc, readBufSize)
	h := &handshake{
		exports: s.Exports,
		st:      st,
		log:     log,
		nc:      nc,
		br:      br,
	}
	neg, err := h.run(ctx)
	if h.nc != nc {
		defer h.nc.Close() // TLS: close_notify first, then nc
	}
	if err != nil {
		if !errors.Is(err, errAbort) && ctx.Err() == nil {
			log.Info("nbd negotiation failed", "err", err)
		}
		return
	}
	log.Debug("nbd transmission started", "export", st.logName(neg.name), "size", neg.export.Size(),
		"structured", neg.structured, "block_status", neg.blockStatus)
	c := newConn(ctx, h.nc, h.br, neg, st, log)
	c.serve()
}

func remoteAddr(nc net.Conn) string {
	a := nc.RemoteAddr()
	switch {
	case a == nil:
		return "local"
	case a.String() == "" || a.String() == "@":
		return a.Network() // an unnamed unix socket peer
	}
	return a.String()
}
