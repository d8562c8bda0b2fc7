package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"

	"rackpool/api"
	"rackpool/internal/pki"
)

// serverTLS returns the TLS configuration serve listens with and the
// source of its certificate (to run, so the certificate is renewed while
// serve runs), nil for plain HTTP. HTTPS is the default: the service's own
// CA and server certificate are kept in DATA/tls (internal/pki) unless the
// operator passes a certificate with --tls-cert and --tls-key. Plain HTTP
// only with --insecure-http, and only on a loopback address: Redfish
// (DSP0266) requires HTTPS wherever credentials are accepted, and the
// service refuses every credential over plain HTTP.
func serverTLS(certFile, keyFile string, insecure bool, addr, data string, log *slog.Logger) (*tls.Config, *certSource, error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, nil, fmt.Errorf("--addr %q: %w", addr, err)
	}
	src := &certSource{log: log}
	switch {
	case insecure && (certFile != "" || keyFile != ""):
		return nil, nil, errors.New("--insecure-http and --tls-cert exclude each other")
	case insecure:
		if ip := net.ParseIP(host); !strings.EqualFold(host, "localhost") && (ip == nil || !ip.IsLoopback()) {
			return nil, nil, fmt.Errorf("--insecure-http serves plain HTTP, which only a loopback address may (--addr %s): "+
				"drop --insecure-http to serve HTTPS with the service's own certificate, or pass --tls-cert and --tls-key", addr)
		}
		log.Warn("serving plain HTTP (--insecure-http): every credential (Basic, session login, session token) is refused; only public resources answer")
		return nil, nil, nil
	case certFile != "" || keyFile != "":
		if certFile == "" || keyFile == "" {
			return nil, nil, errors.New("--tls-cert and --tls-key go together")
		}
		// The operator's files are read again as the source runs, so a
		// renewed certificate is served without a restart.
		src.load = func(time.Time) (*tls.Certificate, error) {
			cert, err := tls.LoadX509KeyPair(certFile, keyFile)
			if err != nil {
				return nil, fmt.Errorf("--tls-cert/--tls-key: %w", err)
			}
			return &cert, nil
		}
	default:
		dir := filepath.Join(data, "tls")
		src.load = func(now time.Time) (*tls.Certificate, error) {
			m, err := pki.Ensure(dir, []string{host}, now)
			if err != nil {
				return nil, fmt.Errorf("TLS certificate in %s: %w", dir, err)
			}
			if m.Created {
				fmt.Fprintf(os.Stderr, "\nCreated a certificate authority for this service (HTTPS is the default):\n  %s\n  SHA-256 %s\n"+
					"Clients trust it with --ca-file, or with:\n  export RACKPOOL_CA_FILE=%s\n"+
					"(the rackpool CLI run as this user from the directory that holds ./data finds it by itself)\n\n",
					m.CAFile, m.CASHA256, m.CAFile)
			}
			if m.Damaged != nil {
				log.Warn("TLS server certificate on disk was unusable; issued a new one from the same CA", "err", m.Damaged)
			}
			if left := m.CANotAfter.Sub(now); left < 180*24*time.Hour {
				log.Warn("the service's CA expires soon: move DATA/tls away before then to create a new one, and give clients the new ca.pem",
					"ca_file", m.CAFile, "expires", m.CANotAfter.Format(time.DateOnly))
			}
			if m.Issued || src.cur.Load() == nil {
				log.Info("TLS certificate authority", "ca_file", m.CAFile, "ca_sha256", m.CASHA256, "created", m.Created, "server_certificate_issued", m.Issued,
					"names", strings.Join(append(m.Certificate.Leaf.DNSNames, ipStrings(m.Certificate.Leaf.IPAddresses)...), ","),
					"expires", m.Certificate.Leaf.NotAfter.Format(time.DateOnly))
			}
			return &m.Certificate, nil
		}
	}
	if err := src.refresh(time.Now()); err != nil {
		return nil, nil, err
	}
	return pki.ReloadingConfig(src.get), src, nil
}

// certSource holds the certificate serve presents and renews it while
// serve runs: its own is issued again from the CA near expiry, an
// operator's is read again from its files.
type certSource struct {
	cur  atomic.Pointer[tls.Certificate]
	load func(now time.Time) (*tls.Certificate, error)
	log  *slog.Logger
}

func (c *certSource) get(*tls.ClientHelloInfo) (*tls.Certificate, error) { return c.cur.Load(), nil }

// refresh loads the certificate and serves it from the next handshake on
// if it changed. On an error the current one stays.
func (c *certSource) refresh(now time.Time) error {
	cert, err := c.load(now)
	if err != nil {
		return err
	}
	if old := c.cur.Load(); old == nil || !bytes.Equal(old.Certificate[0], cert.Certificate[0]) {
		if old != nil {
			c.log.Info("TLS certificate renewed")
		}
		c.cur.Store(cert)
	}
	return nil
}

// run refreshes every interval until ctx ends.
func (c *certSource) run(ctx context.Context, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if err := c.refresh(time.Now()); err != nil {
				c.log.Warn("TLS certificate not renewed; serving the current one", "err", err)
			}
		}
	}
}

func ipStrings(ips []net.IP) []string {
	out := make([]string, len(ips))
	for i, ip := range ips {
		out[i] = ip.String()
	}
	return out
}

// httpErrorLog routes net/http's own log lines to the logger: failed TLS
// handshakes (port scanners, clients that do not trust the CA) at debug,
// anything else as a warning.
func httpErrorLog(log *slog.Logger) *slogWriter { return &slogWriter{log: log} }

type slogWriter struct{ log *slog.Logger }

func (w *slogWriter) Write(p []byte) (int, error) {
	msg := strings.TrimSpace(string(p))
	if strings.Contains(msg, "TLS handshake error") {
		w.log.Debug(msg)
	} else {
		w.log.Warn(msg)
	}
	return len(p), nil
}

// caFlag adds --ca-file to fs.
func caFlag(fs *flag.FlagSet, p *string) {
	fs.StringVar(p, "ca-file", os.Getenv("RACKPOOL_CA_FILE"),
		"PEM CA certificate to trust besides the system's (default $RACKPOOL_CA_FILE, else "+api.DefaultCAFile+" when it exists)")
}

// httpClient is the HTTP client of the client verbs: it trusts the
// system's roots and caFile, or by default the CA api.CAFile finds.
func httpClient(caFile string) (*http.Client, error) {
	if caFile == "" {
		caFile = api.CAFile()
	}
	return api.HTTPClient(caFile)
}

// tlsHint explains a certificate the client does not trust: the usual
// cause is a service whose CA file is not where the client looks.
func tlsHint(err error) string {
	var unknown x509.UnknownAuthorityError
	var host x509.HostnameError
	switch {
	case errors.As(err, &unknown):
		return "\n(the service's certificate is signed by a CA this client does not trust: pass its ca.pem, " +
			"which `rackpool serve` keeps in DATA/tls and prints at start-up, with --ca-file or RACKPOOL_CA_FILE)"
	case errors.As(err, &host):
		return "\n(the service's certificate does not name the host in the URL: use a name or address it was issued for, " +
			"as `rackpool serve` logs at start-up)"
	case strings.Contains(err.Error(), "server gave HTTP response to HTTPS client"):
		return "\n(the service was started with --insecure-http and refuses every credential: the CLI needs it to serve HTTPS, its default)"
	}
	return ""
}
