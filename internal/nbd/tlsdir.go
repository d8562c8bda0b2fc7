package nbd

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"time"

	"rackpool/internal/pki"
)

// Files of an x509 credentials directory, the layout the GnuTLS-based NBD
// tools share: nbdkit --tls-certificates, qemu's tls-creds-x509 dir and
// libnbd's tls-certificates (nbdinfo, nbdcopy, fio's nbd engine).
const (
	TLSCACert     = "ca-cert.pem"     // the CA peers' certificates must chain to
	TLSServerCert = "server-cert.pem" // a server's certificate (and chain)
	TLSServerKey  = "server-key.pem"  // its private key
	TLSClientCert = "client-cert.pem" // a client's certificate, when the server asks for one
	TLSClientKey  = "client-key.pem"
)

// ServerTLSConfig is the TLS configuration of a server whose credentials
// are in dir: server-cert.pem and server-key.pem, read again at a
// handshake after either file changed (a renewed certificate is served
// without a restart; one that does not load leaves the current one). With
// verifyPeer, clients must present a certificate that chains to dir's
// ca-cert.pem (nbdkit's --tls-verify-peer). TLS 1.2 and later, with the
// same suites as the service's HTTPS (pki.ServerConfig).
func ServerTLSConfig(dir string, verifyPeer bool) (*tls.Config, error) {
	kp := &keyPair{cert: filepath.Join(dir, TLSServerCert), key: filepath.Join(dir, TLSServerKey)}
	if _, err := kp.get(nil); err != nil {
		return nil, err
	}
	cfg := pki.ReloadingConfig(kp.get)
	if verifyPeer {
		pool, err := loadCAs(dir)
		if err != nil {
			return nil, err
		}
		cfg.ClientCAs = pool
		cfg.ClientAuth = tls.RequireAndVerifyClientCert
	}
	return cfg, nil
}

// ClientTLSConfig is the TLS configuration of a client whose credentials
// are in dir: it trusts ca-cert.pem alone, and presents client-cert.pem
// and client-key.pem when the directory has them.
func ClientTLSConfig(dir string) (*tls.Config, error) {
	pool, err := loadCAs(dir)
	if err != nil {
		return nil, err
	}
	cfg := &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	certFile, keyFile := filepath.Join(dir, TLSClientCert), filepath.Join(dir, TLSClientKey)
	if _, err := os.Stat(certFile); errors.Is(err, fs.ErrNotExist) {
		return cfg, nil
	}
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, fmt.Errorf("TLS client certificate in %s: %w", dir, err)
	}
	cfg.Certificates = []tls.Certificate{cert}
	return cfg, nil
}

func loadCAs(dir string) (*x509.CertPool, error) {
	file := filepath.Join(dir, TLSCACert)
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("TLS CA certificate: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(data) {
		return nil, fmt.Errorf("TLS CA certificate %s holds no PEM certificate", file)
	}
	return pool, nil
}

// keyPair is a certificate and key file pair, loaded again when either
// file's size or modification time changes.
type keyPair struct {
	cert, key string

	mu       sync.Mutex
	cur      *tls.Certificate
	certStat fileStamp
	keyStat  fileStamp
}

type fileStamp struct {
	size int64
	mod  time.Time
}

func stamp(path string) fileStamp {
	fi, err := os.Stat(path)
	if err != nil {
		return fileStamp{}
	}
	return fileStamp{fi.Size(), fi.ModTime()}
}

// get returns the current certificate, loading the files again if they
// changed; a pair that fails to load keeps the current one (the first
// load's error is returned).
func (k *keyPair) get(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	cs, ks := stamp(k.cert), stamp(k.key)
	if k.cur != nil && cs == k.certStat && ks == k.keyStat {
		return k.cur, nil
	}
	cert, err := tls.LoadX509KeyPair(k.cert, k.key)
	if err != nil {
		if k.cur != nil {
			return k.cur, nil
		}
		return nil, fmt.Errorf("TLS server certificate: %w", err)
	}
	k.cur, k.certStat, k.keyStat = &cert, cs, ks
	return k.cur, nil
}
