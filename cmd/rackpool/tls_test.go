package main

import (
	"crypto/x509"
	"testing"
)

func TestTLSConfig(t *testing.T) {
	if c, err := tlsConfig("", "", false, "127.0.0.1:8080"); c != nil || err != nil {
		t.Fatalf("no TLS flags: %v, %v; want plain HTTP", c, err)
	}
	for _, bad := range [][2]string{{"cert.pem", ""}, {"", "key.pem"}} {
		if _, err := tlsConfig(bad[0], bad[1], false, ""); err == nil {
			t.Errorf("--tls-cert %q --tls-key %q: no error", bad[0], bad[1])
		}
	}
	if _, err := tlsConfig("cert.pem", "key.pem", true, ""); err == nil {
		t.Error("--tls-cert with --tls-self-signed: no error")
	}

	c, err := tlsConfig("", "", true, "10.1.2.3:8443")
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(c.Certificates[0].Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	if cert.Version != 3 {
		t.Errorf("certificate version %d, want X.509 v3 (DSP0266)", cert.Version)
	}
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	for _, host := range []string{"127.0.0.1", "localhost", "10.1.2.3"} {
		if _, err := cert.Verify(x509.VerifyOptions{DNSName: host, Roots: pool}); err != nil {
			t.Errorf("self-signed certificate for %s: %v", host, err)
		}
	}
}
