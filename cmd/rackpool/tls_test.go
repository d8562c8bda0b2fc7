package main

import (
	"crypto/x509"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"rackpool/api"
)

func TestServerTLS(t *testing.T) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	data := t.TempDir()
	for _, bad := range []struct {
		cert, key string
		insecure  bool
		addr      string
		want      string
	}{
		{"cert.pem", "", false, "127.0.0.1:8080", "go together"},
		{"", "key.pem", false, "127.0.0.1:8080", "go together"},
		{"cert.pem", "key.pem", true, "127.0.0.1:8080", "exclude each other"},
		{"", "", true, "0.0.0.0:8080", "only a loopback address may"},
		{"", "", true, ":8080", "only a loopback address may"},
		{"", "", true, "10.1.2.3:8080", "only a loopback address may"},
		{"", "", true, "rack1.example:8080", "only a loopback address may"},
		{"", "", false, "127.0.0.1", "--addr"},
		{"missing.pem", "missing-key.pem", false, "127.0.0.1:8080", "--tls-cert"},
	} {
		if _, _, err := serverTLS(bad.cert, bad.key, bad.insecure, bad.addr, data, log); err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("serverTLS(%q, %q, insecure %v, %q): %v, want an error with %q", bad.cert, bad.key, bad.insecure, bad.addr, err, bad.want)
		}
	}
	for _, addr := range []string{"127.0.0.1:8080", "[::1]:8080", "localhost:8080", "LocalHost:8080"} {
		if c, _, err := serverTLS("", "", true, addr, data, log); c != nil || err != nil {
			t.Errorf("--insecure-http on %s: %v, %v; want plain HTTP", addr, c, err)
		}
	}

	// The default: the service's own CA in DATA/tls.
	c, _, err := serverTLS("", "", false, "10.1.2.3:8443", data, log)
	if err != nil {
		t.Fatal(err)
	}
	served, err := c.GetCertificate(nil)
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := x509.ParseCertificate(served.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	caPEM, err := os.ReadFile(filepath.Join(data, "tls", "ca.pem"))
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caPEM)
	for _, host := range []string{"127.0.0.1", "localhost", "10.1.2.3"} {
		if _, err := leaf.Verify(x509.VerifyOptions{DNSName: host, Roots: pool}); err != nil {
			t.Errorf("certificate for %s: %v", host, err)
		}
	}
	if c.MinVersion < 0x0303 {
		t.Errorf("MinVersion %x, want TLS 1.2 or later", c.MinVersion)
	}
	// The client side trusts the same file.
	hc, err := api.HTTPClient(filepath.Join(data, "tls", "ca.pem"))
	if err != nil || hc == nil {
		t.Fatalf("api.HTTPClient: %v", err)
	}
	if _, err := api.HTTPClient(filepath.Join(data, "nothing.pem")); err == nil {
		t.Error("api.HTTPClient with a missing CA file: no error")
	}
}
