package cache

import (
	"bytes"
	"io"
	"net"
	"strings"
	"testing"
)

// checkAccounting verifies that the charged bytes match the items held,
// and each shard's count of items that can expire matches its LRU.
func checkAccounting(t testing.TB, c *Cache) {
	t.Helper()
	var sum int64
	for i := range c.shards {
		sh := &c.shards[i]
		sh.mu.Lock()
		n := 0
		var mortal int64
		for e := sh.head; e != nil; e = e.next {
			n++
			if e.exp != 0 {
				mortal++
			}
		}
		if got := sh.mortal.Load(); got != mortal {
			t.Errorf("shard %d: counts %d items with an expiry time, its LRU holds %d", i, got, mortal)
		}
		for k, e := range sh.m {
			if e.key != k {
				t.Errorf("item %q under key %q", e.key, k)
			}
			switch e.where {
			case whereLocal:
				sum += e.localSize()
				n--
			case whereInflight, whereRemote:
				sum += e.indexSize()
			default:
				t.Errorf("removed item %q still mapped", k)
			}
		}
		if n != 0 {
			t.Errorf("shard %d: LRU and map disagree by %d", i, n)
		}
		sh.mu.Unlock()
	}
	if used := c.used.Load(); used != sum {
		t.Errorf("used = %d, items sum to %d", used, sum)
	}
}

// pipeConn is a net.Conn reading a fixed input and collecting the output.
type pipeConn struct {
	net.Conn // nil: only the methods below are used
	in       *bytes.Reader
	out      bytes.Buffer
}

func (p *pipeConn) Read(b []byte) (int, error) { return p.in.Read(b) }
func (p *pipeConn) Write(b []byte) (int, error) {
	if p.out.Len() > 16<<20 {
		return 0, io.ErrShortWrite
	}
	return p.out.Write(b)
}
func (p *pipeConn) Close() error { return nil }

// fuzzServe feeds input to a fresh connection of c and returns the reply.
func fuzzServe(c *Cache, input []byte) []byte {
	pc := &pipeConn{in: bytes.NewReader(input)}
	newConn(c, pc).serve()
	return pc.out.Bytes()
}

func fuzzCache(t testing.TB) *Cache {
	return mustNew(t, Options{LocalMemory: 32 << 10, Remote: newMemRemote(256 << 10), RemoteSize: 256 << 10,
		MaxItemSize: 8 << 10, Logger: quietLogger()})
}

// fuzzProtocol checks that arbitrary input never panics or breaks the
// cache: accounting stays exact, memory within its limit, and a fresh
// connection still works.
func fuzzProtocol(t *testing.T, c *Cache, input []byte) {
	fuzzServe(c, input)
	checkAccounting(t, c)
	if u, l := c.used.Load(), c.limit.Load(); u > l {
		t.Fatalf("used %d > limit %d", u, l)
	}
	c.limit.Store(32 << 10) // cache_memlimit may have moved it
	got := fuzzServe(c, []byte("set fuzz:probe 0 0 2\r\nok\r\nget fuzz:probe\r\n"))
	if !bytes.Equal(got, []byte("STORED\r\nVALUE fuzz:probe 0 2\r\nok\r\nEND\r\n")) {
		t.Fatalf("cache broken after input: probe got %q", got)
	}
}

func seedCases(f *testing.F, meta bool) {
	_, cases := loadCases(f)
	for _, pc := range cases {
		var in []byte
		for _, s := range pc.steps {
			in = append(in, s.send...)
		}
		if strings.HasPrefix(pc.name, "m") == meta {
			f.Add(in)
		}
	}
}

func FuzzTextProtocol(f *testing.F) {
	seedCases(f, false)
	f.Add([]byte("set a 0 0 1000000000\r\n"))
	f.Add([]byte("get " + strings.Repeat("k ", 3000) + "\r\n"))
	f.Add([]byte("\x80\x01\x00\x01\x08\x00\x00\x00\x00\x00\x00\x0a\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00ax"))
	c := fuzzCache(f)
	f.Fuzz(func(t *testing.T, input []byte) { fuzzProtocol(t, c, input) })
}

func FuzzMetaProtocol(f *testing.F) {
	seedCases(f, true)
	f.Add([]byte("ms a 1000000000 T0\r\n"))
	f.Add([]byte("mg a N0 R1 T5 v k c f h l t s O1 q\r\nma a N0 J9 D1 MD v\r\nmd a I T0 q\r\nmn\r\n"))
	c := fuzzCache(f)
	f.Fuzz(func(t *testing.T, input []byte) { fuzzProtocol(t, c, input) })
}

// binFrame builds a binary-protocol request frame.
func binFrame(op byte, extras, key, value []byte) []byte {
	h := make([]byte, 24)
	h[0], h[1] = 0x80, op
	h[2], h[3] = byte(len(key)>>8), byte(len(key))
	h[4] = byte(len(extras))
	body := len(extras) + len(key) + len(value)
	h[8], h[9], h[10], h[11] = byte(body>>24), byte(body>>16), byte(body>>8), byte(body)
	h[15] = 7 // opaque
	return append(append(append(h, extras...), key...), value...)
}

func FuzzBinaryProtocol(f *testing.F) {
	set := binFrame(0x01, make([]byte, 8), []byte("k"), []byte("value"))
	get := binFrame(0x00, nil, []byte("k"), nil)
	incr := binFrame(0x05, make([]byte, 20), []byte("n"), nil)
	f.Add(set)
	f.Add(append(append([]byte{}, set...), get...))
	f.Add(append(append([]byte{}, incr...), binFrame(0x0a, nil, nil, nil)...)) // incr, noop
	f.Add(set[:30])                                                            // truncated body
	f.Add(binFrame(0x01, make([]byte, 8), []byte("big"), make([]byte, 9000)))  // over MaxItemSize
	f.Add(binFrame(0x10, nil, []byte("items"), nil))                           // stat
	f.Add(binFrame(0xee, nil, nil, nil))                                       // unknown opcode
	c := fuzzCache(f)
	f.Fuzz(func(t *testing.T, input []byte) { fuzzProtocol(t, c, input) })
}
