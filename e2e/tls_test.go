package e2e

import (
	"bufio"
	"crypto/sha256"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"rackpool/internal/childproc"
	"rackpool/internal/pki"
)

// caFingerprint is the SHA-256 of the first certificate in a PEM file, as
// serve prints it.
func caFingerprint(t *testing.T, file string) string {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := pem.Decode(data)
	if b == nil {
		t.Fatalf("%s: no PEM", file)
	}
	if _, err := x509.ParseCertificate(b.Bytes); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(b.Bytes)
	var parts []string
	for _, c := range sum {
		parts = append(parts, fmt.Sprintf("%02X", c))
	}
	return strings.Join(parts, ":")
}

// TestHTTPSByDefault starts serve with no TLS flags: it creates its CA in
// the data directory, prints where and its fingerprint, serves HTTPS,
// answers a plain HTTP request with a readable hint, and reuses the CA on
// the next start. The CLI trusts the CA from the data directory on its
// own, and says what to do when it cannot find it.
func TestHTTPSByDefault(t *testing.T) {
	skipShort(t)
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	env := []string{"RACKPOOL_ADMIN_PASSWORD=" + password}
	srv := start(t, data, env)
	fp := caFingerprint(t, srv.ca)
	out := srv.stderr.String()
	if !strings.Contains(out, "Created a certificate authority") || !strings.Contains(out, srv.ca) || !strings.Contains(out, "SHA-256 "+fp) {
		t.Errorf("serve did not print its new CA's path and fingerprint %s:\n%s", fp, out)
	}
	if !strings.Contains(out, "url=https://") {
		t.Errorf("serve does not log an https URL:\n%s", out)
	}
	if code, _ := srv.request("GET", "/redfish/v1/Systems", "", true); code != http.StatusOK {
		t.Fatalf("Basic over HTTPS: %d", code)
	}
	// The data directory holds password hashes and the CA's key.
	for _, d := range []string{data, filepath.Join(data, "tls")} {
		if st, err := os.Stat(d); err != nil || st.Mode().Perm() != 0o700 {
			t.Errorf("%s: mode %v (%v), want 0700", d, st.Mode().Perm(), err)
		}
	}

	// Plain HTTP to the TLS port: a readable answer, not TLS bytes.
	c, err := net.DialTimeout("tcp", srv.addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(c, "GET /redfish/v1 HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("plain HTTP to the HTTPS port: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	c.Close()
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(body), "HTTPS") {
		t.Errorf("plain HTTP to the HTTPS port: %d %q", resp.StatusCode, body)
	}

	// The CLI run beside the data directory trusts its CA unasked;
	// elsewhere it explains what to do.
	cli := func(wd string, extra ...string) (string, error) {
		cmd := childproc.Command(binary, "systems")
		cmd.Dir = wd
		cmd.Env = append(os.Environ(), "RACKPOOL_URL="+srv.url, "RACKPOOL_PASSWORD="+password, "RACKPOOL_CA_FILE=")
		cmd.Env = append(cmd.Env, extra...)
		b, err := cmd.CombinedOutput()
		return string(b), err
	}
	if out, err := cli(dir); err != nil {
		t.Errorf("CLI beside the data directory: %v\n%s", err, out)
	}
	elsewhere := t.TempDir()
	if out, err := cli(elsewhere); err == nil || !strings.Contains(out, "--ca-file or RACKPOOL_CA_FILE") {
		t.Errorf("CLI without the CA: %v\n%s", err, out)
	}
	if out, err := cli(elsewhere, "RACKPOOL_CA_FILE="+srv.ca); err != nil {
		t.Errorf("CLI with RACKPOOL_CA_FILE: %v\n%s", err, out)
	}

	// The next start reuses the CA: clients that trust it keep working.
	old := srv.http
	srv.kill()
	srv = startAt(t, srv.addr, data, env, "--tls-self-signed") // an old script's flag: ignored, with a warning
	if !strings.Contains(srv.stderr.String(), "--tls-self-signed is no longer needed") {
		t.Errorf("no warning for --tls-self-signed:\n%s", srv.stderr)
	}
	if got := caFingerprint(t, srv.ca); got != fp {
		t.Errorf("restart made a new CA: %s, was %s", got, fp)
	}
	if out := srv.stderr.String(); strings.Contains(out, "Created a certificate authority") || !strings.Contains(out, fp) {
		t.Errorf("restart: CA created again, or its fingerprint not logged:\n%s", out)
	}
	srv.http = old
	if code, _ := srv.request("GET", "/redfish/v1/Systems", "", true); code != http.StatusOK {
		t.Errorf("a client of the first start after the restart: %d", code)
	}
}

// TestInsecureHTTP: plain HTTP only on loopback, and then no credentials.
func TestInsecureHTTP(t *testing.T) {
	skipShort(t)
	for _, addr := range []string{"0.0.0.0:0", ":0"} {
		out, err := childproc.Command(binary, "serve", "--insecure-http", "--addr", addr, "--data", t.TempDir()).CombinedOutput()
		if err == nil || !strings.Contains(string(out), "only a loopback address may") {
			t.Errorf("serve --insecure-http --addr %s: %v\n%s", addr, err, out)
		}
	}
	data := t.TempDir()
	srv := start(t, data, []string{"RACKPOOL_ADMIN_PASSWORD=" + password}, "--insecure-http")
	if code, _ := srv.request("GET", "/redfish/v1", "", false); code != http.StatusOK {
		t.Errorf("service root over plain HTTP: %d", code)
	}
	code, body := srv.request("GET", "/redfish/v1/Systems", "", true)
	if code != http.StatusForbidden || !strings.Contains(body, "only over HTTPS") {
		t.Errorf("Basic over plain HTTP: %d %s", code, body)
	}
	code, body = srv.request("POST", "/redfish/v1/SessionService/Sessions", `{"UserName":"Administrator","Password":"`+password+`"}`, false)
	if code != http.StatusForbidden {
		t.Errorf("session creation over plain HTTP: %d %s", code, body)
	}
	if _, err := os.Stat(filepath.Join(data, "tls")); err == nil {
		t.Error("--insecure-http made a CA")
	}
}

// TestOperatorCertificate: --tls-cert and --tls-key serve an operator's
// certificate; no CA of the service's own is made.
func TestOperatorCertificate(t *testing.T) {
	skipShort(t)
	opDir := t.TempDir()
	if _, err := pki.Ensure(opDir, []string{"127.0.0.1"}, time.Now()); err != nil { // stands for the site's CA
		t.Fatal(err)
	}
	data := t.TempDir()
	srv := start(t, data, []string{"RACKPOOL_ADMIN_PASSWORD=" + password},
		"--tls-cert", filepath.Join(opDir, "server.pem"), "--tls-key", filepath.Join(opDir, "server-key.pem"))
	if code, _ := srv.request("GET", "/redfish/v1/Systems", "", true); code != http.StatusOK {
		t.Errorf("with the operator's certificate: %d", code)
	}
	if _, err := os.Stat(filepath.Join(data, "tls")); err == nil {
		t.Error("serve made its own CA although --tls-cert was given")
	}
	if out, err := srv.cli("systems"); err != nil {
		t.Errorf("CLI with the operator's CA: %v\n%s", err, out)
	}
}

// TestDataDirectoryLock: a second serve on a data directory in use stops
// with a clear error and leaves the first one serving; after a kill -9
// the directory is free again.
func TestDataDirectoryLock(t *testing.T) {
	skipShort(t)
	data := t.TempDir()
	env := []string{"RACKPOOL_ADMIN_PASSWORD=" + password}
	srv := start(t, data, env)
	out, err := childproc.Command(binary, "serve", "--addr", freeAddr(t), "--data", data).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "is in use by another rackpool serve") ||
		!strings.Contains(string(out), fmt.Sprintf("pid %d", srv.cmd.Process.Pid)) {
		t.Errorf("second serve on the same data: %v\n%s", err, out)
	}
	if code, _ := srv.request("GET", "/redfish/v1/Systems", "", true); code != http.StatusOK {
		t.Errorf("the first serve after the second tried: %d", code)
	}
	srv.kill()
	srv = startAt(t, srv.addr, data, env)
	if code, _ := srv.request("GET", "/redfish/v1/Systems", "", true); code != http.StatusOK {
		t.Errorf("serve after kill -9 of the previous one: %d", code)
	}
}
