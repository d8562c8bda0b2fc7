package cache

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"rackpool/internal/memory"
)

// memnode is a real memory node on loopback serving one leased region.
type memnode struct {
	srv    *memory.Server
	client *memory.Client
	done   chan error
}

func startMemnode(t testing.TB, size uint64) *memnode {
	t.Helper()
	key, err := memory.NewKey()
	if err != nil {
		t.Fatal(err)
	}
	srv, err := memory.NewServer(memory.ServerOptions{Node: "n1", Capacity: size, Key: key})
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	m := &memnode{srv: srv, done: make(chan error, 1)}
	go func() { m.done <- srv.Serve(l) }()
	token, err := key.Sign(memory.Claims{Lease: "l1", Node: "n1", Offset: 0, Length: size,
		Rights: memory.RightRead | memory.RightWrite, Expiry: time.Now().Add(time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	m.client, err = memory.Dial(ctx, l.Addr().String(), token)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.kill(); m.client.Close() })
	return m
}

// kill stops the memnode (idempotent).
func (m *memnode) kill() { m.srv.Close() }

// tclient is a minimal memcached text-protocol client for tests.
type tclient struct {
	nc net.Conn
	r  *bufio.Reader
}

func dialT(t testing.TB, addr string) *tclient {
	t.Helper()
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	return &tclient{nc: nc, r: bufio.NewReaderSize(nc, 64<<10)}
}

func (c *tclient) line() (string, error) {
	l, err := c.r.ReadString('\n')
	return strings.TrimSuffix(l, "\r\n"), err
}

// do sends a command line (and data block) and returns the reply line.
func (c *tclient) do(line string, data []byte) (string, error) {
	buf := append([]byte(line), "\r\n"...)
	if data != nil {
		buf = append(append(buf, data...), "\r\n"...)
	}
	if _, err := c.nc.Write(buf); err != nil {
		return "", err
	}
	return c.line()
}

// gets fetches one key: value, flags, cas, found.
func (c *tclient) gets(key string) ([]byte, uint32, uint64, bool, error) {
	if _, err := c.nc.Write([]byte("gets " + key + "\r\n")); err != nil {
		return nil, 0, 0, false, err
	}
	l, err := c.line()
	if err != nil {
		return nil, 0, 0, false, err
	}
	if l == "END" {
		return nil, 0, 0, false, nil
	}
	f := strings.Fields(l)
	if len(f) != 5 || f[0] != "VALUE" || f[1] != key {
		return nil, 0, 0, false, fmt.Errorf("bad reply %q", l)
	}
	flags, _ := strconv.ParseUint(f[2], 10, 32)
	n, _ := strconv.Atoi(f[3])
	cas, _ := strconv.ParseUint(f[4], 10, 64)
	v := make([]byte, n+2)
	if _, err := io.ReadFull(c.r, v); err != nil {
		return nil, 0, 0, false, err
	}
	if end, err := c.line(); err != nil || end != "END" {
		return nil, 0, 0, false, fmt.Errorf("no END: %q %v", end, err)
	}
	return v[:n], uint32(flags), cas, true, nil
}

func TestMemnodeSpillHitAndKill(t *testing.T) {
	const region = 4 << 20
	mn := startMemnode(t, region)
	c, addr := startCache(t, Options{LocalMemory: 256 << 10, Remote: mn.client, RemoteSize: region,
		MaxItemSize: 64 << 10, Logger: quietLogger()})
	cl := dialT(t, addr)
	const n = 600
	for i := range n {
		if r, err := cl.do(fmt.Sprintf("set key%d %d 0 2000", i, i), value("k", i, 2000)); err != nil || r != "STORED" {
			t.Fatalf("set key%d: %q %v", i, r, err)
		}
	}
	s := c.Stats()
	if s.Spills == 0 || s.RemoteItems == 0 {
		t.Fatalf("nothing spilled: %+v", s)
	}
	for i := range n {
		v, flags, _, ok, err := cl.gets(fmt.Sprintf("key%d", i))
		if err != nil {
			t.Fatal(err)
		}
		if !ok || flags != uint32(i) || !bytes.Equal(v, value("k", i, 2000)) {
			t.Fatalf("key%d: ok=%v flags=%d wrong value=%v", i, ok, flags, ok && !bytes.Equal(v, value("k", i, 2000)))
		}
	}
	if c.Stats().RemoteHits == 0 {
		t.Fatal("no remote hits")
	}

	// Kill the memnode: remote items become misses, local ones are still
	// served, nothing wrong is ever returned, and the cache keeps working.
	mn.kill()
	local, remote := 0, 0
	for i := range n {
		v, _, _, ok, err := cl.gets(fmt.Sprintf("key%d", i))
		if err != nil {
			t.Fatal(err)
		}
		if ok {
			local++
			if !bytes.Equal(v, value("k", i, 2000)) {
				t.Fatalf("key%d: wrong value after kill", i)
			}
		} else {
			remote++
		}
	}
	s = c.Stats()
	if local == 0 || remote == 0 || s.RemoteHealthy || s.RemoteErrors == 0 || s.RemoteItems != 0 {
		t.Fatalf("after kill: local %d remote %d stats %+v", local, remote, s)
	}
	for i := n; i < 2*n; i++ {
		if r, err := cl.do(fmt.Sprintf("set key%d 0 0 2000", i), value("k", i, 2000)); err != nil || r != "STORED" {
			t.Fatalf("set after kill: %q %v", r, err)
		}
	}
	if v, _, _, ok, _ := cl.gets(fmt.Sprintf("key%d", 2*n-1)); !ok || !bytes.Equal(v, value("k", 2*n-1, 2000)) {
		t.Fatal("newest key lost after kill")
	}
	t.Logf("after kill: %d local hits, %d misses; remote errors %d", local, remote, s.RemoteErrors)
}

// TestModelRandom drives the cache through the wire protocol from several
// clients, each owning its keys, and checks every reply against a plain
// map: a GET may miss (the cache may evict), but never returns a stale or
// wrong value or flags. The remote tier is a real memnode, small enough to
// compact and drop, and it is killed part way through.
func TestModelRandom(t *testing.T) {
	for _, tc := range []struct {
		name   string
		remote bool
		kill   bool
	}{{"local", false, false}, {"memnode", true, false}, {"memnode-killed", true, true}} {
		t.Run(tc.name, func(t *testing.T) { runModel(t, tc.remote, tc.kill) })
	}
}

func runModel(t *testing.T, withRemote, kill bool) {
	const region = 512 << 10
	opts := Options{LocalMemory: 192 << 10, MaxItemSize: 32 << 10, Logger: quietLogger()}
	var mn *memnode
	if withRemote {
		mn = startMemnode(t, region)
		opts.Remote, opts.RemoteSize = mn.client, region
	}
	c, addr := startCache(t, opts)
	const (
		clients = 4
		keys    = 60
	)
	ops := 2500
	if testing.Short() {
		ops = 600
	}
	var killed atomic.Bool
	var wg sync.WaitGroup
	errs := make(chan error, clients)
	for w := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- modelClient(t, addr, w, keys, ops, func(i int) {
				if kill && w == 0 && i == ops/2 && killed.CompareAndSwap(false, true) {
					mn.kill()
				}
			})
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	s := c.Stats()
	t.Logf("hits %d misses %d spills %d remote hits %d compactions %d remote evictions %d errors %d",
		s.GetHits, s.GetMisses, s.Spills, s.RemoteHits, s.Compactions, s.RemoteEvictions, s.RemoteErrors)
	if withRemote && s.Spills == 0 {
		t.Error("nothing spilled")
	}
	if s.UsedBytes > opts.LocalMemory {
		t.Errorf("used %d > %d", s.UsedBytes, opts.LocalMemory)
	}
}

type modelEntry struct {
	val   []byte
	flags uint32
}

func modelClient(t *testing.T, addr string, w, keys, ops int, tick func(int)) error {
	cl := dialT(t, addr)
	rng := rand.New(rand.NewPCG(uint64(w), 42))
	ref := map[string]modelEntry{}
	ver := 0
	for i := range ops {
		tick(i)
		key := fmt.Sprintf("w%d-k%d", w, rng.IntN(keys))
		switch op := rng.IntN(100); {
		case op < 35: // get
			v, flags, _, ok, err := cl.gets(key)
			if err != nil {
				return err
			}
			want, exists := ref[key]
			if ok && !exists {
				return fmt.Errorf("op %d: %s returned after delete", i, key)
			}
			if ok && (!bytes.Equal(v, want.val) || flags != want.flags) {
				return fmt.Errorf("op %d: %s: stale or wrong value (flags %d want %d, len %d want %d)", i, key, flags, want.flags, len(v), len(want.val))
			}
			if !ok {
				delete(ref, key) // evicted: it may not come back
			}
		case op < 70: // set
			ver++
			size := 200 + rng.IntN(4000)
			if rng.IntN(10) == 0 {
				size = rng.IntN(20)
			}
			val := value(key, ver, size)
			flags := uint32(rng.IntN(1 << 16))
			r, err := cl.do(fmt.Sprintf("set %s %d 0 %d", key, flags, len(val)), val)
			if err != nil || r != "STORED" {
				return fmt.Errorf("op %d: set: %q %v", i, r, err)
			}
			ref[key] = modelEntry{val, flags}
		case op < 78: // delete
			r, err := cl.do("delete "+key, nil)
			if err != nil {
				return err
			}
			_, exists := ref[key]
			if r == "DELETED" && !exists {
				return fmt.Errorf("op %d: delete of a deleted %s succeeded", i, key)
			}
			delete(ref, key)
		case op < 86: // append
			ver++
			tail := value(key, ver, 1+rng.IntN(300))
			r, err := cl.do(fmt.Sprintf("append %s 0 0 %d", key, len(tail)), tail)
			if err != nil {
				return err
			}
			want, exists := ref[key]
			switch r {
			case "STORED":
				if !exists {
					return fmt.Errorf("op %d: append to deleted %s stored", i, key)
				}
				ref[key] = modelEntry{append(bytes.Clone(want.val), tail...), want.flags}
			case "NOT_STORED":
				delete(ref, key)
			default:
				return fmt.Errorf("op %d: append: %q", i, r)
			}
		case op < 92: // cas round trip
			_, _, cas, ok, err := cl.gets(key)
			if err != nil {
				return err
			}
			if !ok {
				delete(ref, key)
				continue
			}
			ver++
			val := value(key, ver, 100+rng.IntN(2000))
			r, err := cl.do(fmt.Sprintf("cas %s 7 0 %d %d", key, len(val), cas), val)
			if err != nil {
				return err
			}
			switch r {
			case "STORED":
				ref[key] = modelEntry{val, 7}
			case "NOT_FOUND":
				delete(ref, key)
			default:
				return fmt.Errorf("op %d: cas with a fresh CAS: %q", i, r)
			}
		case op < 96: // incr on a numeric key of its own
			nkey := key + "-n"
			r, err := cl.do("incr "+nkey+" 3", nil)
			if err != nil {
				return err
			}
			want, exists := ref[nkey]
			if r == "NOT_FOUND" {
				delete(ref, nkey)
				v := []byte(strconv.Itoa(rng.IntN(1000)))
				if r, err := cl.do(fmt.Sprintf("set %s 0 0 %d", nkey, len(v)), v); err != nil || r != "STORED" {
					return fmt.Errorf("op %d: set counter: %q %v", i, r, err)
				}
				ref[nkey] = modelEntry{v, 0}
				continue
			}
			if !exists {
				return fmt.Errorf("op %d: incr of deleted %s: %q", i, nkey, r)
			}
			old, _ := strconv.ParseUint(strings.TrimRight(string(want.val), " "), 10, 64)
			if r != strconv.FormatUint(old+3, 10) {
				return fmt.Errorf("op %d: incr %s: %q, want %d", i, nkey, r, old+3)
			}
			nv := []byte(r)
			if len(nv) < len(want.val) {
				nv = append(nv, bytes.Repeat([]byte(" "), len(want.val)-len(nv))...)
			}
			ref[nkey] = modelEntry{nv, 0}
		default: // touch into the past: expires now
			r, err := cl.do("touch "+key+" -1", nil)
			if err != nil {
				return err
			}
			if r != "TOUCHED" && r != "NOT_FOUND" {
				return fmt.Errorf("op %d: touch: %q", i, r)
			}
			delete(ref, key)
		}
	}
	return nil
}

// TestConcurrentSharedKeys has clients overwrite, read, append and delete
// the same keys while the tiers spill and compact. Values name their key
// and carry a checksum, so any cross-key, torn or corrupt value is caught.
func TestConcurrentSharedKeys(t *testing.T) {
	const region = 512 << 10
	mn := startMemnode(t, region)
	c, addr := startCache(t, Options{LocalMemory: 128 << 10, Remote: mn.client, RemoteSize: region,
		MaxItemSize: 32 << 10, Logger: quietLogger()})
	const clients, keys = 6, 150
	ops := 1500
	if testing.Short() {
		ops = 400
	}
	selfValue := func(key string, ver, size int) []byte {
		body := value(key, ver, size)
		return fmt.Appendf(nil, "%s|%d|%08x|%s", key, len(body), crc(body), body)
	}
	check := func(key string, v []byte) error {
		parts := bytes.SplitN(v, []byte("|"), 4)
		if len(parts) != 4 || string(parts[0]) != key {
			return fmt.Errorf("%s: value of another key or garbage: %.40q", key, v)
		}
		n, _ := strconv.Atoi(string(parts[1]))
		body := parts[3][:min(n, len(parts[3]))]
		// Appends add whole self-describing chunks after the first one.
		if fmt.Sprintf("%08x", crc(body)) != string(parts[2]) {
			return fmt.Errorf("%s: checksum mismatch", key)
		}
		rest := parts[3][len(body):]
		for len(rest) > 0 {
			if rest[0] != '+' || len(rest) < 2 || !bytes.HasPrefix(rest[1:], []byte(key+"|")) {
				return fmt.Errorf("%s: bad appended chunk %.40q", key, rest)
			}
			p := bytes.SplitN(rest[1:], []byte("|"), 4)
			if len(p) != 4 {
				return fmt.Errorf("%s: bad appended chunk", key)
			}
			m, _ := strconv.Atoi(string(p[1]))
			if m > len(p[3]) || fmt.Sprintf("%08x", crc(p[3][:m])) != string(p[2]) {
				return fmt.Errorf("%s: appended chunk checksum mismatch", key)
			}
			rest = p[3][m:]
		}
		return nil
	}
	var wg sync.WaitGroup
	errs := make(chan error, clients)
	for w := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cl := dialT(t, addr)
			rng := rand.New(rand.NewPCG(uint64(w), 7))
			for i := range ops {
				key := fmt.Sprintf("k%d", rng.IntN(keys))
				switch op := rng.IntN(10); {
				case op < 5:
					v, _, _, ok, err := cl.gets(key)
					if err == nil && ok {
						err = check(key, v)
					}
					if err != nil {
						errs <- err
						return
					}
				case op < 8:
					v := selfValue(key, w*ops+i, 300+rng.IntN(3000))
					if r, err := cl.do(fmt.Sprintf("set %s 0 0 %d", key, len(v)), v); err != nil || r != "STORED" {
						errs <- fmt.Errorf("set: %q %v", r, err)
						return
					}
				case op < 9:
					v := append([]byte("+"), selfValue(key, w*ops+i, 50)...)
					if _, err := cl.do(fmt.Sprintf("append %s 0 0 %d", key, len(v)), v); err != nil {
						errs <- err
						return
					}
				default:
					if _, err := cl.do("delete "+key, nil); err != nil {
						errs <- err
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	s := c.Stats()
	t.Logf("spills %d remote hits %d compactions %d corrupt %d", s.Spills, s.RemoteHits, s.Compactions, s.RemoteCorrupt)
	if s.RemoteCorrupt != 0 {
		t.Errorf("%d records failed verification without any fault injected", s.RemoteCorrupt)
	}
}

func crc(b []byte) uint32 { return recordCRC("", b) }
