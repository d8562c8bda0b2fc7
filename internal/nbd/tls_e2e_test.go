package nbd

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// TLS against third-party tools: nbdinfo (libnbd) and qemu-img as clients
// of the server, nbdkit --tls=require as the client's server. The
// credentials directories are in the layout all of them read.

func (env *testEnv) tlsURIs(export, certs string) []string {
	return []string{
		"nbds://" + env.tcp + "/" + export + "?tls-certificates=" + certs,
		"nbds+unix:///" + export + "?socket=" + env.sock + "&tls-certificates=" + certs,
	}
}

func TestNbdinfoTLS(t *testing.T) {
	nbdinfo := needTool(t, "nbdinfo")
	creds := newCreds(t, "localhost", "127.0.0.1")
	env := startTLSEnv(t, creds, true)
	for _, uri := range env.tlsURIs("disk", creds.client) {
		out, err := run(t, time.Minute, nbdinfo, "--json", uri)
		if err != nil {
			t.Fatalf("nbdinfo --json %s: %v\n%s", uri, err, out)
		}
		var info struct {
			Protocol string `json:"protocol"`
			TLS      bool   `json:"TLS"`
			Exports  []struct {
				Size     uint64   `json:"export-size"`
				Contexts []string `json:"contexts"`
			} `json:"exports"`
		}
		if err := json.Unmarshal([]byte(out), &info); err != nil {
			t.Fatalf("nbdinfo --json: %v\n%s", err, out)
		}
		if !info.TLS || len(info.Exports) != 1 || info.Exports[0].Size != testSize ||
			fmt.Sprint(info.Exports[0].Contexts) != "[base:allocation]" {
			t.Fatalf("nbdinfo over TLS reports %+v\n%s", info, out)
		}
	}
	out, err := run(t, time.Minute, nbdinfo, "--list", env.tlsURIs("", creds.client)[0])
	if err != nil || !strings.Contains(out, `export="disk"`) {
		t.Fatalf("nbdinfo --list over TLS: %v\n%s", err, out)
	}
}

// TestNbdinfoTLSRefused: nbdinfo fails and opens nothing when TLS cannot
// be had; the server's log says why. libnbd 1.14's own message is as
// terse as GnuTLS makes it ("connection is closed" after a refused
// STARTTLS, "A TLS fatal alert has been received"), against nbdkit too.
func TestNbdinfoTLSRefused(t *testing.T) {
	nbdinfo := needTool(t, "nbdinfo")
	creds := newCreds(t, "localhost", "127.0.0.1")
	other := newCreds(t, "localhost", "127.0.0.1")
	var tlsLog, plainLog logBuffer
	cfg := serverTLS(t, creds.server, true)
	tlsEnv := startEnv(t, func(s *Server, _ *testExports) { s.TLSConfig, s.Logger = cfg, tlsLog.logger() })
	plainEnv := startEnv(t, func(s *Server, _ *testExports) { s.Logger = plainLog.logger() })
	serverOnly := filepath.Join(t.TempDir(), "no-client-cert")
	if err := os.MkdirAll(serverOnly, 0o700); err != nil {
		t.Fatal(err)
	}
	ca, err := os.ReadFile(filepath.Join(creds.client, TLSCACert))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(serverOnly, TLSCACert), ca, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		env     *testEnv
		log     *logBuffer
		uri     string
		want    string // in nbdinfo's message, lower case
		wantLog string // in the server's log
	}{
		{"plain client, TLS server", tlsEnv, &tlsLog, "nbd://" + tlsEnv.tcp + "/disk", "tls", ""},
		{"TLS client, plain server", plainEnv, &plainLog, plainEnv.tlsURIs("disk", creds.client)[0], "", ""},
		{"server of another CA", tlsEnv, &tlsLog, tlsEnv.tlsURIs("disk", other.client)[0], "certificate", "TLS handshake"},
		{"no client certificate", tlsEnv, &tlsLog, tlsEnv.tlsURIs("disk", serverOnly)[0], "tls", "client didn't provide a certificate"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := tc.env.exports.opens.Load()
			out, err := run(t, time.Minute, nbdinfo, tc.uri)
			if err == nil {
				t.Fatalf("nbdinfo connected:\n%s", out)
			}
			if !strings.Contains(strings.ToLower(out), tc.want) {
				t.Fatalf("nbdinfo's message does not mention %q:\n%s", tc.want, out)
			}
			if n := tc.env.exports.opens.Load() - before; n != 0 {
				t.Fatalf("the export was opened %d times", n)
			}
			if tc.wantLog != "" {
				tc.log.wait(t, tc.wantLog)
			}
		})
	}
}

// logBuffer collects a server's log.
type logBuffer struct {
	mu   sync.Mutex
	buf  bytes.Buffer
	cond *sync.Cond
}

func (b *logBuffer) logger() *slog.Logger {
	b.cond = sync.NewCond(&b.mu)
	return slog.New(slog.NewTextHandler(b, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.cond.Broadcast()
	return b.buf.Write(p)
}

// wait waits until the log holds s (the server logs a failed negotiation
// once it has seen the client go).
func (b *logBuffer) wait(t *testing.T, s string) {
	t.Helper()
	ctx := testCtx(t)
	stop := context.AfterFunc(ctx, func() {
		b.mu.Lock()
		b.cond.Broadcast()
		b.mu.Unlock()
	})
	defer stop()
	b.mu.Lock()
	defer b.mu.Unlock()
	for !strings.Contains(b.buf.String(), s) {
		if ctx.Err() != nil {
			t.Fatalf("the server's log does not say %q:\n%s", s, b.buf.String())
		}
		b.cond.Wait()
	}
}

// TestQemuImgTLS writes an image through qemu-img over TLS and reads it
// back the same way.
func TestQemuImgTLS(t *testing.T) {
	qemuImg := needTool(t, "qemu-img")
	creds := newCreds(t, "localhost", "127.0.0.1")
	env := startTLSEnv(t, creds, true)
	host, port, _ := strings.Cut(env.tcp, ":")
	object := "tls-creds-x509,id=tls0,dir=" + creds.client + ",endpoint=client"
	opts := "driver=nbd,server.type=inet,server.host=" + host + ",server.port=" + port + ",export=disk,tls-creds=tls0"
	unixOpts := "driver=nbd,server.type=unix,server.path=" + env.sock + ",export=disk,tls-creds=tls0,tls-hostname=localhost"

	dir := t.TempDir()
	src, dst := filepath.Join(dir, "src.raw"), filepath.Join(dir, "dst.raw")
	data := randBytes(9, testSize)
	copy(data[4<<20:6<<20], make([]byte, 2<<20))
	if err := os.WriteFile(src, data, 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := run(t, 2*time.Minute, qemuImg, "info", "--object", object, "--image-opts", opts)
	if err != nil || !strings.Contains(out, fmt.Sprint(testSize)) {
		t.Fatalf("qemu-img info over TLS: %v\n%s", err, out)
	}
	if out, err := run(t, 2*time.Minute, qemuImg, "convert", "-n", "-f", "raw", src, "--object", object,
		"--target-image-opts", opts); err != nil {
		t.Fatalf("qemu-img convert to the TLS export: %v\n%s", err, out)
	}
	if out, err := run(t, 2*time.Minute, qemuImg, "convert", "-O", "raw", "--object", object, "--image-opts", unixOpts, dst); err != nil {
		t.Fatalf("qemu-img convert from the TLS export (unix socket): %v\n%s", err, out)
	}
	got, err := os.ReadFile(dst)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, data) {
		t.Fatal("the image read back over TLS differs from the one written")
	}
	// Without TLS the same server refuses, and the image stays as it is.
	out, err = run(t, time.Minute, qemuImg, "convert", "-n", "-f", "raw", src, "-O", "raw", "nbd://"+env.tcp+"/disk")
	if err == nil || !strings.Contains(strings.ToLower(out), "tls") {
		t.Fatalf("qemu-img without TLS: %v\n%s", err, out)
	}
	if img, err := os.ReadFile(env.image); err != nil || !bytes.Equal(img, data) {
		t.Fatalf("the image changed after a refused client: %v", err)
	}
}

// TestClientAgainstNbdkitTLS: the client against nbdkit --tls=require,
// with and without nbdkit asking for its certificate.
func TestClientAgainstNbdkitTLS(t *testing.T) {
	creds := newCreds(t, "localhost")
	for _, verify := range []bool{false, true} {
		t.Run(fmt.Sprintf("verify-peer=%v", verify), func(t *testing.T) {
			args := []string{"--tls=require", "--tls-certificates=" + creds.server}
			if verify {
				args = append(args, "--tls-verify-peer")
			}
			sock := startNbdkit(t, args...)
			ctx := testCtx(t)
			c, err := clientTLS(t, creds.client).Dial(ctx, "unix", sock, "")
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			data := randBytes(11, 1<<20+17)
			if err := c.WriteAt(ctx, data, 4096, false); err != nil {
				t.Fatal(err)
			}
			got := make([]byte, len(data))
			if err := c.ReadAt(ctx, got, 4096); err != nil || !bytes.Equal(got, data) {
				t.Fatalf("read back over TLS: %v", err)
			}
			if _, err := Dial(ctx, "unix", sock, ""); err == nil || !strings.Contains(err.Error(), "requires TLS") {
				t.Fatalf("plain client of nbdkit --tls=require: %v", err)
			}
		})
	}
}
