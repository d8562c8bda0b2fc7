package hba_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"rackpool/internal/hba"
	"rackpool/internal/nbd"
)

// revoking is a control plane that names one owner until it refuses the
// client for good (another holder took the drive's write reservation).
type revoking struct {
	mu      sync.Mutex
	addr    string
	refusal error
	calls   int
}

func (r *revoking) Resolve(context.Context, string) (hba.Path, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls++
	if r.refusal != nil {
		return hba.Path{}, r.refusal
	}
	return hba.Path{Endpoint: r.addr, Export: "d", Epoch: 1, Node: "n1"}, nil
}

// fencedOwner serves the image and, once fence is called, refuses every
// write with EPERM, as a blocknode does for a preempted writer.
func fencedOwner(t *testing.T, img string) (addr string, fence func()) {
	t.Helper()
	fx, err := nbd.NewFileExport(img, false)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = fx.Close() })
	f := &fenceable{FileExport: fx}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &nbd.Server{Exports: fenceableExports{f}}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { _ = srv.Close() })
	return l.Addr().String(), func() { f.mu.Lock(); f.fenced = true; f.mu.Unlock() }
}

type fenceable struct {
	*nbd.FileExport
	mu     sync.Mutex
	fenced bool
}

func (f *fenceable) WriteAt(ctx context.Context, p []byte, off uint64, fua bool) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.fenced {
		return fmt.Errorf("%w: preempted", nbd.ErrPermission)
	}
	return f.FileExport.WriteAt(ctx, p, off, fua)
}

func (f *fenceable) Close() error { return nil }

type fenceableExports struct{ f *fenceable }

func (x fenceableExports) Open(context.Context, string) (nbd.Export, error) { return x.f, nil }
func (x fenceableExports) List(context.Context) ([]nbd.ExportInfo, error) {
	return []nbd.ExportInfo{{Name: "d"}}, nil
}

// TestRevokedFailsWithEPERM: once the owner refuses a write with EPERM and
// the control plane refuses the client for good, the write fails with
// EPERM at once (not after Timeout, an hour here), Revoked is closed with
// the cause, and later requests fail the same way without asking the
// control plane again.
func TestRevokedFailsWithEPERM(t *testing.T) {
	addr, fence := fencedOwner(t, image(t))
	cp := &revoking{addr: addr}
	m, err := hba.New(ctx, hba.Options{Drive: "d", Resolver: cp, Conns: 2, Timeout: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	exp, _ := m.Open(ctx, "d")
	if err := exp.WriteAt(ctx, bytes.Repeat([]byte{1}, 4096), 0, true); err != nil {
		t.Fatal(err)
	}
	fence()
	cp.mu.Lock()
	cp.refusal = fmt.Errorf("%w: drive d is reserved for writing by \"other\"", hba.ErrRevoked)
	cp.mu.Unlock()
	done := make(chan error, 1)
	go func() { done <- exp.WriteAt(ctx, bytes.Repeat([]byte{2}, 4096), 0, true) }()
	select {
	case err := <-done:
		if !errors.Is(err, nbd.ErrPermission) {
			t.Fatalf("write after the revocation: %v, want EPERM", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the write waits for a path the control plane refuses for good")
	}
	select {
	case <-m.Revoked():
	default:
		t.Fatal("Revoked is not closed")
	}
	if err := m.Err(); !errors.Is(err, nbd.ErrPermission) || !strings.Contains(err.Error(), `"other"`) {
		t.Errorf("Err = %v", err)
	}
	cp.mu.Lock()
	calls := cp.calls
	cp.mu.Unlock()
	got := make([]byte, 4096)
	if err := exp.ReadAt(ctx, got, 0); !errors.Is(err, nbd.ErrPermission) {
		t.Errorf("read after the revocation: %v, want EPERM", err)
	}
	cp.mu.Lock()
	defer cp.mu.Unlock()
	if cp.calls != calls {
		t.Errorf("the control plane was asked %d more times after the revocation", cp.calls-calls)
	}
}
