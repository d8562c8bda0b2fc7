package api

import (
	"context"
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestClientTrust: New trusts $RACKPOOL_CA_FILE, else ./data/tls/ca.pem,
// else only the system's roots; an unreadable CA file is reported on
// every request.
func TestClientTrust(t *testing.T) {
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"Id": "ok"}`))
	}))
	defer srv.Close()
	dir := t.TempDir()
	ca := filepath.Join(dir, "data", "tls", "ca.pem")
	if err := os.MkdirAll(filepath.Dir(ca), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o644); err != nil {
		t.Fatal(err)
	}
	get := func() error {
		var out struct{ Id string }
		_, err := New(srv.URL, "u", "p").Do(context.Background(), "GET", "/redfish/v1", nil, &out)
		if err == nil && out.Id != "ok" {
			t.Errorf("decoded %+v", out)
		}
		return err
	}
	t.Chdir(t.TempDir())
	t.Setenv("RACKPOOL_CA_FILE", "")
	if err := get(); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Errorf("without the CA: %v, want a certificate error", err)
	}
	t.Setenv("RACKPOOL_CA_FILE", ca)
	if err := get(); err != nil {
		t.Errorf("with RACKPOOL_CA_FILE: %v", err)
	}
	t.Setenv("RACKPOOL_CA_FILE", "")
	t.Chdir(dir)
	if CAFile() != DefaultCAFile {
		t.Errorf("CAFile() = %q beside data/, want %q", CAFile(), DefaultCAFile)
	}
	if err := get(); err != nil {
		t.Errorf("beside the data directory: %v", err)
	}
	junk := filepath.Join(dir, "junk.pem")
	if err := os.WriteFile(junk, []byte("not a certificate"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("RACKPOOL_CA_FILE", junk)
	if err := get(); err == nil || !strings.Contains(err.Error(), "holds no PEM certificate") {
		t.Errorf("with a junk CA file: %v", err)
	}
}

// TestNoCredentialsInClearText: the client never sends a password over
// plain HTTP.
func TestNoCredentialsInClearText(t *testing.T) {
	hit := false
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { hit = true }))
	defer srv.Close()
	_, err := New(srv.URL, "u", "p").Do(context.Background(), "GET", "/redfish/v1", nil, nil)
	if err == nil || !strings.Contains(err.Error(), "use an https:// URL") || hit {
		t.Errorf("plain HTTP: %v, request reached the server %v", err, hit)
	}
}
