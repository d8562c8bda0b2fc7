package pki

import (
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// Leaf is a certificate issued by Issue, in PEM: the certificate, its
// private key and the certificate of the CA that signed it.
type Leaf struct {
	CertPEM, KeyPEM, CAPEM []byte
	NotAfter               time.Time
}

// LeafRequest says what certificate Issue makes.
type LeafRequest struct {
	// Names are the DNS names and IP addresses a server certificate is
	// valid for (exactly these: unlike Ensure's, nothing is added, since
	// the certificate is for another machine), or the one name a client
	// certificate carries as its common name.
	Names []string
	// Client makes a client certificate (TLS client authentication)
	// instead of a server certificate.
	Client bool
}

// Issue signs a new certificate with the CA kept in dir (the directory
// Ensure keeps, DATA/tls of `rackpool serve`), for a service other than
// serve's HTTPS: an NBD server or client (docs/storage.md, "TLS"). The CA
// must exist: Issue never creates one.
func Issue(dir string, req LeafRequest, now time.Time) (*Leaf, error) {
	if len(req.Names) == 0 {
		return nil, errors.New("pki: a certificate needs at least one name")
	}
	if req.Client && len(req.Names) != 1 {
		return nil, errors.New("pki: a client certificate carries one name")
	}
	for _, n := range req.Names {
		if n == "" || strings.ContainsAny(n, " ,/\x00") {
			return nil, fmt.Errorf("pki: %q is not a host name or address", n)
		}
	}
	ca, caKey, err := loadPair(dir, CAFile, caKeyFile)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("no CA in %s: `rackpool serve` creates one there on its first start (unless it serves --tls-cert)", dir)
	}
	if err != nil {
		return nil, err
	}
	if !ca.IsCA || now.After(ca.NotAfter) || now.Before(ca.NotBefore) {
		return nil, fmt.Errorf("the CA certificate %s is not a CA valid now", filepath.Join(dir, CAFile))
	}
	tmpl := serverTemplate(ca, req.Names[0], now)
	if req.Client {
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
	} else {
		for _, n := range req.Names {
			if ip := net.ParseIP(strings.Trim(n, "[]")); ip != nil {
				tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
			} else {
				tmpl.DNSNames = append(tmpl.DNSNames, strings.ToLower(strings.TrimSuffix(n, ".")))
			}
		}
	}
	cert, key, err := sign(tmpl, ca, caKey)
	if err != nil {
		return nil, err
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, err
	}
	return &Leaf{
		CertPEM:  pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: cert.Raw}),
		KeyPEM:   pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}),
		CAPEM:    pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ca.Raw}),
		NotAfter: cert.NotAfter,
	}, nil
}

// WriteFile writes data to path through a temporary file renamed into
// place, with mode, so that a reader never sees half a key.
func WriteFile(path string, data []byte, mode os.FileMode) error { return writeFile(path, data, mode) }
