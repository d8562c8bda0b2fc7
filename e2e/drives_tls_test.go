package e2e

import (
	"bytes"
	"context"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"rackpool/internal/childproc"
	"rackpool/internal/pki"
)

// TestDriveTLS: pooled drives over NBD with TLS, as docs/storage.md
// ("TLS") tells an operator to run them. A listener beyond loopback
// without TLS is refused (blocknode and drive connect) and nothing
// listens; with certificates from `rackpool nbd-certs`, a blocknode
// advertises nbds://, drive connect reaches it over TLS and serves the
// drive on every interface to clients with a certificate of the CA, which
// nbdinfo and qemu-img use; clients without TLS or without a certificate
// are refused and change nothing; a blocknode whose certificate another CA
// signed is refused by drive connect.
func TestDriveTLS(t *testing.T) {
	skipShort(t)
	needTools(t, "nbdinfo", "qemu-img")
	top, err := filepath.Abs("testdata/drives.yaml")
	if err != nil {
		t.Fatal(err)
	}
	s := startDefault(t, "--topology", top, "--drive-lease", time.Minute.String())
	c := s.client()
	drives := t.TempDir()
	certs := shortDir(t)
	nodeDir, connectDir, clientDir := filepath.Join(certs, "node"), filepath.Join(certs, "connect"), filepath.Join(certs, "client")
	for _, args := range [][]string{
		{"--out", nodeDir, "--server", "127.0.0.1,localhost"},
		{"--out", connectDir, "--server", "127.0.0.1,localhost"},
		{"--out", clientDir, "--client", "e2e"},
	} {
		if out, err := s.cli(append([]string{"nbd-certs", "--data", s.data}, args...)...); err != nil {
			t.Fatalf("nbd-certs %v: %v\n%s", args, err, out)
		}
	}

	// Beyond loopback without TLS: refused, nothing listens, nothing
	// registers.
	port := freePort(t)
	out, err := refused(t, s, "blocknode", "--name", "host1", "--drive-dir", drives, "--control", s.url, "--addr", "0.0.0.0:"+port)
	if err == nil || !strings.Contains(out, "add --tls-certificates DIR") {
		t.Fatalf("blocknode --addr 0.0.0.0: %v\n%s", err, out)
	}
	notListening(t, port)
	if ns, err := c.BlockNodes(context.Background()); err != nil || len(ns) != 0 {
		t.Fatalf("blocknodes after the refusal: %v %+v", err, ns)
	}

	node := startProc(t, s, "blocknode", "--name", "host1", "--drive-dir", drives, "--control", s.url, "--tls-certificates", nodeDir)
	waitDrives(t, s, 6)
	if out, err := s.cli("blocknodes"); err != nil || !strings.Contains(out, "nbds://"+node.addr) {
		t.Fatalf("blocknodes: %v\n%s", err, out)
	}
	// A token's URI is nbds://, and opens the drive over TLS only.
	out, err = s.cli("drive", "token", "ssd2", "--rights", "r")
	if err != nil {
		t.Fatalf("drive token: %v\n%s", err, out)
	}
	uri := strings.TrimSpace(out[strings.LastIndex(strings.TrimSpace(out), "\n")+1:])
	if !strings.HasPrefix(uri, "nbds://"+node.addr+"/ssd2@") {
		t.Fatalf("drive token printed %q", uri)
	}
	if info := run(t, "nbdinfo", "--json", uri+"?tls-certificates="+clientDir); !strings.Contains(info, `"is_read_only": true`) {
		t.Fatalf("nbdinfo over TLS at the blocknode:\n%s", info)
	}
	if out, err := childproc.Command("nbdinfo", "nbd://"+strings.TrimPrefix(uri, "nbds://")).CombinedOutput(); err == nil {
		t.Fatalf("nbdinfo without TLS opened the drive at the blocknode:\n%s", out)
	}

	// drive connect beyond loopback: refused without TLS, served with it.
	out, err = refused(t, s, "drive", "connect", "ssd1", "--listen", "tcp:0.0.0.0:"+port)
	if err == nil || !strings.Contains(out, "add --tls-certificates DIR") || !strings.Contains(out, "no authentication") {
		t.Fatalf("drive connect --listen tcp:0.0.0.0 without TLS: %v\n%s", err, out)
	}
	notListening(t, port)
	connect := startConnect(t, s, "ssd1", "--listen", "tcp:0.0.0.0:"+port, "--tls-certificates", connectDir)
	host, tcpURI := "127.0.0.1:"+port, "nbds://127.0.0.1:"+port+"/ssd1?tls-certificates="+clientDir
	if info := run(t, "nbdinfo", "--json", tcpURI); !strings.Contains(info, `"TLS": true`) || !strings.Contains(info, `"export-size": 67108864`) {
		t.Fatalf("nbdinfo through drive connect over TLS:\n%s", info)
	}
	object := "tls-creds-x509,id=tls0,dir=" + clientDir + ",endpoint=client"
	opts := "driver=nbd,server.type=inet,server.host=127.0.0.1,server.port=" + port + ",export=ssd1,tls-creds=tls0"
	dir := t.TempDir()
	src, back := filepath.Join(dir, "src.raw"), filepath.Join(dir, "back.raw")
	data := make([]byte, 64<<20)
	for i := range data {
		data[i] = byte(i*13 + i>>11)
	}
	if err := os.WriteFile(src, data, 0o600); err != nil {
		t.Fatal(err)
	}
	run(t, "qemu-img", "convert", "-n", "-f", "raw", src, "--object", object, "--target-image-opts", opts)
	readBack := func(when string) {
		t.Helper()
		os.Remove(back)
		run(t, "qemu-img", "convert", "-O", "raw", "--object", object, "--image-opts", opts, back)
		if got, err := os.ReadFile(back); err != nil || !bytes.Equal(got, data) {
			t.Fatalf("%s: the drive read back over TLS differs (%v)", when, err)
		}
	}
	readBack("after writing")
	// Refused: no TLS, and TLS without a client certificate. Neither
	// writes a byte.
	zeros := filepath.Join(dir, "zeros.raw")
	if err := os.WriteFile(zeros, make([]byte, 1<<20), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := childproc.Command("qemu-img", "convert", "-n", "-f", "raw", zeros, "-O", "raw", "nbd://"+host+"/ssd1").CombinedOutput(); err == nil ||
		!strings.Contains(strings.ToLower(string(out)), "tls") {
		t.Fatalf("qemu-img without TLS: %v\n%s", err, out)
	}
	noCert := "tls-creds-x509,id=tls0,dir=" + nodeDir + ",endpoint=client" // the CA, no client certificate
	if out, err := childproc.Command("qemu-img", "convert", "-n", "-f", "raw", zeros, "--object", noCert, "--target-image-opts", opts).CombinedOutput(); err == nil {
		t.Fatalf("qemu-img without a client certificate wrote:\n%s", out)
	}
	readBack("after the refused clients")
	connect.kill()

	// A blocknode whose certificate another CA signed: drive connect,
	// trusting the service's CA, refuses it.
	other := t.TempDir()
	if _, err := pki.Ensure(filepath.Join(other, "tls"), nil, time.Now()); err != nil {
		t.Fatal(err)
	}
	strange := filepath.Join(certs, "strange")
	if out, err := s.cli("nbd-certs", "--data", other, "--out", strange, "--server", "127.0.0.1"); err != nil {
		t.Fatalf("nbd-certs: %v\n%s", err, out)
	}
	node.kill()
	node = startProc(t, s, "blocknode", "--name", "host1", "--drive-dir", drives, "--control", s.url, "--tls-certificates", strange)
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		d, err := c.Drive(context.Background(), "ssd1")
		if err == nil && d.InService && d.Endpoint == "nbds://"+node.addr {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("ssd1 not served by the restarted blocknode at %s: %v %+v", node.addr, err, d)
		}
	}
	// The drive connect killed above still holds ssd1's write
	// reservation (a killed holder keeps it until preempted).
	out, err = s.cli("drive", "connect", "ssd1", "--listen", "unix:"+filepath.Join(shortDir(t), "d.sock"), "--preempt")
	if err == nil || !strings.Contains(out, "certificate signed by unknown authority") || !strings.Contains(out, `"ssd1@REDACTED"`) {
		t.Fatalf("drive connect to a blocknode of another CA: %v\n%s", err, out)
	}
}

// refused runs a command that must exit at once, refusing what it was
// asked; one still running after 30 s is serving, which fails the test.
func refused(t *testing.T, s *server, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := childproc.CommandContext(ctx, binary, args...)
	cmd.Env = s.env()
	out, err := cmd.CombinedOutput()
	if ctx.Err() != nil {
		t.Fatalf("%v: still running after 30 s (serving instead of refusing):\n%s", args, out)
	}
	return string(out), err
}

func freePort(t *testing.T) string {
	_, port, _ := net.SplitHostPort(freeAddr(t))
	return port
}

// notListening fails if something takes connections on port.
func notListening(t *testing.T, port string) {
	t.Helper()
	if c, err := net.Dial("tcp", "127.0.0.1:"+port); err == nil {
		c.Close()
		t.Fatalf("something listens on port %s", port)
	}
}

// waitDrives waits until n drives are in service, with a blocknode
// endpoint each.
func waitDrives(t *testing.T, s *server, n int) {
	t.Helper()
	c := s.client()
	deadline := time.Now().Add(20 * time.Second)
	for {
		ds, err := c.Drives(context.Background())
		in := 0
		for _, d := range ds {
			if d.InService && d.Endpoint != "" {
				in++
			}
		}
		if err == nil && in == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d drives in service: %v %+v", in, n, err, ds)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// startConnect runs `rackpool drive connect DRIVE args...` and waits until
// it serves.
func startConnect(t *testing.T, s *server, drive string, args ...string) *proc {
	t.Helper()
	cmd := childproc.Command(binary, append([]string{"drive", "connect", drive, "--url", s.url}, args...)...)
	cmd.Env = s.env()
	p := &proc{cmd: cmd, stderr: &syncBuffer{}}
	cmd.Stderr = p.stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.kill)
	deadline := time.Now().Add(20 * time.Second)
	for !strings.Contains(p.stderr.String(), "drive connected") {
		if time.Now().After(deadline) || p.cmd.ProcessState != nil {
			t.Fatalf("drive connect did not come up:\n%s", p.stderr)
		}
		time.Sleep(20 * time.Millisecond)
	}
	return p
}
