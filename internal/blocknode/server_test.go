package blocknode_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"rackpool/internal/blocknode"
	"rackpool/internal/nbd"
)

var ctx = context.Background()

// control is a scripted control plane.
type control struct {
	mu     sync.Mutex
	key    blocknode.Key
	drives []blocknode.Assigned
	lease  time.Duration
	calls  int
	down   bool
	inUse  []string // as the last heartbeat said
}

func (c *control) Heartbeat(_ context.Context, hb blocknode.Heartbeat) (blocknode.Assignment, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.calls++
	c.inUse = hb.InUse
	if c.down {
		return blocknode.Assignment{}, errors.New("control plane unreachable")
	}
	return blocknode.Assignment{Key: c.key, Drives: append([]blocknode.Assigned(nil), c.drives...), LeaseTTL: c.lease}, nil
}

func (c *control) set(f func(*control)) {
	c.mu.Lock()
	f(c)
	c.mu.Unlock()
}

type node struct {
	srv   *blocknode.Server
	agent *blocknode.Agent
	addr  string
	ctl   *control
	dir   string
}

func startNode(t *testing.T) *node {
	t.Helper()
	return startNodeLog(t, nil)
}

func startNodeLog(t *testing.T, log *slog.Logger) *node {
	t.Helper()
	dir := t.TempDir()
	key, _ := blocknode.NewKey()
	ctl := &control{key: key, drives: []blocknode.Assigned{{ID: "d1", Epoch: 3, Size: 1 << 20}}, lease: 300 * time.Millisecond}
	srv, err := blocknode.New(blocknode.Options{Dir: dir, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	agent := &blocknode.Agent{Server: srv, Control: ctl, Host: "h", Endpoint: "x", Epoch: 1, Interval: 50 * time.Millisecond}
	srv.SetRefresh(agent.Beat)
	if err := agent.Beat(ctx); err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { _ = srv.Close() })
	return &node{srv: srv, agent: agent, addr: l.Addr().String(), ctl: ctl, dir: dir}
}

// token signs a token for drive; one with write rights is of write
// reservation generation 1 (writerToken chooses).
func (n *node) token(t *testing.T, drive string, epoch uint64, r blocknode.Rights, ttl time.Duration) string {
	t.Helper()
	var gen uint64
	if r&blocknode.RightWrite != 0 {
		gen = 1
	}
	return n.writerToken(t, drive, epoch, r, ttl, gen)
}

func (n *node) writerToken(t *testing.T, drive string, epoch uint64, r blocknode.Rights, ttl time.Duration, gen uint64) string {
	t.Helper()
	tok, err := n.ctl.key.Sign(blocknode.Claims{Drive: drive, Epoch: epoch, Rights: r, Expiry: time.Now().Add(ttl), Generation: gen})
	if err != nil {
		t.Fatal(err)
	}
	return blocknode.ExportName(drive, tok)
}

// TestTokensAndEpochs: the image is created at the assigned size; a valid
// token opens the drive; expired, wrong-epoch, other-drive, forged and
// missing tokens do not; a read-only token cannot write.
func TestTokensAndEpochs(t *testing.T) {
	n := startNode(t)
	rw := blocknode.RightRead | blocknode.RightWrite
	c, err := nbd.Dial(ctx, "tcp", n.addr, n.token(t, "d1", 3, rw, time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if c.Size() != 1<<20 {
		t.Fatalf("size %d", c.Size())
	}
	if fi, err := os.Stat(filepath.Join(n.dir, "d1.img")); err != nil || fi.Size() != 1<<20 {
		t.Fatalf("image: %v %v", fi, err)
	}
	if err := c.WriteAt(ctx, bytes.Repeat([]byte{9}, 4096), 0, true); err != nil {
		t.Fatal(err)
	}
	other, _ := blocknode.NewKey()
	forged, _ := other.Sign(blocknode.Claims{Drive: "d1", Epoch: 3, Rights: rw, Expiry: time.Now().Add(time.Minute)})
	for name, export := range map[string]string{
		"expired":     n.token(t, "d1", 3, rw, -time.Second),
		"old epoch":   n.token(t, "d1", 2, rw, time.Minute),
		"newer epoch": n.token(t, "d1", 4, rw, time.Minute),
		"other drive": "d1@" + n.token(t, "d2", 3, rw, time.Minute)[3:],
		"forged":      blocknode.ExportName("d1", forged),
		"unknown":     n.token(t, "d9", 3, rw, time.Minute),
	} {
		if c, err := nbd.Dial(ctx, "tcp", n.addr, export); err == nil {
			c.Close()
			t.Errorf("%s token opened the drive", name)
		}
	}
	ro, err := nbd.Dial(ctx, "tcp", n.addr, n.token(t, "d1", 3, blocknode.RightRead, time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	if !ro.Flags().ReadOnly {
		t.Error("a read-only token's export is not read-only")
	}
	got := make([]byte, 4096)
	if err := ro.ReadAt(ctx, got, 0); err != nil || got[0] != 9 {
		t.Fatalf("read-only read: %x %v", got[0], err)
	}
	if err := ro.WriteAt(ctx, got, 0, false); err == nil {
		t.Error("a read-only token wrote")
	}
}

// TestFencedByEpochAndLease: an open connection is refused with EPERM once
// the drive moves (new epoch), and once the node lease lapses because the
// control plane is unreachable; a token at the drive's new epoch opens it
// at once (the node asks for a fresh assignment instead of waiting).
func TestFencedByEpochAndLease(t *testing.T) {
	n := startNode(t)
	rw := blocknode.RightRead | blocknode.RightWrite
	c, err := nbd.Dial(ctx, "tcp", n.addr, n.token(t, "d1", 3, rw, time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	buf := make([]byte, 512)
	if err := c.ReadAt(ctx, buf, 0); err != nil {
		t.Fatal(err)
	}
	// The drive comes back at epoch 5 (moved away and back): the old
	// connection is fenced, a token at 5 opens it without waiting for the
	// next heartbeat.
	n.ctl.set(func(c *control) { c.drives[0].Epoch = 5 })
	c5, err := nbd.Dial(ctx, "tcp", n.addr, n.token(t, "d1", 5, rw, time.Minute))
	if err != nil {
		t.Fatalf("newer epoch after refresh: %v", err)
	}
	defer c5.Close()
	if err := c.ReadAt(ctx, buf, 0); !errors.Is(err, nbd.ErrPermission) {
		t.Fatalf("old-epoch connection read: %v, want EPERM", err)
	}
	if err := c5.WriteAt(ctx, buf, 0, false); err != nil {
		t.Fatal(err)
	}
	// The control plane goes away: no heartbeat renews the lease.
	n.ctl.set(func(c *control) { c.down = true })
	deadline := time.Now().Add(5 * time.Second)
	for {
		_ = n.agent.Beat(ctx)
		err := c5.WriteAt(ctx, buf, 0, false)
		if errors.Is(err, nbd.ErrPermission) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("still writing after the lease should have lapsed: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if len(n.srv.Served()) != 0 {
		t.Errorf("serving %v without a lease", n.srv.Served())
	}
}

// syncBuffer is a log destination the server's goroutines share.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// TestTokensNotLogged: export names carry bearer tokens; at debug level
// the server logs connections by drive with the token redacted, whether
// the token opened the drive or not.
func TestTokensNotLogged(t *testing.T) {
	var buf syncBuffer
	n := startNodeLog(t, slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug})))
	rw := blocknode.RightRead | blocknode.RightWrite
	good := n.token(t, "d1", 3, rw, time.Minute)
	c, err := nbd.Dial(ctx, "tcp", n.addr, good)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	c.Close()
	bad := []string{n.token(t, "d1", 2, rw, time.Minute), n.token(t, "d9", 3, rw, time.Minute), "d1@not-a-token"}
	for _, name := range bad {
		if c, err := nbd.Dial(ctx, "tcp", n.addr, name); err == nil {
			c.Close()
			t.Fatalf("%s opened the drive", name)
		}
	}
	_ = n.srv.Close() // the connection's end is logged before Close returns
	out := buf.String()
	if !strings.Contains(out, "d1@REDACTED") {
		t.Fatalf("the connection was not logged by drive:\n%s", out)
	}
	for _, name := range append(bad, good) {
		_, tok, _ := blocknode.SplitExportName(name)
		if strings.Contains(out, tok) {
			t.Fatalf("a token reached the log:\n%s", out)
		}
	}
}

// TestHeartbeatReportsDrivesInUse: a drive with a connection opened with a
// token is reported in use in the heartbeats until the connection closes;
// opening the bare name (as nbdinfo --list does) is not a use.
func TestHeartbeatReportsDrivesInUse(t *testing.T) {
	n := startNode(t)
	reported := func() []string {
		t.Helper()
		if err := n.agent.Beat(ctx); err != nil {
			t.Fatal(err)
		}
		n.ctl.mu.Lock()
		defer n.ctl.mu.Unlock()
		return n.ctl.inUse
	}
	if got := reported(); len(got) != 0 {
		t.Fatalf("no client: reported %v in use", got)
	}
	bare, err := nbd.Dial(ctx, "tcp", n.addr, "d1")
	if err != nil {
		t.Fatal(err)
	}
	defer bare.Close()
	if got := reported(); len(got) != 0 {
		t.Fatalf("a listing connection: reported %v in use", got)
	}
	var cs []*nbd.Client
	for range 2 {
		c, err := nbd.Dial(ctx, "tcp", n.addr, n.token(t, "d1", 3, blocknode.RightRead, time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		cs = append(cs, c)
	}
	if got := reported(); !slices.Equal(got, []string{"d1"}) {
		t.Fatalf("two clients: reported %v in use, want [d1]", got)
	}
	cs[0].Close()
	if got := reported(); !slices.Equal(got, []string{"d1"}) {
		t.Fatalf("one client left: reported %v in use, want [d1]", got)
	}
	cs[1].Close() // returns once the server has closed the export
	if got := reported(); len(got) != 0 {
		t.Fatalf("clients gone: reported %v in use", got)
	}
}
