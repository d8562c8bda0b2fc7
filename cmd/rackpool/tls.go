package main

import (
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
	"time"

	"rackpool/api"
	"rackpool/internal/pki"
)

// serverTLS returns the TLS configuration serve listens with, nil for
// plain HTTP. HTTPS is the default: the service's own CA and server
// certificate are kept in DATA/tls (internal/pki) unless the operator
// passes a certificate with --tls-cert and --tls-key. Plain HTTP only
// with --insecure-http, and only on a loopback address: Redfish (DSP0266)
// requires HTTPS wherever credentials are accepted, and the service
// refuses Basic authentication and session creation over plain HTTP.
func serverTLS(certFile, keyFile string, insecure bool, addr, data string, log *slog.Logger) (*tls.Config, error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("--addr %q: %w", addr, err)
	}
	switch {
	case insecure && (certFile != "" || keyFile != ""):
		return nil, errors.New("--insecure-http and --tls-cert exclude each other")
	case insecure:
		if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
			return nil, fmt.Errorf("--insecure-http serves plain HTTP, which only a loopback address may (--addr %s): "+
				"drop --insecure-http to serve HTTPS with the service's own certificate, or pass --tls-cert and --tls-key", addr)
		}
		log.Warn("serving plain HTTP (--insecure-http): Basic authentication and session creation are refused; only public resources answer")
		return nil, nil
	case certFile != "" || keyFile != "":
		if certFile == "" || keyFile == "" {
			return nil, errors.New("--tls-cert and --tls-key go together")
		}
		cert, err := tls.LoadX509KeyPair(certFile, keyFile)
		if err != nil {
			return nil, fmt.Errorf("--tls-cert/--tls-key: %w", err)
		}
		return pki.ServerConfig(cert), nil
	}
	m, err := pki.Ensure(filepath.Join(data, "tls"), []string{host}, time.Now())
	if err != nil {
		return nil, fmt.Errorf("TLS certificate in %s: %w", filepath.Join(data, "tls"), err)
	}
	if m.Created {
		fmt.Fprintf(os.Stderr, "\nCreated a certificate authority for this service (HTTPS is the default):\n  %s\n  SHA-256 %s\n"+
			"Clients on this machine find it in the data directory; elsewhere copy it and\nuse --ca-file or export RACKPOOL_CA_FILE=%s\n\n", m.CAFile, m.CASHA256, m.CAFile)
	}
	log.Info("TLS certificate authority", "ca_file", m.CAFile, "ca_sha256", m.CASHA256, "created", m.Created, "server_certificate_issued", m.Issued,
		"names", strings.Join(append(m.Certificate.Leaf.DNSNames, ipStrings(m.Certificate.Leaf.IPAddresses)...), ","),
		"expires", m.Certificate.Leaf.NotAfter.Format(time.DateOnly))
	return pki.ServerConfig(m.Certificate), nil
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
		return "\n(the service serves plain HTTP (--insecure-http): use an http:// URL, though it refuses credentials)"
	}
	return ""
}
