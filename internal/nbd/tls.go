package nbd

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"time"
)

// TLS: the server's FORCEDTLS mode, the client's upgrade with
// NBD_OPT_STARTTLS, and the connection both sides then speak through. See
// doc.go, "TLS".

const (
	// closeNotifyWait bounds how long closing a TLS connection waits to
	// send its close_notify alert: a peer that stopped reading (a full
	// socket buffer) gets the connection closed without it, so that a
	// hung peer costs no more than a dead one.
	closeNotifyWait = 100 * time.Millisecond
	// tlsChunk is how much of a vector of buffers is gathered into one
	// TLS write: four full records, one system call each.
	tlsChunk = 64 << 10
)

// errTLSHandshake wraps a failed TLS handshake on the server (logged as
// the reason the negotiation failed).
var errTLSHandshake = errors.New("nbd: TLS handshake")

// tlsConn is a TLS connection over raw. Its Close sends close_notify only
// as long as the peer reads (see closeNotifyWait), and writeBuffers gathers
// small pieces into full records.
type tlsConn struct {
	*tls.Conn
	raw     net.Conn
	scratch []byte // writeBuffers' gathering buffer; only the writer touches it
}

// Close sends close_notify, unless the peer has not read it within
// closeNotifyWait, and closes the connection. A Close while a Write is
// blocked closes at once (crypto/tls sends no alert then).
func (c *tlsConn) Close() error {
	t := time.AfterFunc(closeNotifyWait, func() { c.raw.Close() })
	err := c.Conn.Close()
	t.Stop()
	return err
}

// writeBuffers writes v to the TLS stream as net.Buffers.WriteTo would,
// consuming v. crypto/tls has no writev: each Write is at least one
// record and one system call, so the reply headers and small payloads of
// a batch are gathered into writes of up to tlsChunk bytes; a piece that
// starts a write and fills tlsChunk on its own goes out as it is.
func (c *tlsConn) writeBuffers(v *net.Buffers) (int64, error) {
	var n int64
	for len(*v) > 0 {
		var buf []byte
		if b := (*v)[0]; len(b) >= tlsChunk {
			buf = b
			*v = (*v)[1:]
		} else {
			if c.scratch == nil {
				c.scratch = make([]byte, 0, tlsChunk)
			}
			buf = c.scratch[:0]
			for len(*v) > 0 && len(buf) < tlsChunk {
				b := (*v)[0]
				k := min(len(b), tlsChunk-len(buf))
				buf = append(buf, b[:k]...)
				if k == len(b) {
					*v = (*v)[1:]
				} else {
					(*v)[0] = b[k:]
				}
			}
		}
		m, err := c.Conn.Write(buf)
		n += int64(m)
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

// writeBuffers writes v to nc, consuming it: one writev on a socket,
// gathered records on TLS.
func writeBuffers(nc net.Conn, v *net.Buffers) (int64, error) {
	if tc, ok := nc.(*tlsConn); ok {
		return tc.writeBuffers(v)
	}
	return v.WriteTo(nc)
}

// tlsRequired reports whether the server must refuse opt with
// NBD_REP_ERR_TLS_REQD: it requires TLS, TLS has not started, and opt is
// neither STARTTLS nor ABORT (FORCEDTLS mode).
func (h *handshake) tlsRequired(opt uint32) bool {
	return h.st.tls != nil && !h.secured && opt != optStartTLS && opt != optAbort
}

// refuseBeforeTLS answers an option that FORCEDTLS mode refuses; an
// NBD_OPT_EXPORT_NAME, which has no error reply, ends the session.
func (h *handshake) refuseBeforeTLS(opt uint32) error {
	if opt == optExportName {
		return errors.New("nbd: NBD_OPT_EXPORT_NAME before TLS on a server that requires it")
	}
	h.reply(opt, repErrTLSReqd, "TLS is required: negotiate NBD_OPT_STARTTLS first (an nbds:// URI)")
	return nil
}

// startTLS handles NBD_OPT_STARTTLS. With TLS configured and not yet
// started it answers ACK and runs the TLS handshake; from then on the
// negotiation goes on over TLS, with the state of the options before it
// forgotten, as the protocol asks. A failed handshake ends the session.
func (h *handshake) startTLS(ctx context.Context, d []byte) error {
	switch {
	case len(d) != 0:
		h.reply(optStartTLS, repErrInvalid, "NBD_OPT_STARTTLS takes no data")
		return nil
	case h.st.tls == nil:
		h.reply(optStartTLS, repErrUnsup, "TLS is not configured on this server")
		return nil
	case h.secured:
		h.reply(optStartTLS, repErrInvalid, "TLS is already in use")
		return nil
	case h.br.Buffered() != 0:
		// Bytes sent after STARTTLS before the reply came are plain text
		// that would be taken for what follows the upgrade: drop the
		// client rather than serve them.
		return errors.New("nbd: client sent data after NBD_OPT_STARTTLS before the TLS handshake")
	}
	h.reply(optStartTLS, repAck, "")
	if err := h.flush(); err != nil {
		return err
	}
	tc := tls.Server(h.nc, h.st.tls)
	if err := tc.HandshakeContext(ctx); err != nil {
		return fmt.Errorf("%w: %w", errTLSHandshake, err)
	}
	h.nc = &tlsConn{Conn: tc, raw: h.nc}
	h.br.rd = h.nc
	h.secured = true
	h.structured, h.metaExport, h.metaAlloc = false, "", false
	return nil
}

// Dialer opens clients. The zero value connects in plain text, as Dial
// and NewClient do.
type Dialer struct {
	// TLSConfig, when set, makes every connection use TLS, as an nbds://
	// URI asks: NBD_OPT_STARTTLS is the first option, and a server that
	// does not take it fails the connection with ErrTLSNotOffered; there
	// is no fallback to plain text. Without a ServerName, the host of the
	// address dialled is verified ("localhost" on a unix socket). The
	// configuration is not modified.
	TLSConfig *tls.Config
}

// Dial connects to the NBD server at addr ("tcp" or "unix" network) and
// opens export; see NewClient.
func (d *Dialer) Dial(ctx context.Context, network, addr, export string) (*Client, error) {
	var nd net.Dialer
	nc, err := nd.DialContext(ctx, network, addr)
	if err != nil {
		return nil, fmt.Errorf("nbd: dial %s: %w", addr, err)
	}
	c, err := newClient(ctx, nc, export, d.tlsConfig(network, addr))
	if err != nil {
		nc.Close()
		return nil, err
	}
	return c, nil
}

// NewClient negotiates export over nc, as the package's NewClient does,
// with TLS when the Dialer has a TLSConfig (the server name, if the
// configuration has none, is nc's remote address).
func (d *Dialer) NewClient(ctx context.Context, nc net.Conn, export string) (*Client, error) {
	network, addr := "unix", ""
	if a := nc.RemoteAddr(); a != nil && a.Network() != "unix" {
		network, addr = a.Network(), a.String()
	}
	return newClient(ctx, nc, export, d.tlsConfig(network, addr))
}

// List returns the exports the server at addr lists (NBD_OPT_LIST).
func (d *Dialer) List(ctx context.Context, network, addr string) ([]ExportInfo, error) {
	var nd net.Dialer
	nc, err := nd.DialContext(ctx, network, addr)
	if err != nil {
		return nil, fmt.Errorf("nbd: dial %s: %w", addr, err)
	}
	defer nc.Close()
	stop := bindDeadline(ctx, nc)
	infos, err := listExports(nc, d.tlsConfig(network, addr))
	if !stop() || err != nil {
		return nil, fmt.Errorf("nbd: list exports of %s: %w", addr, contextErr(ctx, err))
	}
	return infos, nil
}

// tlsConfig is the Dialer's configuration for a connection to addr, nil
// for plain text.
func (d *Dialer) tlsConfig(network, addr string) *tls.Config {
	if d == nil || d.TLSConfig == nil {
		return nil
	}
	cfg := d.TLSConfig.Clone()
	if cfg.ServerName == "" {
		cfg.ServerName = "localhost"
		if network != "unix" {
			if host, _, err := net.SplitHostPort(addr); err == nil {
				cfg.ServerName = host
			}
		}
	}
	if cfg.MinVersion == 0 {
		cfg.MinVersion = tls.VersionTLS12
	}
	// Records start full: dynamic sizing helps the first bytes of a web
	// page, not a block device.
	cfg.DynamicRecordSizingDisabled = true
	return cfg
}

// startTLS sends NBD_OPT_STARTTLS and, once the server acknowledges it,
// runs the TLS handshake; every later byte goes over TLS.
func (c *Client) startTLS(cfg *tls.Config) error {
	final, msg, err := c.option(optStartTLS, nil, nil)
	if err != nil {
		return err
	}
	if final != repAck {
		if msg != "" {
			msg = ": " + msg
		}
		return fmt.Errorf("%w (NBD_OPT_STARTTLS answered %s%s)", ErrTLSNotOffered, repName(final), msg)
	}
	if c.br.Buffered() != 0 {
		return protoErr("data after the reply to NBD_OPT_STARTTLS")
	}
	tc := tls.Client(c.nc, cfg)
	if err := tc.Handshake(); err != nil {
		return fmt.Errorf("TLS handshake: %w", err)
	}
	c.nc = &tlsConn{Conn: tc, raw: c.nc}
	c.br.Reset(c.nc)
	c.tls = true
	return nil
}

// repName names an option reply type in messages.
func repName(typ uint32) string {
	switch typ {
	case repAck:
		return "NBD_REP_ACK"
	case repErrUnsup:
		return "NBD_REP_ERR_UNSUP"
	case repErrPolicy:
		return "NBD_REP_ERR_POLICY"
	case repErrInvalid:
		return "NBD_REP_ERR_INVALID"
	case repErrTLSReqd:
		return "NBD_REP_ERR_TLS_REQD"
	}
	return fmt.Sprintf("reply %#x", typ)
}
