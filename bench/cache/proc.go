package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"rackpool/api"
	"rackpool/bench/internal/harness"
	"rackpool/internal/childproc"
)

// proc is a child process started by the benchmark. Every child runs in its
// own process group and gets SIGKILL if the benchmark dies; stopAll ends
// the ones still running, newest first.
type proc struct {
	name    string
	cmd     *exec.Cmd
	logPath string
	exited  chan struct{}
	err     error
}

var (
	procsMu sync.Mutex
	procs   []*proc
)

// startProc starts bin with args, appending env to the environment and
// sending its output to logPath.
func startProc(name, logPath string, env []string, bin string, args ...string) (*proc, error) {
	lf, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd := childproc.Command(bin, args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = lf, lf
	if err := cmd.Start(); err != nil {
		lf.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p := &proc{name: name, cmd: cmd, logPath: logPath, exited: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		lf.Close()
		close(p.exited)
	}()
	procsMu.Lock()
	procs = append(procs, p)
	procsMu.Unlock()
	return p, nil
}

// running reports whether the process has not exited yet.
func (p *proc) running() bool {
	select {
	case <-p.exited:
		return false
	default:
		return true
	}
}

// stop sends SIGTERM to the process group, waits up to 10 s for the
// process to exit, then kills the group.
func (p *proc) stop() {
	if p.running() {
		pid := p.cmd.Process.Pid
		_ = syscall.Kill(-pid, syscall.SIGTERM)
		select {
		case <-p.exited:
		case <-time.After(10 * time.Second):
			_ = syscall.Kill(-pid, syscall.SIGKILL)
			<-p.exited
		}
		// Anything left in the group (there should be nothing).
		_ = syscall.Kill(-pid, syscall.SIGKILL)
	}
	procsMu.Lock()
	for i, q := range procs {
		if q == p {
			procs = append(procs[:i], procs[i+1:]...)
			break
		}
	}
	procsMu.Unlock()
}

// stopAll stops every child still registered, newest first.
func stopAll() {
	for {
		procsMu.Lock()
		if len(procs) == 0 {
			procsMu.Unlock()
			return
		}
		p := procs[len(procs)-1]
		procsMu.Unlock()
		p.stop()
	}
}

// logTail returns the last lines of the process's log, for error messages.
func (p *proc) logTail(n int) string {
	b, err := os.ReadFile(p.logPath)
	if err != nil {
		return ""
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// exitError describes why p is not running, with the end of its log.
func (p *proc) exitError() error {
	return fmt.Errorf("%s exited (%v); log %s:\n%s", p.name, p.err, p.logPath, p.logTail(15))
}

// freePort returns a TCP port on 127.0.0.1 that was free a moment ago.
func freePort() (int, error) {
	addr, err := harness.FreeAddr()
	if err != nil {
		return 0, err
	}
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(port)
}

// waitTCP waits until addr accepts connections, p exits or timeout passes.
func waitTCP(addr string, p *proc, timeout time.Duration) error {
	err := harness.WaitDial(addr, timeout, func() error {
		if !p.running() {
			return p.exitError()
		}
		return nil
	})
	if err != nil && p.running() {
		return fmt.Errorf("%s: %v; log %s:\n%s", p.name, err, p.logPath, p.logTail(15))
	}
	return err
}

// waitHTTP waits until GET url answers 200, trusting caFile (which
// appears once serve has started).
func waitHTTP(url, caFile string, p *proc, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		hc, err := api.HTTPClient(caFile)
		var resp *http.Response
		if err == nil {
			hc.Timeout = 2 * time.Second
			resp, err = hc.Get(url)
		}
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		if !p.running() {
			return p.exitError()
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s: %s did not answer 200 within %s (last: %v); log %s:\n%s", p.name, url, timeout, err, p.logPath, p.logTail(15))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// runEchoServer is the hidden -echo-server mode: a TCP server that reads a
// request (8-byte header: request payload length, reply length, both
// big-endian uint32, then the payload) and answers with reply-length bytes.
// It prints its address on stdout and serves until killed; it returns only
// when listening or accepting fails.
func runEchoServer() error {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	fmt.Println(l.Addr().String())
	for {
		c, err := l.Accept()
		if err != nil {
			return err
		}
		go func(c net.Conn) {
			defer c.Close()
			r := bufio.NewReaderSize(c, 64<<10)
			var hdr [8]byte
			var in, out []byte
			for {
				if _, err := ioReadFull(r, hdr[:]); err != nil {
					return
				}
				n := int(be32(hdr[0:4]))
				m := int(be32(hdr[4:8]))
				if n > 16<<20 || m > 16<<20 {
					return
				}
				if cap(in) < n {
					in = make([]byte, n)
				}
				if _, err := ioReadFull(r, in[:n]); err != nil {
					return
				}
				if cap(out) < m {
					out = make([]byte, m)
				}
				if _, err := c.Write(out[:m]); err != nil {
					return
				}
			}
		}(c)
	}
}

// startEchoServer starts this program in -echo-server mode and returns the
// process and its address.
func startEchoServer(logDir string) (*proc, string, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, "", err
	}
	logPath := logDir + "/echo.log"
	p, err := startProc("echo server", logPath, nil, self, "-echo-server")
	if err != nil {
		return nil, "", err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for ctx.Err() == nil {
		b, _ := os.ReadFile(logPath)
		if line, _, ok := strings.Cut(string(b), "\n"); ok {
			return p, strings.TrimSpace(line), nil
		}
		if !p.running() {
			return nil, "", p.exitError()
		}
		time.Sleep(20 * time.Millisecond)
	}
	p.stop()
	return nil, "", errors.New("echo server did not print its address")
}
