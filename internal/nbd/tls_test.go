package nbd

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"rackpool/internal/pki"
)

// tlsCreds is a CA and credentials directories in the GnuTLS layout.
type tlsCreds struct {
	caDir  string // the CA (pki's layout)
	server string // ca-cert.pem, server-cert.pem, server-key.pem
	client string // ca-cert.pem, client-cert.pem, client-key.pem
}

// newCreds makes a CA and a server certificate for names and a client
// certificate, all issued by it.
func newCreds(t testing.TB, names ...string) *tlsCreds {
	t.Helper()
	root := t.TempDir()
	c := &tlsCreds{caDir: filepath.Join(root, "ca"), server: filepath.Join(root, "server"), client: filepath.Join(root, "client")}
	now := time.Now()
	if _, err := pki.Ensure(c.caDir, nil, now); err != nil {
		t.Fatal(err)
	}
	c.issue(t, c.server, pki.LeafRequest{Names: names})
	c.issue(t, c.client, pki.LeafRequest{Names: []string{"test-client"}, Client: true})
	return c
}

// issue writes a certificate of c's CA into dir, in the GnuTLS layout.
func (c *tlsCreds) issue(t testing.TB, dir string, req pki.LeafRequest) {
	t.Helper()
	leaf, err := pki.Issue(c.caDir, req, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	certName, keyName := TLSServerCert, TLSServerKey
	if req.Client {
		certName, keyName = TLSClientCert, TLSClientKey
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	for name, data := range map[string][]byte{TLSCACert: leaf.CAPEM, certName: leaf.CertPEM, keyName: leaf.KeyPEM} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
}

func serverTLS(t testing.TB, dir string, verifyPeer bool) *tls.Config {
	t.Helper()
	cfg, err := ServerTLSConfig(dir, verifyPeer)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

func clientTLS(t testing.TB, dir string) *Dialer {
	t.Helper()
	cfg, err := ClientTLSConfig(dir)
	if err != nil {
		t.Fatal(err)
	}
	return &Dialer{TLSConfig: cfg}
}

// startTLSEnv is startEnv with TLS required, credentials from creds.
func startTLSEnv(t testing.TB, creds *tlsCreds, verifyPeer bool) *testEnv {
	t.Helper()
	cfg := serverTLS(t, creds.server, verifyPeer)
	return startEnv(t, func(s *Server, _ *testExports) { s.TLSConfig = cfg })
}

func TestTLSRoundTrip(t *testing.T) {
	checkNoLeak(t)
	creds := newCreds(t, "localhost", "127.0.0.1")
	env := startTLSEnv(t, creds, true)
	d := clientTLS(t, creds.client)
	for _, tc := range []struct{ network, addr string }{{"unix", env.sock}, {"tcp", env.tcp}} {
		t.Run(tc.network, func(t *testing.T) {
			ctx := testCtx(t)
			c, err := d.Dial(ctx, tc.network, tc.addr, "disk")
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			if !c.tls || !c.structured || !c.Flags().CanBlockStatus || c.Size() != testSize {
				t.Fatalf("tls %v, structured %v, block status %v, size %d", c.tls, c.structured, c.Flags().CanBlockStatus, c.Size())
			}
			// Pieces around the gathering size, and one large write that
			// the server reads straight from the stream.
			for i, n := range []int{1, 4096, tlsChunk - 1, tlsChunk, tlsChunk + 1, 3 << 20} {
				data := randBytes(uint64(i+1), n)
				off := uint64(i) << 21
				if err := c.WriteAt(ctx, data, off, i%2 == 0); err != nil {
					t.Fatal(err)
				}
				got := make([]byte, n)
				if err := c.ReadAt(ctx, got, off); err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(got, data) {
					t.Fatalf("%d bytes at %d read back differ", n, off)
				}
			}
			if _, err := c.BlockStatus(ctx, 0, testSize); err != nil {
				t.Fatal(err)
			}
			if err := c.Flush(ctx); err != nil {
				t.Fatal(err)
			}
			infos, err := d.List(ctx, tc.network, tc.addr)
			if err != nil || len(infos) != 2 {
				t.Fatalf("List over TLS: %v %+v", err, infos)
			}
		})
	}
}

// TestTLSRefused: every way TLS can fail ends in a clear error, before any
// export is opened.
func TestTLSRefused(t *testing.T) {
	checkNoLeak(t)
	creds := newCreds(t, "localhost", "127.0.0.1")
	other := newCreds(t, "localhost", "127.0.0.1") // another CA
	wrongName := newCreds(t, "elsewhere.example")
	tlsEnv := startTLSEnv(t, creds, true)
	plainEnv := startEnv(t, nil)
	nameEnv := startTLSEnv(t, wrongName, false)
	noCert := &Dialer{TLSConfig: &tls.Config{RootCAs: clientTLS(t, creds.client).TLSConfig.RootCAs}}
	mixed, err := ClientTLSConfig(creds.client)
	if err != nil {
		t.Fatal(err)
	}
	mixed.Certificates = clientTLS(t, other.client).TLSConfig.Certificates // trusts the server, presents a stranger's certificate

	for _, tc := range []struct {
		name   string
		env    *testEnv
		dialer *Dialer
		check  func(error) bool
		want   string
	}{
		{"plain client, TLS server", tlsEnv, &Dialer{}, func(err error) bool { return errors.Is(err, ErrTLSRequired) },
			"server requires TLS"},
		{"TLS client, plain server", plainEnv, clientTLS(t, creds.client),
			func(err error) bool { return errors.Is(err, ErrTLSNotOffered) }, "NBD_REP_ERR_UNSUP"},
		{"server of another CA", tlsEnv, clientTLS(t, other.client), func(err error) bool {
			var ua x509.UnknownAuthorityError
			return errors.As(err, &ua)
		}, "TLS handshake"},
		{"server certificate for another name", nameEnv, clientTLS(t, wrongName.client), func(err error) bool {
			var he x509.HostnameError
			return errors.As(err, &he)
		}, "TLS handshake"},
		// With TLS 1.3 the server's verdict on the client's certificate
		// arrives as an alert after the client's side of the handshake.
		{"no client certificate", tlsEnv, noCert, func(err error) bool { return err != nil }, "tls: certificate required"},
		{"client certificate of another CA", tlsEnv, &Dialer{TLSConfig: mixed}, func(err error) bool { return err != nil },
			"tls: unknown certificate authority"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := tc.env.exports.opens.Load()
			for _, network := range []string{"tcp", "unix"} {
				addr := tc.env.tcp
				if network == "unix" {
					addr = tc.env.sock
				}
				c, err := tc.dialer.Dial(testCtx(t), network, addr, "disk")
				if err == nil {
					c.Close()
					t.Fatalf("%s: connected", network)
				}
				if !tc.check(err) || !strings.Contains(err.Error(), tc.want) {
					t.Fatalf("%s: %v, want an error saying %q", network, err, tc.want)
				}
				if _, err := tc.dialer.List(testCtx(t), network, addr); err == nil || !tc.check(err) {
					t.Fatalf("%s: List: %v", network, err)
				}
			}
			if n := tc.env.exports.opens.Load() - before; n != 0 {
				t.Fatalf("the server opened the export %d times", n)
			}
		})
	}
}

// TestTLSForcedNegotiation checks the server's FORCEDTLS mode byte by byte.
func TestTLSForcedNegotiation(t *testing.T) {
	creds := newCreds(t, "localhost")
	env := startTLSEnv(t, creds, false)
	cfg, err := ClientTLSConfig(creds.client)
	if err != nil {
		t.Fatal(err)
	}
	cfg.ServerName = "localhost"

	t.Run("options before STARTTLS", func(t *testing.T) {
		r := dialRaw(t, env)
		r.greet(clientFixedNewstyle | clientNoZeroes)
		for _, o := range []struct {
			opt  uint32
			data []byte
		}{
			{optList, nil}, {optStructuredReply, nil}, {optInfo, goData("disk")}, {optGo, goData("disk")},
			{optListMetaContext, metaData("disk", "base:")}, {99, []byte("x")},
			{optInfo, make([]byte, maxOptionLen+1)}, // too big: still TLS first
		} {
			r.option(o.opt, o.data)
			r.wantReply(o.opt, repErrTLSReqd)
		}
		r.option(optStartTLS, []byte{1})
		r.wantReply(optStartTLS, repErrInvalid)
		r.option(optAbort, nil)
		r.wantReply(optAbort, repAck)
		if env.exports.opens.Load() != 0 {
			t.Fatal("an export was opened before TLS")
		}
	})
	t.Run("EXPORT_NAME before STARTTLS ends the session", func(t *testing.T) {
		r := dialRaw(t, env)
		r.greet(clientFixedNewstyle | clientNoZeroes)
		r.option(optExportName, []byte("disk"))
		if b, err := io.ReadAll(r.br); err != nil || len(b) != 0 {
			t.Fatalf("after EXPORT_NAME: %q, %v; want the connection closed", b, err)
		}
	})
	t.Run("data pipelined after STARTTLS is refused", func(t *testing.T) {
		r := dialRaw(t, env)
		r.greet(clientFixedNewstyle | clientNoZeroes)
		// STARTTLS and, in the same write, a plain-text option that must
		// not be taken for one sent over TLS.
		r.write(append(appendOption(nil, optStartTLS, nil), appendOption(nil, optStructuredReply, nil)...))
		if b, err := io.ReadAll(r.br); err != nil || len(b) != 0 {
			t.Fatalf("after pipelined STARTTLS: %q, %v; want the connection closed unanswered", b, err)
		}
	})
	t.Run("after STARTTLS", func(t *testing.T) {
		r := dialRaw(t, env)
		r.greet(clientFixedNewstyle | clientNoZeroes)
		r.option(optStartTLS, nil)
		r.wantReply(optStartTLS, repAck)
		tc := tls.Client(r.nc, cfg)
		if err := tc.Handshake(); err != nil {
			t.Fatal(err)
		}
		r.nc, r.br = tc, bufio.NewReader(tc)
		r.option(optStartTLS, nil)
		r.wantReply(optStartTLS, repErrInvalid)
		r.option(optStructuredReply, nil)
		r.wantReply(optStructuredReply, repAck)
		r.option(optGo, goData("disk"))
		r.wantReply(optGo, repAck)
		// A READ over TLS.
		r.request(0, cmdRead, 7, 0, 4096, nil)
		h := r.read(20)
		if binary.BigEndian.Uint32(h) != structuredReplyMagic || binary.BigEndian.Uint64(h[8:]) != 7 {
			t.Fatalf("reply % x", h)
		}
		r.read(int(binary.BigEndian.Uint32(h[16:])))
		r.request(0, cmdDisc, 8, 0, 0, nil)
	})
}

// TestTLSCertificateRenewed: the server presents a renewed certificate
// from the next handshake on, without a restart.
func TestTLSCertificateRenewed(t *testing.T) {
	creds := newCreds(t, "localhost")
	env := startTLSEnv(t, creds, false)
	d := clientTLS(t, creds.client)
	serial := func() string {
		nc, err := net.Dial("unix", env.sock)
		if err != nil {
			t.Fatal(err)
		}
		var got string
		cfg := d.tlsConfig("unix", "")
		cfg.VerifyConnection = func(cs tls.ConnectionState) error {
			got = cs.PeerCertificates[0].SerialNumber.String()
			return nil
		}
		c, err := newClient(testCtx(t), nc, "disk", cfg)
		if err != nil {
			t.Fatal(err)
		}
		c.Close()
		return got
	}
	first := serial()
	creds.issue(t, creds.server, pki.LeafRequest{Names: []string{"localhost"}})
	if second := serial(); second == first {
		t.Fatalf("serial %s after renewal, the old one", second)
	}
}

// TestTLSCloseUnread: closing a TLS connection whose peer reads nothing
// (its socket buffers full) does not wait for it.
func TestTLSCloseUnread(t *testing.T) {
	creds := newCreds(t, "localhost")
	scfg := serverTLS(t, creds.server, false)
	ccfg := clientTLS(t, creds.client).tlsConfig("tcp", "localhost:1")
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	accepted := make(chan *tls.Conn, 1)
	go func() {
		nc, err := l.Accept()
		if err != nil {
			accepted <- nil
			return
		}
		tc := tls.Server(nc, scfg)
		tc.Handshake()
		accepted <- tc // and never reads again
	}()
	raw, err := net.Dial("tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	tc := tls.Client(raw, ccfg)
	if err := tc.Handshake(); err != nil {
		t.Fatal(err)
	}
	peer := <-accepted
	defer peer.Close()
	c := &tlsConn{Conn: tc, raw: raw}
	// Fill both socket buffers (with bytes of no record: the peer never
	// reads them) until a write cannot finish; a timeout on the socket
	// itself leaves the TLS connection usable.
	raw.SetWriteDeadline(time.Now().Add(200 * time.Millisecond))
	chunk := make([]byte, 1<<20)
	for {
		if _, err := raw.Write(chunk); err != nil {
			break
		}
	}
	raw.SetWriteDeadline(time.Time{})
	// close_notify cannot be sent; Close gives up on it and closes.
	done := make(chan struct{})
	go func() {
		c.Close()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(time.Minute):
		t.Fatal("Close blocked on a peer that does not read")
	}
	if _, err := raw.Write([]byte{0}); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("the socket is still open: %v", err)
	}
}

// FuzzServerOptionsTLSRequired: whatever a client sends in plain text to a
// server that requires TLS (a static input cannot complete a handshake),
// no export is opened.
func FuzzServerOptionsTLSRequired(f *testing.F) {
	srv, x := fuzzServer(f)
	srv.TLSConfig = serverTLS(f, newCreds(f, "localhost").server, false)
	prefix := binary.BigEndian.AppendUint32(nil, clientFixedNewstyle|clientNoZeroes)
	for _, s := range [][]byte{
		appendOption(nil, optList, nil),
		appendOption(appendOption(nil, optStructuredReply, nil), optGo, goData("disk")),
		appendOption(nil, optInfo, goData("ro", infoBlockSize)),
		appendOption(nil, optExportName, []byte("disk")),
		appendOption(nil, optStartTLS, nil),
		appendOption(appendOption(nil, optStartTLS, nil), optGo, goData("disk")),
		append(appendOption(nil, optStartTLS, nil), 0x16, 3, 1, 0, 4, 1, 0, 0, 0),
		appendOption(nil, optInfo, make([]byte, maxOptionLen+1)),
		appendOption(nil, optAbort, nil),
		{},
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		serveBytes(t, srv, x, append(append([]byte(nil), prefix...), data...))
		if n := x.opens.Load(); n != 0 {
			t.Fatalf("an export was opened %d times without TLS", n)
		}
	})
}
