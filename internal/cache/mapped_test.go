//go:build linux

package cache

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"path/filepath"
	"testing"
	"time"

	"rackpool/internal/memory"
)

// TestMappedRemote runs the remote tier on a mapped lease of a real
// memnode: every spilled item comes back right; when the lease is
// reclaimed under the cache (the node zeroes it), the mapping reads zeros
// and every remote item becomes a miss, never a wrong value.
func TestMappedRemote(t *testing.T) {
	const region = 4 << 20
	key, err := memory.NewKey()
	if err != nil {
		t.Fatal(err)
	}
	srv, err := memory.NewServer(memory.ServerOptions{Node: "n1", Capacity: region, Key: key})
	if err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(t.TempDir(), "n1.sock")
	ul, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(ul)
	t.Cleanup(func() { srv.Close() })
	sign := func(r memory.Rights) string {
		tok, err := key.Sign(memory.Claims{Lease: "l1", Node: "n1", Offset: 0, Length: region, Rights: r, Expiry: time.Now().Add(time.Hour)})
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	m, err := memory.Map(context.Background(), sock, sign(memory.RightRead|memory.RightWrite))
	if err != nil {
		t.Fatal(err)
	}
	c, addr := startCache(t, Options{LocalMemory: 256 << 10, Remote: m, RemoteSize: region, MaxItemSize: 64 << 10, Logger: quietLogger()})
	t.Cleanup(func() { c.Close(); m.Close() })
	cl := dialT(t, addr)
	const n = 600
	for i := range n {
		if r, err := cl.do(fmt.Sprintf("set key%d %d 0 2000", i, i), value("k", i, 2000)); err != nil || r != "STORED" {
			t.Fatalf("set key%d: %q %v", i, r, err)
		}
	}
	if s := c.Stats(); s.Spills == 0 || s.RemoteItems == 0 {
		t.Fatalf("nothing spilled: %+v", s)
	}
	for i := range n {
		v, flags, _, ok, err := cl.gets(fmt.Sprintf("key%d", i))
		if err != nil {
			t.Fatal(err)
		}
		if !ok || flags != uint32(i) || !bytes.Equal(v, value("k", i, 2000)) {
			t.Fatalf("key%d: ok=%v flags=%d", i, ok, flags)
		}
	}
	if srv.Stats().Read != 0 || c.Stats().RemoteHits == 0 {
		t.Fatalf("remote hits %d with %d READs at the node: want hits served from the mapping, none over the wire",
			c.Stats().RemoteHits, srv.Stats().Read)
	}

	// Revoke the lease under the cache: the node punches its memory out.
	srv.Revoke("l1", time.Now().Add(time.Hour))
	hits := 0
	for i := range n {
		v, _, _, ok, err := cl.gets(fmt.Sprintf("key%d", i))
		if err != nil {
			t.Fatal(err)
		}
		if ok {
			if !bytes.Equal(v, value("k", i, 2000)) {
				t.Fatalf("key%d: a wrong value after the lease was reclaimed", i)
			}
			hits++
		}
	}
	if hits == 0 || hits == n {
		t.Fatalf("%d of %d hits after the reclaim: want the local items only", hits, n)
	}
	if c.Stats().RemoteCorrupt == 0 {
		t.Error("no record was found damaged: the zeroed mapping was not read")
	}
}
