package node

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"rackpool/internal/nbd"
	"rackpool/internal/pki"
)

func TestLoopbackOnly(t *testing.T) {
	for _, tc := range []struct {
		addr string
		want bool
	}{
		{"127.0.0.1:10809", true},
		{"127.1.2.3:10809", true},
		{"[::1]:10809", true},
		{"localhost:10809", true},
		{"LOCALHOST:1", true},
		{"0.0.0.0:10809", false},
		{"[::]:10809", false},
		{":10809", false},
		{"10.0.0.3:10809", false},
		{"[fe80::1%eth0]:10809", false},
		{"host3:10809", false}, // a name may resolve anywhere
		{"127.0.0.1", false},   // not an address
	} {
		if got := loopbackOnly(tc.addr); got != tc.want {
			t.Errorf("loopbackOnly(%q) = %v, want %v", tc.addr, got, tc.want)
		}
	}
}

// TestListenRule: a listener beyond loopback needs TLS, and the error
// names the flag to add.
func TestListenRule(t *testing.T) {
	data := t.TempDir()
	if _, err := pki.Ensure(filepath.Join(data, "tls"), nil, time.Now()); err != nil {
		t.Fatal(err)
	}
	creds := filepath.Join(t.TempDir(), "creds")
	if err := execute("nbd-certs", "--data", data, "--out", creds, "--server", "127.0.0.1,localhost", "--client", "c"); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{nbd.TLSCACert, nbd.TLSServerCert, nbd.TLSServerKey, nbd.TLSClientCert, nbd.TLSClientKey} {
		fi, err := os.Stat(filepath.Join(creds, name))
		if err != nil {
			t.Fatal(err)
		}
		if strings.HasSuffix(name, "-key.pem") && fi.Mode().Perm() != 0o600 {
			t.Errorf("%s has mode %v", name, fi.Mode().Perm())
		}
	}

	for _, tc := range []struct {
		network, addr, dir string
		err                string // "" for allowed
	}{
		{"unix", "/run/d.sock", "", ""},
		{"tcp", "127.0.0.1:10809", "", ""},
		{"tcp", "0.0.0.0:10809", "", "add --tls-certificates DIR"},
		{"tcp", ":10809", "", "add --tls-certificates DIR"},
		{"tcp", "host3:10809", "", "add --tls-certificates DIR"},
		{"tcp", "0.0.0.0:10809", creds, ""},
		{"tcp", "0.0.0.0:10809", t.TempDir(), "--tls-certificates"}, // an empty directory
	} {
		cfg, err := connectListenTLS(tc.dir, "ssd1", tc.network, tc.addr)
		switch {
		case tc.err == "" && err != nil:
			t.Errorf("drive connect %s:%s %q: %v", tc.network, tc.addr, tc.dir, err)
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("drive connect %s:%s %q: %v, want an error saying %q", tc.network, tc.addr, tc.dir, err, tc.err)
		case tc.err == "" && (cfg != nil) != (tc.dir != ""):
			t.Errorf("drive connect %s:%s %q: TLS %v", tc.network, tc.addr, tc.dir, cfg != nil)
		}
		if tc.network != "tcp" {
			continue
		}
		cfg, endpoint, err := blocknodeTLS(tc.dir, tc.addr, "")
		switch {
		case tc.err == "" && err != nil:
			t.Errorf("blocknode --addr %s %q: %v", tc.addr, tc.dir, err)
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("blocknode --addr %s %q: %v, want an error saying %q", tc.addr, tc.dir, err, tc.err)
		case err == nil:
			want := "10.0.0.3:10809"
			if cfg != nil {
				want = "nbds://" + want
			}
			if got := endpoint("10.0.0.3:10809"); got != want {
				t.Errorf("blocknode --addr %s %q advertises %q, want %q", tc.addr, tc.dir, got, want)
			}
		}
	}
	if _, _, err := blocknodeTLS(creds, "0.0.0.0:1", "nbds://h:1"); err == nil {
		t.Error("--advertise with a scheme accepted")
	}
}

func TestNbdCertsRefusals(t *testing.T) {
	out := filepath.Join(t.TempDir(), "out")
	for _, args := range [][]string{
		{"--out", out},    // nothing to issue
		{"--server", "h"}, // no --out
		{"--data", t.TempDir(), "--out", out, "--server", "h"}, // no CA
	} {
		if err := execute(append([]string{"nbd-certs"}, args...)...); err == nil {
			t.Errorf("nbd-certs %v succeeded", args)
		}
	}
	if _, err := os.Stat(out); err == nil {
		t.Error("a refused nbd-certs created its output directory")
	}
}
