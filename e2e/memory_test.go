package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os/exec"
	"strings"
	"testing"
	"time"

	"rackpool/api"
	"rackpool/internal/childproc"
	"rackpool/internal/memory"
)

// proc is a background rackpool process other than serve (memnode, cache).
type proc struct {
	cmd    *exec.Cmd
	addr   string
	stderr *syncBuffer
}

// startProc runs `rackpool VERB --addr A args...` against s and waits until
// A accepts connections.
func startProc(t *testing.T, s *server, verb string, args ...string) *proc {
	t.Helper()
	addr := freeAddr(t)
	cmd := childproc.Command(binary, append([]string{verb, "--addr", addr}, args...)...)
	cmd.Env = s.env()
	p := &proc{cmd: cmd, addr: addr, stderr: &syncBuffer{}}
	cmd.Stderr = p.stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.kill)
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		// The log line comes once it listens (and, for a memnode, has
		// registered); the dial proves the address is reachable.
		if strings.Contains(p.stderr.String(), verb+" serving") {
			if c, err := net.Dial("tcp", addr); err == nil {
				c.Close()
				return p
			}
		}
		if strings.Contains(p.stderr.String(), "address already in use") {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("%s did not come up:\n%s", verb, p.stderr)
	return nil
}

// startMemnode starts a memnode and waits until the control plane lists it
// online: the process listens before it registers, so a dial alone does not
// say it can be leased from yet.
func startMemnode(t *testing.T, s *server, args ...string) *proc {
	t.Helper()
	p := startProc(t, s, "memnode", args...)
	deadline := time.Now().Add(20 * time.Second)
	for {
		out, err := s.cli("memnodes")
		if err == nil && strings.Contains(out, p.addr) && strings.Contains(out, "online") {
			return p
		}
		if time.Now().After(deadline) {
			t.Fatalf("memnode at %s never registered: %v\n%s\n%s", p.addr, err, out, p.stderr)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func (p *proc) kill() {
	if p.cmd.Process != nil && p.cmd.ProcessState == nil {
		_ = p.cmd.Process.Kill()
		_ = p.cmd.Wait()
	}
}

// mc is a minimal memcached text-protocol client.
type mc struct {
	t  *testing.T
	c  net.Conn
	rd *bufio.Reader
}

func dialMC(t *testing.T, addr string) *mc {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return &mc{t: t, c: c, rd: bufio.NewReader(c)}
}

func (m *mc) line() string {
	m.t.Helper()
	_ = m.c.SetReadDeadline(time.Now().Add(10 * time.Second))
	l, err := m.rd.ReadString('\n')
	if err != nil {
		m.t.Fatalf("read: %v", err)
	}
	return strings.TrimRight(l, "\r\n")
}

func (m *mc) set(key string, val []byte) {
	m.t.Helper()
	fmt.Fprintf(m.c, "set %s 0 0 %d\r\n%s\r\n", key, len(val), val)
	if l := m.line(); l != "STORED" {
		m.t.Fatalf("set %s: %q", key, l)
	}
}

// get returns the value, or nil on a miss.
func (m *mc) get(key string) []byte {
	m.t.Helper()
	fmt.Fprintf(m.c, "get %s\r\n", key)
	l := m.line()
	if l == "END" {
		return nil
	}
	var k string
	var flags, n int
	if _, err := fmt.Sscanf(l, "VALUE %s %d %d", &k, &flags, &n); err != nil {
		m.t.Fatalf("get %s: %q", key, l)
	}
	buf := make([]byte, n+2)
	if _, err := ioReadFull(m.rd, buf); err != nil {
		m.t.Fatal(err)
	}
	if end := m.line(); end != "END" {
		m.t.Fatalf("get %s: trailer %q", key, end)
	}
	return buf[:n]
}

func ioReadFull(r *bufio.Reader, p []byte) (int, error) {
	n := 0
	for n < len(p) {
		k, err := r.Read(p[n:])
		n += k
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

func value(key string, n int) []byte {
	return bytes.Repeat([]byte(key+"."), n/(len(key)+1)+1)[:n]
}

// TestMemoryLeaseCLI drives GetMemory through the CLI: lease, list, renew,
// use the token against a real memnode, release, and the lease surviving a
// control-plane restart.
func TestMemoryLeaseCLI(t *testing.T) {
	skipShort(t)
	data := t.TempDir()
	env := []string{"RACKPOOL_ADMIN_PASSWORD=" + password}
	s := start(t, data, env)
	node := startMemnode(t, s, "--capacity", "64MiB", "--heartbeat", "1s")
	out, err := s.cli("memnodes")
	if err != nil || !strings.Contains(out, "memnode1") || !strings.Contains(out, node.addr) || !strings.Contains(out, "online") {
		t.Fatalf("memnodes: %v\n%s", err, out)
	}
	out, err = s.cli("lease", "--size", "1MiB", "--host", "host1", "--json")
	if err != nil {
		t.Fatalf("lease: %v\n%s", err, out)
	}
	var l api.MemoryLease
	if err := json.Unmarshal([]byte(out), &l); err != nil {
		t.Fatalf("lease --json: %v\n%s", err, out)
	}
	if l.Endpoint != node.addr || l.Token == "" || l.CapacityBytes != 1<<20 || l.RoundTripNs <= 0 {
		t.Fatalf("lease = %+v", l)
	}
	ctx := context.Background()
	c, err := memory.Dial(ctx, l.Endpoint, l.Token)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Write(ctx, 0, []byte("through the pool")); err != nil {
		t.Fatal(err)
	}
	c.Close()
	// Bad input changes nothing.
	for _, args := range [][]string{
		{"lease", "--size", "0"},
		{"lease", "--size", "lots"},
		{"lease", "--size", "1MiB", "--host", "no-such-host"},
		{"lease", "--size", "1MiB", "--ttl", "1h", "--rights", "rwx"},
		{"renew", "lease-0000"},
		{"release", "lease-0000"},
	} {
		if out, err := s.cli(args...); err == nil {
			t.Errorf("%v succeeded:\n%s", args, out)
		}
	}
	status, body := s.request("POST", "/redfish/v1/Oem/Rackpool/MemoryLeases", `{"CapacityBytes": "big"}`, true)
	if status != 400 || !strings.Contains(body, "CapacityBytes") {
		t.Errorf("wrong type: %d %s", status, body)
	}
	if status, _ := s.request("POST", "/redfish/v1/Oem/Rackpool/MemoryLeases", `{"CapacityBytes": 4096}`, false); status != 401 {
		t.Errorf("unauthenticated GetMemory: %d", status)
	}
	out, err = s.cli("leases")
	if err != nil || strings.Count(out, "lease-") != 1 {
		t.Fatalf("leases after bad input: %v\n%s", err, out)
	}

	// Restart the control plane: the lease is still there and its token
	// still works on the memnode (which kept running).
	s.kill()
	s = start(t, data, env)
	out, err = s.cli("leases")
	if err != nil || !strings.Contains(out, l.ID) {
		t.Fatalf("leases after restart: %v\n%s", err, out)
	}
	c, err = memory.Dial(ctx, l.Endpoint, l.Token)
	if err != nil {
		t.Fatalf("token after a control-plane restart: %v", err)
	}
	buf := make([]byte, 16)
	if err := c.Read(ctx, 0, buf); err != nil || string(buf) != "through the pool" {
		t.Fatalf("read %q, %v", buf, err)
	}
	c.Close()
	// The memnode heartbeats to the new control plane; renew and release.
	deadline := time.Now().Add(10 * time.Second)
	for {
		out, err = s.cli("renew", l.ID, "--ttl", "2m")
		if err == nil || time.Now().After(deadline) {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	if err != nil || !strings.Contains(out, "token: ") {
		t.Fatalf("renew: %v\n%s", err, out)
	}
	if out, err := s.cli("release", l.ID); err != nil {
		t.Fatalf("release: %v\n%s", err, out)
	}
	if _, err := memory.Dial(ctx, l.Endpoint, l.Token); err == nil {
		t.Error("a released lease's token still authenticates")
	}
	out, _ = s.cli("leases")
	if strings.Contains(out, l.ID) {
		t.Errorf("released lease still listed:\n%s", out)
	}
}

// TestCacheSpillsToPooledMemory runs serve, memnode and cache as
// processes: items evicted from a small local tier are served from pooled
// memory; killing the memnode turns them into misses, never wrong values,
// and the cache keeps serving.
func TestCacheSpillsToPooledMemory(t *testing.T) {
	skipShort(t)
	s := startDefault(t)
	node := startMemnode(t, s, "--capacity", "64MiB")
	cache := startProc(t, s, "cache", "--local-memory", "1MiB", "--remote-memory", "16MiB", "--control", s.url)
	m := dialMC(t, cache.addr)
	const n, size = 200, 16 << 10 // 3.2 MB of values: most must spill
	for i := 0; i < n; i++ {
		k := fmt.Sprintf("key%03d", i)
		m.set(k, value(k, size))
	}
	hits := 0
	for i := 0; i < n; i++ {
		k := fmt.Sprintf("key%03d", i)
		v := m.get(k)
		if v == nil {
			continue
		}
		if !bytes.Equal(v, value(k, size)) {
			t.Fatalf("%s: wrong value", k)
		}
		hits++
	}
	if hits != n {
		t.Fatalf("%d of %d items found with a remote tier large enough for all", hits, n)
	}
	out, err := s.cli("leases")
	if err != nil || !strings.Contains(out, "16MiB") {
		t.Fatalf("the cache's lease is not listed: %v\n%s", err, out)
	}

	node.kill()
	hits = 0
	for i := 0; i < n; i++ {
		k := fmt.Sprintf("key%03d", i)
		if v := m.get(k); v != nil {
			if !bytes.Equal(v, value(k, size)) {
				t.Fatalf("%s: wrong value after the memnode died", k)
			}
			hits++
		}
	}
	if hits == 0 || hits >= n {
		t.Fatalf("%d hits after the memnode died: want the local items only", hits)
	}
	// Still serving writes and reads.
	m.set("after", []byte("still here"))
	if v := m.get("after"); string(v) != "still here" {
		t.Fatalf("get after = %q", v)
	}
	fmt.Fprintf(m.c, "version\r\n")
	if l := m.line(); !strings.HasPrefix(l, "VERSION ") {
		t.Fatalf("version: %q", l)
	}
}

// TestCacheKeepsItsRegionAcrossControlPlaneRestart stops the control plane
// while a cache holds a lease and is due to renew it: the cache keeps its
// region and every item in it, renews once the control plane is back (on the
// same address, with the same state), and never leases anew.
func TestCacheKeepsItsRegionAcrossControlPlaneRestart(t *testing.T) {
	skipShort(t)
	data := t.TempDir()
	env := []string{"RACKPOOL_ADMIN_PASSWORD=" + password}
	s := start(t, data, env)
	addr := s.addr
	startMemnode(t, s, "--capacity", "64MiB", "--heartbeat", "1s")
	// Renewal is due 10 s in; the lease expires at 30 s.
	cache := startProc(t, s, "cache", "--local-memory", "1MiB", "--remote-memory", "16MiB", "--control", s.url,
		"--lease-ttl", "30s")
	m := dialMC(t, cache.addr)
	const n, size = 200, 16 << 10
	for i := range n {
		k := fmt.Sprintf("key%03d", i)
		m.set(k, value(k, size))
	}
	before, err := s.cli("leases")
	if err != nil || strings.Count(before, "lease-") != 1 {
		t.Fatalf("leases: %v\n%s", err, before)
	}

	s.kill()
	time.Sleep(12 * time.Second) // past the renewal time: renewals fail
	s = startAt(t, addr, data, env)
	deadline := time.Now().Add(15 * time.Second)
	for !strings.Contains(cache.stderr.String(), "lease renewed again") {
		if time.Now().After(deadline) {
			t.Fatalf("the cache did not renew after the restart:\n%s", cache.stderr)
		}
		time.Sleep(200 * time.Millisecond)
	}
	logs := cache.stderr.String()
	if !strings.Contains(logs, "lease renewal failed; retrying") || strings.Contains(logs, "leasing again") {
		t.Fatalf("cache log:\n%s", logs)
	}
	for i := range n {
		k := fmt.Sprintf("key%03d", i)
		if v := m.get(k); !bytes.Equal(v, value(k, size)) {
			t.Fatalf("%s lost across the control-plane restart (got %d bytes)", k, len(v))
		}
	}
	after, err := s.cli("leases")
	if err != nil || strings.Count(after, "lease-") != 1 {
		t.Fatalf("leases after restart: %v\n%s", err, after)
	}
	id := func(out string) string {
		for _, f := range strings.Fields(out) {
			if strings.HasPrefix(f, "lease-") {
				return f
			}
		}
		return ""
	}
	if id(before) != id(after) {
		t.Fatalf("the cache leased anew: %s, then %s", id(before), id(after))
	}
}
