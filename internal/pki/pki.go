// Package pki keeps the service's own certificate authority, so that
// `rackpool serve` speaks HTTPS from its first start without an operator
// having to bring a certificate.
//
// On first use Ensure creates, in one directory (serve puts it at
// DATA/tls):
//
//	ca.pem          the CA certificate (ECDSA P-256, 10 years); clients trust this file
//	ca-key.pem      its private key (mode 0600)
//	server.pem      the server certificate signed by the CA, then the CA certificate
//	server-key.pem  its private key (mode 0600)
//
// and reuses them on every later start. The server certificate is issued
// again from the same CA, so clients keep trusting it, when it is within
// 30 days of expiry, was not signed by the CA on disk, or does not name
// every host the service is now reached by (a new listen address). Files
// are written to a temporary name and renamed, so a crash never leaves a
// half-written key. A file that exists but cannot be read as what it
// should be is an error naming the file: Ensure never replaces a CA that
// clients may already trust.
//
// A Source (source.go) is the certificate a server presents while it runs:
// Own renews the service's own from this CA, Files reads an operator's
// again; Run checks on an injected clock, and Config serves the current one
// from the next handshake on.
package pki

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// File names inside the directory Ensure keeps.
const (
	CAFile        = "ca.pem"
	caKeyFile     = "ca-key.pem"
	serverFile    = "server.pem"
	serverKeyFile = "server-key.pem"
)

const (
	caLifetime     = 10 * 365 * 24 * time.Hour
	serverLifetime = 397 * 24 * time.Hour // the most browsers accept
	renewBefore    = 30 * 24 * time.Hour
)

// Material is what Ensure returns: the server's certificate chain and
// where the CA that clients trust is.
type Material struct {
	Certificate tls.Certificate
	CAFile      string // absolute path of ca.pem
	CASHA256    string // SHA-256 of the CA certificate (DER), hex pairs joined by ':'
	CANotAfter  time.Time
	Created     bool  // the CA was created by this call
	Issued      bool  // the server certificate was issued by this call
	Damaged     error // why the server pair on disk could not be used, when that is why it was issued again (nil when there was none)
}

// Ensure loads or creates the CA and a server certificate in dir for
// hosts (DNS names or IP addresses; localhost and the loopback addresses
// are always included).
func Ensure(dir string, hosts []string, now time.Time) (*Material, error) {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	m := &Material{CAFile: filepath.Join(dir, CAFile)}
	var ca *x509.Certificate
	var caKey *ecdsa.PrivateKey
	if _, serr := os.Stat(m.CAFile); errors.Is(serr, fs.ErrNotExist) {
		// No CA certificate was ever written, so no client can trust
		// one: a key alone (a crash between writePair's two renames) is
		// replaced with the rest.
		if ca, caKey, err = newCA(now); err != nil {
			return nil, err
		}
		if err := writePair(dir, CAFile, caKeyFile, ca.Raw, nil, caKey); err != nil {
			return nil, err
		}
		m.Created = true
	} else if ca, caKey, err = loadPair(dir, CAFile, caKeyFile); err != nil {
		return nil, err
	}
	const renew = "move the directory %s away to create a new CA (clients must then trust the new ca.pem)"
	switch {
	case !ca.IsCA:
		return nil, fmt.Errorf("%s is not a CA certificate; "+renew, m.CAFile, dir)
	case now.After(ca.NotAfter):
		return nil, fmt.Errorf("the CA certificate %s expired on %s; "+renew, m.CAFile, ca.NotAfter.Format(time.DateOnly), dir)
	case now.Before(ca.NotBefore):
		return nil, fmt.Errorf("the CA certificate %s is valid only from %s (was the clock wrong when it was made, or is it now?); "+renew,
			m.CAFile, ca.NotBefore.Format(time.RFC3339), dir)
	}
	m.CANotAfter = ca.NotAfter
	sum := sha256.Sum256(ca.Raw)
	parts := make([]string, len(sum))
	for i, b := range sum {
		parts[i] = fmt.Sprintf("%02X", b)
	}
	m.CASHA256 = strings.Join(parts, ":")

	names := SANs(hosts)
	// The server pair can always be issued again from the CA, so any
	// trouble loading it (absent, damaged, a crash between the renames)
	// is mended rather than refused.
	cert, key, err := loadPair(dir, serverFile, serverKeyFile)
	if err != nil || needsReissue(cert, ca, names, now) {
		if !errors.Is(err, fs.ErrNotExist) {
			m.Damaged = err // absent is the first start, not damage
		}
		if cert, key, err = issue(ca, caKey, names, now); err != nil {
			return nil, err
		}
		if err := writePair(dir, serverFile, serverKeyFile, cert.Raw, ca.Raw, key); err != nil {
			return nil, err
		}
		m.Issued = true
	}
	m.Certificate = tls.Certificate{Certificate: [][]byte{cert.Raw, ca.Raw}, PrivateKey: key, Leaf: cert}
	return m, nil
}

// SANs is the sorted, deduplicated set of names a server certificate for
// hosts carries: hosts themselves plus localhost, the loopback addresses
// and the machine's host name. An empty or unspecified host (listening on
// every address) stands for the addresses of the machine's interfaces.
func SANs(hosts []string) []string {
	set := map[string]bool{"localhost": true, "127.0.0.1": true, "::1": true}
	if name, err := os.Hostname(); err == nil && name != "" {
		set[strings.ToLower(name)] = true
	}
	for _, h := range hosts {
		h = strings.TrimSuffix(strings.Trim(h, "[]"), ".")
		if i := strings.IndexByte(h, '%'); i >= 0 && net.ParseIP(h[:i]) != nil {
			h = h[:i] // an IPv6 zone is not part of the address a certificate names
		}
		if ip := net.ParseIP(h); h == "" || ip != nil && ip.IsUnspecified() {
			addrs, _ := net.InterfaceAddrs()
			for _, a := range addrs {
				if n, ok := a.(*net.IPNet); ok && !n.IP.IsLinkLocalUnicast() {
					set[n.IP.String()] = true
				}
			}
			continue
		} else if ip != nil {
			h = ip.String()
		}
		set[strings.ToLower(h)] = true
	}
	out := make([]string, 0, len(set))
	for n := range set {
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}

// needsReissue reports whether cert must be issued again: near expiry,
// not signed by ca, or missing one of names.
func needsReissue(cert, ca *x509.Certificate, names []string, now time.Time) bool {
	if now.Add(renewBefore).After(cert.NotAfter) || now.Before(cert.NotBefore) || cert.CheckSignatureFrom(ca) != nil {
		return true
	}
	for _, n := range names {
		if cert.VerifyHostname(n) != nil {
			return true
		}
	}
	return false
}

// sign makes a new P-256 key and a certificate of it from tmpl, with a
// random serial, signed by parent's key, or by itself when parent is nil.
func sign(tmpl, parent *x509.Certificate, parentKey *ecdsa.PrivateKey) (*x509.Certificate, *ecdsa.PrivateKey, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	if tmpl.SerialNumber, err = rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127)); err != nil {
		return nil, nil, err
	}
	if parent == nil {
		parent, parentKey = tmpl, key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, &key.PublicKey, parentKey)
	if err != nil {
		return nil, nil, err
	}
	cert, err := x509.ParseCertificate(der)
	return cert, key, err
}

func newCA(now time.Time) (*x509.Certificate, *ecdsa.PrivateKey, error) {
	host, _ := os.Hostname()
	return sign(&x509.Certificate{
		Subject:               pkix.Name{CommonName: "rackpool CA " + host, Organization: []string{"rackpool"}},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(caLifetime),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true, // signs only leaf certificates
	}, nil, nil)
}

// serverTemplate is the template of a server certificate named cn that
// ca signs: valid from an hour before now (clocks differ) for
// serverLifetime, and never past the CA.
func serverTemplate(ca *x509.Certificate, cn string, now time.Time) *x509.Certificate {
	tmpl := &x509.Certificate{
		Subject:     pkix.Name{CommonName: cn, Organization: []string{"rackpool"}},
		NotBefore:   now.Add(-time.Hour),
		NotAfter:    now.Add(serverLifetime),
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	if tmpl.NotAfter.After(ca.NotAfter) {
		tmpl.NotAfter = ca.NotAfter
	}
	return tmpl
}

func issue(ca *x509.Certificate, caKey *ecdsa.PrivateKey, names []string, now time.Time) (*x509.Certificate, *ecdsa.PrivateKey, error) {
	tmpl := serverTemplate(ca, names[0], now)
	for _, n := range names {
		if ip := net.ParseIP(n); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, n)
		}
	}
	return sign(tmpl, ca, caKey)
}

// loadPair reads a certificate file (its first certificate) and its key.
// fs.ErrNotExist when neither file exists; an error naming the file when
// only one does or one is not what it should be.
func loadPair(dir, certName, keyName string) (*x509.Certificate, *ecdsa.PrivateKey, error) {
	certPath, keyPath := filepath.Join(dir, certName), filepath.Join(dir, keyName)
	certPEM, cerr := os.ReadFile(certPath)
	keyPEM, kerr := os.ReadFile(keyPath)
	if errors.Is(cerr, fs.ErrNotExist) && errors.Is(kerr, fs.ErrNotExist) {
		return nil, nil, fs.ErrNotExist
	}
	for _, e := range []struct {
		err        error
		have, miss string
	}{{cerr, keyPath, certPath}, {kerr, certPath, keyPath}} {
		if errors.Is(e.err, fs.ErrNotExist) {
			// Not fs.ErrNotExist: the pair is not simply absent.
			return nil, nil, fmt.Errorf("%s exists but %s does not; restore it, or move both away to create new ones", e.have, e.miss)
		}
		if e.err != nil {
			return nil, nil, e.err
		}
	}
	block, _ := pem.Decode(certPEM)
	if block == nil || block.Type != "CERTIFICATE" {
		return nil, nil, fmt.Errorf("%s: no PEM certificate", certPath)
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", certPath, err)
	}
	kb, _ := pem.Decode(keyPEM)
	if kb == nil || kb.Type != "EC PRIVATE KEY" {
		return nil, nil, fmt.Errorf("%s: no PEM EC private key", keyPath)
	}
	key, err := x509.ParseECPrivateKey(kb.Bytes)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", keyPath, err)
	}
	if !key.PublicKey.Equal(cert.PublicKey) {
		return nil, nil, fmt.Errorf("%s does not hold the key of %s", keyPath, certPath)
	}
	return cert, key, nil
}

// writePair writes a certificate (followed by chain, if any) and its key,
// each to a temporary file renamed into place, the key first.
func writePair(dir, certName, keyName string, der, chain []byte, key *ecdsa.PrivateKey) error {
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return err
	}
	if err := writeFile(filepath.Join(dir, keyName), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}), 0o600); err != nil {
		return err
	}
	var b bytes.Buffer
	_ = pem.Encode(&b, &pem.Block{Type: "CERTIFICATE", Bytes: der})
	if chain != nil {
		_ = pem.Encode(&b, &pem.Block{Type: "CERTIFICATE", Bytes: chain})
	}
	return writeFile(filepath.Join(dir, certName), b.Bytes(), 0o644)
}

func writeFile(path string, data []byte, mode os.FileMode) error {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name()) // after the rename, a no-op
	if err := f.Chmod(mode); err != nil {
		f.Close()
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(f.Name(), path)
}

// ServerConfig is the TLS configuration the service listens with: TLS
// 1.2 and later, and for 1.2 only AEAD suites with forward secrecy (1.3's
// suites are all of that kind and not configurable).
func ServerConfig(cert tls.Certificate) *tls.Config {
	return ReloadingConfig(func(*tls.ClientHelloInfo) (*tls.Certificate, error) { return &cert, nil })
}

// ReloadingConfig is ServerConfig with the certificate chosen per
// handshake, so that a renewed certificate is served without a restart.
func ReloadingConfig(get func(*tls.ClientHelloInfo) (*tls.Certificate, error)) *tls.Config {
	return &tls.Config{
		GetCertificate: get,
		MinVersion:     tls.VersionTLS12,
		CipherSuites: []uint16{
			tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256, tls.TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384,
			tls.TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256,
			tls.TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256, tls.TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384,
			tls.TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256,
		},
	}
}
