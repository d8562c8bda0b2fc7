package main

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"

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
func serverTLS(certFile, keyFile string, insecure bool, addr, data string, log *slog.Logger) (*tls.Config, *pki.Source, error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, nil, fmt.Errorf("--addr %q: %w", addr, err)
	}
	opts := pki.SourceOptions{Logger: log, Notice: os.Stderr}
	var src *pki.Source
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
		if src, err = pki.Files(certFile, keyFile, opts); err != nil {
			return nil, nil, fmt.Errorf("--tls-cert/--tls-key: %w", err)
		}
	default:
		if src, err = pki.Own(filepath.Join(data, "tls"), []string{host}, opts); err != nil {
			return nil, nil, err
		}
	}
	return src.Config(), src, nil
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
