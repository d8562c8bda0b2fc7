package pki

import (
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"
	"sync/atomic"
	"time"

	"rackpool/internal/clock"
)

// Source is the certificate a server presents, renewed while it runs: the
// service's own is issued again from its CA near expiry (Own), an
// operator's is read again from its files (Files). Config serves whichever
// it holds from the next handshake on.
type Source struct {
	cur  atomic.Pointer[tls.Certificate]
	load func(now time.Time) (*tls.Certificate, error)
	clk  clock.Clock
	log  *slog.Logger
}

// SourceOptions configure a Source.
type SourceOptions struct {
	Clock  clock.Clock // when certificates are checked (default clock.Real)
	Logger *slog.Logger
	// Notice receives the one-time notice of a newly created CA, with
	// what clients must do to trust it (serve: stderr); nil: nowhere.
	Notice io.Writer
}

func newSource(o SourceOptions, load func(now time.Time) (*tls.Certificate, error)) (*Source, error) {
	if o.Clock == nil {
		o.Clock = clock.Real{}
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	s := &Source{load: load, clk: o.Clock, log: o.Logger}
	if err := s.Refresh(); err != nil {
		return nil, err
	}
	return s, nil
}

// Files returns a source of the operator's certificate chain and key in
// PEM files, read again on every Refresh so that a renewed certificate is
// served without a restart.
func Files(certFile, keyFile string, o SourceOptions) (*Source, error) {
	return newSource(o, func(time.Time) (*tls.Certificate, error) {
		cert, err := tls.LoadX509KeyPair(certFile, keyFile)
		if err != nil {
			return nil, err
		}
		return &cert, nil
	})
}

// Own returns a source of the service's own certificate for hosts, from
// the CA in dir (Ensure: created on first use, the server certificate
// issued again near expiry or for new hosts).
func Own(dir string, hosts []string, o SourceOptions) (*Source, error) {
	var s *Source
	s, err := newSource(o, func(now time.Time) (*tls.Certificate, error) {
		m, err := Ensure(dir, hosts, now)
		if err != nil {
			return nil, fmt.Errorf("TLS certificate in %s: %w", dir, err)
		}
		log := o.Logger
		if log == nil {
			log = slog.New(slog.DiscardHandler)
		}
		if m.Created && o.Notice != nil {
			fmt.Fprintf(o.Notice, "\nCreated a certificate authority for this service (HTTPS is the default):\n  %s\n  SHA-256 %s\n"+
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
		if m.Issued || s == nil || s.cur.Load() == nil {
			log.Info("TLS certificate authority", "ca_file", m.CAFile, "ca_sha256", m.CASHA256, "created", m.Created, "server_certificate_issued", m.Issued,
				"names", strings.Join(append(m.Certificate.Leaf.DNSNames, ipStrings(m.Certificate.Leaf.IPAddresses)...), ","),
				"expires", m.Certificate.Leaf.NotAfter.Format(time.DateOnly))
		}
		return &m.Certificate, nil
	})
	return s, err
}

func ipStrings(ips []net.IP) []string {
	out := make([]string, len(ips))
	for i, ip := range ips {
		out[i] = ip.String()
	}
	return out
}

// Config is a server TLS configuration (ReloadingConfig) that presents the
// source's certificate.
func (s *Source) Config() *tls.Config {
	return ReloadingConfig(func(*tls.ClientHelloInfo) (*tls.Certificate, error) { return s.cur.Load(), nil })
}

// Certificate is the certificate served now.
func (s *Source) Certificate() *tls.Certificate { return s.cur.Load() }

// Refresh loads the certificate as of the clock's now and serves it from
// the next handshake on if it changed. On an error the current one stays.
func (s *Source) Refresh() error {
	cert, err := s.load(s.clk.Now())
	if err != nil {
		return err
	}
	if old := s.cur.Load(); old == nil || !bytes.Equal(old.Certificate[0], cert.Certificate[0]) {
		if old != nil {
			s.log.Info("TLS certificate renewed")
		}
		s.cur.Store(cert)
	}
	return nil
}

// Run refreshes every interval of the clock until ctx ends.
func (s *Source) Run(ctx context.Context, every time.Duration) {
	t := clock.NewTicker(s.clk, every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C():
			if err := s.Refresh(); err != nil {
				s.log.Warn("TLS certificate not renewed; serving the current one", "err", err)
			}
		}
	}
}
