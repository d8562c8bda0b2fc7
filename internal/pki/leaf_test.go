package pki

import (
	"crypto/tls"
	"crypto/x509"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestIssue(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "tls")
	if _, err := Issue(dir, LeafRequest{Names: []string{"host3"}}, t0); err == nil || !strings.Contains(err.Error(), "no CA in") {
		t.Fatalf("Issue without a CA: %v", err)
	}
	if _, err := os.Stat(dir); err == nil {
		t.Fatal("Issue without a CA created the directory")
	}
	if _, err := Ensure(dir, nil, t0); err != nil {
		t.Fatal(err)
	}
	caBefore, _ := os.ReadFile(filepath.Join(dir, CAFile))
	at := t0.Add(time.Hour)

	srv, err := Issue(dir, LeafRequest{Names: []string{"host3.rack1", "10.0.0.3", "[fe80::1]"}}, at)
	if err != nil {
		t.Fatal(err)
	}
	pair, err := tls.X509KeyPair(srv.CertPEM, srv.KeyPEM)
	if err != nil {
		t.Fatal(err)
	}
	leaf, _ := x509.ParseCertificate(pair.Certificate[0])
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(srv.CAPEM)
	for _, name := range []string{"host3.rack1", "10.0.0.3", "fe80::1"} {
		if _, err := leaf.Verify(x509.VerifyOptions{DNSName: name, Roots: pool, CurrentTime: at}); err != nil {
			t.Errorf("server certificate for %s: %v", name, err)
		}
	}
	// Exactly the names asked for: not this machine's, not localhost.
	if _, err := leaf.Verify(x509.VerifyOptions{DNSName: "localhost", Roots: pool, CurrentTime: at}); err == nil {
		t.Error("the server certificate names localhost, which was not asked for")
	}
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: pool, CurrentTime: at, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err == nil {
		t.Error("a server certificate verifies as a client's")
	}

	cli, err := Issue(dir, LeafRequest{Names: []string{"fio"}, Client: true}, at)
	if err != nil {
		t.Fatal(err)
	}
	pair, err = tls.X509KeyPair(cli.CertPEM, cli.KeyPEM)
	if err != nil {
		t.Fatal(err)
	}
	leaf, _ = x509.ParseCertificate(pair.Certificate[0])
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: pool, CurrentTime: at, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		t.Errorf("client certificate: %v", err)
	}
	if leaf.Subject.CommonName != "fio" || len(leaf.DNSNames) != 0 {
		t.Errorf("client certificate names %q %v", leaf.Subject.CommonName, leaf.DNSNames)
	}

	for _, bad := range []LeafRequest{{}, {Names: []string{""}}, {Names: []string{"a b"}}, {Names: []string{"a", "b"}, Client: true}} {
		if _, err := Issue(dir, bad, at); err == nil {
			t.Errorf("Issue(%+v) succeeded", bad)
		}
	}
	if caAfter, _ := os.ReadFile(filepath.Join(dir, CAFile)); string(caAfter) != string(caBefore) {
		t.Error("Issue changed the CA")
	}
}
