package pki

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"rackpool/internal/clock"
)

// TestOwnSourceRenews: the service's own certificate is issued again from
// the same CA near its expiry, by Refresh or by Run on the clock, and the
// notice of a created CA is written once.
func TestOwnSourceRenews(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "tls")
	clk := clock.NewManual(time.Now())
	var notice bytes.Buffer
	s, err := Own(dir, []string{"127.0.0.1"}, SourceOptions{Clock: clk, Notice: &notice})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(notice.String(), "Created a certificate authority") || !strings.Contains(notice.String(), filepath.Join(dir, "ca.pem")) {
		t.Errorf("notice %q", notice.String())
	}
	first := s.Certificate()
	if got, err := s.Config().GetCertificate(nil); err != nil || got != first {
		t.Errorf("Config serves %p, %v; want the source's %p", got, err, first)
	}
	notice.Reset()
	if err := s.Refresh(); err != nil || s.Certificate() != first {
		t.Errorf("refresh far from expiry: %v, certificate changed %v", err, s.Certificate() != first)
	}
	if notice.Len() != 0 {
		t.Errorf("a second notice: %q", notice.String())
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan struct{})
	go func() { s.Run(ctx, time.Hour); close(done) }()
	clk.Advance(first.Leaf.NotAfter.Add(-24 * time.Hour).Sub(clk.Now()))
	// Run's ticker may start after that jump: a tick an hour on.
	for deadline := time.Now().Add(10 * time.Second); s.Certificate() == first; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("Run did not renew the certificate a day before its expiry")
		}
		clk.Advance(time.Hour)
	}
	if renewed := s.Certificate(); !renewed.Leaf.NotAfter.After(first.Leaf.NotAfter) {
		t.Error("the renewed certificate expires no later")
	}
	cancel()
	<-done
}

// TestFilesSource: an operator's files are read again on Refresh; a
// failed reload keeps the current certificate.
func TestFilesSource(t *testing.T) {
	if _, err := Files(filepath.Join(t.TempDir(), "missing.pem"), "missing-key.pem", SourceOptions{}); err == nil {
		t.Error("missing files accepted")
	}
	opDir := t.TempDir()
	if _, err := Ensure(opDir, nil, time.Now()); err != nil {
		t.Fatal(err)
	}
	cert, key := filepath.Join(opDir, "server.pem"), filepath.Join(opDir, "server-key.pem")
	s, err := Files(cert, key, SourceOptions{})
	if err != nil {
		t.Fatal(err)
	}
	before := s.Certificate()
	if _, err := Ensure(opDir, []string{"10.9.8.7"}, time.Now()); err != nil { // the operator renews
		t.Fatal(err)
	}
	if err := s.Refresh(); err != nil || s.Certificate() == before {
		t.Errorf("operator's renewed files: %v, served the new one %v", err, s.Certificate() != before)
	}
	current := s.Certificate()
	if err := os.WriteFile(cert, []byte("half-written"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := s.Refresh(); err == nil || s.Certificate() != current {
		t.Errorf("damaged files: %v, kept the current certificate %v", err, s.Certificate() == current)
	}
}
