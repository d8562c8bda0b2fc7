package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"math/big"
	"net"
	"time"
)

// tlsConfig returns the TLS configuration serve listens with, nil for
// plain HTTP. Redfish (DSP0266) requires HTTPS wherever HTTP Basic
// authentication is accepted; --tls-self-signed is for tests and
// development (the DMTF validators run against it), a deployment passes a
// real certificate with --tls-cert and --tls-key.
func tlsConfig(certFile, keyFile string, selfSigned bool, addr string) (*tls.Config, error) {
	var cert tls.Certificate
	switch {
	case certFile != "" || keyFile != "":
		if certFile == "" || keyFile == "" {
			return nil, errors.New("--tls-cert and --tls-key go together")
		}
		if selfSigned {
			return nil, errors.New("--tls-self-signed and --tls-cert exclude each other")
		}
		var err error
		if cert, err = tls.LoadX509KeyPair(certFile, keyFile); err != nil {
			return nil, err
		}
	case selfSigned:
		var err error
		if cert, err = selfSignedCert(addr); err != nil {
			return nil, err
		}
	default:
		return nil, nil
	}
	return &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}, nil
}

// selfSignedCert makes an ephemeral X.509 v3 certificate for localhost,
// the loopback addresses and the host of addr.
func selfSignedCert(addr string) (tls.Certificate, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return tls.Certificate{}, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: "rackpool (self-signed)", Organization: []string{"rackpool"}},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(365 * 24 * time.Hour),
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
		DNSNames:              []string{"localhost"},
		IPAddresses:           []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
	}
	if host, _, err := net.SplitHostPort(addr); err == nil && host != "" {
		if ip := net.ParseIP(host); ip != nil {
			if !ip.IsLoopback() && !ip.IsUnspecified() {
				tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
			}
		} else if host != "localhost" {
			tmpl.DNSNames = append(tmpl.DNSNames, host)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return tls.Certificate{}, err
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, nil
}
