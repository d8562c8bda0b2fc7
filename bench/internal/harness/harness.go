// Package harness is what the benchmark mains (bench/*) share around the
// thing they measure: a work directory removed on every exit path, the
// rackpool binary built into it unless one is given, free loopback
// addresses, a started server's output and waiting for it to take
// connections, and the percentile their tables print.
package harness

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"rackpool/api"
	"rackpool/internal/childproc"
)

// WorkDir makes a temporary directory named after prefix and removes it
// at exit (childproc.AtExit: on errors and interrupts too; the main defers
// childproc.RunAtExit). It ends the program if it cannot.
func WorkDir(prefix string) string {
	dir, err := os.MkdirTemp("", prefix)
	if err != nil {
		childproc.Fatal(err)
	}
	childproc.AtExit(func() { os.RemoveAll(dir) })
	return dir
}

// Binary returns bin, or when bin is empty a rackpool binary built from
// ./cmd/rackpool into dir. It ends the program if the build fails.
func Binary(bin, dir string) string {
	if bin != "" {
		return bin
	}
	bin = filepath.Join(dir, "rackpool")
	if out, err := childproc.Command("go", "build", "-o", bin, "./cmd/rackpool").CombinedOutput(); err != nil {
		childproc.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// FreeAddr returns a TCP address on 127.0.0.1 that was free a moment ago.
func FreeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

// Output collects a child process's output (its Stdout and Stderr) for
// the benchmark to search and to show on errors. It keeps the last Max
// bytes (0: all) and is safe for concurrent use.
type Output struct {
	Max int

	mu sync.Mutex
	b  []byte
}

func (o *Output) Write(p []byte) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.b = append(o.b, p...)
	if o.Max > 0 && len(o.b) > o.Max {
		o.b = append([]byte(nil), o.b[len(o.b)-o.Max:]...)
	}
	return len(p), nil
}

// String returns what was kept.
func (o *Output) String() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return string(o.b)
}

// WaitDial waits until addr (host:port, or unix:PATH) takes connections,
// polling every 20 ms. It returns the error exited reports (the server's
// process ended; nil exited: never), or after timeout the last dial
// error.
func WaitDial(addr string, timeout time.Duration, exited func() error) error {
	network, target := "tcp", addr
	if path, ok := strings.CutPrefix(addr, "unix:"); ok {
		network, target = "unix", path
	}
	deadline := time.Now().Add(timeout)
	for {
		c, err := net.DialTimeout(network, target, time.Second)
		if err == nil {
			c.Close()
			return nil
		}
		if exited != nil {
			if xerr := exited(); xerr != nil {
				return xerr
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s not accepting connections after %s: %w", addr, timeout, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Percentile is the p-th percentile (0 to 100) of sorted, ascending: the
// element at (len-1)·p/100, rounded down; 0 for none.
func Percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	return sorted[int(float64(len(sorted)-1)*p/100)]
}

// Serve starts `rackpool serve` of the example rack with its data under
// dir and the administrator's password, plus flags, stops it at exit, and
// returns a client of it as the Administrator once it serves, and the
// file of its CA. It ends the program if serve does not come up.
func Serve(binary, dir, password string, flags ...string) (*api.Client, string) {
	addr, err := FreeAddr()
	if err != nil {
		childproc.Fatal(err)
	}
	var out Output
	cmd := childproc.Command(binary, append([]string{"serve", "--addr", addr, "--data", filepath.Join(dir, "data")}, flags...)...)
	cmd.Env = append(os.Environ(), "RACKPOOL_ADMIN_PASSWORD="+password)
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		childproc.Fatal(err)
	}
	childproc.AtExit(func() { childproc.Stop(cmd); _ = cmd.Wait() })
	if err := WaitDial(addr, 60*time.Second, func() error {
		if cmd.ProcessState != nil {
			return fmt.Errorf("serve exited:\n%s", out.String())
		}
		return nil
	}); err != nil {
		childproc.Fatal(err)
	}
	for !strings.Contains(out.String(), "rackpool serving") {
		time.Sleep(20 * time.Millisecond)
	}
	ca := filepath.Join(dir, "data", "tls", "ca.pem")
	hc, err := api.HTTPClient(ca)
	if err != nil {
		childproc.Fatal(err)
	}
	return &api.Client{URL: "https://" + addr, User: "Administrator", Password: password, HTTP: hc}, ca
}
