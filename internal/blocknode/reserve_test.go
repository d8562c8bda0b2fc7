package blocknode_test

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"rackpool/internal/blocknode"
	"rackpool/internal/nbd"
)

// TestPreemptFencesTheOldWriter: a writer's token of a later write
// reservation generation fences the writer before it: the old writer's
// write, trim and write-zeroes fail with EPERM and touch nothing, its
// reads go on, its token no longer opens the drive for writing; readers
// are not affected; the image holds the new writer's data. A heartbeat
// answer naming a later generation fences the current writer even
// before any new one connects.
func TestPreemptFencesTheOldWriter(t *testing.T) {
	n := startNode(t)
	rw := blocknode.RightRead | blocknode.RightWrite
	block := func(b byte) []byte { return bytes.Repeat([]byte{b}, 4096) }
	dial := func(export string) *nbd.Client {
		t.Helper()
		c, err := nbd.Dial(ctx, "tcp", n.addr, export)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	first := dial(n.writerToken(t, "d1", 3, rw, time.Minute, 4))
	reader := dial(n.token(t, "d1", 3, blocknode.RightRead, time.Minute))
	if err := first.WriteAt(ctx, block(0xaa), 0, true); err != nil {
		t.Fatal(err)
	}
	// The same holder's second connection (same generation) writes too.
	again := dial(n.writerToken(t, "d1", 3, rw, time.Minute, 4))
	if err := again.WriteAt(ctx, block(0xab), 4096, true); err != nil {
		t.Fatalf("a second connection of the same generation: %v", err)
	}

	// Preempt: a writer at generation 5 opens the drive.
	second := dial(n.writerToken(t, "d1", 3, rw, time.Minute, 5))
	for name, op := range map[string]func() error{
		"write":        func() error { return first.WriteAt(ctx, block(0xee), 0, true) },
		"trim":         func() error { return first.Trim(ctx, 0, 4096, false) },
		"write zeroes": func() error { return first.Zero(ctx, 0, 4096, nbd.ZeroFlags{}) },
		"other conn":   func() error { return again.WriteAt(ctx, block(0xee), 0, false) },
	} {
		if err := op(); !errors.Is(err, nbd.ErrPermission) {
			t.Errorf("the preempted writer's %s: %v, want EPERM", name, err)
		}
	}
	if err := second.WriteAt(ctx, block(0xbb), 0, true); err != nil {
		t.Fatalf("the new writer: %v", err)
	}
	got := make([]byte, 4096)
	for name, c := range map[string]*nbd.Client{"preempted writer": first, "reader": reader, "new writer": second} {
		if err := c.ReadAt(ctx, got, 0); err != nil || !bytes.Equal(got, block(0xbb)) {
			t.Errorf("%s reads %x... (%v), want the new writer's bb", name, got[:4], err)
		}
	}
	if c, err := nbd.Dial(ctx, "tcp", n.addr, n.writerToken(t, "d1", 3, rw, time.Minute, 4)); err == nil {
		c.Close()
		t.Error("a superseded generation's token opened the drive for writing")
	}
	// Its holder may still read, with a read-only token.
	dial(n.token(t, "d1", 3, blocknode.RightRead, time.Minute))

	// The control plane records generation 6 (another preempt); the
	// heartbeat answer alone fences generation 5.
	n.ctl.set(func(c *control) { c.drives[0].Generation = 6 })
	if err := n.agent.Beat(ctx); err != nil {
		t.Fatal(err)
	}
	if err := second.WriteAt(ctx, block(0xcc), 0, true); !errors.Is(err, nbd.ErrPermission) {
		t.Fatalf("after a heartbeat naming generation 6, generation 5 wrote: %v", err)
	}
	img, err := os.ReadFile(filepath.Join(n.dir, "d1.img"))
	if err != nil || !bytes.Equal(img[:4096], block(0xbb)) || !bytes.Equal(img[4096:8192], block(0xab)) {
		t.Fatalf("image holds %x... %x... (%v), want bb and ab", img[:4], img[4096:4100], err)
	}
}

// TestPreemptWaitsForWritesInFlight: a write of the old generation that
// has passed its checks but not yet reached its system call when a new
// writer opens the drive lands before the new writer's open returns, never
// after the new writer's write: the generation rises only once the writes
// in progress have finished. The old write is held in that window (a test
// hook) until the new writer's open is seen waiting for it; had the open
// not waited, the new writer's write would be acknowledged first.
func TestPreemptWaitsForWritesInFlight(t *testing.T) {
	inWindow, release, raiseWaits := make(chan struct{}), make(chan struct{}), make(chan struct{})
	var once, waitOnce sync.Once
	restore := blocknode.SetWriteHooks(func() {
		held := false
		once.Do(func() { held = true })
		if held { // the first write: the old writer's
			close(inWindow)
			<-release
		}
	}, func() { waitOnce.Do(func() { close(raiseWaits) }) })
	t.Cleanup(restore) // after the node's own cleanup: registered first
	n := startNode(t)
	rw := blocknode.RightRead | blocknode.RightWrite
	block := func(b byte) []byte { return bytes.Repeat([]byte{b}, 64<<10) }
	old, err := nbd.Dial(ctx, "tcp", n.addr, n.writerToken(t, "d1", 3, rw, time.Minute, 1))
	if err != nil {
		t.Fatal(err)
	}
	defer old.Close()
	oldDone := make(chan error, 1)
	go func() { oldDone <- old.WriteAt(ctx, block(0xaa), 0, true) }()
	<-inWindow
	newDone := make(chan error, 1)
	go func() {
		next, err := nbd.Dial(ctx, "tcp", n.addr, n.writerToken(t, "d1", 3, rw, time.Minute, 2))
		if err == nil {
			defer next.Close()
			err = next.WriteAt(ctx, block(0xbb), 0, true)
		}
		newDone <- err
	}()
	select {
	case <-raiseWaits:
	case err := <-newDone:
		close(release)
		<-oldDone
		t.Fatalf("the new writer's open and write (%v) went through while an old write was between its checks and its system call", err)
	}
	close(release)
	if err := <-oldDone; err != nil {
		t.Fatalf("the old write, checked before the preempt: %v", err)
	}
	if err := <-newDone; err != nil {
		t.Fatal(err)
	}
	img, err := os.ReadFile(filepath.Join(n.dir, "d1.img"))
	if err != nil || !bytes.Equal(img[:64<<10], block(0xbb)) {
		t.Fatalf("image holds %x... (%v), want the new writer's bb", img[:4], err)
	}
}
