package e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"rackpool/api"
	"rackpool/internal/childproc"
	"rackpool/internal/nbd"
)

// Pooled drives end to end: `rackpool serve` on a small SAS rack, real
// blocknode processes sharing one drive directory, `rackpool drive
// connect`, and third-party NBD clients (nbdinfo, qemu-io, fio) started by
// the tests.

// needTools skips unless tools are installed (fails under RACKPOOL_E2E=1,
// where .ci/run has installed them).
func needTools(t *testing.T, tools ...string) {
	t.Helper()
	for _, tool := range tools {
		if _, err := exec.LookPath(tool); err != nil {
			if os.Getenv("RACKPOOL_E2E") == "1" {
				t.Fatalf("%s is not installed (.ci/run installs it)", tool)
			}
			t.Skipf("%s is not installed", tool)
		}
	}
}

// driveRack is a control plane on e2e/testdata/drives.yaml with blocknodes
// on the given hosts, and drive leases of lease.
type driveRack struct {
	s     *server
	c     *api.Client
	dir   string
	nodes map[string]*proc
}

func startDriveRack(t *testing.T, lease time.Duration, hosts ...string) *driveRack {
	t.Helper()
	top, err := filepath.Abs("testdata/drives.yaml")
	if err != nil {
		t.Fatal(err)
	}
	s := startDefault(t, "--topology", top, "--drive-lease", lease.String())
	r := &driveRack{s: s, c: s.client(), dir: t.TempDir(), nodes: map[string]*proc{}}
	for _, h := range hosts {
		r.nodes[h] = startProc(t, s, "blocknode", "--name", h, "--drive-dir", r.dir, "--control", s.url)
	}
	r.waitSpread(t, hosts...)
	return r
}

// waitSpread waits until the six drives are in service, shared evenly
// (within one) by the blocknodes on hosts, and returns who serves what.
func (r *driveRack) waitSpread(t *testing.T, hosts ...string) map[string][]string {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		ds, err := r.c.Drives(context.Background())
		by := map[string][]string{}
		in := 0
		for _, d := range ds {
			if d.InService {
				in++
				by[d.BlockNode] = append(by[d.BlockNode], d.ID)
			}
		}
		even := err == nil && in == 6
		for _, h := range hosts {
			if n := len(by[h]); n < 6/len(hosts) || n > (6+len(hosts)-1)/len(hosts) {
				even = false
			}
		}
		if even {
			return by
		}
		if time.Now().After(deadline) {
			t.Fatalf("drives not in service and spread over %v: %v %v", hosts, err, by)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestDrivesSpreadOverBlocknodes: a blocknode that registers after
// another has taken every drive gets its share (once the second got
// none); a drive in use through drive connect stays where it is when a
// third comes.
func TestDrivesSpreadOverBlocknodes(t *testing.T) {
	skipShort(t)
	r := startDriveRack(t, 400*time.Millisecond, "host1")
	r.nodes["host2"] = startProc(t, r.s, "blocknode", "--name", "host2", "--drive-dir", r.dir, "--control", r.s.url)
	r.waitSpread(t, "host1", "host2")
	before := r.owner(t, "ssd1")
	r.connect(t, "ssd1")
	r.nodes["host3"] = startProc(t, r.s, "blocknode", "--name", "host3", "--drive-dir", r.dir, "--control", r.s.url)
	by := r.waitSpread(t, "host1", "host2", "host3")
	if after := r.owner(t, "ssd1"); after.BlockNode != before.BlockNode || after.Epoch != before.Epoch {
		t.Fatalf("ssd1, in use, moved from %s (epoch %d) to %s (epoch %d); drives %v", before.BlockNode, before.Epoch,
			after.BlockNode, after.Epoch, by)
	}
}

// waitInService waits until n drives are in service.
func (r *driveRack) waitInService(t *testing.T, n int) []api.Drive {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		ds, err := r.c.Drives(context.Background())
		in := 0
		for _, d := range ds {
			if d.InService {
				in++
			}
		}
		if err == nil && in == n {
			return ds
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d drives in service: %v %+v", in, n, err, ds)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (r *driveRack) owner(t *testing.T, drive string) api.Drive {
	t.Helper()
	d, err := r.c.Drive(context.Background(), drive)
	if err != nil {
		t.Fatal(err)
	}
	return *d
}

// connect runs `rackpool drive connect DRIVE --listen unix:SOCK` and waits
// for the socket.
func (r *driveRack) connect(t *testing.T, drive string) (sock string, p *proc) {
	t.Helper()
	sock = filepath.Join(shortDir(t), "d.sock")
	return sock, startConnect(t, r.s, drive, "--listen", "unix:"+sock)
}

// shortDir is a temporary directory with a path short enough for a unix
// socket.
func shortDir(t *testing.T) string {
	d, err := os.MkdirTemp("", "rp")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	return d
}

func run(t *testing.T, name string, args ...string) string {
	t.Helper()
	out, err := childproc.Command(name, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}

// TestDriveThirdPartyClients: nbdinfo, qemu-io and nbdcopy through `drive
// connect`, and straight at a blocknode with a token; forged and other
// drives' tokens are refused.
func TestDriveThirdPartyClients(t *testing.T) {
	skipShort(t)
	needTools(t, "nbdinfo", "qemu-io", "nbdcopy")
	// No failover here: leases long enough that a loaded machine's late
	// heartbeat moves no drive between the listing and the opening.
	r := startDriveRack(t, time.Minute, "host1", "host2")
	bad := childproc.Command(binary, "drive", "connect", "ssd1", "--listen", "unix:"+filepath.Join(shortDir(t), "x.sock"),
		"--url", r.s.url, "--procs", "-1")
	bad.Env = r.s.env()
	if out, err := bad.CombinedOutput(); err == nil || !strings.Contains(string(out), "--procs -1: want 0 or more") {
		t.Fatalf("drive connect --procs -1: %v\n%s", err, out)
	}
	sock, _ := r.connect(t, "ssd1")
	uri := "nbd+unix:///ssd1?socket=" + sock
	info := run(t, "nbdinfo", "--json", uri)
	for _, want := range []string{`"export-size": 67108864`, `"can_multi_conn": true`, `"can_flush": true`, `"can_fua": true`,
		`"can_trim": true`, `"can_zero": true`, `"is_read_only": false`, `"base:allocation"`} {
		if !strings.Contains(info, want) {
			t.Errorf("nbdinfo lacks %s:\n%s", want, info)
		}
	}
	out := run(t, "qemu-io", "-f", "raw", uri, "-c", "write -P 0xab 0 1M", "-c", "read -P 0xab 0 1M")
	if strings.Contains(out, "mismatch") || !strings.Contains(out, "read 1048576/1048576") {
		t.Fatalf("qemu-io pattern check:\n%s", out)
	}
	if out, err := childproc.Command("qemu-io", "-f", "raw", uri, "-c", "read -P 0xcd 0 1M").CombinedOutput(); err == nil && !strings.Contains(string(out), "mismatch") {
		t.Fatalf("qemu-io found 0xcd where 0xab was written:\n%s", out)
	}
	// nbdcopy a random image in and out, byte compared.
	dir := t.TempDir()
	src, back := filepath.Join(dir, "src.img"), filepath.Join(dir, "back.img")
	data := make([]byte, 64<<20)
	for i := range data {
		data[i] = byte(i*7 + i>>12)
	}
	if err := os.WriteFile(src, data, 0o600); err != nil {
		t.Fatal(err)
	}
	run(t, "nbdcopy", src, uri)
	run(t, "nbdcopy", uri, back)
	got, err := os.ReadFile(back)
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("nbdcopy round trip differs (%v)", err)
	}
	// Straight at the owning blocknode: the export list names drives, a
	// token opens one, anything else is refused.
	g, err := r.c.ConnectDrive(context.Background(), "ssd2", api.DriveConnect{Rights: "r", TTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	list := run(t, "nbdinfo", "--list", "nbd://"+g.Endpoint)
	if !strings.Contains(list, "ssd2") {
		t.Errorf("nbdinfo --list at %s:\n%s", g.Endpoint, list)
	}
	ro := run(t, "nbdinfo", "--json", "nbd://"+g.Endpoint+"/"+g.ExportName)
	if !strings.Contains(ro, `"is_read_only": true`) {
		t.Errorf("a read-only token's export is writable:\n%s", ro)
	}
	other, err := r.c.ConnectDrive(context.Background(), "ssd3", api.DriveConnect{Rights: "rw", TTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	_, otherTok, _ := strings.Cut(other.ExportName, "@")
	forged := []byte(g.Token)
	forged[len(forged)/2] ^= 1
	for name, export := range map[string]string{
		"other drive's token": "ssd2@" + otherTok,
		"forged token":        "ssd2@" + string(forged),
		"unknown drive":       "ssd9@" + g.Token,
	} {
		out, err := childproc.Command("nbdinfo", "nbd://"+g.Endpoint+"/"+export).CombinedOutput()
		if err == nil {
			t.Errorf("%s: nbdinfo opened the export:\n%s", name, out)
		}
	}
	// The bare name shows size and flags (nbdinfo --list needs it) but
	// reads nothing.
	bare := run(t, "nbdinfo", "--json", "nbd://"+g.Endpoint+"/ssd2")
	if !strings.Contains(bare, `"is_read_only": true`) || !strings.Contains(bare, `"export-size": 67108864`) {
		t.Errorf("bare export name:\n%s", bare)
	}
	if out, err := childproc.Command("qemu-io", "-f", "raw", "-r", "nbd://"+g.Endpoint+"/ssd2", "-c", "read 0 4k").CombinedOutput(); err == nil &&
		!strings.Contains(string(out), "Operation not permitted") {
		t.Errorf("read without a token:\n%s", out)
	}
}

// TestDriveFailoverUnderFio: fio writes through `drive connect` with
// crc32c verification while the owning blocknode is killed with SIGKILL;
// the drive moves to the survivor, fio finishes, and every block verifies.
func TestDriveFailoverUnderFio(t *testing.T) {
	skipShort(t)
	needTools(t, "fio")
	r := startDriveRack(t, 400*time.Millisecond, "host1", "host2")
	before := r.owner(t, "ssd1")
	sock, conn := r.connect(t, "ssd1")
	fio := childproc.Command("fio", "--name=failover", "--ioengine=nbd", "--uri=nbd+unix:///ssd1?socket="+sock,
		"--rw=randwrite", "--bs=4k", "--iodepth=16", "--size=24M", "--rate_iops=3000", "--verify=crc32c", "--do_verify=1",
		"--verify_fatal=1", "--verify_state_save=0", "--end_fsync=1", "--output-format=terse")
	var out bytes.Buffer
	fio.Stdout, fio.Stderr = &out, &out
	if err := fio.Start(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(700 * time.Millisecond)
	killed := time.Now()
	r.nodes[before.BlockNode].kill()
	done := make(chan error, 1)
	go func() { done <- fio.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("fio: %v\n%s\ndrive connect:\n%s", err, out.String(), conn.stderr)
		}
	case <-time.After(60 * time.Second):
		_ = fio.Process.Kill()
		t.Fatalf("fio did not finish:\n%s\ndrive connect:\n%s", out.String(), conn.stderr)
	}
	after := r.owner(t, "ssd1")
	if after.BlockNode == before.BlockNode || after.Epoch <= before.Epoch || !after.InService {
		t.Fatalf("after killing %s ssd1 is %+v", before.BlockNode, after)
	}
	logs := conn.stderr.String()
	if !strings.Contains(logs, "path to drive restored") {
		t.Fatalf("drive connect never failed over:\n%s", logs)
	}
	t.Logf("killed %s at %s; ssd1 now on %s at epoch %d; drive connect:\n%s", before.BlockNode, killed.Format("15:04:05.000"),
		after.BlockNode, after.Epoch, lastLines(logs, 4))
	// Every drive of the dead node moved: all six in service on the survivor.
	for _, d := range r.waitInService(t, 6) {
		if d.BlockNode == before.BlockNode {
			t.Errorf("%s is still on the dead %s", d.ID, before.BlockNode)
		}
	}
}

func lastLines(s string, n int) string {
	ls := strings.Split(strings.TrimSpace(s), "\n")
	return strings.Join(ls[max(0, len(ls)-n):], "\n")
}

// TestDriveFencing: a blocknode paused with SIGSTOP while it owns a drive
// is failed over; a write queued to it while it was paused is refused when
// it resumes, and the new owner's data is intact.
func TestDriveFencing(t *testing.T) {
	skipShort(t)
	r := startDriveRack(t, 400*time.Millisecond, "host1", "host2")
	ctx := context.Background()
	g1, err := r.c.ConnectDrive(ctx, "ssd1", api.DriveConnect{Rights: "rw", TTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	old, err := nbd.Dial(ctx, "tcp", g1.Endpoint, g1.ExportName)
	if err != nil {
		t.Fatal(err)
	}
	defer old.Close()
	block := func(b byte) []byte { return bytes.Repeat([]byte{b}, 64<<10) }
	if err := old.WriteAt(ctx, block(0x11), 0, true); err != nil {
		t.Fatal(err)
	}
	victim := r.nodes[g1.BlockNode]
	if err := victim.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = victim.cmd.Process.Signal(syscall.SIGCONT) }()
	// Queue the write only once every thread has stopped: a thread still
	// running could serve it at once (it did, once, on a loaded machine).
	waitStopped(t, victim.cmd.Process.Pid)
	// Queue a write to the paused node: it sits in the socket until the
	// node runs again.
	stale := make(chan error, 1)
	go func() { stale <- old.WriteAt(context.Background(), block(0xee), 0, true) }()
	// The control plane fails the drive over once the lease lapses.
	var g2 *api.DriveGrant
	deadline := time.Now().Add(10 * time.Second)
	for {
		g2, err = r.c.ConnectDrive(ctx, "ssd1", api.DriveConnect{Rights: "rw", TTL: time.Minute})
		if err == nil && g2.BlockNode != g1.BlockNode {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("ssd1 was not failed over from the paused %s: %+v %v", g1.BlockNode, g2, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if g2.Epoch <= g1.Epoch {
		t.Fatalf("epoch did not advance: %d -> %d", g1.Epoch, g2.Epoch)
	}
	cur, err := nbd.Dial(ctx, "tcp", g2.Endpoint, g2.ExportName)
	if err != nil {
		t.Fatal(err)
	}
	defer cur.Close()
	if err := cur.WriteAt(ctx, block(0x22), 0, true); err != nil {
		t.Fatal(err)
	}
	if err := victim.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-stale:
		if !errors.Is(err, nbd.ErrPermission) {
			t.Fatalf("the paused node's queued write answered %v, want EPERM", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the resumed node never answered the queued write")
	}
	if err := old.WriteAt(ctx, block(0xee), 0, true); !errors.Is(err, nbd.ErrPermission) {
		t.Fatalf("a new write to the old owner answered %v, want EPERM", err)
	}
	// The old token does not open the drive anywhere any more.
	if c, err := nbd.Dial(ctx, "tcp", g1.Endpoint, g1.ExportName); err == nil {
		c.Close()
		t.Fatal("the old owner opened the drive with the old token after the failover")
	}
	got := make([]byte, 64<<10)
	if err := cur.ReadAt(ctx, got, 0); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, block(0x22)) {
		t.Fatalf("the new owner's data was overwritten: first bytes %x", got[:8])
	}
	img, err := os.ReadFile(filepath.Join(r.dir, "ssd1.img"))
	if err != nil || !bytes.Equal(img[:64<<10], block(0x22)) {
		t.Fatalf("drive image holds %x... (%v)", img[:8], err)
	}
}

// TestElasticLive: three blocknodes under `serve --elastic on` with a
// compressed day: idle, one blocknode is parked and its host becomes
// composable; then fio drives load through drive connect, a parked node
// comes back and takes drives; fio verifies every block it wrote across
// the handovers.
func TestElasticLive(t *testing.T) {
	skipShort(t)
	needTools(t, "fio")
	top, err := filepath.Abs("testdata/drives.yaml")
	if err != nil {
		t.Fatal(err)
	}
	s := startDefault(t, "--topology", top, "--drive-lease", "400ms", "--elastic", "on", "--elastic-node-ops", "300",
		"--elastic-hold", "2s", "--elastic-window", "500ms")
	r := &driveRack{s: s, c: s.client(), dir: t.TempDir(), nodes: map[string]*proc{}}
	for _, h := range []string{"host1", "host2", "host3"} {
		r.nodes[h] = startProc(t, s, "blocknode", "--name", h, "--drive-dir", r.dir, "--control", s.url)
	}
	ctx := context.Background()
	r.waitInService(t, 6)
	parked := func() []string {
		ns, err := r.c.BlockNodes(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, n := range ns {
			if n.Parked {
				if len(n.Links.Drives) != 0 {
					t.Errorf("parked %s still serves %d drives", n.ID, len(n.Links.Drives))
				}
				out = append(out, n.ID)
			}
		}
		return out
	}
	// Idle: the policy parks blocknodes down to where the (zero) load
	// fits, one decision per Hold, and the parked hosts are composable.
	deadline := time.Now().Add(30 * time.Second)
	for len(parked()) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("no blocknode parked while idle")
		}
		time.Sleep(100 * time.Millisecond)
	}
	p := parked()[0]
	if out, err := s.cli("compose", "--host", p); err != nil {
		t.Fatalf("compose on parked %s: %v\n%s", p, err, out)
	} else if _, err := s.cli("decompose", strings.Fields(out)[0]); err != nil {
		t.Fatalf("decompose: %v (%s)", err, out)
	}
	r.waitInService(t, 6)
	// Load: fio on ssd1 through drive connect, verified, at ~2,000 IOPS,
	// far over 70% of the active nodes' 300 ops/s each.
	sock, conn := r.connect(t, "ssd1")
	fio := childproc.Command("fio", "--name=elastic", "--ioengine=nbd", "--uri=nbd+unix:///ssd1?socket="+sock,
		"--rw=randwrite", "--bs=4k", "--iodepth=8", "--size=32M", "--rate_iops=2000", "--verify=crc32c", "--do_verify=1",
		"--verify_fatal=1", "--verify_state_save=0", "--output-format=terse")
	var out bytes.Buffer
	fio.Stdout, fio.Stderr = &out, &out
	if err := fio.Run(); err != nil {
		t.Fatalf("fio across elastic moves: %v\n%s\ndrive connect:\n%s", err, out.String(), conn.stderr)
	}
	entries := r.s.cli
	audit, err := entries("audit", "--format", "jsonl")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(audit, "ElasticDisaggregation") || !strings.Contains(audit, "park blocknode") {
		t.Errorf("no elastic decision in the audit log:\n%s", lastLines(audit, 5))
	}
	if !strings.Contains(audit, "bring blocknode") {
		t.Errorf("no blocknode brought back under load; audit:\n%s", lastLines(audit, 8))
	}
	r.waitInService(t, 6)
}

// waitStopped waits until every thread of process pid is stopped (state T
// in /proc/pid/task/*/stat).
func waitStopped(t *testing.T, pid int) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(time.Millisecond) {
		tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/stat", pid))
		stopped := len(tasks) > 0
		for _, f := range tasks {
			b, err := os.ReadFile(f)
			// The state follows the command name in parentheses.
			if i := bytes.LastIndexByte(b, ')'); err != nil || i < 0 || i+2 >= len(b) || b[i+2] != 'T' {
				stopped = false
				break
			}
		}
		if stopped {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("process %d did not stop", pid)
		}
	}
}
