// Package pgtest starts a real PostgreSQL server for tests: Debian's
// postgresql binaries (initdb, postgres), a cluster in a temporary directory
// owned by the test, listening on loopback and on a unix socket in that
// directory, with password (SCRAM) authentication for one superuser. When
// the test runs as root the cluster runs as the postgres user, as
// PostgreSQL refuses to run as root. The server runs in the foreground as
// a child of the test (never detached by pg_ctl), in a process group of its
// own that the kernel kills when the test process dies, so that a failed or
// killed test leaves no server behind.
//
// A test that needs one calls Start; without the binaries it is skipped,
// unless RACKPOOL_E2E is 1 (as make test sets it), where it fails: CI
// installs postgresql, so a missing server there is an error, not a skip.
package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"rackpool/internal/childproc"

	"github.com/jackc/pgx/v5"
)

// User is the superuser every cluster is created with.
const User = "rackpool"

// Server is one running (or stopped) PostgreSQL cluster.
type Server struct {
	Dir      string // the cluster's directory: data/, the socket, the log
	Port     int
	Password string

	bin  string // directory of initdb and postgres
	cred *syscall.Credential
	mu   sync.Mutex
	proc *exec.Cmd     // the running postmaster, nil when stopped
	done chan struct{} // closed when proc has exited
}

// Bin returns the directory holding initdb and pg_ctl: $RACKPOOL_PG_BIN, the
// directory of initdb on the PATH, or the newest of Debian's
// /usr/lib/postgresql/N/bin.
func Bin() (string, error) {
	if d := os.Getenv("RACKPOOL_PG_BIN"); d != "" {
		return d, nil
	}
	if p, err := exec.LookPath("initdb"); err == nil {
		if r, err := filepath.EvalSymlinks(p); err == nil {
			p = r
		}
		return filepath.Dir(p), nil
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin/initdb")
	if len(dirs) == 0 {
		return "", errors.New("PostgreSQL's initdb not found on the PATH or under /usr/lib/postgresql (apt-get install postgresql)")
	}
	slices.SortFunc(dirs, func(a, b string) int {
		va, _ := strconv.Atoi(filepath.Base(filepath.Dir(filepath.Dir(a))))
		vb, _ := strconv.Atoi(filepath.Base(filepath.Dir(filepath.Dir(b))))
		return va - vb
	})
	return filepath.Dir(dirs[len(dirs)-1]), nil
}

// Start creates a cluster in a new temporary directory and starts it; the
// test's cleanup stops it and removes the directory.
func Start(tb testing.TB) *Server {
	tb.Helper()
	bin, err := Bin()
	if err != nil {
		if os.Getenv("RACKPOOL_E2E") == "1" {
			tb.Fatalf("RACKPOOL_E2E=1 needs PostgreSQL: %v", err)
		}
		tb.Skipf("skipping: %v", err)
	}
	s, err := New(bin)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		// An immediate stop lets the postmaster remove its shared memory
		// (a SIGKILL would leave it); Stop kills what does not stop.
		s.mu.Lock()
		running := s.proc != nil
		s.mu.Unlock()
		if running {
			s.Stop("immediate")
		}
		os.RemoveAll(s.Dir)
	})
	return s
}

// New creates a cluster with the binaries in bin and starts it. The caller
// stops it and removes its Dir.
func New(bin string) (*Server, error) {
	s, err := create(bin)
	if err != nil {
		return nil, err
	}
	if err := s.Start(); err != nil {
		os.RemoveAll(s.Dir)
		return nil, err
	}
	return s, nil
}

func create(bin string) (*Server, error) {
	dir, err := os.MkdirTemp("", "rackpool-pg-")
	if err != nil {
		return nil, err
	}
	s := &Server{Dir: dir, bin: bin, Password: randomHex(12)}
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			return nil, fmt.Errorf("running as root needs the postgres user to run PostgreSQL: %w", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		s.cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
		if err := os.Chown(dir, uid, gid); err != nil {
			return nil, err
		}
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		return nil, err
	}
	pwfile := filepath.Join(dir, "pwfile")
	if err := os.WriteFile(pwfile, []byte(s.Password+"\n"), 0o600); err != nil {
		return nil, err
	}
	if s.cred != nil {
		os.Chown(pwfile, int(s.cred.Uid), int(s.cred.Gid))
	}
	out, err := s.command("initdb", "-D", s.data(), "-U", User, "--pwfile", pwfile,
		"--auth-local=scram-sha-256", "--auth-host=scram-sha-256", "-E", "UTF8", "--locale=C.UTF-8", "--no-instructions").CombinedOutput()
	os.Remove(pwfile)
	if err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("initdb: %v\n%s", err, out)
	}
	s.Port, err = freePort()
	if err != nil {
		return nil, err
	}
	return s, nil
}

func (s *Server) data() string { return filepath.Join(s.Dir, "data") }

// Log returns the server's log so far.
func (s *Server) Log() string {
	b, _ := os.ReadFile(filepath.Join(s.Dir, "log"))
	return string(b)
}

func (s *Server) command(name string, args ...string) *exec.Cmd {
	cmd := exec.Command(filepath.Join(s.bin, name), args...)
	cmd.Dir = s.Dir
	cmd.Env = append(os.Environ(), "LC_ALL=C.UTF-8")
	if s.cred != nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: s.cred}
	}
	return cmd
}

// Start starts the stopped cluster on its port and waits until it accepts
// connections (at most two minutes, for a loaded machine).
func (s *Server) Start() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.proc != nil {
		return errors.New("pgtest: the server is already running")
	}
	logf, err := os.OpenFile(filepath.Join(s.Dir, "log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer logf.Close()
	cmd := s.command("postgres", "-D", s.data(),
		"-c", "listen_addresses=127.0.0.1",
		"-p", strconv.Itoa(s.Port),
		"-k", s.Dir,
		"-c", "max_connections=300",
		"-c", "shared_buffers=64MB",
		"-c", "fsync=on",
		"-c", "synchronous_commit=on",
		"-c", "log_min_messages=warning")
	cmd.Stdout, cmd.Stderr = logf, logf
	childproc.Bind(cmd)
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start postgres: %w", err)
	}
	done := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(done)
	}()
	s.proc, s.done = cmd, done
	deadline := time.Now().Add(2 * time.Minute)
	for {
		out, err := s.command("pg_isready", "-q", "-h", s.Dir, "-p", strconv.Itoa(s.Port), "-t", "5").CombinedOutput()
		if err == nil {
			return nil
		}
		select {
		case <-done:
			s.proc, s.done = nil, nil
			return fmt.Errorf("postgres exited while starting: %s\n%s", cmd.ProcessState, s.Log())
		default:
		}
		if time.Now().After(deadline) {
			s.kill()
			return fmt.Errorf("postgres did not accept connections within 2 minutes (pg_isready: %v %s)\n%s", err, out, s.Log())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Stop stops the cluster as pg_ctl's mode would: "smart" (wait for
// sessions), "fast" (roll back sessions, checkpoint) or "immediate" (no
// checkpoint: the next start recovers from the WAL, as after a crash). It
// waits for the server to exit; one still running after a minute is
// killed.
func (s *Server) Stop(mode string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	sig := map[string]syscall.Signal{"smart": syscall.SIGTERM, "fast": syscall.SIGINT, "immediate": syscall.SIGQUIT}[mode]
	if sig == 0 {
		return fmt.Errorf("pgtest: stop mode %q: want smart, fast or immediate", mode)
	}
	if s.proc == nil {
		return errors.New("pgtest: the server is not running")
	}
	_ = s.proc.Process.Signal(sig)
	select {
	case <-s.done:
	case <-time.After(time.Minute):
		s.kill()
		return fmt.Errorf("postgres did not stop within a minute of the %s stop; killed\n%s", mode, s.Log())
	}
	childproc.Stop(s.proc) // a backend the postmaster left behind
	s.proc, s.done = nil, nil
	return nil
}

// kill kills the server's process group and waits for the postmaster.
func (s *Server) kill() {
	if s.proc == nil {
		return
	}
	childproc.Stop(s.proc)
	<-s.done
	s.proc, s.done = nil, nil
}

// Addr is the server's loopback TCP address.
func (s *Server) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(s.Port)) }

// URL returns a connection URL for database db through addr (the server's
// own Addr, or a proxy in front of it), with the superuser's credentials.
func (s *Server) URL(addr, db string) string {
	u := url.URL{Scheme: "postgres", User: url.UserPassword(User, s.Password), Host: addr, Path: "/" + db,
		RawQuery: "sslmode=disable"}
	return u.String()
}

// CreateDatabase creates database name (a fresh one for each test) and
// returns its URL on the server's own address.
func (s *Server) CreateDatabase(tb testing.TB, name string) string {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, s.URL(s.Addr(), "postgres"))
	if err != nil {
		tb.Fatalf("connect to the test server: %v", err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
		tb.Fatalf("create database %s: %v", name, err)
	}
	return s.URL(s.Addr(), name)
}

// DatabaseName turns a test's name into a database name: lower case,
// letters, digits and underscores, with a random suffix.
func DatabaseName(tb testing.TB) string {
	var b strings.Builder
	for _, r := range strings.ToLower(tb.Name()) {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' {
			b.WriteRune(r)
		} else {
			b.WriteByte('_')
		}
	}
	name := b.String()
	if len(name) > 40 {
		name = name[len(name)-40:]
	}
	return "t_" + name + "_" + randomHex(4)
}

func randomHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
