//go:build linux && (amd64 || arm64 || riscv64 || loong64)

package pager

import (
	"bufio"
	"context"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"rackpool/internal/childproc"
	"rackpool/internal/memory"
)

// The test binary is also the pagers' helper (Open starts it again with
// HelperEnv set) and the memnode the tests page to (startNode starts it
// again with memnodeEnv set).
func TestMain(m *testing.M) {
	if IsHelper() {
		os.Exit(RunHelper())
	}
	if os.Getenv(memnodeEnv) != "" {
		os.Exit(serveMemnode())
	}
	os.Exit(m.Run())
}

var pageSize = int64(os.Getpagesize())

const memnodeEnv = "PAGER_TEST_MEMNODE" // capacity,hex key,map socket path

// node is a real memnode on loopback, in its own process. It must not run
// in the process whose region it backs: a thread of that process waiting
// on a fault can hold up a stop-the-world of its runtime (see the package
// documentation), and then the memnode's goroutines, which would serve
// the fault, are stopped too.
type node struct {
	addr string
	sock string // the local socket mapped leases are served on
	key  memory.Key
	cmd  *exec.Cmd
	in   io.WriteCloser
	out  *bufio.Reader
	stop func()
}

// serveMemnode runs the memnode: it prints its address, then serves on
// loopback TCP and on a unix socket for mapped leases until its standard
// input closes. A line "revoke LEASE" on standard input
// revokes a lease for an hour.
func serveMemnode() int {
	var capacity uint64
	parts := strings.SplitN(os.Getenv(memnodeEnv), ",", 3)
	if len(parts) != 3 {
		fmt.Fprintln(os.Stderr, "memnode: bad", memnodeEnv)
		return 2
	}
	if _, err := fmt.Sscanf(parts[0], "%d", &capacity); err != nil {
		fmt.Fprintln(os.Stderr, "memnode:", err)
		return 2
	}
	keyHex, sock := parts[1], parts[2]
	key, err := hex.DecodeString(keyHex)
	if err != nil {
		fmt.Fprintln(os.Stderr, "memnode:", err)
		return 2
	}
	s, err := memory.NewServer(memory.ServerOptions{Node: "mem0", Capacity: capacity, Key: key})
	if err != nil {
		fmt.Fprintln(os.Stderr, "memnode:", err)
		return 2
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, "memnode:", err)
		return 2
	}
	ul, err := net.Listen("unix", sock)
	if err != nil {
		fmt.Fprintln(os.Stderr, "memnode:", err)
		return 2
	}
	go s.Serve(l)
	go s.Serve(ul)
	fmt.Println(l.Addr())
	sc := bufio.NewScanner(os.Stdin)
	for sc.Scan() {
		if lease, ok := strings.CutPrefix(sc.Text(), "revoke "); ok {
			s.Revoke(lease, time.Now().Add(time.Hour))
			fmt.Println("revoked")
		}
	}
	s.Close()
	return 0
}

func startNode(t testing.TB, capacity uint64) *node {
	t.Helper()
	key, err := memory.NewKey()
	if err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(t.TempDir(), "mem0.sock")
	cmd := childproc.Command(os.Args[0])
	cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%d,%x,%s", memnodeEnv, capacity, []byte(key), sock))
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	n := &node{sock: sock, key: key, cmd: cmd, in: in, out: bufio.NewReader(stdout)}
	stopped := false
	n.stop = func() {
		if !stopped {
			stopped = true
			in.Close()
			cmd.Wait()
		}
	}
	t.Cleanup(n.stop)
	line, err := n.out.ReadString('\n')
	if err != nil {
		t.Fatalf("memnode did not start: %v", err)
	}
	n.addr = strings.TrimSpace(line)
	return n
}

// revoke revokes lease "l1" on the node.
func (n *node) revoke(t testing.TB) {
	t.Helper()
	if _, err := io.WriteString(n.in, "revoke l1\n"); err != nil {
		t.Fatal(err)
	}
	if line, err := n.out.ReadString('\n'); err != nil || line != "revoked\n" {
		t.Fatalf("revoke: %q %v", line, err)
	}
}

// token signs a read-write token for lease "l1" of length bytes at the
// start of the node's capacity, edited by edit.
func (n *node) token(t testing.TB, length uint64, edit func(*memory.Claims)) string {
	t.Helper()
	c := memory.Claims{Lease: "l1", Node: "mem0", Offset: 0, Length: length,
		Rights: memory.RightRead | memory.RightWrite, Expiry: time.Now().Add(time.Hour)}
	if edit != nil {
		edit(&c)
	}
	tok, err := n.key.Sign(c)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// open opens a pager of size bytes with local bytes of budget on n over
// TCP, and closes it when the test ends. Its I/O timeout is a minute: a loopback
// request on a loaded machine is slow, not lost, and no test here fails
// the pager by a timeout.
func (n *node) open(t testing.TB, size, local int64, edit func(*Options)) *Pager {
	t.Helper()
	opts := Options{Size: size, Local: local, Endpoint: n.addr, Token: n.token(t, uint64(size), nil), IOTimeout: time.Minute}
	if edit != nil {
		edit(&opts)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	p, err := Open(ctx, opts)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

// transports are the two ways a pager reaches its lease: a tcp edit
// leaves the options alone, a mapped one serves from the lease mapped
// through the node's local socket (and drops the TCP endpoint, so that
// nothing can go over TCP).
var transports = []struct {
	name string
	edit func(*node) func(*Options)
}{
	{"tcp", func(*node) func(*Options) { return func(*Options) {} }},
	{"mapped", func(n *node) func(*Options) { return func(o *Options) { o.MapSocket, o.Endpoint = n.sock, "" } }},
}

// then chains option edits.
func then(edits ...func(*Options)) func(*Options) {
	return func(o *Options) {
		for _, e := range edits {
			if e != nil {
				e(o)
			}
		}
	}
}
