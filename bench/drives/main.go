// Command drives benchmarks pooled drives (docs/benchmarks.md, "Pooled
// drives"): fio's nbd engine against nbdkit's file plugin and rackpool
// blocknode serving the same image file, side by side in one run, direct
// and through `rackpool drive connect`; then the failover time a client of
// drive connect sees when the owning blocknode is killed with SIGKILL (a
// dead node) and when it is stopped with SIGSTOP (a hung one). With -tls
// (the default) the same rows run over TLS beside them: nbdkit
// --tls=require, a second blocknode with --tls-certificates serving the
// same image as another drive, drive connect reaching that one over TLS,
// and nbdkit's nbd plugin reaching nbdkit over TLS.
//
//	go run ./bench/drives -bin build/rackpool -out build/bench-drives
//
// Every row is measured on the same machine, same file, same client (fio
// 3.33's nbd ioengine over loopback TCP, one connection per fio job). The
// report is a Markdown table (printed and written to OUT/drives.md), the
// raw numbers (OUT/drives.json) and a chart of the ratios (OUT/drives.svg).
package main

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"rackpool/api"
	"rackpool/bench/internal/harness"
	"rackpool/internal/chart"
	"rackpool/internal/childproc"
	"rackpool/internal/nbd"
)

const password = "bench-drives"

// row is one fio workload.
type row struct {
	Name  string // e.g. "4k randread qd16"
	RW    string // fio --rw
	BS    string
	Depth int
	Jobs  int // connections
}

func rows(quick bool) []row {
	base := []row{
		{"4 KiB rand read, qd1", "randread", "4k", 1, 1},
		{"4 KiB rand read, qd16", "randread", "4k", 16, 1},
		{"4 KiB rand write, qd1", "randwrite", "4k", 1, 1},
		{"4 KiB rand write, qd16", "randwrite", "4k", 16, 1},
		{"64 KiB seq read, qd16", "read", "64k", 16, 1},
		{"64 KiB seq write, qd16", "write", "64k", 16, 1},
		{"1 MiB seq read, qd4", "read", "1m", 4, 1},
		{"1 MiB seq write, qd4", "write", "1m", 4, 1},
	}
	if quick {
		return base[1:2]
	}
	out := base
	for _, r := range base {
		r.Jobs = 4
		r.Name += ", 4 conns"
		out = append(out, r)
	}
	return out
}

// result is one fio run.
type result struct {
	System string
	Row    string
	IOPS   float64
	MBps   float64
	LatUs  float64 // mean completion latency
	// Best and Worst are the highest and lowest IOPS of the interleaved
	// runs (the row's IOPS is their median).
	Best, Worst float64
}

type report struct {
	Date      string
	CPUs      int
	Runtime   string
	Reps      int // runs per row and system; the median is reported
	Size      int64
	Results   []result
	Failovers []float64 // milliseconds, kill to first completed I/O
	Stops     []float64 // milliseconds, SIGSTOP to first completed I/O
}

func main() {
	bin := flag.String("bin", "", "rackpool binary (default: build one)")
	out := flag.String("out", "build/bench-drives", "directory for drives.md, drives.json and drives.svg")
	dur := flag.Duration("runtime", 2*time.Second, "fio runtime per run")
	reps := flag.Int("reps", 3, "runs per row and system, interleaved; the run with the median IOPS is reported")
	size := flag.Int64("size", 1<<30, "drive image size in bytes")
	kills := flag.Int("kills", 20, "blocknode kills for the failover measurement")
	stops := flag.Int("stops", 20, "blocknode SIGSTOPs (hung, not dead) for the failover measurement")
	quick := flag.Bool("quick", false, "one row, short runs, 2 kills: a smoke test")
	connectProcs := flag.Int("connect-procs", -1, "drive connect --procs (-1: its default)")
	replot := flag.Bool("replot", false, "redraw drives.md and the charts from -out's drives.json, measuring nothing")
	only := flag.String("rows", "", "run only the rows whose name matches this regular expression")
	profile := flag.String("profile", "", "write CPU profiles of the blocknode and of drive connect to this directory (go tool pprof), instead of measuring failovers")
	lease := flag.Duration("drive-lease", 400*time.Millisecond, "serve --drive-lease: how long a blocknode serves without a heartbeat answered (the failover detection time); make test's smoke gives 2s, so that a loaded machine's late heartbeat does not move the drive under fio")
	withTLS := flag.Bool("tls", true, "also run every row over TLS (nbdkit --tls=require, blocknode --tls-certificates, drive connect to it, nbdkit's nbd plugin with TLS)")
	flag.Parse()
	match, err := regexp.Compile(*only)
	if err != nil {
		childproc.Fatalf("-rows: %v", err)
	}
	if *replot {
		var rep report
		js, err := os.ReadFile(filepath.Join(*out, "drives.json"))
		if err == nil {
			err = json.Unmarshal(js, &rep)
		}
		if err == nil {
			err = write(*out, rep)
		}
		if err != nil {
			childproc.Fatal(err)
		}
		return
	}
	if *quick {
		*dur, *size, *kills, *stops = 300*time.Millisecond, 64<<20, 2, 2
	}
	for _, tool := range []string{"fio", "nbdkit"} {
		if _, err := exec.LookPath(tool); err != nil {
			childproc.Fatalf("%s is not installed (.ci/run installs it)", tool)
		}
	}
	work := harness.WorkDir("rp-drives")
	defer childproc.RunAtExit()
	rp := harness.Binary(*bin, work)
	if err := os.MkdirAll(*out, 0o755); err != nil {
		childproc.Fatal(err)
	}
	b := &bench{work: work, bin: rp, size: *size, connectProcs: *connectProcs, tls: *withTLS, lease: *lease}
	if *profile != "" {
		if b.profile, err = filepath.Abs(*profile); err != nil {
			childproc.Fatal(err)
		}
		if err := os.MkdirAll(b.profile, 0o755); err != nil {
			childproc.Fatal(err)
		}
	}
	childproc.AtExit(b.stop)
	if err := b.setUp(); err != nil {
		childproc.Fatal(err)
	}
	if *quick {
		*reps = 1
	}
	rep := report{Date: time.Now().UTC().Format("2006-01-02"), CPUs: runtime.NumCPU(), Runtime: dur.String(), Reps: *reps, Size: *size}
	systems := []struct{ name, uri string }{
		{"nbdkit", b.nbdkitURI}, {"blocknode", b.blocknodeURI}, {"drive connect", b.connectURI},
		{"nbdkit proxy", b.proxyURI},
	}
	if b.tls {
		systems = append(systems, []struct{ name, uri string }{
			{"nbdkit TLS", b.nbdkitTLSURI}, {"blocknode TLS", b.blocknodeTLSURI}, {"drive connect TLS", b.connectTLSURI},
			{"nbdkit proxy TLS", b.proxyTLSURI},
		}...)
	}
	for _, r := range rows(*quick) {
		if !match.MatchString(r.Name) {
			continue
		}
		// The systems take turns, so that a disturbance of the machine
		// falls on all of them rather than on one.
		runs := make([][]result, len(systems))
		for range max(*reps, 1) {
			for i, sys := range systems {
				res, err := fio(sys.uri, r, *dur, *size)
				if err != nil {
					childproc.Fatalf("%s, %s: %v", sys.name, r.Name, err)
				}
				res.System, res.Row = sys.name, r.Name
				runs[i] = append(runs[i], res)
			}
		}
		for _, rs := range runs {
			slices.SortFunc(rs, func(a, b result) int { return cmp.Compare(a.IOPS, b.IOPS) })
			res := rs[len(rs)/2]
			res.Best, res.Worst = rs[len(rs)-1].IOPS, rs[0].IOPS
			rep.Results = append(rep.Results, res)
			fmt.Fprintf(os.Stderr, "%-28s %-17s %9.0f IOPS %8.1f MB/s %8.1f µs\n", r.Name, res.System, res.IOPS, res.MBps, res.LatUs)
		}
	}
	if b.profile != "" {
		// The profiles are written when the processes stop on SIGINT; the
		// failovers, which need both, are left out.
		b.interrupt("connect", "host1")
		fmt.Fprintf(os.Stderr, "profiles in %s; no failovers measured\n", b.profile)
		*kills, *stops = 0, 0
	}
	if *kills > 0 || *stops > 0 {
		if rep.Failovers, rep.Stops, err = b.failovers(*kills, *stops); err != nil {
			childproc.Fatal(err)
		}
	}
	if err := write(*out, rep); err != nil {
		childproc.Fatal(err)
	}
}

// write puts the report in dir: drives.md, drives.json, and the charts
// drives.svg (blocknode ÷ nbdkit) and drives-connect.svg (drive connect ÷
// nbdkit's proxy).
func write(dir string, rep report) error {
	md := markdown(rep)
	fmt.Print(md)
	if err := os.WriteFile(filepath.Join(dir, "drives.md"), []byte(md), 0o644); err != nil {
		return err
	}
	js, _ := json.MarshalIndent(rep, "", "  ")
	if err := os.WriteFile(filepath.Join(dir, "drives.json"), js, 0o644); err != nil {
		return err
	}
	for file, c := range map[string]struct{ sys, peer, title string }{
		"drives.svg":         {"blocknode", "nbdkit", "rackpool blocknode IOPS ÷ nbdkit 1.32 file plugin (same file, same fio client)"},
		"drives-connect.svg": {"drive connect", "nbdkit proxy", "rackpool drive connect IOPS ÷ nbdkit 1.32 nbd plugin in front of nbdkit (same two hops)"},
	} {
		svg, err := ratioChart(rep, c.sys, c.peer, c.title)
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dir, file), svg, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// bench holds the processes of one run.
type bench struct {
	work, bin string
	size      int64
	url, ca   string
	client    *api.Client
	dir       string
	procs     map[string]*exec.Cmd // by name: serve, nbdkit, host1, host2, connect
	logs      map[string]*harness.Output
	mu        sync.Mutex

	lease                               time.Duration // serve --drive-lease
	profile                             string        // directory for CPU profiles, or ""
	connectProcs                        int           // drive connect --procs, or -1 for its default
	nbdkitURI, blocknodeURI, connectURI string
	proxyURI                            string // nbdkit's nbd plugin in front of nbdkit, drive connect's peer
	sock                                string

	// TLS: the same systems, over TLS (see setUpTLS).
	tls                                                       bool
	nbdkitTLSURI, blocknodeTLSURI, connectTLSURI, proxyTLSURI string
}

const topology = `name: bench-drives
defaults: {sas_remap: 1ms, sas_drive_online: 1ms}
racks:
  - id: rack1
    hosts:
      - {id: "host{n}", count: 2, cores: 16, memory: 64GiB, ports: [{id: sas, fabric: sas1, port: "{n}", metres: 2}]}
      - {id: host3, cores: 16, memory: 64GiB, ports: [{id: sas, fabric: sas2, port: "1", metres: 2}]}
fabrics:
  - id: sas1
    kind: sas-circuit
    switches: [{id: sw, ports: 16, latency_ns: 100}]
    devices: [{id: ssd1, kind: ssd, model: bench, vendor: bench, capacity: %[1]d, switch: sw, port: "9", metres: 1}]
  - id: sas2
    kind: sas-circuit
    switches: [{id: sw2, ports: 16, latency_ns: 100}]
    devices: [{id: ssd2, kind: ssd, model: bench, vendor: bench, capacity: %[1]d, switch: sw2, port: "9", metres: 1}]
`

func freeAddr() string {
	addr, err := harness.FreeAddr()
	if err != nil {
		childproc.Fatal(err)
	}
	return addr
}

// start runs the binary with args and waits for marker in its log.
func (b *bench) start(name, marker string, env []string, bin string, args ...string) error {
	cmd := childproc.Command(bin, args...)
	cmd.Env = append(os.Environ(), env...)
	buf := &harness.Output{}
	cmd.Stdout, cmd.Stderr = buf, buf
	if err := cmd.Start(); err != nil {
		return err
	}
	b.mu.Lock()
	b.procs[name], b.logs[name] = cmd, buf
	b.mu.Unlock()
	deadline := time.Now().Add(30 * time.Second)
	for {
		s := buf.String()
		if strings.Contains(s, marker) {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s did not start:\n%s", name, s)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (b *bench) kill(name string) { b.end(name, syscall.SIGKILL) }

// interrupt stops the named processes with SIGINT and waits for them.
func (b *bench) interrupt(names ...string) {
	for _, name := range names {
		b.end(name, os.Interrupt)
	}
}

// end sends sig to the named process, if it runs, and waits for it.
func (b *bench) end(name string, sig os.Signal) {
	b.mu.Lock()
	cmd := b.procs[name]
	delete(b.procs, name)
	b.mu.Unlock()
	if cmd != nil && cmd.Process != nil {
		_ = cmd.Process.Signal(sig)
		_ = cmd.Wait()
	}
}

func (b *bench) stop() {
	for _, n := range []string{"connect", "proxy", "connect-tls", "proxy-tls", "host1", "host2", "host3", "nbdkit", "nbdkit-tls", "serve"} {
		b.kill(n)
	}
}

func (b *bench) env() []string {
	return []string{"RACKPOOL_URL=" + b.url, "RACKPOOL_PASSWORD=" + password, "RACKPOOL_CA_FILE=" + b.ca}
}

// setUp starts serve, a blocknode on host1, nbdkit on the same image and
// drive connect.
func (b *bench) setUp() error {
	b.procs, b.logs = map[string]*exec.Cmd{}, map[string]*harness.Output{}
	b.dir = filepath.Join(b.work, "drives")
	data := filepath.Join(b.work, "data")
	if err := os.MkdirAll(b.dir, 0o755); err != nil {
		return err
	}
	// The image, full of data, so reads are of real bytes and both servers
	// read the same page cache.
	img := filepath.Join(b.dir, "ssd1.img")
	f, err := os.Create(img)
	if err != nil {
		return err
	}
	chunk := make([]byte, 1<<20)
	rng := rand.New(rand.NewPCG(1, 2))
	for off := int64(0); off < b.size; off += int64(len(chunk)) {
		for i := 0; i < len(chunk); i += 8 {
			v := rng.Uint64()
			for j := range 8 {
				chunk[i+j] = byte(v >> (8 * j))
			}
		}
		if _, err := f.Write(chunk[:min(int64(len(chunk)), b.size-off)]); err != nil {
			return err
		}
	}
	if err := f.Close(); err != nil {
		return err
	}
	topo := filepath.Join(b.work, "rack.yaml")
	if err := os.WriteFile(topo, []byte(fmt.Sprintf(topology, b.size)), 0o644); err != nil {
		return err
	}
	addr := freeAddr()
	b.url, b.ca = "https://"+addr, filepath.Join(data, "tls", "ca.pem")
	if err := b.start("serve", "rackpool serving", []string{"RACKPOOL_ADMIN_PASSWORD=" + password}, b.bin,
		"serve", "--addr", addr, "--data", data, "--topology", topo, "--drive-lease", b.lease.String()); err != nil {
		return err
	}
	cfg, err := api.TLSConfig(b.ca)
	if err != nil {
		return err
	}
	b.client = api.New(b.url, "Administrator", password)
	b.client.HTTP = &http.Client{Transport: &http.Transport{TLSClientConfig: cfg}}
	if err := b.startNode("host1"); err != nil {
		return err
	}
	if _, err := b.waitOwner(""); err != nil {
		return err
	}
	g, err := b.client.ConnectDrive(context.Background(), "ssd1", api.DriveConnect{Rights: "rw", TTL: 24 * time.Hour, Holder: benchHolder})
	if err != nil {
		return err
	}
	b.blocknodeURI = "nbd://" + g.Endpoint + "/" + g.ExportName
	kaddr := freeAddr()
	host, port, _ := net.SplitHostPort(kaddr)
	// nbdkit 1.32's file plugin, the peer: same image, its default 16
	// threads, the same TCP loopback.
	if err := b.start("nbdkit", "", nil, "nbdkit", "--foreground", "-i", host, "-p", port, "file", "file="+img); err != nil {
		return err
	}
	if err := harness.WaitDial(kaddr, 20*time.Second, nil); err != nil {
		return err
	}
	b.nbdkitURI = "nbd://" + kaddr + "/"
	b.sock = filepath.Join(b.work, "c.sock")
	args := []string{"drive", "connect", "ssd1", "--listen", "unix:" + b.sock, "--holder", benchHolder}
	if b.profile != "" {
		args = append(args, "--cpuprofile", filepath.Join(b.profile, "connect.pprof"))
	}
	if b.connectProcs >= 0 {
		args = append(args, "--procs", strconv.Itoa(b.connectProcs))
	}
	if err := b.start("connect", "drive connected", b.env(), b.bin, args...); err != nil {
		return err
	}
	b.connectURI = "nbd+unix:///ssd1?socket=" + b.sock
	// drive connect's peer: nbdkit 1.32's nbd plugin on a unix socket,
	// forwarding over TCP to the nbdkit above — the same two hops.
	psock := filepath.Join(b.work, "p.sock")
	if err := b.start("proxy", "", nil, "nbdkit", "--foreground", "--unix", psock, "nbd", "uri="+b.nbdkitURI); err != nil {
		return err
	}
	if err := harness.WaitDial("unix:"+psock, 20*time.Second, nil); err != nil {
		return err
	}
	b.proxyURI = "nbd+unix:///?socket=" + psock
	if b.tls {
		return b.setUpTLS(data, img)
	}
	return nil
}

// benchHolder is the write reservation holder of the bench's clients:
// fio straight at the blocknode and through drive connect write the same
// drive, one after the other, as one writer (docs/storage.md, "One writer
// per drive").
const benchHolder = "bench"

// setUpTLS starts the TLS systems. ssd2, a drive on a switch of its own
// that only host3 reaches, is a symbolic link to ssd1's image, so every
// server reads the same file. Certificates come from the service's CA
// (rackpool nbd-certs). fio's nbd engine may not name a certificates
// directory in its URI (libnbd refuses local files there), so it
// negotiates TLS without verifying the server: the encryption is what is
// measured, verification happens once per connection. drive connect and
// nbdkit's nbd plugin verify theirs.
func (b *bench) setUpTLS(data, img string) error {
	if err := os.Symlink(img, filepath.Join(b.dir, "ssd2.img")); err != nil {
		return err
	}
	node, client := filepath.Join(b.work, "tls-node"), filepath.Join(b.work, "tls-client")
	for _, args := range [][]string{{"--out", node, "--server", "127.0.0.1,localhost"}, {"--out", client, "--client", "bench"}} {
		if out, err := childproc.Command(b.bin, append([]string{"nbd-certs", "--data", data}, args...)...).CombinedOutput(); err != nil {
			return fmt.Errorf("nbd-certs: %v\n%s", err, out)
		}
	}
	if err := b.start("host3", "blocknode serving", b.env(), b.bin, "blocknode", "--name", "host3", "--addr", freeAddr(),
		"--drive-dir", b.dir, "--tls-certificates", node); err != nil {
		return err
	}
	if err := b.waitServed("ssd2"); err != nil {
		return err
	}
	g, err := b.client.ConnectDrive(context.Background(), "ssd2", api.DriveConnect{Rights: "rw", TTL: 24 * time.Hour, Holder: benchHolder})
	if err != nil {
		return err
	}
	const noVerify = "?tls-verify-peer=false"
	b.blocknodeTLSURI = g.Endpoint + "/" + g.ExportName + noVerify
	kaddr := freeAddr()
	host, port, _ := net.SplitHostPort(kaddr)
	if err := b.start("nbdkit-tls", "", nil, "nbdkit", "--foreground", "-i", host, "-p", port, "--tls=require",
		"--tls-certificates="+node, "file", "file="+img); err != nil {
		return err
	}
	if err := harness.WaitDial(kaddr, 20*time.Second, nil); err != nil {
		return err
	}
	b.nbdkitTLSURI = "nbds://" + kaddr + "/" + noVerify
	sock := filepath.Join(b.work, "ct.sock")
	args := []string{"drive", "connect", "ssd2", "--listen", "unix:" + sock, "--holder", benchHolder}
	if b.connectProcs >= 0 {
		args = append(args, "--procs", strconv.Itoa(b.connectProcs))
	}
	if err := b.start("connect-tls", "drive connected", b.env(), b.bin, args...); err != nil {
		return err
	}
	b.connectTLSURI = "nbd+unix:///ssd2?socket=" + sock
	psock := filepath.Join(b.work, "pt.sock")
	if err := b.start("proxy-tls", "", nil, "nbdkit", "--foreground", "--unix", psock, "nbd", "uri=nbds://"+kaddr+"/",
		"tls-certificates="+client); err != nil {
		return err
	}
	if err := harness.WaitDial("unix:"+psock, 20*time.Second, nil); err != nil {
		return err
	}
	b.proxyTLSURI = "nbd+unix:///?socket=" + psock
	return nil
}

// waitServed waits until drive is in service.
func (b *bench) waitServed(drive string) error {
	deadline := time.Now().Add(30 * time.Second)
	for {
		d, err := b.client.Drive(context.Background(), drive)
		if err == nil && d.InService {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s not in service: %+v %v", drive, d, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (b *bench) startNode(host string) error {
	args := []string{"blocknode", "--name", host, "--addr", freeAddr(), "--drive-dir", b.dir}
	if b.profile != "" && host == "host1" {
		args = append(args, "--cpuprofile", filepath.Join(b.profile, "blocknode.pprof"))
	}
	return b.start(host, "blocknode serving", b.env(), b.bin, args...)
}

// waitOwner waits until ssd1 is in service on a node other than not.
func (b *bench) waitOwner(not string) (string, error) {
	deadline := time.Now().Add(30 * time.Second)
	for {
		d, err := b.client.Drive(context.Background(), "ssd1")
		if err == nil && d.InService && d.BlockNode != not {
			return d.BlockNode, nil
		}
		if time.Now().After(deadline) {
			return "", fmt.Errorf("ssd1 not in service off %q: %+v %v", not, d, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// fio runs one row against uri.
func fio(uri string, r row, dur time.Duration, size int64) (result, error) {
	args := []string{"--name=bench", "--ioengine=nbd", "--uri=" + uri, "--rw=" + r.RW, "--bs=" + r.BS,
		fmt.Sprintf("--iodepth=%d", r.Depth), fmt.Sprintf("--numjobs=%d", r.Jobs), "--group_reporting",
		fmt.Sprintf("--size=%d", size), "--time_based", fmt.Sprintf("--runtime=%dms", dur.Milliseconds()),
		"--randrepeat=0", "--norandommap", "--output-format=json"}
	out, err := childproc.Command("fio", args...).Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return result{}, fmt.Errorf("fio: %v\n%s%s", err, out, ee.Stderr)
		}
		return result{}, err
	}
	// fio may print notes before the JSON.
	if i := bytes.IndexByte(out, '{'); i > 0 {
		out = out[i:]
	}
	var doc struct {
		Jobs []struct {
			Read, Write struct {
				IOPS  float64 `json:"iops"`
				BW    float64 `json:"bw_bytes"`
				ClatN struct {
					Mean float64 `json:"mean"`
				} `json:"clat_ns"`
			}
		}
	}
	if err := json.Unmarshal(out, &doc); err != nil || len(doc.Jobs) == 0 {
		return result{}, fmt.Errorf("fio output: %v\n%s", err, out)
	}
	j := doc.Jobs[0]
	d := j.Read
	if strings.Contains(r.RW, "write") {
		d = j.Write
	}
	return result{IOPS: d.IOPS, MBps: d.BW / 1e6, LatUs: d.ClatN.Mean / 1e3}, nil
}

// failovers fails the owning blocknode while a client of drive connect
// reads continuously: kills times with SIGKILL (dead: the kernel closes
// its connections), then stops times with SIGSTOP (hung: its connections
// stay open and nothing is answered). It returns, for each, the time from
// the signal to the first completed read issued once the node was dead or
// stopped, in milliseconds. A second blocknode is started first; each
// failed one is killed and restarted before the next.
func (b *bench) failovers(kills, stops int) (killed, stopped []float64, err error) {
	if err := b.startNode("host2"); err != nil {
		return nil, nil, err
	}
	ctx := context.Background()
	c, err := nbd.Dial(ctx, "unix", b.sock, "ssd1")
	if err != nil {
		return nil, nil, err
	}
	defer c.Close()
	// The latest completed read: when it was issued and when it came back.
	var issued, last time.Time
	var lmu sync.Mutex
	stop := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		buf := make([]byte, 4096)
		rng := rand.New(rand.NewPCG(3, 4))
		for {
			select {
			case <-stop:
				done <- nil
				return
			default:
			}
			off := uint64(rng.Int64N(b.size/4096)) * 4096
			start := time.Now()
			if err := c.ReadAt(ctx, buf, off); err != nil {
				done <- err
				return
			}
			lmu.Lock()
			issued, last = start, time.Now()
			lmu.Unlock()
		}
	}()
	for i := range kills + stops {
		hang := i >= kills
		owner, err := b.waitOwner("")
		if err != nil {
			return nil, nil, err
		}
		time.Sleep(300 * time.Millisecond) // steady reads on the owner
		signalled := time.Now()
		if hang {
			err = b.pause(owner) // returns once the process is stopped
		} else {
			b.kill(owner) // returns once the process is gone
		}
		if err != nil {
			return nil, nil, err
		}
		failed := time.Now()
		var took time.Duration
		for {
			time.Sleep(2 * time.Millisecond)
			lmu.Lock()
			is, l := issued, last
			lmu.Unlock()
			if is.After(failed) {
				// Issued after the owner was gone: served by the next one.
				took = l.Sub(signalled)
				break
			}
			if time.Since(signalled) > 30*time.Second {
				return nil, nil, fmt.Errorf("failure %d of %s: no read completed for 30 s", i+1, owner)
			}
			select {
			case err := <-done:
				return nil, nil, fmt.Errorf("reader failed after failure %d: %v", i+1, err)
			default:
			}
		}
		ms := float64(took.Microseconds()) / 1000
		if hang {
			stopped = append(stopped, ms)
			fmt.Fprintf(os.Stderr, "stop %2d of %s: first read after %v\n", i+1-kills, owner, took.Round(time.Millisecond))
			b.kill(owner)
		} else {
			killed = append(killed, ms)
			fmt.Fprintf(os.Stderr, "kill %2d of %s: first read after %v\n", i+1, owner, took.Round(time.Millisecond))
		}
		if err := b.startNode(owner); err != nil {
			return nil, nil, err
		}
	}
	close(stop)
	if err := <-done; err != nil {
		return nil, nil, err
	}
	return killed, stopped, nil
}

// pause stops the named process with SIGSTOP and returns once the kernel
// reports it stopped.
func (b *bench) pause(name string) error {
	b.mu.Lock()
	cmd := b.procs[name]
	b.mu.Unlock()
	if cmd == nil || cmd.Process == nil {
		return fmt.Errorf("no process %s", name)
	}
	if err := cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		return err
	}
	stat := fmt.Sprintf("/proc/%d/stat", cmd.Process.Pid)
	for range 5000 {
		b, err := os.ReadFile(stat)
		if err != nil {
			return err
		}
		// pid (comm) state ...: comm may hold spaces and parentheses.
		if i := bytes.LastIndexByte(b, ')'); i >= 0 && i+2 < len(b) && b[i+2] == 'T' {
			return nil
		}
		time.Sleep(time.Millisecond)
	}
	return fmt.Errorf("%s did not stop", name)
}

func markdown(rep report) string {
	var s strings.Builder
	fmt.Fprintf(&s, "Pooled drives, %s, %d CPUs, fio 3.33 nbd engine over loopback, %s per run, median of %d interleaved runs, %d MiB image.\n\n",
		rep.Date, rep.CPUs, rep.Runtime, rep.Reps, rep.Size>>20)
	s.WriteString("| workload | nbdkit IOPS | blocknode IOPS | × nbdkit | drive connect IOPS | × nbdkit | nbdkit proxy IOPS | drive connect × proxy | nbdkit µs | blocknode µs | drive connect µs | nbdkit proxy µs |\n")
	s.WriteString("|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|\n")
	by := map[string]map[string]result{}
	var order []string
	for _, r := range rep.Results {
		if by[r.Row] == nil {
			by[r.Row] = map[string]result{}
			order = append(order, r.Row)
		}
		by[r.Row][r.System] = r
	}
	for _, name := range order {
		k, bn, dc, px := by[name]["nbdkit"], by[name]["blocknode"], by[name]["drive connect"], by[name]["nbdkit proxy"]
		fmt.Fprintf(&s, "| %s | %.0f | %.0f | %.2f | %.0f | %.2f | %.0f | %.2f | %.1f | %.1f | %.1f | %.1f |\n", name, k.IOPS, bn.IOPS, bn.IOPS/k.IOPS,
			dc.IOPS, dc.IOPS/k.IOPS, px.IOPS, dc.IOPS/px.IOPS, k.LatUs, bn.LatUs, dc.LatUs, px.LatUs)
	}
	if rep.Reps > 1 {
		bestTable(&s, by, order, "", rep.Reps)
	}
	tlsTable(&s, by, order)
	if rep.Reps > 1 {
		bestTable(&s, by, order, " TLS", rep.Reps)
	}
	if len(rep.Failovers) > 0 {
		f := slices.Sorted(slices.Values(rep.Failovers))
		fmt.Fprintf(&s, "\nFailover, kill -9 of the owning blocknode → first completed read through drive connect, %d kills: "+
			"median %.0f ms, max %.0f ms, min %.0f ms.\n", len(f), f[len(f)/2], f[len(f)-1], f[0])
	}
	if len(rep.Stops) > 0 {
		f := slices.Sorted(slices.Values(rep.Stops))
		fmt.Fprintf(&s, "\nFailover, SIGSTOP of the owning blocknode (hung, not dead) → first completed read through drive connect, %d stops: "+
			"median %.0f ms, max %.0f ms, min %.0f ms.\n", len(f), f[len(f)/2], f[len(f)-1], f[0])
	}
	return s.String()
}

// bestTable writes the ratios of the best runs (the measure on a
// shared machine) and the spread of each system's runs, worst to best, for
// the systems named with suffix ("" or " TLS").
func bestTable(s *strings.Builder, by map[string]map[string]result, order []string, suffix string, reps int) {
	if _, ok := by[order[0]]["nbdkit"+suffix]; !ok {
		return
	}
	fmt.Fprintf(s, "\nBest of the %d interleaved runs%s, and each system's spread (worst ÷ best IOPS):\n\n", reps, suffix)
	s.WriteString("| workload | blocknode × nbdkit, best | drive connect × proxy, best | spread nbdkit | blocknode | drive connect | nbdkit proxy |\n")
	s.WriteString("|---|--:|--:|--:|--:|--:|--:|\n")
	var bnOK, dcOK int
	for _, name := range order {
		r := by[name]
		k, bn, dc, px := r["nbdkit"+suffix], r["blocknode"+suffix], r["drive connect"+suffix], r["nbdkit proxy"+suffix]
		if bn.Best >= k.Best {
			bnOK++
		}
		if dc.Best >= px.Best {
			dcOK++
		}
		fmt.Fprintf(s, "| %s | %.2f | %.2f | %.2f | %.2f | %.2f | %.2f |\n", name, bn.Best/k.Best, dc.Best/px.Best,
			k.Worst/k.Best, bn.Worst/bn.Best, dc.Worst/dc.Best, px.Worst/px.Best)
	}
	fmt.Fprintf(s, "\nAt or above the peer, best runs%s: blocknode %d of %d rows, drive connect %d of %d.\n", suffix, bnOK, len(order), dcOK, len(order))
}

// tlsTable writes the TLS rows beside the plain ones: each system's IOPS
// over TLS and as a fraction of its own plain-text IOPS in the same run,
// and the rackpool systems against their nbdkit peers, both over TLS.
func tlsTable(s *strings.Builder, by map[string]map[string]result, order []string) {
	if len(order) == 0 {
		return
	}
	if _, ok := by[order[0]]["blocknode TLS"]; !ok {
		return
	}
	s.WriteString("\nOver TLS, the same rows in the same run (each system's TLS IOPS, then ÷ its plain-text IOPS above):\n\n")
	s.WriteString("| workload | nbdkit TLS IOPS | ÷ plain | blocknode TLS IOPS | ÷ plain | × nbdkit TLS | drive connect TLS IOPS | ÷ plain | nbdkit proxy TLS IOPS | ÷ plain | drive connect × proxy, TLS | nbdkit TLS µs | blocknode TLS µs | drive connect TLS µs | nbdkit proxy TLS µs |\n")
	s.WriteString("|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|\n")
	for _, name := range order {
		r := by[name]
		k, bn, dc, px := r["nbdkit TLS"], r["blocknode TLS"], r["drive connect TLS"], r["nbdkit proxy TLS"]
		fmt.Fprintf(s, "| %s | %.0f | %.2f | %.0f | %.2f | %.2f | %.0f | %.2f | %.0f | %.2f | %.2f | %.1f | %.1f | %.1f | %.1f |\n", name,
			k.IOPS, k.IOPS/r["nbdkit"].IOPS, bn.IOPS, bn.IOPS/r["blocknode"].IOPS, bn.IOPS/k.IOPS,
			dc.IOPS, dc.IOPS/r["drive connect"].IOPS, px.IOPS, px.IOPS/r["nbdkit proxy"].IOPS, dc.IOPS/px.IOPS,
			k.LatUs, bn.LatUs, dc.LatUs, px.LatUs)
	}
}

// ratioChart draws sys's IOPS over peer's, per row.
func ratioChart(rep report, sys, peer, title string) ([]byte, error) {
	by := map[string]map[string]float64{}
	var order []string
	for _, r := range rep.Results {
		if by[r.Row] == nil {
			by[r.Row] = map[string]float64{}
			order = append(order, r.Row)
		}
		by[r.Row][r.System] = r.IOPS
	}
	bar := chart.Bar{Title: title, XLabel: "workload", YLabel: "× " + peer, Width: 900, Height: 420}
	for _, name := range order {
		bar.Labels = append(bar.Labels, name)
		bar.Values = append(bar.Values, by[name][sys]/by[name][peer])
	}
	return bar.SVG()
}
