package cache

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
)

// memRemote is a Remote backed by a byte slice, with fault injection: the
// fast, in-process stand-in for a memnode (tests against a real memnode are
// in memnode_test.go).
type memRemote struct {
	mu     sync.Mutex
	b      []byte
	down   atomic.Bool
	reads  atomic.Int64
	writes atomic.Int64
	// hook, when set, runs before every operation (outside mu).
	hook func(op string, off uint64, n int)
}

var errRemoteDown = errors.New("memRemote: down")

var _ Remote = (*memRemote)(nil)

func newMemRemote(size int) *memRemote { return &memRemote{b: make([]byte, size)} }

func (m *memRemote) Read(ctx context.Context, off uint64, p []byte) error {
	if m.hook != nil {
		m.hook("read", off, len(p))
	}
	if m.down.Load() {
		return errRemoteDown
	}
	m.reads.Add(1)
	m.mu.Lock()
	defer m.mu.Unlock()
	if off+uint64(len(p)) > uint64(len(m.b)) {
		return fmt.Errorf("memRemote: read [%d,%d) beyond %d", off, off+uint64(len(p)), len(m.b))
	}
	copy(p, m.b[off:])
	return nil
}

func (m *memRemote) Write(ctx context.Context, off uint64, bufs ...[]byte) error {
	n := 0
	for _, b := range bufs {
		n += len(b)
	}
	if m.hook != nil {
		m.hook("write", off, n)
	}
	if m.down.Load() {
		return errRemoteDown
	}
	m.writes.Add(1)
	m.mu.Lock()
	defer m.mu.Unlock()
	if off+uint64(n) > uint64(len(m.b)) {
		return fmt.Errorf("memRemote: write [%d,%d) beyond %d", off, off+uint64(n), len(m.b))
	}
	for _, b := range bufs {
		off += uint64(copy(m.b[off:], b))
	}
	return nil
}

// corrupt flips every byte of the remote region equal to from into to.
func (m *memRemote) replace(from, to []byte) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := bytes.Count(m.b, from)
	m.b = bytes.ReplaceAll(m.b, from, to)
	return n
}

// Direct (non-wire) helpers.

func mustNew(t testing.TB, opts Options) *Cache {
	t.Helper()
	c, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func cset(c *Cache, key string, val []byte) storeResult {
	r := storeReq{key: []byte(key), value: bytes.Clone(val), mode: modeSet}
	res, _ := c.store(&r, c.now())
	return res
}

func cget(c *Cache, key string) ([]byte, bool) {
	h, ok := c.get([]byte(key), c.now(), false, 0)
	if !ok {
		return nil, false
	}
	v := bytes.Clone(h.value)
	putBuf(h.pb)
	return v, true
}

// value returns a deterministic value for key at version ver.
func value(key string, ver, size int) []byte {
	v := make([]byte, size)
	seed := uint32(ver*2654435761) ^ uint32(len(key))
	for _, b := range []byte(key) {
		seed = seed*31 + uint32(b)
	}
	for i := range v {
		seed = seed*1664525 + 1013904223
		v[i] = byte(seed >> 24)
	}
	return v
}
