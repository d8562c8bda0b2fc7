package pki

import (
	"crypto/tls"
	"crypto/x509"
	"io"
	"net"
	"os"
	"path/filepath"
	"rackpool/api"
	"slices"
	"strings"
	"testing"
	"time"
)

var t0 = time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)

func verify(t *testing.T, m *Material, host string) error {
	t.Helper()
	data, err := os.ReadFile(m.CAFile)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(data) {
		t.Fatal("ca.pem holds no certificate")
	}
	_, err = m.Certificate.Leaf.Verify(x509.VerifyOptions{DNSName: host, Roots: pool, CurrentTime: m.Certificate.Leaf.NotBefore.Add(2 * time.Hour)})
	return err
}

func TestEnsureCreatesThenReuses(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "tls")
	m, err := Ensure(dir, []string{"10.1.2.3", "rack1.example"}, t0)
	if err != nil {
		t.Fatal(err)
	}
	if !m.Created || !m.Issued {
		t.Errorf("first call: Created %v Issued %v, want both", m.Created, m.Issued)
	}
	if m.Damaged != nil {
		t.Errorf("first call: Damaged %v, want nil (no server pair yet is not a damaged one)", m.Damaged)
	}
	for _, h := range []string{"localhost", "127.0.0.1", "::1", "10.1.2.3", "rack1.example"} {
		if err := verify(t, m, h); err != nil {
			t.Errorf("certificate for %s: %v", h, err)
		}
	}
	if err := verify(t, m, "10.9.9.9"); err == nil {
		t.Error("certificate verifies for a host it was not issued for")
	}
	if m.Certificate.Leaf.Version != 3 {
		t.Errorf("X.509 version %d, want 3", m.Certificate.Leaf.Version)
	}
	if len(strings.Split(m.CASHA256, ":")) != 32 {
		t.Errorf("fingerprint %q is not 32 hex pairs", m.CASHA256)
	}
	for _, f := range []string{caKeyFile, serverKeyFile} {
		st, err := os.Stat(filepath.Join(dir, f))
		if err != nil {
			t.Fatal(err)
		}
		if st.Mode().Perm() != 0o600 {
			t.Errorf("%s mode %v, want 0600", f, st.Mode().Perm())
		}
	}

	// A later start reuses both.
	again, err := Ensure(dir, []string{"10.1.2.3"}, t0.Add(24*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if again.Created || again.Issued || again.CASHA256 != m.CASHA256 ||
		!again.Certificate.Leaf.Equal(m.Certificate.Leaf) {
		t.Errorf("second call: Created %v Issued %v, CA %s (was %s)", again.Created, again.Issued, again.CASHA256, m.CASHA256)
	}

	// A new listen address: the same CA issues a new server certificate.
	moved, err := Ensure(dir, []string{"192.0.2.7"}, t0.Add(48*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if moved.Created || !moved.Issued || moved.CASHA256 != m.CASHA256 {
		t.Errorf("new address: Created %v Issued %v CA changed %v", moved.Created, moved.Issued, moved.CASHA256 != m.CASHA256)
	}
	if err := verify(t, moved, "192.0.2.7"); err != nil {
		t.Errorf("reissued certificate: %v", err)
	}

	// Near expiry: issued again.
	late := moved.Certificate.Leaf.NotAfter.Add(-renewBefore + time.Hour)
	renewed, err := Ensure(dir, []string{"192.0.2.7"}, late)
	if err != nil {
		t.Fatal(err)
	}
	if !renewed.Issued || !renewed.Certificate.Leaf.NotAfter.After(moved.Certificate.Leaf.NotAfter) {
		t.Errorf("near expiry: Issued %v, NotAfter %v (was %v)", renewed.Issued, renewed.Certificate.Leaf.NotAfter, moved.Certificate.Leaf.NotAfter)
	}
}

func TestEnsureRefusesDamagedCA(t *testing.T) {
	for _, tc := range []struct {
		name   string
		damage func(dir string) error
		want   string
	}{
		{"garbage CA", func(dir string) error { return os.WriteFile(filepath.Join(dir, CAFile), []byte("junk"), 0o644) }, "ca.pem: no PEM certificate"},
		{"CA key missing", func(dir string) error { return os.Remove(filepath.Join(dir, caKeyFile)) }, "ca-key.pem"},
		{"CA key of another certificate", func(dir string) error {
			k, err := os.ReadFile(filepath.Join(dir, serverKeyFile))
			if err != nil {
				return err
			}
			return os.WriteFile(filepath.Join(dir, caKeyFile), k, 0o600)
		}, "does not hold the key of"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			m, err := Ensure(dir, nil, t0)
			if err != nil {
				t.Fatal(err)
			}
			if err := tc.damage(dir); err != nil {
				t.Fatal(err)
			}
			before, _ := os.ReadFile(m.CAFile)
			_, err = Ensure(dir, nil, t0)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Ensure on a damaged CA: %v, want an error naming %q", err, tc.want)
			}
			if after, _ := os.ReadFile(m.CAFile); string(after) != string(before) {
				t.Error("the CA file was replaced")
			}
		})
	}
}

// TestEnsureMendsServerPair: the server pair can be issued again from the
// CA, so a damaged one (or a crash between writing its key and its
// certificate) is replaced, under the same CA.
func TestEnsureMendsServerPair(t *testing.T) {
	for _, tc := range []struct {
		name   string
		damage func(dir string) error
	}{
		{"key of another certificate", func(dir string) error {
			k, err := os.ReadFile(filepath.Join(dir, caKeyFile))
			if err != nil {
				return err
			}
			return os.WriteFile(filepath.Join(dir, serverKeyFile), k, 0o600)
		}},
		{"certificate truncated", func(dir string) error {
			p := filepath.Join(dir, serverFile)
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			return os.WriteFile(p, data[:len(data)/3], 0o644)
		}},
		{"certificate missing", func(dir string) error { return os.Remove(filepath.Join(dir, serverFile)) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			m, err := Ensure(dir, nil, t0)
			if err != nil {
				t.Fatal(err)
			}
			if err := tc.damage(dir); err != nil {
				t.Fatal(err)
			}
			again, err := Ensure(dir, nil, t0)
			if err != nil {
				t.Fatalf("Ensure on a damaged server pair: %v", err)
			}
			if !again.Issued || again.Damaged == nil || again.CASHA256 != m.CASHA256 {
				t.Errorf("Issued %v Damaged %v, CA kept %v", again.Issued, again.Damaged, again.CASHA256 == m.CASHA256)
			}
			if err := verify(t, again, "localhost"); err != nil {
				t.Error(err)
			}
		})
	}
	// A crash after the first CA key was written but before its
	// certificate: nobody can trust that CA yet, so a new one is made.
	dir := t.TempDir()
	if _, err := Ensure(dir, nil, t0); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(dir, CAFile)); err != nil {
		t.Fatal(err)
	}
	if m, err := Ensure(dir, nil, t0); err != nil || !m.Created {
		t.Errorf("CA key without its certificate: %v (created %v), want a new CA", err, m != nil && m.Created)
	}
}

// TestEnsureIssuesAbsentServerPairQuietly: a server pair that is simply
// not there (both files moved away, as the operator may to force a new
// one) is issued again without calling it damaged: serve warns only about
// files it found and could not use.
func TestEnsureIssuesAbsentServerPairQuietly(t *testing.T) {
	dir := t.TempDir()
	if _, err := Ensure(dir, nil, t0); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{serverFile, serverKeyFile} {
		if err := os.Remove(filepath.Join(dir, f)); err != nil {
			t.Fatal(err)
		}
	}
	m, err := Ensure(dir, nil, t0)
	if err != nil {
		t.Fatal(err)
	}
	if !m.Issued || m.Created || m.Damaged != nil {
		t.Errorf("Issued %v Created %v Damaged %v, want a new server pair under the same CA and no damage", m.Issued, m.Created, m.Damaged)
	}
}

// TestEnsureRefusesCAOutsideItsValidity: an expired CA, or one dated in
// the future, stops the start with the reason.
func TestEnsureRefusesCAOutsideItsValidity(t *testing.T) {
	dir := t.TempDir()
	m, err := Ensure(dir, nil, t0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Ensure(dir, nil, m.CANotAfter.Add(time.Hour)); err == nil || !strings.Contains(err.Error(), "expired on") {
		t.Errorf("after the CA's expiry: %v", err)
	}
	if _, err := Ensure(dir, nil, t0.Add(-48*time.Hour)); err == nil || !strings.Contains(err.Error(), "valid only from") {
		t.Errorf("before the CA's start: %v", err)
	}
	// Within the CA's last year the server certificate ends with it.
	late, err := Ensure(dir, nil, m.CANotAfter.Add(-100*24*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if late.Certificate.Leaf.NotAfter.After(m.CANotAfter) {
		t.Errorf("server certificate outlives its CA: %v > %v", late.Certificate.Leaf.NotAfter, m.CANotAfter)
	}
}

// TestHandshake serves with ServerConfig and connects with ClientConfig
// trusting ca.pem: TLS 1.3 and 1.2 work, 1.1 is refused, and a client
// that trusts only the system's roots refuses the certificate.
func TestHandshake(t *testing.T) {
	dir := t.TempDir()
	m, err := Ensure(dir, nil, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	ln, err := tls.Listen("tcp", "127.0.0.1:0", ServerConfig(m.Certificate))
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				_, _ = io.WriteString(c, "hello")
			}()
		}
	}()
	dial := func(cfg *tls.Config) error {
		c, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", ln.Addr().String(), cfg)
		if err != nil {
			return err
		}
		defer c.Close()
		got, err := io.ReadAll(c)
		if err == nil && string(got) != "hello" {
			t.Errorf("read %q", got)
		}
		return err
	}
	trusting, err := api.TLSConfig(m.CAFile)
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range []uint16{tls.VersionTLS13, tls.VersionTLS12} {
		cfg := trusting.Clone()
		cfg.MinVersion, cfg.MaxVersion = v, v
		if err := dial(cfg); err != nil {
			t.Errorf("TLS %x: %v", v, err)
		}
	}
	old := trusting.Clone()
	old.MinVersion, old.MaxVersion = tls.VersionTLS11, tls.VersionTLS11
	if err := dial(old); err == nil || !strings.Contains(err.Error(), "protocol version") {
		t.Errorf("TLS 1.1: %v, want the server to refuse the protocol version", err)
	}
	system, err := api.TLSConfig("")
	if err != nil {
		t.Fatal(err)
	}
	if err := dial(system); err == nil {
		t.Error("a client without ca.pem trusted the certificate")
	}
	if _, err := api.TLSConfig(filepath.Join(dir, serverKeyFile)); err == nil || !strings.Contains(err.Error(), "no PEM certificate") {
		t.Errorf("ClientConfig on a key file: %v", err)
	}
	if _, err := api.TLSConfig(filepath.Join(dir, "missing.pem")); err == nil {
		t.Error("ClientConfig on a missing file: no error")
	}
}

func TestSANs(t *testing.T) {
	name, _ := os.Hostname()
	got := SANs([]string{"10.1.2.3", "[::1]", "Rack1.Example"})
	for _, want := range []string{"localhost", "127.0.0.1", "::1", "10.1.2.3", "rack1.example", strings.ToLower(name)} {
		if !slices.Contains(got, want) {
			t.Errorf("SANs %v lack %s", got, want)
		}
	}
	if !slices.IsSorted(got) || len(slices.Compact(slices.Clone(got))) != len(got) {
		t.Errorf("SANs %v not sorted and unique", got)
	}
	for host, want := range map[string]string{"fe80::1%eth0": "fe80::1", "[fe80::2%25eth0]": "fe80::2", "rack2.example.": "rack2.example"} {
		if got := SANs([]string{host}); !slices.Contains(got, want) || slices.ContainsFunc(got, func(n string) bool {
			return strings.ContainsAny(n, "%") || strings.HasSuffix(n, ".")
		}) {
			t.Errorf("SANs(%q) = %v, want %s and no zone or trailing dot", host, got, want)
		}
	}
	all := SANs([]string{"0.0.0.0"})
	addrs, _ := net.InterfaceAddrs()
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && !n.IP.IsLinkLocalUnicast() && !slices.Contains(all, n.IP.String()) {
			t.Errorf("listening on 0.0.0.0: SANs %v lack interface address %s", all, n.IP)
		}
	}
}
