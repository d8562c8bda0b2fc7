package e2e

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"rackpool/api"
	"rackpool/internal/nbd"
)

// TestDriveOneWriter: two `rackpool drive connect` processes for one
// drive. The second is refused, naming the first as the writer, and so is
// a read-write token for anyone else; readers are not. With --preempt the
// second takes the drive over: the first one's next write fails with
// EPERM and it exits naming the new writer; the data is the second's. A
// clean exit releases the reservation, and the next writer needs no
// preempt.
func TestDriveOneWriter(t *testing.T) {
	skipShort(t)
	// No failover here: leases long enough that a loaded machine's late
	// heartbeat moves nothing.
	r := startDriveRack(t, time.Minute, "host1")
	ctx := context.Background()
	sockA, first := r.connect(t, "ssd1")
	holderA := "/drive-connect/" + strconv.Itoa(first.cmd.Process.Pid)
	d := r.owner(t, "ssd1")
	if d.WriteReservation == nil || !strings.HasSuffix(d.WriteReservation.Holder, holderA) {
		t.Fatalf("ssd1's writer is %+v, want the first drive connect (…%s)", d.WriteReservation, holderA)
	}
	if out, err := r.s.cli("drives"); err != nil || !strings.Contains(out, "WRITER") || !strings.Contains(out, holderA) {
		t.Errorf("rackpool drives does not show the writer: %v\n%s", err, out)
	}
	a := dialDrive(t, sockA)
	block := func(b byte) []byte { return bytes.Repeat([]byte{b}, 64<<10) }
	if err := a.WriteAt(ctx, block(0xaa), 0, true); err != nil {
		t.Fatal(err)
	}

	// A second writer is refused, naming the first; so is a read-write
	// token for another holder. A reader is not.
	sockB := filepath.Join(shortDir(t), "b.sock")
	out, err := refused(t, r.s, "drive", "connect", "ssd1", "--listen", "unix:"+sockB)
	if err == nil || !strings.Contains(out, "reserved for writing by") || !strings.Contains(out, holderA) || !strings.Contains(out, "--preempt") {
		t.Fatalf("a second drive connect: %v\n%s", err, out)
	}
	var ae *api.Error
	if _, err := r.c.ConnectDrive(ctx, "ssd1", api.DriveConnect{Rights: "rw"}); !errors.As(err, &ae) || ae.Status != 409 || !strings.Contains(ae.Resolution, holderA) {
		t.Fatalf("a read-write token for another holder: %v", err)
	}
	g, err := r.c.ConnectDrive(ctx, "ssd1", api.DriveConnect{Rights: "r"})
	if err != nil {
		t.Fatalf("a reader: %v", err)
	}
	ro, err := nbd.Dial(ctx, "tcp", g.Endpoint, g.ExportName)
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()

	// --preempt: the second takes over, the first is fenced and exits.
	second := startConnect(t, r.s, "ssd1", "--listen", "unix:"+sockB, "--preempt")
	holderB := "/drive-connect/" + strconv.Itoa(second.cmd.Process.Pid)
	b := dialDrive(t, sockB)
	if err := b.WriteAt(ctx, block(0xbb), 0, true); err != nil {
		t.Fatalf("the new writer: %v", err)
	}
	if err := a.WriteAt(ctx, block(0xee), 0, true); !errors.Is(err, nbd.ErrPermission) {
		t.Fatalf("the preempted writer's write: %v, want EPERM", err)
	}
	exited := make(chan error, 1)
	go func() { exited <- first.cmd.Wait() }()
	select {
	case err := <-exited:
		if err == nil || !strings.Contains(first.stderr.String(), "taken over by another writer") || !strings.Contains(first.stderr.String(), holderB) {
			t.Fatalf("the preempted drive connect exited with %v:\n%s", err, first.stderr)
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("the preempted drive connect still runs:\n%s", first.stderr)
	}
	got := make([]byte, 64<<10)
	for name, c := range map[string]*nbd.Client{"new writer": b, "reader": ro} {
		if err := c.ReadAt(ctx, got, 0); err != nil || !bytes.Equal(got, block(0xbb)) {
			t.Errorf("%s reads %x... (%v), want the new writer's bb", name, got[:4], err)
		}
	}
	img, err := os.ReadFile(filepath.Join(r.dir, "ssd1.img"))
	if err != nil || !bytes.Equal(img[:64<<10], block(0xbb)) {
		t.Fatalf("the drive image holds %x... (%v), want bb", img[:4], err)
	}

	// A clean exit releases the reservation; the next writer needs no
	// preempt.
	b.Close()
	if err := second.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := second.cmd.Wait(); err != nil {
		t.Fatalf("drive connect after SIGTERM: %v\n%s", err, second.stderr)
	}
	if d := r.owner(t, "ssd1"); d.WriteReservation != nil {
		t.Fatalf("after a clean exit ssd1's writer is %+v\n%s", d.WriteReservation, second.stderr)
	}
	r.connect(t, "ssd1")
}

// dialDrive opens drive connect's local socket.
func dialDrive(t *testing.T, sock string) *nbd.Client {
	t.Helper()
	c, err := nbd.Dial(context.Background(), "unix", sock, "ssd1")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}
